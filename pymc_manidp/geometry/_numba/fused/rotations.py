r"""Fused log-density kernels of :class:`~pymc_manidp.geometry.rotations.Rotations`.

The exp chart's log volume density and KNG's norm :math:`|\sum_i \log_x(x_i)|_x`, each
with its exact gradient in the chart coordinates ``c``, as numba kernels: one pass over
the records, nothing of the data's size allocated (``docs/architecture.md``; the
contract of ``geometry/_numba/fused``, composed with the polar chart by
``pymc_manidp.laws.fused``). They equal the PyTensor graphs
``Rotations.pt_log_volume_density(c)`` and
``Rotations.pt_frechet_gradient_norm(Rotations.pt_exp_frame(frame, c), data)`` to
rounding, branch for branch.

The metric is :math:`\tfrac12\operatorname{tr}(U^\top V)`, so ``x hat(w)`` has length
``|w|``, and the frame ``(origin, basis)`` of ``Rotations.chart_frame(origin)`` is
``basis_k = origin hat(e_k)``. The chart point is

.. math:: x(c) = O\,R(w), \qquad w = A c, \quad
          A_{jk} = \operatorname{vee}(O^\top B_k)_j,

(``A`` is the identity to rounding for the package's frames; it is kept so that ``w`` is
the graph's ``vee(O^T sum_k c_k B_k)`` for any frame), ``R(w) = expm(hat(w))`` by
Rodrigues' formula as the graph writes it. Its derivative is the right Jacobian:
:math:`dR = R\,\widehat{J_r(w)\,dw}` with
:math:`J_r(w) = I - \alpha \hat w + \beta \hat w^2`, ``t = |w|``,
:math:`\alpha = (1 - \cos t)/t^2 = \tfrac12\operatorname{sinc}(t/2)^2`,
:math:`\beta = (t - \sin t)/t^3`.

The norm. With ``M_i = x^T x_i``, ``v_i = vee(M_i)``, ``cos_i = (tr M_i - 1)/2``,
``f_i = theta_over_sin(|v_i|^2, cos_i)`` (``theta/sin(theta)``, the graph's series
near 0), the norm is ``N = sqrt(|T|^2 + 1e-300)``, ``T = sum_i f_i v_i``. Under
``dx = x hat(delta)``, ``dM_i = -hat(delta) M_i``, which gives (for any matrix ``M_i``,
orthogonal or not)

.. math:: dv_i = \tfrac12\,(M_i - \operatorname{tr}(M_i) I)\,\delta, \qquad
          d\cos_i = v_i\cdot\delta,

so with ``u = T/N`` and ``f_s, f_c`` the partial derivatives of ``f`` in ``s = |v|^2``
and ``cos``,

.. math:: \partial N/\partial\delta = H u, \qquad
          H = \sum_i \tfrac12 f_i P_i + (f_{s,i} P_i v_i + f_{c,i} v_i)\,v_i^\top,
          \quad P_i = M_i^\top - \operatorname{tr}(M_i) I.

``H`` is linear in the records and does not depend on ``u``, so ``T`` and ``H`` (12
numbers) are summed in the same pass and the gradient is finished in O(1):
:math:`\partial N/\partial c = A^\top J_r(w)^\top H u`.

Range: exact (equal to the graph to rounding) wherever the graph is finite, i.e. every
record's angle from ``x`` below ``pi`` (``|v_i| > 0`` or ``cos_i > 0``); at a half turn
both give ``inf``. Near a half turn ``v_i`` (a difference of entries) loses relative
accuracy in both alike; the public ball (radius below ``pi/2``) keeps records far from it.
``c`` may be anywhere: the norm is defined for every ``x``, and the log volume density is
``-inf`` (gradient 0) past ``|c| = pi``, as the graph.

Speed: ``kng_norm`` copies each block of ``_BLOCK`` records into columns, then runs one
loop over them with no branch and no call, which LLVM vectorizes (8 records a zmm
register, no fastmath): both branches of ``theta_over_sin`` are computed and one
selected, and its angle is ``_atan2_upper`` (Cephes' ``atan`` with selects, within 2
ulp of libm's ``atan2``) where libm's call made each record a scalar call. ``T`` and
``H`` are summed per lane (``_BLOCK`` running sums of ~n/128 terms each, added at the
end): the same sums on any vector width, and less rounding than one running sum
(near the records' mean ``|T|`` is far below the sum of its terms' lengths: 7e-16
against 8e-15 relative to the exactly summed terms at ``x`` 1e-3 from the mean, 2e-13
against 1.6e-12 where ``|T|`` is 1e-5 of that sum). At ``n = 10^4`` (the SO3 case of
``docs/benchmarks/profile_first_release.py``, ``x`` near the records' mean or 0.3 r
away) 60 us a call against 180 us for the kernel before (commit 9c1cb25: three loops
a block and libm's ``atan``), a ratio of 3.0 (``docs/benchmarks/bench_fused_rotations.py``,
interleaved medians of 300, 2026-11-28, load ~6 on 2 cores); values within 8e-15
relative of that kernel's, gradients within 4e-15. The cold compile of ``kng_norm``
grew by ~0.6 CPU s (1.0-1.1 s to 1.5-1.8 s). A warm NUTS release of KNG (the same case,
``profile_first_release.py SO3:KNG:10000``, load ~4.7): sampling 11.3-11.9 s -> 4.1-4.4 s,
release CPU 7.8 -> 3.0 s (docs/benchmarks.md).
"""

