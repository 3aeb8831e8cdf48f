r"""Fused log-densities on ``SPD(k)`` in chart coordinates (docs: FUSED contract).

The chart at an origin ``p`` with square root ``S = p^{1/2}`` (``SPD.chart_frame``) maps
``c`` ``(d,)``, ``d = k(k+1)/2``, to the symmetric ``W = sum_a c_a E_a`` (``E_ii``, then
``(E_ij + E_ji)/sqrt 2`` for ``i < j`` row by row: ``identity_frame``) and on to
``X = sym(S expm(W) S)``. Two numbers of ``c`` and their exact gradients:

- :func:`log_volume_density`: ``log J = sum_{i<j} log sinhc((w_i - w_j)/2)`` over the
  eigenvalues ``w`` of ``W`` (``SPD.pt_log_volume_density``), whose gradient is
  ``U diag(dlogJ/dw) U^T`` (a symmetric function of the eigenvalues: equal partials on
  tied eigenvalues, so the basis inside an eigenspace does not matter);
- :func:`kng_norm`: ``N = |T|_F``, ``T = sum_i logm(xi D_i xi)``, ``xi = X^{-1/2}``
  (``SPD.pt_frechet_gradient_norm``'s congruence sum; the norm at ``X`` undoes the outer
  congruence of ``log_X``).

KNG's gradient needs ``Tbar = T / N`` in every record's pullback, and ``T`` is known
only after the last record. The pullback is linear in ``Tbar``, so one pass over the
records accumulates it as a ``d x d`` matrix ``J`` (``<Tbar, dT> = Tbar . J dxi``, in
the coordinates below), beside ``T``; after the pass ``xibar = J^T Tbar`` goes back
through ``invsqrt``, the congruence by ``S`` and ``expm`` once (Daleckii–Krein, the
kernels of :mod:`pymc_manidp.geometry._numba.sym_kernels`). Nothing the size of the data
is allocated and no record is read twice.

Coordinates of a symmetric matrix ``A`` here are its entries ``A_pp`` then ``A_pq``
(``p < q``, row by row), the chart's order. A gradient with respect to ``xi`` is taken
in *parameters* (an off-diagonal parameter moves both entries ``pq`` and ``qp``), and
``J`` pairs ``Tbar``'s entries with weight 1 on the diagonal and 2 off it (the Frobenius
inner product of symmetric matrices).

``k`` is a runtime size, so :func:`log_volume_density` and :func:`kng_norm` compile the
code of every size (13 s of CPU cold for the KNG norm). :func:`kernels` gives the pair
for one size: ``k = 2`` in closed forms (:func:`kng_norm_2`, 1.0 s), ``k = 3`` without
the general-k loops (:func:`kng_norm_3`), other sizes without either
(:func:`kng_norm_k`).

Speed at ``k = 2`` (SPD(2) is the slowest space per record): the records' loop
(:func:`_sum2`) goes by blocks of 64 records with no branch and no call (:func:`_log`,
fdlibm's logarithm, in place of libm's), which LLVM vectorizes, 8 records per AVX-512
instruction. At n = 10^4 (``docs/benchmarks/bench_fused_spd.py``: profile_first_release's
SPD2 case, medians of 300 interleaved calls, 2 shared cores, 2026-11-28) a call went
from 27 to 5.5 ns per record, 4.9x, both at ``x`` near the records' mean and 0.3 r
from it. The values stay within 1e-13 and the gradients within 8e-13 of the scalar
loop's (near the mean, where ``T`` cancels to 4e-5 of the sum of its terms' sizes):
mostly the scalar loop's own rounding, whose sequential sums were up to 1.3e-9 from
``math.fsum`` of the same terms, against 2e-11 for the per-lane sums. Cold compile of
:func:`kng_norm_2`: 0.5 -> 1.0 s of CPU.
"""

from __future__ import annotations

import numpy as np
from numba.core import types
from numba.extending import intrinsic

from pymc_manidp.geometry._numba.cache import njit

# the Jacobi loops, not sym_kernels._eigh: _eigh also holds np.linalg.eigh (k > 8), whose
# LAPACK binding alone took 6-8 s of a cold compile (measured 2026-11-28), and these
# kernels are compiled whole whatever k is (k is a runtime size)
from pymc_manidp.geometry._numba.sym_kernels import (
    _ENTRY_COL,
    _ENTRY_ROW,
    _dk_pullback,
    _jacobi_eigh,
)
from pymc_manidp.geometry._numba.sym_sums import _log_divided_difference, _soa_jacobi3

__all__ = [
    "kernels",
    "kng_norm",
    "kng_norm_2",
    "kng_norm_3",
    "kng_norm_k",
    "log_volume_density",
    "log_volume_density_2",
    "params",
]

