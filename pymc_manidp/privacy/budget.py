r"""A privacy budget across releases: a ledger that refuses to overspend.

A :class:`PrivacyBudget` is the ledger of one data set (one privacy unit: one record,
replace-one neighbours, ``n`` public; docs/mechanisms.md). Every release charged to it
is checked against what is left **before the data are read**
(``Mechanism.release(data, budget=b)``): a release that would overspend raises
:class:`BudgetExceededError` and nothing is computed. How the charges add up is the
budget's ``composition`` rule, which every total names (docs/privacy-budget.md):

- ``"basic"`` (default): releases that are :math:`(\varepsilon_i, \delta_i)`-DP on the
  same records are, together, :math:`(\sum_i \varepsilon_i, \sum_i \delta_i)`-DP (basic
  composition; Dwork & Roth 2014, Theorem 3.16). The sums are exact: each ε and δ
  counts as the decimal number it prints as, so ten releases of ε = 0.1 spend ε = 1,
  and totals are compared with the budget as exact fractions (never as floats).
- ``"optimal"``: a **plan** of charges ``[(eps_1, delta_1), ..., (eps_k, delta_k)]``,
  declared when the budget is created (before the first release) and refused unless it
  fits the budget; the i-th charge must be the plan's i-th, and a charge outside the
  plan is refused. The total of the charges made so far is the basic one (exact, as
  above) while it fits the budget, otherwise their worst-case privacy loss
  distributions composed numerically by ``dp_accounting``'s PLD accountant (an upper
  bound on the optimal composition of Kairouz, Oh & Viswanath 2015, Theorem 3.3, and
  Murtagh & Vadhan 2016), read at the budget's δ; either total is compared with the
  budget exactly (the PLD's ε as the decimal it prints as). Those theorems hold for
  releases chosen adaptively *with their (ε_i, δ_i) fixed in advance*; a curator who
  picks the next ε after seeing the earlier releases is not covered by them (Rogers,
  Roth, Ullman & Vadhan 2016, privacy filters), hence the plan. An "optimal" ledger
  written before plans existed has none and counts by basic composition. Needs the
  ``[budget]`` extra.

MCMC releases have no proved δ (docs/architecture.md, privacy rules). Charging one needs
either a δ the curator states (``delta_basis="assumed"``: counted in the total, which is
then marked not proved) or the coupling estimate (``"estimated"``: the estimate goes to
a separate column, never into the total). A total is ``proved`` only when every charge
is an exact release's or another proved (ε, δ).

**Which ε is charged.** A float ε (what a mechanism holds, what ``--epsilon`` parses to)
is charged as the shortest decimal that reads back as the same double (its ``repr``):
``0.1`` charges exactly 1/10, ``0.3333333333333333`` exactly that decimal. The
mechanisms calibrate σ so that the ε their noise achieves is at most that decimal
(``stats.sensitivity.calibrated_sigma`` rounds σ up to the next double when σ = 2Δ/ε
in floating point would fall below 2Δ/decimal), so the charge is never below what the
release spends. An exact number (an int, a ``Fraction``, a ``Decimal``) is charged as
the smallest such decimal that is at least its value (``Fraction(1, 3)`` charges
0.33333333333333337), and a budget given exactly is rounded down the same way: the
ledger never charges less, nor allows more, than it was given.

The ledger's state is a plain JSON-able dict, sealed with a SHA-256 checksum over its
content and checked on every load (:func:`check_state`: every field's type and range,
the nesting depth, the checksum, then the entries against the plan and the running
totals, which are kept as exact decimal strings). Ledgers of version 1 (totals sealed as floats) are
migrated on load, every record kept. The same code serves the in-memory budget and the
file on disk (``pymc_manidp.io.ledger``, which adds the atomic write, the file lock,
the size cap and the data set's fingerprint).
"""

from __future__ import annotations

import contextlib
import contextvars
import copy
import math
import numbers
import threading
from fractions import Fraction

