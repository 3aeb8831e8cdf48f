"""Numerically safe scalar and matrix helpers (NumPy).

Every function is pure array maths, batched over leading axes, float64.
Their PyTensor twins live in :mod:`pymc_manidp.geometry._numba.pt_numerics`.
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "angle_between",
    "log_sinc",
    "log_sinhc",
    "sinc",
    "sinhc",
    "sym",
    "sym_eigh",
    "sym_eigvalsh",
    "sym_funm",
    "theta_over_sin",
]

# Below this the Taylor branch is used; the series are exact to rounding there.
_SMALL = 1e-4
# log(sin t / t) and log(sinh t / t): below this a 5-term series (error < 1e-17
# relative); above it log() of a ratio near 1 has relative error ~ eps / t^2 <= 1e-13.
_LOG_SERIES = 0.05


# |coefficients| of log(sin t/t) = -sum c_k t^{2k};  log(sinh t/t) = sum (-1)^{k+1} c_k t^{2k}
_LOG_SINC_COEF = (1 / 6, 1 / 180, 1 / 2835, 1 / 37800, 1 / 467775)


def _series(t2, alternate: bool):
    out = np.zeros_like(t2)
    for k, c in enumerate(_LOG_SINC_COEF):
        out = out + (-1) ** k * c * t2 ** (k + 1) if alternate else out + c * t2 ** (k + 1)
    return out


def sinc(t):
    """``sin(t)/t`` with the removable singularity filled (unnormalized sinc)."""
    return np.sinc(np.asarray(t, dtype=float) / np.pi)


def sinhc(t):
    """``sinh(t)/t``, equal to 1 at 0."""
    t = np.asarray(t, dtype=float)
    small = np.abs(t) < _SMALL
    ts = np.where(small, 1.0, t)
    t2 = t * t
    return np.where(small, 1.0 + t2 / 6.0 + t2 * t2 / 120.0, np.sinh(ts) / ts)


def log_sinc(t):
    """``log(sin(t)/t)`` for ``|t| < pi``; ``-inf`` at and beyond ``pi``.

    ``-inf`` marks points outside the injective domain of an exponential chart,
    where the chart has no density.
    """
    t = np.abs(np.asarray(t, dtype=float))
    small = t < _LOG_SERIES
    # only the branches some entry takes are computed (the same numbers): the radii of
    # an exact sampler's proposals are often all small, a chart's all large
    if small.all():
        return np.asarray(-_series(t * t, alternate=False))
    inside = t < np.pi
    ts = np.where(small | ~inside, 1.0, t)
    with np.errstate(divide="ignore"):
        val = np.log(np.sin(ts) / ts)
    if not small.any():
        return np.where(inside, val, -np.inf)
    return np.where(small, -_series(t * t, alternate=False), np.where(inside, val, -np.inf))


def log_sinhc(t):
    """``log(sinh(t)/t)``, accurate for small and free of overflow for large ``|t|``."""
    t = np.abs(np.asarray(t, dtype=float))
    small = t < _LOG_SERIES
    large = t >= 20.0
    ts = np.where(small | large, 1.0, t)
    mid = np.log(np.sinh(ts) / ts)
    tl = np.where(large, t, 20.0)
    # for large t: t - log(2t) + log1p(-exp(-2t)) (it cancels badly for small t)
    big = tl - np.log(2.0 * tl) + np.log1p(-np.exp(-2.0 * tl))
    return np.where(small, _series(t * t, alternate=True), np.where(large, big, mid))


def angle_between(x, y, axes=(-1,)):
    """Angle between two equal-norm vectors: ``2 atan2(|x - y|, |x + y|)``.

    Accurate for tiny and for near-straight angles, unlike ``arccos`` of the inner
    product (which loses half the digits near 0).
    """
    d = np.sqrt(_sum_axes((x - y) ** 2, axes))
    s = np.sqrt(_sum_axes((x + y) ** 2, axes))
    return 2.0 * np.arctan2(d, s)


def _sum_axes(a, axes):
    """``np.sum(a, axis=axes)``, bit for bit; over one short last axis by its columns.

    NumPy sums fewer than 8 terms one after the other from zero, ``((0 + a_0) + a_1) +
    ...`` (its pairwise sum starts only at 8), so adding the columns in that order gives the
    same numbers, without the reduction's per-row overhead: on ``(1000, 3)`` a tenth of
    the time (the distances of every release's check and profile).
    """
    if tuple(axes) in ((-1,), (a.ndim - 1,)) and a.ndim >= 1 and 1 <= a.shape[-1] < 8:
        out = 0.0 + a[..., 0]  # from zero, as NumPy: the sign of a zero sum is +0
        for k in range(1, a.shape[-1]):
            out += a[..., k]
        return out
    return np.sum(a, axis=axes)


def theta_over_sin(theta):
    """``theta / sin(theta)`` for ``0 <= theta < pi`` (1 at 0)."""
    return 1.0 / sinc(theta)


def sym(a):
    """Symmetric part of a batch of square matrices, shape ``(..., k, k)``."""
    return 0.5 * (a + np.swapaxes(a, -1, -2))


def _eigh_2x2(a, vectors):
    # Closed form (LAPACK's dlaev2): np.linalg.eigh pays a LAPACK call per matrix,
    # which dominates SPD(2) work on 1,000 data points (about 5x slower than this).
    # The larger-magnitude eigenvalue is m + sign(m) r; the other is det / that one, as
    # in dlaev2, so it keeps the accuracy of LAPACK's rather than cancelling in m - r.
    p, q, s = a[..., 0, 0], a[..., 1, 1], a[..., 0, 1]
    m, h = 0.5 * (p + q), 0.5 * (p - q)
    r = np.hypot(h, s)
    pos = m >= 0
    big = m + np.where(pos, r, -r)
    nonzero = big != 0  # big = 0 only for the zero matrix, whose eigenvalues are 0
    small = np.where(nonzero, (p * q - s * s) / np.where(nonzero, big, 1.0), 0.0)
    w = np.stack([np.where(pos, small, big), np.where(pos, big, small)], axis=-1)
    if not vectors:
        return w
    # A = m I + r [[cos 2phi, sin 2phi], [sin 2phi, -cos 2phi]]: the larger eigenvalue's
    # vector is (cos phi, sin phi), the smaller's (-sin phi, cos phi).
    phi = 0.5 * np.arctan2(s, h)
    c, sn = np.cos(phi), np.sin(phi)
    u = np.stack([np.stack([-sn, c], axis=-1), np.stack([c, sn], axis=-1)], axis=-2)
    return w, u


def sym_eigh(a):
    """Eigendecomposition of symmetric matrices, eigenvalues ascending.

    Same contract as ``np.linalg.eigh`` on ``sym(a)``; 2 x 2 matrices use a closed form.

    Parameters
    ----------
    a : array, shape (..., k, k)

    Returns
    -------
    w : array, shape (..., k)
        Eigenvalues, ascending.
    u : array, shape (..., k, k)
        Orthonormal eigenvectors in the columns: ``a = u @ diag(w) @ u.T``.

    Examples
    --------
    >>> w, u = sym_eigh(np.array([[2.0, 1.0], [1.0, 2.0]]))
    >>> np.round(w, 12).tolist()
    [1.0, 3.0]
    """
    a = sym(np.asarray(a, float))
    if a.shape[-1] == 2:
        return _eigh_2x2(a, vectors=True)
    return np.linalg.eigh(a)


def sym_eigvalsh(a):
    """Eigenvalues of symmetric matrices ``(..., k, k)``, ascending (see :func:`sym_eigh`)."""
    a = sym(np.asarray(a, float))
    if a.shape[-1] == 2:
        return _eigh_2x2(a, vectors=False)
    return np.linalg.eigvalsh(a)


def sym_funm(a, f):
    """Matrix function of a symmetric matrix through its eigendecomposition.

    Parameters
    ----------
    a : array, shape (..., k, k)
        Symmetric matrices (only the symmetric part is used).
    f : callable
        Applied to the eigenvalues, elementwise.

    Returns
    -------
    array, shape (..., k, k)
        ``U f(w) U^T``, exactly symmetric.
    """
    w, u = sym_eigh(a)
    out = (u * f(w)[..., None, :]) @ np.swapaxes(u, -1, -2)
    return sym(out)
