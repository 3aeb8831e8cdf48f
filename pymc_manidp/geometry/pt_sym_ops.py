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
from pytensor.gradient import grad_not_implemented
from pytensor.graph.basic import Apply
from pytensor.graph.op import Op
from pytensor.graph.replace import _vectorize_node, _vectorize_not_needed
from pytensor.link.numba.dispatch.basic import numba_njit, register_funcify_default_op_cache_key

from pymc_manidp.geometry import sym_kernels
from pymc_manidp.geometry.sym_kernels import FUNC_CODES, sym_function, sym_function_pullback

__all__ = ["SymMatrixFunction", "SymMatrixFunctionGrad", "sym_matrix_function"]


def _as_float64(x):
    x = pt.as_tensor_variable(x)
    if x.ndim < 2:
        raise ValueError(f"expected a (..., k, k) tensor, got {x.ndim} dimension(s)")
    return x if x.dtype == "float64" else pt.cast(x, "float64")


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
    """

    __props__ = ("func",)

    def __init__(self, func: str):
        self.func, self.code = func, _func_code(func)

    def make_node(self, x):
        x = _as_float64(x)
        return Apply(self, [x], [x.type()])

    def perform(self, node, inputs, output_storage):
        output_storage[0][0] = sym_function(np.asarray(inputs[0], dtype=np.float64), self.code)

    def infer_shape(self, node, shapes):
        return [shapes[0]]

    def pullback(self, inputs, outputs, cotangents):
        return [SymMatrixFunctionGrad(self.func)(inputs[0], cotangents[0])]

    def __str__(self):
        return f"SymMatrixFunction{{{self.func}}}"


class SymMatrixFunctionGrad(Op):
    r"""Pullback of :class:`SymMatrixFunction`: ``(X, Fbar) -> Xbar``, all ``(..., k, k)``.

    .. math:: \bar X = \operatorname{sym}\big(U\,(\Gamma \circ U^\top \bar F U)\,U^\top\big),
              \qquad \Gamma_{ij} = \frac{f(\lambda_i) - f(\lambda_j)}{\lambda_i - \lambda_j}
              \ (f'(\lambda_i) \text{ if } \lambda_i = \lambda_j).
    """

    __props__ = ("func",)

    def __init__(self, func: str):
        self.func, self.code = func, _func_code(func)

    def make_node(self, x, g):
        x, g = _as_float64(x), _as_float64(g)
        # the cotangent of a length-1 batch may arrive broadcast: keep x's shape
        g = pt.broadcast_to(g, x.shape) if g.type.shape != x.type.shape else g
        return Apply(self, [x, g], [x.type()])

    def perform(self, node, inputs, output_storage):
        x, g = (np.asarray(a, dtype=np.float64) for a in inputs)
        output_storage[0][0] = sym_function_pullback(x, g, self.code)

    def infer_shape(self, node, shapes):
        return [shapes[0]]

    def pullback(self, inputs, outputs, cotangents):
        # second derivatives would need the derivative of the divided differences;
        # NUTS and the tests use first derivatives only
        return [
            grad_not_implemented(self, 0, inputs[0], "no second derivative of f(sym(X))"),
            grad_not_implemented(self, 1, inputs[1], "no second derivative of f(sym(X))"),
        ]

    def __str__(self):
        return f"SymMatrixFunctionGrad{{{self.func}}}"


@functools.cache
def _kernel_salt() -> int:
    """A hash of the kernels' source for PyTensor's numba cache key.

    PyTensor keys a cached graph function on the ``Op``'s class and props only, while
    numba links the kernels' machine code into it: without this salt an edited
    kernel would keep running its old code from the cache."""
    src = Path(sym_kernels.__file__).read_bytes() + Path(__file__).read_bytes()
    return int(hashlib.sha256(src).hexdigest()[:15], 16)


@register_funcify_default_op_cache_key(SymMatrixFunction)
def _numba_sym_matrix_function(op, node, **kwargs):
    code = op.code

    @numba_njit
    def sym_matrix_function(x):
        return sym_function(x, code)

    return sym_matrix_function, _kernel_salt()


@register_funcify_default_op_cache_key(SymMatrixFunctionGrad)
def _numba_sym_matrix_function_grad(op, node, **kwargs):
    code = op.code

    @numba_njit
    def sym_matrix_function_grad(x, g):
        return sym_function_pullback(x, g, code)

    return sym_matrix_function_grad, _kernel_salt()


# The Ops already act on any number of leading batch axes: vectorizing a graph (PyMC
# does it for batched log-densities and predictive draws) only needs the batched inputs
# aligned, not a Blockwise wrapper.
_vectorize_node.register(SymMatrixFunction)(_vectorize_not_needed)


@_vectorize_node.register(SymMatrixFunctionGrad)
def _vectorize_sym_matrix_function_grad(op, node, x, g):
    nd = max(x.ndim, g.ndim)
    x, g = pt.shape_padleft(x, nd - x.ndim), pt.shape_padleft(g, nd - g.ndim)
    x, g = pt.broadcast_arrays(x, g)
    return op.make_node(x, g)


def sym_matrix_function(func: str, x):
    """``f(sym(x))`` for symmetric ``(..., k, k)`` tensors through :class:`SymMatrixFunction`."""
    return SymMatrixFunction(func)(x)
