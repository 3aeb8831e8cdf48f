"""SO(3) end to end (issue 23): statistics, laws, exact samplers, PyMC, mechanisms.

``Rotations`` runs through the package with no change outside its own file. Oracles
are written here, apart from the package: a Karcher iteration on scipy's rotation
vectors, the curvature factor H = r cot r, the Laplace radial law
∝ e^{-t/σ} sin²(t/2) on [0, π] (docs/architecture.md, facts for the next manifolds),
the Haar angle density (1 - cos θ)/π and a quadrature of KNG's density with KNG's
norm written from scipy's rotation vectors. Statistical tests fix their seed, state
alpha and sample size, and refute a deliberately wrong σ.
"""

from __future__ import annotations

import warnings

import numpy as np
import pymc as pm
import pytest
from scipy import integrate, interpolate, stats
from scipy.spatial.transform import Rotation as SciRot

import pymc_manidp as pmd
from pymc_manidp.datasets import generators
from pymc_manidp.geometry.rotations import Rotations
from pymc_manidp.laws.exact import sample_laplace
from pymc_manidp.privacy.audit import polar_grid
from tests.radial import mcmc_ks

M = Rotations()
M0 = SciRot.from_rotvec([0.2, -0.4, 0.9]).as_matrix()  # the public center
R = 0.5  # the public radius (r* = pi/2)
ALPHA = 0.01
warnings.filterwarnings("ignore", message="Numba will use object mode")


def _data(n=30, seed=1, radius=R):
    return generators.uniform_radius_ball(M, n, center=M0, radius=radius, random_seed=seed)


def _rotvecs(x, y):
    """Rotation vectors of x^T y by scipy (body frame of x): the chart coordinates."""
    return SciRot.from_matrix(np.swapaxes(x, -1, -2) @ y).as_rotvec()


def radial_cdf(sigma, upper=np.pi):
    """CDF on [0, upper] of the Laplace distance law ∝ e^{-t/σ} sin²(t/2)."""
    t = np.linspace(0.0, upper, 20001)
    p = np.exp(-t / sigma) * np.sin(t / 2) ** 2
    c = integrate.cumulative_trapezoid(p, t, initial=0.0)
    f = interpolate.interp1d(t, c / c[-1], bounds_error=False, fill_value=(0.0, 1.0))
    return lambda x: f(np.asarray(x, float))


# --- statistics ----------------------------------------------------------------------------
def test_frechet_mean_matches_an_independent_karcher_iteration():
    data = _data(60, seed=2)
    got = pmd.frechet_mean(M, data)
    assert got.converged
    x = data[0]
    for _ in range(200):  # Karcher flow with scipy's logarithm, unit step
        v = _rotvecs(x, data).mean(axis=0)
        x = x @ SciRot.from_rotvec(v).as_matrix()
        if np.linalg.norm(v) < 1e-14:
            break
    assert M.dist(got.mean, x) < 1e-9
    # two points: the midpoint of I and a turn by theta about z is the turn by theta/2
    rz = SciRot.from_rotvec([[0, 0, 0.0], [0, 0, 1.2]]).as_matrix()
    mid = pmd.frechet_mean(M, rz).mean
    np.testing.assert_allclose(mid, SciRot.from_rotvec([0, 0, 0.6]).as_matrix(), atol=1e-12)


def test_sensitivities_come_from_the_curvature():
    n, eps = 100, 0.5
    h = R / np.tan(R)  # 2 r sqrt(kappa) cot(2 r sqrt(kappa)) with kappa = 1/4
    dom = pmd.DataDomain(M, M0, R)
    assert dom.curvature_factor == pytest.approx(h)
    lap = pmd.LaplaceMechanism(M, epsilon=eps, center=M0, radius=R, grad_tol=0.0)
    lap_r = pmd.LaplaceMechanism(M, epsilon=eps, center=M0, radius=R, restrict=True, grad_tol=0.0)
    kng = pmd.KNGMechanism(M, epsilon=eps, center=M0, radius=R)
    delta_l = 2 * R * (2 - h) / (n * h)
    assert lap.sensitivity(n) == pytest.approx(delta_l)
    assert lap.sigma(n) == pytest.approx(delta_l / eps)  # homogeneous, unrestricted
    assert lap_r.sigma(n) == pytest.approx(2 * delta_l / eps)
    assert kng.sensitivity(n) == pytest.approx(2 * R * (2 - h) / n)
    assert kng.sigma(n) == pytest.approx(2 * kng.sensitivity(n) / eps)
    with pytest.raises(ValueError, match=r"r\* = 1.5708"):
        pmd.DataDomain(M, M0, 1.6)


