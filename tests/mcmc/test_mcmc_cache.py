"""MCMC releases reuse a compiled model per mechanism and data size, never old data.

A mechanism compiles its polar model on its first MCMC release of ``n`` points with a
sampler (``mech.mcmc_cache``) and reuses it for later data sets of that size, after
replacing every ``pm.Data`` (rate, chart, footpoint or data). The tests check that

- the model reads the data only through its ``pm.Data`` (no constant of the first
  data set stays in the graph: the log-density after ``pm.set_data`` equals a fresh
  model's);
- a second release through the cache samples the second data set's law: the distance
  of its draws to the *second* footpoint, computed here from the points, passes the KS
  test against the Laplace's exact radial law, and fails it against the first
  footpoint (so the test fails if the old data were sampled). With nutpie (skipped
  when it is absent) and with PyMC's NUTS (nutpie hidden);
- the cache is per mechanism object and keyed on ``(n, sampler, backend)``; it
  refuses a run that does not replace all the data; copies of it are empty.
"""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest

import pymc_manidp as pmd
from pymc_manidp import mcmc
from pymc_manidp.mcmc import sampling
from tests.radial import mcmc_ks, radial_cdf

ALPHA = 0.01
S2 = pmd.Sphere(dim=2)
NORTH = np.array([0.0, 0.0, 1.0])
R8 = np.pi / 8
TILTED = np.array([np.sin(0.2), 0.0, np.cos(0.2)])  # 0.2 from the north pole


def _cap(n, pole, spread, seed):
    """Points at geodesic distance uniform on ``[0, spread]`` from ``pole``."""
    rng = np.random.default_rng(seed)
    coords = rng.uniform(0, spread, n)[:, None] * np.stack(
        [np.cos(a := rng.uniform(0, 2 * np.pi, n)), np.sin(a)], -1
    )
    return S2.exp_coords(pole, coords)


D1 = _cap(50, NORTH, 0.15, seed=0)
D2 = _cap(50, TILTED, 0.15, seed=1)  # inside B_{pi/8}(north): 0.2 + 0.15 < 0.39


def _inputs(mech, data, fused=False):
    """The ``pm.Data`` values of ``mech``'s polar model (or its release's fused one)
    for ``data``."""
    mode, inputs = mech.mcmc_inputs(mech.domain.check(data))
    if fused:
        law = "laplace" if isinstance(mech, pmd.LaplaceMechanism) else "kng"
        return mcmc.fused_data(S2, mode, mech.sigma(len(data)), law, inputs)
    return mcmc.polar_data(S2, mode, mech.sigma(len(data)), inputs)


def _release_model(mech, data):
    """The model ``mech``'s NUTS release of ``data`` samples (fused on S^2)."""
    mode, inputs = mech.mcmc_inputs(mech.domain.check(data))
    return mech._release_model(mode, mech.sigma(len(data)), inputs)


@pytest.mark.parametrize("cls", [pmd.LaplaceMechanism, pmd.KNGMechanism])
def test_the_fused_release_model_reads_the_data_only_through_pm_data(cls):
    """The release's fused model, given a second data set's values, is that data set's
    model: same log-density and gradient at random points (and not the first's)."""
    import pymc as pm

    mech = cls(S2, epsilon=1.0, center=NORTH, radius=R8)
    old, fresh, first = (_release_model(mech, d) for d in (D1, D2, D1))
    assert mcmc.is_fused(old)
    pm.set_data(_inputs(mech, D2, fused=True), model=old)
    assert sorted(v.name for v in old.data_vars) == sorted(v.name for v in fresh.data_vars)
    fns = [m.compile_logp(mode="FAST_COMPILE") for m in (old, fresh, first)]
    dfns = [m.compile_dlogp(mode="FAST_COMPILE") for m in (old, fresh, first)]
    rng = np.random.default_rng(2)
    moved = 0
    for _ in range(5):
        point = {"release_polar": rng.normal(size=3)}
        lp_old, lp_new, lp_first = (f(point) for f in fns)
        g_old, g_new, _ = (f(point) for f in dfns)
        np.testing.assert_allclose(lp_old, lp_new, rtol=1e-12)
        np.testing.assert_allclose(g_old, g_new, rtol=1e-12)
        moved += not np.isclose(lp_first, lp_new, rtol=1e-6)
    if cls is pmd.KNGMechanism:
        assert moved == 5  # the two data sets' densities differ: the check can fail
    else:  # the Laplace's density in u is the same at every footpoint on S^2 (radial):
        # the data move its chart, which the release maps draws through
        chart = [{v.name: v.get_value() for v in m.data_vars} for m in (old, first)]
        assert not np.allclose(chart[0]["chart_origin"], chart[1]["chart_origin"])


