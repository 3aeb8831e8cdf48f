r"""Fused log-densities on ``SPD(k)`` in chart coordinates (docs: FUSED contract).

The chart at an origin ``p`` with square root ``S = p^{1/2}`` (``SPD.chart_frame``) maps
``c`` ``(d,)``, ``d = k(k+1)/2``, to the symmetric ``W = sum_a c_a E_a`` (``E_ii``, then
``(E_ij + E_ji)/sqrt 2`` for ``i < j`` row by row: ``identity_frame``) and on to
``X = sym(S expm(W) S)``. Two numbers of ``c`` and their exact gradients:

- :func:`log_volume_density`: ``log J = sum_{i<j} log sinhc((w_i - w_j)/2)`` over the
  eigenvalues ``w`` of ``W`` (``SPD.pt_log_volume_density``), whose gradient is
  ``U diag(dlogJ/dw) U^T`` (a symmetric function of the eigenvalues: equal partials on
  tied eigenvalues, so the basis inside an eigenspace does not matter);
- :func:`kng_norm`: ``N = |T|_F``, ``T = sum_i logm(xi D_i xi)``, ``xi = X^{-1/2}``
  (``SPD.pt_frechet_gradient_norm``'s congruence sum; the norm at ``X`` undoes the outer
  congruence of ``log_X``).

KNG's gradient needs ``Tbar = T / N`` in every record's pullback, and ``T`` is known
only after the last record. The pullback is linear in ``Tbar``, so one pass over the
records accumulates it as a ``d x d`` matrix ``J`` (``<Tbar, dT> = Tbar . J dxi``, in
the coordinates below), beside ``T``; after the pass ``xibar = J^T Tbar`` goes back
through ``invsqrt``, the congruence by ``S`` and ``expm`` once (Daleckii–Krein, the
kernels of :mod:`pymc_manidp.geometry._numba.sym_kernels`). Nothing the size of the data
is allocated and no record is read twice.

Coordinates of a symmetric matrix ``A`` here are its entries ``A_pp`` then ``A_pq``
(``p < q``, row by row), the chart's order. A gradient with respect to ``xi`` is taken
in *parameters* (an off-diagonal parameter moves both entries ``pq`` and ``qp``), and
``J`` pairs ``Tbar``'s entries with weight 1 on the diagonal and 2 off it (the Frobenius
inner product of symmetric matrices).
"""

from __future__ import annotations

import numpy as np

from pymc_manidp.geometry._numba.cache import njit
from pymc_manidp.geometry._numba.sym_kernels import _eigh

__all__ = ["log_volume_density", "params"]

_INV_SQRT2 = 1.0 / np.sqrt(2.0)  # the frame's off-diagonal entry, as identity_frame stores it
# log(sinh t / t): the series below |t| = 0.05 (pt_numerics._LOG_SERIES_SQ's root), the
# asymptotic form from |t| = 20, as pt_numerics.log_sinhc
_LOG_SERIES_SQ = 0.05**2
_LOG_SERIES = np.sqrt(_LOG_SERIES_SQ)
_C1, _C2, _C3, _C4, _C5 = 1 / 6, 1 / 180, 1 / 2835, 1 / 37800, 1 / 467775
_EXP, _INVSQRT = 0, 3  # sym_kernels.FUNC_CODES
# log[l1, l2] of a 2 x 2 matrix: pt_numerics' series of atanh(d)/d below d^2 = 1e-3
_ATANHC_SERIES_SQ = 1e-3
# d log[l1, l2] / ds (s the squared half-gap): its series in u = s/m^2 below 0.01 (the
# next term 9 u^8/19 < 5e-17 of the first), the quotient (m/det - beta)/(2s) above,
# which loses at most 1/u ~ 100 rounding units to cancellation there
_BETA_S_SERIES = 1e-2


def params(manifold) -> np.ndarray:
    """No constants: ``k`` is the frame's size and the metric has no scale parameter."""
    return np.zeros(0)


@njit(cache=True, inline="always", error_model="numpy")
def _series(s):
    """``log(sinh t / t)`` in ``s = t^2``, summed as pt_numerics._series."""
    return ((((0.0 + _C1 * s) + (-_C2) * s**2) + _C3 * s**3) + (-_C4) * s**4) + _C5 * s**5


