r"""Fused log-density pieces of :class:`~pymc_manidp.geometry.kendall.KendallShape` in numba.

Chart coordinates ``c`` (``d = 2k - 4``) at the frame ``(z, E)`` of ``chart_frame``
(the origin's pre-shape ``(k, 2)`` and its horizontal basis ``(d, k, 2)``) give the
pre-shape

.. math:: x = \cos(t)\, z + \frac{\sin t}{t}\, c^\top E, \qquad t = |c|,

and the volume density of that chart is :math:`(\sin t/t)^{2k-6}\,\sin 2t/(2t)`.

KNG's norm follows ``KendallShape.pt_frechet_gradient_norm``: with ``J`` the rotation
by 90 degrees, ``re_i = <y_i, x>``, ``im_i = <y_i, J x>``, ``q_i = re_i^2 + im_i^2``,
``c_i = sqrt(q_i) = cos(theta_i)``, ``w_i = theta_i/sin(theta_i)`` and ``h_i = w_i/c_i``,

.. math:: T = \sum_i h_i\,(re_i\, y_i - im_i\, J y_i) - \Big(\sum_i w_i c_i\Big) x,
          \qquad N = \sqrt{|T|^2 + 10^{-300}}.

Its gradient in ``x`` (all of ``re_i, im_i`` move with ``x``), with ``g = T/N``, is

.. math:: \nabla_x N = H g - (g\cdot x)\, r - \Big(\sum_i w_i c_i\Big) g,

where ``H = sum_i [y_i, J y_i] M_i [y_i, J y_i]^T`` is symmetric (``M_i`` the 2 x 2
Jacobian of ``(h re, h im)`` in ``(re, im)``, symmetric since both are derivatives of one
function of ``q``) and ``r = sum_i d(w c)/d(re, im) . (y_i, -J y_i)``. ``g`` is known only
after the sum over the records, so the kernel makes two passes over them: ``T`` (so
``g``) first, then ``H g`` as ``sum_i [y_i, J y_i] M_i [y_i . g, J y_i . g]^T``, ``O(k)``
per record each. The first pass keeps, block by block, the records transposed and
their coefficients in a workspace (``(2k + 8)`` doubles a record, 2 MB at most:
``n = 16384`` at ``k = 4``), which the second reads instead of the rows and instead of
computing the coefficients again; the blocks beyond it are computed again.

One pass is possible (sum ``H`` itself, ``O(k^2)`` per record, beside ``T``; commit
b1d4952 on branch fz_kendall), and was dropped: at ``n = 10^4`` it took 140/180/225/
360/530 us at ``k = 3/4/5/6/8`` against 180/200/240/280/340 us for the two passes then
(both recomputing the coefficients and reading rows), and doubled the kernel's cold
compile (6.6 s against 3.6 s, loaded machine).

Speed: each block of ``_BLOCK`` records is read row by row (contiguous) into lanes
(coordinate, record), and every loop after that runs over the lanes without a branch,
so LLVM vectorizes it (no fastmath): ``re``/``im``, the scalar functions of ``q``
(``_atan2_pos`` instead of libm's ``atan2``, a call per record numba cannot vectorize;
170 -> 51 us for that phase at ``k = 3``), and the sums, kept one per lane (so no
reassociation is needed) and the lanes summed at the end. Value and gradient at
``n = 10^4`` (``docs/benchmarks/bench_fused_kendall.py``, the K4 case of
``profile_first_release.py``, both kernels in one process, interleaved, medians of
200): 91/78/121/140 us at ``k = 4/3/6/8`` against 194/175/259/325 us for the previous
kernel (rows read per record and coefficients computed in both passes), 2.1-2.3x
(2 shared cores under load, 2026-11-28); at ``k = 4``, 1.4x at ``n = 10^5`` and
1.2x at ``10^6`` (memory-bound: the rows are read twice). An unbounded workspace
(``O(n)``, allocated on each call) was 3x slower than the previous kernel at
``n = 10^6`` (page faults). Earlier: a first per-record loop with libm's
``atan2`` and ``H`` took 535 us at ``k = 3``; PyTensor's compiled value and gradient
of the same norm took 240/215/238/253 us at ``k = 3/4/6/8``. The sums' new order
moves the value near the records' mean (``T`` ~75 times smaller than its terms) by
~1e-13 relative, no less accurate than before against the same terms summed exactly.
"""

from __future__ import annotations

import math

import numpy as np

from pymc_manidp.geometry._numba.cache import njit
from pymc_manidp.geometry._numba.fused import cephes

__all__ = ["kng_norm", "log_volume_density", "params"]

