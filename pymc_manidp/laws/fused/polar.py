r"""The polar chart's map and chain rule, in numba: what every fused log-density shares.

:class:`~pymc_manidp.laws.charts.PolarChart` sends the sampler's ``u = (z, s)`` in
:math:`\mathbb R^{d+1}` to the chart coordinates

.. math:: c = t\,\frac{z}{|z|}, \qquad t = \text{scale}\, e^{s}
          \quad\text{or}\quad t = T\tanh(\text{scale}\, e^{s}/T)\ (T < \infty),

with the log-Jacobian (w.r.t. the Riemannian volume, ``log J(c)`` apart)

.. math:: (d-1)\log t + \log\frac{dt}{ds} - \tfrac12|z|^2
          + \log\mathrm{vol}(S^{d-1}) - \tfrac d2\log 2\pi ;

for ``d = 1`` the chart is linear, ``c = scale * u`` with log-Jacobian ``log scale``.
:func:`polar_coords` computes ``c`` and these terms, :func:`polar_pullback` turns a
gradient in ``c`` into the gradient in ``u`` and adds the chart's own terms. The same
arithmetic as the PyTensor graph (``log sech^2`` by ``log1p``), so a fused density
agrees with the graph's to rounding (``tests/laws/fused/test_density.py``).

:func:`polar_coords_numpy` is the same map for many draws at once (NumPy): the draws'
chart coordinates after a run.
"""

from __future__ import annotations

import math

import numpy as np

from pymc_manidp.geometry._numba.cache import njit

__all__ = ["polar_coords", "polar_coords_numpy", "polar_pullback", "wrapped_distance"]

_LOG2 = math.log(2.0)
_LOG_2PI = math.log(2.0 * math.pi)


@njit(cache=True, error_model="numpy", inline="always")
def _radius(s, scale, big_t):
    """``(t, log dt/ds, d log t/ds, d log(dt/ds)/ds, dt/ds)`` of the polar radius."""
    e = scale * math.exp(s)
    if big_t == np.inf:
        return e, math.log(scale) + s, 1.0, 1.0, e
    y = e / big_t
    th = math.tanh(y)
    log_sech2 = 2.0 * (_LOG2 - y - math.log1p(math.exp(-2.0 * y)))
    sech2 = math.exp(log_sech2)
    # d log t/ds = y sech^2(y)/tanh(y): 1 - 2y^2/3 + ... near 0, where 0/0 threatens
    dlogt = 1.0 - 2.0 * y * y / 3.0 if y < 1e-8 else y * sech2 / th
    return big_t * th, math.log(scale) + s + log_sech2, dlogt, 1.0 - 2.0 * y * th, e * sech2


@njit(cache=True, error_model="numpy", inline="always")
def polar_coords(u, scale, big_t):
    r"""Chart coordinates of ``u`` and the polar chart's log-Jacobian.

    Parameters
    ----------
    u : ndarray, shape ``(d + 1,)`` (``(1,)`` when ``d = 1``)
        The sampler's coordinates ``(z, s)``.
    scale : float
        σ, the chart's scale.
    big_t : float
        The radius cap ``T`` (the injectivity radius), ``inf`` on non-compact spaces.

    Returns
    -------
    c : ndarray, shape ``(d,)``
        Chart coordinates.
    log_jac : float
        The chart's log-Jacobian without ``log J(c)`` (module docstring).
    aux : ndarray, shape ``(5,)``
        What :func:`polar_pullback` needs: ``t``, ``|z|``, ``dt/ds``,
        ``d[(d-1) log t + log dt/ds]/ds``, ``d``.
    """
    aux = np.empty(5)
    if u.shape[0] == 1:
        c = np.empty(1)
        c[0] = scale * u[0]
        aux[0] = abs(c[0])
        aux[1] = 1.0
        aux[2] = 0.0
        aux[3] = 0.0
        aux[4] = 1.0
        return c, math.log(scale), aux
    d = u.shape[0] - 1
    nz2 = 0.0
    for a in range(d):
        nz2 += u[a] * u[a]
    nz = math.sqrt(nz2)
    t, log_dt_ds, dlogt, dlogdt, dt_ds = _radius(u[d], scale, big_t)
    c = np.empty(d)
    for a in range(d):
        c[a] = t / nz * u[a]
    log_vol = _LOG2 + 0.5 * d * math.log(math.pi) - math.lgamma(0.5 * d)
    log_jac = (d - 1) * math.log(t) + log_dt_ds - 0.5 * nz2 + log_vol - 0.5 * d * _LOG_2PI
    aux[0] = t
    aux[1] = nz
    aux[2] = dt_ds
    aux[3] = (d - 1) * dlogt + dlogdt
    aux[4] = d
    return c, log_jac, aux


@njit(cache=True, error_model="numpy", inline="always")
def polar_pullback(u, scale, aux, g_c, g_s):
    r"""The gradient in ``u`` of ``F(c(u)) + log_jac(u)``.

    ``g_c`` is the gradient of ``F`` in ``c``; ``g_s`` an extra term already in ``s``
    (the Laplace's ``-t/scale`` is differentiated there, where it is smooth). With
    ``ẑ = z/|z|``:

    .. math:: \partial_z = \frac t{|z|}\big(g - (g\cdot\hat z)\hat z\big) - z, \qquad
              \partial_s = (g\cdot\hat z)\frac{dt}{ds} + g_s
              + \frac{d}{ds}\Big[(d-1)\log t + \log\frac{dt}{ds}\Big].

    For ``d = 1`` (linear chart): ``scale * g``.
    """
    grad = np.empty_like(u)
    if u.shape[0] == 1:
        grad[0] = scale * g_c[0]
        return grad
    d = u.shape[0] - 1
    t, nz, dt_ds = aux[0], aux[1], aux[2]
    gz = 0.0
    for a in range(d):
        gz += g_c[a] * u[a]
    gz /= nz
    for a in range(d):
        grad[a] = t / nz * (g_c[a] - gz * u[a] / nz) - u[a]
    grad[d] = gz * dt_ds + g_s + aux[3]
    return grad


@njit(cache=True, error_model="numpy", inline="always")
def wrapped_distance(c0, big_t):
    """``|c0|`` on a line, or on a circle of half-length ``big_t`` the distance folded
    into ``[0, big_t]`` (the linear chart of a compact 1-manifold winds round it), and
    its derivative in ``c0``."""
    if big_t == np.inf:
        return abs(c0), (1.0 if c0 > 0 else (-1.0 if c0 < 0 else 0.0))
    r = np.fmod(c0, 2.0 * big_t)
    if r < 0:
        r += 2.0 * big_t
    if r <= big_t:
        return r, 1.0
    return 2.0 * big_t - r, -1.0


def polar_coords_numpy(u, scale, big_t):
    """:func:`polar_coords`'s ``c`` for draws ``u`` ``(..., d + 1)`` (``(..., 1)`` when
    ``d = 1``), vectorized: the chart coordinates ``(..., d)`` of a run's draws."""
    u = np.asarray(u, dtype=float)
    if u.shape[-1] == 1:
        return scale * u
    z, s = u[..., :-1], u[..., -1]
    nz = np.sqrt(np.sum(z * z, axis=-1))
    e = scale * np.exp(s)
    t = e if big_t == np.inf else big_t * np.tanh(e / big_t)
    return (t / nz)[..., None] * z
