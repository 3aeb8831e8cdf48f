"""The fused SO(3) KNG kernel (``kng_norm`` of
``pymc_manidp/geometry/_numba/fused/rotations.py``) against its previous version, copied
below (commit 9c1cb25), in one process on the same data.

Data: the SO3 case of ``profile_first_release.py`` (rotations about the identity, public
radius r = 0.5, records at normal chart coordinates of scale 0.25 r, n = 10^4); the
chart's origin at the records' Fréchet mean and ``x`` there plus ``1e-3`` (near the
mean), or 0.3 r away. Calls interleaved (old, new, old, ...), median of ``REPS``
(argument, default 300) each; prints both medians and their ratio, the relative
difference of the values and the largest difference of the gradients relative to their
largest entry, and each value's relative error against the same terms summed exactly
(near the mean ``T`` is a sum of terms far larger than itself, so the order of the
sums shows). Last, the largest relative differences over the cases of
``tests/laws/fused/test_rotations.py``.

Run: ``PYTHONPATH=$PWD /work/main/.venv/bin/python docs/benchmarks/bench_fused_rotations.py``
"""

import math
import sys
import time

import numba
import numpy as np

import pymc_manidp as pmd
from pymc_manidp.geometry._numba.fused import rotations as new

REPS = int(sys.argv[1]) if len(sys.argv) > 1 else 300


def njit(*args, **options):  # the old kernel, compiled here (no disk cache)
    return numba.njit(**options)


# ---- the previous kernel (commit 9c1cb25), verbatim but for the decorators ----------
# the graph's thresholds (geometry/_numba/pt_numerics.py): its series branches
_SMALL_SQ = 1e-8  # sinc_sqrt and theta_over_sin: s below it
_LOG_SERIES_SQ = 0.05**2  # log_sinc_sqrt: s below it
_PI_SQ = np.pi**2
# beta = (t - sin t)/t^3 by its series below t^2 = 1e-2 (next term t^10/13! < 2e-20);
# above, (1 - sinc t)/t^2 loses ~eps/t^2 relative, but beta enters times hat(w)^2 ~ t^2
_BETA_SERIES_SQ = 1e-2
# records per block of kng_norm's loop (a 14 KB buffer: L1): 128 was the fastest of
# 16 to 256, by a few percent
_BLOCK = 128


@njit(error_model="numpy", inline="always")
def _sinc_sqrt(s):
    """``sin(sqrt(s))/sqrt(s)``, the graph's series below ``1e-8``."""
    if s < _SMALL_SQ:
        return 1.0 - s / 6.0 + s * s / 120.0
    r = np.sqrt(s)
    return np.sin(r) / r


@njit(error_model="numpy", inline="always")
def _theta_over_sin(s, c):
    """``theta/sin(theta)`` from ``s = sin^2``, ``c = cos`` (the graph's
    ``theta_over_sin``), and its partial derivatives in ``s`` and ``c``.

    The graph's ``atan2(r, c)/r`` is differentiated as written (``r^2 + c^2`` is not
    replaced by 1), so the two gradients are the same numbers for records slightly off
    the group too.
    """
    if s < _SMALL_SQ and c > 0.0:
        return 1.0 + s / 6.0 + 3.0 * s * s / 40.0, 1.0 / 6.0 + 0.15 * s, 0.0
    r = np.sqrt(s)
    # the graph's atan2(r, c); for c > 0 (angles below pi/2: every record of the public
    # ball) atan(r/c), the same angle within an ulp, and kng_norm 15% faster (n = 10^4)
    theta = np.arctan(r / c) if c > 0.0 else np.arctan2(r, c)
    # two divisions where the formula as written has five
    inv_r = 1.0 / r
    inv_rc = 1.0 / (r * r + c * c)
    f = theta * inv_r
    # d(atan2(r, c)/r)/dr = c/(r (r^2 + c^2)) - theta/r^2, and dr/ds = 1/(2r)
    return f, 0.5 * inv_r * inv_r * (c * inv_rc - f), -inv_rc


