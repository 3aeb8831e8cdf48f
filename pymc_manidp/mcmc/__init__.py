"""MCMC layer: the PyMC model of a law, sampling with nutpie or PyMC (one
:class:`MCMCSettings` value says how long), the compile cache, and the chain kernels
the coupling estimate and the supplement's Metropolis reuse."""

from pymc_manidp.mcmc.budget import MAX_SECONDS_ENV, MCMC_MAX_SECONDS, check_mcmc_budget
from pymc_manidp.mcmc.kernels import (
    HMC,
    RWMH,
    BatchTarget,
    ChainRun,
    CouplingError,
    draw_chain,
    initial_law,
    log_uniform,
    meeting_times,
    metropolis_accept,
    metropolis_step,
    reflection_maximal,
    run_chain,
    tune_kernel,
)
from pymc_manidp.mcmc.model import point_dims, polar_data, polar_model
from pymc_manidp.mcmc.nutpie_cache import CACHE_ENV, cache_dir, clear_cache, compile_nutpie
from pymc_manidp.mcmc.sampling import (
    BACKEND_ENV,
    NUTS_BACKENDS,
    SAMPLERS,
    CompiledSampler,
    SamplerCache,
    has_nutpie,
    nuts_backend,
    sample,
    sampler_backend,
)
from pymc_manidp.mcmc.settings import MCMCSettings

__all__ = [
    "BACKEND_ENV",
    "CACHE_ENV",
    "HMC",
    "MAX_SECONDS_ENV",
    "MCMC_MAX_SECONDS",
    "NUTS_BACKENDS",
    "RWMH",
    "SAMPLERS",
    "BatchTarget",
    "ChainRun",
    "CompiledSampler",
    "CouplingError",
    "MCMCSettings",
    "SamplerCache",
    "cache_dir",
    "check_mcmc_budget",
    "clear_cache",
    "compile_nutpie",
    "draw_chain",
    "has_nutpie",
    "initial_law",
    "log_uniform",
    "meeting_times",
    "metropolis_accept",
    "metropolis_step",
    "nuts_backend",
    "point_dims",
    "polar_data",
    "polar_model",
    "reflection_maximal",
    "run_chain",
    "sample",
    "sampler_backend",
    "tune_kernel",
]