# the branch points of pt_numerics (cos_sqrt, sinc_sqrt, theta_over_sin: _SMALL_SQ;
# log_sinc_sqrt: _LOG_SERIES_SQ), so each value takes the graph's branch
_SMALL_SQ = 1e-8
_LOG_SERIES_SQ = 0.05**2
_PI_SQ = math.pi**2


def params(manifold) -> np.ndarray:
    """``[2k - 6]``: the power of ``sin t / t`` in the volume density."""
    return np.array([2.0 * manifold.k_landmarks - 6.0])


@njit(cache=True, error_model="numpy", inline="always")
def _log_sinc_sqrt(s):
    """``log(sin(sqrt s)/sqrt s)`` and its derivative in ``s`` (``pt_numerics.log_sinc_sqrt``)."""
    if s < _LOG_SERIES_SQ:
        val = -(s / 6.0 + s**2 / 180.0 + s**3 / 2835.0 + s**4 / 37800.0 + s**5 / 467775.0)
        der = -(1 / 6 + s / 90 + s**2 / 945 + s**3 / 9450 + s**4 / 93555)
        return val, der
    if s < _PI_SQ:
        r = math.sqrt(s)
        sn = math.sin(r)
        return math.log(sn / r), (math.cos(r) / sn - 1.0 / r) / (2.0 * r)
    # the graph's constant -inf branch: no gradient flows through it
    return -np.inf, 0.0


@njit(cache=True, error_model="numpy")
def log_volume_density(c, frame, params, g_c):
    """``log J(c) = (2k-6) log sinc|c| + log sinc(2|c|)``; adds its gradient to ``g_c``."""
    s = 0.0
    for a in range(c.shape[0]):
        s += c[a] * c[a]
    v1, d1 = _log_sinc_sqrt(s)
    v4, d4 = _log_sinc_sqrt(4.0 * s)
    p = params[0]
    fac = 2.0 * (p * d1 + 4.0 * d4)
    for a in range(c.shape[0]):
        g_c[a] += fac * c[a]
    return p * v1 + v4


@njit(cache=True, error_model="numpy", inline="always")
def _exp_coefficients(s):
    """``cos sqrt s``, ``sinc sqrt s`` and their derivatives in ``s`` (the graph's
    ``cos_sqrt``/``sinc_sqrt``, series below ``s = 1e-8``)."""
    if s < _SMALL_SQ:
        return (
            1.0 - s / 2.0 + s * s / 24.0,
            -0.5 + s / 12.0,
            1.0 - s / 6.0 + s * s / 120.0,
            -1.0 / 6.0 + s / 60.0,
        )
    r = math.sqrt(s)
    cs, sn = math.cos(r), math.sin(r)
    return cs, -sn / (2.0 * r), sn / r, (r * cs - sn) / (2.0 * r * s)


# Cephes' atan (cephes.py, shared by the fused kernels' branch-free atan2)
_P = cephes.ATAN_P
_Q = cephes.ATAN_Q
_MOREBITS = cephes.MOREBITS
_TAN_3PI_8 = cephes.TAN_3PI_8
_BLOCK = 64  # records per block (vector lanes of the scalar phase)
# the workspace's size, doubles: 2 MB keeps n = 10^4 records at k = 4 (their rows
# and coefficients) in L2/L3; a larger one, allocated on each call, costs more in
# page faults and memory traffic than recomputing (3x slower at n = 10^6)
_WORK_DOUBLES = 2**18


@njit(cache=True, error_model="numpy", inline="always")
def _atan2_pos(r, c):
    """``atan2(r, c)`` for ``r >= 0``, ``c >= 0``, without a branch (selects only), so
    that a loop of it vectorizes; libm's ``atan2`` is a call numba cannot."""
    # the reduced argument -1/t, (t - 1)/(t + 1) or t (t = r/c) as one quotient
    big = r > _TAN_3PI_8 * c
    mid = r > 0.66 * c
    num = -c if big else (r - c if mid else r)
    den = r if big else (r + c if mid else c)
    xr = num / den
    y0 = np.pi / 2 if big else (np.pi / 4 if mid else 0.0)
    extra = _MOREBITS if big else (0.5 * _MOREBITS if mid else 0.0)
    z = xr * xr
    pz = (((_P[0] * z + _P[1]) * z + _P[2]) * z + _P[3]) * z + _P[4]
    qz = ((((z + _Q[0]) * z + _Q[1]) * z + _Q[2]) * z + _Q[3]) * z + _Q[4]
    return y0 + (xr * z * pz / qz + xr + extra)


