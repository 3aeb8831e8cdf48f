"""Noise-aware inference after restricted and several releases (issue 28, items 2, 3, 5).

Oracles, all computed here apart from the package: the restricted Laplace's normalizer
``Z_B(eta) = int_{B_r(m0)} exp(-rho(eta, y)/sigma) dV(y)`` by adaptive quadrature
(scipy's ``dblquad`` in polar coordinates at ``m0``; on S^2 it depends on ``eta`` only
through ``rho(eta, m0)``, docs/architecture.md, math facts); the whole-sphere normalizer
``Z = 2 pi sigma^2 (1 + e^{-pi/sigma})/(1 + sigma^2)``; and posteriors on S^2 by a grid
(prior x likelihood). The model's log-likelihood is compared with them exactly (cheap,
default tier); NUTS posteriors by a KS test of a distance (p-value for n = ESS,
alpha = 0.01), in which the deliberately wrong variant (``Z_B`` dropped; only one of
three releases) is rejected.
"""

from __future__ import annotations

import json
import warnings

import numpy as np
import pymc as pm
import pytest
from scipy import integrate, interpolate

import pymc_manidp as pmd
from tests.radial import mcmc_ks

S2 = pmd.Sphere(dim=2)
M0 = np.array([0.0, 0.0, 1.0])
ALPHA = 0.01
warnings.filterwarnings("ignore", message="Numba will use object mode")


def _at(a, phi=0.0):
    """The point at distance ``a`` from the north pole, azimuth ``phi``."""
    return np.array([np.sin(a) * np.cos(phi), np.sin(a) * np.sin(phi), np.cos(a)])


def _record(value, sigma, restricted, radius=0.5):
    rec = {"value": value, "mechanism": "manifold Laplace", "sigma": sigma}
    rec["restricted"] = restricted
    if restricted:
        rec["public_ball"] = {"center": M0.tolist(), "radius": radius}
    return rec


def z_ball(a, sigma, radius):
    """Z_B at a footpoint ``a`` from m0 (adaptive quadrature, independent of the package)."""
    eta = _at(a)

    def f(t, phi):
        cos_d = np.clip(np.dot(eta, _at(t, phi)), -1.0, 1.0)
        return np.exp(-np.arccos(cos_d) / sigma) * np.sin(t)

    return integrate.dblquad(f, 0.0, 2 * np.pi, 0.0, radius, epsabs=1e-13, epsrel=1e-9)[0]


def log_z_sphere(sigma):
    return np.log(2 * np.pi * sigma**2 * (1 + np.exp(-np.pi / sigma)) / (1 + sigma**2))


def _likelihood_fn(model, names):
    """The summed log-likelihood of the observed ``names`` as a function of the mean."""
    return model.compile_logp(vars=[model[n] for n in names], jacobian=False)


def _fixed_prior(name, **kw):
    # a prior with no transform: the model's value variable is the point itself
    return pmd.ManifoldLaplace(name, S2, M0, 1.0, default_transform=None, **kw)


# --- item 2: what a release publishes ------------------------------------------------------
@pytest.mark.parametrize("restrict", [False, True])
def test_public_record_says_how_to_write_the_likelihood(restrict):
    mech = pmd.LaplaceMechanism(S2, epsilon=1.0, center=M0, radius=0.5, restrict=restrict)
    data = S2.exp_coords(M0, np.random.default_rng(0).normal(size=(20, 2)) * 0.1)
    public = json.loads(json.dumps(mech.release(data, random_seed=0).public()))
    assert public["mechanism"] == "manifold Laplace" and public["restricted"] is restrict
    assert public["public_ball"] == {"center": [0.0, 0.0, 1.0], "radius": 0.5}
    assert public["manifold"] == repr(S2) == "Sphere(dim=2, radius=1.0)"
    kng = pmd.KNGMechanism(S2, epsilon=1.0, center=M0, radius=0.5).release(data, random_seed=0)
    assert kng.public()["restricted"] is True


# --- item 2: the restricted normalizer -------------------------------------------------------
@pytest.mark.parametrize("sigma", [0.1, 0.5])
def test_ball_normalizer_against_adaptive_quadrature(sigma):
    from pymc_manidp.laws.restricted import ball_quadrature, restricted_laplace_log_normalizer

    q = ball_quadrature(S2, M0, 0.5, sigma)
    for a in (0.0, 0.27, 0.49, 0.9):
        got = restricted_laplace_log_normalizer(S2, q, _at(a, 1.0), sigma).eval()
        assert abs(got - np.log(z_ball(a, sigma, 0.5))) < 1e-3, (sigma, a)


