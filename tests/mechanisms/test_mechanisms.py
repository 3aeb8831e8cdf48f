"""Mechanism objects: scales, logp, the diagnostics gate, bad input, the sampled law."""

from __future__ import annotations

import json

import numpy as np
import pytensor
import pytensor.tensor as pt
import pytest

import pymc_manidp as pmd
from pymc_manidp.mechanisms.distributions import kng_logp, laplace_logp
from pymc_manidp.mechanisms.laplace import spd_laplace_max_sigma
from pymc_manidp.samplers import mcmc
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
    assert lap.scale(n) == pytest.approx(delta_l / 0.5)  # whole sphere: Delta/eps
    assert lap_r.scale(n) == pytest.approx(2 * delta_l / 0.5)  # restricted: 2 Delta/eps
    assert kng.scale(n) == pytest.approx(2 * (2 * R8 * (2 - h) / n) / 0.5)
    # the footpoint tolerance widens the Laplace sensitivity by 2 grad_tol / H
    lap_tol = pmd.LaplaceMechanism(S2, epsilon=0.5, center=NORTH, radius=R8, grad_tol=1e-6)
    assert lap_tol.sensitivity(n) == pytest.approx(delta_l + 2e-6 / h)


def test_unrestricted_spd_laplace_must_be_normalizable():
    assert spd_laplace_max_sigma(2) == pytest.approx(np.sqrt(2))
    P = pmd.SPD(k=3)
    mech = pmd.LaplaceMechanism(P, epsilon=0.01, center=np.eye(3), radius=2.0)
    with pytest.raises(ValueError, match="not normalizable"):
        mech.scale(10)
    ok = pmd.LaplaceMechanism(P, epsilon=0.01, center=np.eye(3), radius=2.0, restrict=True)
    assert ok.scale(10) > spd_laplace_max_sigma(3)


@pytest.mark.parametrize("which", ["laplace", "kng"])
def test_numpy_logp_agrees_with_the_pytensor_density(which):
    data = _cap(40)
    rng = np.random.default_rng(1)
    x = S2.exp_coords(NORTH, rng.normal(size=(10, 2)) * 0.1)
    v = pt.vector("v")
    if which == "laplace":
        mech = pmd.LaplaceMechanism(S2, epsilon=1.0, center=NORTH, radius=R8)
        _, eta = mech.footpoint(data)
        graph = laplace_logp(S2, v, eta, mech.scale(40))
    else:
        mech = pmd.KNGMechanism(S2, epsilon=1.0, center=NORTH, radius=R8)
        graph = kng_logp(S2, v, data, mech.scale(40), None)
    f = pytensor.function([v], graph)
    diff = mech.logp(x, data) - np.array([f(xi) for xi in x])
    np.testing.assert_allclose(diff, diff[0], atol=1e-10)  # equal up to a constant


def test_bad_input_is_rejected_before_sampling():
    data = _cap(30)
    mech = pmd.KNGMechanism(S2, epsilon=1.0, center=NORTH, radius=R8)
    with pytest.raises(ValueError, match="available: exact, nuts, metropolis"):
        mech.release(data, sampler="gibbs")
    with pytest.raises(TypeError, match="draws must be an integer"):
        mech.release(data, sampler="nuts", draws=10.5)
    with pytest.raises(ValueError, match="chains must be an integer >= 2"):
        mech.release(data, sampler="nuts", chains=1)
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
        mech.release(data, sampler="nuts", draws=20, tune=20, random_seed=3)
    rel = mech.release(
        data, sampler="nuts", draws=20, tune=20, random_seed=3, skip_diagnostics=True
    )
    # published: only the fact of the opt-out; the failed checks (R-hat, ESS: numbers
    # that depend on the data) stay with the curator
    assert rel.opt_outs == ("skip_diagnostics",)
    assert rel.delta is None and rel.sampler == "nuts" and rel.seed_policy == "fixed seed"
    assert "diagnostics" not in rel.public() and "sampler_info" not in rel.public()
    assert rel.public()["opt_outs"] == ["skip_diagnostics"]
    assert not any(ch.isdigit() for ch in json.dumps(rel.public()["opt_outs"]))
    assert any("ESS" in f for f in rel.sampler_info["failed_checks"])


def _distances(model, seed, draws=2000):
    """Distances to the chart centre ``(chain, draw)`` from the mechanism's polar model."""
    from pymc_manidp.privacy.diagnostics import check_run

    idata = mcmc.sample(model, "nuts", draws=draws, tune=1000, chains=2, random_seed=seed)
    assert int(idata.sample_stats["diverging"].sum()) == 0  # the polar model: none
    return np.asarray(idata.posterior["distance"].values), check_run(idata)


def test_laplace_mechanism_model_samples_the_exact_radial_law():
    # a large epsilon-free sigma so the volume factor matters: n = 10, eps = 0.2
    data = _cap(10)
    mech = pmd.LaplaceMechanism(S2, epsilon=0.2, center=NORTH, radius=R8)
    sigma = mech.scale(10)
    d, rep = _distances(mech.model(data), seed=4)
    assert rep.passed, rep.failures
    stat, pvalue, ess = mcmc_ks(d, radial_cdf(S2, sigma, np.pi))
    assert pvalue > 0.01, (stat, pvalue, ess)  # alpha = 0.01, n = ESS >= 400


def test_kng_mechanism_with_identical_data_samples_the_laplace_law():
    P = pmd.SPD(k=2)
    p = np.diag([1.0, 2.0])
    # n = 5, eps = 20: sigma = 0.06 (as n = 100 at eps = 1), the law well inside the
    # ball; few records keep each gradient cheap (n eigendecompositions). (At sigma near
    # the SPD normalizability edge, e.g. 0.48, NUTS diverges in the heavy tail.)
    mech = pmd.KNGMechanism(P, epsilon=20.0, center=p, radius=1.5)
    data = np.broadcast_to(p, (5, 2, 2)).copy()
    sigma = mech.scale(5)
    d, rep = _distances(mech.model(data), seed=5, draws=1000)
    assert rep.passed, rep.failures
    stat, pvalue, ess = mcmc_ks(d, radial_cdf(P, sigma, 40 * sigma))
    assert pvalue > 0.01, (stat, pvalue, ess)