@njit(error_model="numpy")
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


@njit(error_model="numpy")
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
    # Blocks of _BLOCK records, each in three short loops: M_i (and v_i, |v_i|^2,
    # cos_i) into an L1-sized buffer, then f_i and its partials (atan2, a libm call),
    # then the sums. In one loop the call made every live value (the 9 entries of x,
    # 12 sums) spill around it each record: 1.6x slower (2026-11-28, n = 10^4).
    # The records are still read once.
    buf = np.empty((_BLOCK, 14))
    fbuf = np.empty((_BLOCK, 3))
    t0 = t1 = t2 = 0.0
    h00 = h01 = h02 = h10 = h11 = h12 = h20 = h21 = h22 = 0.0
    n = data.shape[0]
    for start in range(0, n, _BLOCK):
        size = min(_BLOCK, n - start)
        for j in range(size):
            i = start + j
            d00, d01, d02 = data[i, 0, 0], data[i, 0, 1], data[i, 0, 2]
            d10, d11, d12 = data[i, 1, 0], data[i, 1, 1], data[i, 1, 2]
            d20, d21, d22 = data[i, 2, 0], data[i, 2, 1], data[i, 2, 2]
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
            buf[j, 0], buf[j, 1], buf[j, 2] = m00, m01, m02
            buf[j, 3], buf[j, 4], buf[j, 5] = m10, m11, m12
            buf[j, 6], buf[j, 7], buf[j, 8] = m20, m21, m22
            buf[j, 9], buf[j, 10], buf[j, 11] = v0, v1, v2
            buf[j, 12] = v0 * v0 + v1 * v1 + v2 * v2
            buf[j, 13] = 0.5 * (m00 + m11 + m22 - 1.0)
        for j in range(size):
            fbuf[j, 0], fbuf[j, 1], fbuf[j, 2] = _theta_over_sin(buf[j, 12], buf[j, 13])
        for j in range(size):
            m00, m01, m02 = buf[j, 0], buf[j, 1], buf[j, 2]
            m10, m11, m12 = buf[j, 3], buf[j, 4], buf[j, 5]
            m20, m21, m22 = buf[j, 6], buf[j, 7], buf[j, 8]
            v0, v1, v2 = buf[j, 9], buf[j, 10], buf[j, 11]
            f, fs, fc = fbuf[j, 0], fbuf[j, 1], fbuf[j, 2]
            tr = m00 + m11 + m22
            t0 += f * v0
            t1 += f * v1
            t2 += f * v2
            # p = P v, P = M^T - tr I
            p0 = (m00 - tr) * v0 + m10 * v1 + m20 * v2
            p1 = m01 * v0 + (m11 - tr) * v1 + m21 * v2
            p2 = m02 * v0 + m12 * v1 + (m22 - tr) * v2
            q0 = fs * p0 + fc * v0
            q1 = fs * p1 + fc * v1
            q2 = fs * p2 + fc * v2
            hf = 0.5 * f
            h00 += hf * (m00 - tr) + q0 * v0
            h01 += hf * m10 + q0 * v1
            h02 += hf * m20 + q0 * v2
            h10 += hf * m01 + q1 * v0
            h11 += hf * (m11 - tr) + q1 * v1
            h12 += hf * m21 + q1 * v2
            h20 += hf * m02 + q2 * v0
            h21 += hf * m12 + q2 * v1
            h22 += hf * (m22 - tr) + q2 * v2
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


# ---- the measurement -----------------------------------------------------------------
M = pmd.Rotations()