# not inlined: a separate function keeps the cold compile shorter
@njit(cache=True, error_model="numpy")
def _coefficients(reb, imb, nb, co):
    """The coefficients of a block's records from their ``re``, ``im``: ``h re``,
    ``h im``, the Jacobian of ``(h re, h im)`` in ``(re, im)`` (``d/dre re``, the shared
    cross term, ``d/dim im``), the gradient of ``w c`` in ``(re, im)`` and ``w c``, in
    ``co[0..7]``; zero in the block's spare lanes. One loop with no branch and no call,
    so that it vectorizes."""
    bs = reb.shape[0]
    for ii in range(bs):
        re = reb[ii]
        im = imb[ii]
        q = re * re + im * im
        cc = math.sqrt(q)
        ic = 1.0 / cc
        sp = 1.0 - q
        # theta_over_sin(1 - q, c) and its derivative in q, both branches computed
        # and one selected (the graph's switch), so the loop has no branch
        series = (sp < _SMALL_SQ) & (cc > 0.0)
        r = math.sqrt(1.0 if series else sp)
        ir = 1.0 / r
        w_far = _atan2_pos(r, cc) * ir
        w = 1.0 + sp / 6.0 + 3.0 * sp * sp / 40.0 if series else w_far
        h = w * ic
        live = ii < nb  # the last block's spare lanes add nothing
        co[0, ii] = h * re if live else 0.0
        co[1, ii] = h * im if live else 0.0
        co[7, ii] = w * cc if live else 0.0
        dw = -(1.0 / 6.0 + 3.0 * sp / 20.0) if series else 0.5 * ir * ir * (w_far - ic)
        dh = (dw - 0.5 * h * ic) * ic  # d(w/c)/dq
        dr = dw * cc + 0.5 * h  # d(w c)/dq
        co[2, ii] = h + 2.0 * dh * re * re if live else 0.0
        co[3, ii] = 2.0 * dh * re * im if live else 0.0
        co[4, ii] = h + 2.0 * dh * im * im if live else 0.0
        co[5, ii] = 2.0 * dr * re if live else 0.0
        co[6, ii] = 2.0 * dr * im if live else 0.0


@njit(cache=True, error_model="numpy", inline="always")
def _finish(tot, big_s, x):
    """``T = tot - S x`` in place, ``N``, ``g = T/N`` and ``g . x``."""
    m2 = x.shape[0]
    f = 0.0
    for a in range(m2):
        tot[a] -= big_s * x[a]
        f += tot[a] * tot[a]
    norm = math.sqrt(f + 1e-300)
    g = np.empty(m2)
    gx = 0.0
    for a in range(m2):
        g[a] = tot[a] / norm
        gx += g[a] * x[a]
    return norm, g, gx


@njit(cache=True, error_model="numpy")
def _block(data, i0, nb, x, buf, reb, imb):
    """Records ``i0 .. i0 + nb`` into ``buf``: their 8 coefficients (``_coefficients``)
    in ``buf[:8]``, then the records transposed (``buf[8 + a, ii]``, spare lanes 0),
    read row by row (contiguous) so that the loops over the lanes vectorize."""
    k = data.shape[1]
    bs = buf.shape[1]
    co = buf[:8]
    yb = buf[8:]
    for ii in range(nb):
        for j in range(k):
            yb[2 * j, ii] = data[i0 + ii, j, 0]
            yb[2 * j + 1, ii] = data[i0 + ii, j, 1]
    for ii in range(nb, bs):
        for a in range(2 * k):
            yb[a, ii] = 0.0
    for ii in range(bs):
        reb[ii] = 0.0
        imb[ii] = 0.0
    for j in range(k):
        x0 = x[2 * j]
        x1 = x[2 * j + 1]
        for ii in range(bs):
            y0 = yb[2 * j, ii]
            y1 = yb[2 * j + 1, ii]
            reb[ii] += y0 * x0 + y1 * x1
            imb[ii] += y1 * x0 - y0 * x1
    for ii in range(nb, bs):  # spare lanes: a harmless record (q = 1)
        reb[ii] = 1.0
        imb[ii] = 0.0
    _coefficients(reb, imb, nb, co)


