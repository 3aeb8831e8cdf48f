"""The flat exact regression sampler: K-norm pilot, then uniform proposals (issue 41).

On ``Euclidean`` with a footpoint_radius the K-norm proposals around the least-squares
fit run for a fixed count (``max_attempts`` per draw); draws still missing are made by
rejection from the uniform law of the compact public domain, whose chance of giving up
is proved from public facts (docs/regression.md, "The flat sampler's pilot-then-switch").
Releases beyond that proof are refused before the charge and before the responses are
read; no data set makes a release fail after the charge.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

import pymc_manidp as pmd
import pymc_manidp.mechanisms.regression as RM
from tests.untouchable import Untouchable

ALPHA = 0.01
N = 40


def flat(epsilon, *, d=2, R=1.0, V=1.0, max_attempts=10_000):
    return pmd.RegressionKNGMechanism(
        pmd.Euclidean(dim=d), epsilon=epsilon, center=np.zeros(d), radius=1.0,
        covariate_bound=1.0, slope_bound=V, footpoint_radius=R, max_attempts=max_attempts,
    )  # fmt: skip


def tiny_spread():
    """Covariates of spread 1e-3: the least-squares slope is about 500, far outside V = 1."""
    x = np.where(np.arange(N) % 2 == 0, 1e-3, -1e-3)
    return x, np.stack([0.5 * np.sign(x), np.zeros(N)], axis=1)


def edge_of_ball():
    """Responses at the ball's edge: the fitted footpoint (1, 0) lies outside R = 0.05."""
    x = np.linspace(-1, 1, N)
    return x, np.tile([1.0, 0.0], (N, 1))


def ordinary():
    """An ordinary data set whose fit is inside the domain: at n epsilon = 2 the K-norm
    law is far wider than the domain and the old sampler gave up after the charge."""
    x = np.linspace(-1, 1, N)
    return x, np.stack([0.3 * x, 0.1 * np.ones(N)], axis=1)


@pytest.mark.parametrize(
    "data, R",
    [(tiny_spread, 1.0), (edge_of_ball, 0.05), (ordinary, 1.0)],
    ids=["tiny-covariate-spread", "responses-at-the-edge", "ordinary-small-epsilon"],
)
def test_fit_outside_the_domain_releases_instead_of_failing_after_the_charge(data, R):
    # each failed on the old sampler with ExactSamplingError after charging epsilon
    x, y = data()
    epsilon = 0.05  # n epsilon = 2, below the largest proved (7.1 at R = 1, 10.4 at 0.05)
    mech = flat(epsilon, R=R)
    budget = pmd.PrivacyBudget(1.0)
    rel = mech.release(x, y, random_seed=5, budget=budget)
    assert budget.spent.epsilon == pytest.approx(epsilon) and len(budget.entries) == 1
    assert mech.exact_failure(N).log2_failure <= -64
    p, v = rel.value
    assert np.linalg.norm(p) <= R and np.linalg.norm(v) <= 1.0
    note = [s for s in rel.notes if "proved from public facts" in s]
    assert len(note) == 1 and float(note[0].split("2^")[1].split()[0]) <= -64


def test_switching_after_the_pilot_keeps_the_law(monkeypatch):
    # two-sample KS (alpha = 0.01, 1,000 draws each, seeded) of |grad E|/sigma and of the
    # slope's first coordinate: a pilot of 1 proposal per draw (about 45% of the draws
    # made by the uniform stage) against the K-norm stage alone (a cap it never reaches)
    x, y = ordinary()
    x = 0.5 * x
    kw = {"d": 1, "R": 0.6, "V": 0.6}
    y = y[:, :1]
    pure, info = flat(2.0, **kw, max_attempts=10**6).sample(
        x, y, 1000, random_seed=11, return_info=True
    )
    assert info["switched"] == 0
    # the pilot's cap of 1, the uniform stage's a cap it never reaches
    uniform = RM.sample_regression_kng_uniform
    monkeypatch.setattr(
        RM, "sample_regression_kng_uniform",
        lambda *a, **k: uniform(*a, **{**k, "max_attempts": 10**6}),
    )  # fmt: skip
    mixed, info = flat(2.0, **kw, max_attempts=1).sample(
        x, y, 1000, random_seed=12, return_info=True
    )
    assert 200 < info["switched"] < 800
    mech = flat(2.0, **kw)

    def g(draws):
        return np.array([mech.grad_norm(p, v, x, y) for p, v in draws])

    assert stats.ks_2samp(g(pure), g(mixed)).pvalue > ALPHA
    assert stats.ks_2samp(pure[:, 1, 0], mixed[:, 1, 0]).pvalue > ALPHA
    assert stats.ks_2samp(pure[:, 0, 0], mixed[:, 0, 0]).pvalue > ALPHA


def test_beyond_the_proof_is_refused_before_the_charge_and_before_reading():
    ne = flat(1.0).largest_n_epsilon()
    assert 1 < ne < 100
    x, _ = tiny_spread()
    budget = pmd.PrivacyBudget(1e9)
    with pytest.raises(ValueError, match=rf"largest n epsilon proved .* is {ne:.4g}: use"):
        flat(ne * (1 + 1e-6) / N).release(x, Untouchable(N, (2,)), random_seed=1, budget=budget)
    assert budget.spent.epsilon == 0 and budget.entries == []
    # without a footpoint_radius there is no compact domain: the K-norm sampler alone,
    # no proved bound (and no refusal)
    assert flat(1.0, R=None).exact_failure(N) is None
