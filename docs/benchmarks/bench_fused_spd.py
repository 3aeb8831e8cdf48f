"""KNG's fused norm on SPD(2), ``kng_norm_2``: the kernel of commit 9c1cb25 (copied
below) against the package's, side by side in one process.

Run: ``PYTHONPATH=$PWD .venv/bin/python docs/benchmarks/bench_fused_spd.py [reps]``.

The data are ``profile_first_release.py``'s SPD2 case: SPD(2), affine-invariant metric,
center I, radius r = 1, n = 10^4 records at normal coordinates of scale 0.25 r about the
center (clipped at 0.9 r); the chart's origin is the center. Two chart points: ``c`` at
the records' mean coordinates (near their Fréchet mean: T nearly cancels) and ``c``
0.3 r away from it. Per point: old and new calls interleaved (a load change hits both),
``reps`` (default 300) each, the medians per call and per record, their ratio, and the
largest relative differences of the value and of the gradient (against the gradient's
largest entry). Also each kernel's cold compile (CPU seconds of its first call: the old
with numba's own jit, uncached, the new from an empty package cache folder) and whether
the new loop runs on AVX-512 registers (``zmm`` in its assembly).
"""

import os
import sys
import tempfile
import time

# an empty cache folder: the package's kernel compiles cold in this process
os.environ["PYMC_MANIDP_CACHE_DIR"] = tempfile.mkdtemp(prefix="bench_fused_spd_")

import numba
import numpy as np
from numba import njit

import pymc_manidp as pmd
from pymc_manidp.geometry._numba.fused import spd

# --- the old kernel: pymc_manidp/geometry/_numba/fused/spd.py at 9c1cb25 (k = 2 path) ---

_INV_SQRT2 = 1.0 / np.sqrt(2.0)
_ATANHC_SERIES_SQ = 1e-3
_BETA_S_SERIES = 1e-2


@njit(inline="always", error_model="numpy")
def _beta_s2(m, s, u, inv, beta):
    """``2 d log[l1, l2] / ds`` at fixed ``m`` (``l = m +- sqrt(s)``, ``beta = log[l1, l2]``,
    ``u = s/m^2``, ``inv = 1/det``): ``(m/det - beta) / s``, or ``2 phi'(u)/m^3`` with
    ``phi(u) = atanh(sqrt u)/sqrt u`` where that quotient cancels."""
    if u < _BETA_S_SERIES:
        ser = 1 / 3 + u * (
            2 / 5
            + u * (3 / 7 + u * (4 / 9 + u * (5 / 11 + u * (6 / 13 + u * (7 / 15 + u * 8 / 17)))))
        )
        return 2.0 * ser / (m * m * m)
    return (m * inv - beta) / s