@njit(cache=True, error_model="numpy")
def _norm_two_pass(x, data):
    """``N`` and its gradient in ``x`` in two passes: ``T`` (so ``g``), then
    ``sum_i [y_i, J y_i] (M_i (y_i . g, J y_i . g) - (g . x) grad(w c)_i)``, ``O(k)``
    per record each. The first keeps the first blocks (``_block``: records transposed
    and coefficients; ``_WORK_DOUBLES`` at most) in ``work`` for the second, which so
    reads their rows and computes their coefficients once; later blocks are computed
    again. Sums go by lanes (``acc[a, ii]``: one partial sum per lane, so the loops
    vectorize without reassociation), the lanes summed at the end."""
    n = data.shape[0]
    m2 = x.shape[0]
    k = m2 // 2
    bs = _BLOCK
    nblk = (n + bs - 1) // bs
    reb = np.empty(bs)
    imb = np.empty(bs)
    nw = min(nblk, _WORK_DOUBLES // ((8 + m2) * bs))
    work = np.empty((nw, 8 + m2, bs))
    spare = np.empty((8 + m2, bs))  # the blocks beyond the workspace, one at a time
    acc = np.zeros((m2 + 1, bs))
    for b in range(nblk):
        i0 = b * bs
        buf = work[b] if b < nw else spare
        _block(data, i0, min(bs, n - i0), x, buf, reb, imb)
        co = buf[:8]
        yb = buf[8:]
        for ii in range(bs):
            acc[m2, ii] += co[7, ii]
        for j in range(k):
            for ii in range(bs):
                p = co[0, ii]
                qq = co[1, ii]
                y0 = yb[2 * j, ii]
                y1 = yb[2 * j + 1, ii]
                acc[2 * j, ii] += p * y0 + qq * y1
                acc[2 * j + 1, ii] += p * y1 - qq * y0
    tot = np.zeros(m2)
    big_s = 0.0
    for ii in range(bs):
        for a in range(m2):
            tot[a] += acc[a, ii]
        big_s += acc[m2, ii]
    norm, g, gx = _finish(tot, big_s, x)

    acc[:] = 0.0
    gyb = np.empty(bs)
    gzb = np.empty(bs)
    for b in range(nblk):
        if b < nw:
            buf = work[b]
        else:
            i0 = b * bs
            buf = spare
            _block(data, i0, min(bs, n - i0), x, buf, reb, imb)
        co = buf[:8]
        yb = buf[8:]
        for ii in range(bs):
            gyb[ii] = 0.0
            gzb[ii] = 0.0
        for j in range(k):
            g0 = g[2 * j]
            g1 = g[2 * j + 1]
            for ii in range(bs):
                y0 = yb[2 * j, ii]
                y1 = yb[2 * j + 1, ii]
                gyb[ii] += g0 * y0 + g1 * y1
                gzb[ii] += g1 * y0 - g0 * y1
        for ii in range(bs):  # y.g, Jy.g -> the record's two weights (alpha, beta)
            gy = gyb[ii]
            gz = gzb[ii]
            c3 = co[3, ii]
            gyb[ii] = co[2, ii] * gy - c3 * gz - co[5, ii] * gx
            gzb[ii] = co[4, ii] * gz - c3 * gy + co[6, ii] * gx
        for j in range(k):
            for ii in range(bs):
                al = gyb[ii]
                be = gzb[ii]
                y0 = yb[2 * j, ii]
                y1 = yb[2 * j + 1, ii]
                acc[2 * j, ii] += al * y0 - be * y1
                acc[2 * j + 1, ii] += al * y1 + be * y0
    grad_x = np.zeros(m2)
    for ii in range(bs):
        for a in range(m2):
            grad_x[a] += acc[a, ii]
    for a in range(m2):
        grad_x[a] -= big_s * g[a]
    return norm, grad_x


@njit(cache=True, error_model="numpy")
def kng_norm(c, frame, params, data, weight, g_c):
    """``||sum_i log_x(y_i)||`` at ``x = exp_frame(frame, c)`` (module docstring); adds
    ``weight`` times its gradient in ``c`` to ``g_c``."""
    origin, basis = frame
    d = c.shape[0]
    k = origin.shape[0]
    m2 = 2 * k
    s = 0.0
    for a in range(d):
        s += c[a] * c[a]
    cs, dcs, sc, dsc = _exp_coefficients(s)
    z0 = np.empty(m2)
    v = np.zeros(m2)
    for j in range(k):
        for e in range(2):
            z0[2 * j + e] = origin[j, e]
            acc = 0.0
            for a in range(d):
                acc += c[a] * basis[a, j, e]
            v[2 * j + e] = acc
    x = np.empty(m2)
    for b in range(m2):
        x[b] = cs * z0[b] + sc * v[b]
    norm, grad_x = _norm_two_pass(x, data)
    # through the exp chart
    gz0 = 0.0
    gv = 0.0
    for b in range(m2):
        gz0 += grad_x[b] * z0[b]
        gv += grad_x[b] * v[b]
    radial = 2.0 * (dcs * gz0 + dsc * gv)
    for a in range(d):
        acc = 0.0
        for j in range(k):
            for e in range(2):
                acc += basis[a, j, e] * grad_x[2 * j + e]
        g_c[a] += weight * (radial * c[a] + sc * acc)
    return norm
