r"""The sphere's fused log-density terms in chart coordinates (issue 38 item 6).

The chart is :meth:`~pymc_manidp.geometry.Sphere.chart_frame`'s: ``c`` of shape
``(d,)``, ``frame = (origin, basis)`` with ``basis`` of shape ``(d, D)``, ``D = d + 1``,
radius ``R = params[0]`` and, with ``s = |c|^2/R^2`` and ``v = c @ basis``,

.. math:: x(c) = \cos\sqrt s\ \mathrm{origin} + \frac{\sin\sqrt s}{\sqrt s}\, v,

so ``|x| = R`` (``|v| = |c|``). Each function computes exactly what the PyTensor graph
of :class:`~pymc_manidp.geometry.Sphere` computes, with the same branches (series below
the same thresholds), and adds the exact gradient in ``c``:

- :func:`log_volume_density`: ``(d - 1) log(sin(t)/t)``, ``t = sqrt(s)``
  (``Sphere.pt_log_volume_density``);
- :func:`kng_norm`: KNG's ``|G(x)|``, the norm of
  ``G(x) = sum_i f(c_i) x_i - S x``, ``c_i = <x, x_i>/R^2``, ``S = sum_i f(c_i) c_i``,
  ``f(c) = theta/sin(theta)`` with ``theta = atan2(sqrt((1-c)(1+c)), c)``
  (``Sphere.pt_frechet_gradient_norm``, which assumes ``|x| = R`` and so is a formula
  of the ambient ``x``).

The gradient: ``dx/dc`` is tangent at ``x`` (``|x(c)| = R`` for every ``c``), so only the
tangential part of the formula's ambient gradient counts, and on the sphere
``<x, G> = 0``. For a tangent ``dx``, with ``u_i = x_i - c_i x`` (the records' tangent
legs), ``<x_i, dx> = <u_i, dx>`` and ``<x_i, G> = <u_i, G>``, so

.. math:: d|G| = \frac1{|G|}\Big(\frac{G^\top U\,dx}{R^2} - S\,\langle G, dx\rangle\Big),
          \qquad U = \sum_i f'(c_i)\, u_i u_i^\top .

``G`` is known only after the sum, so the pass over the records sums ``P = sum_i f(c_i)
x_i``, ``S`` and the symmetric ``D x D`` matrix ``U`` (no temporary of the records'
size); the rest is ``O(D^2)``. The graph differentiates the ambient formula instead:
the same number in exact arithmetic. Summed here, that form's terms ``f'(c_i) x_i x_i^T``
(of size ``f' ~ (pi - theta)^-3`` for a record near ``x``'s antipode) and ``<x, G>``
(zero up to rounding) lost 0.5 in 1,000 of the gradient for a record 7e-6 from the
antipode on S^1, where this form and the graph agree to 2e-5; ``f'(c_i) u_i u_i^T`` is
of size ``(pi - theta)^-1``. So close to the antipode the norm is ill-conditioned anyway:
the rounding of ``c_i`` (eps) moves its gradient by ``~ eps (pi - theta)^-3``.

``f'(c) = (c f(c) - 1)/(1 - c^2)`` loses ``eps/theta^2`` of its accuracy to
cancellation near ``theta = 0``, so for ``c > 0`` and ``q = (1-c)(1+c) < 1e-3`` it is
``-2c g'(q)``, ``g(q) = asin(sqrt q)/sqrt q = sum_k a_k q^k`` (the series the graph's
value takes below ``q = 1e-8``, continued to ``q^6``). A record at ``x`` itself
(``q = 0`` or slightly negative by rounding) is in that branch: finite, as the graph's.
"""

from __future__ import annotations

import math

import numpy as np

from pymc_manidp.geometry._numba.cache import njit
from pymc_manidp.geometry.sphere import Sphere

__all__ = ["kng_norm", "log_volume_density", "params"]

# The graph's thresholds and series (pt_numerics: _SMALL_SQ, _LOG_SERIES_SQ,
# _LOG_SINC_COEF), copied because numba's cache of this file would not see a change
# there; tests/laws/fused/test_sphere.py checks that they agree.
_SMALL_SQ = 1e-8
_LOG_SERIES_SQ = 0.05**2
_LOG_SINC_COEF = (1 / 6, 1 / 180, 1 / 2835, 1 / 37800, 1 / 467775)
_PI_SQ = math.pi**2

# q below it (and c > 0): f' by the series of asin(r)/r in q = r^2; the first term left
# out, 7 a_7 q^6 < 1e-19, is below rounding, and the cancellation in (c f - 1)/q above it
# costs at most eps/q ~ 2e-13 (relative)
_ASIN_SERIES = 1e-3
# k a_k, a_k = binom(2k, k) / (4^k (2k + 1)): the derivative of asin(r)/r in q
_ASIN_DCOEF = (1 / 6, 2 * 3 / 40, 3 * 5 / 112, 4 * 35 / 1152, 5 * 63 / 2816, 6 * 231 / 13312)


