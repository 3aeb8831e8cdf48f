"""Input and output: users' files (``.npy``/``.csv`` points, JSON release records),
data stores too big for memory (``.npy`` shards, Zarr, Parquet) as Dask arrays, and the
privacy budget's ledger file."""

from pymc_manidp.io.files import (
    MANIFOLD_NAMES,
    manifold_for,
    parse_center,
    read_points,
    release_json,
)
from pymc_manidp.io.ledger import LedgerFile, data_fingerprint, open_ledger, read_ledger
from pymc_manidp.io.stores import is_lazy_source, open_points

__all__ = [
    "MANIFOLD_NAMES",
    "LedgerFile",
    "data_fingerprint",
    "is_lazy_source",
    "manifold_for",
    "open_ledger",
    "open_points",
    "parse_center",
    "read_ledger",
    "read_points",
    "release_json",
]
