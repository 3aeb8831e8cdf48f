"""SPD's norm of a batch of tangent vectors: the override against the generic route.

``SPD.norm`` reads ``|x^{-1/2} v x^{-1/2}|_F`` with one eigendecomposition per footpoint;
the generic ``ManifoldBase.norm`` is ``sqrt(inner(x, v, v))``, two solves per vector. The
median envelope's cell bounds (``stats/reductions/median_sums.py``) take the norm of every record's
log map at every cell center. Run: ``PYTHONPATH=$PWD .venv/bin/python
docs/benchmarks/bench_spd_norm.py``; prints the median time of each, interleaved, and the
largest relative difference of the values.
"""

import time

import numpy as np

import pymc_manidp as pmd
from pymc_manidp.geometry.base import ManifoldBase

for k in (2, 3, 8):
    M = pmd.SPD(k=k)
    rng = np.random.default_rng(0)
    x = M.exp_coords(np.eye(k), 0.5 * rng.normal(size=(8, M.dim)))[:, None]
    y = M.exp_coords(np.eye(k), 0.5 * rng.normal(size=(5000, M.dim)))[None]
    v = M.log(x, y)
    times = {"generic": [], "SPD.norm": []}
    for _ in range(7):  # interleaved: a load change hits both
        for name, f in (("generic", ManifoldBase.norm), ("SPD.norm", type(M).norm)):
            t = time.perf_counter()
            f(M, x, v)
            times[name].append(time.perf_counter() - t)
    gen, new = (np.median(times[n]) for n in ("generic", "SPD.norm"))
    diff = np.max(np.abs(M.norm(x, v) / ManifoldBase.norm(M, x, v) - 1))
    print(
        f"SPD({k}), 8 x 5,000 vectors: generic {gen * 1e3:.1f} ms, SPD.norm {new * 1e3:.1f} ms, "
        f"ratio {gen / new:.1f}x, max relative difference {diff:.1e}"
    )
