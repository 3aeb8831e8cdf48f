"""Per-replicate cost of ``calibration_study``'s PyMC path: ``pm.sample`` against ``FreshNUTS``.

Before issue 28's fix a study on PyMC's NUTS called ``pm.sample(step=step)`` per
replicate with one prebuilt step; ``pm.sample`` compiles its initial-point and trace
helpers again at every call. Now the study runs a ``FreshNUTS`` (everything compiled
once, the step's fresh state restored before each chain). Both are timed here on the
models of ``tests/mcmc/test_sbc_manifolds.py`` (SPD(3), Kendall(6)), each replicate a
new release (``pm.set_data``), 2 chains x (100 tuning + 100 draws), interleaved
rounds so that a change of load hits both; compilation of the step is outside the
times. Run: ``PYTHONPATH=$PWD .venv/bin/python docs/benchmarks/bench_calibration_pymc.py``.
"""

import logging
import time
import warnings

import numpy as np
import pymc as pm

from pymc_manidp.laws.inference import noise_aware_data
from pymc_manidp.mcmc.sampling import FreshNUTS, strict_floats
from tests.mcmc.test_sbc_manifolds import _kendall_model, _spd_model

warnings.simplefilter("ignore")
logging.getLogger("pymc").setLevel(logging.ERROR)
REPLICATES, ROUNDS = 5, 3
RUN = {"draws": 100, "tune": 100, "chains": 2}

for name, build in (
    ("SPD(3)", lambda: _spd_model(0.3)),
    ("Kendall(6)", lambda: _kendall_model(0.05)),
):
    model = build()
    releases = pm.draw(model["release"], draws=REPLICATES, random_seed=0)
    with model, strict_floats():
        step = pm.NUTS()
    fresh = FreshNUTS(model, var_names=["mean"])
    times = {"pm.sample": [], "FreshNUTS": []}
    for _ in range(ROUNDS):
        for label in times:
            t = time.perf_counter()
            for i, rel in enumerate(releases):
                pm.set_data(noise_aware_data(model, rel), model=model)
                if label == "pm.sample":
                    with model, strict_floats():
                        pm.sample(
                            **RUN,
                            cores=1,
                            step=step,
                            random_seed=i,
                            progressbar=False,
                            compute_convergence_checks=False,
                        )
                else:
                    fresh.sample(**RUN, random_seed=i)
            times[label].append((time.perf_counter() - t) / REPLICATES)
    before, after = (float(np.median(times[k])) for k in times)
    print(
        f"{name}: pm.sample {before:.2f} s/replicate, FreshNUTS {after:.2f} s/replicate, "
        f"{before / after:.1f}x (medians of {ROUNDS} rounds of {REPLICATES})",
        flush=True,
    )