_INV_SQRT2 = 1.0 / np.sqrt(2.0)  # the frame's off-diagonal entry, as identity_frame stores it
# log(sinh t / t): the series below |t| = 0.05 (pt_numerics._LOG_SERIES_SQ's root), the
# asymptotic form from |t| = 20, as pt_numerics.log_sinhc
_LOG_SERIES_SQ = 0.05**2
_LOG_SERIES = np.sqrt(_LOG_SERIES_SQ)
_C1, _C2, _C3, _C4, _C5 = 1 / 6, 1 / 180, 1 / 2835, 1 / 37800, 1 / 467775
_EXP, _INVSQRT = 0, 3  # sym_kernels.FUNC_CODES
# log[l1, l2] of a 2 x 2 matrix: pt_numerics' series of atanh(d)/d below d^2 = 1e-3
_ATANHC_SERIES_SQ = 1e-3
# d log[l1, l2] / ds (s the squared half-gap): its series in u = s/m^2 below 0.01 (the
# next term 9 u^8/19 < 5e-17 of the first), the quotient (m/det - beta)/(2s) above,
# which loses at most 1/u ~ 100 rounding units to cancellation there
_BETA_S_SERIES = 1e-2


def params(manifold) -> np.ndarray:
    """No constants: ``k`` is the frame's size and the metric has no scale parameter."""
    return np.zeros(0)


@njit(cache=True, inline="always", error_model="numpy")
def _series(s):
    """``log(sinh t / t)`` in ``s = t^2``, summed as pt_numerics._series."""
    return ((((0.0 + _C1 * s) + (-_C2) * s**2) + _C3 * s**3) + (-_C4) * s**4) + _C5 * s**5


@njit(cache=True, inline="always", error_model="numpy")
def _series_ds(s):
    """``d/ds`` of :func:`_series`."""
    return _C1 - 2.0 * _C2 * s + 3.0 * _C3 * s * s - 4.0 * _C4 * s**3 + 5.0 * _C5 * s**4


@njit(cache=True, inline="always", error_model="numpy")
def _log_sinhc(t):
    """``log(sinh t / t)`` and its derivative in ``t``, on pt_numerics.log_sinhc's branches."""
    at = abs(t)
    if at < _LOG_SERIES:
        t2 = t * t
        return _series(t2), 2.0 * t * _series_ds(t2)
    sign = 1.0 if t > 0.0 else -1.0
    if at >= 20.0:
        e = np.exp(-2.0 * at)
        val = at - np.log(2.0 * at) + np.log1p(-e)
        return val, sign * (1.0 - 1.0 / at + 2.0 * e / (1.0 - e))
    sh = np.sinh(at)
    return np.log(sh / at), sign * (np.cosh(at) / sh - 1.0 / at)


@njit(cache=True, inline="always", error_model="numpy")
def _log_sinhc_sqrt(s):
    """``log(sinh sqrt(s) / sqrt(s))`` and its derivative in ``s >= 0``
    (pt_numerics.log_sinhc_sqrt: the series in ``s`` below ``0.05^2``)."""
    if s < _LOG_SERIES_SQ:
        return _series(s), _series_ds(s)
    t = np.sqrt(s)
    val, dt = _log_sinhc(t)
    return val, dt / (2.0 * t)


@njit(cache=True, error_model="numpy")
def _fill_w(c, k, w):
    """``W = sum_a c_a E_a`` into ``w`` ``(k, k)``."""
    for i in range(k):
        w[i, i] = c[i]
    a = k
    for i in range(k):
        for j in range(i + 1, k):
            w[i, j] = c[a] * _INV_SQRT2
            w[j, i] = w[i, j]
            a += 1


@njit(cache=True, error_model="numpy")
def _add_coords(gw, k, scale, g_c):
    """Add ``scale * tr(G E_a)`` for each frame element ``E_a`` to ``g_c``
    (``G`` ``(k, k)`` symmetric: ``G_ii`` and ``sqrt(2) G_ij``)."""
    for i in range(k):
        g_c[i] += scale * gw[i, i]
    a = k
    for i in range(k):
        for j in range(i + 1, k):
            g_c[a] += scale * (2.0 * gw[i, j] * _INV_SQRT2)
            a += 1


@njit(cache=True, error_model="numpy")
def log_volume_density_2(c, frame, params, g_c):
    """:func:`log_volume_density` for ``k = 2`` only: the one pair's ``log sinhc`` as a
    function of the squared half-gap ``s`` (no eigenvectors), straight-line code that
    compiles in a fraction of the general kernel's time."""
    h = 0.5 * (c[0] - c[1])
    b = c[2] * _INV_SQRT2
    val, ds = _log_sinhc_sqrt(h * h + b * b)
    # s = h^2 + b^2: ds/dc = (h, -h, 2 b / sqrt 2)
    g_c[0] += ds * h
    g_c[1] += -ds * h
    g_c[2] += ds * (2.0 * b * _INV_SQRT2)
    return val


