r"""Mouse osteosarcoma cell contours as planar landmark configurations.

A real planar-shape dataset standing in for the corpus callosum data of the 2022
paper (§4.3), which is not public: 650 cell boundaries shipped by geomstats (MIT
licence; see ``data/LICENSES.md``), each resampled to 64 landmarks equally spaced in
arc length, counter-clockwise, starting at the tip of the contour's major principal
axis (``scripts/derive_cells.py``). Coordinates are in pixels, centered per cell.
"""

from __future__ import annotations

from importlib import resources
from typing import NamedTuple

import numpy as np

from pymc_manidp._validation import check_positive_int

__all__ = ["Cells", "load_cells", "resample_closed"]

STORED_LANDMARKS = 64


class Cells(NamedTuple):
    """The cell dataset.

    Attributes
    ----------
    landmarks : ndarray, shape ``(650, k, 2)``
        Raw configurations in pixels (centered; not scaled or rotated).
    cell_line : ndarray of str, shape ``(650,)``
        ``"dlm8"`` or ``"dunn"``.
    treatment : ndarray of str, shape ``(650,)``
        ``"control"``, ``"cytd"`` or ``"jasp"``.
    """

    landmarks: np.ndarray
    cell_line: np.ndarray
    treatment: np.ndarray


def resample_closed(x, k: int) -> np.ndarray:
    """Resample closed polygons ``(..., m, 2)`` to ``k`` points equally spaced in arc length.

    The first vertex is kept as the starting point and the orientation is preserved.

    Parameters
    ----------
    x : array_like, shape ``(..., m, 2)``
        Closed polygons (the last vertex connects back to the first).
    k : int
        Number of points, at least 3.

    Returns
    -------
    ndarray, shape ``(..., k, 2)``
        The resampled polygons.

    Examples
    --------
    >>> square = np.array([[0.0, 0.0], [1.0, 0.0], [1.0, 1.0], [0.0, 1.0]])
    >>> resample_closed(square, 8)[:3].tolist()
    [[0.0, 0.0], [0.5, 0.0], [1.0, 0.0]]
    """
    k = check_positive_int(k, "k", minimum=3)
    x = np.asarray(x, float)
    closed = np.concatenate([x, x[..., :1, :]], axis=-2)
    seg = np.linalg.norm(np.diff(closed, axis=-2), axis=-1)
    s = np.concatenate([np.zeros((*seg.shape[:-1], 1)), np.cumsum(seg, axis=-1)], axis=-1)
    flat_s = s.reshape(-1, s.shape[-1])
    flat_c = closed.reshape(-1, *closed.shape[-2:])
    out = np.empty((len(flat_s), k, 2))
    for i, (si, ci) in enumerate(zip(flat_s, flat_c, strict=True)):
        t = si[-1] * np.arange(k) / k
        out[i] = np.stack([np.interp(t, si, ci[:, j]) for j in range(2)], axis=-1)
    return out.reshape((*x.shape[:-2], k, 2))


def load_cells(k_landmarks: int | None = None) -> Cells:
    """Load the 650 cell contours as landmark configurations.

    Parameters
    ----------
    k_landmarks : int, optional
        Landmarks per cell. ``None`` (default) returns the stored 64; a smaller ``k``
        re-samples the stored 64-gon by arc length from the same starting point (an
        approximation of resampling the original contour); at most 64.

    Returns
    -------
    Cells
        ``landmarks`` float64 ``(650, k, 2)`` (pixels), ``cell_line``, ``treatment``.

    Examples
    --------
    >>> import pymc_manidp as pmd
    >>> cells = load_cells(k_landmarks=16)
    >>> cells.landmarks.shape, sorted(set(cells.treatment.tolist()))
    ((650, 16, 2), ['control', 'cytd', 'jasp'])
    >>> pmd.KendallShape(k_landmarks=16).validate(cells.landmarks).shape
    (650, 16, 2)
    """
    with resources.files("pymc_manidp.datasets").joinpath("data/cells.npz").open("rb") as fh:
        with np.load(fh, allow_pickle=False) as z:
            land = z["landmarks"].astype(np.float64) * float(z["quantum"])
            line = z["cell_line_names"][z["cell_line"]]
            treat = z["treatment_names"][z["treatment"]]
    if k_landmarks is not None:
        k = check_positive_int(k_landmarks, "k_landmarks", minimum=3)
        if k > STORED_LANDMARKS:
            raise ValueError(
                f"k_landmarks must be between 3 and {STORED_LANDMARKS} (the stored "
                f"resolution), got {k}; re-derive with scripts/derive_cells.py --k {k}"
            )
        if k != STORED_LANDMARKS:
            land = resample_closed(land, k)
            land -= land.mean(axis=-2, keepdims=True)
    return Cells(land, line, treat)
