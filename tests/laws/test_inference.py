"""Noise-aware inference: the posterior of the footpoint behind a Laplace release.

Oracles: with the uniform prior on S^2 the posterior of the footpoint is
``ManifoldLaplace(release, sigma)`` (docs/architecture.md, math facts), whose distance law is exact
(``tests.radial``); and simulation-based calibration (Talts et al. 2018): the rank of
the truth among posterior draws is uniform. Each statistical test states its alpha and
sample size and rejects a deliberately wrong sigma (halved).
"""

from __future__ import annotations

import warnings

import numpy as np
import pymc as pm
import pytest

import pymc_manidp as pmd
from pymc_manidp.laws.exact import sample_laplace
from pymc_manidp.mcmc.sampling import FreshNUTS
from tests.radial import mcmc_ks, radial_cdf
from tests.sbc import needs_nutpie, nutpie_sbc

S2 = pmd.Sphere(dim=2)
ALPHA = 0.01
warnings.filterwarnings("ignore", message="Numba will use object mode")


def _published(value, sigma):
    return {"value": value, "mechanism": "manifold Laplace", "sigma": sigma, "restricted": False}


def _posterior(model, draws, tune, chains, seed):
    with model:
        return pm.sample(
            draws,
            tune=tune,
            chains=chains,
            random_seed=seed,
            progressbar=False,
            compute_convergence_checks=False,
        )


def test_uniform_prior_posterior_is_the_laplace_at_the_release():
    # NUTS 2 chains x 2,000 draws; KS of the distance to the release, p-value for
    # n = ESS (>= 400), alpha = 0.01; the law with sigma/2 is rejected by the same test
    sigma = 0.3
    x = S2.validate(np.array([0.48, 0.6, 0.64]))
    idata = _posterior(pmd.noise_aware_model(_published(x, sigma), S2), 2000, 1000, 2, 1)
    assert int(idata.sample_stats["diverging"].sum()) == 0
    d = S2.dist(x, idata.posterior["mean"].values)
    stat, pvalue, ess = mcmc_ks(d, radial_cdf(S2, sigma, np.pi))
    assert ess >= 400 and pvalue > ALPHA, (stat, pvalue, ess)
    _, wrong, _ = mcmc_ks(d, radial_cdf(S2, sigma / 2, np.pi))
    assert wrong < ALPHA


def test_refuses_kng_and_restricted_releases_without_their_ball():
    # restricted releases with their ball: tests/laws/test_noise_aware.py
    rel = _published(np.array([0.0, 0.0, 1.0]), 0.1)
    with pytest.raises(ValueError, match="KNG"):
        pmd.noise_aware_model({**rel, "mechanism": "KNG"}, S2)
    with pytest.raises(ValueError, match="restricted release's likelihood needs its public ball"):
        pmd.noise_aware_model({**rel, "restricted": True}, S2)


def test_user_prior_and_dims():
    rel = _published(np.array([0.0, 0.0, 1.0]), 0.2)
    m = pmd.noise_aware_model(
        rel, S2, prior=lambda n, **kw: pmd.ManifoldLaplace(n, S2, [0.0, 1.0, 0.0], 1.0, **kw)
    )
    assert m.named_vars_to_dims["mean"] == ("ambient",)
    assert np.isfinite(m.compile_logp()(m.initial_point()))


