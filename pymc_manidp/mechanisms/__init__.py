"""Mechanisms layer: tangent-chart transforms, PyMC distributions, mechanism objects."""

from pymc_manidp.mechanisms.distributions import KNG, ManifoldLaplace, kng_logp, laplace_logp
from pymc_manidp.mechanisms.kng import KNGMechanism
from pymc_manidp.mechanisms.laplace import LaplaceMechanism
from pymc_manidp.mechanisms.transforms import ChartTransform

__all__ = [
    "KNG",
    "ChartTransform",
    "KNGMechanism",
    "LaplaceMechanism",
    "ManifoldLaplace",
    "kng_logp",
    "laplace_logp",
]
