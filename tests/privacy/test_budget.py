"""The privacy budget (issue 27): charged before the data are read, exact totals,
composition as dp_accounting computes it, MCMC deltas kept out of proved totals."""

from __future__ import annotations

import copy
import decimal
import hashlib
import json
import math
import threading
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

import pymc_manidp as pmd
from pymc_manidp.privacy.budget import (
    VERSION,
    BudgetExceededError,
    LedgerError,
    check_state,
    current_budget,
    seal,
)
from pymc_manidp.privacy.release import Calibration, build_release
from pymc_manidp.stats.sensitivity import calibrated_sigma

S2 = pmd.Sphere(dim=2)
NORTH = np.array([0.0, 0.0, 1.0])
DATA = np.array([[0, 0, 1.0], [0, 0.6, 0.8], [0.6, 0, 0.8]])


class Touched(Exception):
    """Raised by Untouchable on any access to the data."""


class Untouchable:
    """Data whose every access raises: proves the data were not read.

    Only the public facts a release checks before its charge are readable: the shape
    (``n`` and a record's shape, 3 sphere records) and the dtype (issue 43, item 4).
    """

    shape = (3, 3)
    dtype = np.dtype(float)

    def __getattr__(self, name):
        raise Touched(name)

    def __array__(self, *args, **kwargs):
        raise Touched("__array__")

    def __len__(self):
        raise Touched("__len__")

    def __getitem__(self, item):
        raise Touched("__getitem__")

    def __iter__(self):
        raise Touched("__iter__")


def kng(epsilon):
    return pmd.KNGMechanism(S2, epsilon=epsilon, center=NORTH, radius=0.7)


def test_an_overspend_below_the_sixth_digit_prints_the_digits_that_show_it():
    """Asking 0.5000000000000001 of the 0.5 left was printed "asks for epsilon = 0.5 ...
    has epsilon = 0.5 left": a refusal that read as a bug. Numbers that six digits name
    exactly keep six digits."""
    b = pmd.PrivacyBudget(1.0)
    kng(0.5).release(DATA, budget=b, random_seed=0)
    with pytest.raises(BudgetExceededError) as info:
        kng(0.5000000000000001).release(Untouchable(), budget=b)
    msg = str(info.value)
    assert "asks for epsilon = 0.5000000000000001" in msg, msg
    assert "has spent epsilon = 0.5," in msg and "has epsilon = 0.5, delta = 0 left" in msg


def test_overspending_is_refused_before_the_data_are_read():
    b = pmd.PrivacyBudget(1.0)
    kng(0.6).release(DATA, budget=b, random_seed=0)
    with pytest.raises(BudgetExceededError) as info:
        kng(0.5).release(Untouchable(), budget=b)
    msg = str(info.value)
    # what is spent, what is left, what was asked, and that nothing happened
    assert "asks for epsilon = 0.5" in msg
    assert "has spent epsilon = 0.6" in msg and "epsilon = 0.4" in msg and "left" in msg
    assert "nothing was computed or released" in msg
    assert info.value.spent == (0.6, 0.0) and info.value.asked == (0.5, 0.0)
    assert info.value.remaining == (0.4, 0.0)
    assert b.spent.epsilon == 0.6 and len(b.entries) == 1  # the refusal charged nothing
    # the same object is read by a release that fits: it raises, so the refusal above
    # really came before any access; the charge stands, marked failed
    with pytest.raises(Touched):
        kng(0.4).release(Untouchable(), budget=b)
    assert b.entries[-1]["status"] == "failed" and b.entries[-1]["error"] == "Touched"
    assert b.spent.epsilon == 1.0 and b.remaining == (0.0, 0.0)


