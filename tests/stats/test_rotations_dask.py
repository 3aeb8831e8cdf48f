"""Exact releases on SO(3) over Dask arrays: the in-memory law, nothing gathered.

Dask's local scheduler wrapped so that a pass handing the client more than 40 KB fails:
the data are 72 bytes a record (6,000 records: 432 KB), while a pass returns a few
numbers per chunk (sums, KNG's gradients of a batch of proposals, a 1,024-bin
distance profile), whatever n.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

import pymc_manidp as pmd
from pymc_manidp.datasets import generators
from pymc_manidp.geometry.rotations import Rotations
from tests.stats.test_dask import _guarded_get

da = pytest.importorskip("dask.array")
dask = pytest.importorskip("dask")

M = Rotations()
M0 = M.from_rotvecs([0.2, -0.4, 0.9])
R = np.pi / 8


def _data(n, seed):
    return generators.uniform_radius_ball(M, n, center=M0, radius=R, random_seed=seed)


@pytest.mark.parametrize("cls", [pmd.LaplaceMechanism, pmd.KNGMechanism])
def test_exact_release_over_dask_is_the_in_memory_law(cls):
    """1,000 draws over Dask (6,000 records in chunks of 1,500) and in memory: two-sample KS of
    the distance to the Fréchet mean and of a chart coordinate (alpha 0.01,
    Bonferroni 0.005 each); epsilon halved is refuted by the same test. Every pass
    returns a few numbers per chunk, never the records."""
    size, alpha = 1000, 0.01
    data = _data(6000, seed=3)
    lazy = da.from_array(data, chunks=(1500, 3, 3))
    mech = cls(M, epsilon=1.0, center=M0, radius=R)
    get, seen = _guarded_get(limit=40_000)
    with dask.config.set(scheduler=get):
        x_dask = mech.sample(lazy, size, random_seed=11)
        rel = mech.release(lazy, random_seed=5)
        assert rel.delta == 0.0 and rel.n == 6000 and rel.sampler == "exact"
    assert seen, "no pass ran on the guarded scheduler: the data were read some other way"
    x_np = mech.sample(data, size, random_seed=12)
    ref = pmd.frechet_mean(M, data).mean

    def views(x):
        return M.dist(ref, x), M.log_coords(ref, x)[:, 0]

    p = [stats.ks_2samp(a, b).pvalue for a, b in zip(views(x_dask), views(x_np), strict=True)]
    assert min(p) > alpha / 2, p
    wrong = cls(M, epsilon=0.5, center=M0, radius=R).sample(data, size, random_seed=12)
    p = [stats.ks_2samp(a, b).pvalue for a, b in zip(views(x_dask), views(wrong), strict=True)]
    assert min(p) < alpha / 2
    assert M.dist(rel.value, ref) < 0.05


def test_a_reflection_over_dask_is_refused_naming_chunk_and_row():
    data = _data(2000, seed=4)
    data[1234] = -data[1234]  # det -1
    lazy = da.from_array(data, chunks=(500, 3, 3))  # row 1234 = chunk 2, row 234
    mech = pmd.LaplaceMechanism(M, epsilon=1.0, center=M0, radius=R)
    with pytest.raises(ValueError, match="reflections") as info:
        mech.release(lazy, random_seed=0)
    assert "1234" in str(info.value), str(info.value)