# the ledger's arithmetic and its state live beside this module (one job each); the
# names once defined here are still served from here
from pymc_manidp.privacy.composition import (
    COMPOSITIONS,
    MAX_PLAN,  # noqa: F401 - served from here as before the split
    UNPLANNED,  # noqa: F401
    Spend,
    _basic_sums,
    _check_delta,
    _check_epsilon,
    _check_mu,
    _decimal_text,
    _exact,
    _exact_spend,
    _fits,
    _fmt,
    _short,
    _spend,
    _to_float,
    _total,
    charge_form,
)
from pymc_manidp.privacy.ledger_state import (
    DELTA_BASES,
    FORMAT,  # noqa: F401 - served from here as before the split
    LOADABLE_VERSIONS,  # noqa: F401
    MAX_DEPTH,  # noqa: F401
    PRIVACY_UNIT,  # noqa: F401
    STATUSES,  # noqa: F401
    VERSION,  # noqa: F401
    LedgerError,
    check_state,
    checksum,
    new_state,
    seal,
)

__all__ = [
    "COMPOSITIONS",
    "DELTA_BASES",
    "BudgetExceededError",
    "LedgerError",
    "PrivacyBudget",
    "Spend",
    "budget_to_charge",
    "check_state",
    "checksum",
    "current_budget",
    "new_state",
    "seal",
]


_CURRENT: contextvars.ContextVar[PrivacyBudget | None] = contextvars.ContextVar(
    "pymc_manidp_budget", default=None
)


class BudgetExceededError(ValueError):
    """A charge that would overspend the budget; nothing was computed or released.

    Attributes
    ----------
    spent, remaining, asked : tuple of float
        ``(epsilon, delta)`` spent before the charge, left, and asked for.
    """

    def __init__(self, message, *, spent, remaining, asked):
        super().__init__(message)
        self.spent = spent
        self.remaining = remaining
        self.asked = asked


class _MemoryStore:
    """A ledger state held in memory; one thread at a time changes it."""

    def __init__(self, state):
        self._state = check_state(state)
        self._lock = threading.RLock()

    @contextlib.contextmanager
    def transaction(self):
        with self._lock:
            state = copy.deepcopy(self._state)
            yield state
            self._state = seal(state)

    def read(self) -> dict:
        with self._lock:
            return copy.deepcopy(self._state)


