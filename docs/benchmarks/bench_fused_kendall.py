"""The fused Kendall KNG kernel (``kng_norm`` of
``pymc_manidp/geometry/_numba/fused/kendall.py``) against its previous version, copied
below (commit 9c1cb25), in one process on the same data.

Data: the K4 case of ``profile_first_release.py`` (planar shapes of 4 landmarks about
the unit square, radius r = 0.3, records at normal chart coordinates of scale 0.25 r,
n = 10^4), at the chart point ``x`` of the records' mean (chart origin there) and at
``x`` 0.3 r away; also k = 3, 6, 8 (same scheme, regular polygon), and at k = 4
n = 10^5, 10^6 (the records repeated; 50 and 7 calls). Calls interleaved
(old, new, old, ...), median of ``REPS`` (argument, default 300) each; prints both
medians, their ratio, the relative difference of the values and the largest difference
of the gradients relative to their largest entry, and each value's relative error
against the same terms summed exactly (near the records' mean ``T`` is a sum of terms
~75 times larger than itself: a new order of the sums moves it ~1e-13).

Run: ``PYTHONPATH=$PWD /work/main/.venv/bin/python docs/benchmarks/bench_fused_kendall.py``
"""

import math
import sys
import time

import numba
import numpy as np

import pymc_manidp as pmd
from pymc_manidp.geometry._numba.fused import kendall as new

REPS = int(sys.argv[1]) if len(sys.argv) > 1 else 300


def njit(*args, **options):  # the old kernel, compiled here (no disk cache)
    return numba.njit(**options)


# ---- the previous kernel (commit 9c1cb25), verbatim but for the decorators ----------
# the branch points of pt_numerics (cos_sqrt, sinc_sqrt, theta_over_sin: _SMALL_SQ;
# log_sinc_sqrt: _LOG_SERIES_SQ), so each value takes the graph's branch
_SMALL_SQ = 1e-8
_LOG_SERIES_SQ = 0.05**2
_PI_SQ = math.pi**2


@njit(error_model="numpy", inline="always")
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


# Cephes' atan (relative error below 2.4e-16 against libm's atan2 on [0, pi/2]):
# the reduction to |x| <= tan(pi/8) and the rational approximation there
_P = (
    -8.750608600031904122785e-1,
    -1.615753718733365076637e1,
    -7.500855792314704667340e1,
    -1.228866684490136173410e2,
    -6.485021904942025371773e1,
)
_Q = (
    2.485846490142306297962e1,
    1.650270098316988542046e2,
    4.328810604912902668951e2,
    4.853903996359136964868e2,
    1.945506571482613964425e2,
)
_TAN_3PI_8 = 2.41421356237309504880
_MOREBITS = 6.123233995736765886130e-17  # pi/2 - float(pi/2)
_BLOCK = 64  # records per block (vector lanes of the scalar phase)


@njit(error_model="numpy", inline="always")
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


# not inlined: called twice, and one compiled copy keeps the cold compile shorter
@njit(error_model="numpy")
def _coefficients(reb, imb, nb, co, derivatives):
    """The coefficients of a block's records from their ``re``, ``im``: ``h re``,
    ``h im``, the Jacobian of ``(h re, h im)`` in ``(re, im)`` (``d/dre re``, the shared
    cross term, ``d/dim im``), the gradient of ``w c`` in ``(re, im)`` and ``w c``; zero
    in the block's spare lanes. One loop with no branch and no call, so that it
    vectorizes. Without
    ``derivatives`` only ``co[0]``, ``co[1]``, ``co[7]`` (the value's)."""
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
        if derivatives:  # loop-invariant: LLVM makes two loops of this one
            dw = -(1.0 / 6.0 + 3.0 * sp / 20.0) if series else 0.5 * ir * ir * (w_far - ic)
            dh = (dw - 0.5 * h * ic) * ic  # d(w/c)/dq
            dr = dw * cc + 0.5 * h  # d(w c)/dq
            co[2, ii] = h + 2.0 * dh * re * re if live else 0.0
            co[3, ii] = 2.0 * dh * re * im if live else 0.0
            co[4, ii] = h + 2.0 * dh * im * im if live else 0.0
            co[5, ii] = 2.0 * dr * re if live else 0.0
            co[6, ii] = 2.0 * dr * im if live else 0.0


@njit(error_model="numpy", inline="always")
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