@pytest.mark.parametrize("cls", [pmd.LaplaceMechanism, pmd.KNGMechanism])
def test_model_reads_the_data_only_through_pm_data(cls):
    import pymc as pm

    mech = cls(S2, epsilon=1.0, center=NORTH, radius=R8)
    old = mech.model(D1)
    fresh = mech.model(D2)
    pm.set_data(_inputs(mech, D2), model=old)
    names = sorted(v.name for v in old.data_vars)
    assert names == sorted(v.name for v in fresh.data_vars)
    first = mech.model(D1)
    logps = [m.compile_logp() for m in (old, fresh, first)]
    points = [
        m.compile_fn(m.replace_rvs_by_values([m["release"]]), inputs=m.value_vars)
        for m in (old, fresh, first)
    ]
    rng = np.random.default_rng(2)
    moved = 0
    for _ in range(5):
        point = {"release_polar__": rng.normal(size=3)}  # (direction, log-radius)
        (lp_old, lp_new, _), (x_old, x_new, x_first) = (
            [f(point) for f in fs] for fs in (logps, points)
        )
        np.testing.assert_allclose(lp_old, lp_new, rtol=1e-10)
        np.testing.assert_allclose(x_old, x_new, atol=1e-12)
        # the first data set's model maps the point elsewhere: the check can fail
        moved += not np.allclose(x_first, x_new, atol=1e-6)
    assert moved == 5  # the two data sets' densities differ: the check can fail


# PyMC's own NUTS compiles its C model afresh (52 s on the loaded 2-core machine against
# nutpie's 10): its cases run in the slow tier, nutpie's in the default tier
@pytest.fixture(params=["nutpie", pytest.param("pymc", marks=pytest.mark.slow)])
def backend(request, monkeypatch):
    if request.param == "nutpie":
        pytest.importorskip("nutpie")
    else:
        monkeypatch.setattr(sampling, "has_nutpie", lambda: False)
    return request.param


def test_second_release_samples_the_second_data_sets_law(backend):
    mech = pmd.LaplaceMechanism(S2, epsilon=1.0, center=NORTH, radius=R8)
    # the first release only fills the cache: a short run, gate skipped
    # chains in this process (cores=1: the same draws, no chain processes to start
    # while the other xdist worker is busy, which made this test 10x slower in the suite)
    inproc = mcmc.MCMCSettings(cores=1)
    mech.release(
        D1,
        sampler="nuts",
        settings=inproc.with_overrides(draws=50, tune=50),
        random_seed=1,
        skip_diagnostics=True,
    )
    compiled = mech.mcmc_cache.find(50, "nuts", backend)
    assert compiled.backend == backend
    rel = mech.release(
        D2,
        sampler="nuts",
        settings=inproc.with_overrides(draws=2000, tune=1000, chains=2),
        random_seed=2,
    )
    assert mech.mcmc_cache.keys() == [(50, "nuts", backend)]
    assert mech.mcmc_cache.find(50, "nuts", backend) is compiled
    assert "constant_data" not in rel.diagnostics.children  # the data are not copied
    x = rel.diagnostics.posterior["release"].values
    cdf = radial_cdf(S2, mech.sigma(50), np.pi)
    (_, foot1), (_, foot2) = mech.footpoint(D1), mech.footpoint(D2)
    stat, pvalue, ess = mcmc_ks(S2.dist(foot2, x), cdf)
    assert ess >= 400 and pvalue > ALPHA, (stat, pvalue, ess)
    _, p_old, _ = mcmc_ks(S2.dist(foot1, x), cdf)
    assert p_old < ALPHA  # the first data set's law is rejected
    assert S2.dist(foot2, rel.value) < S2.dist(foot1, rel.value)