def test_restricted_likelihood_is_normalized_by_the_footpoints_z_b():
    # the model's log-likelihood of a restricted release at several footpoints equals
    # -rho/sigma - log Z_B(eta) with Z_B from adaptive quadrature; the unrestricted
    # likelihood (Z_B dropped, Z(sigma) instead) differs by far more than the tolerance
    sigma, x = 0.3, _at(0.35, 0.4)
    model = pmd.noise_aware_model(_record(x, sigma, True), S2, prior=_fixed_prior)
    loglik = _likelihood_fn(model, ["release"])
    wrong = pmd.noise_aware_model(_record(x, sigma, False), S2, prior=_fixed_prior)
    wrong_loglik = _likelihood_fn(wrong, ["release"])
    errors, wrong_errors = [], []
    for a, phi in [(0.0, 0.0), (0.2, 2.0), (0.45, 0.4), (0.5, 3.0)]:
        eta = _at(a, phi)
        expected = -S2.dist(eta, x) / sigma - np.log(z_ball(a, sigma, 0.5))
        errors.append(loglik({"mean": eta}) - expected)
        wrong_errors.append(wrong_loglik({"mean": eta}) - expected)
    assert np.max(np.abs(errors)) < 1e-3, errors
    # not a constant offset either: the dropped Z_B changes the shape of the posterior
    assert np.ptp(wrong_errors) > 0.1, wrong_errors


def test_three_releases_give_the_product_likelihood():
    sigmas, xs = (0.3, 0.4, 0.2), [_at(0.1, 0.0), _at(0.3, 1.0), _at(0.2, 4.0)]
    records = [
        _record(xs[0], sigmas[0], False),
        _record(xs[1], sigmas[1], False),
        _record(xs[2], sigmas[2], True),
    ]
    model = pmd.noise_aware_model(records, S2, prior=_fixed_prior)
    names = ["release_0", "release_1", "release_2"]
    assert [v.name for v in model.observed_RVs] == names
    loglik = _likelihood_fn(model, names)
    for a, phi in [(0.05, 0.3), (0.4, 2.0)]:
        eta = _at(a, phi)
        expected = sum(-S2.dist(eta, x) / s for x, s in zip(xs, sigmas, strict=True))
        expected -= log_z_sphere(sigmas[0]) + log_z_sphere(sigmas[1])
        expected -= np.log(z_ball(a, sigmas[2], 0.5))
        assert loglik({"mean": eta}) == pytest.approx(expected, abs=1e-3)


# --- refusals ---------------------------------------------------------------------------------
def test_refusals_name_the_reason():
    rec = _record(M0, 0.1, False)
    with pytest.raises(ValueError, match="whole data set"):
        pmd.noise_aware_model({**rec, "mechanism": "KNG"}, S2)
    with pytest.raises(ValueError, match="does not say whether"):
        pmd.noise_aware_model({k: v for k, v in rec.items() if k != "restricted"}, S2)
    with pytest.raises(ValueError, match="needs its public ball"):
        pmd.noise_aware_model({**rec, "restricted": True}, S2)
    with pytest.raises(ValueError, match="outside its public ball"):
        pmd.noise_aware_model(_record(_at(0.8), 0.1, True), S2)
    with pytest.raises(ValueError, match="was made on SPD"):
        pmd.noise_aware_model({**rec, "manifold": "SPD(k=2)"}, S2)
    with pytest.raises(ValueError, match="record says restricted=False"):
        pmd.noise_aware_model(rec, S2, restricted=True)
    with pytest.raises(ValueError, match="different public balls"):
        pmd.noise_aware_model(
            [_record(M0, 0.1, True, radius=0.5), _record(M0, 0.1, True, radius=0.4)], S2
        )
    with pytest.raises(ValueError, match="infinite volume"):
        spd = {**rec, "value": np.eye(2), "manifold": None}
        pmd.noise_aware_model(spd, pmd.SPD(k=2))


