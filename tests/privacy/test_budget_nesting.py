"""Nested budgets (issue 38 item 11): a release is charged to one budget, the one entered.

``with b3: with b4: release(...)`` charged b4 only, silently, breaking the outer block's
promise that every release in it is charged. Now entering another budget inside a
``with`` block is refused, and so is passing a release another budget there; entering the
same budget again is harmless. Both refusals come before anything is charged or read.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

import pymc_manidp as pmd
from pymc_manidp.privacy.budget import current_budget
from tests.privacy.test_budget import DATA, Touched, Untouchable, kng


def test_entering_another_budget_inside_one_is_refused():
    outer, inner = pmd.PrivacyBudget(1.0), pmd.PrivacyBudget(1.0)
    with outer:
        with pytest.raises(ValueError, match=r"another privacy budget is entered here.*inner one"):
            with inner:
                kng(0.1).release(DATA)  # pragma: no cover - never reached
        assert current_budget() is outer  # the refused entry left nothing behind
        kng(0.1).release(DATA)
    assert current_budget() is None
    assert outer.spent.epsilon == 0.1 and inner.entries == []


def test_a_release_given_another_budget_inside_a_block_is_refused_unread():
    outer, other = pmd.PrivacyBudget(1.0), pmd.PrivacyBudget(1.0)
    with outer:
        with pytest.raises(ValueError, match=r"would leave it uncharged.*outside the 'with'"):
            kng(0.1).release(Untouchable(), budget=other)
        with pytest.raises(ValueError, match="would leave it uncharged"):
            kng(0.1).release_many(np.stack([DATA, DATA]), budget=other)
        with pytest.raises(TypeError, match="budget must be a PrivacyBudget"):
            kng(0.1).release(DATA, budget="ledger.json")
        kng(0.1).release(DATA, budget=outer)  # the entered one, named: charged once
    assert outer.spent.epsilon == 0.1 and other.entries == []
    with pytest.raises(Touched):  # outside any block the same call reads the data
        kng(0.1).release(Untouchable(), budget=other)


def test_the_same_budget_entered_twice_is_charged_once_per_release():
    b = pmd.PrivacyBudget(1.0)
    with b, b:
        kng(0.25).release(DATA)
        assert current_budget() is b
    assert b.spent.epsilon == 0.25 and current_budget() is None


class NestedBudgets(RuleBasedStateMachine):
    """Enter, leave and release in any order: every release is charged to exactly the
    budget the model says (the entered one, or the one passed), and every refusal
    changes nothing."""

    def __init__(self):
        super().__init__()
        self.budgets = [pmd.PrivacyBudget(100.0) for _ in range(3)]
        self.entered = []  # the blocks open, innermost last
        self.charges = [0, 0, 0]

    def _spent(self):
        return [len(b.entries) for b in self.budgets]

    @rule(i=st.integers(0, 2))
    def enter(self, i):
        b = self.budgets[i]
        if self.entered and self.entered[-1] is not b:
            with pytest.raises(ValueError, match="another privacy budget is entered here"):
                b.__enter__()
        else:
            b.__enter__()
            self.entered.append(b)

    @precondition(lambda self: self.entered)
    @rule()
    def leave(self):
        self.entered.pop().__exit__(None, None, None)

    @rule(i=st.one_of(st.none(), st.integers(0, 2)), many=st.booleans())
    def release(self, i, many):
        given = None if i is None else self.budgets[i]
        inner = self.entered[-1] if self.entered else None
        mech = kng(0.5)
        call = (lambda b: mech.release_many([DATA, DATA], budget=b)) if many else None
        call = call or (lambda b: mech.release(DATA, budget=b))
        if given is not None and inner is not None and given is not inner:
            with pytest.raises(ValueError, match="would leave it uncharged"):
                call(given)
            return
        call(given)
        target = given if given is not None else inner
        if target is not None:
            self.charges[self.budgets.index(target)] += 2 if many else 1

    @invariant()
    def charged_as_the_model_says(self):
        assert self._spent() == self.charges
        assert current_budget() is (self.entered[-1] if self.entered else None)

    def teardown(self):
        while self.entered:
            self.entered.pop().__exit__(None, None, None)


NestedBudgets.TestCase.settings = settings(stateful_step_count=12, deadline=None)
test_nested_budgets_charge_only_the_budget_entered = NestedBudgets.TestCase
