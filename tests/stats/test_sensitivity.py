"""Sensitivity bounds: hand-computed values and an empirical check (2021 Fig. 1 spirit)."""

from __future__ import annotations

import numpy as np
import pytest

import pymc_manidp as pmd
from pymc_manidp.stats import sensitivity as sens
from tests.stats.test_frechet import _ball_data

S2 = pmd.Sphere(dim=2)
P2 = pmd.SPD(k=2)
K4 = pmd.KendallShape(k_landmarks=4)


def test_hand_computed_values():
    # S^2, r = pi/8: 2r*sqrt(k) = pi/4, H = (pi/4) cot(pi/4) = pi/4,
    # Laplace 2r(2-H)/(nH) = (2 - pi/4)/n, KNG 2r(2-H)/n = (pi/4)(2 - pi/4)/n.
    r = np.pi / 8
    assert sens.curvature_factor(r, 1.0) == pytest.approx(np.pi / 4, rel=1e-14)
    assert sens.laplace_sensitivity(S2, 10, r) == pytest.approx((2 - np.pi / 4) / 10, rel=1e-14)
    assert sens.kng_sensitivity(S2, 10, r) == pytest.approx(
        np.pi / 4 * (2 - np.pi / 4) / 10, rel=1e-14
    )
    # sphere of radius 2 (kappa = 1/4) with r = pi/4: same angle, H = pi/4 again
    S2R = pmd.Sphere(dim=2, radius=2.0)
    assert sens.laplace_sensitivity(S2R, 5, np.pi / 4) == pytest.approx(
        2 * np.pi / 4 * (2 - np.pi / 4) / (5 * np.pi / 4), rel=1e-14
    )
    # SPD (non-positive curvature): 2r/n
    assert sens.laplace_sensitivity(P2, 20, 1.5) == pytest.approx(0.15, rel=1e-15)
    assert sens.kng_sensitivity(P2, 20, 1.5) == pytest.approx(0.15, rel=1e-15)
    # Kendall, kappa_max = 4, r = 0.3: s = 1.2, tan(1.2) = 2.5721516, H = 0.4665355
    h = 1.2 / np.tan(1.2)
    assert h == pytest.approx(0.4665355, abs=1e-7)
    assert sens.laplace_sensitivity(K4, 7, 0.3) == pytest.approx(0.6 * (2 - h) / (7 * h))
    # H_min for SPD, kappa_min = -1/2, r = 1: s = 2/sqrt(2) = sqrt(2), s coth s
    s = np.sqrt(2.0)
    assert sens.curvature_factor_min(1.0, -0.5) == pytest.approx(s / np.tanh(s))
    assert sens.curvature_factor_min(1.0, 1.0) == 1.0


def test_sigma_from_the_sensitivity():
    assert sens.calibrated_sigma(0.1, 0.5) == pytest.approx(0.4)  # 2 Delta / eps
    assert sens.calibrated_sigma(0.1, 0.5, footpoint_free_normalizer=True) == pytest.approx(
        0.2
    )  # Delta / eps
    assert sens.calibrated_sigma(sensitivity=0.3, epsilon=2.0) == pytest.approx(0.3)


def test_ambient_radii():
    assert sens.ambient_radius_spd(1.5) == pytest.approx(np.e**1.5 - 1)
    # a quarter circle of the unit sphere is a chord of length sqrt(2)
    assert sens.ambient_radius_sphere(np.pi / 2) == pytest.approx(np.sqrt(2))
    assert sens.ambient_radius_sphere(np.pi, radius=3.0) == pytest.approx(6 * np.sin(np.pi / 6))


def test_empirical_sphere_bound_lies_between_2r_and_the_theorem():
    for r in [0.2, np.pi / 8, 0.6]:
        e = sens.empirical_sphere_log_spread(r)
        h = sens.curvature_factor(r, 1.0)
        assert 2 * r < e < 2 * r * (2 - h)
    assert sens.empirical_sphere_log_spread(np.pi / 8) is not None  # cached call


