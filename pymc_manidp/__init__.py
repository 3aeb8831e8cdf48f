"""pymc-manidp: differentially private releases on Riemannian manifolds, the PyMC way."""

from pymc_manidp.geometry import SPD, Euclidean, KendallShape, Manifold, Sphere

__version__ = "0.1.0.dev0"

__all__ = ["SPD", "Euclidean", "KendallShape", "Manifold", "Sphere", "__version__"]