def test_the_entered_budget_is_charged_and_is_per_context():
    b = pmd.PrivacyBudget(2.0)
    assert current_budget() is None
    with b:
        r1 = kng(0.5).release(DATA, random_seed=1)
        other = pmd.PrivacyBudget(1.0)
        # nested: refused (issue 38 item 11; tests/privacy/test_budget_nesting.py)
        with pytest.raises(ValueError, match="another privacy budget is entered"), other:
            kng(0.25).release(DATA, random_seed=2)  # pragma: no cover - never reached
        assert current_budget() is b
        seen = []
        thread = threading.Thread(target=lambda: seen.append(current_budget()))
        thread.start()
        thread.join()
        assert seen == [None]  # a contextvar, not a global: another thread has none
    assert current_budget() is None
    assert b.spent.epsilon == 0.5 and other.spent.epsilon == 0
    assert b.releases == [r1.public()]
    kng(0.5).release(DATA, random_seed=3)  # outside: nothing charged
    assert b.spent.epsilon == 0.5


def test_pure_epsilon_totals_are_exact():
    b = pmd.PrivacyBudget(1.0)
    for _ in range(10):
        b.charge(0.1)
    assert b.spent.epsilon == 1.0 and b.spent.proved and b.remaining == (0.0, 0.0)
    with pytest.raises(
        BudgetExceededError,
        match="has spent epsilon = 1, delta = 0 and has epsilon = 0, delta = 0 left",
    ):
        b.charge(1e-9)
    # float addition would not give these: 0.1 + 0.2 != 0.3 in floating point
    rng = np.random.default_rng(0)
    eps = [round(float(e), 3) for e in rng.uniform(0.001, 0.2, 40)]
    total = sum(Fraction(str(e)) for e in eps)
    b = pmd.PrivacyBudget(float(total))
    for e in eps:
        b.charge(e)
    assert Fraction(str(b.spent.epsilon)) == total
    assert b.remaining == (0.0, 0.0)
    assert "Theorem 3.16" in b.spent.rule


def test_basic_composition_adds_deltas():
    b = pmd.PrivacyBudget(1.0, delta=1e-5)
    for _ in range(3):
        b.charge(0.2, 3e-6)
    # exact sums (in floating point 3 * 0.2 = 0.6000000000000001)
    assert (b.spent.epsilon, b.spent.delta) == (0.6, 9e-6)
    with pytest.raises(BudgetExceededError, match="delta = 3e-06"):
        b.charge(0.1, 3e-6)  # epsilon fits, delta does not


def test_optimal_composition_equals_dp_accounting():
    pld_mod = pytest.importorskip("dp_accounting.pld.privacy_loss_distribution")
    from dp_accounting.pld import common

    # (eps, delta) releases: dp_accounting's own self-composition as the oracle. A
    # budget of 3 < 40 * 0.1: the basic sum does not fit, so the PLD total is reported
    plan = [(0.1, 1e-8)] * 40 + [(0.4, 1e-8)]
    b = pmd.PrivacyBudget(3.0, delta=1e-5, composition="optimal", plan=plan)
    for _ in range(40):
        b.charge(0.1, 1e-8)
    one = pld_mod.from_privacy_parameters(common.DifferentialPrivacyParameters(0.1, 1e-8))
    expected = one.self_compose(40).get_epsilon_for_delta(1e-5)
    assert b.spent.epsilon == pytest.approx(expected, abs=1e-3)
    assert b.spent.epsilon < 2.6  # much tighter than basic composition's 40 * 0.1
    assert b.spent.delta == 1e-5 and "dp_accounting" in b.spent.rule
    # the planned charge the optimal bound admits but basic composition would refuse
    b.charge(0.4, 1e-8)
    assert b.spent.epsilon <= 3.0
    basic = pmd.PrivacyBudget(3.0, delta=1e-5)
    for _ in range(30):
        basic.charge(0.1, 1e-8)
    with pytest.raises(BudgetExceededError):
        basic.charge(0.1, 1e-8)


