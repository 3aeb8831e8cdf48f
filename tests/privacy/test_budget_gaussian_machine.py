"""The ledger with Gaussian charges, as a state machine (hypothesis's RuleBasedStateMachine).

``tests/io/test_ledger.py``'s machine charges pure ε only. This one mixes what ledger
version 3 holds: pure ε, (ε, δ), MCMC charges with an assumed δ and Gaussian charges
(ε, δ, μ), under basic composition or an optimal plan, through the ledger's name and a
symbolic link, with a second writer in another thread, failures, and tampered files
(edited or resealed) that must be refused and leave the ledger as it was.

Oracles, apart from the code under test: exact fractions for basic sums; for a plan,
a charge is admitted exactly when it is the plan's next one (the plan was checked
whole when declared, and a prefix's total is at most the plan's); every Gaussian
charge admitted is (ε, δ)-DP at its μ in 40-digit mpmath; an all-Gaussian total is a
true (ε, δ) statement of μ = sqrt(Σ μᵢ²) in mpmath.
"""

from __future__ import annotations

import json
import math
import shutil
import tempfile
import threading
from fractions import Fraction
from pathlib import Path

import mpmath
import numpy as np
import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from pymc_manidp.io.ledger import open_ledger, read_ledger
from pymc_manidp.privacy.budget import BudgetExceededError, LedgerError
from pymc_manidp.privacy.composition import GDP_RULE
from pymc_manidp.privacy.ledger_state import checksum
from pymc_manidp.stats.gaussian import gaussian_delta, gaussian_mu

pytest.importorskip("dp_accounting")

DATA = np.array([[0, 0, 1.0], [0, 0.6, 0.8], [0.6, 0, 0.8]])


def _mp_delta(eps, mu):
    with mpmath.workdps(40):
        eps, mu = mpmath.mpf(eps), mpmath.mpf(mu)
        return mpmath.ncdf(mu / 2 - eps / mu) - mpmath.e**eps * mpmath.ncdf(-mu / 2 - eps / mu)


def _edge_mu(epsilon, delta):
    """The largest μ whose computed δ(μ) is at most δ, no margin: a sub-ulp edge."""
    lo, hi = 1e-300, 1e3
    while True:
        mid = 0.5 * (lo + hi)
        if mid <= lo or mid >= hi:
            return lo
        lo, hi = (mid, hi) if gaussian_delta(epsilon, mid) <= delta else (lo, mid)


def _g(epsilon, delta):
    return (epsilon, delta, gaussian_mu(epsilon, delta))


#: charges ``(epsilon, delta[, mu])`` where rounding bites: 1/3, sub-ulp neighbours, a
#: μ at the computed edge (refused: not proved), a δ of 1e-300
POOL = [
    (0.1, 0.0),
    (1 / 3, 0.0),
    (math.nextafter(0.2, 1.0), 0.0),
    (0.2, 1e-8),
    (1 / 3, 1e-300),
    _g(0.2, 1e-7),
    _g(1 / 3, 1e-7),
    _g(0.05, 1e-300),
    _g(math.nextafter(0.5, 0.0), 1e-7),
    # edges whose true delta is above delta (by 1e-14 relative; admitted before)
    (1.0, 1e-10, _edge_mu(1.0, 1e-10)),
    (0.1, 1e-6, _edge_mu(0.1, 1e-6)),
    (0.1, 1e-9, _edge_mu(0.1, 1e-9) / 2),  # a μ well inside (ε, δ): admitted
]
CHARGES = st.sampled_from(POOL)


def _form(charge):
    return list(charge) if len(charge) == 3 else [charge[0], charge[1]]


