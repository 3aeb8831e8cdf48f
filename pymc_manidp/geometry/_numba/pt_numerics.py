r"""PyTensor twins of :mod:`pymc_manidp.geometry._numba.numerics` with finite gradients.

Functions of a norm are written as functions of the *squared* norm ``s`` so that
their gradients stay finite at the center of a chart (``d sqrt(s)/ds`` is infinite
at 0, while ``cos(sqrt(s))`` is smooth in ``s``). Each uses the double-``switch``
pattern: the unsafe branch is fed a harmless value where it is not selected, so
neither branch produces NaN in the gradient.

Symmetric-matrix functions (``expm``, ``logm``, ``sqrtm``, ``invsqrtm``) have pullbacks
that use the Daleckii–Krein divided differences of the scalar function. PyTensor's own
``eigh`` gradient divides by eigenvalue gaps and is NaN at repeated eigenvalues (the
identity matrix, for one), which is where SPD charts are centered. For ``k >= 3`` they
are :class:`~pymc_manidp.geometry._numba.pt_sym_ops.SymMatrixFunction` nodes (``method="kernel"``:
one compiled loop over the whole stack, in the C and the NUMBA backends); the older
:class:`~pytensor.compile.builders.OpFromGraph` over PyTensor's batched ``eigh``
(``method="eigh"``) is kept as a reference and for benchmarks.

Every batched function here keeps its input's static shape: PyTensor turns a matrix
product of two stacks whose batch axes are not known to be broadcastable into a
``BatchedDot``, which silently takes the batch length of its first operand, so a
``(1, k, k)`` stack typed ``(None, k, k)`` would drop rows of an ``(n, k, k)`` operand.

For ``2 x 2`` matrices (``k=2``) the same functions are closed forms in elementwise
ops, with no eigendecomposition at all: with ``m`` the mean eigenvalue and ``s`` the
squared half-gap ``((a - c)/2)^2 + b^2``,

.. math:: f(X) = \tfrac{f(\lambda_1) + f(\lambda_2)}{2}\, I
          + f[\lambda_1, \lambda_2]\,(X - m I),

and both coefficients are even in the half-gap ``sqrt(s)``, so they are written as
smooth functions of ``s`` (series near ``s = 0``): autodiff through them is finite
and exact at repeated eigenvalues. A batch of ``n`` matrices is a few fused
elementwise loops instead of ``n`` LAPACK calls, in every PyTensor backend.
"""

from __future__ import annotations

from functools import cache

import numpy as np
import pytensor.tensor as pt
from pytensor.compile.builders import OpFromGraph

from pymc_manidp.geometry._numba.pt_sym_ops import (
    sym_congruence_sum,
    sym_eigvalsh,
    sym_matrix_function,
)

__all__ = [
    "atanhc",
    "cos_sqrt",
    "cosh_sqrt",
    "expm",
    "invsqrtm",
    "log_sinc_sqrt",
    "log_sinhc",
    "log_sinhc_sqrt",
    "logm",
    "logm_congruence_sum",
    "sinc_sqrt",
    "sinhc",
    "sinhc_sqrt",
    "spectral_sum",
    "sqrtm",
    "sym",
    "sym2_congruence",
    "sym2_parts",
    "theta_over_sin",
]

_SMALL = 1e-4
_SMALL_SQ = _SMALL**2
_LOG_SERIES_SQ = 0.05**2  # see numerics._LOG_SERIES
_LOG_SINC_COEF = (1 / 6, 1 / 180, 1 / 2835, 1 / 37800, 1 / 467775)


def _series(s, alternate: bool):
    """``sum_k (±1)^k c_k s^{k+1}``: log(sin t/t) (negated) or log(sinh t/t) in ``s = t^2``."""
    out = 0.0
    for k, c in enumerate(_LOG_SINC_COEF):
        out = out + ((-1) ** k if alternate else 1) * c * s ** (k + 1)
    return out


def sym(a):
    """Symmetric part of ``(..., k, k)`` tensors."""
    return 0.5 * (a + pt.swapaxes(a, -1, -2))


def cos_sqrt(s):
    """``cos(sqrt(s))`` for ``s >= 0``, smooth at 0."""
    small = s < _SMALL_SQ
    ss = pt.switch(small, 1.0, s)
    return pt.switch(small, 1.0 - s / 2.0 + s * s / 24.0, pt.cos(pt.sqrt(ss)))


def sinc_sqrt(s):
    """``sin(sqrt(s)) / sqrt(s)`` for ``s >= 0``, smooth at 0."""
    small = s < _SMALL_SQ
    ss = pt.switch(small, 1.0, s)
    r = pt.sqrt(ss)
    return pt.switch(small, 1.0 - s / 6.0 + s * s / 120.0, pt.sin(r) / r)