def _case(away):
    radius = 0.5
    rng = np.random.default_rng(0)
    coords = rng.normal(size=(10**4, 3)) * 0.25 * radius
    coords *= np.minimum(1.0, 0.9 * radius / np.linalg.norm(coords, axis=-1))[:, None]
    data = np.ascontiguousarray(M.exp_coords(np.eye(3), coords))
    fr = M.chart_frame(pmd.frechet_mean(M, data).mean)
    frame = (fr["origin"], fr["basis"])
    c = np.array([1e-3, 0.0, 0.0])  # near the mean
    if away:
        c = rng.normal(size=3)
        c *= away * radius / np.linalg.norm(c)
    return frame, data, c


def _exact_value(c, frame, data):
    """``N`` from the kernels' per-record terms (NumPy, libm's atan2; no record in the
    series branch here) summed exactly (``math.fsum``)."""
    x, a = np.empty((3, 3)), np.empty((3, 3))
    _chart_point(c, frame[0], frame[1], x, a)  # the kernels' chart point
    m = np.einsum("ka,ikb->iab", x, data)
    v = 0.5 * np.stack(
        [m[:, 2, 1] - m[:, 1, 2], m[:, 0, 2] - m[:, 2, 0], m[:, 1, 0] - m[:, 0, 1]], 1
    )
    cs = 0.5 * (np.trace(m, axis1=1, axis2=2) - 1.0)
    r = np.sqrt((v * v).sum(1))
    f = np.arctan2(r, cs) / r
    t = [math.fsum(f * v[:, k]) for k in range(3)]
    return math.sqrt(sum(tk * tk for tk in t) + 1e-300)


def _compare(c, frame, data):
    g_old, g_new = np.zeros(3), np.zeros(3)
    n_old = kng_norm(c, frame, np.zeros(0), data, 1.0, g_old)
    n_new = new.kng_norm(c, frame, np.zeros(0), data, 1.0, g_new)
    return n_old, n_new, g_old, g_new


def main():
    params = np.zeros(0)
    for away in (0.0, 0.3):
        frame, data, c = _case(away)
        n_old, n_new, g_old, g_new = _compare(c, frame, data)
        exact = _exact_value(c, frame, data)
        g_old, g_new = np.zeros(3), np.zeros(3)
        times = {"old": [], "new": []}
        for _ in range(REPS):
            t = time.perf_counter()
            kng_norm(c, frame, params, data, 1.0, g_old)
            times["old"].append(time.perf_counter() - t)
            t = time.perf_counter()
            new.kng_norm(c, frame, params, data, 1.0, g_new)
            times["new"].append(time.perf_counter() - t)
        old_us, new_us = (1e6 * np.median(times[k]) for k in ("old", "new"))
        _, _, g_o, g_n = _compare(c, frame, data)
        print(
            f"x {'near the mean' if not away else f'{away} r away'}: old {old_us:.1f} us, "
            f"new {new_us:.1f} us, ratio {old_us / new_us:.2f}; N = {n_new:.6g}, "
            f"rel diff {abs(n_new - n_old) / abs(n_old):.1e}, grad diff "
            f"{np.abs(g_n - g_o).max() / np.abs(g_o).max():.1e}; error against the exact "
            f"sums: old {abs(n_old - exact) / exact:.1e}, new {abs(n_new - exact) / exact:.1e}"
        )
    try:
        from tests.laws.fused import test_rotations as tr
    except ImportError:
        return
    worst_n = worst_g = 0.0
    for radius in tr.RADII:
        for spread in tr.SPREADS:
            for k in range(tr.DRAWS):
                c, fr, data = tr._case(radius, spread, k)
                n_old, n_new, g_old, g_new = _compare(c, (fr["origin"], fr["basis"]), data)
                worst_n = max(worst_n, abs(n_new - n_old) / abs(n_old))
                worst_g = max(worst_g, np.abs(g_new - g_old).max() / np.abs(g_old).max())
    print(
        f"the tests' {len(tr.RADII) * len(tr.SPREADS) * tr.DRAWS} cases (n <= 1000): "
        f"largest rel diff of N {worst_n:.1e}, of the gradient {worst_g:.1e}"
    )


if __name__ == "__main__":
    main()
