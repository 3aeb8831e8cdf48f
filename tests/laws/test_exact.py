"""Exact samplers against their laws (KS, α = 0.01, fixed seeds), and wrong variants.

Every goodness-of-fit test below is paired with a deliberately wrong variant (wrong σ,
missing volume factor, anisotropic direction, missing sinh factor, no KNG acceptance
step) that the same test statistic must reject at the same α and sample size.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import integrate, stats

import pymc_manidp as pmd
from pymc_manidp.geometry.capabilities import Origin
from pymc_manidp.geometry.spd import identity_frame
from pymc_manidp.laws import exact
from pymc_manidp.mechanisms.base import available_samplers
from pymc_manidp.privacy.release import FLOATING_POINT_NOTE
from tests.geometry.contract import random_point
from tests.radial import radial_cdf

ALPHA = 0.01
N = 20_000  # draws per goodness-of-fit test

# (manifold, sigma): sigma large enough that the volume factor shapes the law
LAPLACE_CASES = {
    "S2": (pmd.Sphere(dim=2), 0.5),
    "S4": (pmd.Sphere(dim=4), 0.4),
    "S2(R=2)": (pmd.Sphere(dim=2, radius=2.0), 1.0),
    "Kendall4": (pmd.KendallShape(k_landmarks=4), 0.3),
    "Kendall6": (pmd.KendallShape(k_landmarks=6), 0.2),
    "SPD2": (pmd.SPD(k=2), 0.4),
    "SPD3": (pmd.SPD(k=3), 0.25),
}


def _upper(M, sigma):
    if isinstance(M, pmd.Sphere):
        return np.pi * M.radius
    if isinstance(M, pmd.KendallShape):
        return np.pi / 2
    return 60.0 * sigma  # SPD: the tail beyond is below 1e-9 for these sigmas


def _ks(x, cdf):
    return stats.kstest(x, cdf).pvalue


def _missing_volume_variant(M, sigma, size, rng, upper):
    """Wrong: Gamma(d, σ) radii (the Euclidean law), kept inside the support."""
    t = rng.gamma(M.dim, sigma, 3 * size)
    return t[t < upper][:size]


@pytest.mark.parametrize("name", list(LAPLACE_CASES))
def test_laplace_radial_law_and_wrong_variants(name):
    """KS of rho(eta, x) against tests/radial.py; N = 20,000, α = 0.01."""
    M, sigma = LAPLACE_CASES[name]
    rng = np.random.default_rng(11)
    eta = M.validate(random_point(M, rng))
    x = exact.sample_laplace(M, eta, sigma, N, rng=12).points
    assert x.shape == (N, *M.point_shape)
    upper = _upper(M, sigma)
    cdf = radial_cdf(M, sigma, upper)
    t = M.dist(eta, x)
    assert _ks(t, cdf) > ALPHA
    # wrong sigma (10% larger) and missing volume factor: both rejected
    t_wrong = M.dist(eta, exact.sample_laplace(M, eta, 1.1 * sigma, N, rng=12).points)
    assert _ks(t_wrong, cdf) < ALPHA
    assert _ks(_missing_volume_variant(M, sigma, N, rng, upper), cdf) < ALPHA


def _unit_directions(M, eta, x):
    c = M.log_coords(eta, x)
    return c / np.linalg.norm(c, axis=-1, keepdims=True)


def _direction_pvalues(u):
    """KS of the first coordinate ((u0+1)/2 ~ Beta((d-1)/2, (d-1)/2)) and Rayleigh."""
    d = u.shape[-1]
    a = (d - 1) / 2.0
    p_coord = _ks((u[:, 0] + 1) / 2, stats.beta(a, a).cdf)
    rayleigh = len(u) * d * np.sum(u.mean(axis=0) ** 2)  # ~ chi2_d for uniform u
    return p_coord, float(stats.chi2.sf(rayleigh, d))


@pytest.mark.parametrize("name", list(LAPLACE_CASES))
def test_laplace_direction_is_uniform(name):
    """Unit tangent direction at the footpoint; N = 20,000, α = 0.01 (each test)."""
    M, sigma = LAPLACE_CASES[name]
    rng = np.random.default_rng(21)
    eta = M.validate(random_point(M, rng))
    x = exact.sample_laplace(M, eta, sigma, N, rng=22).points
    p_coord, p_ray = _direction_pvalues(_unit_directions(M, eta, x))
    assert p_coord > ALPHA and p_ray > ALPHA
    # wrong: an anisotropic direction (first axis stretched by 1.3) is rejected
    c = exact.laplace_coords(M, sigma, N, rng=22)
    c[:, 0] *= 1.3
    u = c / np.linalg.norm(c, axis=-1, keepdims=True)
    assert _direction_pvalues(u)[0] < ALPHA


def _spd2_gap_angle_cdf(sigma, sinh=True):
    """CDF of the gap angle ψ of SPD(2) tangent eigenvalues, by 1-D quadrature.

    λ = t(cos φ, sin φ) and ψ = φ + π/4 folded into [0, π/2], so that
    |λ1-λ2|/|λ| = √2 cos ψ. Integrating t·e^{-t/σ}·sinh(t b) over t (b = cos ψ/√2)
    gives the density of ψ ∝ (a-b)^{-2} - (a+b)^{-2}, a = 1/σ. Without the sinh
    factor (Vandermonde |λ1-λ2| only) it is ∝ b. (The angle, not the ratio, is
    tabulated: its CDF is smooth, the ratio's has a square-root cusp at √2.)
    """
    a = 1.0 / sigma

    def dens(psi):
        b = np.cos(psi) / np.sqrt(2.0)
        return (a - b) ** -2 - (a + b) ** -2 if sinh else b

    grid = np.linspace(0, np.pi / 2, 2001)
    table = np.concatenate(
        [[0.0], [integrate.quad(dens, u, v)[0] for u, v in itertools.pairwise(grid)]]
    )
    table = np.cumsum(table) / table.sum()
    return lambda v: np.interp(v, grid, table)


def _gap_angle(c):
    w = np.linalg.eigvalsh(np.tensordot(c, identity_frame(2), axes=[[-1], [0]]))
    ratio = np.abs(w[:, 1] - w[:, 0]) / np.linalg.norm(w, axis=-1)
    return np.arccos(np.clip(ratio / np.sqrt(2.0), 0.0, 1.0))


def test_spd2_eigenvalue_law_and_missing_sinh_factor():
    """KS of the gap angle of the tangent eigenvalues; σ = 0.8, N = 20,000, α = 0.01."""
    P, sigma = pmd.SPD(k=2), 0.8
    eta = np.array([[2.0, 0.3], [0.3, 0.5]])
    x = exact.sample_laplace(P, eta, sigma, N, rng=31).points
    cdf = _spd2_gap_angle_cdf(sigma)
    assert _ks(_gap_angle(P.log_coords(eta, x)), cdf) > ALPHA
    # wrong: the Euclidean K-norm in frame coordinates (the sinh factor missing)
    psi_wrong = _gap_angle(exact.euclidean_laplace(np.zeros(3), sigma, N, rng=31))
    assert _ks(psi_wrong, cdf) < ALPHA
    # the oracle itself: the sinh-free law does describe the K-norm draws
    assert _ks(psi_wrong, _spd2_gap_angle_cdf(sigma, sinh=False)) > ALPHA


def test_euclidean_k_norm_gamma_law():
    """|y - c| ~ Gamma(d, σ) and uniform direction; d = 3, N = 20,000, α = 0.01."""
    c, sigma = np.array([1.0, -2.0, 0.5]), 0.7
    y = exact.euclidean_laplace(c, sigma, N, rng=41) - c
    t = np.linalg.norm(y, axis=-1)
    assert _ks(t, stats.gamma(3, scale=sigma).cdf) > ALPHA
    assert _ks(t, stats.gamma(3, scale=1.1 * sigma).cdf) < ALPHA  # wrong σ rejected
    assert min(_direction_pvalues(y / t[:, None])) > ALPHA


RESTRICTED_CASES = {  # (manifold, radius r, sigma); SPD's sigma is past the unrestricted edge
    "S2": (pmd.Sphere(dim=2), 0.7, 0.5),
    "Kendall4": (pmd.KendallShape(k_landmarks=4), 0.35, 0.1),
    "SPD2": (pmd.SPD(k=2), 2.5, 2.0),
    "SPD3": (pmd.SPD(k=3), 1.0, 0.5),
}


@pytest.mark.parametrize("name", list(RESTRICTED_CASES))
def test_restricted_laplace_stays_in_the_ball_with_the_truncated_law(name):
    """Footpoint = center: distances follow the radial law truncated at r.

    N = 20,000, α = 0.01; a wrong σ (15% larger) is rejected.
    """
    M, r, sigma = RESTRICTED_CASES[name]
    m0 = M.validate(random_point(M, np.random.default_rng(51)))
    dom = pmd.DataDomain(M, m0, r)
    cdf = radial_cdf(M, sigma, r)
    out = exact.sample_laplace(M, m0, sigma, N, rng=52, domain=dom)
    t = M.dist(m0, out.points)
    assert np.all(t <= r)
    assert _ks(t, cdf) > ALPHA
    wrong = exact.sample_laplace(M, m0, 1.15 * sigma, N, rng=52, domain=dom)
    assert _ks(M.dist(m0, wrong.points), cdf) < ALPHA
    # an off-center footpoint: every draw still inside the ball
    eta = M.exp_coords(m0, np.full(M.dim, 0.9 * r / np.sqrt(M.dim)))
    off = exact.sample_laplace(M, eta, sigma, 2000, rng=53, domain=dom)
    assert np.all(dom.distances(off.points) <= r) and off.acceptance_rate < 1


KNG_CASES = {  # (manifold, radius r, sigma)
    "S2": (pmd.Sphere(dim=2), 0.6, 0.3),
    "SPD2": (pmd.SPD(k=2), 1.5, 0.6),
    "Kendall4": (pmd.KendallShape(k_landmarks=4), 0.35, 0.1),
}


@pytest.mark.parametrize("name", list(KNG_CASES))
def test_kng_with_identical_data_is_the_truncated_laplace(name):
    """All data = p = m0: KNG's law is the Laplace at p truncated at r.

    N = 20,000, α = 0.01. Wrong: the envelope alone (rate σ/H, no KNG acceptance
    step) where H < 1, a 15% larger σ where H = 1 (SPD).
    """
    M, r, sigma = KNG_CASES[name]
    p = M.validate(random_point(M, np.random.default_rng(61)))
    dom = pmd.DataDomain(M, p, r)
    data = np.broadcast_to(p, (30, *M.point_shape)).copy()
    out = exact.sample_kng(M, data, sigma, N, rng=62, domain=dom)
    cdf = radial_cdf(M, sigma, r)
    t = M.dist(p, out.points)
    assert np.all(t <= r)
    assert _ks(t, cdf) > ALPHA
    H = dom.curvature_factor
    assert out.info["envelope_slope_H"] == H
    wrong_sigma = sigma / H if H < 1 else 1.15 * sigma
    wrong = exact.sample_laplace(M, p, wrong_sigma, N, rng=62, domain=dom)
    assert _ks(M.dist(p, wrong.points), cdf) < ALPHA


# --- Lemma 1 (2022): the inequality the KNG envelope rests on ----------------------------
LEMMA_MANIFOLDS = {
    "S2": (pmd.Sphere(dim=2), 0.99 * np.pi / 4),
    "S5(R=3)": (pmd.Sphere(dim=5, radius=3.0), 2.0),
    "SPD2": (pmd.SPD(k=2), 2.0),
    "SPD3": (pmd.SPD(k=3), 1.5),
    "Kendall4": (pmd.KendallShape(k_landmarks=4), 0.99 * np.pi / 8),
    "Kendall10": (pmd.KendallShape(k_landmarks=10), 0.3),
}


def _in_ball(M, m0, r, rng, size, edge=False):
    c = rng.normal(size=(size, M.dim))
    c /= np.linalg.norm(c, axis=-1, keepdims=True)
    rad = r * (1 - 1e-9) * (np.ones(size) if edge else rng.uniform(0, 1, size) ** (1 / M.dim))
    return M.validate(M.exp_coords(m0, c * rad[:, None]))


def _grad_norm(M, x, data):
    nd = len(M.point_shape)
    g = np.mean(M.log(np.expand_dims(x, -nd - 1), data), axis=-nd - 1)
    return M.norm(x, g)


@settings(max_examples=30, deadline=None)
@given(
    name=st.sampled_from(list(LEMMA_MANIFOLDS)),
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(2, 40),
    edge=st.booleans(),
)
def test_lemma1_gradient_lower_bound(name, seed, n, edge):
    """|grad F(x)| >= H rho(x_bar, x) for data and x in B_r(m0) (2022 Lemma 1)."""
    M, r = LEMMA_MANIFOLDS[name]
    rng = np.random.default_rng(seed)
    m0 = M.validate(random_point(M, rng))
    data = _in_ball(M, m0, r, rng, n, edge=edge)
    x_bar = pmd.frechet_mean(M, data, tol=1e-13).mean
    x = _in_ball(M, m0, r, rng, 200, edge=edge)
    H = pmd.DataDomain(M, m0, r).curvature_factor
    lhs, rhs = _grad_norm(M, x, data), H * M.dist(x_bar, x)
    assert np.all(lhs >= rhs * (1 - 1e-7) - 1e-10), float(np.min(lhs - rhs))


def test_lemma1_needs_the_curvature_factor():
    """The bound can fail: with slope 1 instead of H on S², data on the boundary of
    a ball of radius near r* and x opposite, |grad F| < rho(x_bar, x)."""
    S, r = pmd.Sphere(dim=2), 0.99 * np.pi / 4
    m0 = np.array([0.0, 0.0, 1.0])
    rng = np.random.default_rng(71)
    data = _in_ball(S, m0, r, rng, 40, edge=True)
    x_bar = pmd.frechet_mean(S, data, tol=1e-13).mean
    x = _in_ball(S, m0, r, rng, 400, edge=True)
    assert np.any(_grad_norm(S, x, data) < S.dist(x_bar, x))


# --- mechanisms, release records, bad input ----------------------------------------------
S2 = pmd.Sphere(dim=2)
NORTH = np.array([0.0, 0.0, 1.0])


def _cap(n, seed=0, r=np.pi / 8):
    rng = np.random.default_rng(seed)
    th, ph = rng.uniform(0, r, n), rng.uniform(0, 2 * np.pi, n)
    return np.stack([np.sin(th) * np.cos(ph), np.sin(th) * np.sin(ph), np.cos(th)], -1)


@pytest.mark.parametrize("cls", [pmd.LaplaceMechanism, pmd.KNGMechanism])
def test_exact_release_is_pure_dp_and_reproducible(cls):
    mech = cls(S2, epsilon=1.0, center=NORTH, radius=np.pi / 8)
    data = _cap(100)
    rel = mech.release(data, random_seed=5)  # exact is the default
    assert rel.sampler == "exact" and rel.delta == 0.0 and rel.diagnostics is None
    assert FLOATING_POINT_NOTE in rel.notes
    assert 0 < rel.sampler_info["acceptance_rate"] <= 1
    assert "sampler_info" not in rel.public()  # data-dependent: curator only
    assert np.array_equal(rel.value, mech.release(data, random_seed=5).value)
    x, info = mech.sample(data, 7, random_seed=5, return_info=True)
    assert x.shape == (7, 3) and np.allclose(np.linalg.norm(x, axis=-1), 1.0)
    np.testing.assert_array_equal(x, mech.sample(data, 7, random_seed=5))  # same draws
    if cls is pmd.KNGMechanism:
        assert 0 < info["acceptance_rate"] <= 1
        assert np.all(mech.domain.distances(x) <= mech.domain.radius)


def test_bad_input_rejected_before_sampling():
    foot, dom = NORTH, pmd.DataDomain(S2, NORTH, 0.5)
    with pytest.raises(ValueError, match="sigma must be a finite number > 0"):
        exact.sample_laplace(S2, foot, 0.0, 10)
    with pytest.raises(TypeError, match="sigma must be a real number"):
        exact.sample_laplace(S2, foot, "0.1", 10)
    with pytest.raises(ValueError, match="size must be an integer >= 1"):
        exact.sample_laplace(S2, foot, 0.1, 0)
    with pytest.raises(TypeError, match="size must be an integer"):
        exact.sample_kng(S2, _cap(5), 0.1, 2.5, domain=dom)
    with pytest.raises(TypeError, match="must be an int"):
        exact.sample_laplace(S2, foot, 0.1, 3, rng="seed")
    with pytest.raises(TypeError, match="domain must be a DataDomain"):
        exact.sample_laplace(S2, foot, 0.1, 3, domain=(NORTH, 0.5))
    with pytest.raises(ValueError, match="trailing shape"):
        exact.sample_laplace(S2, np.eye(2), 0.1, 3)
    with pytest.raises(ValueError, match="not normalizable for sigma"):
        exact.sample_laplace(pmd.SPD(k=3), np.eye(3), 0.8, 3)
    with pytest.raises(pmd.DomainError):
        exact.sample_kng(S2, _cap(5, r=0.9), 0.1, 3, domain=dom)
    mech = pmd.KNGMechanism(S2, epsilon=1.0, center=NORTH, radius=0.5)
    with pytest.raises(ValueError, match="size must be an integer >= 1"):
        mech.sample(_cap(5), 0)
    with pytest.raises(TypeError, match="random_seed"):
        mech.release(_cap(5), random_seed=1.5)


def test_rejection_cap_raises_instead_of_looping():
    # a wide law on a small ball far from the footpoint: few proposals land inside
    dom = pmd.DataDomain(S2, NORTH, 0.05)
    eta = S2.exp_coords(NORTH, [0.2, 0.0])
    with pytest.raises(exact.ExactSamplingError, match="max_attempts = 2"):
        exact.sample_laplace(S2, eta, 1.0, 50, rng=1, domain=dom, max_attempts=2)


@pytest.mark.parametrize("cls", [pmd.LaplaceMechanism, pmd.KNGMechanism])
def test_exact_requested_where_none_exists_lists_the_samplers(cls):
    from dataclasses import dataclass

    @dataclass(frozen=True)
    class Wobbly(pmd.Sphere):
        """A sphere subclass: it may change the geometry, so no exact sampler is assumed."""

    W = Wobbly(dim=2)
    assert not exact.has_exact_sampler(W) and available_samplers(W) == ("nuts", "metropolis")
    mech = cls(W, epsilon=1.0, center=NORTH, radius=0.3)
    for kwargs in ({}, {"sampler": "exact"}):
        with pytest.raises(ValueError, match="available samplers for it are nuts, metropolis"):
            mech.release(_cap(10, r=0.3), **kwargs)
    with pytest.raises(ValueError, match="exact samplers exist for Euclidean, Sphere"):
        exact.sample_laplace(W, NORTH, 0.1, 3)


# --- exact KNG against PyMC's NUTS on the same law -----------------------------------------
def _ess_two_sample_pvalue(chains_stat, exact_stat, keep):
    """Two-sample KS p-value with the MCMC side counted at its effective sample size.

    ``chains_stat`` ``(chain, draw)``; ``keep`` marks draws inside the ball (the
    restricted law). Correlated draws carry ESS, not ``chain*draw``, observations
    (as tests/radial.mcmc_ks): the Kolmogorov law is taken at
    ``n_eff = ESS·N/(ESS + N)``.
    """
    import arviz as az

    ess = float(az.ess(np.asarray(chains_stat, float)))
    d = stats.ks_2samp(np.ravel(chains_stat)[np.ravel(keep)], exact_stat).statistic
    n_eff = ess * len(exact_stat) / (ess + len(exact_stat))
    return float(stats.kstwo.sf(d, max(1, round(n_eff))))


def _spd_ball_data(n, seed, r=1.5):
    P = pmd.SPD(k=2)
    rng = np.random.default_rng(seed)
    c = rng.normal(size=(n, 3))
    c *= (r * 0.95 * rng.uniform(0, 1, n) ** (1 / 3) / np.linalg.norm(c, axis=-1))[:, None]
    return P.exp_coords(np.eye(2), c)


KNG_VS_NUTS = {
    "S2-n50": (S2, NORTH, np.pi / 8, lambda: _cap(50, seed=81)),
    "S2-n500": (S2, NORTH, np.pi / 8, lambda: _cap(500, seed=82)),
    "SPD2-n50": (pmd.SPD(k=2), np.eye(2), 1.5, lambda: _spd_ball_data(50, 83)),
    "SPD2-n500": (pmd.SPD(k=2), np.eye(2), 1.5, lambda: _spd_ball_data(500, 84)),
}


@pytest.mark.slow  # about 40 s per S² case, 3-8 min per SPD(2) case on 2 shared cores
@pytest.mark.parametrize("name", list(KNG_VS_NUTS))
def test_exact_kng_agrees_with_nuts(name):
    """Two-sample KS on rho(x_bar, x) and on a tangent coordinate at x_bar.

    ε = 1; NUTS 2 chains x 2,000 draws (1,000 tune), ESS-calibrated; exact
    N = 5,000; α = 0.01 each. On S² the envelope alone (no KNG acceptance step,
    rate σ/H) is rejected by the same test.
    """
    from pymc_manidp import mcmc

    M, m0, r, make = KNG_VS_NUTS[name]
    data = make()
    mech = pmd.KNGMechanism(M, epsilon=1.0, center=m0, radius=r)
    x_bar = pmd.frechet_mean(M, data).mean
    idata = mcmc.sample(mech.model(data), "nuts", draws=2000, tune=1000, chains=2, random_seed=9)
    xs = np.asarray(idata.posterior["release"].values)
    keep = mech.domain.distances(xs) <= mech.domain.radius  # the law conditioned on the ball
    ex = mech.sample(data, 5000, random_seed=10)

    def stats_of(x):
        return M.dist(x_bar, x), M.log_coords(x_bar, x)[..., 0]

    for s_mcmc, s_exact in zip(stats_of(xs), stats_of(ex), strict=True):
        assert _ess_two_sample_pvalue(s_mcmc, s_exact, keep) > ALPHA
    if isinstance(M, pmd.Sphere):
        H = mech.domain.curvature_factor
        env = exact.sample_laplace(
            M, x_bar, mech.sigma(len(data)) / H, 5000, rng=10, domain=mech.domain
        ).points
        assert _ess_two_sample_pvalue(stats_of(xs)[0], stats_of(env)[0], keep) < ALPHA


# --- KNG-mean a few ulps below r* at large n·ε (issue 43 item 5) -----------------------
@pytest.mark.parametrize(
    "M", [pmd.Sphere(dim=2), pmd.KendallShape(k_landmarks=3), pmd.Rotations()], ids=str
)
@pytest.mark.parametrize("ulps", [1, 2])
def test_kng_mean_near_r_star_refuses_where_floating_point_leaves_no_acceptance(M, ulps):
    """At ``r* - 1 ulp`` Lemma 1's slope H is ~4e-16, so the computed mean's error bound
    ``|grad F(x_hat)|/H`` is at least ``eps r/H ~ 0.4``: at ε = 1e6 (σ ~ 1e-6, n = 6) the
    exact sampler hit its cap after reading the data (Sphere, Kendall(3), SO(3)).
    ``calibrate`` now refuses it from public facts (H, r, σ), naming the cause; ε = 1
    at the same radius still releases, inside the ball, with every record on its edge."""
    r = M.max_radius
    for _ in range(ulps):
        r = float(np.nextafter(r, 0.0))
    center = M.origin if isinstance(M, Origin) else M.generic_point
    if isinstance(M, pmd.Sphere):
        center = np.array([0.0, 0.0, 1.0])
    try:
        big = pmd.KNGMechanism(M, epsilon=1e6, center=center, radius=r)
    except ValueError as err:  # a space may refuse such radii outright (SO(3)'s cut margin)
        assert "radius" in str(err)
        return
    with pytest.raises(ValueError, match=r"so close to r\*.*slope H = .*exceeds sigma"):
        big.calibrate(6)
    ok = pmd.KNGMechanism(M, epsilon=1.0, center=center, radius=r)
    ok.calibrate(6)
    u = np.random.default_rng(0).normal(size=(6, M.dim))
    u /= np.linalg.norm(u, axis=1, keepdims=True)
    x = M.validate(M.exp_coords(center, r * (1 - 1e-12) * u))
    rel = ok.release(x, random_seed=1)
    assert ok.domain.distances(np.asarray(rel.value)[None])[0] <= r
    # the median has no H: the same radius and epsilon pass calibrate
    pmd.KNGMechanism(M, epsilon=1e6, center=center, radius=r, statistic="median").calibrate(6)
