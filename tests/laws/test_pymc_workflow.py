"""The distributions in the PyMC workflow: every row of issue 11's table, one test each.

Each test does what a PyMC user would do and checks the result against an oracle
(a shape, an exact law, a closed form), not just that no exception was raised.
"""

from __future__ import annotations

import warnings

import numpy as np
import pymc as pm
import pytest
from scipy import stats

import pymc_manidp as pmd
from pymc_manidp.laws.distributions import laplace_log_normalizer

S2 = pmd.Sphere(dim=2)
NORTH = np.array([0.0, 0.0, 1.0])
warnings.filterwarnings("ignore", message="Numba will use object mode")


def _z_s2(sigma):  # closed form on S^2: docs/architecture.md, math facts
    return 2 * np.pi * sigma**2 * (1 + np.exp(-np.pi / sigma)) / (1 + sigma**2)


def test_draw_follows_the_exact_radial_law():
    # pm.draw goes through rng_fn = the exact sampler: KS of the distance, alpha 0.01
    x = pm.draw(pmd.ManifoldLaplace.dist(S2, NORTH, 0.3, size=3000), random_seed=1)
    t = S2.dist(NORTH, x)
    grid = np.linspace(0, np.pi, 20001)
    pdf = np.exp(-grid / 0.3) * np.sin(grid)
    cdf = np.cumsum(pdf)
    cdf /= cdf[-1]
    assert stats.kstest(t, lambda q: np.interp(q, grid, cdf)).pvalue > 0.01
    # a wrong sigma is caught by the same test
    x_wrong = pm.draw(pmd.ManifoldLaplace.dist(S2, NORTH, 0.25, size=3000), random_seed=1)
    assert stats.kstest(S2.dist(NORTH, x_wrong), lambda q: np.interp(q, grid, cdf)).pvalue < 0.01


def test_prior_and_posterior_predictive():
    with pm.Model() as m:
        eta = pmd.ManifoldUniform("eta", S2)
        pmd.ManifoldLaplace("y", S2, eta, 0.2, observed=NORTH)
    prior = pm.sample_prior_predictive(draws=50, model=m, random_seed=1)
    y = prior.prior_predictive["y"].values
    assert y.shape == (1, 50, 3)
    np.testing.assert_allclose(np.linalg.norm(y, axis=-1), 1.0)
    eta_draws = prior.prior["eta"].values
    # the prior predictive is centered on the prior draw of eta: distances ~ sigma scale
    assert np.median(S2.dist(eta_draws, y)) < 0.6
    with m:
        idata = pm.sample(100, tune=100, chains=1, random_seed=1, progressbar=False)
        post = pm.sample_posterior_predictive(idata, random_seed=2, progressbar=False)
    assert post.posterior_predictive["y"].shape == (1, 100, 3)


def test_model_graph():
    with pm.Model() as m:
        eta = pmd.ManifoldUniform("eta", S2)
        pmd.ManifoldLaplace("y", S2, eta, 0.2, observed=NORTH)
    text = pm.model_to_mermaid(m)
    assert "ManifoldLaplace" in text and "ManifoldUniform" in text
    # graphviz builds the graph's source (no rendering, so no dot binary needed)
    source = pm.model_to_graphviz(m).source
    assert "ManifoldLaplace" in source and "ManifoldUniform" in source


def test_dist_methods_exist_and_sample():
    dom = pmd.DataDomain(S2, NORTH, 0.4)
    data = S2.exp_coords(NORTH, np.random.default_rng(0).normal(size=(20, 2)) * 0.05)
    k = pm.draw(pmd.KNG.dist(S2, data, 0.05, dom, size=5), random_seed=0)
    assert k.shape == (5, 3)
    assert np.all(dom.distances(k) <= 0.4)


def test_shape_batches_broadcast():
    foot = np.stack([NORTH, np.array([1.0, 0, 0])])
    with pm.Model() as m:
        x = pmd.ManifoldLaplace("x", S2, foot, 0.05, shape=(4, 2, 3))
    draws = pm.draw(x, random_seed=3)
    assert draws.shape == (4, 2, 3)
    # each column keeps its own footpoint
    assert np.all(S2.dist(foot[0], draws[:, 0]) < 0.6)
    assert np.all(S2.dist(foot[1], draws[:, 1]) < 0.6)
    lp = m.compile_logp(sum=False)(m.initial_point())[0]
    assert np.shape(lp) == (4, 2)