class PrivacyBudget:
    r"""A privacy budget of ``(epsilon, delta)`` for the releases of one data set.

    The privacy unit is one record (replace-one neighbours, ``n`` public): every
    release of the same records is charged to the same budget. Charge it by passing it
    to a release (``mech.release(data, budget=b)``) or by entering it
    (``with b: mech.release(data)``): the charge is made before the data are read, and
    a release that would overspend raises :class:`BudgetExceededError` with nothing
    computed.

    .. math::

        \text{basic: } \Big(\sum_i \varepsilon_i,\ \sum_i \delta_i\Big) \le
        (\varepsilon, \delta)

    Parameters
    ----------
    epsilon : float
        The total ε (> 0, at most the largest float): a float is held as the decimal it
        prints as; an int, ``Fraction`` or ``Decimal`` is rounded down to such a
        decimal (the budget never allows more than it was given). A bool or a string
        is refused (``TypeError``): ``True`` is not ε = 1.
    delta : float, default 0.0
        The total δ, in [0, 1).
    composition : {"basic", "optimal"}
        How charges add up (module docstring); ``"optimal"`` needs dp_accounting and a
        ``plan``.
    plan : sequence of float or (float, float), optional
        ``composition="optimal"`` only, and required there: the charges
        ``(epsilon, delta)`` (a number alone is ``(epsilon, 0)``) the budget admits, in
        this order, declared before the first release; each is rounded up as a charge
        is (an exact number to the smallest float decimal at least it). Refused unless
        the whole plan fits the budget (compared exactly); a charge other than the
        plan's next one is refused
        (:class:`BudgetExceededError`). Optimal composition holds for (ε, δ) fixed in
        advance, not for ones chosen after seeing earlier releases
        (docs/privacy-budget.md).

    Examples
    --------
    >>> import numpy as np
    >>> import pymc_manidp as pmd
    >>> S = pmd.Sphere(dim=2)
    >>> mech = pmd.KNGMechanism(S, epsilon=0.4, center=[0, 0, 1.0], radius=0.5)
    >>> data = np.array([[0, 0, 1.0], [0, 0.28, 0.96]])
    >>> b = pmd.PrivacyBudget(1.0)
    >>> with b:
    ...     first = mech.release(data, random_seed=0)
    ...     second = mech.release(data, random_seed=1)
    >>> b.spent.epsilon, b.remaining
    (0.8, (0.2, 0.0))
    >>> mech.release(data, budget=b)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    pymc_manidp.privacy.budget.BudgetExceededError: the release asks for epsilon = 0.4, ...
    """

    def __init__(self, epsilon, delta=0.0, *, composition="basic", plan=None):
        self._store = _MemoryStore(new_state(epsilon, delta, composition=composition, plan=plan))
        self._tokens = threading.local()

    @classmethod
    def from_store(cls, store) -> PrivacyBudget:
        """A budget kept by ``store``: an object with ``transaction()`` (a context
        manager giving the state to change, saved on exit) and ``read()``
        (``pymc_manidp.io.ledger.LedgerFile``)."""
        self = cls.__new__(cls)
        self._store = store
        self._tokens = threading.local()
        return self

    # --- what the budget holds ------------------------------------------------------------
    def _state(self) -> dict:
        return self._store.read()

    @property
    def epsilon(self) -> float:
        """The budget's total ε."""
        return self._state()["budget"]["epsilon"]

    @property
    def delta(self) -> float:
        """The budget's total δ."""
        return self._state()["budget"]["delta"]

    @property
    def composition(self) -> str:
        """The composition rule, a key of ``COMPOSITIONS``."""
        return self._state()["budget"]["composition"]

    @property
    def plan(self) -> list[tuple[float, ...]] | None:
        """The charges ``(epsilon, delta)`` (a Gaussian one ``(epsilon, delta, mu)``) an
        optimal budget admits, in order (None: basic composition, or an optimal ledger
        written before plans existed)."""
        plan = self._state()["budget"].get("plan")
        return None if plan is None else [tuple(c) for c in plan]

    @property
    def planned(self) -> Spend | None:
        """The total of the whole :attr:`plan` (None without one): the guarantee of all
        the budget will ever admit, and the one to state when the releases made so far
        were chosen to be the last after seeing them (docs/privacy-budget.md)."""
        state = self._state()
        plan = state["budget"].get("plan")
        if plan is None:
            return None
        return _total(state["budget"], [(c[0], c[1], "proved", *c[2:]) for c in plan])

    @property
    def spent(self) -> Spend:
        """What the charges so far are together (a :class:`Spend`)."""
        return _spend(self._state())

    @property
    def remaining(self) -> tuple[float, float]:
        """``(epsilon, delta)`` left: the budget minus :attr:`spent`.

        Under optimal composition a total composed from Gaussian (or mixed) charges
        is read at the budget's δ, so δ left is then 0 even when the plan's next
        charges fit: a planned budget admits its plan, checked whole when declared
        (:attr:`planned`); this pair is the budget minus one valid statement of the
        total, not a test of what still fits (docs/privacy-budget.md).
        """
        state = self._state()
        return _remaining(state, _spend(state))

    @property
    def releases(self) -> list[dict]:
        """The public records (``Release.public()``) of the releases, in order."""
        return [e["release"] for e in self._state()["entries"] if e["release"] is not None]

    @property
    def entries(self) -> list[dict]:
        """Every charge, for the curator: with its status and any δ estimate."""
        return self._state()["entries"]

    @property
    def estimated_delta(self) -> float:
        """The "estimated, not proved" column: the sum of the coupling estimates δ̂ of
        MCMC releases charged with them (curator side; never in :attr:`spent`)."""
        return math.fsum(
            e["delta_estimate"] or 0.0
            for e in self._state()["entries"]
            if e["delta_basis"] == "estimated"
        )

    def public(self) -> dict:
        """The ledger as it may be published: the budget, the totals and, per charge,
        its (ε, δ), δ basis, status and public release record. Leaves out the δ
        estimates (they depend on the data) and the data set's fingerprint.

        A ``"failed"`` status (and the missing release record that goes with it) is
        kept: whether a release failed can depend on the data, and no charge's ε
        covers that bit (docs/privacy-budget.md, "Failed releases still spend")."""
        state = self._state()
        spend = _spend(state)
        eps_left, delta_left = _remaining(state, spend)
        planned = self.planned
        exact = _exact_spend(spend)
        keep = ("index", "mechanism", "sampler", "epsilon", "delta", "mu", "delta_basis", "status")
        dataset = state["dataset"]
        return {
            "privacy_unit": state["privacy_unit"],
            "dataset": None if dataset is None else dataset.get("name"),
            "budget": dict(state["budget"]),
            "spent": {"epsilon": spend.epsilon, "delta": spend.delta, "proved": spend.proved},
            # the floats above are rounded for reading; these are what the budget holds
            "spent_exact": {"epsilon": _decimal_text(exact[0]), "delta": _decimal_text(exact[1])},
            "remaining": {"epsilon": eps_left, "delta": delta_left},
            "rule": spend.rule,
            **(
                {}
                if planned is None
                else {"planned": {"epsilon": planned.epsilon, "delta": planned.delta}}
            ),
            "charges": [
                {**{k: e[k] for k in keep}, "release": e["release"]} for e in state["entries"]
            ],
        }

    def __repr__(self) -> str:
        s = self.spent
        return (
            f"PrivacyBudget(epsilon={self.epsilon!r}, delta={self.delta!r}, "
            f"composition={self.composition!r}; spent epsilon={_fmt(s.epsilon)}, "
            f"delta={_fmt(s.delta)}{'' if s.proved else ' (not proved)'})"
        )

    # --- charging ---------------------------------------------------------------------------
    def check(self, epsilon, delta=0.0, *, mu=None, delta_basis="proved", count=1) -> None:
        """Raise :class:`BudgetExceededError` if ``count`` charges of ``(epsilon,
        delta)`` (Gaussian ones with ``mu``, as :meth:`charge`) would overspend; changes
        nothing.

        ``count`` checks a batch at once (``release_many``) with the exact sum, where
        ``epsilon * count`` in floating point may round below it.
        """
        epsilon, delta = _check_epsilon(epsilon), _check_delta(delta)
        if delta_basis not in DELTA_BASES:
            raise ValueError(f"delta_basis must be one of {DELTA_BASES}, got {delta_basis!r}")
        if isinstance(count, bool) or not isinstance(count, numbers.Integral) or count < 1:
            raise TypeError(f"count must be a whole number >= 1, got {_short(count)}")
        mu = _gaussian_mu(epsilon, delta, mu, delta_basis)
        _refuse_overspend(self._state(), epsilon, delta, delta_basis, count=int(count), mu=mu)

    def check_many(self, charges) -> None:
        """Raise :class:`BudgetExceededError` if the charges ``[(epsilon, delta), ...]``
        (a Gaussian one ``(epsilon, delta, mu)``), made in this order, would overspend or
        leave the plan; changes nothing.

        For a call that charges several releases at once: it is refused before the
        first charge rather than after some (``Mechanism.release_many``).
        """
        pairs = []
        for charge in charges:
            if isinstance(charge, str | bytes) or len(charge) not in (2, 3):
                raise TypeError(
                    f"a charge is (epsilon, delta) or (epsilon, delta, mu), got {_short(charge)}"
                )
            e, d = _check_epsilon(charge[0]), _check_delta(charge[1])
            mu = _gaussian_mu(e, d, charge[2] if len(charge) == 3 else None, "proved")
            pairs.append((e, d, mu))
        state = self._state()  # a copy: the trial entries below are never written
        runs = []  # consecutive equal charges, checked as one exact sum
        for pair in pairs:
            if runs and runs[-1][0] == pair:
                runs[-1][1] += 1
            else:
                runs.append([pair, 1])
        planned = state["budget"].get("plan") is not None
        for (epsilon, delta, mu), count in runs:
            if planned:  # the total may come from the PLD: checked after each, as charge() will
                for _ in range(count):
                    _refuse_overspend(state, epsilon, delta, "proved", mu=mu)
                    state["entries"].append(_trial(epsilon, delta, mu))
            else:  # basic sums only grow: the run fits iff its exact sum does
                _refuse_overspend(state, epsilon, delta, "proved", count=count, mu=mu)
                state["entries"].extend(_trial(epsilon, delta, mu) for _ in range(count))

    def charge(
        self,
        epsilon,
        delta=0.0,
        *,
        mu=None,
        delta_basis="proved",
        mechanism="external",
        sampler="",
        status="external",
    ) -> int:
        """Charge ``(epsilon, delta)`` if it fits (checked and recorded at once, under
        the store's lock); returns the charge's index.

        ``mu`` makes it a Gaussian charge: a release that is μ-GDP (and (ε, δ)-DP at
        that μ, refused otherwise), counted by its exact privacy loss in an optimal
        plan's total (module ``pymc_manidp.privacy.composition``).

        A release charges itself (``Mechanism.release(..., budget=b)``, status
        ``"charged"`` until :meth:`settle` or :meth:`fail`); call this for a release
        made elsewhere (e.g. an OpenDP measurement on the same records), recorded with
        status ``"external"``.

        Raises
        ------
        BudgetExceededError
            When the charge would overspend; nothing is recorded.
        """
        epsilon, delta = _check_epsilon(epsilon), _check_delta(delta)
        if delta_basis not in DELTA_BASES:
            raise ValueError(f"delta_basis must be one of {DELTA_BASES}, got {_short(delta_basis)}")
        if delta_basis == "estimated" and delta != 0:
            raise ValueError("an estimated delta is never charged: charge delta=0")
        if status not in ("charged", "external"):
            raise ValueError(f"status must be 'charged' or 'external', got {_short(status)}")
        mu = _gaussian_mu(epsilon, delta, mu, delta_basis)
        with self._store.transaction() as state:
            _refuse_overspend(state, epsilon, delta, delta_basis, mu=mu)
            index = len(state["entries"])
            state["entries"].append(
                {
                    "index": index,
                    "mechanism": str(mechanism),
                    "sampler": str(sampler),
                    "epsilon": epsilon,
                    "delta": delta,
                    "delta_basis": delta_basis,
                    "status": status,
                    "release": None,
                    "delta_estimate": None,
                    "error": None,
                    "mu": mu,
                }
            )
        return index

    def settle(self, index: int, release) -> None:
        """Record the :class:`~pymc_manidp.privacy.release.Release` made under charge
        ``index``: its public record, and its δ estimate in the estimated column."""
        with self._store.transaction() as state:
            entry = state["entries"][index]
            entry["status"] = "released"
            entry["release"] = release.public()
            if release.delta_estimate is not None:
                hat = float(release.delta_estimate["delta_hat"])
                # a ledger holds plain JSON: an undefined estimate is no estimate
                entry["delta_estimate"] = hat if math.isfinite(hat) and hat >= 0 else None

    def fail(self, index: int, error: BaseException) -> None:
        """Mark charge ``index`` as failed (its release raised ``error``). The charge
        stands: the data were read, and whether a release fails can depend on them."""
        with self._store.transaction() as state:
            entry = state["entries"][index]
            entry["status"] = "failed"
            entry["error"] = type(error).__name__

    def refused(self) -> None:
        """A release charged to this budget was refused before its charge: a ledger file
        made for it (``open_ledger`` of a new path) and still without a charge is removed,
        so that a refused call leaves no file (the budget keeps it in memory, and its
        first charge writes it again). Nothing happens to a budget held in memory or to
        a ledger that holds a charge."""
        discard = getattr(self._store, "discard_unused", None)
        if discard is not None:
            with contextlib.suppress(Exception):  # the refusal's own error is the one to show
                discard()

    # --- context manager: the budget releases are charged to by default -------------------
    def __enter__(self) -> PrivacyBudget:
        # a release is charged to one budget, the entered one: inside two, it would be
        # charged to the inner one only and the outer block's promise ("every release in
        # the block is charged") broken silently. Entering the same budget again is
        # harmless (one ledger either way)
        entered = _CURRENT.get()
        if entered is not None and entered is not self:
            raise ValueError(
                f"another privacy budget is entered here ({entered!r}): a release inside "
                "both 'with' blocks would be charged to the inner one only. A budget is the "
                "ledger of one data set and a release is charged to one budget: leave the "
                "outer block first (or enter none and pass each release its budget: "
                "release(data, budget=b)); to count a release against a second budget "
                "too, charge that one as well (b.charge(epsilon, delta, mechanism=...))"
            )
        # one stack of tokens per thread: the same budget may be entered in several
        if not hasattr(self._tokens, "stack"):
            self._tokens.stack = []
        self._tokens.stack.append(_CURRENT.set(self))
        return self

    def __exit__(self, *exc) -> None:
        _CURRENT.reset(self._tokens.stack.pop())


