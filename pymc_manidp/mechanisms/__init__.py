"""Mechanisms layer: mechanism objects that own their release (Laplace, KNG, KNG for
geodesic regression, the tangent Gaussian and Laplace, and the Euclidean baselines),
each carrying its privacy map (ε, Δ, σ), and their releases as OpenDP measurements
and dp_accounting events (``interop``)."""

from pymc_manidp.mechanisms.base import Mechanism
from pymc_manidp.mechanisms.baselines import EuclideanLaplace, LandmarkLaplace, ProjectedLaplace
from pymc_manidp.mechanisms.interop import dp_event, opendp_measurement
from pymc_manidp.mechanisms.kng import KNGMechanism
from pymc_manidp.mechanisms.laplace import LaplaceMechanism
from pymc_manidp.mechanisms.regression import RegressionKNGMechanism
from pymc_manidp.mechanisms.regression_sequential import SequentialRegressionKNGMechanism
from pymc_manidp.mechanisms.riemannian_gaussian import RiemannianGaussianMechanism
from pymc_manidp.mechanisms.tangent import (
    TangentGaussianMechanism,
    TangentLaplaceMechanism,
    TwoStageTangentMechanism,
)

__all__ = [
    "EuclideanLaplace",
    "KNGMechanism",
    "LandmarkLaplace",
    "LaplaceMechanism",
    "Mechanism",
    "ProjectedLaplace",
    "RegressionKNGMechanism",
    "RiemannianGaussianMechanism",
    "SequentialRegressionKNGMechanism",
    "TangentGaussianMechanism",
    "TangentLaplaceMechanism",
    "TwoStageTangentMechanism",
    "dp_event",
    "opendp_measurement",
]