def params(manifold) -> np.ndarray:
    """The kernels' constants: ``[R]``.

    Parameters
    ----------
    manifold : Sphere

    Returns
    -------
    ndarray, shape ``(1,)``
        The radius.

    Raises
    ------
    TypeError
        When ``manifold`` is not a :class:`~pymc_manidp.geometry.Sphere` (the kernels
        compute that class's graph, branch for branch).
    """
    if not isinstance(manifold, Sphere):
        raise TypeError(f"the sphere's fused kernels need a Sphere, got {type(manifold).__name__}")
    return np.array([float(manifold.radius)])


@njit(cache=True, error_model="numpy", inline="always")
def _log_sinc_series(s):
    """``log(sin t / t)`` and its derivative in ``s = t^2`` by the graph's series."""
    c0, c1, c2, c3, c4 = _LOG_SINC_COEF
    val = c0 * s + c1 * s**2 + c2 * s**3 + c3 * s**4 + c4 * s**5
    dval = c0 + s * (2.0 * c1 + s * (3.0 * c2 + s * (4.0 * c3 + s * 5.0 * c4)))
    return -val, -dval


@njit(cache=True, error_model="numpy")
def log_volume_density(c, frame, params, g_c):
    """``log J(c) = (d - 1) log(sin(t)/t)``, ``t = |c|/R``; adds ``d log J/dc`` to ``g_c``.

    Exactly ``Sphere.pt_log_volume_density(c)``: its series below ``t = 0.05``,
    ``-inf`` (and no gradient) from ``t = pi`` on; ``0`` for ``d = 1``.

    Parameters
    ----------
    c : ndarray, shape ``(d,)``
        Chart coordinates.
    frame : tuple of ndarray
        ``(origin, basis)`` (unused: the density is radial).
    params : ndarray, shape ``(1,)``
        ``[R]``.
    g_c : ndarray, shape ``(d,)``
        Gradient accumulator, updated in place.

    Returns
    -------
    float
    """
    d = c.shape[0]
    if d == 1:
        return 0.0
    r2 = params[0] * params[0]
    cc = 0.0
    for k in range(d):
        cc += c[k] * c[k]
    s = cc / r2
    if s < _LOG_SERIES_SQ:
        val, dval = _log_sinc_series(s)
    elif s < _PI_SQ:
        t = math.sqrt(s)
        st = math.sin(t)
        val = math.log(st / t)
        # d/ds log(sin t/t) = (t cos t - sin t)/(2 t^2 sin t)
        dval = (t * math.cos(t) - st) / (2.0 * s * st)
    else:
        return -np.inf
    coef = (d - 1) * dval * 2.0 / r2
    for k in range(d):
        g_c[k] += coef * c[k]
    return (d - 1) * val


@njit(cache=True, error_model="numpy", inline="always")
def _weights(ci):
    """``f(c) = theta/sin(theta)`` as the graph computes it, and ``f'(c)`` (module
    docstring).

    The angle is ``acos(c)``: the graph's ``atan2(sqrt((1-c)(1+c)), c)`` is that angle
    up to the rounding of ``(1-c)(1+c)`` (a few ulp), and glibc's ``acos`` takes half
    ``atan2``'s time (the costliest step of a record: 40% of it with ``acos``).
    """
    q = (1.0 - ci) * (1.0 + ci)
    inv_r = 0.0
    if ci > 0.0 and q < _SMALL_SQ:  # the graph's series, also at q <= 0 (rounding)
        f = 1.0 + q / 6.0 + 3.0 * q * q / 40.0
    else:
        inv_r = 1.0 / math.sqrt(q)  # one division for f and f'
        f = math.acos(ci) * inv_r
    if ci > 0.0 and q < _ASIN_SERIES:
        a0, a1, a2, a3, a4, a5 = _ASIN_DCOEF
        fp = -2.0 * ci * (a0 + q * (a1 + q * (a2 + q * (a3 + q * (a4 + q * a5)))))
    else:
        fp = (ci * f - 1.0) * (inv_r * inv_r)
    return f, fp


@njit(cache=True, error_model="numpy", inline="always")
def _cos(x, data, i, r2):
    ci = 0.0
    for j in range(x.shape[0]):
        ci += data[i, j] * x[j]
    return ci / r2


