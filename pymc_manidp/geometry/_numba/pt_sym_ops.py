r"""PyTensor Ops for functions of stacks of symmetric matrices (``k >= 3``).

:class:`SymMatrixFunction` maps ``X`` ``(..., k, k)`` to ``f(sym(X))`` for ``f`` in
``exp``, ``log``, ``sqrt``, ``invsqrt``; its gradient is :class:`SymMatrixFunctionGrad`,
the Daleckii–Krein pullback

.. math:: \bar X = \operatorname{sym}\big(U\,(\Gamma \circ U^\top \bar F U)\,U^\top\big),
          \qquad \Gamma_{ij} = f[\lambda_i, \lambda_j],

with divided differences that are exact at repeated eigenvalues. Both Ops evaluate a
whole stack in one call of a compiled kernel (:mod:`.sym_kernels`): ``perform`` calls
it from Python (PyTensor's C and Python backends), and a ``numba_funcify``
registration calls it from nopython code (the NUMBA backend, nutpie). This replaces
a Blockwise ``eigh`` (one LAPACK call per matrix plus Python overhead per matrix in
the C backend) and a graph of batched matrix products.

The output's static shape is the input's: a length-1 batch axis stays length 1, so
PyTensor's rewrites broadcast it correctly against other operands.

The gradient Op has no gradient itself (NUTS needs first derivatives only).
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

import numpy as np
import pytensor.tensor as pt
from pytensor.gradient import DisconnectedType, grad_not_implemented
from pytensor.graph.basic import Apply
from pytensor.graph.op import Op
from pytensor.graph.replace import _vectorize_node, _vectorize_not_needed
from pytensor.link.numba.dispatch.basic import numba_njit, register_funcify_default_op_cache_key

from pymc_manidp.geometry._numba import sym_kernels, sym_sums
from pymc_manidp.geometry._numba.sym_kernels import (
    FUNC_CODES,
    sym_eigh,
    sym_function_eig,
    sym_function_pullback_eig,
)
from pymc_manidp.geometry._numba.sym_sums import congruence_sum_eig, congruence_sum_pullback_eig

__all__ = [
    "SymCongruenceSum",
    "SymCongruenceSumGrad",
    "SymEigvalsh",
    "SymMatrixFunction",
    "SymMatrixFunctionGrad",
    "sym_congruence_sum",
    "sym_eigvalsh",
    "sym_matrix_function",
]


def _as_float64(x):
    x = pt.as_tensor_variable(x)
    if x.ndim < 2:
        raise ValueError(f"expected a (..., k, k) tensor, got {x.ndim} dimension(s)")
    return x if x.dtype == "float64" else pt.cast(x, "float64")


def _as_float64_any(x):
    x = pt.as_tensor_variable(x)
    return x if x.dtype == "float64" else pt.cast(x, "float64")


def _no_second_derivative(op, inputs, what):
    """The pullback of a gradient Op: second derivatives would need the derivatives of
    the divided differences, and NUTS and the tests use first derivatives only."""
    return [
        grad_not_implemented(op, i, x, f"no second derivative of {what}")
        for i, x in enumerate(inputs)
    ]


def _func_code(func: str) -> int:
    """The kernels' code of the scalar function ``func`` (ValueError naming the choices)."""
    if func not in FUNC_CODES:
        raise ValueError(f"func must be one of {sorted(FUNC_CODES)}, got {func!r}")
    return FUNC_CODES[func]