def log_sinc_sqrt(s):
    """``log(sin(sqrt(s)) / sqrt(s))`` for ``0 <= s < pi**2``; ``-inf`` beyond."""
    small = s < _LOG_SERIES_SQ
    inside = s < np.pi**2
    ss = pt.switch(small | ~inside, 1.0, s)
    r = pt.sqrt(ss)
    val = pt.log(pt.sin(r) / r)
    return pt.switch(small, -_series(s, alternate=False), pt.switch(inside, val, -np.inf))


def sinhc(t):
    """``sinh(t) / t``, smooth at 0."""
    small = pt.abs(t) < _SMALL
    ts = pt.switch(small, 1.0, t)
    t2 = t * t
    return pt.switch(small, 1.0 + t2 / 6.0 + t2 * t2 / 120.0, pt.sinh(ts) / ts)


def log_sinhc(t):
    """``log(sinh(t) / t)``, accurate near 0 and free of overflow for large ``|t|``."""
    at = pt.abs(t)
    small = at < np.sqrt(_LOG_SERIES_SQ)
    large = at >= 20.0
    tm = pt.switch(small | large, 1.0, at)
    tl = pt.switch(large, at, 20.0)
    mid = pt.log(pt.sinh(tm) / tm)
    # for large t: t - log(2t) + log1p(-exp(-2t)) (it cancels badly for small t)
    big = tl - pt.log(2.0 * tl) + pt.log1p(-pt.exp(-2.0 * tl))
    return pt.switch(small, _series(t * t, alternate=True), pt.switch(large, big, mid))


def cosh_sqrt(s):
    """``cosh(sqrt(s))`` for ``s >= 0``, smooth at 0."""
    small = s < _SMALL
    ss = pt.switch(small, 1.0, s)
    series = 1.0 + s / 2.0 + s * s / 24.0 + s * s * s / 720.0
    return pt.switch(small, series, pt.cosh(pt.sqrt(ss)))


def sinhc_sqrt(s):
    """``sinh(sqrt(s)) / sqrt(s)`` for ``s >= 0``, smooth at 0."""
    small = s < _SMALL
    ss = pt.switch(small, 1.0, s)
    r = pt.sqrt(ss)
    series = 1.0 + s / 6.0 + s * s / 120.0 + s * s * s / 5040.0
    return pt.switch(small, series, pt.sinh(r) / r)


def log_sinhc_sqrt(s):
    """``log(sinh(sqrt(s)) / sqrt(s))`` for ``s >= 0``, smooth at 0 (``log_sinhc`` of
    ``sqrt(s)``, whose series is already a function of ``s``)."""
    small = s < _LOG_SERIES_SQ
    ss = pt.switch(small, 1.0, s)
    return pt.switch(small, _series(s, alternate=True), log_sinhc(pt.sqrt(ss)))


def atanhc(d):
    """``atanh(d) / d`` for ``|d| < 1``, smooth at 0."""
    small = pt.abs(d) < _SMALL
    ds = pt.switch(small, 0.5, d)
    d2 = d * d
    return pt.switch(small, 1.0 + d2 / 3.0 + d2 * d2 / 5.0, pt.arctanh(ds) / ds)


def theta_over_sin(s, c):
    """``theta / sin(theta)`` from ``s = sin(theta)**2`` and ``c = cos(theta)``.

    The angle is ``atan2(sqrt(s), c)``; near ``theta = 0`` the ratio is the series
    of ``asin(r)/r`` in ``s = r**2``, so the gradient is finite when the two points
    of a log map coincide.
    """
    small = (s < _SMALL_SQ) & (c > 0)
    ss = pt.switch(small, 1.0, s)
    r = pt.sqrt(ss)
    # asin(r)/r = 1 + r^2/6 + 3 r^4/40 + 5 r^6/112 + ...
    series = 1.0 + s / 6.0 + 3.0 * s * s / 40.0
    return pt.switch(small, series, pt.arctan2(r, c) / r)


# --- symmetric matrix functions ------------------------------------------------------


def _divided_difference(name, a, b):
    """Daleckii–Krein kernel ``(f(a) - f(b)) / (a - b)`` (``f'(a)`` when ``a == b``).

    Written in closed forms that are exact at ``a == b`` and need no branch on the
    gap, so near-repeated eigenvalues lose no accuracy.
    """
    if name == "exp":
        return pt.exp((a + b) / 2.0) * sinhc((a - b) / 2.0)
    if name == "log":
        return 2.0 / (a + b) * atanhc((a - b) / (a + b))
    if name == "sqrt":
        return 1.0 / (pt.sqrt(a) + pt.sqrt(b))
    if name == "invsqrt":
        ra, rb = pt.sqrt(a), pt.sqrt(b)
        return -1.0 / (ra * rb * (ra + rb))
    raise ValueError(f"unknown matrix function {name!r}")


