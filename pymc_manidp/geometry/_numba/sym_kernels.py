r"""Numba kernels for functions of stacks of small symmetric matrices.

A function of a symmetric matrix acts on its eigenvalues,

.. math:: f(X) = U \operatorname{diag}(f(\lambda))\, U^\top, \qquad
          X = U \operatorname{diag}(\lambda)\, U^\top,

and its pullback (Daleckii–Krein) maps an output cotangent ``G`` to

.. math:: \bar X = \operatorname{sym}\big(U\,(\Gamma \circ U^\top G U)\,U^\top\big),
          \qquad \Gamma_{ij} = f[\lambda_i, \lambda_j],

with the divided differences ``f[a, b] = (f(a) - f(b))/(a - b)`` (``f'(a)`` at
``a = b``) written so that they stay exact when ``a`` and ``b`` are close: the
gradient is finite and right at repeated eigenvalues (the identity included).

The eigendecomposition of a ``k x k`` matrix with ``k <= JACOBI_MAX_K`` is a cyclic
Jacobi iteration in plain loops: for ``3 x 3`` matrices a LAPACK call costs more in
set-up (workspace query, copies) than the whole iteration, and Jacobi is accurate to
a small multiple of the rounding unit *relative to each eigenvalue* for well-scaled
SPD matrices, which is what ``log`` and ``invsqrt`` need. Larger matrices use
``np.linalg.eigh``. Every kernel loops over a ``(B, k, k)`` stack in compiled code:
one call per stack, no per-matrix Python or Blockwise overhead. The sums over the data
of logarithms of congruences, vectorized over the data, are :mod:`.sym_sums`.

These functions run in both PyTensor backends: the Ops' ``perform`` (C and Python
backends) calls them from Python, and their ``numba_funcify`` (NUMBA backend, nutpie)
calls them from nopython code.

Every kernel is compiled with ``error_model="numpy"``: a float division by zero gives
``inf`` or ``nan``, as in NumPy and PyTensor's own Ops, never ``ZeroDivisionError``
(numba's default, Python's rule). A sampler's leapfrog step far out (an SPD point at
distance 60 from the footpoint, whose ``exp`` underflows an eigenvalue to 0) must give
a non-finite log-density, which the sampler counts as a divergence; an exception
stopped PyMC's NUTS instead (issue 28).
"""

from __future__ import annotations

import numpy as np

# numba's njit, but cache=True caches in the package's checked cache folder only
from pymc_manidp.geometry._numba.cache import njit

__all__ = [
    "FUNC_CODES",
    "JACOBI_MAX_K",
    "sym_eigh",
    "sym_function",
    "sym_function_eig",
    "sym_function_pullback",
    "sym_function_pullback_eig",
]

FUNC_CODES = {"exp": 0, "log": 1, "sqrt": 2, "invsqrt": 3}
JACOBI_MAX_K = 8
_EPS = np.finfo(np.float64).eps
_EPS2 = _EPS * _EPS
_TINY = 1e-300  # off-diagonal entries below it are zero for every purpose here
_MAX_SWEEPS = 40  # quadratic convergence: 4-6 sweeps for k <= 8 in practice
_LOG = FUNC_CODES["log"]
_ENTRY_ROW = (0, 1, 2, 0, 0, 1)  # the six entries of a symmetric 3 x 3 matrix
_ENTRY_COL = (0, 1, 2, 1, 2, 2)
_SERIES = 1e-4  # |x| below it: 3-term series of sinh(x)/x and atanh(x)/x (error < 1e-26)