@njit(cache=True, error_model="numpy")
def _sums(x, data, r2, p, u):
    """Add ``P`` to ``p`` and the upper triangle of ``U`` to ``u``; return ``S``.

    Four records at a time: each update of the ``D x D`` sums in memory then serves four
    records (2.5 times faster at ``D = 6`` than one record at a time). The legs
    ``u_i = x_i - c_i x`` are recomputed where they are needed: faster than a buffer.
    """
    n, dd = data.shape
    s_sum = 0.0
    n4 = n - n % 4
    for i in range(0, n4, 4):
        c0 = _cos(x, data, i, r2)
        c1 = _cos(x, data, i + 1, r2)
        c2 = _cos(x, data, i + 2, r2)
        c3 = _cos(x, data, i + 3, r2)
        f0, g0 = _weights(c0)
        f1, g1 = _weights(c1)
        f2, g2 = _weights(c2)
        f3, g3 = _weights(c3)
        s_sum += f0 * c0 + f1 * c1 + f2 * c2 + f3 * c3
        for j in range(dd):
            xj = x[j]
            p[j] += (
                f0 * data[i, j] + f1 * data[i + 1, j] + f2 * data[i + 2, j] + f3 * data[i + 3, j]
            )
            z0 = g0 * (data[i, j] - c0 * xj)
            z1 = g1 * (data[i + 1, j] - c1 * xj)
            z2 = g2 * (data[i + 2, j] - c2 * xj)
            z3 = g3 * (data[i + 3, j] - c3 * xj)
            for m in range(j, dd):
                xm = x[m]
                u[j, m] += (
                    z0 * (data[i, m] - c0 * xm)
                    + z1 * (data[i + 1, m] - c1 * xm)
                    + z2 * (data[i + 2, m] - c2 * xm)
                    + z3 * (data[i + 3, m] - c3 * xm)
                )
    for i in range(n4, n):
        ci = _cos(x, data, i, r2)
        f, fp = _weights(ci)
        s_sum += f * ci
        for j in range(dd):
            p[j] += f * data[i, j]
            z = fp * (data[i, j] - ci * x[j])
            for m in range(j, dd):
                u[j, m] += z * (data[i, m] - ci * x[m])
    return s_sum


@njit(cache=True, error_model="numpy")
def kng_norm(c, frame, params, data, weight, g_c):
    """``|sum_i log_x(x_i)|`` at ``x = exp_frame(frame, c)``; adds ``weight`` times its
    gradient in ``c`` to ``g_c`` (module docstring).

    Exactly ``Sphere.pt_frechet_gradient_norm(Sphere.pt_exp_frame(frame, c), data)``
    (with its ``+ 1e-300`` under the square root).

    Parameters
    ----------
    c : ndarray, shape ``(d,)``
        Chart coordinates.
    frame : tuple of ndarray
        ``(origin (D,), basis (d, D))``.
    params : ndarray, shape ``(1,)``
        ``[R]``.
    data : ndarray, shape ``(n, D)``
        The records, C-contiguous.
    weight : float
        Multiplies the gradient added to ``g_c``.
    g_c : ndarray, shape ``(d,)``
        Gradient accumulator, updated in place.

    Returns
    -------
    float
    """
    origin, basis = frame[0], frame[1]
    r2 = params[0] * params[0]
    d = c.shape[0]
    dd = data.shape[1]

    # the chart point, with the graph's branches of cos(sqrt s) and sin(sqrt s)/sqrt s
    cc = 0.0
    for k in range(d):
        cc += c[k] * c[k]
    s = cc / r2
    if s < _SMALL_SQ:
        cos_t = 1.0 - s / 2.0 + s * s / 24.0
        sinc_t = 1.0 - s / 6.0 + s * s / 120.0
        dcos_t = -0.5 + s / 12.0
        dsinc_t = -1.0 / 6.0 + s / 60.0
    else:
        t = math.sqrt(s)
        sin_t = math.sin(t)
        cos_t = math.cos(t)
        sinc_t = sin_t / t
        dcos_t = -0.5 * sinc_t
        # its cancellation, eps/s, is multiplied by the chain's 2|c|^2/R^2 = 2s below
        dsinc_t = (t * cos_t - sin_t) / (2.0 * s * t)
    v = np.empty(dd)
    x = np.empty(dd)
    for j in range(dd):
        vj = 0.0
        for k in range(d):
            vj += c[k] * basis[k, j]
        v[j] = vj
        x[j] = cos_t * origin[j] + sinc_t * vj

    # the one pass: P, S and the upper triangle of U
    p = np.zeros(dd)
    u = np.zeros((dd, dd))
    s_sum = _sums(x, data, r2, p, u)
    for j in range(dd):
        for m in range(j):
            u[j, m] = u[m, j]
    grad = np.empty(dd)  # G, then the tangential gradient
    g2 = 0.0
    for j in range(dd):
        gj = p[j] - s_sum * x[j]
        grad[j] = gj
        g2 += gj * gj
    norm = math.sqrt(g2 + 1e-300)
    if weight == 0.0:
        return norm

    # d|G|/dc = (dx/dc)^T grad_x, dx/dc = (2c/R^2)(cos' origin + sinc' v)^T + sinc basis^T
    go = 0.0
    gv = 0.0
    gx = np.empty(dd)
    for j in range(dd):
        ug = 0.0
        for m in range(dd):
            ug += u[j, m] * grad[m]
        gxj = (ug / r2 - s_sum * grad[j]) / norm
        gx[j] = gxj
        go += gxj * origin[j]
        gv += gxj * v[j]
    coef = 2.0 / r2 * (dcos_t * go + dsinc_t * gv)
    for k in range(d):
        bg = 0.0
        for j in range(dd):
            bg += basis[k, j] * gx[j]
        g_c[k] += weight * (coef * c[k] + sinc_t * bg)
    return norm