def test_domain_refuses_bad_rows_and_clips():
    data = _data(10, seed=3)
    far = M.exp_coords(M0, np.array([[0.0, 0.0, 0.9], [0.6, 0.0, 0.0]]))  # outside r
    bad = np.concatenate([data[:4], far[:1], data[4:], far[1:]])
    dom = pmd.DataDomain(M, M0, R)
    with pytest.raises(pmd.DomainError, match=r"2 of 12 points lie outside.*first at row 4"):
        dom.check(bad)
    clipped = dom.check(bad, clip=True)
    np.testing.assert_allclose(clipped[[0, 1, 2, 3]], data[:4], atol=1e-14)
    d = M.dist(M0, clipped[[4, 11]])
    assert np.all(d <= R) and np.all(d > R * (1 - 1e-9))
    # moved along the geodesic from the center: the same direction in the chart
    for i, c in zip([4, 11], far, strict=True):
        got = M.log_coords(M0, clipped[i])
        want = M.log_coords(M0, c)
        np.testing.assert_allclose(
            got / np.linalg.norm(got), want / np.linalg.norm(want), atol=1e-12
        )
    refl = data.copy()
    refl[7] = -refl[7]
    with pytest.raises(ValueError, match=r"reflections: 1 of 10 rows, first at row 7"):
        dom.check(refl)
    for cls in (pmd.LaplaceMechanism, pmd.KNGMechanism):
        with pytest.raises(pmd.DomainError, match="first at row 4"):
            cls(M, epsilon=1.0, center=M0, radius=R).release(bad, random_seed=0)


# --- exact samplers ----------------------------------------------------------------------------
@pytest.mark.parametrize("sigma", [0.15, 1.0])
def test_exact_laplace_follows_the_radial_law(sigma):
    """Distances of 3,000 exact draws to the footpoint: KS against ∝ e^{-t/σ} sin²(t/2)
    on [0, π] (alpha 0.01); σ·1.2 is refuted; axes isotropic (KS of a coordinate of the
    unit axis against U(-1, 1))."""
    eta = M.exp_coords(M0, [0.1, 0.2, -0.1])
    x = sample_laplace(M, eta, sigma, 3000, rng=4).points
    t = M.dist(eta, x)
    assert stats.kstest(t, radial_cdf(sigma)).pvalue > ALPHA
    assert stats.kstest(t, radial_cdf(1.2 * sigma)).pvalue < ALPHA
    axis = _rotvecs(eta, x) / t[:, None]
    assert stats.kstest(axis[:, 1], stats.uniform(-1, 2).cdf).pvalue > ALPHA


def test_exact_restricted_laplace_is_the_truncated_radial_law():
    """Footpoint at the center: the distance law is the radial law truncated to [0, r]
    (3,000 draws, alpha 0.01); σ·1.3 is refuted; every draw inside the ball."""
    sigma = 0.3
    dom = pmd.DataDomain(M, M0, R)
    x = sample_laplace(M, M0, sigma, 3000, rng=5, domain=dom).points
    t = M.dist(M0, x)
    assert t.max() <= R
    assert stats.kstest(t, radial_cdf(sigma, R)).pvalue > ALPHA
    assert stats.kstest(t, radial_cdf(1.3 * sigma, R)).pvalue < ALPHA


def _kng_quadrature_cdf(data, sigma, stat, resolution=(48, 16, 32)):
    """The CDF of ``stat(x)`` under KNG's law, by a polar quadrature of its density
    over the ball, with the density written here: exp(-|sum_i rotvec(x^T x_i)|/(σ n))."""
    pts, log_w = polar_grid(M, M0, R, resolution)
    n = len(data)
    logs = _rotvecs(pts[:, None], data[None]).reshape(len(pts), n, 3)
    norms = np.linalg.norm(logs.sum(1), axis=-1)
    w = np.exp(log_w - norms / (sigma * n))
    s = stat(pts)
    order = np.argsort(s)
    cdf = np.cumsum(w[order]) / w.sum()
    f = interpolate.interp1d(s[order], cdf, bounds_error=False, fill_value=(0.0, 1.0))
    return lambda v: f(np.asarray(v, float))


def test_exact_kng_matches_a_quadrature_of_its_density():
    """2,000 exact draws of KNG (n = 12, ε = 1: σ comparable to r, so the ball's edge
    matters): KS of the distance to the center and of a chart coordinate against a
    48 x 16 x 32 polar quadrature of the density (alpha 0.01, Bonferroni 0.005 each);
    the quadrature at σ/1.5 is refuted."""
    data = _data(12, seed=6)
    mech = pmd.KNGMechanism(M, epsilon=1.0, center=M0, radius=R)
    sigma = mech.sigma(len(data))
    x = mech.sample(data, 2000, random_seed=7)
    assert np.all(M.dist(M0, x) <= R)

    def dist(p):
        return M.dist(M0, p)

    def first_coord(p):
        return _rotvecs(np.broadcast_to(M0, p.shape), p)[:, 0]

    for stat in (dist, first_coord):
        assert stats.kstest(stat(x), _kng_quadrature_cdf(data, sigma, stat)).pvalue > ALPHA / 2
    wrong = _kng_quadrature_cdf(data, sigma / 1.5, dist)
    assert stats.kstest(dist(x), wrong).pvalue < ALPHA / 2