@njit(cache=True, error_model="numpy")
def _jacobi_eigh(a, w, u):
    """Cyclic Jacobi: ``a`` (k, k) symmetric, overwritten; eigenvalues into ``w``,
    eigenvectors (columns) into ``u``. Unsorted.

    A rotation is skipped when ``|a_pq| <= eps sqrt(|a_pp a_qq|)`` (Demmel–Veselić's
    test: what remains moves each eigenvalue by less than a rounding unit of itself),
    and the iteration stops after a sweep without rotations.
    """
    k = a.shape[0]
    for i in range(k):
        for j in range(k):
            u[i, j] = 0.0
        u[i, i] = 1.0
    for _ in range(_MAX_SWEEPS):
        rotated = False
        for p in range(k - 1):
            for q in range(p + 1, k):
                apq = a[p, q]
                app = a[p, p]
                aqq = a[q, q]
                if abs(apq) <= _EPS * np.sqrt(abs(app * aqq)) or abs(apq) < _TINY:
                    continue
                rotated = True
                # the smaller root of t^2 + 2 theta t - 1 = 0: rotation angle <= pi/4,
                # the stable choice (Rutishauser)
                theta = (aqq - app) / (2.0 * apq)
                if abs(theta) > 1e150:  # theta^2 would overflow
                    t = 0.5 / theta
                else:
                    t = 1.0 / (abs(theta) + np.sqrt(theta * theta + 1.0))
                    if theta < 0.0:
                        t = -t
                c = 1.0 / np.sqrt(t * t + 1.0)
                s = t * c
                for r in range(k):
                    arp = a[r, p]
                    arq = a[r, q]
                    a[r, p] = c * arp - s * arq
                    a[r, q] = s * arp + c * arq
                for r in range(k):
                    apr = a[p, r]
                    aqr = a[q, r]
                    a[p, r] = c * apr - s * aqr
                    a[q, r] = s * apr + c * aqr
                a[p, q] = 0.0  # zero in exact arithmetic; rounding would leave noise
                a[q, p] = 0.0
                for r in range(k):
                    urp = u[r, p]
                    urq = u[r, q]
                    u[r, p] = c * urp - s * urq
                    u[r, q] = s * urp + c * urq
        if not rotated:
            break
    for i in range(k):
        w[i] = a[i, i]


@njit(cache=True, inline="always", error_model="numpy")
def _negligible(apq, app, aqq):
    """Demmel–Veselić's test ``|a_pq| <= eps sqrt(|a_pp a_qq|)``, squared: no square
    root per test. For ``1e-100 <= |a_pq| <= 1e100`` the square neither overflows nor
    underflows, and an overflowing ``a_pp a_qq`` means the test holds anyway (an
    underflowing one that it fails, as it does with the root); other entries take
    the root."""
    if abs(apq) < _TINY:
        return True
    if 1e-100 <= abs(apq) <= 1e100:
        return apq * apq <= _EPS2 * abs(app * aqq)
    return abs(apq) <= _EPS * np.sqrt(abs(app * aqq))


@njit(cache=True, inline="always", error_model="numpy")
def _rotation(app, aqq, apq):
    """``(t, c, s)`` of the Jacobi rotation that zeroes ``a_pq`` (Rutishauser's angle)."""
    theta = (aqq - app) / (2.0 * apq)
    if abs(theta) > 1e150:  # theta^2 would overflow
        t = 0.5 / theta
    else:
        t = 1.0 / (abs(theta) + np.sqrt(theta * theta + 1.0))
        if theta < 0.0:
            t = -t
    c = 1.0 / np.sqrt(t * t + 1.0)
    return t, c, t * c


@njit(cache=True, error_model="numpy")
def _jacobi_eigh3(a, w, u):
    """:func:`_jacobi_eigh` for ``3 x 3``, unrolled on scalars (kept in registers).

    The same cyclic sweeps and stopping rule; the diagonal is updated as
    ``a_pp - t a_pq`` and ``a_qq + t a_pq`` (the rotation's exact effect, with less
    rounding than the full update). About 30 % faster than the loops, which matters:
    KNG on SPD(3) runs one per datum per leapfrog step.
    """
    a00, a11, a22 = a[0, 0], a[1, 1], a[2, 2]
    a01, a02, a12 = a[0, 1], a[0, 2], a[1, 2]
    u00, u01, u02 = 1.0, 0.0, 0.0
    u10, u11, u12 = 0.0, 1.0, 0.0
    u20, u21, u22 = 0.0, 0.0, 1.0
    for _ in range(_MAX_SWEEPS):
        rotated = False
        if not _negligible(a01, a00, a11):  # (p, q) = (0, 1); the other index is 2
            rotated = True
            t, c, s = _rotation(a00, a11, a01)
            a00, a11, a01 = a00 - t * a01, a11 + t * a01, 0.0
            a02, a12 = c * a02 - s * a12, s * a02 + c * a12
            u00, u01 = c * u00 - s * u01, s * u00 + c * u01
            u10, u11 = c * u10 - s * u11, s * u10 + c * u11
            u20, u21 = c * u20 - s * u21, s * u20 + c * u21
        if not _negligible(a02, a00, a22):  # (0, 2); the other index is 1
            rotated = True
            t, c, s = _rotation(a00, a22, a02)
            a00, a22, a02 = a00 - t * a02, a22 + t * a02, 0.0
            a01, a12 = c * a01 - s * a12, s * a01 + c * a12
            u00, u02 = c * u00 - s * u02, s * u00 + c * u02
            u10, u12 = c * u10 - s * u12, s * u10 + c * u12
            u20, u22 = c * u20 - s * u22, s * u20 + c * u22
        if not _negligible(a12, a11, a22):  # (1, 2); the other index is 0
            rotated = True
            t, c, s = _rotation(a11, a22, a12)
            a11, a22, a12 = a11 - t * a12, a22 + t * a12, 0.0
            a01, a02 = c * a01 - s * a02, s * a01 + c * a02
            u01, u02 = c * u01 - s * u02, s * u01 + c * u02
            u11, u12 = c * u11 - s * u12, s * u11 + c * u12
            u21, u22 = c * u21 - s * u22, s * u21 + c * u22
        if not rotated:
            break
    w[0], w[1], w[2] = a00, a11, a22
    u[0, 0], u[0, 1], u[0, 2] = u00, u01, u02
    u[1, 0], u[1, 1], u[1, 2] = u10, u11, u12
    u[2, 0], u[2, 1], u[2, 2] = u20, u21, u22