def sbc_ranks(sigma_model, replicates, seed, sigma=0.3, draws=300, thin=3, tune=200, only=None):
    """Ranks of the truth's z-coordinate among ``draws/thin`` posterior draws.

    The noise-aware model of :func:`pmd.noise_aware_model` (uniform prior, Laplace
    likelihood) with the release a ``pm.Data`` and the prior in its default global
    chart, sampled by one :class:`~pymc_manidp.mcmc.FreshNUTS`: compiled once, each
    replicate's chain adapting from scratch (draw for draw ``pm.sample`` with a fresh
    ``pm.NUTS``, as this function ran until issue 28 at about 1 s more a replicate:
    the ranks are the same).

    Deterministic (issue 28, item 6): the same ranks in any process, cold or warm.

    - PyTensor's numba fastmath flags (``reassoc``, ``contract``) made a freshly
      compiled log-density gradient differ in the last bit from the same function
      loaded from PyTensor's on-disk cache (measured: gradients ``...6e2p-1`` vs
      ``...6e3p-1``), and NUTS trajectories amplify a last bit into another chain: a
      fresh clone (cold cache) got other ranks than a warm rerun. The sampler is
      compiled with fastmath off (strict IEEE; the cache key carries the flag).
    - Replicate ``i`` is seeded by ``(seed, i)`` alone, not by a stream that earlier
      replicates advanced, so one replicate can be rerun on its own (``only=i``) and
      must give the same rank: the step is put back into its fresh state before
      every chain and carries nothing across replicates.
    - The sampler is PyMC's NUTS, one chain, sequential: no thread timing.

    ``thin``: 100 draws 3 apart. The measured bulk ESS of the z-coordinate was 170-255
    per 400 draws (lag-1 autocorrelation 0.06-0.34), so draws 3 apart are close to
    independent; correlated draws over-disperse the rank histogram (Talts et al. 2018),
    which may be what the failing run of the earlier 200 draws thinned by 2 showed (both
    end bins high, [25, ..., 35]; not reproduced since). With these settings, seed 11:
    counts [17, 17, 20, 23, 21, 20, 23, 18, 19, 22], chi-square p = 0.99 (2026-11-25,
    before the uniform prior's chart took a chi(D + 8) auxiliary radius; the test passes
    with it, other ranks).
    """
    ranks = []
    with pm.Model() as model:
        released = pm.Data("released", np.array([0.0, 0.0, 1.0]))
        eta = pmd.ManifoldUniform("mean", S2)
        pmd.ManifoldLaplace("release", S2, eta, sigma_model, observed=released)
    # compiled once (strict floats); start at the release (the posterior's mode): from
    # the fixed generic start, chains that had to cross the sphere had not always
    # arrived after 200 tuning steps, which piled ranks up at one end
    nuts = FreshNUTS(model, initvals={"mean": released}, target_accept=0.95)
    for i in range(replicates) if only is None else [only]:
        rng = np.random.default_rng([seed, i])
        g = rng.standard_normal(3)
        truth = g / np.linalg.norm(g)  # the uniform prior
        release = sample_laplace(S2, truth, sigma, 1, rng).points[0]
        pm.set_data({"released": release}, model=model)
        chains, _ = nuts.sample(
            draws=draws, tune=tune, chains=1, random_seed=int(rng.integers(2**31))
        )
        z = chains["mean"][0, thin - 1 :: thin, 2]
        ranks.append(int(np.sum(z < truth[2])))
    return np.array(ranks), draws // thin


def test_sbc_ranks_are_deterministic():
    # a short SBC (3 replicates, 40 draws); replicate 2 rerun alone, with a new model
    # and a new step, gives the rank it had after replicates 0 and 1: the reused step
    # carries no state and the seeds do not depend on the order. The check across
    # processes, cold and warm PyTensor caches, is
    # test_sbc_ranks_are_the_same_in_fresh_processes (slow).
    kw = {"draws": 40, "tune": 40, "thin": 2}
    first, n = sbc_ranks(0.3, 3, seed=11, **kw)
    alone, _ = sbc_ranks(0.3, 3, seed=11, only=2, **kw)
    assert alone.tolist() == [first[2]] and n == 20
    assert np.all((first >= 0) & (first <= n))


# one seeded SBC study in a fresh interpreter; prints the SHA-256 of its ranks (int64,
# little-endian) and the ranks. Variants that break the promise: "unseeded" seeds from
# the clock, "fastmath" compiles with numba's fastmath flags (PyTensor's default)
_SBC_SCRIPT = """
import contextlib, hashlib, sys, time, warnings
warnings.simplefilter("ignore")
sys.path.insert(0, {root!r})
variant = sys.argv[1]
if variant == "fastmath":
    import pymc_manidp.mcmc.sampling as sampling
    sampling.strict_floats = contextlib.nullcontext
from tests.laws.test_inference import sbc_ranks
seed = time.time_ns() % 2**31 if variant == "unseeded" else 11
ranks = sbc_ranks(0.3, 3, seed=seed, draws=200, tune=200, thin=2)[0]
print(hashlib.sha256(ranks.astype("<i8").tobytes()).hexdigest(), ranks.tolist())
"""