@pytest.mark.parametrize(
    ("call", "exc", "msg"),
    [
        (lambda: sens.laplace_sensitivity(S2, 10, np.pi / 4), ValueError, r"below r\* = 0.785"),
        (lambda: sens.laplace_sensitivity(S2, 10, -0.1), ValueError, "radius must be"),
        (lambda: sens.kng_sensitivity(S2, 10, np.nan), ValueError, "radius must be"),
        (lambda: sens.laplace_sensitivity(S2, 0, 0.1), ValueError, "n must be"),
        (lambda: sens.laplace_sensitivity(S2, 2.5, 0.1), TypeError, "n must be an integer"),
        (lambda: sens.calibrated_sigma(0.1, 0.0), ValueError, "epsilon must be"),
        (lambda: sens.calibrated_sigma(0.1, -1.0), ValueError, "epsilon must be"),
        (lambda: sens.calibrated_sigma(0.1, np.inf), ValueError, "epsilon must be"),
        (lambda: sens.calibrated_sigma(0.1, "1"), TypeError, "epsilon must be a real"),
        (lambda: sens.calibrated_sigma(0.0, 1.0), ValueError, "sensitivity must be"),
        (lambda: sens.laplace_sensitivity(K4, 3, np.pi / 8), ValueError, r"r\* = 0.3926"),
    ],
)
def test_bad_input(call, exc, msg):
    with pytest.raises(exc, match=msg):
        call()


# --- empirical check: neighbouring datasets never exceed the bounds -----------------
CASES = {"S2": (S2, np.pi / 8), "SPD2": (P2, 1.5), "Kendall4": (K4, 0.3)}


def _opposite(M, m0, x, r):
    """The record moved to the far side of the ball: the worst-case neighbour."""
    v = M.log(m0, x)
    nv = M.norm(m0, v)
    return M.validate(M.exp(m0, -v * (r / max(nv, 1e-12))))


@pytest.mark.parametrize("name", list(CASES))
def test_neighbouring_means_and_gradients_stay_within_bounds(name):
    M, r = CASES[name]
    rng = np.random.default_rng(42)
    worst_mean, worst_grad = 0.0, 0.0
    for n in [3, 5, 10, 30]:
        bound_l = sens.laplace_sensitivity(M, n, r)
        bound_k = sens.kng_sensitivity(M, n, r)
        for _ in range(40):
            m0, data = _ball_data(M, rng, n, r)
            # put the changed record on the boundary and its replacement opposite
            data[-1] = M.exp(m0, M.log(m0, data[-1]) * r / max(M.dist(m0, data[-1]), 1e-12))
            other = data.copy()
            other[-1] = _opposite(M, m0, data[-1], r)
            assert np.all(M.dist(m0, other) <= r * (1 + 1e-9))
            a = pmd.frechet_mean(M, data).mean
            b = pmd.frechet_mean(M, other).mean
            worst_mean = max(worst_mean, M.dist(a, b) / bound_l)
            # KNG: gradient change at arbitrary x in the ball
            x = M.exp_coords(m0, rng.normal(size=M.dim) * r / (2 * np.sqrt(M.dim)))
            ga = M.log(x, data).mean(axis=0)
            gb = M.log(x, other).mean(axis=0)
            worst_grad = max(worst_grad, M.norm(x, ga - gb) / bound_k)
    assert worst_mean <= 1.0 + 1e-9  # SPD comes within 4e-4 of the bound: it is tight
    assert worst_grad <= 1.0 + 1e-9
    # and the check is not vacuous: the worst pair comes within a factor of 4 of the
    # bound (on Kendall shapes H = 0.47 inflates the Laplace bound by (2-H)/H = 3.3)
    assert worst_mean > 1 / 4 and worst_grad > 1 / 4
