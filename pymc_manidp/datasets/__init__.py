"""Data: the 2021 supplement's generators, small real datasets (cells, cities,
sensor orientations, the exception tree) and trees embedded in the hyperbolic plane
(:func:`embed_tree`).

Licences and attribution of the packaged files: ``data/LICENSES.md``.
"""

from pymc_manidp.datasets.cells import Cells, load_cells, resample_closed
from pymc_manidp.datasets.cities import (
    ATTRIBUTION,
    Cities,
    latlon_to_unit,
    load_cities,
    unit_to_latlon,
)
from pymc_manidp.datasets.exception_tree import (
    EXCEPTION_TREE_EDGE,
    ExceptionTree,
    load_exception_tree,
)
from pymc_manidp.datasets.generators import (
    as_generator,
    sphere_cap,
    uniform_radius_ball,
    wishart_in_ball,
)
from pymc_manidp.datasets.orientations import (
    ORIENTATIONS_ATTRIBUTION,
    Orientations,
    load_orientations,
)
from pymc_manidp.datasets.trees import embed_tree

__all__ = [
    "ATTRIBUTION",
    "EXCEPTION_TREE_EDGE",
    "ORIENTATIONS_ATTRIBUTION",
    "Cells",
    "Cities",
    "ExceptionTree",
    "Orientations",
    "as_generator",
    "embed_tree",
    "latlon_to_unit",
    "load_cells",
    "load_cities",
    "load_exception_tree",
    "load_orientations",
    "resample_closed",
    "sphere_cap",
    "uniform_radius_ball",
    "unit_to_latlon",
    "wishart_in_ball",
]
