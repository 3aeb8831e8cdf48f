"""Mechanism objects: scales, logp, the diagnostics gate, bad input, the sampled law."""

from __future__ import annotations

import json

import numpy as np
import pytensor
import pytensor.tensor as pt
import pytest

import pymc_manidp as pmd
from pymc_manidp import mcmc
from pymc_manidp.laws.distributions import kng_logp, laplace_logp
from pymc_manidp.mechanisms.laplace import spd_laplace_max_sigma
from tests.radial import mcmc_ks, radial_cdf

S2 = pmd.Sphere(dim=2)
NORTH = np.array([0.0, 0.0, 1.0])
R8 = np.pi / 8


def _cap(n, seed=0, r=R8):
    """The 2021 supplement's sphere data: polar angle uniform on [0, r]."""
    rng = np.random.default_rng(seed)
    th, ph = rng.uniform(0, r, n), rng.uniform(0, 2 * np.pi, n)
    return np.stack([np.sin(th) * np.cos(ph), np.sin(th) * np.sin(ph), np.cos(th)], -1)


def test_scales_follow_the_rate_rule():
    n, h = 100, np.pi / 4
    lap = pmd.LaplaceMechanism(S2, epsilon=0.5, center=NORTH, radius=R8, grad_tol=0.0)
    lap_r = pmd.LaplaceMechanism(
        S2, epsilon=0.5, center=NORTH, radius=R8, restrict=True, grad_tol=0.0
    )
    kng = pmd.KNGMechanism(S2, epsilon=0.5, center=NORTH, radius=R8)
    delta_l = 2 * R8 * (2 - h) / (n * h)
    assert lap.sensitivity(n) == pytest.approx(delta_l)
    assert lap.sigma(n) == pytest.approx(delta_l / 0.5)  # whole sphere: Delta/eps
    assert lap_r.sigma(n) == pytest.approx(2 * delta_l / 0.5)  # restricted: 2 Delta/eps
    assert kng.sigma(n) == pytest.approx(2 * (2 * R8 * (2 - h) / n) / 0.5)
    # the footpoint tolerance widens the Laplace sensitivity by 2 grad_tol / H
    lap_tol = pmd.LaplaceMechanism(S2, epsilon=0.5, center=NORTH, radius=R8, grad_tol=1e-6)
    assert lap_tol.sensitivity(n) == pytest.approx(delta_l + 2e-6 / h)


def test_unrestricted_spd_laplace_must_be_normalizable():
    assert spd_laplace_max_sigma(2) == pytest.approx(np.sqrt(2))
    P = pmd.SPD(k=3)
    mech = pmd.LaplaceMechanism(P, epsilon=0.01, center=np.eye(3), radius=2.0)
    with pytest.raises(ValueError, match="not normalizable"):
        mech.sigma(10)
    ok = pmd.LaplaceMechanism(P, epsilon=0.01, center=np.eye(3), radius=2.0, restrict=True)
    assert ok.sigma(10) > spd_laplace_max_sigma(3)


@pytest.mark.parametrize("which", ["laplace", "kng"])
def test_numpy_logp_agrees_with_the_pytensor_density(which):
    data = _cap(40)
    rng = np.random.default_rng(1)
    x = S2.exp_coords(NORTH, rng.normal(size=(10, 2)) * 0.1)
    v = pt.vector("v")
    if which == "laplace":
        mech = pmd.LaplaceMechanism(S2, epsilon=1.0, center=NORTH, radius=R8)
        _, eta = mech.footpoint(data)
        graph = laplace_logp(S2, v, eta, mech.sigma(40))
    else:
        mech = pmd.KNGMechanism(S2, epsilon=1.0, center=NORTH, radius=R8)
        graph = kng_logp(S2, v, data, mech.sigma(40), None)
    f = pytensor.function([v], graph)
    diff = mech.logp(x, data) - np.array([f(xi) for xi in x])
    np.testing.assert_allclose(diff, diff[0], atol=1e-10)  # equal up to a constant


def test_bad_input_is_rejected_before_sampling():
    data = _cap(30)
    mech = pmd.KNGMechanism(S2, epsilon=1.0, center=NORTH, radius=R8)
    with pytest.raises(ValueError, match="available: exact, nuts, metropolis"):
        mech.release(data, sampler="gibbs")
    with pytest.raises(TypeError, match="settings must be an MCMCSettings"):
        mech.release(data, sampler="nuts", settings={"chains": 1})
    with pytest.raises(ValueError, match="trailing shape"):
        mech.release(np.zeros((30, 2, 2)))  # SPD-shaped data given to a sphere mechanism
    with pytest.raises(pmd.DomainError, match="outside the public ball"):
        mech.release(_cap(30, r=0.6))
    with pytest.raises(TypeError, match="random_seed"):
        mech.release(data, random_seed="seed")
    with pytest.raises(ValueError, match="epsilon must be a finite number > 0"):
        pmd.KNGMechanism(S2, epsilon=0.0, center=NORTH, radius=R8)
    with pytest.raises(ValueError, match=r"r\* ="):
        pmd.LaplaceMechanism(S2, epsilon=1.0, center=NORTH, radius=np.pi / 4)


