"""Mechanisms layer: tangent-chart transforms, PyMC distributions, mechanism objects."""

from pymc_manidp.mechanisms.distributions import (
    KNG,
    ManifoldLaplace,
    ManifoldUniform,
    kng_logp,
    laplace_log_normalizer,
    laplace_logp,
)
from pymc_manidp.mechanisms.kng import KNGMechanism
from pymc_manidp.mechanisms.laplace import LaplaceMechanism
from pymc_manidp.mechanisms.transforms import ChartTransform, NormalizedGaussian, PolarChart

__all__ = [
    "KNG",
    "ChartTransform",
    "KNGMechanism",
    "LaplaceMechanism",
    "ManifoldLaplace",
    "ManifoldUniform",
    "NormalizedGaussian",
    "PolarChart",
    "kng_logp",
    "laplace_log_normalizer",
    "laplace_logp",
]