def test_optimal_composition_is_never_worse_than_basic():
    pytest.importorskip("dp_accounting")
    b = pmd.PrivacyBudget(10.0, delta=1e-6, composition="optimal", plan=[0.5] * 5)
    for k in range(1, 6):
        b.charge(0.5)
        # the basic sum fits the budget: it is the total, with delta = 0 (pure charges)
        assert (b.spent.epsilon, b.spent.delta) == (0.5 * k, 0.0)
    # with a budget delta of 0 nothing beats the sum of pure epsilons
    b = pmd.PrivacyBudget(1.0, composition="optimal", plan=[0.5, 0.5])
    b.charge(0.5)
    b.charge(0.5)
    assert b.spent.epsilon == 1.0
    with pytest.raises(BudgetExceededError):
        b.charge(0.01)
    with pytest.raises(ValueError, match="more than the budget"):
        pmd.PrivacyBudget(1.0, composition="optimal", plan=[0.5, 0.5, 0.01])


def test_mcmc_releases_need_a_stated_or_estimated_delta():
    b = pmd.PrivacyBudget(1.0, delta=1e-5)
    mech = kng(0.3)
    with pytest.raises(ValueError, match=r"no proved delta.*delta=1e-6.*estimate_delta=True"):
        mech.release(Untouchable(), sampler="nuts", budget=b)
    with pytest.raises(ValueError, match="an exact release has delta = 0"):
        mech.release(DATA, budget=b, delta=1e-6)
    with pytest.raises(ValueError, match="pass budget="):
        mech.release(DATA, sampler="nuts", delta=1e-6)
    assert b.entries == []  # refused before charging anything
    # the user's assumption counts in the total, which is then not proved
    b.charge(0.3, 2e-6, delta_basis="assumed", mechanism="KNG", sampler="nuts")
    assert b.spent.delta == 2e-6 and not b.spent.proved
    # an estimate goes to its own column, never into the total
    i = b.charge(0.3, delta_basis="estimated", mechanism="KNG", sampler="nuts")
    rel = build_release(
        value=NORTH,
        mechanism="KNG",
        epsilon=0.3,
        calibration=Calibration(n=3, sensitivity=0.1, sigma=0.6),
        sampler="nuts",
        seed_policy="OS entropy",
        exact=False,
        delta_estimate={"delta_hat": 4e-3},
    )
    b.settle(i, rel)
    assert b.estimated_delta == 4e-3
    assert b.spent.delta == 2e-6 and b.spent.epsilon == 0.6
    pub = b.public()
    assert "delta_estimate" not in str(pub) and "0.004" not in str(pub)
    assert [c["delta_basis"] for c in pub["charges"]] == ["assumed", "estimated"]
    assert pub["spent"]["proved"] is False
    with pytest.raises(ValueError, match="never charged"):
        b.charge(0.1, 1e-6, delta_basis="estimated")


@pytest.mark.slow
def test_an_mcmc_release_charges_the_assumed_delta():
    b = pmd.PrivacyBudget(1.0, delta=1e-5)
    rng = np.random.default_rng(1)
    theta, phi = rng.uniform(0, 0.3, 200), rng.uniform(0, 2 * np.pi, 200)
    data = np.stack([np.sin(theta) * np.cos(phi), np.sin(theta) * np.sin(phi), np.cos(theta)], -1)
    rel = kng(0.5).release(
        data,
        sampler="nuts",
        budget=b,
        delta=1e-6,
        random_seed=0,
        settings=pmd.MCMCSettings(draws=500, tune=500),
        skip_diagnostics=True,  # about charging, not convergence: robust to a divergence
    )
    assert rel.delta is None  # the release still claims no proved delta
    assert any("curator's assumption" in n for n in rel.notes)
    assert b.spent.delta == 1e-6 and not b.spent.proved
    assert b.entries[0]["delta_basis"] == "assumed" and b.entries[0]["status"] == "released"


