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
    "TangentGaussianMechanism",
    "TangentLaplaceMechanism",
    "TwoStageTangentMechanism",
    "dp_event",
    "opendp_measurement",
]

#: names the package exported before the laws got their own folder (issue 22): they
#: still resolve, with a DeprecationWarning, for one release
_MOVED_TO_LAWS = (
    "KNG",
    "ChartTransform",
    "ManifoldLaplace",
    "ManifoldUniform",
    "NormalizedGaussian",
    "PolarChart",
    "kng_logp",
    "laplace_log_normalizer",
    "laplace_logp",
)


def __getattr__(name):
    if name in _MOVED_TO_LAWS:
        import importlib
        import warnings

        warnings.warn(
            f"pymc_manidp.mechanisms.{name} moved to pymc_manidp.laws.{name} "
            f"(pmd.{name} works too); the old path will be removed",
            DeprecationWarning,
            stacklevel=2,
        )
        # the laws sit below the mechanisms: this import points down
        return getattr(importlib.import_module("pymc_manidp.laws"), name)
    raise AttributeError(f"module 'pymc_manidp.mechanisms' has no attribute {name!r}")