def test_diagnostics_gate_refuses_a_short_run_and_records_the_opt_out():
    data = _cap(50)
    mech = pmd.KNGMechanism(S2, epsilon=1.0, center=NORTH, radius=R8)
    with pytest.raises(pmd.DiagnosticsError, match=r"nothing is released.*ESS"):
        mech.release(
            data, sampler="nuts", settings=pmd.MCMCSettings(draws=20, tune=20), random_seed=3
        )
    rel = mech.release(
        data,
        sampler="nuts",
        settings=pmd.MCMCSettings(draws=20, tune=20),
        random_seed=3,
        skip_diagnostics=True,
    )
    # published: only the fact of the opt-out; the failed checks (R-hat, ESS: numbers
    # that depend on the data) stay with the curator
    assert rel.opt_outs == ("skip_diagnostics",)
    assert rel.delta is None and rel.sampler == "nuts" and rel.seed_policy == "fixed seed"
    assert "diagnostics" not in rel.public() and "sampler_info" not in rel.public()
    assert rel.public()["opt_outs"] == ["skip_diagnostics"]
    assert not any(ch.isdigit() for ch in json.dumps(rel.public()["opt_outs"]))
    assert any("ESS" in f for f in rel.sampler_info["failed_checks"])
    # the release records which NUTS implementation drew it
    assert rel.sampler_info["backend"] == mcmc.nuts_backend()


def test_mcmc_refuses_a_run_over_its_time_budget_before_compiling(monkeypatch):
    # a budget of 1 ms: any NUTS run over 50 points is "hopeless"; nothing is compiled
    monkeypatch.setenv(mcmc.MAX_SECONDS_ENV, "0.001")
    mech = pmd.KNGMechanism(S2, epsilon=1.0, center=NORTH, radius=R8)
    with pytest.raises(ValueError, match=r"sampler='exact'"):
        mech.release(_cap(50), sampler="nuts", random_seed=3)
    assert len(mech.mcmc_cache) == 0
    monkeypatch.setenv(mcmc.MAX_SECONDS_ENV, "600")
    assert mcmc.check_mcmc_budget(S2, 50) < 600  # the same run within the default budget


def _distances(model, seed, draws=2000):
    """Distances to the chart origin ``(chain, draw)`` from the mechanism's polar model."""
    from pymc_manidp.privacy.diagnostics import check_run

    idata = mcmc.sample(model, "nuts", draws=draws, tune=1000, chains=2, random_seed=seed)
    assert int(idata.sample_stats["diverging"].sum()) == 0  # the polar model: none
    return np.asarray(idata.posterior["distance"].values), check_run(idata)


def test_laplace_mechanism_model_samples_the_exact_radial_law():
    # a large epsilon-free sigma so the volume factor matters: n = 10, eps = 0.2
    data = _cap(10)
    mech = pmd.LaplaceMechanism(S2, epsilon=0.2, center=NORTH, radius=R8)
    sigma = mech.sigma(10)
    d, rep = _distances(mech.model(data), seed=4)
    assert rep.passed, rep.failures
    stat, pvalue, ess = mcmc_ks(d, radial_cdf(S2, sigma, np.pi))
    assert pvalue > 0.01, (stat, pvalue, ess)  # alpha = 0.01, n = ESS >= 400


# slow tier: compiling and sampling NUTS on SPD(2) took 56 CPU-s on a clean clone
# (2026-11-28, the second costliest default-tier test)
@pytest.mark.slow
def test_kng_mechanism_with_identical_data_samples_the_laplace_law():
    P = pmd.SPD(k=2)
    p = np.diag([1.0, 2.0])
    # n = 5, eps = 20: sigma = 0.06 (as n = 100 at eps = 1), the law well inside the
    # ball; few records keep each gradient cheap (n eigendecompositions). (At sigma near
    # the SPD normalizability edge, e.g. 0.48, NUTS diverges in the heavy tail.)
    mech = pmd.KNGMechanism(P, epsilon=20.0, center=p, radius=1.5)
    data = np.broadcast_to(p, (5, 2, 2)).copy()
    sigma = mech.sigma(5)
    d, rep = _distances(mech.model(data), seed=5, draws=1000)
    assert rep.passed, rep.failures
    stat, pvalue, ess = mcmc_ks(d, radial_cdf(P, sigma, 40 * sigma))
    assert pvalue > 0.01, (stat, pvalue, ess)


# --- hardening (issue 15) ----------------------------------------------------------------------
@pytest.mark.parametrize("bad", [None, "sphere", pmd.Sphere, 3])
@pytest.mark.parametrize("cls", [pmd.LaplaceMechanism, pmd.KNGMechanism])
def test_manifold_must_be_an_instance(cls, bad):
    with pytest.raises(TypeError, match="manifold must be a manifold instance"):
        cls(bad, epsilon=1.0, center=NORTH, radius=R8)


