"""Input checks shared by the manifolds: types, shapes and finiteness.

Errors follow diffprivlib's convention: ``TypeError`` for a wrong type,
``ValueError`` naming the problem (and the first offending row) otherwise.
"""

from __future__ import annotations

import numbers

import numpy as np

__all__ = ["as_points", "check_positive_int", "first_bad_row"]


def first_bad_row(bad) -> str:
    """Describe where a boolean mask over the leading (row) axes is true.

    Returns e.g. ``"3 of 10 rows, first at row 4"`` or ``"the point"`` for an
    unbatched input.
    """
    bad = np.asarray(bad)
    if bad.ndim == 0:
        return "the point"
    idx = np.argwhere(bad)
    first = tuple(int(i) for i in idx[0])
    where = first[0] if len(first) == 1 else first
    return f"{len(idx)} of {bad.size} rows, first at row {where}"


def as_points(x, point_shape: tuple[int, ...], name: str = "points") -> np.ndarray:
    """Convert to a float64 array of points with trailing shape ``point_shape``.

    Raises
    ------
    TypeError
        If ``x`` is not numeric (strings, objects, complex numbers).
    ValueError
        If the trailing shape is wrong or an entry is NaN or infinite.
    """
    try:
        arr = np.asarray(x)
    except Exception as err:  # ragged lists and the like
        raise TypeError(f"{name} must be an array of real numbers: {err}") from None
    if arr.dtype == bool or not (
        np.issubdtype(arr.dtype, np.integer) or np.issubdtype(arr.dtype, np.floating)
    ):
        raise TypeError(f"{name} must be an array of real numbers, got dtype {arr.dtype}")
    arr = arr.astype(np.float64, copy=True)
    k = len(point_shape)
    if arr.ndim < k or arr.shape[arr.ndim - k :] != tuple(point_shape):
        raise ValueError(
            f"{name} must have trailing shape {tuple(point_shape)} (one point per row), "
            f"got shape {arr.shape}"
        )
    finite = np.isfinite(arr).all(axis=tuple(range(arr.ndim - k, arr.ndim)))
    if not np.all(finite):
        raise ValueError(f"{name} contain NaN or infinite values: {first_bad_row(~finite)}")
    return arr


def check_positive_int(value, name: str, minimum: int = 1) -> int:
    """Return ``value`` as int if it is an integer ``>= minimum``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer, got {type(value).__name__}")
    if value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value}")
    return int(value)


def check_positive_real(value, name: str) -> float:
    """Return ``value`` as float if it is a finite real number ``> 0``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__}")
    value = float(value)
    if not np.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a finite number > 0, got {value}")
    return value