@njit(cache=True, error_model="numpy")
def log_volume_density(c, frame, params, g_c):
    """``log J(c)`` as ``SPD.pt_log_volume_density(c)``; adds ``d log J / dc`` to ``g_c``.

    ``k = 2``: the one pair's ``log sinhc`` as a function of the squared half-gap ``s``
    (no eigenvectors); ``k >= 3``: the eigenvalues of ``W`` (the Jacobi kernel the
    graph's ``SymEigvalsh`` runs) and the gradient ``U diag(dlogJ/dw) U^T``.
    """
    k = frame[0].shape[0]
    if k == 1:
        return 0.0
    if k == 2:
        return log_volume_density_2(c, frame, params, g_c)
    a = np.empty((k, k))
    u = np.empty((k, k))
    w = np.empty(k)
    _fill_w(c, k, a)
    _jacobi_eigh(a, w, u)
    gw = np.zeros(k)
    val = 0.0
    for i in range(k):
        for j in range(i + 1, k):
            v, dt = _log_sinhc(0.5 * (w[i] - w[j]))
            val += v
            gw[i] += 0.5 * dt
            gw[j] -= 0.5 * dt
    for i in range(k):  # a = U diag(gw) U^T
        for j in range(i, k):
            acc = 0.0
            for m in range(k):
                acc += u[i, m] * gw[m] * u[j, m]
            a[i, j] = acc
            a[j, i] = acc
    _add_coords(a, k, 1.0, g_c)
    return val


# --- KNG's norm ---------------------------------------------------------------------


@njit(cache=True, error_model="numpy")
def _function(w, u, code, out):
    """``U diag(f(w)) U^T`` into ``out`` (``f = exp`` or ``invsqrt``)."""
    k = w.shape[0]
    fw = np.empty(k)
    for m in range(k):
        fw[m] = np.exp(w[m]) if code == _EXP else 1.0 / np.sqrt(w[m])
    for i in range(k):
        for j in range(i, k):
            acc = 0.0
            for m in range(k):
                acc += u[i, m] * fw[m] * u[j, m]
            out[i, j] = acc
            out[j, i] = acc


@njit(cache=True, error_model="numpy")
def _congruence(s, a, out):
    """``sym(s a s)`` into ``out`` for symmetric ``s``, ``a``."""
    k = s.shape[0]
    t = np.empty((k, k))
    for i in range(k):  # t = a s
        for j in range(k):
            acc = 0.0
            for m in range(k):
                acc += a[i, m] * s[m, j]
            t[i, j] = acc
    for i in range(k):
        for j in range(i, k):
            acc = 0.0
            for m in range(k):
                acc += s[i, m] * t[m, j] + s[j, m] * t[m, i]
            out[i, j] = 0.5 * acc
            out[j, i] = 0.5 * acc


@njit(cache=True, inline="always", error_model="numpy")
def _beta_s2(m, s, u, inv, beta):
    """``2 d log[l1, l2] / ds`` at fixed ``m`` (``l = m +- sqrt(s)``, ``beta = log[l1, l2]``,
    ``u = s/m^2``, ``inv = 1/det``): ``(m/det - beta) / s``, or ``2 phi'(u)/m^3`` with
    ``phi(u) = atanh(sqrt u)/sqrt u`` where that quotient cancels."""
    ser = 1 / 3 + u * (
        2 / 5 + u * (3 / 7 + u * (4 / 9 + u * (5 / 11 + u * (6 / 13 + u * (7 / 15 + u * 8 / 17)))))
    )
    # both sides and a select, not a branch: this runs in _sum2's vectorized loop
    return 2.0 * ser / (m * m * m) if u < _BETA_S_SERIES else (m * inv - beta) / s


# --- k = 2: the records in blocks, a loop LLVM vectorizes -------------------------------


@intrinsic
def _f2i(typingctx, x):
    """The bits of a float64 as an int64 (a register move: no memory, no call)."""

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], context.get_value_type(types.int64))

    return types.int64(types.float64), codegen


@intrinsic
def _i2f(typingctx, x):
    """The float64 of an int64's bits (the inverse of :func:`_f2i`)."""

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], context.get_value_type(types.float64))

    return types.float64(types.int64), codegen


# fdlibm's e_log.c (musl's log.c before 2018): ln 2 split so that k ln2_hi is exact, and
# the minimax polynomial R(s^2) of (log(1+f) - 2s)/s, s = f/(2+f), |s| <= 0.1716
_LN2_HI = 6.93147180369123816490e-01
_LN2_LO = 1.90821492927058770002e-10
_LG1 = 6.666666666666735130e-01
_LG2 = 3.999999999940941908e-01
_LG3 = 2.857142874366239149e-01
_LG4 = 2.222219843214978396e-01
_LG5 = 1.818357216161805012e-01
_LG6 = 1.531383769920937332e-01
_LG7 = 1.479819860511658591e-01
_TINY_NORMAL = 2.2250738585072014e-308  # the least normal float64
_TWO54 = 18014398509481984.0  # 2^54: scales a subnormal into the normal range
_HI = 4294967296  # 2^32: a high word's unit in the int64 of a float64