from __future__ import annotations

import numpy as np

# numba's njit, but cache=True caches in the package's checked cache folder only
from pymc_manidp.geometry._numba.cache import njit
from pymc_manidp.geometry._numba.fused import cephes

__all__ = ["kng_norm", "log_volume_density", "params"]

# the graph's thresholds (geometry/_numba/pt_numerics.py): its series branches
_SMALL_SQ = 1e-8  # sinc_sqrt and theta_over_sin: s below it
_LOG_SERIES_SQ = 0.05**2  # log_sinc_sqrt: s below it
_PI_SQ = np.pi**2
# beta = (t - sin t)/t^3 by its series below t^2 = 1e-2 (next term t^10/13! < 2e-20);
# above, (1 - sinc t)/t^2 loses ~eps/t^2 relative, but beta enters times hat(w)^2 ~ t^2
_BETA_SERIES_SQ = 1e-2
# records per block of kng_norm's loop: its rows (9 x 128 doubles) and the per-lane
# sums (12 x 128) stay in L1; 128 was a few percent faster than 64 and 256 (and the
# rows copied to columns first than M computed from the records in place)
_BLOCK = 128

# Cephes' atan (cephes.py, shared by the fused kernels' branch-free atan2)
_ATAN_P = cephes.ATAN_P
_ATAN_Q = cephes.ATAN_Q
_MOREBITS = cephes.MOREBITS
_TAN_3PI_8 = cephes.TAN_3PI_8
_TINY = 2.0**-900
_HUGE = 2.0**900
_TINY_SCALE = 2.0**200


def params(manifold) -> np.ndarray:
    """The kernels' constants: none (the metric's scale is fixed, ``1/2 tr``).

    Parameters
    ----------
    manifold : Rotations

    Returns
    -------
    ndarray, shape ``(0,)``
    """
    return np.zeros(0)


@njit(cache=True, error_model="numpy", inline="always")
def _sinc_sqrt(s):
    """``sin(sqrt(s))/sqrt(s)``, the graph's series below ``1e-8``."""
    if s < _SMALL_SQ:
        return 1.0 - s / 6.0 + s * s / 120.0
    r = np.sqrt(s)
    return np.sin(r) / r