# --- PyMC distributions ---------------------------------------------------------------------
def test_manifold_laplace_draw_logp_normalized_and_tensor_sigma():
    eta = M.exp_coords(M0, [0.3, 0.0, 0.1])
    draws = pm.draw(pmd.ManifoldLaplace.dist(M, eta, 0.4, size=5), random_seed=1)
    assert draws.shape == (5, 3, 3)
    np.testing.assert_allclose(M.validate(draws), draws, atol=1e-13)
    # normalized: the density integrates to 1 over SO(3) (polar grid out to pi)
    pts, log_w = polar_grid(M, eta, np.pi, (400, 6, 12))  # the law is radial at eta
    # the midpoint rule in the polar angle is off by 1%: the grid's own volume
    # (8 pi^2 exactly) removes it, the radial rule (400 nodes) is what is checked
    log_w -= np.log(np.exp(log_w).sum() / (8 * np.pi**2))
    for sigma in (0.2, 1.5):
        lp = pm.logp(pmd.ManifoldLaplace.dist(M, eta, sigma), pts).eval()
        assert np.exp(lp + log_w).sum() == pytest.approx(1.0, abs=1e-4)
        # and it is e^{-rho/sigma}/Z with Z written from the radial law
        z = (
            4
            * np.pi
            * integrate.quad(lambda t, s=sigma: np.exp(-t / s) * 4 * np.sin(t / 2) ** 2, 0, np.pi)[
                0
            ]
        )
        np.testing.assert_allclose(lp, -M.dist(eta, pts) / sigma - np.log(z), atol=1e-9)
    # a tensor sigma: one normalizer per entry, broadcast against the values
    sig = np.array([0.2, 0.7])
    lp = pm.logp(pmd.ManifoldLaplace.dist(M, eta, sig), draws[:2]).eval()
    want = [
        pm.logp(pmd.ManifoldLaplace.dist(M, eta, s), draws[i]).eval() for i, s in enumerate(sig)
    ]
    np.testing.assert_allclose(lp, want, rtol=1e-12)


def test_kng_and_uniform_distributions():
    data = _data(15, seed=8)
    dom = pmd.DataDomain(M, M0, R)
    draws = pm.draw(pmd.KNG.dist(M, data, 0.1, dom, size=3), random_seed=2)
    assert draws.shape == (3, 3, 3) and np.all(M.dist(M0, draws) <= R)
    outside = M.exp_coords(M0, [0.0, 0.0, 0.8])
    lp = pm.logp(pmd.KNG.dist(M, data, 0.1, dom), np.stack([draws[0], outside])).eval()
    assert np.isfinite(lp[0]) and lp[1] == -np.inf
    # KNG's log-density is -|sum_i log_x(x_i)|/(sigma n), written with scipy
    want = -np.linalg.norm(_rotvecs(np.broadcast_to(draws[0], data.shape), data).sum(0)) / (
        0.1 * 15
    )
    assert lp[0] == pytest.approx(want, rel=1e-10)
    # Haar: the angle density (1 - cos t)/pi; logp -log(8 pi^2)
    u = pm.draw(pmd.ManifoldUniform.dist(M, size=3000), random_seed=3)
    theta = M.dist(np.eye(3), u)
    assert stats.kstest(theta, lambda t: (t - np.sin(t)) / np.pi).pvalue > ALPHA
    assert stats.kstest(theta, stats.uniform(0, np.pi).cdf).pvalue < ALPHA
    lp = pm.logp(pmd.ManifoldUniform.dist(M), u[:4]).eval()
    np.testing.assert_allclose(lp, -np.log(8 * np.pi**2))


def test_observed_rotations_with_random_sigma_and_footpoint_compile():
    obs = sample_laplace(M, M0, 0.3, 20, rng=9).points
    with pm.Model() as model:
        eta = pmd.ManifoldUniform("eta", M)
        sigma = pm.HalfNormal("sigma", 1.0)
        pmd.ManifoldLaplace("x", M, eta, sigma, observed=obs)
    ip = model.initial_point()
    assert sorted(ip) == ["eta_gaussian__", "sigma_log__"]
    assert np.isfinite(model.compile_logp()(ip))
    assert all(np.all(np.isfinite(g)) for g in model.compile_dlogp()(ip))


