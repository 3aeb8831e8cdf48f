r"""Numba kernels for sums over the data of logarithms of congruences ``a d_i a``.

KNG's sum at ``k = 3`` (:func:`congruence_sum_eig` and its pullback, the general ``k``
by :mod:`.sym_kernels`' loops) and the Fréchet mean's fused sums
(:func:`log_congruence_mean`), both vectorized over the data ("structure of arrays").
The one-matrix kernels, the Jacobi iteration and the divided differences are
:mod:`.sym_kernels`'; the same rules hold here (``error_model="numpy"``, a stack per
call, both PyTensor backends).
"""

from __future__ import annotations

import numpy as np

# numba's njit, but cache=True caches in the package's checked cache folder only
from pymc_manidp.geometry._numba.cache import njit
from pymc_manidp.geometry._numba.sym_kernels import (
    _ENTRY_COL,
    _ENTRY_ROW,
    _EPS,
    _LOG,
    _MAX_SWEEPS,
    _TINY,
    JACOBI_MAX_K,
    _as_stack,
    _congruence_sum_pullback_stack,
    _congruence_sum_stack,
    _eigh,
)

__all__ = ["congruence_sum_eig", "congruence_sum_pullback_eig", "log_congruence_mean"]


# --- KNG's sum of logarithms at k = 3, vectorized over the data -------------------------
#
# The loops above treat one matrix at a time: each Jacobi rotation waits on a square
# root and two divisions, and nothing else overlaps them. Below, the data axis is the
# inner loop ("structure of arrays": one array per matrix entry), with branch-free
# bodies and no library calls, so LLVM runs four matrices per SIMD instruction
# (measured: 0.29 -> 0.06 us per Jacobi). A matrix whose rotation is negligible gets
# t = 0 (c = 1, s = 0), an exact no-op, so sweeping until every matrix has converged
# gives each one the result of the scalar iteration.


@njit(cache=True, inline="always", error_model="numpy")
def _soa_rotation(app, aqq, apq):
    """Branch-free ``(t, c, s)`` of the rotation zeroing ``a_pq`` (``t = 0`` when it is
    negligible by Demmel–Veselić's test), and whether it was negligible."""
    negligible = (abs(apq) <= _EPS * np.sqrt(abs(app * aqq))) | (abs(apq) < _TINY)
    theta = (aqq - app) / (2.0 * apq)  # inf or nan when negligible: masked below
    at = abs(theta)
    t = 0.5 / at if at > 1e150 else 1.0 / (at + np.sqrt(theta * theta + 1.0))
    t = -t if theta < 0.0 else t
    t = 0.0 if negligible else t
    c = 1.0 / np.sqrt(t * t + 1.0)
    return t, c, t * c, negligible


@njit(cache=True, error_model="numpy")
def _soa_rotate(a, u, p, q, o):
    """One Jacobi rotation in the plane ``(p, q)`` (``o`` the third index) of every
    matrix; ``a`` holds rows ``a00 a11 a22 a01 a02 a12``, ``u`` rows ``u_rc`` at ``3r + c``.
    Returns how many matrices rotated."""
    ipq = 3 + p + q - 1  # (0,1) -> 3, (0,2) -> 4, (1,2) -> 5
    ipo = 3 + min(p, o) + max(p, o) - 1
    iqo = 3 + min(q, o) + max(q, o) - 1
    active = 0
    for i in range(a.shape[1]):
        apq = a[ipq, i]
        t, c, s, negligible = _soa_rotation(a[p, i], a[q, i], apq)
        active += not negligible
        a[p, i] -= t * apq
        a[q, i] += t * apq
        a[ipq, i] = apq if negligible else 0.0
        x, y = a[ipo, i], a[iqo, i]
        a[ipo, i] = c * x - s * y
        a[iqo, i] = s * x + c * y
        for r in range(3):
            x, y = u[3 * r + p, i], u[3 * r + q, i]
            u[3 * r + p, i] = c * x - s * y
            u[3 * r + q, i] = s * x + c * y
    return active


