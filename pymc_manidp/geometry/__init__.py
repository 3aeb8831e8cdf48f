"""Geometry layer: manifolds with NumPy maps and PyTensor twins."""

from pymc_manidp.geometry.base import Manifold, ManifoldBase, max_radius_from
from pymc_manidp.geometry.euclidean import Euclidean
from pymc_manidp.geometry.kendall import KendallShape
from pymc_manidp.geometry.spd import SPD
from pymc_manidp.geometry.sphere import Sphere

__all__ = [
    "SPD",
    "Euclidean",
    "KendallShape",
    "Manifold",
    "ManifoldBase",
    "Sphere",
    "max_radius_from",
]
