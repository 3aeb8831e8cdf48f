"""Median KNG's exact sampler on median_robustness's grid: envelope, acceptance, time.

Run: PYTHONPATH=. .venv/bin/python docs/benchmarks/median_envelope.py
For each space and n of ``pymc-manidp reproduce median_robustness`` (eps = 1), clean
data and 10% at the ball's edge, one data set each (the experiment's generators,
seed 1): the envelope the sampler picks (``MedianShells`` around the computed
median, or ``MedianCells``), its size, the acceptance rate over 20 draws and the
seconds per single release (envelope built once per release, as the experiment
does). The sum over the grid times 500 replicates estimates the median's share of
a full run on one core.
"""

import time
import warnings

import numpy as np

from pymc_manidp.experiments import median_robustness as mr
from pymc_manidp.laws.exact import ExactSamplingError, sample_kng_median

warnings.simplefilter("ignore")
print("| space | n | at the edge | envelope | boxes/shells | acceptance | s per release |")
print("|---|---|---|---|---|---|---|")
total = 0.0
for space in mr.SPACES:
    M, gen, mechs, outlier = mr._setup(space, 1.0)
    mech = mechs[mr.KNG_MEDIAN]
    for n in mr.SETTINGS["full"]["n_grid"]:
        for p in (0.0, 0.1):
            rng = np.random.default_rng(1)
            x = gen(n, rng)
            x[: round(p * n)] = outlier
            sigma = mech.sigma(n)
            t0 = time.perf_counter()
            sample_kng_median(M, x, sigma, 1, rng=rng, domain=mech.domain)
            one = time.perf_counter() - t0
            total += one * 2  # the 1% and 5% columns cost about as much
            try:
                out = sample_kng_median(M, x, sigma, 20, rng=rng, domain=mech.domain)
                info = out.info
                size = info["envelope_cells"] or info["envelope_shells"]
                acc = f"{out.acceptance_rate:.3g}"
                env = info["envelope"]
            except ExactSamplingError:
                env, size, acc = "(cap hit)", "", "< 5e-3"
            print(f"| {space} | {n} | {100 * p:g}% | {env} | {size} | {acc} | {one:.3g} |")
print(f"\nmedian releases of a full run (500 replicates a cell): ~{total * 500 / 3600:.1f} h")