def test_cache_is_per_mechanism_and_keyed_on_n_and_sampler():
    mech = pmd.LaplaceMechanism(S2, epsilon=1.0, center=NORTH, radius=R8)
    other = pmd.LaplaceMechanism(S2, epsilon=1.0, center=NORTH, radius=R8)
    kw = dict(
        sampler="metropolis",
        settings=mcmc.MCMCSettings(draws=30, tune=30, chains=2, cores=1),
        skip_diagnostics=True,
    )
    mech.release(D1, random_seed=1, **kw)
    first = mech.mcmc_cache.find(50, "metropolis", "pymc")
    mech.release(D1[:40], random_seed=2, **kw)
    keys = [(40, "metropolis", "pymc"), (50, "metropolis", "pymc")]
    assert sorted(mech.mcmc_cache.keys()) == keys
    assert mech.mcmc_cache.find(50, "metropolis", "pymc") is first
    assert mech.mcmc_cache.find(50, "nuts", "pymc") is None
    assert len(other.mcmc_cache) == 0
    # the model of n = 40 has its own sigma
    m40 = mech.mcmc_cache.find(40, "metropolis", "pymc")
    assert float(m40.current_data()["scale"]) == pytest.approx(mech.sigma(40))
    assert float(first.current_data()["scale"]) == pytest.approx(mech.sigma(50))
    # the first sampler added under a key is kept
    assert mech.mcmc_cache.add(50, m40) is first
    # a run must replace every pm.Data
    values = _inputs(mech, D2, fused=mcmc.is_fused(first.model))
    with pytest.raises(ValueError, match="missing"):
        first.sample({k: v for k, v in values.items() if k != "scale"})
    with pytest.raises(ValueError, match="unknown"):
        first.sample({**values, "data": D2})
    # copies (and pickles) of a cache are empty
    assert len(copy.deepcopy(mech.mcmc_cache)) == 0
    assert len(pickle.loads(pickle.dumps(mech.mcmc_cache))) == 0


def test_budget_refuses_millions_of_points_and_points_to_the_exact_sampler():
    P2 = pmd.SPD(k=2)
    # within budget: the default release sizes of the tests and benchmarks
    for M in (S2, P2, pmd.SPD(k=3), pmd.KendallShape(k_landmarks=8)):
        assert mcmc.check_mcmc_budget(M, 1000) < mcmc.MCMC_MAX_SECONDS
    with pytest.raises(ValueError, match="sampler='exact'"):
        mcmc.check_mcmc_budget(S2, 5 * 10**6)
    with pytest.raises(ValueError, match="n = 1000000 "):
        mcmc.check_mcmc_budget(P2, 10**6)
    # the estimate grows with the work: fewer draws fit, a larger budget fits
    assert mcmc.check_mcmc_budget(S2, 5 * 10**6, chains=2, tune=100, draws=100) > 0
    assert mcmc.check_mcmc_budget(S2, 5 * 10**6, max_seconds=1e9) > 0
    # the settings value is the one source of the run's length: a shorter run costs less
    short = mcmc.MCMCSettings(chains=2, tune=100, draws=100)
    assert mcmc.check_mcmc_budget(S2, 5 * 10**6, short) == mcmc.check_mcmc_budget(
        S2, 5 * 10**6, chains=2, tune=100, draws=100
    )
    assert mcmc.check_mcmc_budget(S2, 1000) == mcmc.check_mcmc_budget(S2, 1000, mcmc.MCMCSettings())
    # (a release is refused before anything is compiled: tests/mechanisms)


