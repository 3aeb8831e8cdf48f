"""Mechanisms layer: mechanism objects that own their release (Laplace, KNG, and the
Euclidean baselines), each carrying its privacy map (ε, Δ, σ)."""

from pymc_manidp.mechanisms.base import Mechanism
from pymc_manidp.mechanisms.baselines import EuclideanLaplace, LandmarkLaplace, ProjectedLaplace
from pymc_manidp.mechanisms.kng import KNGMechanism
from pymc_manidp.mechanisms.laplace import LaplaceMechanism

__all__ = [
    "EuclideanLaplace",
    "KNGMechanism",
    "LandmarkLaplace",
    "LaplaceMechanism",
    "Mechanism",
    "ProjectedLaplace",
]