class GaussianLedgerMachine(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="gauss-ledger-"))
        self.real = self.dir / "real.json"
        self.link = self.dir / "link.json"
        self.model = []  # [charge tuple, basis, status]
        self.plan = None
        self.budget = None

    def teardown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    @initialize(
        epsilon=st.sampled_from([1.0, 0.7, 1 / 3, 3.0]),
        delta=st.sampled_from([1e-6, 1e-7, 0.3333333333333333e-6]),
        plan=st.one_of(st.none(), st.lists(CHARGES, min_size=1, max_size=5)),
    )
    def create(self, epsilon, delta, plan):
        kw = {"epsilon": epsilon, "delta": delta}
        if plan is not None:
            kw.update(composition="optimal", plan=plan)
        try:
            open_ledger(self.real, data=DATA, **kw)
        except ValueError as err:  # a plan that does not fit, or a μ not proved
            assert "plan" in str(err)
            assert not self.real.exists()  # a refused ledger leaves no file
            kw = {"epsilon": epsilon, "delta": delta}
            open_ledger(self.real, data=DATA, **kw)
            plan = None
        self.plan = None if plan is None else [_form(c) for c in plan]
        self.budget = (Fraction(repr(epsilon)), Fraction(repr(delta)))
        self.link.symlink_to(self.real)

    def _open(self, name):
        return open_ledger(self.real if name == "real" else self.link, data=DATA)

    def _sums(self, extra=None):
        rows = self.model + ([extra] if extra else [])
        eps = sum((Fraction(repr(c[0])) for c, _, _ in rows), Fraction(0))
        delta = sum((Fraction(repr(c[1])) for c, _, _ in rows), Fraction(0))
        return eps, delta

    def _expected(self, charge, basis):
        """Whether the charge must be admitted, or None where only the code knows."""
        if len(charge) == 3 and (basis != "proved" or _mp_delta(charge[0], charge[2]) > charge[1]):
            return None  # refused (ValueError) or admitted and checked by the oracle
        if self.plan is not None:
            k = len(self.model)
            return k < len(self.plan) and _form(charge) == self.plan[k]
        eps, delta = self._sums((charge, basis, None))
        return eps <= self.budget[0] and delta <= self.budget[1]

    @rule(charge=CHARGES, name=st.sampled_from(["real", "link"]), mcmc=st.booleans())
    def charge(self, charge, name, mcmc):
        basis = "assumed" if mcmc and len(charge) == 2 and charge[1] > 0 else "proved"
        expected = self._expected(charge, basis)
        b = self._open(name)
        try:
            index = b.charge(
                charge[0],
                charge[1],
                mu=charge[2] if len(charge) == 3 else None,
                delta_basis=basis,
                status="charged",
            )
        except BudgetExceededError:
            assert expected is not True, f"{charge} fits and was refused"
            return
        except ValueError as err:  # a μ not proved: refused before anything is recorded
            assert len(charge) == 3 and "mu" in str(err)
            assert _mp_delta(charge[0], charge[2]) > charge[1] * (1 - 1e-9) or charge[1] < 1e-300
            return
        assert expected is not False, f"{charge} was admitted: it overspends or leaves the plan"
        if len(charge) == 3:  # the μ charged is proved in exact arithmetic
            assert _mp_delta(charge[0], charge[2]) <= charge[1]
        assert index == len(self.model)
        self.model.append((tuple(charge), basis, "charged"))

    @precondition(lambda self: self.plan is not None)
    @rule(name=st.sampled_from(["real", "link"]))
    def next_planned(self, name):
        if len(self.model) < len(self.plan):
            self.charge(tuple(self.plan[len(self.model)]), name, False)

    @precondition(lambda self: any(s == "charged" for _, _, s in self.model))
    @rule(data=st.data())
    def fail(self, data):
        i = data.draw(st.sampled_from([i for i, m in enumerate(self.model) if m[2] == "charged"]))
        self._open("link").fail(i, RuntimeError("after the charge"))
        self.model[i] = (*self.model[i][:2], "failed")

    @precondition(lambda self: self.plan is not None)
    @rule(times=st.integers(1, 3))
    def concurrent_planned(self, times):
        # two writers race for the plan's next charges, one through the link: the lock
        # orders them, each planned charge is made once, and none past the plan
        won = {"thread": 0, "main": 0}

        def work(who, name):
            b = self._open(name)
            for _ in range(times):
                k = len(b.entries)
                if k >= len(self.plan):
                    return
                c = self.plan[k]
                try:
                    b.charge(c[0], c[1], mu=c[2] if len(c) == 3 else None, mechanism=who)
                    won[who] += 1
                except BudgetExceededError:  # the other took charge k first
                    pass

        thread = threading.Thread(target=work, args=("thread", "link"))
        thread.start()
        work("main", "real")
        thread.join()
        entries = read_ledger(self.real).entries
        new = entries[len(self.model) :]
        assert len(new) == won["thread"] + won["main"] <= 2 * times
        for e in new:
            c = (e["epsilon"], e["delta"]) + ((e["mu"],) if e["mu"] is not None else ())
            self.model.append((c, "proved", "external"))

    @precondition(lambda self: any(len(c) == 3 for c, _, _ in self.model))
    @rule(how=st.sampled_from(["mu x4", "mu on a pure charge", "drop mu", "version 2", "mu str"]))
    def tampered_file_is_refused(self, how):
        before = self.real.read_bytes()
        state = json.loads(before)
        i = next(i for i, (c, _, _) in enumerate(self.model) if len(c) == 3)
        e = state["entries"][i]
        if how == "mu x4":  # a μ at which the charge is not (ε, δ)-DP
            e["mu"] = 4 * e["mu"]
        elif how == "mu on a pure charge":
            e["delta"], e["mu"] = 0.0, e["mu"]
        elif how == "drop mu":
            del e["mu"]
        elif how == "version 2":  # a version-2 ledger holds no μ
            state["version"] = 2
        else:
            e["mu"] = repr(e["mu"])
        for reseal in (False, True):
            if reseal:
                state["checksum"] = checksum(state)
            self.real.write_text(json.dumps(state))
            for name in (self.real, self.link):
                with pytest.raises(LedgerError):
                    read_ledger(name)
            with pytest.raises(LedgerError):
                self._open("link").charge(0.1)
        self.real.write_bytes(before)

    @invariant()
    def the_ledger_is_the_model_and_fits(self):
        if self.budget is None:
            return
        for name in (self.real, self.link):
            b = read_ledger(name)
            rows = [
                ((e["epsilon"], e["delta"]) + ((e["mu"],) if e["mu"] is not None else ()))
                for e in b.entries
            ]
            assert rows == [c for c, _, _ in self.model]
            assert [e["status"] for e in b.entries] == [s for _, _, s in self.model]
            assert [e["delta_basis"] for e in b.entries] == [p for _, p, _ in self.model]
            if self.plan is not None:
                assert [_form(c) for c in rows] == self.plan[: len(rows)]
            spent = b.spent
            assert math.isfinite(spent.epsilon)
            assert Fraction(repr(spent.epsilon)) <= self.budget[0]
            assert Fraction(repr(spent.delta)) <= self.budget[1]
            mus = [c[2] for c in rows if len(c) == 3]
            if spent.rule == GDP_RULE:  # all Gaussian: a true statement of sqrt(sum mu^2)
                assert len(mus) == len(rows)
                with mpmath.workdps(40):
                    mu = mpmath.sqrt(mpmath.fsum(mpmath.mpf(m) ** 2 for m in mus))
                assert _mp_delta(spent.epsilon, mu) <= spent.delta


GaussianLedgerMachine.TestCase.settings = settings(stateful_step_count=8, max_examples=20)
test_the_gaussian_ledger_machine = GaussianLedgerMachine.TestCase
