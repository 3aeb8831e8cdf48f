"""Input checks shared by every layer: types, shapes, finiteness, environment variables.

Layer 0, beside ``rng.py``: it imports nothing of the package, so a check is one
import away from any module (the manifolds, the passes, the samplers, the CLI).

Errors follow diffprivlib's convention: ``TypeError`` for a wrong type,
``ValueError`` naming the problem (and the first offending row) otherwise.
"""

from __future__ import annotations

import numbers
import sys

import numpy as np

__all__ = [
    "as_points",
    "check_bool",
    "check_nonnegative_real",
    "check_positive_int",
    "check_positive_real",
    "check_real_data",
    "check_sigma",
    "first_bad_row",
    "read_env",
]


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
        If ``x`` is not real numbers (:func:`check_real_data`).
    ValueError
        If the trailing shape is wrong, an entry is NaN or infinite, or ``x`` is a
        masked array with masked entries.
    """
    arr = np.asarray(check_real_data(x, name))
    arr = arr.astype(np.float64, copy=True)
    k = len(point_shape)
    if arr.ndim < k or arr.shape[arr.ndim - k :] != tuple(point_shape):
        raise ValueError(
            f"{name} must have trailing shape {tuple(point_shape)} (one point per row), "
            f"got shape {arr.shape}"
        )
    if not np.isfinite(arr).all():  # the mask per point only to name the rows: a
        # reduction over a short trailing axis costs several times the whole check
        finite = np.isfinite(arr).all(axis=tuple(range(arr.ndim - k, arr.ndim)))
        raise ValueError(f"{name} contain NaN or infinite values: {first_bad_row(~finite)}")
    return arr


def check_real_data(x, name: str = "data"):
    """Return ``x`` if it holds real numbers: the one check every input passes.

    Accepted: integer and floating-point dtypes (a ``numpy.dtype``, NumPy arrays, Dask
    arrays, anything with a ``dtype``; other inputs are converted with
    ``numpy.asarray`` to decide).
    Refused: bools, complex numbers (their imaginary part would be dropped),
    ``timedelta64``/``datetime64`` (integers underneath, not coordinates), strings and
    objects; a ``numpy.ma.MaskedArray`` with masked entries, whose mask every
    conversion to a plain array ignores; and any Dask masked array (its chunks'
    ``_meta`` is a masked array: its mask cannot be counted without reading the data).

    Parameters
    ----------
    x : array_like
    name : str
        What to call ``x`` in the error (a file name, ``"data"``).

    Returns
    -------
    x
        Unchanged.

    Raises
    ------
    TypeError
        A dtype other than integer or floating point.
    ValueError
        A masked array with masked entries, or a Dask masked array.

    Examples
    --------
    >>> check_real_data(np.array([1, 2], dtype="timedelta64[s]"))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    TypeError: data must hold real numbers (integer or floating point), got dtype timedelta64[s]...
    """
    if isinstance(x, np.ma.MaskedArray) and np.ma.is_masked(x):
        raise ValueError(
            f"{name} is a masked array with {int(np.ma.count_masked(x))} masked entries: "
            "the mask would be ignored. Drop the masked records (x[~x.mask.any(axis=-1)] "
            "for rows) or fill them, and pass a plain array"
        )
    # a Dask array's _meta is its metadata, not its values; asked only of a Dask array
    # (sys.modules: Dask is never imported here), so nothing else is probed
    da = sys.modules.get("dask.array")
    if da is not None and isinstance(x, da.Array) and isinstance(x._meta, np.ma.MaskedArray):
        raise ValueError(
            f"{name} is a Dask masked array: its mask would be ignored, and counting its "
            "masked entries would read the data. Drop the masked records (then "
            "compute_chunk_sizes(), so that n is known) or fill them (dask.array.ma.filled), "
            "and pass a plain Dask array"
        )
    dtype = x if isinstance(x, np.dtype) else getattr(x, "dtype", None)
    if not isinstance(dtype, np.dtype):
        try:
            dtype = np.asarray(x).dtype
        except Exception as err:  # ragged lists and the like
            raise TypeError(f"{name} must be an array of real numbers: {err}") from None
    if dtype.kind not in "iuf":
        raise TypeError(
            f"{name} must hold real numbers (integer or floating point), got dtype {dtype}"
            " (bools, complex numbers, dates, durations and strings are not coordinates)"
        )
    return x


def read_env(name: str, kind: str, default=None, *, choices: tuple = (), what: str = ""):
    """The environment variable ``name``, validated; ``default`` when unset or empty.

    Every environment variable the package reads goes through here, so a bad value is
    an error that names the variable instead of a wrong setting taken silently.

    Parameters
    ----------
    name : str
        The variable.
    kind : {"positive real", "choice", "path"}
        ``"positive real"``: a finite number > 0 (``nan``, ``inf``, ``abc`` are
        refused), returned as float; ``"choice"``: one of ``choices``
        (case-insensitive), returned in lower case; ``"path"``: an absolute path
        after ``~`` expansion (a relative one would change meaning with the working
        folder), returned as str.
    default : optional
        Returned when the variable is unset or empty.
    choices : tuple of str
        The accepted values for ``"choice"``.
    what : str
        What the variable sets, for the error (``"the NUTS backend"``).

    Raises
    ------
    ValueError
        Naming the variable, its value and what is accepted.

    Examples
    --------
    >>> import os
    >>> os.environ["PMD_DOCTEST"] = "nan"
    >>> read_env("PMD_DOCTEST", "positive real", 600.0)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: environment variable PMD_DOCTEST='nan' must be a finite number > 0...
    >>> del os.environ["PMD_DOCTEST"]
    >>> read_env("PMD_DOCTEST", "positive real", 600.0)
    600.0
    """
    import os

    raw = os.environ.get(name)
    if raw is None or not raw.strip():
        return default
    text = raw.strip()
    var = f"environment variable {name}={raw!r}" + (f" ({what})" if what else "")
    if kind == "positive real":
        try:
            value = float(text)
        except ValueError:
            value = float("nan")
        if not np.isfinite(value) or value <= 0:
            raise ValueError(
                f"{var} must be a finite number > 0 (seconds); unset it for the default"
            )
        return value
    if kind == "choice":
        if text.lower() not in choices:
            raise ValueError(f"{var} must be one of {', '.join(choices)}; unset it for the default")
        return text.lower()
    if kind == "path":
        path = os.path.expanduser(text)
        if "\0" in path or not os.path.isabs(path):
            raise ValueError(f"{var} must be an absolute path; unset it for the default")
        return path
    raise ValueError(f"unknown kind {kind!r} for environment variable {name}")


def check_positive_int(value, name: str, minimum: int = 1) -> int:
    """Return ``value`` as int if it is an integer ``>= minimum``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer, got {type(value).__name__}")
    if value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value}")
    return int(value)


