"""Input and output: users' files (``.npy``/``.csv`` points, JSON release records) and
data stores too big for memory (``.npy`` shards, Zarr, Parquet) as Dask arrays."""

from pymc_manidp.io.files import MANIFOLDS, manifold_for, parse_center, read_points, release_json
from pymc_manidp.io.stores import is_lazy_source, open_points

__all__ = [
    "MANIFOLDS",
    "is_lazy_source",
    "manifold_for",
    "open_points",
    "parse_center",
    "read_points",
    "release_json",
]