def test_footpoint_random_variable_and_data():
    with pm.Model() as m:
        eta = pmd.ManifoldUniform("eta", S2)
        foot = pm.Data("foot", NORTH)
        pmd.ManifoldLaplace("y", S2, eta, 0.3, observed=NORTH)
        pmd.ManifoldLaplace("z", S2, foot, 0.3)
    pt0 = m.initial_point()
    assert np.isfinite(m.compile_logp()(pt0))
    with pytest.raises(ValueError, match="points are not on the sphere"):
        pmd.ManifoldLaplace.dist(S2, [0.0, 0.0, 2.0], 0.3)


def test_sigma_random_variable_and_data():
    with pm.Model() as m:
        s = pm.HalfNormal("s", 0.3)
        sd = pm.Data("sd", 0.2)
        pmd.ManifoldLaplace("y", S2, NORTH, s, observed=np.array([0.0, 0.6, 0.8]))
        pmd.ManifoldLaplace("z", S2, NORTH, sd)
    logp = m.compile_logp(vars=[m["y"]], sum=True)
    val = logp(
        {"s_log__": np.log(0.5), **{k: v for k, v in m.initial_point().items() if k != "s_log__"}}
    )
    expect = -S2.dist(NORTH, [0.0, 0.6, 0.8]) / 0.5 - np.log(_z_s2(0.5))
    assert np.isclose(val, expect)
    with pytest.raises(ValueError, match="sigma"):
        pmd.ManifoldLaplace.dist(S2, NORTH, -1.0)


def test_observed_array_no_transform_no_traceback(capfd):
    obs = S2.exp_coords(NORTH, np.random.default_rng(1).normal(size=(5, 2)) * 0.2)
    with pm.Model() as m:
        pmd.ManifoldLaplace("y", S2, NORTH, 0.2, observed=obs)
    assert m.rvs_to_transforms[m["y"]] is None
    val = m.compile_logp()({})
    capture = capfd.readouterr()
    assert "Rewrite failure" not in capture.err and "Traceback" not in capture.err
    expect = np.sum(-S2.dist(NORTH, obs) / 0.2 - np.log(_z_s2(0.2)))
    assert np.isclose(val, expect)


def test_observed_pm_data():
    obs = S2.exp_coords(NORTH, np.random.default_rng(2).normal(size=(5, 2)) * 0.2)
    with pm.Model() as m:
        d = pm.Data("obs", obs)
        pmd.ManifoldLaplace("y", S2, NORTH, 0.2, observed=d)
    v1 = m.compile_logp()({})
    pm.set_data({"obs": obs[:3]}, model=m)
    v2 = m.compile_logp()({})
    expect = np.sum(-S2.dist(NORTH, obs[:3]) / 0.2 - np.log(_z_s2(0.2)))
    assert np.isclose(v2, expect) and not np.isclose(v1, v2)


def test_log_likelihood_observe_do():
    with pm.Model() as m:
        eta = pmd.ManifoldUniform("eta", S2)
        y = pmd.ManifoldLaplace("y", S2, eta, 0.3)
    obs_model = pm.observe(m, {y: NORTH})
    with obs_model:
        idata = pm.sample(50, tune=50, chains=1, random_seed=1, progressbar=False)
        pm.compute_log_likelihood(idata, progressbar=False)
    ll = idata.log_likelihood["y"].values
    etas = idata.posterior["eta"].values
    np.testing.assert_allclose(ll, -S2.dist(etas, NORTH) / 0.3 - np.log(_z_s2(0.3)), rtol=1e-8)
    do_model = pm.do(m, {eta: NORTH})
    draws = pm.draw(do_model["y"], draws=200, random_seed=1)
    assert np.median(S2.dist(NORTH, draws)) < 1.0


def test_uniform_rejects_noncompact():
    with pytest.raises(ValueError, match="SPD"):
        pmd.ManifoldUniform.dist(pmd.SPD(k=2))
    with pytest.raises(ValueError, match="Euclidean"):
        pmd.ManifoldUniform.dist(pmd.Euclidean(dim=2))


