r"""A law's log-density in the polar chart, with its gradient, as one PyTensor Op.

The PyMC model of a release (:func:`pymc_manidp.mcmc.polar_model`) writes the law as
PyTensor's autodiff graph of the polar chart, the exponential map and the law: 69-134
nodes, which numba compiles one by one, about 500 compiled units and 20-80 s on a first
release (docs/benchmarks.md, "Where a first NUTS release goes"). :class:`PolarLogDensity`
is the same function, value and gradient, as one node: a numba kernel composed of the
polar chart's map and chain rule (:mod:`.polar`) and the manifold's own kernels in chart
coordinates (``manifold.fused_kernels``, in ``geometry/_numba/fused/``: the exp chart's
log volume density and KNG's norm, each with its exact gradient).

.. math:: \log p(u) = \ell(c(u)) + \log J(c(u)) + \log|\det \partial c/\partial u|,
          \qquad \ell(c) = -\frac{|c|}{\sigma}\ \text{(Laplace at the chart's origin)},
          \quad \ell(c) = -\frac{\|\sum_i \log_{x(c)}(x_i)\|}{\sigma n}\ \text{(KNG)}.

The Laplace's footpoint is the chart's origin (the release samples it there), so its
distance is the chart radius ``t``, exactly. The tests compare value and gradient with
the graph's at random points on every space (``tests/laws/fused/``).
"""

from __future__ import annotations

import functools
import importlib

import numba
import numpy as np
import pytensor.tensor as pt
from pytensor.gradient import DisconnectedType, grad_not_implemented
from pytensor.graph.basic import Apply
from pytensor.graph.op import Op
from pytensor.link.numba.dispatch.basic import numba_njit, register_funcify_default_op_cache_key

from pymc_manidp.geometry._numba.cache import _kernel_tree_hash
from pymc_manidp.laws.fused import polar

__all__ = ["LAWS", "PolarLogDensity", "fused_kernels", "kernel_params", "polar_log_density"]

#: the laws with a fused density: the Laplace (unnormalized, footpoint at the chart's
#: origin) and KNG on the Fréchet mean (on the whole chart)
LAWS = ("laplace", "kng")
_KERNELS = "pymc_manidp.geometry._numba.fused"


def fused_kernels(manifold):
    """The module of the manifold's kernels in chart coordinates, or None.

    A manifold names it in ``fused_kernels`` (a module of ``geometry/_numba/fused/``
    with ``params``, ``log_volume_density`` and ``kng_norm``; ``"module:variant"`` when
    the module's ``kernels(variant)`` gives a pair compiled for one size); a space without one
    (a user's own manifold) has none, and its releases use the graph.
    """
    name = getattr(manifold, "fused_kernels", None)
    if name is None:
        return None
    return importlib.import_module(f"{_KERNELS}.{name.partition(':')[0]}")


def kernel_params(manifold) -> np.ndarray:
    """The float64 constants the manifold's kernels read (``params`` of its module)."""
    return np.asarray(fused_kernels(manifold).params(manifold), dtype=np.float64)


def _compose(space: str, law: str, nframe: int, big_t: float, jit):
    """The Op's kernel ``(u, scale, *frame, params[, data]) -> (logp, grad)`` of a space
    and law (``scale`` and ``logp`` 0-d arrays, as PyTensor passes and takes them),
    compiled by ``jit`` (numba's for Python callers, PyTensor's for graphs).

    Its layers are inlined into it: numba compiles, optimizes and links each function it
    calls as a unit of its own, and the units, not their size, are what a cold compile
    costs (docs/benchmarks.md)."""
    module, _, variant = space.partition(":")
    mod = importlib.import_module(f"{_KERNELS}.{module}")
    if variant:  # e.g. "spd:2": the module's kernels compiled for one size only
        log_volume_density, kng_norm = mod.kernels(variant)
    else:
        log_volume_density, kng_norm = mod.log_volume_density, mod.kng_norm
    polar_coords, polar_pullback = polar.polar_coords, polar.polar_pullback
    wrapped_distance = polar.wrapped_distance

    if law == "laplace":

        def density(u, scale, frame, params, big_t):
            c, log_jac, aux = polar_coords(u, scale, big_t)
            g_c = np.zeros(c.shape[0])
            logp = log_jac + log_volume_density(c, frame, params, g_c)
            if u.shape[0] == 1:  # the linear chart: the distance may wind round a circle
                dist, sign = wrapped_distance(c[0], big_t)
                g_c[0] -= sign / scale
                return logp - dist / scale, polar_pullback(u, scale, aux, g_c, 0.0)
            # -t/scale, differentiated in s where it is smooth (t = |c| has a cusp at 0)
            return logp - aux[0] / scale, polar_pullback(u, scale, aux, g_c, -aux[2] / scale)

        density = jit(density, inline="always")
        if nframe == 1:

            def kernel(u, scale, f0, params):
                logp, grad = density(u, scale.item(), (f0,), params, big_t)
                return np.asarray(logp), grad
        else:

            def kernel(u, scale, f0, f1, params):
                logp, grad = density(u, scale.item(), (f0, f1), params, big_t)
                return np.asarray(logp), grad

        return jit(kernel)

    def density(u, scale, frame, params, big_t, data):
        c, log_jac, aux = polar_coords(u, scale, big_t)
        g_c = np.zeros(c.shape[0])
        logp = log_jac + log_volume_density(c, frame, params, g_c)
        weight = -1.0 / (scale * data.shape[0])
        logp += weight * kng_norm(c, frame, params, data, weight, g_c)
        return logp, polar_pullback(u, scale, aux, g_c, 0.0)

    density = jit(density, inline="always")
    if nframe == 1:

        def kernel(u, scale, f0, params, data):
            logp, grad = density(u, scale.item(), (f0,), params, big_t, data)
            return np.asarray(logp), grad
    else:

        def kernel(u, scale, f0, f1, params, data):
            logp, grad = density(u, scale.item(), (f0, f1), params, big_t, data)
            return np.asarray(logp), grad

    return jit(kernel)