class SymMatrixFunction(Op):
    r"""``f(sym(X))`` for a stack ``X`` of shape ``(..., k, k)``.

    Parameters
    ----------
    func : {"exp", "log", "sqrt", "invsqrt"}
        The scalar function applied to the eigenvalues.

    Notes
    -----
    .. math:: f(X) = U \operatorname{diag}(f(\lambda))\, U^\top, \qquad
              \operatorname{sym}(X) = U \operatorname{diag}(\lambda)\, U^\top.

    Calling the Op returns ``f(sym(X))``. The node has two more outputs, the
    eigenvalues ``(..., k)`` and eigenvectors ``(..., k, k)`` the kernel used: the
    gradient Op reads them, so a value-and-gradient evaluation runs one
    eigendecomposition per matrix, not two. They are not differentiable.
    """

    __props__ = ("func",)
    default_output = 0

    def __init__(self, func: str):
        self.func, self.code = func, _func_code(func)

    def make_node(self, x):
        x = _as_float64(x)
        w = pt.tensor(dtype="float64", shape=x.type.shape[:-1])
        return Apply(self, [x], [x.type(), w, x.type()])

    def perform(self, node, inputs, output_storage):
        outs = sym_function_eig(np.asarray(inputs[0], dtype=np.float64), self.code)
        for storage, value in zip(output_storage, outs, strict=True):
            storage[0] = value

    def infer_shape(self, node, shapes):
        return [shapes[0], shapes[0][:-1], shapes[0]]

    def pullback(self, inputs, outputs, cotangents):
        g_f, g_w, g_u = cotangents
        if not (isinstance(g_w.type, DisconnectedType) and isinstance(g_u.type, DisconnectedType)):
            # the eigendecomposition is the kernel's working data, not for differentiation
            return [grad_not_implemented(self, 0, inputs[0], "no gradient through (w, U)")]
        if isinstance(g_f.type, DisconnectedType):
            return [pt.zeros_like(inputs[0])]
        return [SymMatrixFunctionGrad(self.func)(outputs[1], outputs[2], g_f)]

    def __str__(self):
        return f"SymMatrixFunction{{{self.func}}}"


class SymMatrixFunctionGrad(Op):
    r"""Pullback of :class:`SymMatrixFunction`: ``(w, U, Fbar) -> Xbar``.

    ``w`` ``(..., k)`` and ``U`` ``(..., k, k)`` are the eigendecomposition the forward
    Op returned; ``Fbar`` and ``Xbar`` are ``(..., k, k)``.

    .. math:: \bar X = \operatorname{sym}\big(U\,(\Gamma \circ U^\top \bar F U)\,U^\top\big),
              \qquad \Gamma_{ij} = \frac{f(\lambda_i) - f(\lambda_j)}{\lambda_i - \lambda_j}
              \ (f'(\lambda_i) \text{ if } \lambda_i = \lambda_j).
    """

    __props__ = ("func",)

    def __init__(self, func: str):
        self.func, self.code = func, _func_code(func)

    def make_node(self, w, u, g):
        w, u, g = _as_float64_any(w), _as_float64(u), _as_float64(g)
        # the cotangent of a length-1 batch may arrive broadcast: keep U's shape
        g = pt.broadcast_to(g, u.shape) if g.type.shape != u.type.shape else g
        return Apply(self, [w, u, g], [u.type()])

    def perform(self, node, inputs, output_storage):
        w, u, g = (np.asarray(a, dtype=np.float64) for a in inputs)
        output_storage[0][0] = sym_function_pullback_eig(w, u, g, self.code)

    def infer_shape(self, node, shapes):
        return [shapes[1]]

    def pullback(self, inputs, outputs, cotangents):
        return _no_second_derivative(self, inputs, "f(sym(X))")

    def __str__(self):
        return f"SymMatrixFunctionGrad{{{self.func}}}"


class SymEigvalsh(Op):
    r"""Eigenvalues of ``sym(X)`` for a stack ``X`` ``(..., k, k)``, unsorted.

    For functions symmetric in the eigenvalues (e.g. the SPD volume density): their
    gradient ``\bar w`` is equal on tied eigenvalues, so the pullback

    .. math:: \bar X = U \operatorname{diag}(\bar w)\, U^\top

    does not depend on the basis chosen inside an eigenspace and is right at repeated
    eigenvalues. ``U`` is a hidden second output (not differentiable). Unlike an
    ``OpFromGraph`` around ``eigh``, the Op carries ``__props__``, so a model using it
    can be keyed for the on-disk sampler cache (:mod:`pymc_manidp.mcmc.nutpie_cache`).
    """

    __props__ = ()
    default_output = 0

    def make_node(self, x):
        x = _as_float64(x)
        w = pt.tensor(dtype="float64", shape=x.type.shape[:-1])
        return Apply(self, [x], [w, x.type()])

    def perform(self, node, inputs, output_storage):
        w, u = sym_eigh(np.asarray(inputs[0], dtype=np.float64))
        output_storage[0][0], output_storage[1][0] = w, u

    def infer_shape(self, node, shapes):
        return [shapes[0][:-1], shapes[0]]

    def pullback(self, inputs, outputs, cotangents):
        g_w, g_u = cotangents
        if not isinstance(g_u.type, DisconnectedType):
            return [grad_not_implemented(self, 0, inputs[0], "no gradient through U")]
        if isinstance(g_w.type, DisconnectedType):
            return [pt.zeros_like(inputs[0])]
        u = outputs[1]
        return [(u * pt.expand_dims(g_w, -2)) @ pt.swapaxes(u, -1, -2)]

    def __str__(self):
        return "SymEigvalsh"