def test_the_cli_document_is_read_as_its_release(tmp_path):
    mech = pmd.LaplaceMechanism(S2, epsilon=1.0, center=M0, radius=0.5, restrict=True)
    data = S2.exp_coords(M0, np.random.default_rng(1).normal(size=(20, 2)) * 0.1)
    from pymc_manidp.io.files import release_json

    rel = mech.release(data, random_seed=0)
    doc = release_json(
        rel,
        manifold_name="sphere",
        manifold=S2,
        center=M0,
        radius=0.5,
        options={"restrict": True, "clip": False},
        source="points.csv",
    )
    doc = json.loads(json.dumps(doc))
    assert doc["release"]["public_ball"] == doc["public_ball"]
    assert doc["release"]["manifold"] == doc["manifold"]["spec"]
    # an older document without the new keys is read from its ball and options
    old = {
        **doc,
        "release": {
            k: v
            for k, v in doc["release"].items()
            if k not in ("restricted", "public_ball", "manifold")
        },
    }
    for d in (doc, old):
        model = pmd.noise_aware_model(d, S2)
        assert [v.name for v in model.observed_RVs] == ["release"]
        assert np.isfinite(model.compile_logp()(model.initial_point()))


# --- item 5: the releases are pm.Data -----------------------------------------------------------
def test_new_releases_replace_the_data_without_a_new_model():
    sigma = 0.3
    model = pmd.noise_aware_model(
        [_record(_at(0.1), sigma, True), _record(_at(0.2, 1.0), 0.4, False)], S2
    )
    assert {v.name for v in model.data_vars} == {
        "released_0",
        "released_1",
        "chart_origin",
        "chart_basis",
    }
    new = [_at(0.3, 2.0), _record(_at(0.25, 3.0), 0.4, False)]
    values = pmd.noise_aware_data(model, new)
    pm.set_data(values, model=model)
    np.testing.assert_allclose(model["released_0"].get_value(), _at(0.3, 2.0))
    # the chart moved to the restricted release: the start lies one chart scale from it
    start = model.initial_point()
    assert np.isfinite(model.compile_logp()(start))
    with pytest.raises(ValueError, match="same sigma"):
        pmd.noise_aware_data(model, [new[0], _record(_at(0.25), 0.5, False)])
    with pytest.raises(ValueError, match="built for 2 releases"):
        pmd.noise_aware_data(model, new[:1])


def test_prior_predictive_draws_respect_the_ball():
    model = pmd.noise_aware_model(_record(_at(0.2), 0.3, True), S2)
    eta, x = pm.draw([model["mean"], model["release"]], draws=200, random_seed=3)
    assert eta.shape == x.shape == (200, 3)
    assert S2.dist(M0, eta).max() <= 0.5 and S2.dist(M0, x).max() <= 0.5
    # the prior is uniform on the ball: P(rho(eta, m0) <= r/2) = (1 - cos r/2)/(1 - cos r)
    frac = np.mean(S2.dist(M0, eta) <= 0.25)
    p = (1 - np.cos(0.25)) / (1 - np.cos(0.5))
    assert abs(frac - p) < 4 * np.sqrt(p * (1 - p) / 200)


# --- posteriors against quadrature (NUTS) ------------------------------------------------------
def _nuts(model, seed, draws=1000, tune=1000, chains=2):
    with model:
        return pm.sample(
            draws,
            tune=tune,
            chains=chains,
            random_seed=seed,
            nuts_sampler="pymc",
            progressbar=False,
            compute_convergence_checks=False,
        )


def _grid_cdf(log_post, stat, n_t=600, n_phi=720, t_max=np.pi):
    """CDF of ``stat(eta)`` under the density ``exp(log_post(eta))`` (w.r.t. area) on the
    cap ``rho(eta, m0) <= t_max``: a midpoint grid in polar coordinates at m0."""
    t = (np.arange(n_t) + 0.5) * t_max / n_t
    phi = (np.arange(n_phi) + 0.5) * 2 * np.pi / n_phi
    tt, pp = np.meshgrid(t, phi, indexing="ij")
    eta = np.stack([np.sin(tt) * np.cos(pp), np.sin(tt) * np.sin(pp), np.cos(tt)], axis=-1)
    lw = log_post(eta) + np.log(np.sin(tt))
    w = np.exp(lw - lw.max()).ravel()
    s = stat(eta).ravel()
    order = np.argsort(s)
    cum = np.cumsum(w[order]) / w.sum()
    return lambda v: np.interp(v, s[order], cum, left=0.0, right=1.0)


