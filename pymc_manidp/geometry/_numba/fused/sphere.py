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

Speed: the records go by blocks of ``_BLOCK`` (64), each phase a loop over a block's
records that LLVM vectorizes (AVX-512 here; no fastmath): the block transposed and the
``c_i``; ``f`` and ``f'``, branch-free, with :func:`_acos` (fdlibm's, within one ulp
of libm's) for libm's ``acos``, a call per record that numba cannot vectorize (40% of
a record's time before); the legs and the sums, each sum kept in 64 lanes added up
at the end (elementwise updates vectorize without reordering a sum; the sums' rounding
is as small as before: at the records' mean, where ``G = P - S x`` cancels, both
kernels are within 1e-13 (S^2) of the norm from exact sums of the same terms).
``kng_norm`` at ``n = 10^4`` on S^2 (docs/benchmarks/bench_fused_sphere.py:
profile_first_release.py's case, ``x`` at the records' mean and 0.3 r from it) took
139 us before (four records at a time, libm's ``acos``) and 45 us now, 3.1 times
faster (3.5 on S^1, 2.6 on S^5; same process, alternating, medians of 300, 2 shared
cores under load, 2026-11-28), values and gradients within 1.5e-13 (S^2) and 9.4e-13
(S^5, gradient at the mean) of the old kernel's. Its cold compile (first call, empty
cache) did not measurably change: 3.6-4.6 s before, 4.1-4.6 s now (three runs each,
loaded machine).
"""

from __future__ import annotations

import math

import numpy as np

from pymc_manidp.geometry._numba import pt_numerics
from pymc_manidp.geometry._numba.cache import njit
from pymc_manidp.geometry.sphere import Sphere

__all__ = ["kng_norm", "log_volume_density", "params"]

# The graph's thresholds and series, so each value takes the graph's branch (the
# kernels' cache key covers pt_numerics.py: geometry/_numba/cache.py)
_SMALL_SQ = pt_numerics._SMALL_SQ
_LOG_SERIES_SQ = pt_numerics._LOG_SERIES_SQ
_LOG_SINC_COEF = pt_numerics._LOG_SINC_COEF
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


# fdlibm's acos (e_acos.c, Sun Microsystems, freely distributable): the reduction to
# z = c^2 (|c| < 1/2) or z = (1 - |c|)/2 and its rational R(z) = z P(z)/Q(z) for
# asin(r)/r - 1 in r^2 = z; pi/2 = _PIO2_HI + _PIO2_LO
_PS = (
    1.66666666666666657415e-01,
    -3.25565818622400915405e-01,
    2.01212532134862925881e-01,
    -4.00555345006794114027e-02,
    7.91534994289814532176e-04,
    3.47933107596021167570e-05,
)
_QS = (
    -2.40339491173441421878e00,
    2.02094576023350569471e00,
    -6.88283971605453293030e-01,
    7.70381505559019352791e-02,
)
_PIO2_HI = 1.57079632679489655800e00
_PIO2_LO = 6.12323399573676603587e-17
_BLOCK = 64  # records per block: the vector lanes of the per-record phases


@njit(cache=True, error_model="numpy", inline="always")
def _acos(c):
    """``acos(c)`` without a branch or a call (selects only), so that a loop of it
    vectorizes; libm's ``acos`` is a call numba cannot. NaN for ``|c| > 1``."""
    a = abs(c)
    big = a >= 0.5
    z = 0.5 - 0.5 * a if big else c * c  # exact for 1/2 <= a <= 1
    s = math.sqrt(z)
    pz = z * (_PS[0] + z * (_PS[1] + z * (_PS[2] + z * (_PS[3] + z * (_PS[4] + z * _PS[5])))))
    qz = 1.0 + z * (_QS[0] + z * (_QS[1] + z * (_QS[2] + z * _QS[3])))
    rz = pz / qz
    near = 2.0 * (s + s * rz)  # c >= 1/2: 2 asin(s)
    far = 2.0 * (_PIO2_HI - (s + (rz * s - _PIO2_LO)))  # c <= -1/2: pi - 2 asin(s)
    mid = _PIO2_HI - (c - (_PIO2_LO - c * rz))  # pi/2 - asin(c)
    return (near if c > 0.0 else far) if big else mid


@njit(cache=True, error_model="numpy", inline="always")
def _weights(ci):
    """``f(c) = theta/sin(theta)`` as the graph computes it, and ``f'(c)`` (module
    docstring), both branches of each computed and one selected, so that a loop of it
    vectorizes.

    The angle is ``acos(c)``: the graph's ``atan2(sqrt((1-c)(1+c)), c)`` is that angle
    up to the rounding of ``(1-c)(1+c)`` (a few ulp).
    """
    q = (1.0 - ci) * (1.0 + ci)
    pos = ci > 0.0
    inv_r = 1.0 / math.sqrt(q)  # one division for f and f'; NaN/inf only where unused
    f_far = _acos(ci) * inv_r
    # the graph's series, also at q <= 0 (rounding)
    f = 1.0 + q / 6.0 + 3.0 * q * q / 40.0 if pos and q < _SMALL_SQ else f_far
    a0, a1, a2, a3, a4, a5 = _ASIN_DCOEF
    fp_series = -2.0 * ci * (a0 + q * (a1 + q * (a2 + q * (a3 + q * (a4 + q * a5)))))
    fp_far = (ci * f - 1.0) * (inv_r * inv_r)
    fp = fp_series if pos and q < _ASIN_SERIES else fp_far
    return f, fp


@njit(cache=True, error_model="numpy")
def _sums(x, data, r2, p, u):
    """Add ``P`` to ``p`` and the upper triangle of ``U`` to ``u``; return ``S``.

    By blocks of ``_BLOCK`` records, each phase a loop over the block's records that
    LLVM vectorizes (no call, no branch): the block transposed and the ``c_i``, then
    ``f`` and ``f'``, then the legs and the sums. Each sum is kept in ``_BLOCK`` lanes
    (one per record slot: an elementwise update, which vectorizes without reordering
    any sum) added up at the end.
    """
    n, dd = data.shape
    bs = _BLOCK
    ntri = dd * (dd + 1) // 2
    yb = np.empty((dd, bs))  # the block's records, transposed
    lb = np.empty((dd, bs))  # their legs u_i
    zb = np.empty((dd, bs))  # f'(c_i) u_i
    cb = np.empty(bs)
    fb = np.empty(bs)
    gb = np.empty(bs)
    acc_s = np.zeros(bs)
    acc_p = np.zeros((dd, bs))
    acc_u = np.zeros((ntri, bs))
    for i0 in range(0, n, bs):
        nb = min(bs, n - i0)
        for ii in range(nb):
            cb[ii] = 0.0
        for j in range(dd):
            xj = x[j]
            for ii in range(nb):
                y = data[i0 + ii, j]
                yb[j, ii] = y
                cb[ii] += y * xj
        for ii in range(nb):
            ci = cb[ii] / r2
            f, fp = _weights(ci)
            cb[ii] = ci
            fb[ii] = f
            gb[ii] = fp
            acc_s[ii] += f * ci
        for j in range(dd):
            xj = x[j]
            for ii in range(nb):
                y = yb[j, ii]
                acc_p[j, ii] += fb[ii] * y
                leg = y - cb[ii] * xj
                lb[j, ii] = leg
                zb[j, ii] = gb[ii] * leg
        t = 0
        for j in range(dd):
            for m in range(j, dd):
                for ii in range(nb):
                    acc_u[t, ii] += zb[j, ii] * lb[m, ii]
                t += 1
    s_sum = 0.0
    for ii in range(bs):
        s_sum += acc_s[ii]
    for j in range(dd):
        acc = 0.0
        for ii in range(bs):
            acc += acc_p[j, ii]
        p[j] += acc
    t = 0
    for j in range(dd):
        for m in range(j, dd):
            acc = 0.0
            for ii in range(bs):
                acc += acc_u[t, ii]
            u[j, m] += acc
            t += 1
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