@njit(cache=True, error_model="numpy", inline="always")
def _atan2_upper(r, c):
    """``atan2(r, c)`` for ``r >= 0`` (the upper half plane), with selects only, so that
    a loop of it vectorizes: libm's ``atan2`` is a call, which numba cannot vectorize.

    Cephes' ``atan`` of ``r/|c|``, its reduction written as one quotient, and for
    ``c < 0`` (``-0.0`` too, as libm) the supplement ``pi - atan2(r, |c|)`` with the
    multiple of ``pi/4`` and the tail subtracted apart, so that it is as accurate.
    Within 2 ulp of ``math.atan2`` from subnormal arguments to ``1e308`` (tested, and
    at each reduction threshold); ``atan2(0, +-0)`` is ``0``/``pi`` and
    ``atan2(inf, c)`` is ``pi/2``, as libm's (both infinite: NaN, libm's ``pi/4``).
    """
    ac = abs(c)
    # the threshold products 0.66|c| lose bits below 2^-900 (subnormal) and overflow
    # above 2^900: scale both (the angle is the same; an r made inf or 0 is, too)
    scale = _TINY_SCALE if ac < _TINY else (1.0 / _TINY_SCALE if ac > _HUGE else 1.0)
    r = r * scale
    ac = ac * scale
    big = r > _TAN_3PI_8 * ac
    mid = r > 0.66 * ac
    # the reduced argument -|c|/r, (r - |c|)/(r + |c|) or r/|c|
    num = -ac if big else (r - ac if mid else r)
    den = r if big else (r + ac if mid else ac)
    # den is 0 only at r = c = 0, whose angle is 0 (or pi)
    xr = num / den if den != 0.0 else 0.0
    z = xr * xr
    pz = (((_ATAN_P[0] * z + _ATAN_P[1]) * z + _ATAN_P[2]) * z + _ATAN_P[3]) * z + _ATAN_P[4]
    qz = ((((z + _ATAN_Q[0]) * z + _ATAN_Q[1]) * z + _ATAN_Q[2]) * z + _ATAN_Q[3]) * z
    tail = xr * z * pz / (qz + _ATAN_Q[4]) + xr
    y0 = np.pi / 2 if big else (np.pi / 4 if mid else 0.0)
    extra = _MOREBITS if big else (0.5 * _MOREBITS if mid else 0.0)
    # c < 0 (the sign bit, so -0.0 too, as libm): pi - (y0 + extra) - tail, the multiple
    # of pi/4 (float(pi) - y0 is exact) and the low parts (2 _MOREBITS - extra) apart
    if np.copysign(1.0, c) < 0.0:
        return (np.pi - y0) + ((2.0 * _MOREBITS - extra) - tail)
    return y0 + (tail + extra)


@njit(cache=True, error_model="numpy", inline="always")
def _theta_over_sin(s, c):
    """``theta/sin(theta)`` from ``s = sin^2``, ``c = cos`` (the graph's
    ``theta_over_sin``), and its partial derivatives in ``s`` and ``c``.

    The graph's ``atan2(r, c)/r`` is differentiated as written (``r^2 + c^2`` is not
    replaced by 1), so the two gradients are the same numbers for records slightly off
    the group too. Both branches are computed and one selected (the graph's switch),
    so that kng_norm's loop over the records has no branch and vectorizes.
    """
    series = (s < _SMALL_SQ) & (c > 0.0)
    r = np.sqrt(s)
    # two divisions where the formula as written has five
    inv_r = 1.0 / r
    inv_rc = 1.0 / (r * r + c * c)
    f = _atan2_upper(r, c) * inv_r
    # d(atan2(r, c)/r)/dr = c/(r (r^2 + c^2)) - theta/r^2, and dr/ds = 1/(2r)
    fs = 0.5 * inv_r * inv_r * (c * inv_rc - f)
    if series:
        return 1.0 + s / 6.0 + 3.0 * s * s / 40.0, 1.0 / 6.0 + 0.15 * s, 0.0
    return f, fs, -inv_rc


@njit(cache=True, error_model="numpy")
def log_volume_density(c, frame, params, g_c):
    """``2 log(sin(t/2)/(t/2))``, ``t = |c| <= pi`` (``-inf`` beyond): the graph's
    ``Rotations.pt_log_volume_density(c)``, its series below ``t/2 = 0.05``.

    Parameters
    ----------
    c : ndarray, shape ``(3,)``
        Chart coordinates.
    frame : tuple of ndarray
        ``(origin, basis)`` of ``Rotations.chart_frame`` (unused: the density is radial).
    params : ndarray, shape ``(0,)``
    g_c : ndarray, shape ``(3,)``
        ``d logJ/dc`` is added to it (nothing past ``pi``, where the graph's is 0).

    Returns
    -------
    float
    """
    s = c[0] * c[0] + c[1] * c[1] + c[2] * c[2]
    if not s <= _PI_SQ:
        return -np.inf
    q = s / 4.0
    if q < _LOG_SERIES_SQ:
        # -(q/6 + q^2/180 + q^3/2835 + q^4/37800 + q^5/467775), Horner
        val = -q * (1 / 6 + q * (1 / 180 + q * (1 / 2835 + q * (1 / 37800 + q / 467775))))
        dval = -(1 / 6 + q * (2 / 180 + q * (3 / 2835 + q * (4 / 37800 + q * 5 / 467775))))
    else:
        r = np.sqrt(q)
        sr = np.sin(r)
        val = np.log(sr / r)
        dval = (np.cos(r) / sr - 1.0 / r) / (2.0 * r)
    # d(2 val(|c|^2/4))/dc = dval/dq c
    for k in range(3):
        g_c[k] += dval * c[k]
    return 2.0 * val