def _remaining(state, spend: Spend) -> tuple[float, float]:
    budget = state["budget"]
    if not math.isfinite(spend.epsilon):
        return 0.0, 0.0
    # an optimal total read from the PLD is read at the budget's delta: none is left
    eps, delta = _exact_spend(spend)
    eps_left = _exact(budget["epsilon"]) - eps
    delta_left = _exact(budget["delta"]) - delta
    return float(max(eps_left, Fraction(0))), float(max(delta_left, Fraction(0)))


def _trial(epsilon, delta, mu=None) -> dict:
    """An entry ``_spend`` counts, for a check that charges nothing."""
    return {"epsilon": epsilon, "delta": delta, "delta_basis": "proved", "mu": mu}


def _gaussian_mu(epsilon, delta, mu, delta_basis) -> float | None:
    """``mu`` of a charge (None: not Gaussian), checked: its δ is proved."""
    if mu is None:
        return None
    if delta_basis != "proved":
        raise ValueError(
            f"a Gaussian charge (mu given) has a proved delta, not {_short(delta_basis)}: "
            "drop mu= for an MCMC release"
        )
    return _check_mu(epsilon, delta, mu)


def _refuse_overspend(state, epsilon, delta, delta_basis, count=1, mu=None) -> None:
    """Raise BudgetExceededError unless ``count`` charges of ``(epsilon, delta)`` (a
    Gaussian one with ``mu``) are the plan's next ones (a planned budget) and their
    total, with the charges made, fits the budget (compared exactly)."""
    budget = state["budget"]
    plan = budget.get("plan")
    before = _spend(state)
    made = len(state["entries"])
    for k in range(made, made + count) if plan is not None else ():
        if k >= len(plan) or charge_form(epsilon, delta, mu) != plan[k]:
            planned = (
                f"charge {k} of the plan is epsilon = {plan[k][0]!r}, delta = {plan[k][1]!r}"
                + (f", Gaussian with mu = {plan[k][2]!r}" if len(plan[k]) == 3 else "")
                if k < len(plan)
                else f"all {len(plan)} charges of the plan are made"
            )
            batch = "" if count == 1 else f"{count} charges of "
            gauss = "" if mu is None else f" (Gaussian, mu = {mu!r})"
            raise BudgetExceededError(
                f"the release asks for {batch}epsilon = {epsilon!r}, delta = {delta!r}{gauss}, but "
                f"this budget's optimal composition covers only its plan, declared before the "
                f"first release, and {planned}: nothing was computed or released. Optimal "
                "composition holds for (epsilon, delta) fixed in advance, not for ones "
                "chosen after seeing earlier releases (docs/privacy-budget.md): make the "
                "planned charge, or release nothing more from these records",
                spent=(before.epsilon, before.delta),
                remaining=_remaining(state, before),
                asked=(epsilon, delta),
            )
    # the exact sum of the count charges, not epsilon * count rounded in floating point
    if plan is None:
        # basic sums (a budget without a plan): count copies add count times exactly,
        # with no list of count charges (check(count=10**9) was a MemoryError, 2**63 an
        # OverflowError); past the largest float the total is inf and does not fit
        eps, dlt = _basic_sums(state["entries"])
        eps += count * _exact(epsilon)
        dlt += 0 if delta_basis == "estimated" else count * _exact(delta)
        after = Spend(_to_float(eps), _to_float(dlt), True, "", (eps, dlt))
    else:  # count <= the plan's length here (checked above)
        after = _spend(state, extra=[(epsilon, delta, delta_basis, mu)] * count)
    if _fits(budget, after):
        return
    left = _remaining(state, before)
    batch = "" if count == 1 else f"{count} charges of "
    raise BudgetExceededError(
        f"the release asks for {batch}epsilon = {_fmt(epsilon)}, delta = {_fmt(delta)}, but "
        f"the budget (epsilon = {_fmt(budget['epsilon'])}, delta = {_fmt(budget['delta'])}, "
        f"{budget['composition']} composition) has spent epsilon = {_fmt(before.epsilon)}, "
        f"delta = {_fmt(before.delta)} and has epsilon = {_fmt(left[0])}, "
        f"delta = {_fmt(left[1])} left: nothing was computed or released. Ask for less "
        "(a smaller epsilon) or release nothing more from these records",
        spent=(before.epsilon, before.delta),
        remaining=left,
        asked=(epsilon, delta),
    )