class SymCongruenceSum(Op):
    r"""``S = sum_i f(sym(A D_i A))`` for symmetric ``A`` ``(..., k, k)`` and a fixed
    stack ``D`` ``(n, k, k)``; differentiable in ``A`` only.

    Parameters
    ----------
    func : {"exp", "log", "sqrt", "invsqrt"}
        The scalar function applied to the eigenvalues.

    Notes
    -----
    KNG's norm on SPD is ``||sum_i logm(x^{-1/2} x_i x^{-1/2})||_F``: with
    ``A = x^{-1/2}`` this Op is the whole sum in one kernel call, the congruences
    included, so no ``(n, k, k)`` intermediate and no batched matrix product enters
    the graph (their pullbacks cost more than the logarithms). The pullback is

    .. math:: \bar A = \sum_i \big(\bar G_i A D_i + D_i A \bar G_i\big),

    with ``\bar G_i`` the Daleckii–Krein pullback of ``sym(\bar S)`` at ``A D_i A``,
    computed from the eigendecompositions the forward pass keeps (hidden outputs: the
    eigenvalues, ``f`` of them and the eigenvectors; not differentiable). ``D`` gets no
    gradient: it is the data. At ``k = 3`` with ``f = log`` (KNG) the kernel runs
    vectorized over the data (:mod:`.sym_sums`).
    """

    __props__ = ("func",)
    default_output = 0

    def __init__(self, func: str):
        self.func, self.code = func, _func_code(func)

    def make_node(self, a, d):
        a, d = _as_float64(a), _as_float64(d)
        if d.ndim != 3:
            raise ValueError(f"D must be one (n, k, k) stack, got {d.ndim} dimension(s)")
        batch, n = a.type.shape[:-2], d.type.shape[0]
        w = pt.tensor(dtype="float64", shape=(*batch, n, a.type.shape[-1]))
        u = pt.tensor(dtype="float64", shape=(*batch, n, *a.type.shape[-2:]))
        return Apply(self, [a, d], [a.type(), w, w.type(), u])

    def perform(self, node, inputs, output_storage):
        a, d = (np.asarray(x, dtype=np.float64) for x in inputs)
        for storage, value in zip(output_storage, congruence_sum_eig(a, d, self.code), strict=True):
            storage[0] = value

    def infer_shape(self, node, shapes):
        a, d = shapes
        w = (*a[:-2], d[0], a[-1])
        return [a, w, w, (*a[:-2], d[0], *a[-2:])]

    def pullback(self, inputs, outputs, cotangents):
        g_s, *g_work = cotangents
        a, d = inputs
        no_data_grad = grad_not_implemented(self, 1, d, "D is data: no gradient")
        if not all(isinstance(g.type, DisconnectedType) for g in g_work):
            return [grad_not_implemented(self, 0, a, "no gradient through (w, U)"), no_data_grad]
        if isinstance(g_s.type, DisconnectedType):
            return [pt.zeros_like(a), no_data_grad]
        grad = SymCongruenceSumGrad(self.func)(a, d, *outputs[1:], g_s)
        return [grad, no_data_grad]

    def __str__(self):
        return f"SymCongruenceSum{{{self.func}}}"