def ranks_in_fresh_process(compiledir, variant="seeded"):
    """``(hash, ranks)`` of the script's study in a new interpreter using ``compiledir``."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTENSOR_FLAGS": f"compiledir={compiledir}"}
    env["PYTHONPATH"] = os.pathsep.join([root, env.get("PYTHONPATH", "")])
    out = subprocess.run(
        [sys.executable, "-c", _SBC_SCRIPT.format(root=root), variant],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    digest, ranks = out.stdout.strip().splitlines()[-1].split(" ", 1)
    return digest, ranks


@pytest.mark.slow
def test_sbc_ranks_are_the_same_in_fresh_processes(tmp_path):
    # two fresh interpreters on one new PyTensor compile directory: the first compiles
    # cold, the second loads the compiled sampler from it; their ranks (3 replicates of
    # 200 draws: 40 draws were too few for a last bit to change a rank) must hash the
    # same, and as in this process. With numba's fastmath on, a cold and a warm process
    # drew other ranks (issue 28, item 6; measured with these settings: [32, 46] cold,
    # [40, 62] warm). The check can fail: a third process that leaves fastmath on gives
    # another hash, deterministically (its log-density differs from the strict one in
    # the last bits; measured 2026-11-25: [40, 62, 16] against [39, 57, 19], cold and
    # warm alike; a process seeded from the clock differs too, [76, 1, 44])
    cold = ranks_in_fresh_process(tmp_path / "pytensor")
    warm = ranks_in_fresh_process(tmp_path / "pytensor")
    assert cold == warm
    in_process = sbc_ranks(0.3, 3, seed=11, draws=200, tune=200, thin=2)[0]
    assert cold[1] == str(in_process.tolist())
    assert ranks_in_fresh_process(tmp_path / "pytensor", "fastmath")[0] != cold[0]


def _dump_ranks(ranks, wrong):
    """Append both studies' ranks to ``$MANIDP_SBC_RANKS`` (a JSON line), if it is set.

    ``docs/benchmarks/sbc_repeat.py`` runs this test in fresh processes, alone and
    under xdist, and compares the lines.
    """
    import json
    import os

    path = os.environ.get("MANIDP_SBC_RANKS")
    if path:
        with open(path, "a") as f:
            f.write(json.dumps({"ranks": ranks.tolist(), "wrong": wrong.tolist()}) + "\n")


@pytest.mark.slow
@needs_nutpie
def test_simulation_based_calibration():
    """Simulation-based calibration on nutpie (``tests/sbc.py``) of the noise-aware
    model (uniform prior, whose ``pm.draw`` is ``S2.sample_uniform``: normalized
    Gaussians, as ``sbc_ranks`` draws; Laplace likelihood, releases at sigma = 0.3):
    200 replicates, ranks of the truth's z-coordinate among L = 50 draws (2 chains x
    100 after 100 tuning, thinned by 4), 10 bins, chi-square at alpha = 0.01, seed
    fixed. The model with sigma/2 (releases still drawn at 0.3, 100 replicates: its
    posterior is half as wide, the ranks pile up at the ends) is caught at the same
    alpha. PyMC's NUTS runs the same check in ``sbc_ranks`` (the determinism tests
    above) and in ``tests/mcmc/test_sbc_manifolds.py``."""
    z = lambda p: p[:, 2]  # noqa: E731
    north = np.array([0.0, 0.0, 1.0])
    p, res = nutpie_sbc(pmd.noise_aware_model(_published(north, 0.3), S2), z, 0.3, 200, seed=11)
    wrong_model = pmd.noise_aware_model(_published(north, 0.15), S2)
    p_wrong, wrong = nutpie_sbc(wrong_model, z, 0.15, 100, seed=12, release_factor=2.0)
    _dump_ranks(res.ranks[:, 0], wrong.ranks[:, 0])
    assert p > ALPHA, res.histogram.T
    assert p_wrong < ALPHA, wrong.histogram.T
