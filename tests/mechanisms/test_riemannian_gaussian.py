"""The Riemannian Gaussian of Jiang et al. (2023) on S^d (issue 39, item 4): the exact
sampler, the proved bounds it is charged with, and the estimated profile (never
charged). docs/tangent.md, "The Riemannian Gaussian"."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import integrate, stats

import pymc_manidp as pmd
from pymc_manidp.mechanisms import riemannian_gaussian as rg
from pymc_manidp.privacy.budget import BudgetExceededError, PrivacyBudget

ALPHA = 0.01
NORTH = np.array([0.0, 0.0, 1.0])


def _radial_cdf(dim, sigma):
    def density(s):
        return math.exp(-s * s / (2 * sigma * sigma)) * math.sin(s) ** (dim - 1)

    z = integrate.quad(density, 0, math.pi, limit=200)[0]
    return np.vectorize(lambda x: integrate.quad(density, 0, min(x, math.pi), limit=200)[0] / z)


@pytest.mark.parametrize(("dim", "sigma"), [(2, 0.1), (2, 1.0), (3, 0.5), (5, 2.5), (2, 4.0)])
def test_radial_draws_follow_the_radial_law_and_a_wrong_sigma_is_caught(dim, sigma):
    """KS, alpha = 0.01, 2,000 draws, fixed seed; both proposals (sigma < 2 and >= 2)."""
    s = rg.radial_draws(dim, sigma, 2000, np.random.default_rng(0))
    assert s.shape == (2000,) and np.all((s >= 0) & (s <= math.pi))
    assert stats.kstest(s, _radial_cdf(dim, sigma)).pvalue > ALPHA
    if sigma < 3:  # past pi the law is nearly sin^{d-1}: no sigma is told from another
        assert stats.kstest(s, _radial_cdf(dim, 1.3 * sigma)).pvalue < ALPHA


def test_a_release_is_a_riemannian_gaussian_around_the_mean():
    S = pmd.Sphere(dim=2)
    mech = pmd.RiemannianGaussianMechanism(S, epsilon=0.5, center=NORTH, radius=0.3)
    rng = np.random.default_rng(1)
    data = mech.domain.check(
        S.exp_coords(NORTH, np.clip(rng.normal(size=(30, 2)) * 0.1, -0.2, 0.2))
    )
    sigma = mech.sigma(30)
    out = mech.exact_draws(data, sigma, 2000, np.random.default_rng(2))
    mean = pmd.mechanisms.base.converged_mean(S, mech.domain, data, mech.grad_tol)
    dist = S.dist(mean, out.points)
    assert stats.kstest(dist, _radial_cdf(2, sigma)).pvalue > ALPHA
    # the direction is uniform: the angle in T_mean S^2 is uniform on the circle
    coords = np.asarray(S.log_coords(mean, out.points))
    angle = np.arctan2(coords[:, 1], coords[:, 0])
    assert stats.kstest(angle, stats.uniform(-math.pi, 2 * math.pi).cdf).pvalue > ALPHA


def _loss(y, eta1, eta2, sigma):
    r1 = np.arccos(np.clip(y @ eta1, -1, 1))
    r2 = np.arccos(np.clip(y @ eta2, -1, 1))
    return (r2**2 - r1**2) / (2 * sigma * sigma)


@pytest.mark.parametrize("dim", [2, 3])
def test_the_pure_epsilon_bound_holds_and_is_attained(dim):
    rng = np.random.default_rng(4)
    sigma, delta_s = 0.7, 0.3
    bound = rg.proved_epsilon(delta_s, sigma)
    worst = 0.0
    for _ in range(20):  # random pairs at distance <= Delta, random outputs
        eta1 = rng.standard_normal(dim + 1)
        eta1 /= np.linalg.norm(eta1)
        v = rng.standard_normal(dim + 1)
        v -= (v @ eta1) * eta1
        v /= np.linalg.norm(v)
        t = delta_s * rng.uniform(0.5, 1.0)
        eta2 = math.cos(t) * eta1 + math.sin(t) * v
        y = rng.standard_normal((4000, dim + 1))
        y /= np.linalg.norm(y, axis=1, keepdims=True)
        y = np.vstack([y, -eta1, -eta2])
        worst = max(worst, np.max(np.abs(_loss(y, eta1, eta2, sigma))))
    assert worst <= bound * (1 + 1e-12)
    # attained at the antipode of eta_1 for a pair at distance Delta
    eta1, eta2 = (
        np.eye(dim + 1)[0],
        math.cos(delta_s) * np.eye(dim + 1)[0] + math.sin(delta_s) * np.eye(dim + 1)[1],
    )
    assert abs(_loss(-eta1[None], eta1, eta2, sigma)[0]) == pytest.approx(bound, rel=1e-12)


CASES = [(2, 0.05, 4.0), (3, 0.05, 4.0), (2, 0.2, 3.0), (3, 0.2, 2.5), (10, 0.05, 5.0)]


@pytest.mark.parametrize(("dim", "delta_s", "ratio"), CASES)
def test_the_proved_delta_is_above_the_profile(dim, delta_s, ratio):
    """The proved bound is above the deterministic 2-D quadrature of the profile and a
    Monte Carlo estimate (200,000 draws, fixed seed, + 5 standard errors)."""
    sigma = ratio * delta_s
    eps = np.array([0.0, 0.25, 0.5, 1.0, 2.0])
    estimated = rg.estimated_profile(dim, sigma, delta_s, eps)
    proved = np.array([rg.proved_delta(dim, sigma, delta_s, e) for e in eps])
    assert np.all(proved >= estimated)
    rng = np.random.default_rng(5)
    s = rg.radial_draws(dim, sigma, 200_000, rng)
    w = rng.standard_normal((s.size, dim))
    cos_phi = w[:, 0] / np.linalg.norm(w, axis=1)
    cos2 = math.cos(delta_s) * np.cos(s) + math.sin(delta_s) * np.sin(s) * cos_phi
    loss = (np.arccos(np.clip(cos2, -1, 1)) ** 2 - s**2) / (2 * sigma * sigma)
    for e, p in zip(eps, proved, strict=True):
        h = np.clip(-np.expm1(e - loss), 0, None)
        assert h.mean() - 5 * h.std() / math.sqrt(h.size) <= p
    # and the quadrature agrees with Monte Carlo where both are large enough to see
    h = np.clip(-np.expm1(0.25 - loss), 0, None)
    assert estimated[1] == pytest.approx(h.mean(), abs=5 * h.std() / math.sqrt(h.size) + 1e-6)


def test_a_planted_factor_two_in_the_sensitivity_is_caught():
    # the planted bug: the bound at Delta/2 (an add/remove sensitivity for a replace-one
    # one) falls below the profile at Delta, where the honest bound stays above it
    dim, delta_s, sigma, eps = 3, 0.2, 0.5, 0.5
    honest = rg.proved_delta(dim, sigma, delta_s, eps)
    planted = rg.proved_delta(dim, sigma, delta_s / 2, eps)
    profile = rg.estimated_profile(dim, sigma, delta_s, [eps])[0]
    assert honest >= profile > planted


def test_the_estimated_mu_matches_the_math_notes_quadrature():
    # the note's [N]: S^3, Delta = 0.2, sigma = 0.4: mu 0.474 (Delta/sigma = 0.5)
    assert rg.estimated_mu(3, 0.4, 0.2) == pytest.approx(0.474, abs=2e-3)


def test_the_mechanism_is_charged_its_proved_epsilon_delta(monkeypatch):
    S = pmd.Sphere(dim=2)
    mech = pmd.RiemannianGaussianMechanism(
        S, epsilon=1.0, delta=1e-6, center=NORTH, radius=math.pi / 8
    )
    n = 100
    sigma, sens = mech.sigma(n), mech.sensitivity(n)
    assert (
        rg.proved_delta(2, sigma, sens, 1.0) <= 1e-6 < rg.proved_delta(2, 0.99 * sigma, sens, 1.0)
    )
    pure = pmd.RiemannianGaussianMechanism(S, epsilon=1.0, center=NORTH, radius=math.pi / 8)
    assert rg.proved_epsilon(sens, pure.sigma(n)) <= 1.0 and pure.sigma(n) > sigma
    assert mech.planned_charge == (1.0, 1e-6)
    rng = np.random.default_rng(1)
    data = S.exp_coords(NORTH, np.clip(rng.normal(size=(n, 2)) * 0.1, -0.25, 0.25))
    b = PrivacyBudget(1.5, 1e-5)
    rel = mech.release(data, budget=b, random_seed=0)
    assert (rel.epsilon, rel.delta) == (1.0, 1e-6) and (b.spent.epsilon, b.spent.delta) == (
        1.0,
        1e-6,
    )
    assert any("estimated, not charged" in note for note in rel.notes)

    def never(*_):
        raise AssertionError("the data were read")

    monkeypatch.setattr(type(mech), "exact_draws", never)
    with pytest.raises(BudgetExceededError, match="nothing was computed"):
        mech.release(data, budget=b)
    assert len(b.entries) == 1


@given(
    epsilon=st.sampled_from([1 / 3, 5e-324, 1e-300, 1.0, 1e300, 10**400, True, math.nan, "1"]),
    delta=st.sampled_from([0.0, 1e-6, 1 / 3, 1e-301, 5e-324, 1.0, -1e-6, math.nan, True, None]),
    manifold=st.sampled_from(["S2", "S1", "H2"]),
)
def test_constructor_contract(epsilon, delta, manifold):
    """A TypeError or ValueError naming what is wrong, or a mechanism whose sigma(50)
    satisfies its proved bound (or is refused as not a normal float)."""
    M = {
        "S2": pmd.Sphere(dim=2),
        "S1": pmd.Sphere(dim=1),
        "H2": pmd.Hyperbolic(dim=2),
    }[manifold]
    center = (
        NORTH if manifold == "S2" else np.array([1.0, 0.0] if manifold == "S1" else [1, 0, 0.0])
    )
    try:
        mech = pmd.RiemannianGaussianMechanism(
            M, epsilon=epsilon, delta=delta, center=center, radius=0.3
        )
    except (TypeError, ValueError) as err:
        assert any(w in str(err) for w in ("epsilon", "delta", "sphere", "dim"))
        return
    try:
        sigma = mech.sigma(50)
    except ValueError as err:
        assert "sigma" in str(err) or "epsilon" in str(err)
        return
    sens = mech.sensitivity(50)
    if mech.delta == 0:
        assert rg.proved_epsilon(sens, sigma) <= mech.epsilon * (1 + 1e-15)
    else:
        assert (
            min(
                rg.proved_delta(2, sigma, sens, mech.epsilon),
                0.0 if rg.proved_epsilon(sens, sigma) <= mech.epsilon else 1.0,
            )
            <= mech.delta
        )


@pytest.mark.parametrize(
    "manifold, center",
    [
        (pmd.Sphere(dim=2, radius=2.0), [0.0, 0.0, 2.0]),  # diameter 2 pi, not pi
        (pmd.Sphere(dim=2, radius=0.5), [0.0, 0.0, 0.5]),
        (pmd.KendallShape(k_landmarks=3), None),  # constant curvature 4, not 1
        (pmd.Rotations(), None),
    ],
)
def test_only_the_unit_sphere_is_accepted(manifold, center):
    """The bounds use the unit sphere's diameter pi: a sphere of radius 2 was accepted
    with the unit sphere's sigma before (under-calibrated: its pure-epsilon loss is
    Delta (4 pi - Delta) / (2 sigma^2)); now it is refused with what to use."""
    # the space is refused before the center is read, so any center will do here
    center = [0.0, 0.0, 1.0] if center is None else center
    with pytest.raises(TypeError, match="unit sphere"):
        pmd.RiemannianGaussianMechanism(manifold, epsilon=1.0, center=center, radius=0.3)