@njit(cache=True, error_model="numpy")
def _eigh(a, w, u):
    if a.shape[0] == 3:
        _jacobi_eigh3(a, w, u)
    elif a.shape[0] <= JACOBI_MAX_K:
        _jacobi_eigh(a, w, u)
    else:
        ww, uu = np.linalg.eigh(a)
        w[:] = ww
        u[:, :] = uu


@njit(cache=True, error_model="numpy")
def _scalar(code, x):
    if code == 0:
        return np.exp(x)
    if code == 1:
        return np.log(x)
    if code == 2:
        return np.sqrt(x)
    return 1.0 / np.sqrt(x)


@njit(cache=True, error_model="numpy")
def _divided_difference(code, a, b):
    """``f[a, b]``, exact as ``a -> b`` (no ``0/0``, no cancellation)."""
    if code == 0:  # exp: e^{(a+b)/2} sinh(h)/h, h = (a-b)/2
        h = 0.5 * (a - b)
        if abs(h) < _SERIES:
            h2 = h * h
            return np.exp(0.5 * (a + b)) * (1.0 + h2 / 6.0 + h2 * h2 / 120.0)
        if abs(h) < 20.0:
            return np.exp(0.5 * (a + b)) * np.sinh(h) / h
        return (np.exp(a) - np.exp(b)) / (a - b)  # no cancellation; sinh(h) may overflow
    if code == 1:  # log: (2/(a+b)) atanh(d)/d, d = (a-b)/(a+b)
        s = a + b
        d = (a - b) / s
        if abs(d) < _SERIES:
            d2 = d * d
            return 2.0 / s * (1.0 + d2 / 3.0 + d2 * d2 / 5.0)
        if 1.0 - abs(d) < 1e-3:
            # eigenvalues far apart (ratio > 2,000): 1 - d keeps only eps/(1 - d) of its
            # digits, and d rounds to 1 (arctanh = inf, a NaN gradient) once b/a < eps/2
            # (SPD(3) Laplace chart at eigenvalues 15.3 and 6.7e-14). log a - log b has
            # no cancellation there. Below this ratio the arctanh form, as before.
            return (np.log(a) - np.log(b)) / (a - b)
        return 2.0 / s * np.arctanh(d) / d
    ra = np.sqrt(a)
    rb = np.sqrt(b)
    if code == 2:  # sqrt: 1/(sqrt a + sqrt b)
        return 1.0 / (ra + rb)
    return -1.0 / (ra * rb * (ra + rb))  # invsqrt


@njit(cache=True, error_model="numpy")
def _eigh_stack(x):
    """Eigenvalues ``(B, k)`` and eigenvectors ``(B, k, k)`` of each ``sym(x_b)``."""
    nb, k = x.shape[0], x.shape[1]
    ws = np.empty((nb, k))
    us = np.empty((nb, k, k))
    a = np.empty((k, k))
    for b in range(nb):
        for i in range(k):
            for j in range(k):
                a[i, j] = 0.5 * (x[b, i, j] + x[b, j, i])
        _eigh(a, ws[b], us[b])
    return ws, us