def _real(value, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__}")
    try:
        return float(value)
    except OverflowError:  # an int or Fraction past 1.8e308 (10**400)
        raise ValueError(
            f"{name} = {value} is too large for floating point (above 1.8e308)"
        ) from None


def check_positive_real(value, name: str) -> float:
    """Return ``value`` as float if it is a finite real number ``> 0``."""
    value = _real(value, name)
    if not np.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
    return value


#: The largest tolerance a validator takes (exclusive): a relative error, not a licence.
MAX_TOL = 0.1


def check_tol(tol, name: str = "tol") -> float:
    """Return a validator's tolerance if it is a finite real number in ``(0, 0.1)``.

    A NaN tolerance makes every ``gap > tol`` comparison false, so a validator would
    accept anything (issue 43: ``Rotations().validate(1.5 * I, tol=nan)``); a tolerance
    of 1 or more accepts the zero vector as a point of the unit sphere and the zero
    matrix as a rotation, whose projections are NaN.
    """
    tol = _real(tol, name)
    if not 0 < tol < MAX_TOL:
        raise ValueError(
            f"{name} must be a finite number in (0, {MAX_TOL:g}) (a relative error), got {tol!r}"
        )
    return tol


def check_nonnegative_real(value, name: str) -> float:
    """Return ``value`` as float if it is a finite real number ``>= 0`` (no bools)."""
    value = _real(value, name)
    if not np.isfinite(value) or value < 0:
        raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
    return value


def check_bool(value, name: str) -> bool:
    """Return ``value`` if it is a real bool (``True``/``False``/``numpy.bool_``).

    Strings such as ``"no"`` are truthy: coercing them would silently switch an
    option on, so they are refused.
    """
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be True or False, got {value!r}")
    return bool(value)


def check_sigma(sigma, what: str = "sigma") -> float:
    """Return ``sigma`` if it is a positive, finite, *normal* float.

    A sigma that overflowed to ``inf`` (epsilon too small) or underflowed to a
    subnormal or zero (epsilon too large) cannot be sampled: ``1/sigma`` overflows.

    Examples
    --------
    >>> check_sigma(1e-310)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: sigma = 1e-310 is below the smallest normal float ...: epsilon ... too large ...
    """
    s = _real(sigma, what)
    if np.isnan(s) or s <= 0:
        raise ValueError(f"{what} must be a finite number > 0, got {s!r}")
    if not np.isfinite(s):
        raise ValueError(
            f"{what} = {s!r} overflowed: epsilon is too small for floating point; use a "
            "larger epsilon"
        )
    if s < np.finfo(float).tiny:
        raise ValueError(
            f"{what} = {s!r} is below the smallest normal float (2.2e-308): epsilon (or n) "
            "is too large for floating point; use a smaller epsilon"
        )
    return s
