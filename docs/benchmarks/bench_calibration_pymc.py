"""Per-replicate cost of ``calibration_study``'s PyMC path: ``pm.sample`` against ``FreshNUTS``.

Before issue 28's fix a study on PyMC's NUTS called ``pm.sample(step=step)`` per
replicate with one prebuilt step; ``pm.sample`` compiles its initial-point and trace
helpers again at every call. Now the study runs a ``FreshNUTS`` (everything compiled
once, the step's fresh state restored before each chain). Both are timed here on the
models of ``tests/mcmc/test_sbc_manifolds.py`` (SPD(3), Kendall(6)), each replicate a
new release (``pm.set_data``), 2 chains x (100 tuning + 100 draws), interleaved
rounds so that a change of load hits both; compilation of the step is outside the
times. Then the S² SBC of ``tests/laws/test_inference.py`` (``sbc_ranks``, now on a
``FreshNUTS``) against the ``pm.sample`` loop it replaced (kept here as
``_pm_sample_ranks``), 10 replicates each, compilation included, ranks compared. Run:
``PYTHONPATH=$PWD .venv/bin/python docs/benchmarks/bench_calibration_pymc.py``.
"""

import logging
import time
import warnings

import numpy as np
import pymc as pm

import pymc_manidp as pmd
from pymc_manidp.laws.exact import sample_laplace
from pymc_manidp.laws.inference import noise_aware_data
from pymc_manidp.mcmc.sampling import FreshNUTS, strict_floats
from tests.laws.test_inference import S2, sbc_ranks
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


def _pm_sample_ranks(replicates, seed=11, sigma=0.3, draws=300, thin=3, tune=200):
    """``sbc_ranks(0.3, replicates, seed)`` as it was before issue 28: pm.sample a replicate."""
    ranks = []
    with strict_floats():
        with pm.Model() as model:
            released = pm.Data("released", np.array([0.0, 0.0, 1.0]))
            eta = pmd.ManifoldUniform("mean", S2)
            pmd.ManifoldLaplace("release", S2, eta, sigma, observed=released)
            step = pm.NUTS(target_accept=0.95)
        for i in range(replicates):
            rng = np.random.default_rng([seed, i])
            g = rng.standard_normal(3)
            truth = g / np.linalg.norm(g)
            release = sample_laplace(S2, truth, sigma, 1, rng).points[0]
            pm.set_data({"released": release}, model=model)
            with model:
                idata = pm.sample(
                    draws,
                    tune=tune,
                    chains=1,
                    cores=1,
                    step=step,
                    initvals={"mean": release},
                    random_seed=int(rng.integers(2**31)),
                    progressbar=False,
                    compute_convergence_checks=False,
                )
            z = idata.posterior["mean"].values[0, thin - 1 :: thin, 2]
            ranks.append(int(np.sum(z < truth[2])))
    return np.array(ranks)


t = time.perf_counter()
before = _pm_sample_ranks(10)
t_before = time.perf_counter() - t
t = time.perf_counter()
after = sbc_ranks(0.3, 10, seed=11)[0]
t_after = time.perf_counter() - t
print(
    f"S2 sbc_ranks, 10 replicates: pm.sample loop {t_before:.1f} s, FreshNUTS {t_after:.1f} s, "
    f"{t_before / t_after:.1f}x; same ranks: {np.array_equal(before, after)} {after.tolist()}"
)