def test_a_ledger_state_edited_by_hand_is_refused():
    b = pmd.PrivacyBudget(1.0)
    b.charge(0.25)
    b.charge(0.25)
    state = b._state()
    check_state(state)
    edited = {**state, "entries": [dict(e) for e in state["entries"]]}
    edited["entries"][1]["epsilon"] = 0.05
    with pytest.raises(LedgerError, match="checksum does not match"):
        check_state(edited)
    # a forger who recomputes the checksum but keeps the old totals is caught too
    forged = {**edited}
    forged.pop("checksum")
    totals = dict(state["totals"])
    import hashlib
    import json

    forged["totals"] = totals
    body = json.dumps(forged, sort_keys=True, separators=(",", ":")).encode()
    forged["checksum"] = "sha256:" + hashlib.sha256(body).hexdigest()
    with pytest.raises(LedgerError, match="running totals do not match"):
        check_state(forged)
    dropped = seal({**state, "entries": state["entries"][1:]})
    with pytest.raises(LedgerError, match=r"numbered 1.*out of order"):
        check_state(dropped)


def test_argument_errors_name_the_range():
    with pytest.raises(ValueError, match="finite number > 0"):
        pmd.PrivacyBudget(0.0)
    with pytest.raises(ValueError, match=r"in \[0, 1\)"):
        pmd.PrivacyBudget(1.0, delta=1.0)
    with pytest.raises(TypeError, match="real number"):
        pmd.PrivacyBudget("lots")
    with pytest.raises(ValueError, match="composition must be one of"):
        pmd.PrivacyBudget(1.0, composition="advanced")
    with pytest.raises(TypeError, match="budget must be a PrivacyBudget"):
        kng(0.1).release(DATA, budget=1.0)


def test_sample_is_refused_inside_a_budget():
    b = pmd.PrivacyBudget(1.0)
    with b, pytest.raises(ValueError, match="not charged to the privacy budget entered"):
        kng(0.1).sample(DATA, 5)
    assert kng(0.1).sample(DATA, 2, random_seed=0).shape == (2, 3)  # outside: for audits


def test_one_budget_entered_in_two_threads():
    b = pmd.PrivacyBudget(1.0)
    barrier = threading.Barrier(2)
    errors = []

    def work(seed):
        try:
            with b:
                barrier.wait(timeout=30)  # both inside at once, leaving in any order
                kng(0.25).release(DATA, random_seed=seed)
                barrier.wait(timeout=30)
        except Exception as err:  # pragma: no cover - reported below
            errors.append(err)

    threads = [threading.Thread(target=work, args=(s,)) for s in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and b.spent.epsilon == 0.5
    assert [e["status"] for e in b.entries] == ["released", "released"]


# --- issue 43: exact totals, adversarial numbers, a schema checked field by field -----------

THIRD = 0.3333333333333333
#: the floats where rounding bites: 1/3, sub-ulp steps, subnormals, huge, the edges
EDGY = [
    THIRD,
    1 / 3,
    0.1,
    0.2,
    1e-17,
    1e16,
    1.0,
    math.nextafter(1.0, 0),
    math.nextafter(1.0, 2),
    math.nextafter(0.1, 1),
    5e-324,
    2.2250738585072014e-308,
    1e-300,
    1e308,
    10.0,
]
REALS = st.sampled_from(EDGY) | st.floats(
    min_value=5e-324, max_value=1e300, allow_nan=False, allow_infinity=False
)
JUNK = st.sampled_from(
    [
        True,
        False,
        np.bool_(True),
        "5",
        "0.1",
        None,
        [0.1],
        float("nan"),
        float("inf"),
        -1.0,
        0.0,
        -0.0,
        10**400,
        -(10**400),
        decimal.Decimal("NaN"),
        b"1",
        1j,
        np.array([0.5]),
    ]
)


def dec(x) -> Fraction:
    return Fraction(repr(float(x)))


def reseal(state):
    """What a forger does: recompute the checksum over any content."""
    body = {k: v for k, v in state.items() if k != "checksum"}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), allow_nan=False)
    state["checksum"] = "sha256:" + hashlib.sha256(text.encode()).hexdigest()
    return state


