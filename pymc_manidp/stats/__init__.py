"""Statistics layer: Fréchet means and medians, geodesic regression, sensitivity bounds
and the public data domain."""

from pymc_manidp.stats.domain import DataDomain, DomainError
from pymc_manidp.stats.frechet import ConvergenceWarning, FrechetResult, frechet_mean
from pymc_manidp.stats.median import MedianResult, frechet_median
from pymc_manidp.stats.regression import (
    RegressionResult,
    geodesic_regression,
    regression_sensitivity,
)
from pymc_manidp.stats.sensitivity import (
    ambient_radius_spd,
    ambient_radius_sphere,
    calibrated_sigma,
    curvature_factor,
    curvature_factor_min,
    empirical_sphere_log_spread,
    kng_sensitivity,
    laplace_sensitivity,
    median_gradient_sensitivity,
)

__all__ = [
    "ConvergenceWarning",
    "DataDomain",
    "DomainError",
    "FrechetResult",
    "MedianResult",
    "RegressionResult",
    "ambient_radius_spd",
    "ambient_radius_sphere",
    "calibrated_sigma",
    "curvature_factor",
    "curvature_factor_min",
    "empirical_sphere_log_spread",
    "frechet_mean",
    "frechet_median",
    "geodesic_regression",
    "kng_sensitivity",
    "laplace_sensitivity",
    "median_gradient_sensitivity",
    "regression_sensitivity",
]