@pytest.mark.slow  # about 1-2 min on 2 busy cores (compiling and sampling NUTS)
def test_nuts_samples_the_laplace_with_no_divergences():
    """NUTS (2 chains x 1,000 draws) on ManifoldLaplace in its polar chart: no
    divergences, distance law KS (p-value at n = ESS, alpha 0.01) against the radial
    law; σ·1.5 refuted."""
    sigma = 0.3
    with pm.Model():
        pmd.ManifoldLaplace("x", M, M0, sigma)
        idata = pm.sample(
            1000,
            tune=500,
            chains=2,
            random_seed=1,
            progressbar=False,
            compute_convergence_checks=False,
        )
    assert int(idata.sample_stats["diverging"].sum()) == 0
    d = M.dist(M0, idata.posterior["x"].values)
    _, p, ess = mcmc_ks(d, radial_cdf(sigma))
    assert ess > 300 and p > ALPHA
    assert mcmc_ks(d, radial_cdf(1.5 * sigma))[1] < ALPHA


@pytest.mark.slow  # about 1-2 min on 2 busy cores
def test_nuts_samples_a_random_footpoint_and_sigma_with_no_divergences():
    """A model with a Haar-prior footpoint (the Gaussian-quaternion chart) and a
    half-normal sigma observing 20 exact Laplace draws: NUTS (target_accept 0.95, 2
    chains x 500 draws) without divergences, the footpoint near the truth."""
    sigma = 0.3
    obs = sample_laplace(M, M0, sigma, 20, rng=10).points
    with pm.Model():
        eta = pmd.ManifoldUniform("eta", M)
        s = pm.HalfNormal("sigma", 1.0)
        pmd.ManifoldLaplace("x", M, eta, s, observed=obs)
        idata = pm.sample(
            500,
            tune=500,
            chains=2,
            target_accept=0.95,
            random_seed=2,
            progressbar=False,
            compute_convergence_checks=False,
        )
    assert int(idata.sample_stats["diverging"].sum()) == 0
    assert M.dist(M0, idata.posterior["eta"].values.reshape(-1, 3, 3)).mean() < 0.3


def test_the_supplements_metropolis_samples_the_laplace():
    """The 2021 supplement's random-walk Metropolis (step = sigma; 4 chains x 600
    draws thinned by 10 after 500 burn-in steps) on the SO(3) Laplace: KS of the
    distance (p-value at n = ESS, alpha 0.01) against the radial law; σ·1.5 refuted."""
    from pymc_manidp.mcmc.random_walk import random_walk_mh

    sigma = 0.3

    def logp(x):
        return -M.dist(M0, x) / sigma

    res = random_walk_mh(
        logp, M0, manifold=M, step=sigma, draws=600, burn_in=500, thin=10, chains=4, rng=3
    )
    d = M.dist(M0, res.draws)
    _, p, ess = mcmc_ks(d, radial_cdf(sigma))
    assert ess > 300 and p > ALPHA, (p, ess)
    assert mcmc_ks(d, radial_cdf(1.5 * sigma))[1] < ALPHA


# --- mechanisms -------------------------------------------------------------------------------
@pytest.mark.parametrize("cls", [pmd.LaplaceMechanism, pmd.KNGMechanism])
def test_exact_releases_are_pure_dp(cls):
    data = _data(40, seed=11)
    mech = cls(M, epsilon=1.0, center=M0, radius=R)
    rel = mech.release(data, random_seed=12)
    assert rel.sampler == "exact" and rel.delta == 0.0 and rel.n == 40
    assert rel.sigma == pytest.approx(mech.sigma(40))
    value = M.validate(rel.value)
    assert M.dist(pmd.frechet_mean(M, data).mean, value) < 20 * rel.sigma
    again = cls(M, epsilon=1.0, center=M0, radius=R).release(data, random_seed=12)
    np.testing.assert_array_equal(again.value, rel.value)  # a seed reproduces a release


@pytest.mark.slow  # compiling nutpie's model: about 1-3 min per mechanism on 2 busy cores
@pytest.mark.parametrize("cls", [pmd.LaplaceMechanism, pmd.KNGMechanism])
def test_nuts_releases_pass_the_gate(cls):
    """NUTS releases (nutpie, 2 chains x 800 draws after 300 tuning steps) pass the
    diagnostics gate and land within 10 sigma of the Fréchet mean."""
    data = _data(40, seed=13)
    mech = cls(M, epsilon=1.0, center=M0, radius=R)
    rel = mech.release(
        data,
        sampler="nuts",
        settings=pmd.MCMCSettings(draws=800, tune=300, chains=2),
        random_seed=3,
    )
    assert rel.sampler == "nuts" and rel.delta is None
    value = M.validate(rel.value)
    assert M.dist(pmd.frechet_mean(M, data).mean, value) < 10 * mech.sigma(40)
