"""Data: the 2021 supplement's generators and small real datasets (cells, cities).

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
from pymc_manidp.datasets.generators import (
    as_generator,
    sphere_cap,
    uniform_radius_ball,
    wishart_in_ball,
)

__all__ = [
    "ATTRIBUTION",
    "Cells",
    "Cities",
    "as_generator",
    "latlon_to_unit",
    "load_cells",
    "load_cities",
    "resample_closed",
    "sphere_cap",
    "uniform_radius_ball",
    "unit_to_latlon",
    "wishart_in_ball",
]
