"""Mechanisms layer: mechanism objects that own their release (Laplace, KNG, the
tangent Gaussian and Laplace, and the Euclidean baselines), each carrying its privacy
map (ε, Δ, σ), and their releases as OpenDP measurements and dp_accounting events
(``interop``)."""

from pymc_manidp.mechanisms.base import Mechanism
from pymc_manidp.mechanisms.baselines import EuclideanLaplace, LandmarkLaplace, ProjectedLaplace
from pymc_manidp.mechanisms.interop import dp_event, opendp_measurement
from pymc_manidp.mechanisms.kng import KNGMechanism
from pymc_manidp.mechanisms.laplace import LaplaceMechanism
from pymc_manidp.mechanisms.tangent import TangentGaussianMechanism, TangentLaplaceMechanism

__all__ = [
    "EuclideanLaplace",
    "KNGMechanism",
    "LandmarkLaplace",
    "LaplaceMechanism",
    "Mechanism",
    "ProjectedLaplace",
    "TangentGaussianMechanism",
    "TangentLaplaceMechanism",
    "dp_event",
    "opendp_measurement",
]
