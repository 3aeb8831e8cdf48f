"""pymc-manidp: differentially private releases on Riemannian manifolds, the PyMC way."""

from pymc_manidp.geometry import SPD, Euclidean, KendallShape, Manifold, Sphere
from pymc_manidp.mechanisms import (
    KNG,
    KNGMechanism,
    LaplaceMechanism,
    ManifoldLaplace,
    ManifoldUniform,
)
from pymc_manidp.privacy import DiagnosticsError, Release
from pymc_manidp.privacy.inference import noise_aware_model
from pymc_manidp.stats import DataDomain, DomainError, FrechetResult, frechet_mean

__version__ = "0.1.0.dev0"

__all__ = [
    "KNG",
    "SPD",
    "DataDomain",
    "DiagnosticsError",
    "DomainError",
    "Euclidean",
    "FrechetResult",
    "KNGMechanism",
    "KendallShape",
    "LaplaceMechanism",
    "Manifold",
    "ManifoldLaplace",
    "ManifoldUniform",
    "Release",
    "Sphere",
    "__version__",
    "frechet_mean",
    "noise_aware_model",
]
