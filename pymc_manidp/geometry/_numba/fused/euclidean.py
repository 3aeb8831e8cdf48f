r"""Fused log-density kernels of :class:`~pymc_manidp.geometry.euclidean.Euclidean`
(issue 38 item 6: the log-density and its gradient as one numba kernel).

The chart is ``x = origin + c``; the log map is ``y - x``, so KNG's norm is

.. math:: N(c) = \Big|\sum_i (y_i - x)\Big| = |G|, \qquad
          \frac{\partial N}{\partial c} = -\frac{n\,G}{N},

one pass over the records (the differences summed in 8 lanes: the graph's value to
rounding). The volume density is 1: ``log J = 0``.
"""

from __future__ import annotations

import numpy as np

from pymc_manidp.geometry._numba.cache import njit

__all__ = ["kng_norm", "log_volume_density", "params"]

# the sums run in this many lanes (kng_norm)
_LANES = 8
# the graph's pt_norm adds it under the square root (a finite gradient at G = 0)
_NORM_FLOOR = 1e-300


def params(manifold) -> np.ndarray:
    """No constants: the frame ``(origin,)`` and the coordinates say everything.

    Parameters
    ----------
    manifold : Euclidean

    Returns
    -------
    ndarray, shape ``(0,)``

    Examples
    --------
    >>> from pymc_manidp.geometry.euclidean import Euclidean
    >>> params(Euclidean(dim=3)).shape
    (0,)
    """
    from pymc_manidp.geometry.euclidean import Euclidean

    if not isinstance(manifold, Euclidean):
        raise TypeError(f"manifold must be a Euclidean instance, got {manifold!r}")
    return np.empty(0)


@njit(cache=True, error_model="numpy")
def log_volume_density(c, frame, params, g_c):
    """``log J(c) = 0`` (``exp`` is a translation); adds nothing to ``g_c``.

    Parameters
    ----------
    c : ndarray, shape ``(d,)``
        Chart coordinates.
    frame : tuple
        ``(origin,)``.
    params : ndarray, shape ``(0,)``
    g_c : ndarray, shape ``(d,)``
        Gradient accumulator, untouched.

    Returns
    -------
    float
        ``0.0``.
    """
    return 0.0


@njit(cache=True, error_model="numpy")
def kng_norm(c, frame, params, data, weight, g_c):
    """``|sum_i (y_i - x)|`` at ``x = origin + c``; adds ``weight * dN/dc`` to ``g_c``.

    Parameters
    ----------
    c : ndarray, shape ``(d,)``
        Chart coordinates.
    frame : tuple
        ``(origin,)``, the origin of shape ``(d,)``.
    params : ndarray, shape ``(0,)``
    data : ndarray, shape ``(n, d)``
        The records, C-contiguous.
    weight : float
        The factor of the gradient added to ``g_c``.
    g_c : ndarray, shape ``(d,)``
        Gradient accumulator (added to in place).

    Returns
    -------
    float
        ``sqrt(|G|^2 + 1e-300)``, ``G = sum_i (y_i - x)``, as the PyTensor graph.
    """
    origin = frame[0]
    n = data.shape[0]
    d = c.shape[0]
    x = np.empty(d)
    for j in range(d):
        x[j] = origin[j] + c[j]
    # 8 records at a time as one run of 8 d numbers (the rows are contiguous): an
    # elementwise loop the compiler vectorizes, 8 d independent sums instead of d
    # chains through memory (a row at a time took 3 times the graph's 10 us at d = 1)
    width = _LANES * d
    x_tiled = np.empty(width)
    for k in range(width):
        x_tiled[k] = x[k % d]
    lanes = np.zeros(width)
    flat = data.reshape(n * d)
    full = (n // _LANES) * width
    for k0 in range(0, full, width):
        for k in range(width):
            lanes[k] += flat[k0 + k] - x_tiled[k]
    total = np.zeros(d)
    for k in range(width):
        total[k % d] += lanes[k]
    for i in range(n // _LANES * _LANES, n):
        for j in range(d):
            total[j] += data[i, j] - x[j]
    q = 0.0
    for j in range(d):
        q += total[j] * total[j]
    norm = np.sqrt(q + _NORM_FLOOR)
    scale = -weight * n / norm
    for j in range(d):
        g_c[j] += scale * total[j]
    return norm
