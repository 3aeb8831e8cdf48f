"""MCMC layer: the PyMC model of a law, sampling with nutpie or PyMC (one
:class:`MCMCSettings` value says how long), the compile cache, and the chain kernels
the coupling estimate and the supplement's Metropolis reuse.

The kernels' building blocks (the Metropolis step and acceptance, the chain loop)
stay in ``pymc_manidp.mcmc.kernels``; :class:`~pymc_manidp.privacy.CouplingError`,
which :func:`meeting_times` raises, is documented with the coupling estimate.
"""

from pymc_manidp.mcmc.kernels import (
    HMC,
    RWMH,
    BatchTarget,
    draw_chain,
    initial_law,
    meeting_times,
    reflection_maximal,
    tune_kernel,
)

# meeting_times raises it; one class, documented where users catch it (pymc_manidp.privacy)
from pymc_manidp.mcmc.kernels import CouplingError as CouplingError
from pymc_manidp.mcmc.memory_limit import (
    MAX_TRACE_BYTES_ENV,
    MCMC_MAX_TRACE_BYTES,
    check_mcmc_memory,
)
from pymc_manidp.mcmc.model import (
    expand_fused,
    fused_data,
    fused_law,
    fused_model,
    is_fused,
    polar_data,
    polar_model,
    regression_data,
    regression_model,
)
from pymc_manidp.mcmc.nutpie_cache import CACHE_ENV, cache_dir, clear_cache, compile_nutpie
from pymc_manidp.mcmc.sampling import (
    BACKEND_ENV,
    SAMPLERS,
    CompiledSampler,
    FreshNUTS,
    SamplerCache,
    has_nutpie,
    nuts_backend,
    sample,
    sampler_backend,
)
from pymc_manidp.mcmc.sbc import CalibrationResult, calibration_study
from pymc_manidp.mcmc.settings import MCMCSettings
from pymc_manidp.mcmc.time_limit import MAX_SECONDS_ENV, MCMC_MAX_SECONDS, check_mcmc_budget

__all__ = [
    "BACKEND_ENV",
    "CACHE_ENV",
    "HMC",
    "MAX_SECONDS_ENV",
    "MAX_TRACE_BYTES_ENV",
    "MCMC_MAX_SECONDS",
    "MCMC_MAX_TRACE_BYTES",
    "RWMH",
    "SAMPLERS",
    "BatchTarget",
    "CalibrationResult",
    "CompiledSampler",
    "FreshNUTS",
    "MCMCSettings",
    "SamplerCache",
    "cache_dir",
    "calibration_study",
    "check_mcmc_budget",
    "check_mcmc_memory",
    "clear_cache",
    "compile_nutpie",
    "draw_chain",
    "expand_fused",
    "fused_data",
    "fused_law",
    "fused_model",
    "has_nutpie",
    "initial_law",
    "is_fused",
    "meeting_times",
    "nuts_backend",
    "polar_data",
    "polar_model",
    "reflection_maximal",
    "regression_data",
    "regression_model",
    "sample",
    "sampler_backend",
    "tune_kernel",
]
