"""The privacy budget (issue 27): charged before the data are read, exact totals,
composition as dp_accounting computes it, MCMC deltas kept out of proved totals."""

from __future__ import annotations

import threading
from fractions import Fraction

import numpy as np
import pytest

import pymc_manidp as pmd
from pymc_manidp.privacy.budget import (
    BudgetExceededError,
    LedgerError,
    check_state,
    current_budget,
    seal,
)
from pymc_manidp.privacy.release import Calibration, build_release

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
        with other:  # nested: the inner budget is charged
            kng(0.25).release(DATA, random_seed=2)
        assert current_budget() is b
        seen = []
        thread = threading.Thread(target=lambda: seen.append(current_budget()))
        thread.start()
        thread.join()
        assert seen == [None]  # a contextvar, not a global: another thread has none
    assert current_budget() is None
    assert b.spent.epsilon == 0.5 and other.spent.epsilon == 0.25
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

    # (eps, delta) releases: dp_accounting's own self-composition as the oracle
    b = pmd.PrivacyBudget(5.0, delta=1e-5, composition="optimal")
    for _ in range(40):
        b.charge(0.1, 1e-8)
    one = pld_mod.from_privacy_parameters(common.DifferentialPrivacyParameters(0.1, 1e-8))
    expected = one.self_compose(40).get_epsilon_for_delta(1e-5)
    assert b.spent.epsilon == pytest.approx(expected, abs=1e-3)
    assert b.spent.epsilon < 2.6  # much tighter than basic composition's 40 * 0.1
    assert b.spent.delta == 1e-5 and "dp_accounting" in b.spent.rule
    # a charge the optimal bound admits but basic composition would refuse
    b.charge(1.5, 1e-8)
    assert b.spent.epsilon <= 5.0
    basic = pmd.PrivacyBudget(5.0, delta=1e-5)
    for _ in range(40):
        basic.charge(0.1, 1e-8)
    with pytest.raises(BudgetExceededError):
        basic.charge(1.5, 1e-8)


def test_optimal_composition_is_never_worse_than_basic():
    pytest.importorskip("dp_accounting")
    b = pmd.PrivacyBudget(10.0, delta=1e-6, composition="optimal")
    for k in range(1, 6):
        b.charge(0.5)
        assert b.spent.epsilon <= 0.5 * k  # the smaller of the two valid bounds
    # with a budget delta of 0 nothing beats the sum of pure epsilons
    b = pmd.PrivacyBudget(1.0, composition="optimal")
    b.charge(0.5)
    b.charge(0.5)
    assert b.spent.epsilon == 1.0
    with pytest.raises(BudgetExceededError):
        b.charge(0.01)


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
        draws=500,
        tune=500,
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
