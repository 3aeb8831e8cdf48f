"""Opening data too big for memory (pymc_manidp.io) and releasing it from the command line."""

from __future__ import annotations

import json

import numpy as np
import pytest

import pymc_manidp as pmd
from pymc_manidp.datasets import generators
from pymc_manidp.io import is_lazy_source, open_points
from pymc_manidp.stats import reductions
from tests.test_cli import release_args, run

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")

NORTH = np.array([0.0, 0.0, 1.0])


@pytest.fixture
def points():
    return generators.sphere_cap(1000, radius=0.3, center=NORTH, random_seed=2)


@pytest.fixture
def shards(tmp_path, points):
    folder = tmp_path / "shards"
    folder.mkdir()
    for i, part in enumerate(np.array_split(points, 4)):
        np.save(folder / f"part-{i:02d}.npy", part)
    (folder / "README.md").write_text("not a shard")  # ignored: no format that holds records
    return folder


def test_npy_shards_open_lazily_in_order(shards, points):
    x = open_points(shards)
    assert reductions.is_dask(x) and x.chunks[0] == (250, 250, 250, 250)
    np.testing.assert_array_equal(x.compute(), points)
    y = open_points(str(shards / "part-0[12].npy"))  # a glob
    np.testing.assert_array_equal(y.compute(), points[250:750])
    z = open_points(shards, chunk_rows=100)
    assert max(z.chunks[0]) == 100
    np.testing.assert_array_equal(z.compute(), points)


def test_zarr_and_parquet_columns(tmp_path, points):
    zarr = pytest.importorskip("zarr")
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    store = str(tmp_path / "points.zarr")
    z = zarr.create_array(store, shape=points.shape, chunks=(300, 3), dtype="f8")
    z[:] = points
    np.testing.assert_array_equal(open_points(store).compute(), points)
    table = pa.table({"id": np.arange(1000), "x": points[:, 0], "y": points[:, 1]})
    table = table.append_column("z", pa.array(points[:, 2]))
    pq.write_table(table, tmp_path / "points.parquet", row_group_size=400)
    x = open_points(tmp_path / "points.parquet", columns=["x", "y", "z"])
    assert x.chunks[0] == (400, 400, 200)
    np.testing.assert_array_equal(x.compute(), points)


def test_bad_sources_are_named(tmp_path):
    with pytest.raises(ValueError, match=r"no \.npy or Parquet files"):
        open_points(tmp_path)
    np.save(tmp_path / "a.npy", np.zeros((3, 3)))
    np.save(tmp_path / "b.npy", np.zeros((3, 4)))
    with pytest.raises(ValueError, match="earlier shards have"):
        open_points(tmp_path)
    assert is_lazy_source(tmp_path) and not is_lazy_source(tmp_path / "a.npy")


def _args(path, *extra):
    return release_args(path, "--seed", "3", "--allow-fixed-seed", *extra)


def test_cli_releases_shards_on_a_cluster_with_progress(shards, points, capsys):
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None
    ) as cluster:
        code, out, err = run(_args(shards, "--scheduler", cluster.scheduler_address), capsys)
    assert code == 0, err
    doc = json.loads(out)
    assert doc["release"]["n"] == 1000 and doc["provenance"]["source"] == "shards"
    assert "pass 1: data check over 4 chunks" in err  # a progress line per pass
    S2 = pmd.Sphere(dim=2)
    value = np.array(doc["release"]["value"])
    assert S2.dist(value, pmd.frechet_mean(S2, points).mean) < 0.1
    # the same shards on the local scheduler; the in-memory file gives the same n
    code, out, err = run(_args(shards), capsys)
    assert code == 0, err and json.loads(out)["release"]["n"] == 1000


def test_cli_refuses_bad_shards_with_chunk_and_row(shards, points, capsys):
    bad = points[250:500].copy()
    bad[17] = [1.0, 0.0, 0.0]
    np.save(shards / "part-01.npy", bad)
    code, _, err = run(_args(shards), capsys)
    assert code == 2
    assert "chunk 1, row 17 of the chunk" in err and "row 267 overall" in err
    code, _, err = run(_args(shards / "part-01.npy", "--scheduler", "tcp://x:1"), capsys)
    assert code == 2 and "--scheduler" in err