@njit(cache=True, inline="always", error_model="numpy")
def _series_ds(s):
    """``d/ds`` of :func:`_series`."""
    return _C1 - 2.0 * _C2 * s + 3.0 * _C3 * s * s - 4.0 * _C4 * s**3 + 5.0 * _C5 * s**4


@njit(cache=True, inline="always", error_model="numpy")
def _log_sinhc(t):
    """``log(sinh t / t)`` and its derivative in ``t``, on pt_numerics.log_sinhc's branches."""
    at = abs(t)
    if at < _LOG_SERIES:
        t2 = t * t
        return _series(t2), 2.0 * t * _series_ds(t2)
    sign = 1.0 if t > 0.0 else -1.0
    if at >= 20.0:
        e = np.exp(-2.0 * at)
        val = at - np.log(2.0 * at) + np.log1p(-e)
        return val, sign * (1.0 - 1.0 / at + 2.0 * e / (1.0 - e))
    sh = np.sinh(at)
    return np.log(sh / at), sign * (np.cosh(at) / sh - 1.0 / at)


@njit(cache=True, inline="always", error_model="numpy")
def _log_sinhc_sqrt(s):
    """``log(sinh sqrt(s) / sqrt(s))`` and its derivative in ``s >= 0``
    (pt_numerics.log_sinhc_sqrt: the series in ``s`` below ``0.05^2``)."""
    if s < _LOG_SERIES_SQ:
        return _series(s), _series_ds(s)
    t = np.sqrt(s)
    val, dt = _log_sinhc(t)
    return val, dt / (2.0 * t)


@njit(cache=True, error_model="numpy")
def _fill_w(c, k, w):
    """``W = sum_a c_a E_a`` into ``w`` ``(k, k)``."""
    for i in range(k):
        w[i, i] = c[i]
    a = k
    for i in range(k):
        for j in range(i + 1, k):
            w[i, j] = c[a] * _INV_SQRT2
            w[j, i] = w[i, j]
            a += 1


@njit(cache=True, error_model="numpy")
def _add_coords(gw, k, scale, g_c):
    """Add ``scale * tr(G E_a)`` for each frame element ``E_a`` to ``g_c``
    (``G`` ``(k, k)`` symmetric: ``G_ii`` and ``sqrt(2) G_ij``)."""
    for i in range(k):
        g_c[i] += scale * gw[i, i]
    a = k
    for i in range(k):
        for j in range(i + 1, k):
            g_c[a] += scale * (2.0 * gw[i, j] * _INV_SQRT2)
            a += 1


@njit(cache=True, error_model="numpy")
def log_volume_density(c, frame, params, g_c):
    """``log J(c)`` as ``SPD.pt_log_volume_density(c)``; adds ``d log J / dc`` to ``g_c``.

    ``k = 2``: the one pair's ``log sinhc`` as a function of the squared half-gap ``s``
    (no eigenvectors); ``k >= 3``: the eigenvalues of ``W`` (the Jacobi kernel the
    graph's ``SymEigvalsh`` runs) and the gradient ``U diag(dlogJ/dw) U^T``.
    """
    k = frame[0].shape[0]
    if k == 1:
        return 0.0
    if k == 2:
        h = 0.5 * (c[0] - c[1])
        b = c[2] * _INV_SQRT2
        val, ds = _log_sinhc_sqrt(h * h + b * b)
        # s = h^2 + b^2: ds/dc = (h, -h, 2 b / sqrt 2)
        g_c[0] += ds * h
        g_c[1] += -ds * h
        g_c[2] += ds * (2.0 * b * _INV_SQRT2)
        return val
    a = np.empty((k, k))
    u = np.empty((k, k))
    w = np.empty(k)
    _fill_w(c, k, a)
    _eigh(a, w, u)
    gw = np.zeros(k)
    val = 0.0
    for i in range(k):
        for j in range(i + 1, k):
            v, dt = _log_sinhc(0.5 * (w[i] - w[j]))
            val += v
            gw[i] += 0.5 * dt
            gw[j] -= 0.5 * dt
    for i in range(k):  # a = U diag(gw) U^T
        for j in range(i, k):
            acc = 0.0
            for m in range(k):
                acc += u[i, m] * gw[m] * u[j, m]
            a[i, j] = acc
            a[j, i] = acc
    _add_coords(a, k, 1.0, g_c)
    return val