def test_options_must_be_real_bools_and_numbers():
    with pytest.raises(TypeError, match="restrict must be True or False"):
        pmd.LaplaceMechanism(S2, epsilon=1.0, center=NORTH, radius=R8, restrict="no")
    with pytest.raises(TypeError, match="grad_tol must be a real number"):
        pmd.LaplaceMechanism(S2, epsilon=1.0, center=NORTH, radius=R8, grad_tol=True)
    with pytest.raises(TypeError, match="epsilon must be a real number"):
        pmd.KNGMechanism(S2, epsilon=True, center=NORTH, radius=R8)
    mech = pmd.KNGMechanism(S2, epsilon=1.0, center=NORTH, radius=R8)
    data = _cap(20)
    with pytest.raises(TypeError, match="clip must be True or False"):
        mech.release(data, clip="no")
    with pytest.raises(TypeError, match="clip must be True or False"):
        mech.sample(data, 2, clip="no")
    with pytest.raises(TypeError, match="skip_diagnostics must be True or False"):
        mech.release(data, skip_diagnostics="yes")
    assert pmd.LaplaceMechanism(S2, epsilon=1.0, center=NORTH, radius=R8, grad_tol=0).grad_tol == 0


def test_a_negative_seed_names_random_seed():
    mech = pmd.KNGMechanism(S2, epsilon=1.0, center=NORTH, radius=R8)
    with pytest.raises(ValueError, match="random_seed must be a non-negative integer"):
        mech.release(_cap(20), random_seed=-1)


@pytest.mark.parametrize(
    "make",
    [
        lambda eps: pmd.KNGMechanism(pmd.SPD(k=2), epsilon=eps, center=np.eye(2), radius=1.0),
        lambda eps: pmd.LaplaceMechanism(
            pmd.SPD(k=2), epsilon=eps, center=np.eye(2), radius=1.0, restrict=True
        ),
        lambda eps: pmd.LaplaceMechanism(S2, epsilon=eps, center=NORTH, radius=R8),
        lambda eps: pmd.KNGMechanism(S2, epsilon=eps, center=NORTH, radius=R8),
    ],
)
def test_epsilon_beyond_floating_point_is_refused_with_the_cause(make):
    """epsilon = 1e308 made sigma subnormal (ZeroDivisionError in the SPD envelope);
    5e-324 made it inf ("sigma must be ... got inf")."""
    P = pmd.SPD(k=2)
    data = P.exp_coords(np.eye(2), np.random.default_rng(0).normal(size=(10, 3)) * 0.1)
    data = data if make(1.0).manifold == P else _cap(10)
    with pytest.raises(ValueError, match=r"epsilon .*too large for floating point"):
        make(1e308).release(data, random_seed=0)
    with pytest.raises(ValueError, match="epsilon is too small for floating point"):
        make(5e-324).release(data, random_seed=0)


def test_the_spd_envelope_refuses_a_subnormal_sigma():
    """The SPD envelope's sigma 1/(1/sigma - beta) divided by zero for a subnormal sigma;
    now sigma (and that rate, a guard) must be normal floats, and the smallest normal
    sigma still samples."""
    from pymc_manidp.laws import exact

    with pytest.raises(ValueError, match="too large for floating point"):
        exact.laplace_coords(pmd.SPD(k=2), 1e-310, 1, rng=0, t_max=1.0)
    tiny = np.finfo(float).tiny
    c = exact.laplace_coords(pmd.SPD(k=2), tiny, 3, rng=0, t_max=1.0)
    assert np.all(np.isfinite(c)) and np.all(np.linalg.norm(c, axis=-1) < 1e-300)


def test_kendall_configurations_scaled_by_1e200_keep_their_shape():
    K = pmd.KendallShape(k_landmarks=4)
    x = np.array([[0, 0], [1, 0], [1, 1], [0, 1.0]])
    np.testing.assert_allclose(K.validate(1e200 * x), K.validate(x), atol=1e-15)


def test_frechet_mean_that_overflows_is_not_converged():
    E = pmd.Euclidean(dim=2)
    data = np.random.default_rng(0).normal(size=(10, 2)) * 1e200
    with pytest.warns(pmd.stats.frechet.ConvergenceWarning, match="too large for floating"):
        res = pmd.frechet_mean(E, data)
    assert not res.converged


def test_only_one_place_builds_a_release():
    """Release(...) is constructed in privacy.release.build_release only, called by
    Mechanism._record alone (every mechanism, the baselines too): fixes to the record
    land once."""
    import inspect
    import pkgutil

    import pymc_manidp.mechanisms as mechanisms

    calls = {}
    for info in pkgutil.iter_modules(mechanisms.__path__):
        mod = __import__(f"pymc_manidp.mechanisms.{info.name}", fromlist=["_"])
        src = inspect.getsource(mod)
        assert "Release(" not in src.replace("build_release(", ""), mod
        assert "dataclasses.replace" not in src, mod
        calls[info.name] = src.count("build_release(")
        assert "._exact_draws" not in src
    assert calls["base"] == 1 and sum(calls.values()) == 1, calls
    for name in ("EuclideanLaplace", "ProjectedLaplace", "LandmarkLaplace", "KNGMechanism"):
        assert issubclass(getattr(mechanisms, name), mechanisms.Mechanism)
