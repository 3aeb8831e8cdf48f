"""Fused log-densities: a law in the polar chart, value and gradient, as one numba kernel.

The release's NUTS model compiles this instead of PyTensor's autodiff graph where the
manifold ships kernels in chart coordinates (``manifold.fused_kernels``): a first
release then compiles a handful of numba functions instead of about 500
(docs/benchmarks.md). :mod:`.polar` holds the polar chart's map and chain rule,
:mod:`.density` the PyTensor Op.
"""

from pymc_manidp.laws.fused.density import (
    LAWS,
    PolarLogDensity,
    fused_kernels,
    kernel_params,
    polar_log_density,
)
from pymc_manidp.laws.fused.polar import polar_coords_numpy

__all__ = [
    "LAWS",
    "PolarLogDensity",
    "fused_kernels",
    "kernel_params",
    "polar_coords_numpy",
    "polar_log_density",
]