@njit(error_model="numpy", inline="always")
def _inner_rows(data, i0, nb, x, reb, imb):
    """``re``, ``im`` of records ``i0 .. i0 + nb`` (row by row: no transposition);
    spare lanes get a harmless record at ``x``."""
    k = data.shape[1]
    for ii in range(reb.shape[0]):
        reb[ii] = 1.0
        imb[ii] = 0.0
    for ii in range(nb):
        re = 0.0
        im = 0.0
        for j in range(k):
            y0 = data[i0 + ii, j, 0]
            y1 = data[i0 + ii, j, 1]
            re += y0 * x[2 * j] + y1 * x[2 * j + 1]
            im += y1 * x[2 * j] - y0 * x[2 * j + 1]
        reb[ii] = re
        imb[ii] = im


@njit(error_model="numpy")
def _norm_two_pass(x, data):
    """``N`` and its gradient in ``x`` in two passes: ``T`` (so ``g``), then
    ``sum_i [y_i, J y_i] (M_i (y_i . g, J y_i . g) - (g . x) grad(w c)_i)``: ``O(k)``
    per record each, the coefficients computed twice. Records are read row by row
    (contiguous), only the coefficients go by lanes."""
    n = data.shape[0]
    k = data.shape[1]
    m2 = x.shape[0]
    bs = _BLOCK
    reb = np.empty(bs)
    imb = np.empty(bs)
    co = np.empty((8, bs))
    tot = np.zeros(m2)
    blk = np.empty(m2)  # one block's sum first: sums of _BLOCK, then n/_BLOCK terms
    big_s = 0.0
    for i0 in range(0, n, bs):
        nb = min(bs, n - i0)
        _inner_rows(data, i0, nb, x, reb, imb)
        _coefficients(reb, imb, nb, co, False)
        blk[:] = 0.0
        for ii in range(nb):
            big_s += co[7, ii]
            p = co[0, ii]
            qq = co[1, ii]
            for j in range(k):
                y0 = data[i0 + ii, j, 0]
                y1 = data[i0 + ii, j, 1]
                # p y - qq J y, J y = (-y1, y0)
                blk[2 * j] += p * y0 + qq * y1
                blk[2 * j + 1] += p * y1 - qq * y0
        for a in range(m2):
            tot[a] += blk[a]
    norm, g, gx = _finish(tot, big_s, x)

    grad_x = np.zeros(m2)
    gyb = np.empty(bs)
    gzb = np.empty(bs)
    for i0 in range(0, n, bs):
        nb = min(bs, n - i0)
        for ii in range(nb):  # re, im and y.g, Jy.g in one read of each record
            re = 0.0
            im = 0.0
            gy = 0.0
            gz = 0.0
            for j in range(k):
                y0 = data[i0 + ii, j, 0]
                y1 = data[i0 + ii, j, 1]
                re += y0 * x[2 * j] + y1 * x[2 * j + 1]
                im += y1 * x[2 * j] - y0 * x[2 * j + 1]
                gy += g[2 * j] * y0 + g[2 * j + 1] * y1
                gz += g[2 * j + 1] * y0 - g[2 * j] * y1
            reb[ii] = re
            imb[ii] = im
            gyb[ii] = gy
            gzb[ii] = gz
        for ii in range(nb, bs):
            reb[ii] = 1.0
            imb[ii] = 0.0
        _coefficients(reb, imb, nb, co, True)
        blk[:] = 0.0
        for ii in range(nb):
            gy = gyb[ii]
            gz = gzb[ii]
            al = co[2, ii] * gy - co[3, ii] * gz - co[5, ii] * gx
            be = co[4, ii] * gz - co[3, ii] * gy + co[6, ii] * gx
            for j in range(k):
                y0 = data[i0 + ii, j, 0]
                y1 = data[i0 + ii, j, 1]
                blk[2 * j] += al * y0 - be * y1
                blk[2 * j + 1] += al * y1 + be * y0
        for a in range(m2):
            grad_x[a] += blk[a]
    for a in range(m2):
        grad_x[a] -= big_s * g[a]
    return norm, grad_x


@njit(error_model="numpy")
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