@njit(error_model="numpy")
def _sum2(al, ga, be, data):
    """``k = 2``: ``T = sum_i log(xi D_i xi)`` (``T00, T11, T01``) and ``dT/dxi`` (the
    parameters ``xi00 = al, xi11 = ga, xi01 = be``), one pass, closed forms (no
    eigenvectors). Returns ``T00, T11, T01`` and the sums ``dmu``, ``a``, ``b`` (three
    each) with ``dT00 = dmu + a``, ``dT11 = dmu - a``, ``dT01 = b``.

    ``log P = mu I + beta (P - m I)`` with ``mu = log(det)/2`` and ``beta = log[l1, l2]``,
    both functions of ``m = tr(P)/2`` and the squared half-gap ``s = h^2 + q^2``
    (``h = (P00 - P11)/2``, ``q = P01``): ``d mu = (m dm - h dh - q dq)/det``,
    ``d beta = -dm/det + beta_s ds`` (``d beta/dm = (1/l1 - 1/l2)/(l1 - l2) = -1/det``).
    The value is pt_numerics' closed form of ``logm`` (its series of ``atanh(d)/d``
    below ``d^2 = 1e-3``, ``l2 = det/l1`` above)."""
    s00 = 0.0
    s11 = 0.0
    s01 = 0.0
    # d mu / dxi and the parts of dL00 - dmu and dL01, per parameter (al, ga, be)
    mu0 = 0.0
    mu1 = 0.0
    mu2 = 0.0
    a0 = 0.0
    a1 = 0.0
    a2 = 0.0
    b0 = 0.0
    b1 = 0.0
    b2 = 0.0
    for i in range(data.shape[0]):
        dp, dr = data[i, 0, 0], data[i, 1, 1]
        dq = 0.5 * (data[i, 0, 1] + data[i, 1, 0])
        t1 = al * dp + be * dq
        t2 = al * dq + be * dr
        t3 = be * dp + ga * dq
        t4 = be * dq + ga * dr
        p = al * t1 + be * t2
        r = be * t3 + ga * t4
        q = al * t3 + be * t4
        m = 0.5 * (p + r)
        h = 0.5 * (p - r)
        s = h * h + q * q
        det = p * r - q * q
        d2 = s / (m * m)
        if d2 < _ATANHC_SERIES_SQ:
            beta = (1.0 + d2 * (1 / 3 + d2 * (1 / 5 + d2 * (1 / 7 + d2 / 9)))) / m
            mu = 0.5 * np.log(det)
        else:
            # two logarithms, not the graph's three: log det = log l1 + log l2 to rounding
            rt = np.sqrt(s)
            l1 = m + rt
            ll1 = np.log(l1)
            ll2 = np.log(det / l1)
            beta = (ll1 - ll2) / (2.0 * rt)
            mu = 0.5 * (ll1 + ll2)
        s00 += mu + beta * h
        s11 += mu - beta * h
        s01 += beta * q
        inv = 1.0 / det
        bs2 = _beta_s2(m, s, d2, inv, beta)
        # dP/d(al, ga, be): dp = (2t1, 0, 2t2), dr = (0, 2t4, 2t3), dq = (t3, t2, t1 + t4)
        # so dm = (t1, t4, t2 + t3), dh = (t1, -t4, t2 - t3)
        dm0, dm1, dm2 = t1, t4, t2 + t3
        dh0, dh1, dh2 = t1, -t4, t2 - t3
        dq0, dq1, dq2 = t3, t2, t1 + t4
        dmu0 = (m * dm0 - h * dh0 - q * dq0) * inv
        dmu1 = (m * dm1 - h * dh1 - q * dq1) * inv
        dmu2 = (m * dm2 - h * dh2 - q * dq2) * inv
        db0 = -dm0 * inv + bs2 * (h * dh0 + q * dq0)
        db1 = -dm1 * inv + bs2 * (h * dh1 + q * dq1)
        db2 = -dm2 * inv + bs2 * (h * dh2 + q * dq2)
        mu0 += dmu0
        mu1 += dmu1
        mu2 += dmu2
        a0 += h * db0 + beta * dh0
        a1 += h * db1 + beta * dh1
        a2 += h * db2 + beta * dh2
        b0 += q * db0 + beta * dq0
        b1 += q * db1 + beta * dq1
        b2 += q * db2 + beta * dq2
    return s00, s11, s01, mu0, mu1, mu2, a0, a1, a2, b0, b1, b2


@njit(inline="always", error_model="numpy")
def _sinhc_sqrt_ds(s):
    """``d/ds [sinh(sqrt s)/sqrt s] = (cosh(sqrt s) - sinh(sqrt s)/sqrt s) / (2s)``; its
    series below ``s = 0.01`` (the quotient cancels there; the next term is 1e-19)."""
    if s < 1e-2:
        return 1 / 6 + s * (
            1 / 60 + s * (1 / 1680 + s * (1 / 90720 + s * (1 / 7983360 + s / 1037836800)))
        )
    r = np.sqrt(s)
    return (np.cosh(r) - np.sinh(r) / r) / (2.0 * s)