def test_totals_are_exact_where_floats_round():
    # 10 + 0.3333333333333333 is 10.333333333333334 as a float: the old seal stored that
    # and the load compared it with the exact sum, bricking the ledger
    b = pmd.PrivacyBudget(20.0)
    b.charge(10.0)
    b.charge(THIRD)
    state = check_state(b._state())  # still loads
    assert state["version"] == VERSION == 3
    assert state["totals"]["epsilon"] == "10.3333333333333333"
    assert b.public()["spent_exact"] == {"epsilon": "10.3333333333333333", "delta": "0"}
    # 1.0 + 1e-17 rounds to 1.0: the old fit test let a budget of 1 take eleven of them
    b = pmd.PrivacyBudget(1.0)
    b.charge(1.0)
    with pytest.raises(BudgetExceededError):
        b.charge(1e-17)
    b = pmd.PrivacyBudget(1.0)
    b.charge(1e-17)
    with pytest.raises(BudgetExceededError):
        b.charge(1.0)
    assert len(b.entries) == 1
    # a spent budget of 1e16 took one more 1.0 (1e16 + 1 is 1e16 as a float)
    b = pmd.PrivacyBudget(1e16)
    b.charge(1e16)
    with pytest.raises(BudgetExceededError):
        b.charge(1.0)
    with pytest.raises(BudgetExceededError):
        b.check(5e-324)
    # a batch is checked by its exact sum: 0.7 * 3 is 2.0999999999999996 in floats
    b = pmd.PrivacyBudget(2.0999999999999996)
    with pytest.raises(BudgetExceededError):
        b.check(0.7, count=3)
    pmd.PrivacyBudget(2.1).check(0.7, count=3)


def test_bools_strings_and_huge_numbers_are_refused_with_their_range():
    for bad in (True, np.bool_(True), "5", None, [1.0]):
        with pytest.raises(TypeError, match="must be a real number"):
            pmd.PrivacyBudget(bad)
        with pytest.raises(TypeError, match="must be a real number"):
            pmd.PrivacyBudget(1.0).charge(bad)
        with pytest.raises(TypeError, match="must be a real number"):
            pmd.PrivacyBudget(1.0, delta=bad)
    with pytest.raises(
        ValueError, match=r"at most 1\.7976931348623157e\+308 \(the largest float\)"
    ):
        pmd.PrivacyBudget(10**400)
    with pytest.raises(ValueError, match="the largest float"):
        pmd.PrivacyBudget(1.0).charge(10**400)
    with pytest.raises(ValueError, match="finite"):
        pmd.PrivacyBudget(decimal.Decimal("Infinity"))
    with pytest.raises(TypeError, match="count must be a whole number"):
        pmd.PrivacyBudget(1.0).check(0.1, count=True)


def test_exact_numbers_are_charged_up_and_budgets_rounded_down():
    b = pmd.PrivacyBudget(Fraction(1, 3))
    assert dec(b.epsilon) <= Fraction(1, 3)  # never more than was given
    with pytest.raises(BudgetExceededError):
        b.charge(Fraction(1, 3))  # charged at least 1/3: more than the rounded budget
    b = pmd.PrivacyBudget(1)
    i = b.charge(Fraction(1, 3))
    assert dec(b.entries[i]["epsilon"]) >= Fraction(1, 3)
    b.charge(decimal.Decimal("0.25"))
    assert b.spent.exact[0] == dec(b.entries[0]["epsilon"]) + Fraction(1, 4)


@given(REALS)
def test_any_float_epsilon_is_charged_as_its_decimal_and_covers_sigma(epsilon):
    # the charge is the decimal the float prints as ...
    b = pmd.PrivacyBudget(1e308)
    b.charge(epsilon)
    assert b.spent.exact[0] == dec(epsilon)
    # ... and sigma is calibrated so that the noise spends at most that decimal
    for delta_sens in (0.1, THIRD, 1.0, 2 / 7):
        for free in (False, True):
            sigma = calibrated_sigma(delta_sens, epsilon, footpoint_free_normalizer=free)
            if math.isfinite(sigma) and sigma > 0:
                spent = (1 if free else 2) * Fraction(delta_sens) / Fraction(sigma)
                assert spent <= dec(epsilon)