_SCALAR = {
    "exp": pt.exp,
    "log": pt.log,
    "sqrt": pt.sqrt,
    "invsqrt": lambda w: 1.0 / pt.sqrt(w),
}


def _apply_eig(u, fw):
    return (u * pt.shape_padaxis(fw, -2)) @ pt.swapaxes(u, -1, -2)


@cache
def _matrix_function_op(name: str, ndim: int) -> OpFromGraph:
    x = pt.tensor(f"x_{name}", dtype="float64", shape=(None,) * ndim)

    def forward(x):
        w, u = pt.linalg.eigh(sym(x))
        return sym(_apply_eig(u, _SCALAR[name](w)))

    def pullback(inputs, outputs, output_grads):
        (x,), (g,) = inputs, output_grads
        w, u = pt.linalg.eigh(sym(x))
        gamma = _divided_difference(name, w[..., :, None], w[..., None, :])
        ut = pt.swapaxes(u, -1, -2)
        inner = gamma * (ut @ g @ u)
        return [sym(u @ inner @ ut)]

    return OpFromGraph([x], [forward(x)], pullback=pullback, name=f"sym_{name}m", inline=True)


def _keep_static_shape(out, shape):
    """``out`` with the static ``shape`` an OpFromGraph's generic output type forgot."""
    return pt.specify_shape(out, shape) if any(s is not None for s in shape) else out


# --- 2 x 2: closed forms, no eigendecomposition -------------------------------------

_ATANHC_SERIES_SQ = 1e-3  # d^2 below it: atanh(d)/d to d^8 (next term < 1e-16)


def sym2_parts(x):
    """Entries of ``sym(x)`` for ``(..., 2, 2)`` tensors: ``a, b, c`` (``[[a, b], [b, c]]``),
    the mean eigenvalue ``m``, the half-difference ``h = (a - c)/2`` and the squared
    half-gap of the eigenvalues ``s = h^2 + b^2``."""
    a, c = x[..., 0, 0], x[..., 1, 1]
    b = 0.5 * (x[..., 0, 1] + x[..., 1, 0])
    m, h = 0.5 * (a + c), 0.5 * (a - c)
    return a, b, c, m, h, h * h + b * b


def _sym2_coefficients(name, a, b, c, m, s):
    """``(f(l1) + f(l2))/2`` and ``f[l1, l2]`` for eigenvalues ``m +- sqrt(s)``."""
    if name == "exp":
        em = pt.exp(m)
        return em * cosh_sqrt(s), em * sinhc_sqrt(s)
    det = a * c - b * b  # l1 * l2
    if name == "log":
        d2 = s / (m * m)  # (gap / sum)^2 < 1 for SPD
        small = d2 < _ATANHC_SERIES_SQ
        series = 1.0 + d2 * (1 / 3 + d2 * (1 / 5 + d2 * (1 / 7 + d2 / 9)))
        # away from equal eigenvalues: the larger one directly, the smaller as det / l1
        # (no cancellation in m - r for ill-conditioned matrices)
        s_safe = pt.switch(small, 0.25 * m * m, s)
        r = pt.sqrt(s_safe)
        l1 = m + r
        l2 = pt.switch(small, m * m - s_safe, det) / l1
        dd = pt.switch(small, series / m, (pt.log(l1) - pt.log(l2)) / (2.0 * r))
        return 0.5 * pt.log(det), dd
    # q = sqrt(l1) + sqrt(l2): q^2 = l1 + l2 + 2 sqrt(l1 l2), smooth at l1 = l2
    root_det = pt.sqrt(det)
    q = pt.sqrt(2.0 * m + 2.0 * root_det)
    if name == "sqrt":
        return 0.5 * q, 1.0 / q
    if name == "invsqrt":
        return 0.5 * q / root_det, -1.0 / (root_det * q)
    raise ValueError(f"unknown matrix function {name!r}")


def _sym2_function(name, x):
    a, b, c, m, h, s = sym2_parts(x)
    mean_f, dd = _sym2_coefficients(name, a, b, c, m, s)
    # f(X) = mean_f I + dd (X - m I)
    off = dd * b
    row0 = pt.stack([mean_f + dd * h, off], axis=-1)
    row1 = pt.stack([off, mean_f - dd * h], axis=-1)
    return pt.stack([row0, row1], axis=-2)


