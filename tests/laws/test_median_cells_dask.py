"""The median envelope's boxes over Dask data: a batch of boxes a pass (issue 43,
leftovers item 6). The in-memory rule gives one box a pass from n ~ 83,000 on S^2, so a
Dask array was read hundreds of times (n = 10^5: docs/benchmarks.md)."""

from __future__ import annotations

import math

import dask.array as da
import numpy as np

import pymc_manidp as pmd
from pymc_manidp.laws.exact import median_cells
from pymc_manidp.stats import reductions
from pymc_manidp.stats.domain import DataDomain


def test_dask_boxes_are_bounded_in_batches_with_the_in_memory_values(monkeypatch):
    S = pmd.Sphere(dim=2)
    m0 = np.array([0, 0, 1.0])
    rng = np.random.default_rng(3)
    x = S.exp(m0, 0.1 * rng.normal(size=(300, 3)) * [1, 1, 0])
    x = x[S.dist(m0, x) < 0.5]
    # the in-memory rule at one box a pass, as for n >= ~83,334 (without its cost)
    monkeypatch.setattr(median_cells, "_KNG_BATCH_LOG_MAPS", 1)
    domain = DataDomain(S, m0, 0.5)
    a = np.stack(np.meshgrid(*[np.linspace(-0.4, 0.4, 10)] * 2, indexing="ij"), -1).reshape(-1, 2)
    h = np.full(len(a), 0.08)
    ref = (m0, float(reductions.median_terms(S, m0[None], x)[3][0]))
    out = {}
    for name, data in (("numpy", x), ("dask", da.from_array(x, chunks=50))):
        before = reductions.pass_count()
        out[name] = median_cells._MedianCells._bounds(S, data, m0, a, h, domain.radius, ref)
        out[name] = (*out[name], reductions.pass_count() - before)
    # NumPy: one box a pass, two passes each (bounds and F); Dask: a batch a pass
    assert out["numpy"][2] == 2 * len(a)
    assert out["dask"][2] == 2 * math.ceil(len(a) / median_cells._DASK_BATCH) == 4
    # the same bounds, whatever the grouping (each box's sums are its own)
    for k in (0, 1):
        np.testing.assert_allclose(out["dask"][k], out["numpy"][k], rtol=1e-12, atol=1e-15)
