"""The sequential KNG release of geodesic regression (issue 41 item 2): the footpoint by
the mean's KNG, then the slope by KNG on the footpoint's tangent space.

Oracles (docs/regression.md, "The sequential release"):

- stage 2's sensitivity ``Delta_v`` (Theorem 2 with footpoint radius ``R = r``) against
  an adversarial search over neighbouring data sets at footpoints of ``B_r(m)``;
- in ``Euclidean``, ``grad_v E(p, v) = mean(x^2) (v - v*)`` with ``v*`` written here, so
  ``|grad_v E(p~, v~)|/sigma_2 ~ Gamma(d, 1)`` given the footpoint, exactly;
- the curved fibre sampler on a radial density, whose radius law is a truncated Gamma.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats

import pymc_manidp as pmd
from pymc_manidp.laws.exact import ExactSamplingError
from pymc_manidp.laws.regression_fibre import sample_fibre_kng_uniform
from pymc_manidp.privacy import PrivacyBudget
from pymc_manidp.stats.regression import regression_sensitivity
from tests.stats.test_regression import SPACES, _largest_change, base_point

ALPHA = 0.01


def flat_problem(n=30, d=2, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1.0, 1.0, n)
    y = 0.1 + np.outer(x, np.linspace(0.1, 0.2, d)) + rng.normal(0, 0.1, (n, d))
    return x, np.clip(y, -0.6, 0.6)


def flat_mechanism(d=2, epsilon=1.0, **kw):
    return pmd.SequentialRegressionKNGMechanism(
        pmd.Euclidean(dim=d), epsilon=epsilon, center=np.zeros(d), radius=1.0,
        covariate_bound=1.0, slope_bound=1e3, **kw,
    )  # fmt: skip


def sphere_mechanism(epsilon=2.0):
    return pmd.SequentialRegressionKNGMechanism(
        pmd.Sphere(dim=2), epsilon=epsilon, center=[1.0, 0.0, 0.0], radius=0.5,
        covariate_bound=1.0, slope_bound=0.5,
    )  # fmt: skip


def sphere_problem(n=20, seed=0):
    S = pmd.Sphere(dim=2)
    rng = np.random.default_rng(seed)
    x = np.linspace(-1, 1, n)
    y = S.exp(np.broadcast_to([1.0, 0, 0], (n, 3)), x[:, None] * np.array([0, 0.3, 0]))
    y = y + rng.normal(0, 0.02, y.shape)
    return x, y / np.linalg.norm(y, axis=1, keepdims=True)


@pytest.mark.parametrize(
    ("name", "r", "X", "V"),
    [("S2", 0.3, 1.0, 0.1), ("H2", 0.5, 1.0, 1.0), ("SPD2", 0.5, 1.0, 1.0)],
)
def test_stage_two_sensitivity_holds_at_footpoints_of_the_data_ball(name, r, X, V):
    # adversarial search (seeded): 300 (p, v) with p in B_r(m) (where stage 1 puts the
    # footpoint), 25 responses of the ball's edge and its center, every pair replaced
    M = SPACES[name]
    kw = {} if name == "S2" else {"epsilon": 1.0}
    mech = pmd.SequentialRegressionKNGMechanism(
        M, epsilon=kw.get("epsilon", 1.0), center=base_point(M), radius=r,
        covariate_bound=X, slope_bound=V,
    )  # fmt: skip
    n = 10
    dv = mech.sensitivity(n)
    assert (
        dv
        == regression_sensitivity(
            M, n, radius=r, covariate_bound=X, slope_bound=V, footpoint_radius=r
        )[1]
    )
    rng = np.random.default_rng(41)
    _, worst_v = _largest_change(M, base_point(M), r, X, V, r, rng, 300, aimed=name != "S2")
    assert worst_v / n <= dv * (1 + 1e-9)
    assert worst_v / n >= dv / 2


@pytest.mark.parametrize("d", [1, 2])
def test_flat_slope_law_given_the_footpoint_is_a_gamma_k_norm_and_a_wrong_sigma_is_caught(d):
    # 2,000 seeded releases' slopes given their footpoints; alpha = 0.01
    x, y = flat_problem(d=d)
    mech = flat_mechanism(d=d)
    draws = mech.sample(x, y, 2000, random_seed=5)
    p, v = draws[:, 0], draws[:, 1]
    x2 = np.mean(x * x)
    star = (np.mean(x[:, None] * y, axis=0) - np.mean(x) * p) / x2  # v* written here
    g = x2 * np.sqrt(np.sum((v - star) ** 2, axis=1))
    sigma = mech.sigma(len(x))
    assert sigma == pytest.approx(2 * mech.sensitivity(len(x)) / mech.epsilon_2)
    assert stats.kstest(g / sigma, stats.gamma(d).cdf).pvalue > ALPHA
    assert stats.kstest(g / (1.2 * sigma), stats.gamma(d).cdf).pvalue < ALPHA
    assert stats.kstest(g / sigma, stats.gamma(2 * d).cdf).pvalue < ALPHA  # the joint's radius


def test_the_fibre_sampler_draws_a_radial_density_exactly():
    # g(c) = |c|: the radius has density ~ e^{-s/sigma} s on [0, V] (d = 2), a Gamma(2,
    # sigma) truncated at V; 2,000 seeded draws, alpha = 0.01; sigma x 1.3 caught
    sigma, V = 0.2, 0.5
    out = sample_fibre_kng_uniform(
        2, lambda c: float(np.linalg.norm(c)), sigma, V, 2000, np.random.default_rng(3)
    )
    s = np.linalg.norm(out.points, axis=1)

    def cdf(t, sig):
        return stats.gamma(2, scale=sig).cdf(t) / stats.gamma(2, scale=sig).cdf(V)

    assert stats.kstest(s, lambda t: cdf(t, sigma)).pvalue > ALPHA
    assert stats.kstest(s, lambda t: cdf(t, 1.3 * sigma)).pvalue < ALPHA


def test_one_call_one_record_one_charge_of_epsilon():
    x, y = sphere_problem(10)  # n eps = 20: inside the proved failure bound (21.3)
    mech = sphere_mechanism()
    budget = PrivacyBudget(3.0)
    rel = mech.release(x, y, random_seed=7, budget=budget)
    assert budget.spent.epsilon == 2.0 and len(budget.entries) == 1
    assert rel.value.shape == (2, 3) and rel.delta == 0.0 and rel.epsilon == 2.0
    assert mech.epsilon_1 + mech.epsilon_2 == 2.0
    assert rel.sensitivity == mech.sensitivities(10)[1]
    assert rel.sigma == pytest.approx(2 * rel.sensitivity / mech.epsilon_2)
    note = next(n for n in rel.notes if n.startswith("sequential release"))
    assert repr(mech.footpoint_mechanism.sigma(10)) in note
    S = pmd.Sphere(dim=2)
    p, v = rel.value
    assert S.dist([1.0, 0, 0], p) <= 0.5 + 1e-12  # stage 1 stays in the data ball
    assert abs(float(p @ v)) < 1e-12 and np.linalg.norm(v) <= 0.5 + 1e-12
    again = mech.release(x, y, random_seed=7)
    np.testing.assert_array_equal(again.value, rel.value)


@pytest.mark.parametrize(
    ("kwargs", "err", "match"),
    [
        ({"split": 0.0}, ValueError, r"split must be in \(0, 1\)"),
        ({"split": 1.0}, ValueError, r"split must be in \(0, 1\)"),
        ({"split": float("nan")}, ValueError, r"split must be in \(0, 1\)"),
        ({"split": True}, TypeError, "split must be a float"),
        ({"split": "0.5"}, TypeError, "split must be a float"),
        # an int with no float was an OverflowError (the two-stage tangent had the fix)
        ({"split": 10**400}, ValueError, r"split must be in \(0, 1\)"),
        ({"split": -(10**400)}, ValueError, r"split must be in \(0, 1\)"),
    ],
)
def test_bad_splits_are_refused_by_message(kwargs, err, match):
    with pytest.raises(err, match=match):
        flat_mechanism(**kwargs)


def test_a_subnormal_split_is_refused_before_the_charge():
    # epsilon_1 = 5e-324 is positive, but stage 1's sigma overflows: a public fact
    x, y = flat_problem()
    budget = PrivacyBudget(3.0)
    with pytest.raises(ValueError, match="overflowed"):
        flat_mechanism(split=5e-324).release(x, y, budget=budget)
    assert budget.spent.epsilon == 0 and budget.entries == []


def test_premises_are_checked_with_the_data_ball_as_footpoint_ball():
    # 2r + XV must stay below the injectivity radius on compact spaces (stage 1's
    # footpoint can be anywhere in B_r(m)); r = 0.7 < r* = pi/4 but 1.4 + 1.8 > pi
    with pytest.raises(ValueError, match="reaches the injectivity radius"):
        pmd.SequentialRegressionKNGMechanism(
            pmd.Sphere(dim=2), epsilon=1.0, center=[1.0, 0, 0], radius=0.7,
            covariate_bound=1.0, slope_bound=1.8,
        )  # fmt: skip


@pytest.mark.parametrize(
    ("x", "match"),
    [(np.linspace(-3, 3, 20), "exceeds the public covariate bound"), (np.ones(20), "single")],
)
def test_public_refusals_come_before_the_charge(x, match):
    _, y = sphere_problem()
    budget = PrivacyBudget(3.0)
    with pytest.raises(ValueError, match=match):
        sphere_mechanism().release(x, y, budget=budget)
    assert budget.spent.epsilon == 0 and budget.entries == []


def test_the_joint_density_is_not_offered():
    x, y = sphere_problem()
    with pytest.raises(NotImplementedError, match="no joint density"):
        sphere_mechanism().logp(np.zeros((2, 3)), x, y)


ADVERSARIAL = st.one_of(
    st.sampled_from(
        [1 / 3, 0.3333333333333333, math.nextafter(1 / 3, 0), 5e-324, 1e308, 10**400, 0, -1.0]
    ),
    st.sampled_from([math.nan, math.inf, -math.inf, True, "0.5", None, [0.5], np.array([0.5])]),
    st.floats(min_value=1e-3, max_value=3.0),
    st.floats(min_value=1e-3, max_value=0.999),
)


@given(split=ADVERSARIAL, X=ADVERSARIAL, V=ADVERSARIAL)
def test_constructor_and_release_contract(split, X, V):
    # a mechanism whose release is refused before the charge or charged exactly once, or
    # TypeError/ValueError naming the argument or the premise; never a traceback
    x, y = sphere_problem(n=8)
    try:
        mech = pmd.SequentialRegressionKNGMechanism(
            pmd.Sphere(dim=2), epsilon=2.0, center=[1.0, 0, 0], radius=0.5,
            covariate_bound=X, slope_bound=V, split=split,
        )  # fmt: skip
    except (TypeError, ValueError) as err:
        words = ("split", "covariate_bound", "slope_bound", "injectivity radius", "epsilon")
        assert any(k in str(err) for k in words), err
        return
    assert 0 < mech.epsilon_1 and 0 < mech.epsilon_2 and mech.epsilon_1 + mech.epsilon_2 <= 2.0
    assert 1.0 + mech.covariate_bound * mech.slope_bound < math.pi
    budget = PrivacyBudget(5.0)
    try:
        rel = mech.release(x, y, budget=budget, random_seed=0)
    except ValueError as err:  # public facts: nothing charged
        assert budget.spent.epsilon == 0, err
        return
    except ExactSamplingError:  # after the data were read: the charge stands
        assert budget.spent.epsilon == 2.0
        return
    assert budget.spent.epsilon == 2.0 and np.all(np.isfinite(rel.value))