@functools.cache
def _python_kernel(space, law, nframe, big_t):
    """The kernel callable from Python (``perform``: PyTensor's C and Python backends)."""
    return _compose(space, law, nframe, big_t, functools.partial(numba.njit, error_model="numpy"))


class PolarLogDensity(Op):
    r"""``u -> (log p(u), ∇ log p(u))`` of a law in the polar chart, one kernel call.

    Inputs: ``u`` ``(d + 1,)`` (``(1,)`` when ``d = 1``), σ (``()``, also the chart's
    scale), the chart's frame arrays (``manifold.chart_frame``'s values, in order), the
    manifold's constants (:func:`kernel_params`), and for KNG the records ``(n,
    *point_shape)``. Outputs: the log-density (``()``) and its gradient in ``u``. Only
    ``u`` is differentiable (σ, the chart and the data are fixed in a release).

    Parameters
    ----------
    space : str
        The manifold's ``fused_kernels`` (a module, or ``"module:variant"``).
    law : {"laplace", "kng"}
        The law (:data:`LAWS`).
    nframe : int
        How many arrays the chart's frame has.
    big_t : float
        The polar radius's cap (the injectivity radius), ``inf`` on non-compact spaces.
    """

    __props__ = ("space", "law", "nframe", "big_t")

    def __init__(self, space: str, law: str, nframe: int, big_t: float):
        if law not in LAWS:
            raise ValueError(f"law must be one of {LAWS}, got {law!r}")
        self.space, self.law, self.nframe, self.big_t = space, law, int(nframe), float(big_t)

    def make_node(self, u, scale, *rest):
        u = pt.as_tensor_variable(u, dtype="float64")
        scale = pt.as_tensor_variable(scale, dtype="float64")
        rest = [pt.as_tensor_variable(x, dtype="float64") for x in rest]
        if u.ndim != 1 or scale.ndim != 0:
            raise ValueError("u must be a vector and scale a scalar")
        expected = self.nframe + 1 + (self.law == "kng")
        if len(rest) != expected:
            raise ValueError(f"expected {expected} inputs after u and scale, got {len(rest)}")
        return Apply(self, [u, scale, *rest], [pt.dscalar(), u.type()])

    def perform(self, node, inputs, output_storage):
        fn = _python_kernel(self.space, self.law, self.nframe, self.big_t)
        logp, grad = fn(*(np.asarray(x, dtype=np.float64) for x in inputs))
        output_storage[0][0] = logp
        output_storage[1][0] = grad

    def infer_shape(self, node, shapes):
        return [(), shapes[0]]

    def pullback(self, inputs, outputs, cotangents):
        g_logp, g_grad = cotangents
        if not isinstance(g_grad.type, DisconnectedType):
            return [
                grad_not_implemented(self, i, x, "no second derivative of a fused density")
                for i, x in enumerate(inputs)
            ]
        rest = [DisconnectedType()() for _ in inputs[1:]]
        if isinstance(g_logp.type, DisconnectedType):
            return [pt.zeros_like(inputs[0]), *rest]
        return [g_logp * outputs[1], *rest]

    def connection_pattern(self, node):
        return [[True, True]] + [[False, False] for _ in node.inputs[1:]]

    def __str__(self):
        return f"PolarLogDensity{{{self.space}, {self.law}}}"


@functools.cache
def _kernel_salt() -> int:
    """Part of PyTensor's cache key: the sources of every kernel the fused density may
    call (``laws/fused`` and all of ``geometry/_numba``: SPD's kernels call
    ``sym_sums``'s), so an edit of any of them recompiles."""
    return int(_kernel_tree_hash()[:15], 16)


@register_funcify_default_op_cache_key(PolarLogDensity)
def _numba_polar_log_density(op, node, **kwargs):
    return _compose(op.space, op.law, op.nframe, op.big_t, numba_njit), _kernel_salt()


def polar_log_density(manifold, law, u, scale, frame, data=None):
    """The fused log-density of ``law`` at ``u`` (tensor): :class:`PolarLogDensity`'s
    first output, for ``frame`` the chart's arrays (``manifold.chart_frame``'s
    values or their ``pm.Data``, in order) and, for KNG, the records ``data``."""
    mod = fused_kernels(manifold)
    if mod is None:
        raise ValueError(f"{manifold} has no fused kernels (fused_kernels)")
    frame = list(frame)
    op = PolarLogDensity(
        manifold.fused_kernels, law, len(frame), float(manifold.injectivity_radius)
    )
    params = pt.constant(kernel_params(manifold))
    extra = [] if law == "laplace" else [data]
    return op(u, scale, *frame, params, *extra)[0]