def sym2_congruence(x, y):
    """``x sym(y) x`` for symmetric ``x`` ``(..., 2, 2)`` and ``y`` ``(..., 2, 2)``
    (broadcast), in elementwise ops: no batched matrix products."""
    al, be, ga = x[..., 0, 0], 0.5 * (x[..., 0, 1] + x[..., 1, 0]), x[..., 1, 1]
    p, q, r = sym2_parts(y)[:3]
    z00 = al * al * p + 2.0 * al * be * q + be * be * r
    z11 = be * be * p + 2.0 * be * ga * q + ga * ga * r
    z01 = al * be * p + (al * ga + be * be) * q + be * ga * r
    return pt.stack([pt.stack([z00, z01], axis=-1), pt.stack([z01, z11], axis=-1)], axis=-2)


def logm_congruence_sum(a, d, k=None):
    """``sum_i logm(a sym(d_i) a)`` for symmetric ``a`` ``(..., k, k)`` and data ``d``
    ``(n, k, k)``, shape ``(..., k, k)``; no gradient to ``d``.

    ``k = 2``: closed forms in elementwise ops; ``k >= 3``: one
    :class:`~pymc_manidp.geometry._numba.pt_sym_ops.SymCongruenceSum` kernel (congruences,
    logarithms and the sum in one loop over the data).
    """
    a, d = pt.as_tensor_variable(a), pt.as_tensor_variable(d)
    if _is_2x2(a, k):
        return pt.sum(_sym2_function("log", sym2_congruence(pt.expand_dims(a, -3), d)), axis=-3)
    return sym_congruence_sum("log", a, d)


def _is_2x2(x, k):
    return k == 2 or (k is None and tuple(x.type.shape[-2:]) == (2, 2))


_METHODS = ("auto", "closed", "kernel", "eigh")


def _matrix_function(name, x, k, method="auto"):
    x = pt.as_tensor_variable(x)
    if method not in _METHODS:
        raise ValueError(f"method must be one of {_METHODS}, got {method!r}")
    if method == "closed" and not _is_2x2(x, k):
        # the closed form reads entries [0, 0], [0, 1], [1, 1]: wrong for any other size
        raise ValueError("method='closed' needs 2 x 2 matrices: pass k=2 or a (..., 2, 2) shape")
    if method == "closed" or (method == "auto" and _is_2x2(x, k)):
        return _sym2_function(name, x)
    if method == "eigh":
        return _keep_static_shape(_matrix_function_op(name, x.ndim)(x), x.type.shape)
    return sym_matrix_function(name, x)


_METHOD_DOC = """
    Parameters
    ----------
    x : tensor, shape (..., k, k)
        Only ``sym(x)`` is used.
    k : int, optional
        The matrix size, when the static shape does not say it.
    method : {"auto", "closed", "kernel", "eigh"}
        ``"closed"``: the 2 x 2 closed form (elementwise ops; ``k = 2`` only);
        ``"kernel"``: :class:`~pymc_manidp.geometry._numba.pt_sym_ops.SymMatrixFunction`
        (one compiled loop over the stack); ``"eigh"``: PyTensor's batched ``eigh``
        with a Daleckii–Krein pullback (reference, slow); ``"auto"``: ``"closed"`` when
        ``k = 2`` (given or static), else ``"kernel"``.

    Returns
    -------
    tensor, shape (..., k, k), with ``x``'s static shape
"""


def expm(x, k=None, method="auto"):
    return _matrix_function("exp", x, k, method)


def logm(x, k=None, method="auto"):
    return _matrix_function("log", x, k, method)


def sqrtm(x, k=None, method="auto"):
    return _matrix_function("sqrt", x, k, method)


def invsqrtm(x, k=None, method="auto"):
    return _matrix_function("invsqrt", x, k, method)


expm.__doc__ = "Matrix exponential of symmetric tensors.\n" + _METHOD_DOC
logm.__doc__ = "Matrix logarithm of SPD tensors.\n" + _METHOD_DOC
sqrtm.__doc__ = "Principal square root of SPD tensors.\n" + _METHOD_DOC
invsqrtm.__doc__ = "Inverse principal square root of SPD tensors.\n" + _METHOD_DOC


def spectral_sum(phi, x):
    """``phi(eigenvalues(sym(x)))`` with gradient ``U diag(phi'(w)) U^T``.

    Parameters
    ----------
    phi : callable
        Maps eigenvalues ``(..., k)`` (unsorted) to ``(...)``; must be a symmetric
        function of the eigenvalues with a finite gradient (then the pullback is well
        defined at repeated eigenvalues).
    x : tensor, shape (..., k, k)

    Notes
    -----
    The eigenvalues come from :class:`~pymc_manidp.geometry._numba.pt_sym_ops.SymEigvalsh`
    (the Jacobi kernel; an Op with ``__props__``, so models using it can be cached on
    disk), and ``phi`` is differentiated by PyTensor.
    """
    x = pt.as_tensor_variable(x)
    return _keep_static_shape(phi(sym_eigvalsh(x)), x.type.shape[:-2])