@njit(error_model="numpy")
def kng_norm_2(c, frame, params, data, weight, g_c):
    """:func:`kng_norm` for ``k = 2`` only, in closed forms and straight-line code.

    A function of a symmetric 2 x 2 matrix is ``f(Y) = a I + b (Y - m I)``, ``a, b``
    functions of its mean eigenvalue ``m`` and of ``s`` (the squared half-gap) or ``det``:
    pt_numerics' ``expm`` (``a = e^m cosh sqrt s``, ``b = e^m sinhc sqrt s``) and
    ``invsqrtm`` (``q = sqrt(2m + 2 sqrt det)``, ``a = q / (2 sqrt det)``,
    ``b = -1/(sqrt det q)``), and their pullbacks through ``(m, s)`` or ``(m, det)``,
    smooth at equal eigenvalues. No eigenvectors, no loops but the one over the records.
    """
    s0, s1, s2 = frame[0][0, 0], frame[0][1, 1], 0.5 * (frame[0][0, 1] + frame[0][1, 0])
    # E = expm(W) (pt_numerics: cosh_sqrt and sinhc_sqrt, series below s = 1e-4)
    mw = 0.5 * (c[0] + c[1])
    hw = 0.5 * (c[0] - c[1])
    bw = c[2] * _INV_SQRT2
    sw = hw * hw + bw * bw
    em = np.exp(mw)
    if sw < 1e-4:
        ch = 1.0 + sw / 2.0 + sw * sw / 24.0 + sw * sw * sw / 720.0
        sc = 1.0 + sw / 6.0 + sw * sw / 120.0 + sw * sw * sw / 5040.0
    else:
        rw = np.sqrt(sw)
        ch = np.cosh(rw)
        sc = np.sinh(rw) / rw
    ea = em * ch
    eb = em * sc
    e00 = ea + eb * hw
    e11 = ea - eb * hw
    e01 = eb * bw
    # X = sym(S E S)
    t00 = e00 * s0 + e01 * s2  # t = E S
    t01 = e00 * s2 + e01 * s1
    t10 = e01 * s0 + e11 * s2
    t11 = e01 * s2 + e11 * s1
    x00 = s0 * t00 + s2 * t10
    x11 = s2 * t01 + s1 * t11
    x01 = 0.5 * ((s0 * t01 + s2 * t11) + (s2 * t00 + s1 * t10))
    # xi = X^{-1/2}
    mx = 0.5 * (x00 + x11)
    hx = 0.5 * (x00 - x11)
    det = x00 * x11 - x01 * x01
    rd = np.sqrt(det)
    q = np.sqrt(2.0 * mx + 2.0 * rd)
    ia = 0.5 * q / rd
    ib = -1.0 / (rd * q)
    al = ia + ib * hx
    ga = ia - ib * hx
    be = ib * x01
    s00, s11, s01, mu0, mu1, mu2, a0, a1, a2, b0, b1, b2 = _sum2(al, ga, be, data)
    nrm = np.sqrt(s00 * s00 + s11 * s11 + 2.0 * s01 * s01 + 1e-300)
    # xibar in the parameters (al, ga, be): T00 = mu + a, T11 = mu - a, T01 = b, and
    # T01 counts twice in the Frobenius norm
    u00, u11, u01 = s00 / nrm, s11 / nrm, s01 / nrm
    xb0 = (u00 + u11) * mu0 + (u00 - u11) * a0 + 2.0 * u01 * b0
    xb1 = (u00 + u11) * mu1 + (u00 - u11) * a1 + 2.0 * u01 * b1
    xb2 = (u00 + u11) * mu2 + (u00 - u11) * a2 + 2.0 * u01 * b2
    # as the symmetric G with dN = tr(G dxi): a parameter off the diagonal moves two entries
    g00, g11, g01 = xb0, xb1, 0.5 * xb2
    # Xbar = ib G + (cm/2) I + cdet cof(X), from d xi = da I + db (X - m I) + ib (dX - dm I)
    gt = g00 + g11
    gh = (g00 - g11) * hx + 2.0 * g01 * x01
    ia_m = 1.0 / (2.0 * rd * q)
    ia_det = 1.0 / (4.0 * rd * rd * q) - q / (4.0 * rd * rd * rd)
    ib_m = 1.0 / (rd * q * q * q)
    ib_det = (q / (2.0 * rd) + 1.0 / (2.0 * q)) / (rd * rd * q * q)
    cm = gt * ia_m + gh * ib_m - ib * gt
    cdet = gt * ia_det + gh * ib_det
    xb00 = ib * g00 + 0.5 * cm + cdet * x11
    xb11 = ib * g11 + 0.5 * cm + cdet * x00
    xb01 = ib * g01 - cdet * x01
    # Ebar = S Xbar S
    t00 = xb00 * s0 + xb01 * s2
    t01 = xb00 * s2 + xb01 * s1
    t10 = xb01 * s0 + xb11 * s2
    t11 = xb01 * s2 + xb11 * s1
    f00 = s0 * t00 + s2 * t10
    f11 = s2 * t01 + s1 * t11
    f01 = 0.5 * ((s0 * t01 + s2 * t11) + (s2 * t00 + s1 * t10))
    # Wbar through E = ea I + eb (W - m I): d ea = ea dm + (eb/2) ds,
    # d eb = eb dm + e^m sinhc'(s) ds, ds = 2 h dh + 2 b db
    ft = f00 + f11
    fh = (f00 - f11) * hw + 2.0 * f01 * bw
    cm = ft * (ea - eb) + fh * eb
    cs = ft * (0.5 * eb) + fh * (em * _sinhc_sqrt_ds(sw))
    g_c[0] += weight * (0.5 * cm + cs * hw + eb * f00)
    g_c[1] += weight * (0.5 * cm - cs * hw + eb * f11)
    g_c[2] += weight * ((2.0 * cs * bw + 2.0 * eb * f01) * _INV_SQRT2)
    return nrm