def test_a_split_budget_never_spends_more_than_its_charge():
    from pymc_manidp.mechanisms.baselines import LandmarkLaplace

    K = pmd.KendallShape(k_landmarks=3) if hasattr(pmd, "KendallShape") else None
    if K is None:  # pragma: no cover
        pytest.skip("no KendallShape")
    m0 = K.validate(np.array([[1.0, 0], [0, 1], [-1, 0]]))
    for epsilon in EDGY[:10]:
        mech = LandmarkLaplace(K, epsilon=epsilon, center=m0, radius=0.3)
        assert 3 * dec(mech.epsilon_per_noise) <= dec(epsilon)


@given(JUNK | REALS)
def test_a_budget_is_made_or_refused_with_a_message(value):
    try:
        b = pmd.PrivacyBudget(value)
    except TypeError as err:
        assert "must be a real number" in str(err)
        return
    except ValueError as err:
        assert "> 0" in str(err) or "finite" in str(err) or "largest float" in str(err)
        return
    given_exactly = dec(value) if isinstance(value, float) else Fraction(value)
    assert b.epsilon > 0 and dec(b.epsilon) <= given_exactly


@given(
    st.lists(
        st.tuples(JUNK | REALS, st.sampled_from([0.0, 1e-17, 5e-324, 1e-6, THIRD])), max_size=8
    )
)
def test_charges_never_overspend_exactly(charges):
    b = pmd.PrivacyBudget(1.0, delta=1e-5)
    model = []
    for epsilon, delta in charges:
        try:
            b.charge(epsilon, delta)
        except (TypeError, ValueError) as err:
            assert str(err)  # a message, never a traceback from inside
            continue
        model.append((dec(epsilon), dec(delta)))
    eps, delta = b.spent.exact
    assert eps == sum((e for e, _ in model), Fraction(0)) and eps <= 1
    assert delta == sum((d for _, d in model), Fraction(0)) and delta <= Fraction("1e-5")
    check_state(b._state())


def _ledger_state():
    b = pmd.PrivacyBudget(5.0, delta=1e-5)
    b.charge(0.5)
    b.charge(0.25, 1e-6, delta_basis="assumed", mechanism="KNG", sampler="nuts")
    state = b._state()
    state["dataset"] = {"name": "d", "key": "00" * 32, "fingerprint": "blake2b-keyed:ab"}
    return seal(state)


def _nest(depth):
    value = 0.0
    for _ in range(depth):
        value = [value]
    return value


TAMPERED = [
    (lambda s: s["entries"][0].update(epsilon=10**400), r"entries\[0\]\.epsilon"),
    (lambda s: s["entries"][0].update(epsilon=1e400), r"entries\[0\]\.epsilon"),
    (lambda s: s["dataset"].pop("fingerprint"), r"dataset\.fingerprint is missing"),
    (lambda s: s.update(dataset="cities"), "dataset must be an object"),
    (lambda s: s["budget"].update(epsilon="5"), r"budget\.epsilon must be a number"),
    (lambda s: s["budget"].update(epsilon=5), r"budget\.epsilon must be a number"),
    (lambda s: s["budget"].update(delta=1.0), r"budget\.delta must be in \[0, 1\)"),
    (lambda s: s["entries"][0].update(index=True), r"entries\[0\]\.index must be a whole"),
    (
        lambda s: s["entries"][1].update(delta_basis="estimated", delta=0.5),
        r"entries\[1\]\.delta must be 0 for an estimated delta",
    ),
    (lambda s: s["entries"][1].update(status="won"), r"entries\[1\]\.status must be one of"),
    (lambda s: s["entries"][0].update(release=[1]), r"entries\[0\]\.release must be"),
    (lambda s: s["entries"][0].update(extra=1), r"entries\[0\]\.extra is not a field"),
    (lambda s: s["entries"][0].update(release=_nest(100)), "nested deeper than 32"),
    (lambda s: s["totals"].update(epsilon=0.75), r"totals\.epsilon must be an exact decimal"),
    (lambda s: s["totals"].update(epsilon="1/3"), r"totals\.epsilon must be an exact decimal"),
    (lambda s: s.update(version=True), "unknown ledger version True"),
    (lambda s: s.update(entries={}), "entries must be a list"),
    (lambda s: s["dataset"].update(key="zz"), r"dataset\.key must be 16 to 64 bytes"),
    (lambda s: s["entries"][0].update(delta_estimate=-1.0), r"delta_estimate must be in"),
]


