"""The flat K-norm samplers with no compact footpoint domain: a proved acceptance floor.

``RegressionKNGMechanism`` on ``Euclidean`` without a footpoint_radius, and the
sequential release's slope on ``Euclidean``, propose from the K-norm law around the
least-squares fit and keep what lands in the slope ball. The acceptance has a lower
bound from public facts only (the covariates, σ, r, V: docs/regression.md, "The flat
samplers' acceptance floor"); releases whose bound on giving up is above ``2^-64`` are
refused before the charge and before the responses are read.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import pymc_manidp as pmd
import pymc_manidp.laws.regression_floor as RF
from pymc_manidp.laws.exact import ExactSamplingError
from pymc_manidp.stats.regression import covariate_gram
from tests.untouchable import Untouchable

N = 40
CASES = 60  # random data sets per Monte Carlo check
DRAWS = 20_000  # K-norm proposals per data set


def _data(rng, t):
    """Adversarial data sets: responses on the ball's edge split by the covariate (the
    largest OLS slope), or uniform in the ball; covariates of spread 0.03 to 1, some
    far from centred."""
    d, n = int(rng.integers(1, 4)), int(rng.integers(3, 30))
    r, V = float(rng.uniform(0.2, 2)), float(rng.uniform(0.1, 3))
    sigma = float(10 ** rng.uniform(-2, 0.5))
    x = rng.uniform(-1, 1) * (t % 2) + 10 ** rng.uniform(-1.5, 0) * rng.uniform(-1, 1, n)
    e = rng.standard_normal(d)
    e /= np.linalg.norm(e)
    if t % 3 == 0:
        y = np.sign(x - x.mean())[:, None] * e * r
    else:
        y = rng.standard_normal((n, d))
        y *= r * rng.uniform(0, 1, (n, 1)) ** (1 / d) / np.linalg.norm(y, axis=1, keepdims=True)
    return d, r, V, sigma, x, y, -e * r


def _unit(rng, shape):
    u = rng.standard_normal(shape)
    return u / np.sqrt(np.sum(u * u, axis=tuple(range(1, len(shape))), keepdims=True))


def _violations():
    """Cases (of ``CASES``, seeded) where a bound exceeds the measured acceptance by more
    than 5 standard errors (a false alarm below 3e-7 per case)."""
    rng = np.random.default_rng(20261128)
    bad = []
    for t in range(CASES):
        d, r, V, sigma, x, y, p = _data(rng, t)
        # the joint law: K-norm around the OLS fit through the Gram's inverse
        G = covariate_gram(x)
        fit = np.linalg.solve(G, np.stack([y.mean(0), (x[:, None] * y).mean(0)]))
        z = rng.gamma(2 * d, 1.0, DRAWS)[:, None, None] * _unit(rng, (DRAWS, 2, d))
        theta = fit + sigma * np.einsum("ab,mbd->mad", np.linalg.inv(G), z)
        joint = np.mean(np.linalg.norm(theta[:, 1], axis=1) <= V)
        # the fibre at a footpoint on the ball's edge
        x2 = np.mean(x * x)
        star = (x[:, None] * (y - p)).mean(0) / x2
        v = star + (sigma / x2) * rng.gamma(d, 1.0, DRAWS)[:, None] * _unit(rng, (DRAWS, d))
        fibre = np.mean(np.linalg.norm(v, axis=1) <= V)
        kw = {"radius": r, "slope_bound": V, "sigma": sigma, "dim": d}
        for acc, bound in [
            (joint, RF.flat_regression_log_acceptance(x, **kw)),
            (fibre, RF.fibre_flat_log_acceptance(x, **kw)),
        ]:
            se = math.sqrt(max(acc * (1 - acc), 1 / DRAWS) / DRAWS)
            if math.exp(bound) > acc + 5 * se:
                bad.append((t, math.exp(bound), acc))
    return bad


def test_the_bound_is_never_above_the_measured_acceptance():
    assert _violations() == []


def test_a_planted_wrong_bound_is_caught(monkeypatch):
    # the slope ball's bound as if the least-squares slope were always at its centre
    # (the reach r/sqrt(var x), 2r/sqrt(mean x^2) dropped)
    hit = RF._log_ball_hit
    monkeypatch.setattr(RF, "_log_ball_hit", lambda s, reach, V, d: hit(s, 0.0, V, d))
    assert len(_violations()) >= 3


def tiny_spread():
    """Covariates of spread 1e-3: the least-squares slope is about 500, far outside V = 1."""
    x = np.where(np.arange(N) % 2 == 0, 1e-3, -1e-3)
    return x, np.stack([0.5 * np.sign(x), np.zeros(N)], axis=1)


def joint(epsilon, V=1.0):
    return pmd.RegressionKNGMechanism(
        pmd.Euclidean(dim=2), epsilon=epsilon, center=np.zeros(2), radius=1.0,
        covariate_bound=1.0, slope_bound=V,
    )  # fmt: skip


def sequential(epsilon, V=1.0):
    return pmd.SequentialRegressionKNGMechanism(
        pmd.Euclidean(dim=2), epsilon=epsilon, center=np.zeros(2), radius=1.0,
        covariate_bound=1.0, slope_bound=V,
    )  # fmt: skip


@pytest.mark.parametrize("make", [joint, sequential], ids=["joint", "sequential"])
def test_tiny_covariate_spread_is_refused_before_the_charge_and_before_reading(make, monkeypatch):
    x, y = tiny_spread()
    budget = pmd.PrivacyBudget(1e9)
    with pytest.raises(ValueError, match=r"acceptance floor'\). Spread or centre"):
        make(1.0).release(x, Untouchable(N, (2,)), random_seed=1, budget=budget)
    assert budget.spent.epsilon == 0 and budget.entries == []
    assert make(1.0).exact_failure(N, x).log2_failure > -64
    # the old code (no refusal) gave up after the charge
    monkeypatch.setattr(type(make(1.0)), "check_exact_failure", lambda *a: None)
    with pytest.raises(ExactSamplingError):
        make(1.0).release(x, y, random_seed=1, budget=budget)
    assert budget.spent.epsilon == pytest.approx(1.0)


@pytest.mark.parametrize("make", [joint, sequential], ids=["joint", "sequential"])
def test_an_ordinary_release_records_its_proved_bound(make):
    x = np.linspace(-1, 1, N)
    y = np.stack([0.3 * x, 0.1 * np.ones(N)], axis=1)
    # V = 4 is above the reach of any least-squares slope of these covariates
    # (r/sqrt(var x) = 1.7 joint, 2r/sqrt(mean x^2) = 3.4 on a fibre)
    rel = make(1.0, V=4.0).release(x, y, random_seed=3)
    bound = make(1.0, V=4.0).exact_failure(N, x)
    assert bound.log2_failure <= -64
    note = [s for s in rel.notes if "proved from public facts" in s]
    assert len(note) == 1 and f"2^{bound.log2_failure:.4g} " in note[0]
    # no covariates, no bound (it depends on them)
    assert make(1.0).exact_failure(N) is None