# ---- the measurement -----------------------------------------------------------------
def _case(k, away):
    M = pmd.KendallShape(k)
    if k == 4:
        center = np.array([[0.0, 0.0], [1.0, 0.0], [1.0, 1.0], [0.0, 1.0]])
    else:
        t = 2 * np.pi * np.arange(k) / k
        center = np.stack([np.cos(t), np.sin(t)], -1)
    center = M.validate(center)
    radius = 0.3
    rng = np.random.default_rng(0)
    coords = rng.normal(size=(10**4, M.dim)) * 0.25 * radius
    coords *= np.minimum(1.0, 0.9 * radius / np.linalg.norm(coords, axis=-1))[:, None]
    data = np.ascontiguousarray(M.exp_coords(center, coords))
    fr = M.chart_frame(center)
    frame = (fr["origin"], fr["basis"])
    c = np.zeros(M.dim)
    c[0] = 1e-3  # near the mean (not at the series branch of the chart)
    if away:
        c = rng.normal(size=M.dim)
        c *= away * radius / np.linalg.norm(c)
    return frame, new.params(M), data, c


def _exact_value(c, frame, data):
    """``N`` from the kernels' per-record terms (NumPy, no record in a series branch
    here) summed exactly (``math.fsum``): what the two kernels' sums are measured against."""
    z0, basis = frame
    t = np.linalg.norm(c)
    x = (math.cos(t) * z0 + math.sin(t) / t * np.tensordot(c, basis, 1)).ravel()
    y = data.reshape(data.shape[0], -1)
    y0, y1 = y[:, 0::2], y[:, 1::2]
    re = y0 @ x[0::2] + y1 @ x[1::2]
    im = y1 @ x[0::2] - y0 @ x[1::2]
    q = re * re + im * im
    cc = np.sqrt(q)
    w = np.arctan2(np.sqrt(1 - q), cc) / np.sqrt(1 - q)
    h = w / cc
    terms = np.empty_like(y)
    terms[:, 0::2] = (h * re)[:, None] * y0 + (h * im)[:, None] * y1
    terms[:, 1::2] = (h * re)[:, None] * y1 - (h * im)[:, None] * y0
    big_s = math.fsum(w * cc)
    tot = np.array([math.fsum(terms[:, a]) - big_s * x[a] for a in range(x.size)])
    return math.sqrt(math.fsum(tot * tot) + 1e-300)


def _call(mod, c, frame, par, data):
    g = np.zeros(c.shape[0])
    v = mod.kng_norm(c, frame, par, data, 1.0, g)
    return v, g


def main():
    old = sys.modules[__name__]
    for k, away in ((4, 0.0), (4, 0.3), (3, 0.0), (6, 0.0), (8, 0.0)):
        frame, par, data, c = _case(k, away)
        vo, go = _call(old, c, frame, par, data)
        vn, gn = _call(new, c, frame, par, data)
        dv = abs(vn / vo - 1)
        ve = _exact_value(c, frame, data)
        dg = np.max(np.abs(gn - go)) / np.max(np.abs(go))
        times = {"old": [], "new": []}
        for _ in range(REPS):
            for name, mod in (("old", old), ("new", new)):
                g = np.zeros(c.shape[0])
                t = time.perf_counter()
                mod.kng_norm(c, frame, par, data, 1.0, g)
                times[name].append(time.perf_counter() - t)
        to, tn = (np.median(times[n]) * 1e6 for n in ("old", "new"))
        print(
            f"k={k} x {away:.1f} r from the mean: old {to:.0f} us, new {tn:.0f} us, "
            f"ratio {to / tn:.2f}x; rel diff value {dv:.1e}, gradient {dg:.1e} (max entry); "
            f"value's rel error old {abs(vo / ve - 1):.1e}, new {abs(vn / ve - 1):.1e}"
        )

    # larger n at k = 4 (the records repeated): the workspace's bound, memory traffic
    frame, par, data, c = _case(4, 0.3)
    for n, reps in ((10**5, 50), (10**6, 7)):
        big = np.ascontiguousarray(np.resize(data, (n, *data.shape[1:])))
        times = {"old": [], "new": []}
        for _ in range(reps):
            for name, mod in (("old", old), ("new", new)):
                g = np.zeros(c.shape[0])
                t = time.perf_counter()
                mod.kng_norm(c, frame, par, big, 1.0, g)
                times[name].append(time.perf_counter() - t)
        to, tn = (np.median(times[n]) * 1e3 for n in ("old", "new"))
        print(f"k=4 n={n:.0e} x 0.3 r away: old {to:.2f} ms, new {tn:.2f} ms, ratio {to / tn:.2f}x")


if __name__ == "__main__":
    main()