def budget_to_charge(budget) -> PrivacyBudget | None:
    """The budget a release is charged to: ``budget``, or the one entered.

    Inside ``with entered:`` every release is charged to ``entered`` (the block's
    promise), so a release passed another budget there is refused: it would leave the
    entered one uncharged. Refused before anything is charged or read.

    Parameters
    ----------
    budget : PrivacyBudget or None
        The release's ``budget=`` argument (None: the budget entered, if any).

    Returns
    -------
    PrivacyBudget or None
        The budget to charge, or None when there is none.

    Raises
    ------
    TypeError
        ``budget`` is not a :class:`PrivacyBudget` (or None).
    ValueError
        ``budget`` is another budget than the one entered here.

    Examples
    --------
    >>> b = PrivacyBudget(1.0)
    >>> budget_to_charge(None) is None
    True
    >>> with b:
    ...     budget_to_charge(None) is b, budget_to_charge(b) is b
    (True, True)
    """
    entered = _CURRENT.get()
    if budget is None:
        return entered
    if not isinstance(budget, PrivacyBudget):
        raise TypeError(f"budget must be a PrivacyBudget, got {type(budget).__name__}")
    if entered is not None and budget is not entered:
        raise ValueError(
            f"budget={budget!r} is passed inside 'with' of another budget ({entered!r}), "
            "where every release is charged to the one entered: this release would leave "
            "it uncharged. Release outside the 'with' block, or without budget= inside it; "
            "to count a release against both, charge the other one as well "
            "(b.charge(epsilon, delta, mechanism=...))"
        )
    return budget


def current_budget() -> PrivacyBudget | None:
    """The budget entered with ``with budget:`` in this context, or None.

    Returns
    -------
    PrivacyBudget or None
        The innermost budget entered in this context (a context variable: each thread
        and each asyncio task has its own).

    Examples
    --------
    >>> b = PrivacyBudget(1.0)
    >>> with b:
    ...     current_budget() is b
    True
    >>> current_budget() is None
    True
    """
    return _CURRENT.get()
