"""Gaussian charges in a privacy budget (issue 39, item 2): exact composition.

An optimal plan's total of Gaussian charges is μ-GDP with μ = sqrt(Σ μᵢ²), converted to
ε at the budget's δ (Dong, Roth & Su 2022, Cor. 3.3 and 2.13); mixed with pure-ε and
(ε, δ) charges, the PLDs are composed by dp_accounting. The oracles are dp_accounting's
own accountants, under REPLACE_ONE: ``GaussianDpEvent(2/mu)`` (sensitivity 2 there)
and, for a pure-ε charge, two-bucket randomized response, whose PLD is the worst-case
ε-DP pair.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import pymc_manidp as pmd
from pymc_manidp.privacy import composition
from pymc_manidp.privacy.budget import BudgetExceededError, PrivacyBudget, check_state
from pymc_manidp.privacy.composition import GDP_RULE, MIXED_RULE
from pymc_manidp.stats import gaussian
from pymc_manidp.stats.gaussian import gaussian_delta, gaussian_mu

dpa = pytest.importorskip("dp_accounting")
from dp_accounting.pld import pld_privacy_accountant  # noqa: E402

NORTH = np.array([0, 0, 1.0])


def _gauss(epsilon, delta):
    return (epsilon, delta, gaussian_mu(epsilon, delta))


def _accountant_epsilon(plan, delta, *, multiplier=2.0):
    """dp_accounting's ε at ``delta`` for the plan's charges (REPLACE_ONE)."""
    acc = pld_privacy_accountant.PLDAccountant(dpa.NeighboringRelation.REPLACE_ONE)
    for charge in plan:
        if len(charge) == 3:
            acc.compose(dpa.GaussianDpEvent(multiplier / charge[2]))
        else:
            assert charge[1] == 0.0  # randomized response is a pure-epsilon pair
            p = 2.0 / (1.0 + math.exp(charge[0]))
            acc.compose(dpa.RandomizedResponseDpEvent(noise_parameter=p, num_buckets=2))
    return acc.get_epsilon(delta)


def _spent(plan, epsilon, delta):
    b = PrivacyBudget(epsilon, delta, composition="optimal", plan=plan)
    for c in plan:
        b.charge(c[0], c[1], mu=c[2] if len(c) == 3 else None)
    return b.spent


GAUSSIAN_SEQUENCES = [
    [_gauss(0.25, 1e-7)] * 16,
    [_gauss(0.1, 1e-8)] * 64,
    [_gauss(0.5, 1e-6), _gauss(0.2, 1e-9), _gauss(1 / 3, 1e-7)],
    [_gauss(2.0, 1e-5)] * 3,
]


@pytest.mark.parametrize("plan", GAUSSIAN_SEQUENCES, ids=["16", "64", "unequal", "3 large"])
def test_gaussian_totals_equal_dp_accountings(plan):
    spent = _spent(plan, 100.0, 1e-6)
    reference = _accountant_epsilon(plan, 1e-6)
    assert spent.rule == GDP_RULE and spent.proved and spent.delta == 1e-6
    # exact GDP never above the pessimistic PLD beyond the calibration margin (1e-7 in
    # delta), and below it by at most the PLD's discretization (1e-4 per composition)
    assert spent.epsilon <= reference + 1e-7
    assert spent.epsilon == pytest.approx(reference, rel=1e-4, abs=1e-6)
    mu_total = math.sqrt(math.fsum(c[2] ** 2 for c in plan))
    assert gaussian_delta(spent.epsilon, mu_total) <= 1e-6  # the total is a guarantee


def test_mixed_totals_equal_dp_accountings():
    g = _gauss(0.25, 1e-7)
    plan = [g, (0.3, 0.0), g, (0.1, 0.0), g, g, (0.05, 0.0)]
    spent = _spent(plan, 2.0, 1e-6)
    assert spent.rule == MIXED_RULE and spent.proved
    reference = _accountant_epsilon(plan, 1e-6)
    assert spent.epsilon == pytest.approx(reference, abs=2e-3)
    # below basic composition's epsilon, above the Gaussians' alone
    assert spent.epsilon < sum(c[0] for c in plan)
    assert spent.epsilon > _spent([g] * 4, 2.0, 1e-6).epsilon


def test_an_assumed_delta_mcmc_charge_is_counted_and_marks_the_total_unproved():
    g = _gauss(0.25, 1e-7)
    b = PrivacyBudget(2.0, 1e-5, composition="optimal", plan=[g, g, (0.2, 1e-6), g, g])
    for c in (g, g):
        b.charge(*c[:2], mu=c[2])
    b.charge(0.2, 1e-6, delta_basis="assumed", mechanism="Laplace", sampler="nuts")
    for c in (g, g):
        b.charge(*c[:2], mu=c[2])
    spent = b.spent
    assert not spent.proved and spent.rule == MIXED_RULE
    assert spent.epsilon > _spent([g] * 4, 2.0, 1e-5).epsilon
    with pytest.raises(ValueError, match="proved delta"):  # a Gaussian's delta is proved
        b.check(0.25, 1e-7, mu=g[2], delta_basis="assumed")


def test_a_linear_sum_of_mu_is_caught(monkeypatch):
    # the planted bug: mu_total = sum of mu_i instead of sqrt(sum mu_i^2)
    plan = GAUSSIAN_SEQUENCES[0]
    monkeypatch.setattr(gaussian, "compose_mu", lambda mus: math.fsum(mus))
    spent = _spent(plan, 1e6, 1e-6)
    assert spent.epsilon != pytest.approx(_accountant_epsilon(plan, 1e-6), rel=1e-4)


def test_the_replace_one_factor_is_caught(monkeypatch):
    # the planted bug: dp_accounting's GaussianDpEvent(1/mu) under REPLACE_ONE, i.e. a
    # Gaussian PLD of sd 1/(2 mu) at sensitivity 1 (twice the privacy loss)
    g = _gauss(0.25, 1e-7)
    plan = [g, (0.3, 0.0), g, g]
    honest = _spent(plan, 5.0, 1e-6).epsilon
    from dp_accounting.pld import privacy_loss_distribution as pld

    monkeypatch.setattr(
        composition,
        "_gaussian_pld",
        lambda mu: pld.from_gaussian_mechanism(standard_deviation=0.5 / mu, sensitivity=1.0),
    )
    planted = _spent(plan, 5.0, 1e-6).epsilon
    reference = _accountant_epsilon(plan, 1e-6)
    assert honest == pytest.approx(reference, abs=2e-3)
    assert planted != pytest.approx(reference, abs=2e-3)
    # and the oracle itself: the 1/mu multiplier misses the exact GDP total
    gdp = _spent([g] * 16, 100.0, 1e-6).epsilon
    assert _accountant_epsilon([g] * 16, 1e-6, multiplier=1.0) > 1.5 * gdp


def test_a_plan_of_gaussians_fits_where_basic_sums_do_not():
    # (1, 1e-6) over 16 releases: basic composition allows eps_i = 1/16 each; a plan of
    # 16 Gaussian charges at (0.2, 1e-7) fits by GDP, and the 17th is refused
    g = _gauss(0.2, 1e-7)
    b = PrivacyBudget(1.0, 1e-6, composition="optimal", plan=[g] * 16)
    assert b.planned.epsilon <= 1.0 and b.planned.rule == GDP_RULE
    for _ in range(16):
        b.charge(*g[:2], mu=g[2])
    assert b.spent.epsilon == b.planned.epsilon
    with pytest.raises(BudgetExceededError, match="all 16 charges of the plan are made"):
        b.charge(*g[:2], mu=g[2])
    # a plan past the budget is refused when declared, saying what to do
    with pytest.raises(ValueError, match="plan fewer or smaller charges"):
        PrivacyBudget(1.0, 1e-6, composition="optimal", plan=[g] * 40)


def test_a_charge_off_the_plan_is_refused_before_it_is_made():
    g = _gauss(0.2, 1e-7)
    b = PrivacyBudget(1.0, 1e-6, composition="optimal", plan=[g, g])
    with pytest.raises(BudgetExceededError, match="Gaussian with mu"):
        b.charge(0.2, 1e-7)  # the same (epsilon, delta) without its mu is another charge
    with pytest.raises(BudgetExceededError, match="charge 0 of the plan"):
        b.charge(0.2, 1e-7, mu=g[2] / 2)  # a smaller mu is still not the plan's
    assert b.entries == []


@pytest.mark.parametrize(
    ("mu", "error", "match"),
    [
        (True, TypeError, "mu must be a real number|not bools"),
        ("0.1", TypeError, "mu must be a real number"),
        (math.nan, ValueError, "mu must be a finite number > 0"),
        (0.0, ValueError, "mu must be a finite number > 0"),
        (-1.0, ValueError, "mu must be a finite number > 0"),
        (math.inf, ValueError, "mu must be a finite number > 0"),
        (10.0, ValueError, "is not \\(epsilon, delta\\)"),
    ],
)
def test_a_bad_mu_is_refused_saying_what_to_do(mu, error, match):
    b = PrivacyBudget(1.0, 1e-6)
    with pytest.raises(error, match=match):
        b.charge(0.2, 1e-7, mu=mu)
    with pytest.raises(error, match=match):
        PrivacyBudget(1.0, 1e-6, composition="optimal", plan=[(0.2, 1e-7, mu)])
    with pytest.raises(ValueError, match="not \\(epsilon, delta\\)"):  # a Gaussian needs delta
        b.charge(0.2, 0.0, mu=0.1)
    assert b.entries == []


ADVERSARIAL = st.sampled_from(
    [
        1 / 3,
        0.3333333333333333,
        5e-324,
        1e-300,
        math.nextafter(0.2, 1),
        math.nextafter(0.2, 0),
        1.0,
        1e308,
        10**400,
        math.inf,
        math.nan,
        0.0,
        True,
        None,
        "0.2",
    ]
) | st.floats(min_value=1e-12, max_value=50.0)


@given(epsilon=ADVERSARIAL, delta=ADVERSARIAL, mu=ADVERSARIAL, k=st.integers(1, 4))
def test_any_gaussian_charge_is_admitted_only_if_it_holds(epsilon, delta, mu, k):
    """charge(epsilon, delta, mu=) is refused (TypeError, ValueError or overspend,
    nothing recorded), or recorded with a mu at which mu-GDP is (epsilon, delta)-DP; the
    ledger reloads, and an optimal plan of k such charges totals at most its budget."""
    b = PrivacyBudget(1e300, 0.5)
    try:
        b.charge(epsilon, delta, mu=mu)
    except (TypeError, ValueError) as err:
        assert b.entries == [] and str(err)
        return
    e = b.entries[0]
    if mu is None:  # an (epsilon, delta) charge
        assert e["mu"] is None
        return
    assert gaussian_delta(e["epsilon"], e["mu"]) <= e["delta"]
    assert check_state(b._state())["entries"][0]["mu"] == e["mu"]
    try:
        plan = PrivacyBudget(1e300, 0.5, composition="optimal", plan=[(epsilon, delta, mu)] * k)
    except ValueError as err:
        assert "plan" in str(err)
        return
    for _ in range(k):
        plan.charge(epsilon, delta, mu=mu)
    assert plan.spent.epsilon <= 1e300 and plan.spent.delta <= 0.5


# --- the tangent Gaussian mechanism charges its mu ---------------------------------
def _data(n=40, seed=0):
    rng = np.random.default_rng(seed)
    S = pmd.Sphere(dim=2)
    return S, S.exp_coords(NORTH, np.clip(rng.normal(scale=0.1, size=(n, 2)), -0.2, 0.2))


def test_tangent_gaussian_releases_compose_as_gdp_under_a_plan():
    S, data = _data()
    mech = pmd.TangentGaussianMechanism(S, epsilon=0.2, delta=1e-7, center=NORTH, radius=0.3)
    charge = mech.planned_charge
    assert charge == _gauss(0.2, 1e-7) and mech.mu(40) <= charge[2]
    b = PrivacyBudget(1.0, 1e-6, composition="optimal", plan=[charge] * 16)
    rels = mech.release_many([data] * 12, random_seed=0, budget=b)
    assert len(rels) == 12 and [e["mu"] for e in b.entries] == [charge[2]] * 12
    for seed in range(4):
        mech.release(data, random_seed=seed, budget=b)
    assert b.spent.rule == GDP_RULE and b.spent.epsilon <= 1.0
    # the 17th is refused before the data are read (they would not pass the checks)
    with pytest.raises(BudgetExceededError, match="all 16 charges"):
        mech.release(np.full((40, 3), np.nan), budget=b)
    assert len(b.entries) == 16


def test_a_gaussian_release_that_does_not_fit_is_refused_before_the_charge(monkeypatch):
    S, data = _data()
    mech = pmd.TangentGaussianMechanism(S, epsilon=0.2, delta=1e-7, center=NORTH, radius=0.3)

    def never(*_):
        raise AssertionError("the data were read")

    monkeypatch.setattr(type(mech), "mean_coords", never)
    other = pmd.TangentGaussianMechanism(S, epsilon=0.3, delta=1e-7, center=NORTH, radius=0.3)
    b = PrivacyBudget(1.0, 1e-6, composition="optimal", plan=[other.planned_charge] * 3)
    with pytest.raises(BudgetExceededError, match="Gaussian with mu"):
        mech.release(data, budget=b)
    with pytest.raises(BudgetExceededError):
        mech.release_many([data] * 2, budget=b)
    basic = PrivacyBudget(0.1, 1e-6)  # basic: (0.2, 1e-7) overspends epsilon
    with pytest.raises(BudgetExceededError, match="nothing was computed"):
        mech.release(data, budget=basic)
    assert b.entries == [] and basic.entries == []


def _mp_delta(eps, mu):
    """Balle & Wang 2018, Thm 8, in mpmath at 60 digits (no cancellation tricks)."""
    import mpmath

    with mpmath.workdps(60):
        eps, mu = mpmath.mpf(eps), mpmath.mpf(mu)
        return mpmath.ncdf(mu / 2 - eps / mu) - mpmath.e**eps * mpmath.ncdf(-mu / 2 - eps / mu)


@given(
    epsilon=st.sampled_from([1.0, 1 / 3, 0.3333333333333333, 0.1, 2.0, math.nextafter(1.0, 2)]),
    delta=st.sampled_from([1e-6, 1e-10, 1 / 3, 1e-300, math.nextafter(1e-6, 0)]),
    k=st.integers(2, 64),
)
def test_a_gaussian_plan_cut_exactly_at_the_budget_fits(epsilon, delta, k):
    # the engineer's report: k charges of mu/sqrt(k), mu calibrated at the budget itself,
    # read eps = 1.0000000000000007 (compose_mu rounds up, gdp_epsilon kept the same
    # margin as the calibration) and the plan was refused
    mu = gaussian_mu(epsilon, delta)
    plan = [(epsilon, delta, mu / math.sqrt(k))] * k
    budget = PrivacyBudget(epsilon, delta, composition="optimal", plan=plan)
    planned = budget.planned
    assert planned.epsilon <= epsilon and planned.delta <= delta
    # still an upper bound: the composed mu's true delta at the epsilon read is <= delta
    import mpmath

    with mpmath.workdps(60):
        mu_true = mpmath.sqrt(k * mpmath.mpf(mu / math.sqrt(k)) ** 2)  # exact, not rounded
        assert _mp_delta(planned.epsilon, mu_true) <= delta
    assert _mp_delta(gaussian.gdp_epsilon(mu, delta), mu) <= delta


@given(
    mu=st.sampled_from([1e-3, 0.1, 0.2367, 1.0, 3.0, 1 / 3]),
    delta=st.sampled_from([1e-6, 1e-10, 0.01, 1e-300]),
)
def test_gdp_epsilon_is_an_upper_bound(mu, delta):
    eps = gaussian.gdp_epsilon(mu, delta)
    assert _mp_delta(eps, mu) <= delta
    if eps > 0:  # and tight: one ulp below it is over delta, or within the margin
        below = math.nextafter(eps, 0)
        assert _mp_delta(below, mu) > delta * (1 - gaussian.DELTA_MARGIN)


def test_remaining_delta_zero_after_a_composed_total_still_admits_the_plan():
    # documented, not changed: a composed total is read at the budget's delta, so the
    # delta left reads 0 after the first Gaussian charge; the plan's charges still fit
    charge = _gauss(0.5, 1e-7)
    budget = PrivacyBudget(1.0, 1e-6, composition="optimal", plan=[charge] * 4)
    for _ in range(4):
        budget.charge(charge[0], charge[1], mu=charge[2])
        assert budget.spent.rule == GDP_RULE and budget.remaining[1] == 0.0
    assert budget.spent.epsilon == budget.planned.epsilon <= 1.0


def _edge_mu(epsilon, delta):
    """The largest mu whose *computed* delta(mu) is at most ``delta`` (no margin): the
    sub-ulp edge, where the computed delta's 1e-13 relative error decides."""
    lo, hi = 1e-300, 1e3
    while True:
        mid = 0.5 * (lo + hi)
        if mid <= lo or mid >= hi:
            return lo
        lo, hi = (mid, hi) if gaussian_delta(epsilon, mid) <= delta else (lo, mid)