@njit(cache=True, error_model="numpy")
def _chart_point(c, origin, basis, x, a):
    """Fill ``x = O R(A c)`` and ``A``; return ``w = A c`` and ``s = |w|^2``."""
    for k in range(3):
        # O^T B_k, read by vee
        for j in range(3):
            a[j, k] = 0.0
        m01 = m02 = m10 = m12 = m20 = m21 = 0.0
        for m in range(3):
            m01 += origin[m, 0] * basis[k, m, 1]
            m02 += origin[m, 0] * basis[k, m, 2]
            m10 += origin[m, 1] * basis[k, m, 0]
            m12 += origin[m, 1] * basis[k, m, 2]
            m20 += origin[m, 2] * basis[k, m, 0]
            m21 += origin[m, 2] * basis[k, m, 1]
        a[0, k] = 0.5 * (m21 - m12)
        a[1, k] = 0.5 * (m02 - m20)
        a[2, k] = 0.5 * (m10 - m01)
    w0 = a[0, 0] * c[0] + a[0, 1] * c[1] + a[0, 2] * c[2]
    w1 = a[1, 0] * c[0] + a[1, 1] * c[1] + a[1, 2] * c[2]
    w2 = a[2, 0] * c[0] + a[2, 1] * c[1] + a[2, 2] * c[2]
    s = w0 * w0 + w1 * w1 + w2 * w2
    half = _sinc_sqrt(s / 4.0)
    b = 0.5 * half * half
    sc = _sinc_sqrt(s)
    dg = 1.0 - b * s
    # R = dg I + sc hat(w) + b w w^T
    r00 = dg + b * w0 * w0
    r11 = dg + b * w1 * w1
    r22 = dg + b * w2 * w2
    r01 = -sc * w2 + b * w0 * w1
    r10 = sc * w2 + b * w0 * w1
    r02 = sc * w1 + b * w0 * w2
    r20 = -sc * w1 + b * w0 * w2
    r12 = -sc * w0 + b * w1 * w2
    r21 = sc * w0 + b * w1 * w2
    for i in range(3):
        o0, o1, o2 = origin[i, 0], origin[i, 1], origin[i, 2]
        x[i, 0] = o0 * r00 + o1 * r10 + o2 * r20
        x[i, 1] = o0 * r01 + o1 * r11 + o2 * r21
        x[i, 2] = o0 * r02 + o1 * r12 + o2 * r22
    return w0, w1, w2, s, b, sc