# --- the benchmark ---


def case(n=10_000):
    """profile_first_release.py's SPD2 records, the chart's frame and two chart points."""
    rng = np.random.default_rng(0)
    M, center, radius = pmd.SPD(2), np.eye(2), 1.0
    coords = rng.normal(size=(n, M.dim)) * 0.25 * radius
    coords *= np.minimum(1.0, 0.9 * radius / np.linalg.norm(coords, axis=-1))[:, None]
    data = np.ascontiguousarray(M.exp_coords(center, coords))
    sqrt = M.chart_frame(center)["sqrt"]
    near = coords.mean(0)
    u = rng.normal(size=M.dim)
    far = near + 0.3 * radius * u / np.linalg.norm(u)
    return sqrt, data, {"near the mean": near, "0.3 r away": far}


def main(reps=300):
    sqrt, data, points = case()
    params = np.zeros(0)
    c0, g0 = next(iter(points.values())), np.zeros(3)

    @njit
    def warm(x):  # numba's own start-up, out of both compile times
        return x + 1.0

    warm(1.0)
    cold = {}
    for name, f in (("old", kng_norm_2), ("new", spd.kng_norm_2)):
        t = time.process_time()
        f(c0, (sqrt,), params, data, 1.0, g0)
        cold[name] = time.process_time() - t
    print(f"cold compile (CPU s): old {cold['old']:.2f}, new {cold['new']:.2f}")
    asm = spd._sum2.inspect_asm(spd._sum2.signatures[0])
    print(f"new records' loop on AVX-512 registers: {'zmm' in asm} (numba {numba.__version__})")
    n = data.shape[0]
    for label, c in points.items():
        g_old, g_new = np.zeros(3), np.zeros(3)
        v_old = kng_norm_2(c, (sqrt,), params, data, 1.0, g_old)
        v_new = spd.kng_norm_2(c, (sqrt,), params, data, 1.0, g_new)
        dv = abs(v_new / v_old - 1.0)
        dg = np.max(np.abs(g_new - g_old)) / np.max(np.abs(g_old))
        times = {"old": [], "new": []}
        g = np.zeros(3)
        for _ in range(reps):
            for name, f in (("old", kng_norm_2), ("new", spd.kng_norm_2)):
                t = time.perf_counter_ns()
                f(c, (sqrt,), params, data, 1.0, g)
                times[name].append(time.perf_counter_ns() - t)
        old, new = (float(np.median(times[k])) for k in ("old", "new"))
        print(
            f"x {label} (N = {v_old:.4g}): old {old / 1e3:.0f} us ({old / n:.1f} ns/record), "
            f"new {new / 1e3:.0f} us ({new / n:.1f} ns/record), ratio {old / new:.2f}x; "
            f"relative difference: value {dv:.1e}, gradient {dg:.1e}"
        )


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 300)