@given(
    epsilon=st.sampled_from([1.0, 1 / 3, 0.1, 2.0, 1e-3, 5.0, 1e-8, math.nextafter(1.0, 2)]),
    delta=st.sampled_from([1e-6, 1e-10, 1 / 3, 1e-300, 0.01, 1e-100, 5e-324, 1e-310]),
    nudge=st.sampled_from([0, -1, -2]),
)
def test_a_gaussian_charge_at_the_sub_ulp_edge_is_refused_or_proved(epsilon, delta, nudge):
    """A charge's mu is admitted only if mu-GDP is (epsilon, delta)-DP in exact
    arithmetic (60-digit mpmath), not only in the computed delta(mu): the mu whose
    computed delta equals delta had a true delta up to 1e-13 relative above it and was
    charged as (epsilon, delta) (found by the adversarial pass, 16 of 42 such charges).
    Below 1e-300 no Gaussian charge is taken (delta(mu) is subnormal there)."""
    mu = _edge_mu(epsilon, delta)
    for _ in range(-nudge):
        mu = math.nextafter(mu, 0.0)
    b = PrivacyBudget(1e300, 0.5)
    try:
        b.charge(epsilon, delta, mu=mu)
    except ValueError as err:
        assert b.entries == [] and ("mu" in str(err) or "delta" in str(err))
        return
    assert delta >= gaussian.MIN_DELTA
    assert _mp_delta(epsilon, mu) <= delta
    # the mechanisms' own mu (calibrated with its margin) is still admitted
    b.charge(epsilon, delta, mu=gaussian_mu(epsilon, delta))