@njit(cache=True, error_model="numpy")
def _function_stack(x, code):
    """``f(sym(x_b))`` for each ``b``, with the eigenvalues and eigenvectors it used."""
    nb, k = x.shape[0], x.shape[1]
    ws, us = _eigh_stack(x)
    out = np.empty((nb, k, k))
    fw = np.empty(k)
    for b in range(nb):
        for m in range(k):
            fw[m] = _scalar(code, ws[b, m])
        for i in range(k):
            for j in range(i, k):
                acc = 0.0
                for m in range(k):
                    acc += us[b, i, m] * fw[m] * us[b, j, m]
                out[b, i, j] = acc
                out[b, j, i] = acc
    return out, ws, us


@njit(cache=True, error_model="numpy")
def _dk_pullback(w, u, g, code, out, gam, t1, t2):
    """Daleckii–Krein pullback of ``g`` (k, k) from the eigendecomposition ``(w, U)``
    into ``out``: ``sym(U (Gamma o U^T g U) U^T)``; ``gam``, ``t1``, ``t2`` are scratch."""
    k = w.shape[0]
    for m in range(k):
        for n in range(m, k):
            gam[m, n] = _divided_difference(code, w[m], w[n])
            gam[n, m] = gam[m, n]
    for i in range(k):  # t1 = G U
        for n in range(k):
            acc = 0.0
            for j in range(k):
                acc += g[i, j] * u[j, n]
            t1[i, n] = acc
    for m in range(k):  # t2 = Gamma o (U^T G U)
        for n in range(k):
            acc = 0.0
            for i in range(k):
                acc += u[i, m] * t1[i, n]
            t2[m, n] = gam[m, n] * acc
    for i in range(k):  # t1 = U t2
        for n in range(k):
            acc = 0.0
            for m in range(k):
                acc += u[i, m] * t2[m, n]
            t1[i, n] = acc
    for i in range(k):  # out = sym(t1 U^T)
        for j in range(i, k):
            acc = 0.0
            for n in range(k):
                acc += t1[i, n] * u[j, n] + t1[j, n] * u[i, n]
            out[i, j] = 0.5 * acc
            out[j, i] = 0.5 * acc


@njit(cache=True, error_model="numpy")
def _pullback_stack(ws, us, g, code):
    """Daleckii–Krein pullback of each ``g_b`` from the eigendecomposition ``(w_b, U_b)``."""
    nb, k = us.shape[0], us.shape[1]
    out = np.empty((nb, k, k))
    gam = np.empty((k, k))
    t1 = np.empty((k, k))
    t2 = np.empty((k, k))
    for b in range(nb):
        _dk_pullback(ws[b], us[b], g[b], code, out[b], gam, t1, t2)
    return out


@njit(cache=True, error_model="numpy")
def _as_stack(x):
    k = x.shape[-1]
    nb = x.size // (k * k) if k > 0 else 0
    return np.ascontiguousarray(x).reshape((nb, k, k))


@njit(cache=True, error_model="numpy")
def sym_function(x, code):
    """``f(sym(x))`` for ``x`` of shape ``(..., k, k)``; ``code`` from :data:`FUNC_CODES`."""
    return _function_stack(_as_stack(x), code)[0].reshape(x.shape)


@njit(cache=True, error_model="numpy")
def sym_eigh(x):
    """Eigenvalues ``(..., k)`` and eigenvectors ``(..., k, k)`` of ``sym(x)``, unsorted
    (the Jacobi iteration's order): for functions symmetric in the eigenvalues."""
    ws, us = _eigh_stack(_as_stack(x))
    return ws.reshape(x.shape[:-1]), us.reshape(x.shape)


@njit(cache=True, error_model="numpy")
def sym_function_eig(x, code):
    """``f(sym(x))`` and the eigendecomposition it used: ``(f, w, u)`` with shapes
    ``(..., k, k)``, ``(..., k)``, ``(..., k, k)`` (``sym(x) = u diag(w) u^T``, unsorted).

    The pullback :func:`sym_function_pullback_eig` reuses ``(w, u)``: one
    eigendecomposition per matrix serves the value and the gradient."""
    out, ws, us = _function_stack(_as_stack(x), code)
    return out.reshape(x.shape), ws.reshape(x.shape[:-1]), us.reshape(x.shape)


