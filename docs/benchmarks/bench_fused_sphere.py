"""Benchmark (issue 38 item 6): the sphere's fused KNG kernel against the one it replaced.

``kng_norm`` of ``pymc_manidp/geometry/_numba/fused/sphere.py`` (records by blocks of
64, ``f`` and ``f'`` in a vectorized loop with a branch-free ``acos``) against a copy of
the kernel before that change (commit 9c1cb25: four records at a time, libm's ``acos``
per record), in one process on the same data: profile_first_release.py's S2 case
(S^2, center the north pole, public radius r = 0.5, records at normal coordinates of
scale 0.25 r, clipped to 0.9 r), n = 10^4 (and 10^3, 10^5), at ``x`` the chart point
of the records' mean and at a point 0.3 r from it. Value and gradient (``weight = 1``);
the two kernels alternate, median of 300 calls each, microseconds per call and the
ratio old/new; also the largest relative difference of the values and gradients.

Run:  PYTHONPATH=. .venv/bin/python docs/benchmarks/bench_fused_sphere.py [d ...]
(``d`` the sphere's dimension, default 2; the case is S^d, center e_{d+1}).
"""

from __future__ import annotations

import math
import sys
import time

import numba
import numpy as np

import pymc_manidp as pmd
from pymc_manidp.geometry._numba.fused import sphere as fused
from pymc_manidp.geometry._numba.fused.sphere import (
    _ASIN_DCOEF,
    _ASIN_SERIES,
    _SMALL_SQ,
)

# ---- the kernel of commit 9c1cb25, verbatim but for the names and the decorators ----


@numba.njit(error_model="numpy", inline="always")
def old_weights(ci):
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


@numba.njit(error_model="numpy", inline="always")
def old_cos(x, data, i, r2):
    ci = 0.0
    for j in range(x.shape[0]):
        ci += data[i, j] * x[j]
    return ci / r2


@numba.njit(error_model="numpy")
def old_sums(x, data, r2, p, u):
    """Add ``P`` to ``p`` and the upper triangle of ``U`` to ``u``; return ``S``.

    Four records at a time: each update of the ``D x D`` sums in memory then serves four
    records (2.5 times faster at ``D = 6`` than one record at a time). The legs
    ``u_i = x_i - c_i x`` are recomputed where they are needed: faster than a buffer.
    """
    n, dd = data.shape
    s_sum = 0.0
    n4 = n - n % 4
    for i in range(0, n4, 4):
        c0 = old_cos(x, data, i, r2)
        c1 = old_cos(x, data, i + 1, r2)
        c2 = old_cos(x, data, i + 2, r2)
        c3 = old_cos(x, data, i + 3, r2)
        f0, g0 = old_weights(c0)
        f1, g1 = old_weights(c1)
        f2, g2 = old_weights(c2)
        f3, g3 = old_weights(c3)
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
        ci = old_cos(x, data, i, r2)
        f, fp = old_weights(ci)
        s_sum += f * ci
        for j in range(dd):
            p[j] += f * data[i, j]
            z = fp * (data[i, j] - ci * x[j])
            for m in range(j, dd):
                u[j, m] += z * (data[i, m] - ci * x[m])
    return s_sum


@numba.njit(error_model="numpy")
def oldkng_norm(c, frame, params, data, weight, g_c):
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
    s_sum = old_sums(x, data, r2, p, u)
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


# ---- the measurement ----


def _case(d, n, seed=0):
    space = pmd.Sphere(dim=d)
    center = np.zeros(d + 1)
    center[-1] = 1.0
    radius = 0.5
    rng = np.random.default_rng(seed)
    coords = rng.normal(size=(n, d)) * 0.25 * radius
    coords *= np.minimum(1.0, 0.9 * radius / np.linalg.norm(coords, axis=-1))[:, None]
    data = np.ascontiguousarray(space.exp_coords(center, coords))
    frame = space.chart_frame(center)
    tup = (frame["origin"], frame["basis"])
    # the chart point of the records' (extrinsic, projected) mean, and one 0.3 r from it
    mean = data.mean(axis=0)
    mean /= np.linalg.norm(mean)
    c_mean = space.log(center, mean) @ frame["basis"].T
    u = rng.standard_normal(d)
    c_off = c_mean + 0.3 * radius * u / np.linalg.norm(u)
    return space, tup, data, {"at the mean": c_mean, "0.3 r away": c_off}


def _one(kernel, c, tup, prm, data):
    g = np.zeros(c.shape[0])
    t0 = time.perf_counter()
    val = kernel(c, tup, prm, data, 1.0, g)
    return time.perf_counter() - t0, val, g


def main(dims):
    for d in dims:
        for n in (1_000, 10_000, 100_000):
            space, tup, data, points = _case(d, n)
            prm = fused.params(space)
            for label, c in points.items():
                old = [_one(oldkng_norm, c, tup, prm, data) for _ in range(3)][-1]
                new = [_one(fused.kng_norm, c, tup, prm, data) for _ in range(3)][-1]
                rel_v = abs(new[1] - old[1]) / abs(old[1])
                rel_g = np.max(np.abs(new[2] - old[2])) / np.max(np.abs(old[2]))
                reps = 300 if n <= 10_000 else 60
                t_old, t_new = [], []
                for _ in range(reps):
                    t_old.append(_one(oldkng_norm, c, tup, prm, data)[0])
                    t_new.append(_one(fused.kng_norm, c, tup, prm, data)[0])
                mo, mn = np.median(t_old), np.median(t_new)
                print(
                    f"S^{d} n={n:>6} x {label:<11}: old {mo * 1e6:8.1f} us "
                    f"({mo / n * 1e9:5.2f} ns/record)  new {mn * 1e6:8.1f} us "
                    f"({mn / n * 1e9:5.2f} ns/record)  ratio {mo / mn:4.2f}  "
                    f"rel. diff value {rel_v:.1e} gradient {rel_g:.1e}",
                    flush=True,
                )


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [2])
