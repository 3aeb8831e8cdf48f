"""Samplers layer: exact samplers (pure ε-DP) and MCMC through PyMC."""

from pymc_manidp.samplers.exact import (
    EXACT_MANIFOLDS,
    ExactDraws,
    ExactSamplingError,
    euclidean_laplace,
    has_exact_sampler,
    kng_envelope_slope,
    laplace_coords,
    sample_kng,
    sample_laplace,
)

__all__ = [
    "EXACT_MANIFOLDS",
    "ExactDraws",
    "ExactSamplingError",
    "euclidean_laplace",
    "has_exact_sampler",
    "kng_envelope_slope",
    "laplace_coords",
    "sample_kng",
    "sample_laplace",
]