def test_backend_choice_and_record(monkeypatch):
    monkeypatch.setenv(mcmc.BACKEND_ENV, "pymc")
    assert mcmc.nuts_backend() == "pymc"
    assert mcmc.nuts_backend("auto") == ("nutpie" if mcmc.has_nutpie() else "pymc")
    monkeypatch.setenv(mcmc.BACKEND_ENV, "stan")
    with pytest.raises(ValueError, match="NUTS backend"):
        mcmc.nuts_backend()
    monkeypatch.setattr(sampling, "has_nutpie", lambda: False)
    with pytest.raises(ImportError, match="pip install nutpie"):
        mcmc.nuts_backend("nutpie")
    monkeypatch.delenv(mcmc.BACKEND_ENV)
    mech = pmd.LaplaceMechanism(S2, epsilon=1.0, center=NORTH, radius=R8)
    rel = mech.release(
        D1, sampler="nuts", settings=mcmc.MCMCSettings(draws=300, tune=300, cores=1), random_seed=3
    )
    assert rel.diagnostics.posterior.attrs["sampler_backend"] == "pymc-nuts"
    assert rel.diagnostics.attrs["sampler_backend"] == "pymc-nuts"


def test_cores_reaches_pymc_sample_and_is_checked(monkeypatch):
    """``MCMCSettings.cores`` is passed to ``pm.sample`` as given, and left out when None."""
    import pymc as pm

    seen = []
    real = pm.sample

    def spy(*args, **kwargs):
        seen.append(kwargs.get("cores", "absent"))
        # run in this process whatever was asked: the draws do not depend on it
        return real(*args, **{**kwargs, "cores": 1})

    monkeypatch.setattr(pm, "sample", spy)
    mech = pmd.LaplaceMechanism(S2, epsilon=1.0, center=NORTH, radius=R8)
    short = mcmc.MCMCSettings(draws=20, tune=20, chains=2)
    kw = dict(sampler="metropolis", skip_diagnostics=True)
    a = mech.release(D1, settings=short.with_overrides(cores=1), random_seed=4, **kw)
    assert seen == [1]
    with pytest.raises(ValueError, match="cores must be an integer >= 1"):
        mcmc.MCMCSettings(cores=0)
    with pytest.raises(TypeError, match="cores must be an integer"):
        mcmc.MCMCSettings(cores=True)
    with pytest.raises(TypeError, match="cores must be an integer"):
        mcmc.MCMCSettings(cores=1.5)
    b = mech.release(D1, settings=short, random_seed=4, **kw)  # None: PyMC's default
    assert seen == [1, "absent"]
    np.testing.assert_array_equal(a.value, b.value)  # one seed, one release


def test_the_suite_runs_pymc_chains_in_this_process(monkeypatch):
    """``tests/conftest.py`` makes ``pm.sample`` run its chains here unless a test passes
    ``cores``: no chain process is started, even where PyMC's default would start them
    (``cpu_count() // 2`` cores: 1 on a 2-core machine, so a 4-core one is faked here;
    the test fails without that fixture)."""
    import pymc as pm
    from pymc.sampling import mcmc as pymc_mcmc

    def no_processes(*args, **kwargs):
        raise AssertionError("pm.sample started chain processes")

    monkeypatch.setattr(pymc_mcmc, "_mp_sample", no_processes)
    monkeypatch.setattr(pymc_mcmc, "_cpu_count", lambda: 2)
    with pm.Model():
        pm.Normal("x")
        idata = pm.sample(
            draws=5,
            tune=5,
            chains=2,
            step=pm.Metropolis(),
            random_seed=0,
            progressbar=False,
            compute_convergence_checks=False,
        )
    assert idata.posterior.sizes["chain"] == 2
    with pm.Model(), pytest.raises(AssertionError, match="chain processes"):
        pm.Normal("x")
        pm.sample(draws=5, tune=5, chains=2, cores=2, step=pm.Metropolis(), progressbar=False)