@pytest.mark.parametrize("edit, message", TAMPERED)
def test_a_resealed_ledger_is_refused_field_by_field(edit, message):
    state = _ledger_state()
    edit(state)
    try:
        reseal(state)
    except (ValueError, RecursionError):  # not JSON-able (1e400): the schema comes first
        state["checksum"] = "sha256:0"
    with pytest.raises(LedgerError, match=message):
        check_state(state)


def test_a_state_nested_100000_deep_is_refused_without_recursing():
    state = _ledger_state()
    state["entries"][0]["release"] = _nest(100_000)
    with pytest.raises(LedgerError, match="nested deeper than 32"):
        check_state(state)


@given(
    st.sampled_from(["budget.epsilon", "budget.delta", "e0.epsilon", "e0.delta", "e0.index"]),
    JUNK | REALS | st.integers(),
)
def test_any_resealed_value_loads_right_or_is_refused_by_name(where, value):
    state = _ledger_state()
    obj, key = where.split(".")
    target = state["budget"] if obj == "budget" else state["entries"][0]
    target[key] = value
    try:
        reseal(state)
    except (TypeError, ValueError):
        state["checksum"] = "sha256:0"
    try:
        loaded = check_state(copy.deepcopy(state))
    except LedgerError as err:
        assert key in str(err) or "checksum" in str(err) or "totals" in str(err)
        return
    # what loads is a consistent ledger whose totals are the exact sums
    spent = pmd.PrivacyBudget.from_store(type("S", (), {"read": lambda self: loaded})()).spent
    assert spent.exact[0] == sum((dec(e["epsilon"]) for e in loaded["entries"]), Fraction(0))


@given(
    count=st.sampled_from([1, 3, 10**7, 10**9, 2**63, 10**400, 0, -1, True, 2.0, "3", None]),
    epsilon=st.sampled_from([5e-324, 1e-300, 1 / 3, 0.1]),
    delta=st.sampled_from([0.0, 5e-324, 1e-12]),
    spent=st.sampled_from([0.0, 0.5]),
)
@example(count=2**63, epsilon=5e-324, delta=0.0, spent=0.0)  # was an OverflowError
def test_check_of_a_batch_is_its_exact_sum_for_any_count(count, epsilon, delta, spent):
    """check(epsilon, delta, count=k): fits exactly when k times the charge (as exact
    decimals) fits what is left, for any whole k >= 1, answered at once (k = 10**9
    built a list of 10**9 charges, a MemoryError; 2**63 an OverflowError)."""
    b = pmd.PrivacyBudget(1.0, delta=1e-6)
    if spent:
        b.charge(spent)
    try:
        b.check(epsilon, delta, count=count)
    except TypeError as err:
        assert isinstance(count, bool) or not isinstance(count, int) or count < 1
        assert "count" in str(err)
        return
    except BudgetExceededError:
        assert count * Fraction(repr(epsilon)) > Fraction(1) - Fraction(repr(spent)) or (
            count * Fraction(repr(delta)) > Fraction(repr(1e-6))
        )
        return
    assert count * Fraction(repr(epsilon)) <= Fraction(1) - Fraction(repr(spent))
    assert count * Fraction(repr(delta)) <= Fraction(repr(1e-6))
    assert len(b.entries) == (1 if spent else 0)  # a check records nothing