@pytest.mark.slow
def test_restricted_posterior_matches_the_quadrature_posterior():
    # one restricted release (sigma = 0.3 against r = 0.5: Z_B matters), the default
    # prior (uniform on the ball); NUTS 2 x 1,000 draws. KS of rho(eta, m0) against the
    # grid posterior with Z_B from adaptive quadrature (p-value for n = ESS, alpha =
    # 0.01); the posterior with Z_B dropped is rejected by the same test
    sigma, r, x = 0.3, 0.5, _at(0.4, 0.7)
    a = np.linspace(0.0, r, 41)
    log_zb = interpolate.CubicSpline(a, [np.log(z_ball(v, sigma, r)) for v in a])

    def log_post(eta, with_zb=True):
        lp = -S2.dist(eta, x) / sigma
        return lp - log_zb(S2.dist(M0, eta)) if with_zb else lp

    idata = _nuts(pmd.noise_aware_model(_record(x, sigma, True, r), S2), seed=5)
    assert int(idata.sample_stats["diverging"].sum()) <= 5
    d = S2.dist(M0, idata.posterior["mean"].values)
    right = _grid_cdf(log_post, lambda e: S2.dist(M0, e), t_max=r)
    stat, pvalue, ess = mcmc_ks(d, right)
    assert ess >= 400 and pvalue > ALPHA, (stat, pvalue, ess)
    dropped = _grid_cdf(lambda e: log_post(e, False), lambda e: S2.dist(M0, e), t_max=r)
    _, wrong, _ = mcmc_ks(d, dropped)
    assert wrong < ALPHA, wrong


@pytest.mark.slow
def test_three_releases_posterior_matches_the_product_quadrature():
    # three unrestricted releases of one mean, sigmas 0.3, 0.4, 0.5, uniform prior on S^2;
    # NUTS 2 x 1,000 draws. KS of the distance to the first release against the grid
    # posterior of the product likelihood (alpha = 0.01, n = ESS); the posterior given
    # the first release alone is rejected by the same test
    sigmas = (0.3, 0.4, 0.5)
    xs = [_at(0.3, 0.0), _at(0.5, 1.2), _at(0.2, 3.0)]
    records = [_record(x, s, False) for x, s in zip(xs, sigmas, strict=True)]
    idata = _nuts(pmd.noise_aware_model(records, S2), seed=6)
    assert int(idata.sample_stats["diverging"].sum()) <= 5
    d = S2.dist(xs[0], idata.posterior["mean"].values)

    def log_post(eta, k=3):
        return sum(-S2.dist(eta, x) / s for x, s in zip(xs[:k], sigmas[:k], strict=True))

    right = _grid_cdf(log_post, lambda e: S2.dist(xs[0], e))
    stat, pvalue, ess = mcmc_ks(d, right)
    assert ess >= 400 and pvalue > ALPHA, (stat, pvalue, ess)
    one = _grid_cdf(lambda e: log_post(e, 1), lambda e: S2.dist(xs[0], e))
    _, wrong, _ = mcmc_ks(d, one)
    assert wrong < ALPHA, wrong


@pytest.mark.parametrize("d", [1, 3, 4])
def test_ball_quadrature_in_any_dimension_against_closed_forms(d):
    # flat R^d: vol(B_r) = pi^{d/2} r^d / Gamma(d/2 + 1), and at the center
    # Z_B = vol(S^{d-1}) int_0^r e^{-t/sigma} t^{d-1} dt (a regularized gamma function)
    from scipy import special

    from pymc_manidp.laws.restricted import ball_quadrature, restricted_laplace_log_normalizer

    E = pmd.Euclidean(dim=d)
    r, sigma = 0.7, (0.2 if d <= 3 else 0.7)  # d = 4 at sigma = 0.2: 4 million nodes
    q = ball_quadrature(E, np.zeros(d), r, sigma)
    vol = np.pi ** (d / 2) * r**d / special.gamma(d / 2 + 1)
    assert np.exp(np.logaddexp.reduce(q.log_weights)) == pytest.approx(vol, rel=1e-9)
    sphere = 2 * np.pi ** (d / 2) / special.gamma(d / 2)
    z_center = sphere * sigma**d * special.gamma(d) * special.gammainc(d, r / sigma)
    got = restricted_laplace_log_normalizer(E, q, np.zeros(d), sigma).eval()
    assert got == pytest.approx(np.log(z_center), abs=1e-8)


def test_a_ball_too_fine_for_the_quadrature_is_refused_with_the_reason():
    K = pmd.KendallShape(6)  # dimension 8
    rec = _record(None, 0.05, True)
    center = K.generic_point
    rec.update(value=center, public_ball={"center": center, "radius": 0.3})
    with pytest.raises(ValueError, match="quadrature nodes"):
        pmd.noise_aware_model(rec, K)