@njit(cache=True, error_model="numpy")
def _soa_jacobi3(a, u):
    """Cyclic Jacobi on every 3 x 3 matrix of the rows ``a`` at once (see
    :func:`_soa_rotate`); the eigenvalues end in rows 0-2, the eigenvectors in ``u``."""
    for j in range(9):
        for i in range(a.shape[1]):
            u[j, i] = 1.0 if j % 4 == 0 else 0.0
    for _ in range(_MAX_SWEEPS):
        active = _soa_rotate(a, u, 0, 1, 2)
        active += _soa_rotate(a, u, 0, 2, 1)
        active += _soa_rotate(a, u, 1, 2, 0)
        if active == 0:
            break


@njit(cache=True, error_model="numpy")
def _log_sum3(a, d):
    """:func:`_congruence_sum_stack` for ``f = log``, ``k = 3``, vectorized over the data."""
    nb, n = a.shape[0], d.shape[0]
    out = np.zeros((nb, 3, 3))
    ws = np.empty((nb, n, 3))
    fws = np.empty((nb, n, 3))
    us = np.empty((nb, n, 3, 3))
    p = np.empty((6, n))
    u = np.empty((9, n))
    lw = np.empty((3, n))
    part = np.empty((6, n))
    for b in range(nb):
        a00, a01, a02 = a[b, 0, 0], a[b, 0, 1], a[b, 0, 2]
        a10, a11, a12 = a[b, 1, 0], a[b, 1, 1], a[b, 1, 2]
        a20, a21, a22 = a[b, 2, 0], a[b, 2, 1], a[b, 2, 2]
        for i in range(n):  # p = sym(a d_i a), entries 00 11 22 01 02 12
            t00 = d[i, 0, 0] * a00 + d[i, 0, 1] * a10 + d[i, 0, 2] * a20
            t01 = d[i, 0, 0] * a01 + d[i, 0, 1] * a11 + d[i, 0, 2] * a21
            t02 = d[i, 0, 0] * a02 + d[i, 0, 1] * a12 + d[i, 0, 2] * a22
            t10 = d[i, 1, 0] * a00 + d[i, 1, 1] * a10 + d[i, 1, 2] * a20
            t11 = d[i, 1, 0] * a01 + d[i, 1, 1] * a11 + d[i, 1, 2] * a21
            t12 = d[i, 1, 0] * a02 + d[i, 1, 1] * a12 + d[i, 1, 2] * a22
            t20 = d[i, 2, 0] * a00 + d[i, 2, 1] * a10 + d[i, 2, 2] * a20
            t21 = d[i, 2, 0] * a01 + d[i, 2, 1] * a11 + d[i, 2, 2] * a21
            t22 = d[i, 2, 0] * a02 + d[i, 2, 1] * a12 + d[i, 2, 2] * a22
            p[0, i] = a00 * t00 + a10 * t10 + a20 * t20
            p[1, i] = a01 * t01 + a11 * t11 + a21 * t21
            p[2, i] = a02 * t02 + a12 * t12 + a22 * t22
            p[3, i] = 0.5 * (a00 * t01 + a10 * t11 + a20 * t21 + a01 * t00 + a11 * t10 + a21 * t20)
            p[4, i] = 0.5 * (a00 * t02 + a10 * t12 + a20 * t22 + a02 * t00 + a12 * t10 + a22 * t20)
            p[5, i] = 0.5 * (a01 * t02 + a11 * t12 + a21 * t22 + a02 * t01 + a12 * t11 + a22 * t21)
        _soa_jacobi3(p, u)
        for m in range(3):  # library calls: a loop of their own
            for i in range(n):
                lw[m, i] = np.log(p[m, i])
        for e in range(6):  # U diag(log w) U^T, entries 00 11 22 01 02 12
            r, c = _ENTRY_ROW[e], _ENTRY_COL[e]
            for i in range(n):
                part[e, i] = (
                    u[3 * r, i] * lw[0, i] * u[3 * c, i]
                    + u[3 * r + 1, i] * lw[1, i] * u[3 * c + 1, i]
                    + u[3 * r + 2, i] * lw[2, i] * u[3 * c + 2, i]
                )
        for e in range(6):
            r, c = _ENTRY_ROW[e], _ENTRY_COL[e]
            total = np.sum(part[e])
            out[b, r, c] = total
            out[b, c, r] = total
        for i in range(n):
            for m in range(3):
                ws[b, i, m] = p[m, i]
                fws[b, i, m] = lw[m, i]
            for j in range(9):
                us[b, i, j // 3, j % 3] = u[j, i]
    return out, ws, fws, us


@njit(cache=True, inline="always", error_model="numpy")
def _log_divided_difference(a, b, la, lb):
    """``log[a, b]`` from ``log a``, ``log b``, branch-free: the quotient where the gap is
    wide (relative error below ``eps (|la| + |lb|) / 0.2``), else ``2/(a+b)`` times the
    series of ``atanh(d)/d`` in ``d = (a-b)/(a+b)``, ``|d| < 0.1`` (truncation < 1e-17)."""
    s = a + b
    gap = a - b
    q = (gap / s) ** 2
    near = (2.0 / s) * (
        1.0
        + q
        * (1 / 3 + q * (1 / 5 + q * (1 / 7 + q * (1 / 9 + q * (1 / 11 + q * (1 / 13 + q / 15))))))
    )
    far = (la - lb) / gap
    return near if abs(gap) < 0.1 * s else far


@njit(cache=True, error_model="numpy")
def _log_sum3_pullback(a, d, ws, fws, us, g):
    """:func:`_congruence_sum_pullback_stack` for ``f = log``, ``k = 3``, vectorized."""
    nb, n = a.shape[0], d.shape[0]
    out = np.empty((nb, 3, 3))
    part = np.empty((9, n))
    for b in range(nb):
        a00, a01, a02 = a[b, 0, 0], a[b, 0, 1], a[b, 0, 2]
        a10, a11, a12 = a[b, 1, 0], a[b, 1, 1], a[b, 1, 2]
        a20, a21, a22 = a[b, 2, 0], a[b, 2, 1], a[b, 2, 2]
        g00, g11, g22 = g[b, 0, 0], g[b, 1, 1], g[b, 2, 2]
        g01 = 0.5 * (g[b, 0, 1] + g[b, 1, 0])
        g02 = 0.5 * (g[b, 0, 2] + g[b, 2, 0])
        g12 = 0.5 * (g[b, 1, 2] + g[b, 2, 1])
        for i in range(n):
            w0, w1, w2 = ws[b, i, 0], ws[b, i, 1], ws[b, i, 2]
            l0, l1, l2 = fws[b, i, 0], fws[b, i, 1], fws[b, i, 2]
            u00, u01, u02 = us[b, i, 0, 0], us[b, i, 0, 1], us[b, i, 0, 2]
            u10, u11, u12 = us[b, i, 1, 0], us[b, i, 1, 1], us[b, i, 1, 2]
            u20, u21, u22 = us[b, i, 2, 0], us[b, i, 2, 1], us[b, i, 2, 2]
            # t = G U
            t00 = g00 * u00 + g01 * u10 + g02 * u20
            t01 = g00 * u01 + g01 * u11 + g02 * u21
            t02 = g00 * u02 + g01 * u12 + g02 * u22
            t10 = g01 * u00 + g11 * u10 + g12 * u20
            t11 = g01 * u01 + g11 * u11 + g12 * u21
            t12 = g01 * u02 + g11 * u12 + g12 * u22
            t20 = g02 * u00 + g12 * u10 + g22 * u20
            t21 = g02 * u01 + g12 * u11 + g22 * u21
            t22 = g02 * u02 + g12 * u12 + g22 * u22
            # K = Gamma o (U^T G U), symmetric
            k00 = (u00 * t00 + u10 * t10 + u20 * t20) / w0
            k11 = (u01 * t01 + u11 * t11 + u21 * t21) / w1
            k22 = (u02 * t02 + u12 * t12 + u22 * t22) / w2
            k01 = (u00 * t01 + u10 * t11 + u20 * t21) * _log_divided_difference(w0, w1, l0, l1)
            k02 = (u00 * t02 + u10 * t12 + u20 * t22) * _log_divided_difference(w0, w2, l0, l2)
            k12 = (u01 * t02 + u11 * t12 + u21 * t22) * _log_divided_difference(w1, w2, l1, l2)
            # v = U K
            v00 = u00 * k00 + u01 * k01 + u02 * k02
            v01 = u00 * k01 + u01 * k11 + u02 * k12
            v02 = u00 * k02 + u01 * k12 + u02 * k22
            v10 = u10 * k00 + u11 * k01 + u12 * k02
            v11 = u10 * k01 + u11 * k11 + u12 * k12
            v12 = u10 * k02 + u11 * k12 + u12 * k22
            v20 = u20 * k00 + u21 * k01 + u22 * k02
            v21 = u20 * k01 + u21 * k11 + u22 * k12
            v22 = u20 * k02 + u21 * k12 + u22 * k22
            # Gbar = v U^T, symmetric
            h00 = v00 * u00 + v01 * u01 + v02 * u02
            h11 = v10 * u10 + v11 * u11 + v12 * u12
            h22 = v20 * u20 + v21 * u21 + v22 * u22
            h01 = v00 * u10 + v01 * u11 + v02 * u12
            h02 = v00 * u20 + v01 * u21 + v02 * u22
            h12 = v10 * u20 + v11 * u21 + v12 * u22
            # e = a d_i
            e00 = a00 * d[i, 0, 0] + a01 * d[i, 1, 0] + a02 * d[i, 2, 0]
            e01 = a00 * d[i, 0, 1] + a01 * d[i, 1, 1] + a02 * d[i, 2, 1]
            e02 = a00 * d[i, 0, 2] + a01 * d[i, 1, 2] + a02 * d[i, 2, 2]
            e10 = a10 * d[i, 0, 0] + a11 * d[i, 1, 0] + a12 * d[i, 2, 0]
            e11 = a10 * d[i, 0, 1] + a11 * d[i, 1, 1] + a12 * d[i, 2, 1]
            e12 = a10 * d[i, 0, 2] + a11 * d[i, 1, 2] + a12 * d[i, 2, 2]
            e20 = a20 * d[i, 0, 0] + a21 * d[i, 1, 0] + a22 * d[i, 2, 0]
            e21 = a20 * d[i, 0, 1] + a21 * d[i, 1, 1] + a22 * d[i, 2, 1]
            e22 = a20 * d[i, 0, 2] + a21 * d[i, 1, 2] + a22 * d[i, 2, 2]
            # Gbar a d_i
            part[0, i] = h00 * e00 + h01 * e10 + h02 * e20
            part[1, i] = h00 * e01 + h01 * e11 + h02 * e21
            part[2, i] = h00 * e02 + h01 * e12 + h02 * e22
            part[3, i] = h01 * e00 + h11 * e10 + h12 * e20
            part[4, i] = h01 * e01 + h11 * e11 + h12 * e21
            part[5, i] = h01 * e02 + h11 * e12 + h12 * e22
            part[6, i] = h02 * e00 + h12 * e10 + h22 * e20
            part[7, i] = h02 * e01 + h12 * e11 + h22 * e21
            part[8, i] = h02 * e02 + h12 * e12 + h22 * e22
        for r in range(3):  # M + M^T
            for c in range(3):
                out[b, r, c] = np.sum(part[3 * r + c]) + np.sum(part[3 * c + r])
    return out


@njit(cache=True, error_model="numpy")
def congruence_sum_eig(a, d, code):
    """``sum_i f(sym(a d_i a))`` for symmetric ``a`` ``(..., k, k)`` and ``d``
    ``(n, k, k)``, with the eigendecompositions it used: ``(s, w, fw, u)``, shapes
    ``(..., k, k)``, ``(..., n, k)``, ``(..., n, k)`` (``f(w)``), ``(..., n, k, k)``."""
    k, n = a.shape[-1], d.shape[0]
    a3, d3 = _as_stack(a), _as_stack(d)
    if k == 3 and code == _LOG:
        out, ws, fws, us = _log_sum3(a3, d3)
    else:
        out, ws, fws, us = _congruence_sum_stack(a3, d3, code)
    return (
        out.reshape(a.shape),
        ws.reshape((*a.shape[:-2], n, k)),
        fws.reshape((*a.shape[:-2], n, k)),
        us.reshape((*a.shape[:-2], n, k, k)),
    )


@njit(cache=True, error_model="numpy")
def congruence_sum_pullback_eig(a, d, w, fw, u, g, code):
    """Pullback to ``a`` of :func:`congruence_sum_eig` for the cotangent ``g``
    ``(..., k, k)``, from its eigendecompositions ``(w, fw, u)``."""
    k, n = a.shape[-1], d.shape[0]
    a3, d3, g3 = _as_stack(a), _as_stack(d), _as_stack(g)
    nb = a3.shape[0]
    ws = np.ascontiguousarray(w).reshape((nb, n, k))
    fws = np.ascontiguousarray(fw).reshape((nb, n, k))
    us = np.ascontiguousarray(u).reshape((nb, n, k, k))
    if k == 3 and code == _LOG:
        out = _log_sum3_pullback(a3, d3, ws, fws, us, g3)
    else:
        out = _congruence_sum_pullback_stack(a3, d3, ws, us, g3, code)
    return out.reshape(a.shape)


# --- the Fréchet mean's sum of logarithms ----------------------------------------------
#
# One pass of the SPD Fréchet mean needs only weighted sums over the data: the whitened
# logs, the squared log-eigenvalues and (for a Newton step) the second moments of the
# logs. Nothing per datum is kept (unlike KNG's pullback), so the congruence, the
# eigendecomposition, the log and the sums run fused, with no temporary the size of
# the data. A log is summed in orthonormal coordinates ``c`` (the frame ``E_ii``,
# ``(E_ij + E_ji)/sqrt(2)`` of ``identity_frame``, diagonal first, then ``i < j`` row by
# row): ``c_e = L_ii`` or ``sqrt(2) L_ij``.

_SOA_CHUNK = 64  # matrices per vectorized Jacobi: its (k, k, chunk) arrays stay in L1/L2
_SQRT2 = np.sqrt(2.0)


@njit(cache=True, inline="always", error_model="numpy")
def _log_2x2(p00, p11, p01):
    """``log P`` of a 2 x 2 SPD matrix as ``alpha I + beta P`` and ``|log lambda|^2``.

    ``beta = log[l1, l2]`` is the divided difference of ``log`` at the eigenvalues
    (exact as they merge), ``alpha = log l1 - beta l1``; the eigenvalues as in LAPACK's
    ``dlaev2``: the larger ``m + r``, the smaller ``det / (m + r)`` (no cancellation)."""
    m = 0.5 * (p00 + p11)
    h = 0.5 * (p00 - p11)
    r = np.hypot(h, p01)
    big = m + r
    small = (p00 * p11 - p01 * p01) / big
    lb = np.log(big)
    ls = np.log(small)
    beta = _log_divided_difference(big, small, lb, ls)
    alpha = lb - beta * big
    return alpha, beta, lb * lb + ls * ls


@njit(cache=True, error_model="numpy")
def _log_congruence_mean_soa(a, d, wts, cs_out, moments):
    """:func:`log_congruence_mean` for ``3 <= k <= JACOBI_MAX_K``: chunks of matrices
    through a cyclic Jacobi vectorized over the chunk (the data axis innermost, as in
    :func:`_soa_jacobi3`). Adds the weighted coordinates of the logs to ``cs_out``
    ``(d,)`` and, when ``moments`` has rows, their weighted second moments to it;
    returns ``sum_i w_i |log lambda_i|^2``."""
    k, n = a.shape[0], d.shape[0]
    dim = k * (k + 1) // 2
    nc = _SOA_CHUNK
    dt = np.empty((k, k, nc))
    p = np.empty((k, k, nc))
    t = np.empty((k, k, nc))
    u = np.empty((k, k, nc))
    lw = np.empty((k, nc))
    lc = np.empty((dim, nc))
    wl = np.empty((dim, nc))
    cs = np.empty(nc)
    sn = np.empty(nc)
    tn = np.empty(nc)
    energy = 0.0
    for start in range(0, n, nc):
        m = min(nc, n - start)
        for i in range(m):  # the chunk, data axis last (contiguous loads below)
            for r in range(k):
                for c in range(k):
                    dt[r, c, i] = d[start + i, r, c]
        for r in range(k):  # t = d_i a
            for c in range(k):
                for i in range(m):
                    t[r, c, i] = 0.0
                for j in range(k):
                    ajc = a[j, c]
                    for i in range(m):
                        t[r, c, i] += dt[r, j, i] * ajc
        for r in range(k):  # p = sym(a t)
            for c in range(r, k):
                for i in range(m):
                    acc = 0.0
                    for j in range(k):
                        acc += a[j, r] * t[j, c, i] + a[j, c] * t[j, r, i]
                    p[r, c, i] = 0.5 * acc
                    p[c, r, i] = 0.5 * acc
                    u[r, c, i] = 1.0 if r == c else 0.0
                    u[c, r, i] = u[r, c, i]
        for _ in range(_MAX_SWEEPS):
            active = 0
            for q0 in range(k - 1):
                for q1 in range(q0 + 1, k):
                    pair_active = 0
                    for i in range(m):
                        t_, c_, s_, negligible = _soa_rotation(
                            p[q0, q0, i], p[q1, q1, i], p[q0, q1, i]
                        )
                        pair_active += not negligible
                        tn[i] = t_
                        cs[i] = c_
                        sn[i] = s_
                    if pair_active == 0:
                        # every rotation of the chunk is the exact no-op (t = 0, c = 1,
                        # s = 0): skipping it leaves p and u bit for bit as they are,
                        # and the last sweep (and most of the one before) is all such
                        # pairs. Measured on 10^4 SPD(8): a pass 50 -> 38 ms.
                        continue
                    active += pair_active
                    # the rotation's exact effect on the symmetric p (as in
                    # _jacobi_eigh3): the 2 x 2 block through t, the other rows and
                    # columns rotated once and mirrored
                    for i in range(m):
                        apq = p[q0, q1, i]
                        p[q0, q0, i] -= tn[i] * apq
                        p[q1, q1, i] += tn[i] * apq
                        zero = 0.0 if sn[i] != 0.0 else apq
                        p[q0, q1, i] = zero
                        p[q1, q0, i] = zero
                    for r in range(k):
                        if r == q0 or r == q1:
                            continue
                        for i in range(m):
                            x = p[r, q0, i]
                            y = p[r, q1, i]
                            x2 = cs[i] * x - sn[i] * y
                            y2 = sn[i] * x + cs[i] * y
                            p[r, q0, i] = x2
                            p[r, q1, i] = y2
                            p[q0, r, i] = x2
                            p[q1, r, i] = y2
                    for r in range(k):
                        for i in range(m):
                            x = u[r, q0, i]
                            y = u[r, q1, i]
                            u[r, q0, i] = cs[i] * x - sn[i] * y
                            u[r, q1, i] = sn[i] * x + cs[i] * y
            if active == 0:
                break
        for j in range(k):
            for i in range(m):
                lj = np.log(p[j, j, i])
                energy += wts[start + i] * lj * lj
                lw[j, i] = lj
        e = 0
        for r in range(k):  # coordinates of L = U diag(log w) U^T, diagonal first
            for i in range(m):
                acc = 0.0
                for j in range(k):
                    acc += u[r, j, i] * lw[j, i] * u[r, j, i]
                lc[e, i] = acc
            e += 1
        for r in range(k):
            for c in range(r + 1, k):
                for i in range(m):
                    acc = 0.0
                    for j in range(k):
                        acc += u[r, j, i] * lw[j, i] * u[c, j, i]
                    lc[e, i] = _SQRT2 * acc
                e += 1
        for e in range(dim):
            acc = 0.0
            for i in range(m):
                wl[e, i] = wts[start + i] * lc[e, i]
                acc += wl[e, i]
            cs_out[e] += acc
        if moments.shape[0] > 0:  # loops, not np.dot: no BLAS threads, no copies
            for e in range(dim):
                for f in range(e, dim):
                    acc = 0.0
                    for i in range(m):
                        acc += wl[e, i] * lc[f, i]
                    moments[e, f] += acc
                    if f != e:
                        moments[f, e] += acc
    return energy


@njit(cache=True, error_model="numpy", inline="always")
def _from_coords(cs, k):
    """The symmetric ``(k, k)`` matrix of orthonormal coordinates ``cs`` (the diagonal
    first, then the upper triangle by rows, scaled by sqrt 2: ``identity_frame``'s order)."""
    out = np.empty((k, k))
    e = 0
    for r in range(k):
        out[r, r] = cs[e]
        e += 1
    for r in range(k):
        for cc in range(r + 1, k):
            out[r, cc] = cs[e] / _SQRT2
            out[cc, r] = out[r, cc]
            e += 1
    return out


def log_congruence_mean(a, d, wts, hessian):
    r"""Weighted sums of the logs of ``sym(a d_i a)``: their mean, energy and moments.

    With ``a = x^{-1/2}`` these are the SPD Fréchet mean's whitened mean log, its
    energy ``F(x)`` and what its Newton step needs: one eigendecomposition per datum,
    fused with the congruence, the log and the sums.

    Parameters
    ----------
    a : ndarray, shape ``(k, k)``
        Symmetric.
    d : ndarray, shape ``(n, k, k)``
        Symmetric positive definite data.
    wts : ndarray, shape ``(n,)``
        Weights.
    hessian : bool
        Whether to sum the second moments.

    Returns
    -------
    s : ndarray, shape ``(k, k)``
        ``sum_i w_i L_i``, ``L_i = log(sym(a d_i a))``, symmetric.
    energy : float
        ``(1/2) sum_i w_i |L_i|_F^2``.
    moments : ndarray, shape ``(dim, dim)`` (``(0, 0)`` without ``hessian``)
        ``sum_i w_i c_i c_i^T``, ``c_i`` the orthonormal coordinates of ``L_i``
        (``identity_frame``'s order), ``dim = k(k+1)/2``.

    Examples
    --------
    >>> d = np.stack([np.diag([np.e**2, 1.0, 1.0]), np.eye(3)])
    >>> s, energy, moments = log_congruence_mean(np.eye(3), d, np.full(2, 0.5), True)
    >>> np.round(np.diag(s), 12).tolist(), round(energy, 12), moments.shape
    ([1.0, 0.0, 0.0], 1.0, (6, 6))
    """
    a = np.ascontiguousarray(a, dtype=np.float64)
    d = np.ascontiguousarray(d, dtype=np.float64)
    wts = np.ascontiguousarray(wts, dtype=np.float64)
    # one kernel per case, so that SPD(2) compiles no eigendecomposition (LAPACK's eigh
    # and its error messages cost 7 CPU s of a cold first release, issue 38 item 6)
    if a.shape[0] == 2:
        return _log_congruence_mean_2x2(a, d, wts, bool(hessian))
    return _log_congruence_mean_k(a, d, wts, bool(hessian))


@njit(cache=True, error_model="numpy")
def _log_congruence_mean_2x2(a, d, wts, hessian):
    """:func:`log_congruence_mean` for ``k = 2``: closed-form logs of 2 x 2 matrices."""
    k, n = a.shape[0], d.shape[0]
    dim = k * (k + 1) // 2
    cs = np.zeros(dim)
    moments = np.zeros((dim, dim) if hessian else (0, 0))
    energy = 0.0
    c = np.empty(dim)
    a00, a01, a11 = a[0, 0], 0.5 * (a[0, 1] + a[1, 0]), a[1, 1]
    for i in range(n):
        d00, d11 = d[i, 0, 0], d[i, 1, 1]
        d01 = 0.5 * (d[i, 0, 1] + d[i, 1, 0])
        t00 = d00 * a00 + d01 * a01  # t = d a
        t01 = d00 * a01 + d01 * a11
        t10 = d01 * a00 + d11 * a01
        t11 = d01 * a01 + d11 * a11
        p00 = a00 * t00 + a01 * t10
        p11 = a01 * t01 + a11 * t11
        p01 = 0.5 * (a00 * t01 + a01 * t11 + a01 * t00 + a11 * t10)
        alpha, beta, l2 = _log_2x2(p00, p11, p01)
        wi = wts[i]
        c[0] = alpha + beta * p00
        c[1] = alpha + beta * p11
        c[2] = _SQRT2 * beta * p01
        for e in range(3):
            cs[e] += wi * c[e]
        if hessian:
            for e in range(3):
                for f in range(3):
                    moments[e, f] += wi * c[e] * c[f]
        energy += wi * l2
    return _from_coords(cs, k), 0.5 * energy, moments


@njit(cache=True, error_model="numpy")
def _log_congruence_mean_k(a, d, wts, hessian):
    """:func:`log_congruence_mean` for ``k >= 3``: Jacobi sweeps, or LAPACK's ``eigh``."""
    k, n = a.shape[0], d.shape[0]
    dim = k * (k + 1) // 2
    cs = np.zeros(dim)
    moments = np.zeros((dim, dim) if hessian else (0, 0))
    energy = 0.0
    c = np.empty(dim)
    if k <= JACOBI_MAX_K:
        energy = _log_congruence_mean_soa(a, d, wts, cs, moments)
    else:
        t = np.empty((k, k))
        p = np.empty((k, k))
        w = np.empty(k)
        u = np.empty((k, k))
        lw = np.empty(k)
        for i in range(n):
            for r in range(k):  # t = d_i a
                for cc in range(k):
                    acc = 0.0
                    for m in range(k):
                        acc += d[i, r, m] * a[m, cc]
                    t[r, cc] = acc
            for r in range(k):  # p = a t, symmetrized
                for cc in range(r, k):
                    acc = 0.0
                    for m in range(k):
                        acc += a[m, r] * t[m, cc] + a[m, cc] * t[m, r]
                    p[r, cc] = 0.5 * acc
                    p[cc, r] = 0.5 * acc
            _eigh(p, w, u)
            wi = wts[i]
            l2 = 0.0
            for m in range(k):
                lw[m] = np.log(w[m])
                l2 += lw[m] * lw[m]
            energy += wi * l2
            e = 0
            for r in range(k):
                acc = 0.0
                for m in range(k):
                    acc += u[r, m] * lw[m] * u[r, m]
                c[e] = acc
                e += 1
            for r in range(k):
                for cc in range(r + 1, k):
                    acc = 0.0
                    for m in range(k):
                        acc += u[r, m] * lw[m] * u[cc, m]
                    c[e] = _SQRT2 * acc
                    e += 1
            for e in range(dim):
                cs[e] += wi * c[e]
            if hessian:
                for e in range(dim):
                    for f in range(dim):
                        moments[e, f] += wi * c[e] * c[f]
    return _from_coords(cs, k), 0.5 * energy, moments