@njit(cache=True, error_model="numpy")
def kng_norm(c, frame, params, data, weight, g_c):
    """KNG's norm ``|sum_i log_x(x_i)|_x`` at ``x = exp_frame(frame, c)`` and its gradient.

    Equal to rounding to
    ``Rotations.pt_frechet_gradient_norm(Rotations.pt_exp_frame(frame, c), data)``
    (module docstring: the formulas and the range).

    Parameters
    ----------
    c : ndarray, shape ``(3,)``
        Chart coordinates.
    frame : tuple of ndarray
        ``(origin (3, 3), basis (3, 3, 3))`` of ``Rotations.chart_frame``.
    params : ndarray, shape ``(0,)``
    data : ndarray, shape ``(n, 3, 3)``
        The records, float64, C-contiguous.
    weight : float
        ``weight * dN/dc`` is added to ``g_c``.
    g_c : ndarray, shape ``(3,)``

    Returns
    -------
    float
    """
    origin, basis = frame
    x = np.empty((3, 3))
    a = np.empty((3, 3))
    w0, w1, w2, s, alpha, sc = _chart_point(c, origin, basis, x, a)
    x00, x01, x02 = x[0, 0], x[0, 1], x[0, 2]
    x10, x11, x12 = x[1, 0], x[1, 1], x[1, 2]
    x20, x21, x22 = x[2, 0], x[2, 1], x[2, 2]
    # Blocks of _BLOCK records: their rows copied into the columns of ``rows`` (one
    # record a column), then one loop over the columns with no branch and no call, which
    # LLVM vectorizes (8 records a zmm register). The records are read once; each lane
    # j of ``sums`` adds the terms of records j, j + _BLOCK, ... in order, and the lanes
    # are added at the end: the same sums on any vector width, and ~80 terms a chain
    # rather than n (rounding ~10x smaller than one running sum's at n = 10^4).
    rows = np.empty((9, _BLOCK))
    sums = np.zeros((12, _BLOCK))
    n = data.shape[0]
    for start in range(0, n, _BLOCK):
        size = min(_BLOCK, n - start)
        for j in range(size):
            i = start + j
            rows[0, j], rows[1, j], rows[2, j] = data[i, 0, 0], data[i, 0, 1], data[i, 0, 2]
            rows[3, j], rows[4, j], rows[5, j] = data[i, 1, 0], data[i, 1, 1], data[i, 1, 2]
            rows[6, j], rows[7, j], rows[8, j] = data[i, 2, 0], data[i, 2, 1], data[i, 2, 2]
        for j in range(size):
            d00, d01, d02 = rows[0, j], rows[1, j], rows[2, j]
            d10, d11, d12 = rows[3, j], rows[4, j], rows[5, j]
            d20, d21, d22 = rows[6, j], rows[7, j], rows[8, j]
            # M = x^T x_i
            m00 = x00 * d00 + x10 * d10 + x20 * d20
            m01 = x00 * d01 + x10 * d11 + x20 * d21
            m02 = x00 * d02 + x10 * d12 + x20 * d22
            m10 = x01 * d00 + x11 * d10 + x21 * d20
            m11 = x01 * d01 + x11 * d11 + x21 * d21
            m12 = x01 * d02 + x11 * d12 + x21 * d22
            m20 = x02 * d00 + x12 * d10 + x22 * d20
            m21 = x02 * d01 + x12 * d11 + x22 * d21
            m22 = x02 * d02 + x12 * d12 + x22 * d22
            v0 = 0.5 * (m21 - m12)
            v1 = 0.5 * (m02 - m20)
            v2 = 0.5 * (m10 - m01)
            f, fs, fc = _theta_over_sin(v0 * v0 + v1 * v1 + v2 * v2, 0.5 * (m00 + m11 + m22 - 1.0))
            tr = m00 + m11 + m22
            sums[0, j] += f * v0
            sums[1, j] += f * v1
            sums[2, j] += f * v2
            # p = P v, P = M^T - tr I
            p0 = (m00 - tr) * v0 + m10 * v1 + m20 * v2
            p1 = m01 * v0 + (m11 - tr) * v1 + m21 * v2
            p2 = m02 * v0 + m12 * v1 + (m22 - tr) * v2
            q0 = fs * p0 + fc * v0
            q1 = fs * p1 + fc * v1
            q2 = fs * p2 + fc * v2
            hf = 0.5 * f
            # H, row by row
            sums[3, j] += hf * (m00 - tr) + q0 * v0
            sums[4, j] += hf * m10 + q0 * v1
            sums[5, j] += hf * m20 + q0 * v2
            sums[6, j] += hf * m01 + q1 * v0
            sums[7, j] += hf * (m11 - tr) + q1 * v1
            sums[8, j] += hf * m21 + q1 * v2
            sums[9, j] += hf * m02 + q2 * v0
            sums[10, j] += hf * m12 + q2 * v1
            sums[11, j] += hf * (m22 - tr) + q2 * v2
    tot = np.zeros(12)
    for k in range(12):
        for j in range(_BLOCK):
            tot[k] += sums[k, j]
    t0, t1, t2 = tot[0], tot[1], tot[2]
    h00, h01, h02, h10, h11, h12 = tot[3], tot[4], tot[5], tot[6], tot[7], tot[8]
    h20, h21, h22 = tot[9], tot[10], tot[11]
    norm = np.sqrt(t0 * t0 + t1 * t1 + t2 * t2 + 1e-300)
    u0, u1, u2 = t0 / norm, t1 / norm, t2 / norm
    # dN/d delta = H u, delta the body-frame increment dx = x hat(delta)
    e0 = h00 * u0 + h01 * u1 + h02 * u2
    e1 = h10 * u0 + h11 * u1 + h12 * u2
    e2 = h20 * u0 + h21 * u1 + h22 * u2
    # dN/dw = J_r(w)^T e = e + alpha w x e + beta (w (w.e) - s e)
    if s < _BETA_SERIES_SQ:
        beta = 1 / 6 - s * (1 / 120 - s * (1 / 5040 - s * (1 / 362880 - s / 39916800)))
    else:
        beta = (1.0 - sc) / s
    we = w0 * e0 + w1 * e1 + w2 * e2
    g0 = e0 + alpha * (w1 * e2 - w2 * e1) + beta * (w0 * we - s * e0)
    g1 = e1 + alpha * (w2 * e0 - w0 * e2) + beta * (w1 * we - s * e1)
    g2 = e2 + alpha * (w0 * e1 - w1 * e0) + beta * (w2 * we - s * e2)
    # dN/dc = A^T dN/dw
    for k in range(3):
        g_c[k] += weight * (a[0, k] * g0 + a[1, k] * g1 + a[2, k] * g2)
    return norm