@pytest.mark.parametrize("sigma", [0.05, 0.3, 1.0, 5.0])
def test_normalizer_sphere_closed_form(sigma):
    got = np.exp(laplace_log_normalizer(S2, sigma).eval())
    assert np.isclose(got, _z_s2(sigma), rtol=1e-6)


def _recursive_sphere_z(d, R, sigma):
    # independent oracle: I_m(a) = int_0^pi e^{-a s} sin^m s ds by the two-step recursion
    a = R / sigma
    i = [(1 - np.exp(-a * np.pi)) / a, (1 + np.exp(-a * np.pi)) / (1 + a * a)]
    for m in range(2, d):
        i.append(m * (m - 1) / (m * m + a * a) * i[m - 2])
    from scipy.special import gamma

    return 2 * np.pi ** (d / 2) / gamma(d / 2) * R**d * i[d - 1]


@pytest.mark.parametrize("d,R,sigma", [(1, 1.0, 0.4), (3, 2.0, 0.3), (5, 0.5, 0.2), (8, 1.0, 2.0)])
def test_normalizer_sphere_any_dim_radius(d, R, sigma):
    got = np.exp(laplace_log_normalizer(pmd.Sphere(dim=d, radius=R), sigma).eval())
    assert np.isclose(got, _recursive_sphere_z(d, R, sigma), rtol=1e-6)


@pytest.mark.parametrize("k,sigma", [(3, 0.2), (5, 0.1), (8, 1.0)])
def test_normalizer_kendall(k, sigma):
    from scipy import integrate
    from scipy.special import gamma

    d = 2 * k - 4
    f = lambda t: np.exp(-t / sigma) * np.sin(t) ** (d - 1) * np.cos(t)  # noqa: E731
    val, _ = integrate.quad(f, 0, np.pi / 2, epsabs=0, epsrel=1e-12, limit=200)
    expect = 2 * np.pi ** (d / 2) / gamma(d / 2) * val
    got = np.exp(laplace_log_normalizer(pmd.KendallShape(k_landmarks=k), sigma).eval())
    assert np.isclose(got, expect, rtol=1e-6)


def test_exp_logp_integrates_to_one_on_s2():
    # integrate exp(logp) over S^2 in spherical coordinates with the area element sin(theta)
    from scipy import integrate

    sigma = 0.4
    th = np.linspace(0, np.pi, 801)
    ph = np.linspace(0, 2 * np.pi, 801)
    T, P = np.meshgrid(th, ph, indexing="ij")
    pts = np.stack([np.sin(T) * np.cos(P), np.sin(T) * np.sin(P), np.cos(T)], -1)
    foot = np.array([0.3, -0.2, 0.9]) / np.linalg.norm([0.3, -0.2, 0.9])
    with pm.Model() as m:
        # pm.Data, not a constant: numba cannot cache a function holding 640,000 points
        # ("uses dynamic globals"), and would warn so
        grid = pm.Data("grid", pts.reshape(-1, 3))
        pmd.ManifoldLaplace("y", S2, foot, sigma, observed=grid)
    lp = m.compile_logp(sum=False)({})[0].reshape(T.shape)
    total = integrate.simpson(integrate.simpson(np.exp(lp) * np.sin(T), x=ph, axis=1), x=th)
    assert abs(total - 1) < 1e-4
    # the unnormalized density does not integrate to one: the check can fail
    assert abs(total * _z_s2(sigma) - 1) > 0.1


def test_restricted_and_kng_refuse_random_parameters():
    dom = pmd.DataDomain(S2, NORTH, 0.4)
    with pm.Model():
        s = pm.HalfNormal("s", 0.3)
        with pytest.raises(ValueError, match="unnormalized"):
            pmd.ManifoldLaplace("x", S2, NORTH, s, domain=dom)
        with pytest.raises(ValueError, match="unnormalized"):
            pmd.KNG("k", S2, np.stack([NORTH] * 3), s, dom)
        with pytest.raises(ValueError, match="unnormalized"):
            pmd.ManifoldLaplace("x2", pmd.SPD(k=4), np.eye(4), s)  # no normalizer for k >= 4


