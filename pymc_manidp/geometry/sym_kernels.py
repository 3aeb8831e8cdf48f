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
one call per stack, no per-matrix Python or Blockwise overhead.

These functions run in both PyTensor backends: the Ops' ``perform`` (C and Python
backends) calls them from Python, and their ``numba_funcify`` (NUMBA backend, nutpie)
calls them from nopython code.
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["FUNC_CODES", "JACOBI_MAX_K", "sym_function", "sym_function_pullback"]

FUNC_CODES = {"exp": 0, "log": 1, "sqrt": 2, "invsqrt": 3}
JACOBI_MAX_K = 8
_EPS = np.finfo(np.float64).eps
_TINY = 1e-300  # off-diagonal entries below it are zero for every purpose here
_MAX_SWEEPS = 40  # quadratic convergence: 4-6 sweeps for k <= 8 in practice
_SERIES = 1e-4  # |x| below it: 3-term series of sinh(x)/x and atanh(x)/x (error < 1e-26)


@njit(cache=True)
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


@njit(cache=True)
def _eigh(a, w, u):
    if a.shape[0] <= JACOBI_MAX_K:
        _jacobi_eigh(a, w, u)
    else:
        ww, uu = np.linalg.eigh(a)
        w[:] = ww
        u[:, :] = uu


@njit(cache=True)
def _scalar(code, x):
    if code == 0:
        return np.exp(x)
    if code == 1:
        return np.log(x)
    if code == 2:
        return np.sqrt(x)
    return 1.0 / np.sqrt(x)


@njit(cache=True)
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
        return 2.0 / s * np.arctanh(d) / d
    ra = np.sqrt(a)
    rb = np.sqrt(b)
    if code == 2:  # sqrt: 1/(sqrt a + sqrt b)
        return 1.0 / (ra + rb)
    return -1.0 / (ra * rb * (ra + rb))  # invsqrt


@njit(cache=True)
def _function_stack(x, code):
    nb, k = x.shape[0], x.shape[1]
    out = np.empty((nb, k, k))
    a = np.empty((k, k))
    w = np.empty(k)
    u = np.empty((k, k))
    fw = np.empty(k)
    for b in range(nb):
        for i in range(k):
            for j in range(k):
                a[i, j] = 0.5 * (x[b, i, j] + x[b, j, i])
        _eigh(a, w, u)
        for m in range(k):
            fw[m] = _scalar(code, w[m])
        for i in range(k):
            for j in range(i, k):
                acc = 0.0
                for m in range(k):
                    acc += u[i, m] * fw[m] * u[j, m]
                out[b, i, j] = acc
                out[b, j, i] = acc
    return out


@njit(cache=True)
def _pullback_stack(x, g, code):
    nb, k = x.shape[0], x.shape[1]
    out = np.empty((nb, k, k))
    a = np.empty((k, k))
    w = np.empty(k)
    u = np.empty((k, k))
    gam = np.empty((k, k))
    t1 = np.empty((k, k))
    t2 = np.empty((k, k))
    for b in range(nb):
        for i in range(k):
            for j in range(k):
                a[i, j] = 0.5 * (x[b, i, j] + x[b, j, i])
        _eigh(a, w, u)
        for m in range(k):
            for n in range(m, k):
                gam[m, n] = _divided_difference(code, w[m], w[n])
                gam[n, m] = gam[m, n]
        for i in range(k):  # t1 = G U
            for n in range(k):
                acc = 0.0
                for j in range(k):
                    acc += g[b, i, j] * u[j, n]
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
                out[b, i, j] = 0.5 * acc
                out[b, j, i] = 0.5 * acc
    return out


@njit(cache=True)
def sym_function(x, code):
    """``f(sym(x))`` for ``x`` of shape ``(..., k, k)``; ``code`` from :data:`FUNC_CODES`."""
    k = x.shape[-1]
    nb = x.size // (k * k) if k > 0 else 0
    x3 = np.ascontiguousarray(x).reshape((nb, k, k))
    return _function_stack(x3, code).reshape(x.shape)


@njit(cache=True)
def sym_function_pullback(x, g, code):
    """Pullback of :func:`sym_function` at ``x`` for the cotangent ``g`` (same shape)."""
    k = x.shape[-1]
    nb = x.size // (k * k) if k > 0 else 0
    x3 = np.ascontiguousarray(x).reshape((nb, k, k))
    g3 = np.ascontiguousarray(g).reshape((nb, k, k))
    return _pullback_stack(x3, g3, code).reshape(x.shape)
