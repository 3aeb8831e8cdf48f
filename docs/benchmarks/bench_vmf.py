"""von Mises–Fisher: draws per second against SciPy, and NUTS ESS/s on a hierarchical model.

Issue 40 (must hold). Draws: ``pmd.laws.sample_vmf`` (Wood 1994, vectorized NumPy; the
``rng_fn`` of ``pmd.VonMisesFisher``), ``pm.draw`` of ``VonMisesFisher.dist`` through a
compiled PyTensor function (the same sampler behind PyMC's graph), and
``scipy.stats.vonmises_fisher.rvs``, for p = 3 and 100 (``Sphere(dim=p-1)``) and
κ = 1, 100, 1e4: 20,000 draws a call, the three interleaved (a change of load hits all),
median of 5 rounds, wall and CPU seconds. NUTS: the hierarchical model of
``tests/laws/test_vmf_sbc.py`` (μ ~ vMF(north, 1), κ ~ Gamma(4, 0.25), 6 group
directions θ_g ~ vMF(μ, κ), 5 observations each at κ_obs = 30) on one data set drawn
from the model (seed 0), PyMC's NUTS and nutpie at their defaults (1,000 tuning, 1,000
draws, 2 chains, one core), the smallest bulk ESS over the free variables' coordinates
divided by the sampling time PyMC reports. Prints the load average before and after.

Run: ``PYTHONPATH=$PWD .venv/bin/python docs/benchmarks/bench_vmf.py``.
"""

import os
import time
import warnings

import numpy as np
import pymc as pm
import pytensor
from scipy import stats

import pymc_manidp as pmd
from pymc_manidp.laws.directional import sample_vmf

warnings.filterwarnings("ignore")
N = 20_000
ROUNDS = 5
print(f"load average before: {os.getloadavg()}")
print(f"{'p':>4} {'kappa':>7} | {'draws/s (wall; CPU)':>28} for sample_vmf, pm.draw, SciPy")
for p in (3, 100):
    mu = np.zeros(p)
    mu[-1] = 1.0
    for kappa in (1.0, 100.0, 1e4):
        x = pmd.VonMisesFisher.dist(mu, kappa, size=N)
        compiled = pytensor.function([], x)  # pm.draw's graph, compiled once
        compiled()
        scipy_law = stats.vonmises_fisher(mu, kappa)
        rng = np.random.default_rng(0)
        runs = {
            "sample_vmf": lambda: sample_vmf(mu, kappa, size=(N,), rng=rng),  # noqa: B023
            "pm.draw": compiled,
            "scipy": lambda: scipy_law.rvs(N, random_state=rng),  # noqa: B023
        }
        wall = {k: [] for k in runs}
        cpu = {k: [] for k in runs}
        for _ in range(ROUNDS):
            for k, f in runs.items():
                t, c = time.perf_counter(), time.process_time()
                f()
                wall[k].append(time.perf_counter() - t)
                cpu[k].append(time.process_time() - c)
        cells = [f"{N / np.median(wall[k]):>10,.0f} ({N / np.median(cpu[k]):,.0f})" for k in runs]
        print(f"{p:>4} {kappa:>7g} | " + " | ".join(cells))


def hierarchical_model(y_obs):
    group = np.repeat(np.arange(6), 5)
    with pm.Model() as model:
        mu = pmd.VonMisesFisher("mu", [0.0, 0.0, 1.0], 1.0)
        kappa = pm.Gamma("kappa", 4.0, 0.25)
        theta = pmd.VonMisesFisher("theta", mu, kappa, shape=(6, 3))
        pmd.VonMisesFisher("y", theta[group], 30.0, observed=y_obs)
    return model


import arviz as az  # noqa: E402

y0 = pm.draw(hierarchical_model(np.tile([0.0, 0.0, 1.0], (30, 1)))["y"], random_seed=0)
model = hierarchical_model(y0)
for sampler in ("pymc", "nutpie"):
    with model:
        idata = pm.sample(nuts_sampler=sampler, chains=2, cores=1, random_seed=1, progressbar=False)
    seconds = float(idata.posterior.attrs.get("sampling_time", np.nan))
    ess = az.ess(idata, var_names=["mu", "kappa", "theta"])
    min_ess = min(float(ess[v].min()) for v in ("mu", "kappa", "theta"))
    div = int(idata.sample_stats["diverging"].sum())
    print(
        f"NUTS {sampler}: sampling {seconds:.1f} s, min bulk ESS {min_ess:.0f}, "
        f"ESS/s {min_ess / seconds:.1f}, divergences {div}"
    )
print(f"load average after: {os.getloadavg()}")