@njit(cache=True, inline="always", error_model="numpy")
def _log(x):
    """``log(x)`` to within 1 ulp (fdlibm's algorithm: ``x = 2^k (1 + f)``,
    ``1 + f`` in ``[sqrt(2)/2, sqrt(2))``), with no branch and no call, so that a loop
    of it vectorizes (libm's ``log`` is a call numba cannot vectorize). Subnormals are
    scaled by ``2^54`` first; ``log(0) = -inf``, ``log(x < 0) = nan``, ``log(inf) = inf``
    and ``log(nan) = nan``, as libm's."""
    sub = x < _TINY_NORMAL
    hx = _f2i(x * _TWO54 if sub else x)
    # the high word's 0x3ff00000 - 0x3fe6a09e moves the mantissas from sqrt(2)/2 up into
    # the next binade, so that k counts them one exponent higher (fdlibm's reduction)
    hx += (0x3FF00000 - 0x3FE6A09E) * _HI
    k = (hx >> 52) - (1023 + 54 if sub else 1023)
    f = _i2f((hx & 0x000FFFFFFFFFFFFF) + 0x3FE6A09E * _HI) - 1.0
    hfsq = 0.5 * f * f
    s = f / (2.0 + f)
    z = s * s
    w = z * z
    t1 = w * (_LG2 + w * (_LG4 + w * _LG6))
    t2 = z * (_LG1 + w * (_LG3 + w * (_LG5 + w * _LG7)))
    dk = float(k)
    val = s * (hfsq + (t2 + t1)) + dk * _LN2_LO - hfsq + f + dk * _LN2_HI
    val = -np.inf if x == 0.0 else val
    val = np.nan if x < 0.0 else val
    return x if not (x < np.inf or x < 0.0) else val  # inf and nan: x itself


_BLOCK2 = 64  # records per block at k = 2: the block's 15 rows stay in L1
_NSUM2 = 12  # the sums of _sum2, rows 0-11 of its block; rows 12-14 hold the records