@njit(cache=True, error_model="numpy")
def sym_function_pullback_eig(w, u, g, code):
    """Pullback of :func:`sym_function` for the cotangent ``g`` ``(..., k, k)``, from the
    eigendecomposition ``(w, u)`` that :func:`sym_function_eig` returned."""
    k = u.shape[-1]
    nb = u.size // (k * k) if k > 0 else 0
    ws = np.ascontiguousarray(w).reshape((nb, k))
    return _pullback_stack(ws, _as_stack(u), _as_stack(g), code).reshape(u.shape)


@njit(cache=True, error_model="numpy")
def sym_function_pullback(x, g, code):
    """Pullback of :func:`sym_function` at ``x`` for the cotangent ``g`` (same shape)."""
    _, w, u = sym_function_eig(x, code)
    return sym_function_pullback_eig(w, u, g, code)


@njit(cache=True, error_model="numpy")
def _congruence_sum_stack(a, d, code):
    """``sum_i f(sym(a_b d_i a_b))`` for each ``b``, with the eigendecompositions used."""
    nb, k, n = a.shape[0], a.shape[1], d.shape[0]
    out = np.zeros((nb, k, k))
    ws = np.empty((nb, n, k))
    fws = np.empty((nb, n, k))
    us = np.empty((nb, n, k, k))
    t = np.empty((k, k))
    p = np.empty((k, k))
    w = np.empty(k)
    u = np.empty((k, k))
    fw = np.empty(k)
    for b in range(nb):
        for i in range(n):
            for r in range(k):  # t = d_i a_b
                for c in range(k):
                    acc = 0.0
                    for m in range(k):
                        acc += d[i, r, m] * a[b, m, c]
                    t[r, c] = acc
            for r in range(k):  # p = a_b t, symmetric up to rounding
                for c in range(r, k):
                    acc = 0.0
                    for m in range(k):
                        acc += a[b, m, r] * t[m, c] + a[b, m, c] * t[m, r]
                    p[r, c] = 0.5 * acc
                    p[c, r] = 0.5 * acc
            _eigh(p, w, u)
            for m in range(k):
                fw[m] = _scalar(code, w[m])
                ws[b, i, m] = w[m]
                fws[b, i, m] = fw[m]
            for r in range(k):
                for c in range(k):
                    us[b, i, r, c] = u[r, c]
            for r in range(k):
                for c in range(r, k):
                    acc = 0.0
                    for m in range(k):
                        acc += u[r, m] * fw[m] * u[c, m]
                    out[b, r, c] += acc
                    if c != r:
                        out[b, c, r] += acc
    return out, ws, fws, us


@njit(cache=True, error_model="numpy")
def _congruence_sum_pullback_stack(a, d, ws, us, g, code):
    """Pullback to ``a_b`` of ``sum_i f(a_b d_i a_b)`` for the cotangents ``g_b``:
    ``sum_i (Gbar_i a_b d_i + d_i a_b Gbar_i)``, ``Gbar_i`` the Daleckii–Krein pullback
    of ``sym(g_b)`` at ``a_b d_i a_b``."""
    nb, k, n = a.shape[0], a.shape[1], d.shape[0]
    out = np.zeros((nb, k, k))
    gs = np.empty((k, k))
    gbar = np.empty((k, k))
    mm = np.empty((k, k))
    t = np.empty((k, k))
    gam = np.empty((k, k))
    t1 = np.empty((k, k))
    t2 = np.empty((k, k))
    for b in range(nb):
        for r in range(k):
            for c in range(k):
                gs[r, c] = 0.5 * (g[b, r, c] + g[b, c, r])
                mm[r, c] = 0.0
        for i in range(n):
            _dk_pullback(ws[b, i], us[b, i], gs, code, gbar, gam, t1, t2)
            for r in range(k):  # t = a_b d_i
                for c in range(k):
                    acc = 0.0
                    for m in range(k):
                        acc += a[b, r, m] * d[i, m, c]
                    t[r, c] = acc
            for r in range(k):  # mm += gbar t
                for c in range(k):
                    acc = 0.0
                    for m in range(k):
                        acc += gbar[r, m] * t[m, c]
                    mm[r, c] += acc
        for r in range(k):  # sum_i Gbar_i a d_i + (sum_i Gbar_i a d_i)^T
            for c in range(k):
                out[b, r, c] = mm[r, c] + mm[c, r]
    return out