def test_user_kng_samples_without_divergences_and_follows_the_exact_law():
    # issue 11's case: sigma 0.1, r 0.4, n 50 gave 145 divergences at the ball's wall.
    # The default chart is now capped at the ball's edge: 0 divergences, and the
    # distance to the Fréchet mean matches exact draws (two-sample KS, p-value for
    # n = ESS, alpha 0.01); the law with sigma/2 is rejected by the same test.
    from tests.radial import mcmc_ks

    dom = pmd.DataDomain(S2, NORTH, 0.4)
    rng = np.random.default_rng(3)
    data = S2.exp_coords(NORTH, rng.uniform(-0.2, 0.2, size=(50, 2)))
    with pm.Model():
        pmd.KNG("k", S2, data, 0.1, dom)
        idata = pm.sample(1000, tune=1000, chains=2, random_seed=4, progressbar=False)
    assert int(idata.sample_stats["diverging"].sum()) == 0
    mean = pmd.frechet_mean(S2, data).mean
    d = S2.dist(mean, idata.posterior["k"].values)
    assert np.all(dom.distances(idata.posterior["k"].values) <= 0.4)

    def ecdf_of(sigma):
        ref = np.sort(
            S2.dist(mean, pm.draw(pmd.KNG.dist(S2, data, sigma, dom, size=20000), random_seed=5))
        )
        return lambda q: np.searchsorted(ref, q, side="right") / len(ref)

    _, pvalue, ess = mcmc_ks(d, ecdf_of(0.1))
    assert ess >= 400 and pvalue > 0.01, (pvalue, ess)
    assert mcmc_ks(d, ecdf_of(0.05))[1] < 0.01


def test_kng_data_as_pm_data_is_checked_in_the_graph():
    from pymc.logprob.utils import ParameterValueError

    dom = pmd.DataDomain(S2, NORTH, 0.4)
    rng = np.random.default_rng(6)
    d1 = S2.exp_coords(NORTH, rng.uniform(-0.1, 0.1, size=(20, 2)))
    x = S2.exp_coords(NORTH, np.array([0.05, 0.02]))
    with pm.Model() as m:
        data = pm.Data("data", d1)
        pmd.KNG("k", S2, data, 0.1, dom, observed=x)
    v1 = m.compile_logp()({})
    # the KNG formula, written independently: -|sum_i log_x(x_i)| / (sigma n)
    assert np.isclose(v1, -np.linalg.norm(S2.log(x, d1).sum(0)) / (0.1 * 20))
    d2 = S2.exp_coords(NORTH, rng.uniform(-0.1, 0.1, size=(30, 2)))
    pm.set_data({"data": d2}, model=m)
    assert np.isclose(m.compile_logp()({}), -np.linalg.norm(S2.log(x, d2).sum(0)) / (0.1 * 30))
    pm.set_data({"data": np.vstack([d2, [[1.0, 0.0, 0.0]]])}, model=m)  # a datum outside
    # PyMC turns a failed check_parameters into -inf in a model's logp, and raises
    # with the message when the check is evaluated on its own
    assert m.compile_logp()({}) == -np.inf
    with pytest.raises(ParameterValueError, match="public ball"):
        pm.logp(m["k"], x).eval()


@pytest.mark.parametrize("statistic", ["mean", "median"])
def test_kng_observed_batch_of_releases(statistic):
    """Several observed KNG values of one data set: PyMC broadcasts the records to the
    batch (1, n, 3); each value's log-density is the formula written here, per value."""
    dom = pmd.DataDomain(S2, NORTH, 0.4)
    rng = np.random.default_rng(8)
    data = S2.exp_coords(NORTH, rng.uniform(-0.1, 0.1, size=(15, 2)))
    x = S2.exp_coords(NORTH, rng.uniform(-0.05, 0.05, size=(4, 2)))
    with pm.Model() as m:
        pmd.KNG("k", S2, data, 0.1, dom, statistic=statistic, observed=x)
    (logp,) = m.compile_logp(sum=False)({})
    logs = S2.log(x[:, None, :], data[None])  # (4, 15, 3)
    if statistic == "mean":
        expected = -np.linalg.norm(logs.sum(1), axis=-1) / (0.1 * 15)
    else:
        units = logs / np.linalg.norm(logs, axis=-1, keepdims=True)
        expected = -np.linalg.norm(units.mean(1), axis=-1) / 0.1
    np.testing.assert_allclose(logp, expected, rtol=1e-9)