@njit(cache=True, error_model="numpy")
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
    below ``d^2 = 1e-3``, ``l2 = det/l1`` above).

    Speed: the records go by blocks of ``_BLOCK2``, copied into rows (the data's
    strides are runtime values, which would make the vector loads gathers); the loop
    over a block's records has no branch (both sides of each switch are computed and
    one selected, on the scalar code's tests) and no call (:func:`_log`), so LLVM runs
    it 8 records per AVX-512 instruction. Strict floating point does not vectorize a
    reduction, so each lane keeps its own sums (rows 0-11 of the block), added up once
    after the last block."""
    n = data.shape[0]
    nb = _BLOCK2
    # one flat array of rows of a constant length: LLVM sees that the rows do not
    # overlap (separate arrays would need run-time alias checks before the vector loop),
    # and a flat index compiles to less than a 2-d one (0.1 s of a cold compile)
    buf = np.zeros((_NSUM2 + 3) * nb)
    for start in range(0, n, nb):
        nr = min(nb, n - start)
        for j in range(nr):
            i = start + j
            buf[12 * nb + j] = data[i, 0, 0]
            buf[13 * nb + j] = data[i, 1, 1]
            buf[14 * nb + j] = 0.5 * (data[i, 0, 1] + data[i, 1, 0])
        for j in range(nr):
            dp, dr, dq = buf[12 * nb + j], buf[13 * nb + j], buf[14 * nb + j]
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
            series = d2 < _ATANHC_SERIES_SQ
            # two logarithms, not the graph's three: log det = log l1 + log l2 to
            # rounding; on the series side the first is log det, the second unused
            rt = np.sqrt(s)
            l1 = m + rt
            la = _log(det if series else l1)
            lb = _log(det / l1)
            beta_near = (1.0 + d2 * (1 / 3 + d2 * (1 / 5 + d2 * (1 / 7 + d2 / 9)))) / m
            beta = beta_near if series else (la - lb) / (2.0 * rt)
            mu = 0.5 * la if series else 0.5 * (la + lb)
            buf[0 * nb + j] += mu + beta * h
            buf[1 * nb + j] += mu - beta * h
            buf[2 * nb + j] += beta * q
            inv = 1.0 / det
            bs2 = _beta_s2(m, s, d2, inv, beta)
            # dP/d(al, ga, be): dp = (2t1, 0, 2t2), dr = (0, 2t4, 2t3), dq = (t3, t2, t1 + t4)
            # so dm = (t1, t4, t2 + t3), dh = (t1, -t4, t2 - t3)
            dm0, dm1, dm2 = t1, t4, t2 + t3
            dh0, dh1, dh2 = t1, -t4, t2 - t3
            dq0, dq1, dq2 = t3, t2, t1 + t4
            buf[3 * nb + j] += (m * dm0 - h * dh0 - q * dq0) * inv
            buf[4 * nb + j] += (m * dm1 - h * dh1 - q * dq1) * inv
            buf[5 * nb + j] += (m * dm2 - h * dh2 - q * dq2) * inv
            db0 = -dm0 * inv + bs2 * (h * dh0 + q * dq0)
            db1 = -dm1 * inv + bs2 * (h * dh1 + q * dq1)
            db2 = -dm2 * inv + bs2 * (h * dh2 + q * dq2)
            buf[6 * nb + j] += h * db0 + beta * dh0
            buf[7 * nb + j] += h * db1 + beta * dh1
            buf[8 * nb + j] += h * db2 + beta * dh2
            buf[9 * nb + j] += q * db0 + beta * dq0
            buf[10 * nb + j] += q * db1 + beta * dq1
            buf[11 * nb + j] += q * db2 + beta * dq2
    sums = np.empty(_NSUM2)
    for e in range(_NSUM2):
        acc = 0.0
        for j in range(nb):
            acc += buf[e * nb + j]
        sums[e] = acc
    return sums


@njit(cache=True, error_model="numpy")
def _sum_k(xi, data, tsum, jac):
    """``k >= 3`` (and 1): ``T`` into ``tsum`` and the pairing ``jac`` with
    ``<Tbar, dT> = sum_e Tbar_e (jac dxi)_e`` (``Tbar``'s entries, ``dxi`` in parameters).

    Per record ``P = xi D xi = U diag(w) U^T``, ``Q = D xi``, ``r_n = Q u_n``:
    ``<Tbar, dlog P> = 2 sum_{m,n} Gamma_mn (u_m^T Tbar u_n)(u_m^T dxi r_n)``
    (Daleckii–Krein, ``dP = dxi Q + Q^T dxi``, ``Gamma`` the divided differences of
    ``log``), a sum of ``k(k+1)/2`` outer products over the pairs ``m <= n``."""
    k = xi.shape[0]
    dim = k * (k + 1) // 2
    q = np.empty((k, k))
    p = np.empty((k, k))
    u = np.empty((k, k))
    w = np.empty(k)
    lw = np.empty(k)
    rr = np.empty((k, k))
    av = np.empty(dim)
    bv = np.empty(dim)
    for i in range(data.shape[0]):
        for r in range(k):  # q = D_i xi
            for c in range(k):
                acc = 0.0
                for m in range(k):
                    acc += data[i, r, m] * xi[m, c]
                q[r, c] = acc
        for r in range(k):  # p = sym(xi q)
            for c in range(r, k):
                acc = 0.0
                for m in range(k):
                    acc += xi[m, r] * q[m, c] + xi[m, c] * q[m, r]
                p[r, c] = 0.5 * acc
                p[c, r] = 0.5 * acc
        _jacobi_eigh(p, w, u)
        for m in range(k):
            lw[m] = np.log(w[m])
        e = 0
        for r in range(k):
            acc = 0.0
            for m in range(k):
                acc += u[r, m] * lw[m] * u[r, m]
            tsum[e] += acc
            e += 1
        for r in range(k):
            for c in range(r + 1, k):
                acc = 0.0
                for m in range(k):
                    acc += u[r, m] * lw[m] * u[c, m]
                tsum[e] += acc
                e += 1
        for r in range(k):  # rr = q U
            for c in range(k):
                acc = 0.0
                for m in range(k):
                    acc += q[r, m] * u[m, c]
                rr[r, c] = acc
        for m in range(k):
            for n in range(m, k):
                if n == m:
                    coef = 1.0 / w[m]
                else:
                    coef = 2.0 * _log_divided_difference(w[m], w[n], lw[m], lw[n])
                # av = entries of sym(u_m u_n^T) paired with Tbar (off-diagonal twice);
                # bv = parameters' pairing with sym(u_m r_n^T + u_n r_m^T)
                e = 0
                for r in range(k):
                    av[e] = u[r, m] * u[r, n]
                    bv[e] = u[r, m] * rr[r, n] + u[r, n] * rr[r, m]
                    e += 1
                for r in range(k):
                    for c in range(r + 1, k):
                        av[e] = u[r, m] * u[c, n] + u[c, m] * u[r, n]
                        bv[e] = (
                            u[r, m] * rr[c, n]
                            + u[c, m] * rr[r, n]
                            + u[r, n] * rr[c, m]
                            + u[c, n] * rr[r, m]
                        )
                        e += 1
                for e in range(dim):
                    ae = coef * av[e]
                    for f in range(dim):
                        jac[e, f] += ae * bv[f]


@njit(cache=True, inline="always", error_model="numpy")
def _sinhc_sqrt_ds(s):
    """``d/ds [sinh(sqrt s)/sqrt s] = (cosh(sqrt s) - sinh(sqrt s)/sqrt s) / (2s)``; its
    series below ``s = 0.01`` (the quotient cancels there; the next term is 1e-19)."""
    if s < 1e-2:
        return 1 / 6 + s * (
            1 / 60 + s * (1 / 1680 + s * (1 / 90720 + s * (1 / 7983360 + s / 1037836800)))
        )
    r = np.sqrt(s)
    return (np.cosh(r) - np.sinh(r) / r) / (2.0 * s)


@njit(cache=True, error_model="numpy")
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
    sm = _sum2(al, ga, be, data)
    s00, s11, s01, mu0, mu1, mu2 = sm[0], sm[1], sm[2], sm[3], sm[4], sm[5]
    a0, a1, a2, b0, b1, b2 = sm[6], sm[7], sm[8], sm[9], sm[10], sm[11]
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


_CHUNK = 64  # records per vectorized Jacobi (sym_sums._SOA_CHUNK): the chunk stays in L1/L2


# inlined: compiled once inside the kernel, not compiled alone and linked in again
@njit(cache=True, inline="always", error_model="numpy")
def _sum3(xi, data, tsum, jac):
    """:func:`_sum_k` at ``k = 3``, vectorized over chunks of records.

    The records of a chunk go through sym_sums' vectorized Jacobi (the data axis
    innermost, as the graph's ``SymCongruenceSum`` kernel, whose congruence it copies
    term for term); every loop below has the chunk as its inner loop and no reduction
    (strict floating point does not vectorize reductions): the sums are kept per lane
    and added up once, after the last chunk."""
    n = data.shape[0]
    nc = _CHUNK
    pa = np.empty((6, nc))  # P: entries 00 11 22 01 02 12, then eigenvalues in rows 0-2
    ua = np.empty((9, nc))  # eigenvectors, u_rc at 3r + c
    qa = np.empty((9, nc))  # Q = D xi, q_rc at 3r + c
    ra = np.empty((9, nc))  # R = Q U
    lw = np.empty((3, nc))
    co = np.empty(nc)
    av = np.empty((6, nc))
    bv = np.empty((6, nc))
    tacc = np.zeros((6, nc))
    jacc = np.zeros((36, nc))
    a00, a01, a02 = xi[0, 0], xi[0, 1], xi[0, 2]
    a10, a11, a12 = xi[1, 0], xi[1, 1], xi[1, 2]
    a20, a21, a22 = xi[2, 0], xi[2, 1], xi[2, 2]
    for start in range(0, n, nc):
        m = min(nc, n - start)
        for j in range(m):  # sym_sums._log_sum3's congruence, term for term
            i = start + j
            t00 = data[i, 0, 0] * a00 + data[i, 0, 1] * a10 + data[i, 0, 2] * a20
            t01 = data[i, 0, 0] * a01 + data[i, 0, 1] * a11 + data[i, 0, 2] * a21
            t02 = data[i, 0, 0] * a02 + data[i, 0, 1] * a12 + data[i, 0, 2] * a22
            t10 = data[i, 1, 0] * a00 + data[i, 1, 1] * a10 + data[i, 1, 2] * a20
            t11 = data[i, 1, 0] * a01 + data[i, 1, 1] * a11 + data[i, 1, 2] * a21
            t12 = data[i, 1, 0] * a02 + data[i, 1, 1] * a12 + data[i, 1, 2] * a22
            t20 = data[i, 2, 0] * a00 + data[i, 2, 1] * a10 + data[i, 2, 2] * a20
            t21 = data[i, 2, 0] * a01 + data[i, 2, 1] * a11 + data[i, 2, 2] * a21
            t22 = data[i, 2, 0] * a02 + data[i, 2, 1] * a12 + data[i, 2, 2] * a22
            qa[0, j], qa[1, j], qa[2, j] = t00, t01, t02
            qa[3, j], qa[4, j], qa[5, j] = t10, t11, t12
            qa[6, j], qa[7, j], qa[8, j] = t20, t21, t22
            pa[0, j] = a00 * t00 + a10 * t10 + a20 * t20
            pa[1, j] = a01 * t01 + a11 * t11 + a21 * t21
            pa[2, j] = a02 * t02 + a12 * t12 + a22 * t22
            pa[3, j] = 0.5 * (a00 * t01 + a10 * t11 + a20 * t21 + a01 * t00 + a11 * t10 + a21 * t20)
            pa[4, j] = 0.5 * (a00 * t02 + a10 * t12 + a20 * t22 + a02 * t00 + a12 * t10 + a22 * t20)
            pa[5, j] = 0.5 * (a01 * t02 + a11 * t12 + a21 * t22 + a02 * t01 + a12 * t11 + a22 * t21)
        for j in range(m, nc):  # the last chunk's idle lanes: the identity, no rotation
            for e in range(6):
                pa[e, j] = 1.0 if e < 3 else 0.0
        _soa_jacobi3(pa, ua)
        for mm in range(3):  # library calls: a loop of their own
            for j in range(m):
                lw[mm, j] = np.log(pa[mm, j])
        for e in range(6):  # T += U diag(log w) U^T
            r, c = _ENTRY_ROW[e], _ENTRY_COL[e]
            for j in range(m):
                tacc[e, j] += (
                    ua[3 * r, j] * lw[0, j] * ua[3 * c, j]
                    + ua[3 * r + 1, j] * lw[1, j] * ua[3 * c + 1, j]
                    + ua[3 * r + 2, j] * lw[2, j] * ua[3 * c + 2, j]
                )
        for r in range(3):  # R = Q U
            for c in range(3):
                for j in range(m):
                    ra[3 * r + c, j] = (
                        qa[3 * r, j] * ua[c, j]
                        + qa[3 * r + 1, j] * ua[3 + c, j]
                        + qa[3 * r + 2, j] * ua[6 + c, j]
                    )
        for mm in range(3):
            for nn in range(mm, 3):
                if nn == mm:
                    for j in range(m):
                        co[j] = 1.0 / pa[mm, j]
                else:
                    for j in range(m):
                        co[j] = 2.0 * _log_divided_difference(
                            pa[mm, j], pa[nn, j], lw[mm, j], lw[nn, j]
                        )
                for e in range(6):
                    r, c = _ENTRY_ROW[e], _ENTRY_COL[e]
                    if r == c:
                        for j in range(m):
                            av[e, j] = co[j] * (ua[3 * r + mm, j] * ua[3 * r + nn, j])
                            bv[e, j] = (
                                ua[3 * r + mm, j] * ra[3 * r + nn, j]
                                + ua[3 * r + nn, j] * ra[3 * r + mm, j]
                            )
                    else:
                        for j in range(m):
                            av[e, j] = co[j] * (
                                ua[3 * r + mm, j] * ua[3 * c + nn, j]
                                + ua[3 * c + mm, j] * ua[3 * r + nn, j]
                            )
                            bv[e, j] = (
                                ua[3 * r + mm, j] * ra[3 * c + nn, j]
                                + ua[3 * c + mm, j] * ra[3 * r + nn, j]
                                + ua[3 * r + nn, j] * ra[3 * c + mm, j]
                                + ua[3 * c + nn, j] * ra[3 * r + mm, j]
                            )
                for e in range(6):
                    for f in range(6):
                        for j in range(m):
                            jacc[6 * e + f, j] += av[e, j] * bv[f, j]
    for e in range(6):
        acc = 0.0
        for j in range(nc):
            acc += tacc[e, j]
        tsum[e] += acc
        for f in range(6):
            acc = 0.0
            for j in range(nc):
                acc += jacc[6 * e + f, j]
            jac[e, f] += acc


# inlined: compiled once inside the kernel, not compiled alone and linked in again
@njit(cache=True, inline="always", error_model="numpy")
def _chart_point(c, sq):
    """``W``, its eigendecomposition, ``E = expm(W)``, ``X = sym(S E S)``, its
    eigendecomposition and ``xi = X^{-1/2}``: ``(wm, om, vv, em, xm, lam, zz, xi)``."""
    k = sq.shape[0]
    wm = np.empty((k, k))
    tmp = np.empty((k, k))
    om = np.empty(k)
    vv = np.empty((k, k))
    lam = np.empty(k)
    zz = np.empty((k, k))
    em = np.empty((k, k))
    xm = np.empty((k, k))
    xi = np.empty((k, k))
    _fill_w(c, k, wm)
    tmp[:, :] = wm
    _jacobi_eigh(tmp, om, vv)
    _function(om, vv, _EXP, em)
    _congruence(sq, em, xm)
    tmp[:, :] = xm
    _jacobi_eigh(tmp, lam, zz)
    _function(lam, zz, _INVSQRT, xi)
    return wm, om, vv, em, xm, lam, zz, xi


# inlined: compiled once inside the kernel, not compiled alone and linked in again
@njit(cache=True, inline="always", error_model="numpy")
def _pull_back(sq, point, tsum, jac, weight, g_c):
    """``N = |T|_F``, and ``weight * dN/dc`` added to ``g_c``: ``xibar = jac^T T/N``
    back through ``invsqrt``, the congruence by ``S`` and ``expm``. The work arrays of
    ``point`` (:func:`_chart_point`) are overwritten."""
    wm, om, vv, em, xm, lam, zz, _ = point
    k = sq.shape[0]
    dim = k * (k + 1) // 2
    total = 0.0
    for e in range(dim):
        total += tsum[e] * tsum[e] if e < k else 2.0 * tsum[e] * tsum[e]
    nrm = np.sqrt(total + 1e-300)
    # xibar in parameters, then as the symmetric G with dN = tr(G dxi)
    xb = np.zeros(dim)
    for e in range(dim):
        te = tsum[e] / nrm
        for f in range(dim):
            xb[f] += te * jac[e, f]
    gm = np.empty((k, k))
    for r in range(k):
        gm[r, r] = xb[r]
    e = k
    for r in range(k):
        for cc in range(r + 1, k):
            gm[r, cc] = 0.5 * xb[e]  # a parameter moves both entries
            gm[cc, r] = gm[r, cc]
            e += 1
    gam = np.empty((k, k))
    t1 = np.empty((k, k))
    t2 = np.empty((k, k))
    _dk_pullback(lam, zz, gm, _INVSQRT, xm, gam, t1, t2)  # xm = Xbar
    _congruence(sq, xm, em)  # em = Ebar = S Xbar S
    _dk_pullback(om, vv, em, _EXP, wm, gam, t1, t2)  # wm = Wbar
    _add_coords(wm, k, weight, g_c)
    return nrm


@njit(cache=True, error_model="numpy")
def kng_norm_3(c, frame, params, data, weight, g_c):
    """:func:`kng_norm` for ``k = 3`` only (the vectorized chunks of :func:`_sum3`),
    without the general-k loops: less to compile."""
    sq = frame[0]
    point = _chart_point(c, sq)
    tsum = np.zeros(6)
    jac = np.zeros((6, 6))
    _sum3(point[7], data, tsum, jac)
    return _pull_back(sq, point, tsum, jac, weight, g_c)


@njit(cache=True, error_model="numpy")
def kng_norm_k(c, frame, params, data, weight, g_c):
    """:func:`kng_norm` for ``k != 2`` (what :func:`kernels` gives for ``k = 1`` and
    ``k >= 4``): without :func:`kng_norm_2`, whose vectorized loop would be compiled
    (about 0.5 s of CPU cold) into kernels that never run it. At ``k = 2`` it runs the
    general loops, not :func:`kng_norm_2`'s closed forms (the same function; measured
    within 1.3e-10 of it near the records' mean of bench_fused_spd.py, where ``T``
    cancels)."""
    sq = frame[0]
    k = sq.shape[0]
    if k == 3:
        return kng_norm_3(c, frame, params, data, weight, g_c)
    dim = k * (k + 1) // 2
    point = _chart_point(c, sq)
    tsum = np.zeros(dim)
    jac = np.zeros((dim, dim))
    _sum_k(point[7], data, tsum, jac)
    return _pull_back(sq, point, tsum, jac, weight, g_c)


@njit(cache=True, error_model="numpy")
def kng_norm(c, frame, params, data, weight, g_c):
    """``N = ||sum_i log_x(x_i)||_x`` at ``x = exp_frame(frame, c)``, as
    ``SPD.pt_frechet_gradient_norm(SPD.pt_exp_frame(frame, c), data)``; adds
    ``weight * dN/dc`` to ``g_c``.

    One pass over the records accumulates ``T`` and the linear map ``dT/dxi``
    (:func:`_sum3`, :func:`_sum_k`; ``k = 2``: :func:`kng_norm_2`); then
    ``xibar = (dT/dxi)^T T/N`` goes back through ``xi = X^{-1/2}``, ``X = sym(S E S)``
    and ``E = expm(W)`` by their Daleckii–Krein pullbacks (each once per call). Every
    size's code is compiled: :func:`kernels` gives the kernels of one size.
    """
    if frame[0].shape[0] == 2:
        return kng_norm_2(c, frame, params, data, weight, g_c)
    return kng_norm_k(c, frame, params, data, weight, g_c)


def kernels(variant: str):
    """``(log_volume_density, kng_norm)`` for the size ``k = int(variant)`` (the variant
    ``SPD(k).fused_kernels`` names, ``"spd:<k>"``): the same functions of the same
    signatures, compiled with only that size's code where there is such a variant
    (``k = 2``: 0.3 and 1.0 s of CPU cold, against 1.7 and 12 s for the kernels of
    every size; ``k = 3``: the KNG norm without the general-k loops; other sizes:
    without the ``k = 2`` kernel's vectorized loop)."""
    k = int(variant)
    if k == 2:
        return log_volume_density_2, kng_norm_2
    if k == 3:
        return log_volume_density, kng_norm_3
    return log_volume_density, kng_norm_k