class SymCongruenceSumGrad(Op):
    r"""Pullback of :class:`SymCongruenceSum` to ``A``: ``(A, D, w, f(w), U, Sbar) -> Abar``."""

    __props__ = ("func",)

    def __init__(self, func: str):
        self.func, self.code = func, _func_code(func)

    def make_node(self, a, d, w, fw, u, g):
        a, d, w, fw, u, g = (_as_float64(x) for x in (a, d, w, fw, u, g))
        g = pt.broadcast_to(g, a.shape) if g.type.shape != a.type.shape else g
        return Apply(self, [a, d, w, fw, u, g], [a.type()])

    def perform(self, node, inputs, output_storage):
        a, d, w, fw, u, g = (np.asarray(x, dtype=np.float64) for x in inputs)
        output_storage[0][0] = congruence_sum_pullback_eig(a, d, w, fw, u, g, self.code)

    def infer_shape(self, node, shapes):
        return [shapes[0]]

    def pullback(self, inputs, outputs, cotangents):
        return _no_second_derivative(self, inputs, "the congruence sum")

    def __str__(self):
        return f"SymCongruenceSumGrad{{{self.func}}}"


@functools.cache
def _kernel_salt() -> int:
    """A hash of the kernels' source for PyTensor's numba cache key.

    PyTensor keys a cached graph function on the ``Op``'s class and props only, while
    numba links the kernels' machine code into it: without this salt an edited
    kernel would keep running its old code from the cache."""
    src = b"".join(Path(m.__file__).read_bytes() for m in (sym_kernels, sym_sums))
    src += Path(__file__).read_bytes()
    return int(hashlib.sha256(src).hexdigest()[:15], 16)


@register_funcify_default_op_cache_key(SymMatrixFunction)
def _numba_sym_matrix_function(op, node, **kwargs):
    code = op.code

    @numba_njit
    def sym_matrix_function(x):
        return sym_function_eig(x, code)

    return sym_matrix_function, _kernel_salt()


@register_funcify_default_op_cache_key(SymMatrixFunctionGrad)
def _numba_sym_matrix_function_grad(op, node, **kwargs):
    code = op.code

    @numba_njit
    def sym_matrix_function_grad(w, u, g):
        return sym_function_pullback_eig(w, u, g, code)

    return sym_matrix_function_grad, _kernel_salt()


@register_funcify_default_op_cache_key(SymEigvalsh)
def _numba_sym_eigvalsh(op, node, **kwargs):
    @numba_njit
    def sym_eigvalsh(x):
        return sym_eigh(x)

    return sym_eigvalsh, _kernel_salt()


@register_funcify_default_op_cache_key(SymCongruenceSum)
def _numba_sym_congruence_sum(op, node, **kwargs):
    code = op.code

    @numba_njit
    def sym_congruence_sum(a, d):
        return congruence_sum_eig(a, d, code)

    return sym_congruence_sum, _kernel_salt()


@register_funcify_default_op_cache_key(SymCongruenceSumGrad)
def _numba_sym_congruence_sum_grad(op, node, **kwargs):
    code = op.code

    @numba_njit
    def sym_congruence_sum_grad(a, d, w, fw, u, g):
        return congruence_sum_pullback_eig(a, d, w, fw, u, g, code)

    return sym_congruence_sum_grad, _kernel_salt()


# The Ops already act on any number of leading batch axes: vectorizing a graph (PyMC
# does it for batched log-densities and predictive draws) only needs the batched inputs
# aligned, not a Blockwise wrapper.
_vectorize_node.register(SymMatrixFunction)(_vectorize_not_needed)
_vectorize_node.register(SymEigvalsh)(_vectorize_not_needed)


@_vectorize_node.register(SymMatrixFunctionGrad)
def _vectorize_sym_matrix_function_grad(op, node, w, u, g):
    nd = max(u.ndim, g.ndim, w.ndim + 1)
    u, g = pt.shape_padleft(u, nd - u.ndim), pt.shape_padleft(g, nd - g.ndim)
    u, g = pt.broadcast_arrays(u, g)
    w = pt.broadcast_to(pt.shape_padleft(w, nd - 1 - w.ndim), u.shape[:-1])
    return op.make_node(w, u, g)


def sym_eigvalsh(x):
    """Eigenvalues ``(..., k)`` of ``sym(x)``, unsorted, through :class:`SymEigvalsh`."""
    return SymEigvalsh()(x)


def sym_congruence_sum(func: str, a, d):
    """``sum_i f(sym(a d_i a))`` through :class:`SymCongruenceSum` (``d`` ``(n, k, k)``)."""
    return SymCongruenceSum(func)(a, d)


def sym_matrix_function(func: str, x):
    """``f(sym(x))`` for symmetric ``(..., k, k)`` tensors through :class:`SymMatrixFunction`."""
    return SymMatrixFunction(func)(x)
