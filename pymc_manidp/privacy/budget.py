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
  counts as the decimal number it prints as, so ten releases of ε = 0.1 spend ε = 1.
- ``"optimal"``: a **plan** of charges ``[(eps_1, delta_1), ..., (eps_k, delta_k)]``,
  declared when the budget is created (before the first release) and refused unless it
  fits the budget; the i-th charge must be the plan's i-th, and a charge outside the
  plan is refused. The total of the charges made so far is the basic one while it fits
  the budget, otherwise their worst-case privacy loss distributions composed
  numerically by ``dp_accounting``'s PLD accountant (an upper bound on the optimal
  composition of Kairouz, Oh & Viswanath 2015, Theorem 3.3, and Murtagh & Vadhan 2016),
  read at the budget's δ. Those theorems hold for releases chosen adaptively *with
  their (ε_i, δ_i) fixed in advance*; a curator who picks the next ε after seeing the
  earlier releases is not covered by them (Rogers, Roth, Ullman & Vadhan 2016, privacy
  filters), hence the plan. Needs the ``[budget]`` extra.

MCMC releases have no proved δ (docs/architecture.md, privacy rules). Charging one needs
either a δ the curator states (``delta_basis="assumed"``: counted in the total, which is
then marked not proved) or the coupling estimate (``"estimated"``: the estimate goes to
a separate column, never into the total). A total is ``proved`` only when every charge
is an exact release's or another proved (ε, δ).

The ledger's state is a plain JSON-able dict, sealed with a SHA-256 checksum over its
content and checked on every load (:func:`check_state`): the same code serves the
in-memory budget and the file on disk (``pymc_manidp.io.ledger``, which adds the atomic
write, the file lock and the data set's fingerprint).
"""

from __future__ import annotations

import contextlib
import contextvars
import copy
import hashlib
import json
import math
import threading
from dataclasses import dataclass
from fractions import Fraction

__all__ = [
    "COMPOSITIONS",
    "DELTA_BASES",
    "BudgetExceededError",
    "LedgerError",
    "PrivacyBudget",
    "Spend",
    "check_state",
    "checksum",
    "current_budget",
    "new_state",
    "seal",
]

#: the composition rules and the theorem each total comes from (docs/privacy-budget.md)
COMPOSITIONS = {
    "basic": "basic composition (Dwork & Roth 2014, Theorem 3.16): (sum of epsilons, "
    "sum of deltas)",
    "optimal": "a plan of charges declared before the first release; the basic sums while "
    "they fit the budget, otherwise privacy loss distributions composed by dp_accounting (an "
    "upper bound on optimal composition, Kairouz, Oh & Viswanath 2015, Theorem 3.3; Murtagh & "
    "Vadhan 2016: each release's (epsilon, delta) fixed in advance), read at the budget's delta",
}
#: the rule of an "optimal" ledger written before plans existed: its charges may have
#: been chosen adaptively, which only basic composition covers
UNPLANNED = (
    "basic composition (Dwork & Roth 2014, Theorem 3.16): this ledger's optimal composition "
    "has no plan declared before its first release, and optimal composition holds only for "
    "(epsilon, delta) fixed in advance"
)
#: the longest plan: each charge recomposes the plan's charges so far (1,000 unequal
#: charges take seconds)
MAX_PLAN = 1000
#: where a charge's δ comes from: a proof (exact samplers: 0), the curator's
#: assumption (MCMC), or the coupling estimate (MCMC; never in the total)
DELTA_BASES = ("proved", "assumed", "estimated")
STATUSES = ("charged", "released", "failed", "external")
FORMAT = "pymc-manidp privacy ledger"
VERSION = 1
PRIVACY_UNIT = "one record; neighbours replace one record; n public"

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


class LedgerError(ValueError):
    """A ledger that cannot be trusted.

    Edited into an inconsistent state, a checksum that does not match, or one that
    names another data set.
    """


@dataclass(frozen=True)
class Spend:
    """A total of a budget: what the releases charged to it are, together.

    Attributes
    ----------
    epsilon, delta : float
        The releases together are ``(epsilon, delta)``-DP on the ledger's records.
    proved : bool
        False when a charge's δ is the curator's assumption or an MCMC release charged
        with its coupling estimate (the total then rests on that assumption).
    rule : str
        The composition rule and the theorem it comes from.
    """

    epsilon: float
    delta: float
    proved: bool
    rule: str


def _exact(x) -> Fraction:
    """``x`` as the decimal number it prints as (``0.1`` is 1/10): sums are exact."""
    return Fraction(repr(float(x)))


def _check_epsilon(epsilon, name="epsilon") -> float:
    if isinstance(epsilon, bool) or not isinstance(epsilon, int | float):
        try:
            epsilon = float(epsilon)
        except (TypeError, ValueError):
            raise TypeError(f"{name} must be a real number, got {epsilon!r}") from None
    epsilon = float(epsilon)
    if not (math.isfinite(epsilon) and epsilon > 0):
        raise ValueError(f"{name} must be a finite number > 0, got {epsilon!r}")
    return epsilon


def _check_delta(delta, name="delta") -> float:
    if isinstance(delta, bool) or not isinstance(delta, int | float):
        try:
            delta = float(delta)
        except (TypeError, ValueError):
            raise TypeError(f"{name} must be a real number, got {delta!r}") from None
    delta = float(delta)
    if not (0 <= delta < 1):
        raise ValueError(f"{name} must be in [0, 1), got {delta!r}")
    return delta


def _check_plan(plan, composition) -> list[list[float]] | None:
    """The plan as ``[[epsilon, delta], ...]`` (floats), or None for basic composition."""
    if composition != "optimal":
        if plan is not None:
            raise ValueError(
                "a plan is for composition='optimal': basic composition holds however the "
                "releases are chosen, and needs none (drop plan=)"
            )
        return None
    if plan is None:
        raise ValueError(
            "composition='optimal' needs the plan of charges declared before the first "
            "release, plan=[(epsilon, delta), ...]: optimal composition (Kairouz, Oh & "
            "Viswanath 2015; Murtagh & Vadhan 2016) holds for (epsilon, delta) fixed in "
            "advance, not for ones chosen after seeing earlier releases. Without a plan, "
            "use composition='basic' (valid however the releases are chosen)"
        )
    if isinstance(plan, str | bytes | dict) or not hasattr(plan, "__iter__"):
        raise TypeError(
            f"plan must be a sequence of epsilon or (epsilon, delta) pairs, got {plan!r}"
        )
    pairs = []
    for i, item in enumerate(plan):
        if len(pairs) >= MAX_PLAN:
            raise ValueError(
                f"a plan has at most {MAX_PLAN} charges (each charge recomposes the plan so "
                "far); merge small charges or use composition='basic'"
            )
        if isinstance(item, str | bytes | dict) or not hasattr(item, "__len__"):
            if isinstance(item, int | float) and not isinstance(item, bool):
                item = (item, 0.0)
            else:
                raise TypeError(f"plan[{i}] must be epsilon or (epsilon, delta), got {item!r}")
        if len(item) != 2:
            raise TypeError(f"plan[{i}] must be epsilon or (epsilon, delta), got {item!r}")
        if any(isinstance(v, bool) for v in item):  # True is no epsilon of 1
            raise TypeError(f"plan[{i}] must be real numbers, not bools, got {item!r}")
        try:
            pair = [
                _check_epsilon(item[0], f"plan[{i}]'s epsilon"),
                _check_delta(item[1], f"plan[{i}]'s delta"),
            ]
        except OverflowError:  # an int past the largest float
            raise ValueError(f"plan[{i}] must be finite numbers, got {item!r}") from None
        pairs.append(pair)
    if not pairs:
        raise ValueError("the plan is empty: declare at least one (epsilon, delta) charge")
    return pairs


def new_state(epsilon, delta=0.0, *, composition="basic", dataset=None, plan=None) -> dict:
    """A new, empty ledger's state (sealed): a budget of ``(epsilon, delta)``.

    ``dataset`` is the file ledger's record of its data set (name and keyed
    fingerprint, ``pymc_manidp.io.ledger``), or None for an in-memory budget. ``plan``
    (``composition="optimal"`` only, and required there) is the list of the charges
    ``(epsilon, delta)`` the budget will admit, in order; it is refused unless the
    whole plan fits the budget.
    """
    if composition not in COMPOSITIONS:
        raise ValueError(
            f"composition must be one of {', '.join(map(repr, COMPOSITIONS))}, got {composition!r}"
        )
    budget = {
        "epsilon": _check_epsilon(epsilon),
        "delta": _check_delta(delta),
        "composition": composition,
        "plan": _check_plan(plan, composition),
    }
    if budget["plan"] is not None:
        whole = _total(budget, [(e, d, "proved") for e, d in budget["plan"]])
        if not _fits(budget, whole):
            raise ValueError(
                f"the plan's {len(budget['plan'])} charges together spend epsilon = "
                f"{_fmt(whole.epsilon)} at delta = {_fmt(whole.delta)} (optimal composition), "
                f"more than the budget (epsilon = {_fmt(budget['epsilon'])}, delta = "
                f"{_fmt(budget['delta'])}): plan fewer or smaller charges, or a larger budget"
            )
    state = {
        "format": FORMAT,
        "version": VERSION,
        "privacy_unit": PRIVACY_UNIT,
        "budget": budget,
        "dataset": dataset,
        "entries": [],
        "totals": {"count": 0, "epsilon": 0.0, "delta": 0.0},
    }
    return seal(state)


def _canonical(state: dict) -> bytes:
    body = {k: v for k, v in state.items() if k != "checksum"}
    return json.dumps(body, sort_keys=True, separators=(",", ":"), allow_nan=False).encode()


def checksum(doc: dict) -> str:
    """``"sha256:<hex>"`` of ``doc`` without its ``"checksum"`` key, as canonical JSON.

    The seal of ledgers and of release files (``Release.to_json``): it catches edits
    and damage, not a forger, who can recompute it. Raises ``TypeError`` or
    ``ValueError`` for content that is not plain JSON (NaN included).
    """
    return "sha256:" + hashlib.sha256(_canonical(doc)).hexdigest()


def seal(state: dict) -> dict:
    """Recompute the running totals and the checksum of ``state`` (in place; returned)."""
    eps, delta = _basic_sums(state["entries"])
    state["totals"] = {
        "count": len(state["entries"]),
        "epsilon": float(eps),
        "delta": float(delta),
    }
    state["checksum"] = checksum(state)
    return state


def _basic_sums(entries) -> tuple[Fraction, Fraction]:
    eps = sum((_exact(e["epsilon"]) for e in entries), Fraction(0))
    delta = sum(
        (_exact(e["delta"]) for e in entries if e["delta_basis"] != "estimated"), Fraction(0)
    )
    return eps, delta


def check_state(state) -> dict:
    """Refuse a ledger state that is not consistent; returns it unchanged.

    Checks the format, the checksum, the budget, every entry (numbered in order, ε > 0,
    δ in [0, 1), a known δ basis and status) and the running totals against the
    entries. The checksum catches edits and truncation by mistake, not a forger (who
    can recompute it): the ledger guards the curator against errors, it is not a
    signature.

    Raises
    ------
    LedgerError
        Saying what is inconsistent.
    """
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        raise LedgerError(f"not a {FORMAT} (no 'format': {FORMAT!r})")
    if state.get("version") != VERSION:
        raise LedgerError(f"unknown ledger version {state.get('version')!r} (this is {VERSION})")
    try:
        expected = checksum(state)
    except (TypeError, ValueError) as err:
        raise LedgerError(f"the ledger is not plain JSON: {err}") from None
    if state.get("checksum") != expected:
        raise LedgerError(
            "the ledger's checksum does not match its content: it was edited or damaged "
            "after it was written; restore it from a backup (a ledger is never edited by hand)"
        )
    try:
        budget = state["budget"]
        _check_epsilon(budget["epsilon"], "the budget's epsilon")
        _check_delta(budget["delta"], "the budget's delta")
        if budget["composition"] not in COMPOSITIONS:
            raise ValueError(f"unknown composition {budget['composition']!r}")
        entries = state["entries"]
        plan = budget.get("plan")  # absent in ledgers written before plans existed
        if plan is not None:
            if budget["composition"] != "optimal":
                raise ValueError("a plan in a budget of basic composition")
            if _check_plan(plan, "optimal") != plan:
                raise ValueError("the plan is not a list of [epsilon, delta] pairs")
            for i, e in enumerate(entries):
                if i >= len(plan) or [e["epsilon"], e["delta"]] != plan[i]:
                    raise ValueError(f"entry {i} is not the plan's charge {i}")
        for i, e in enumerate(entries):
            if e["index"] != i:
                raise ValueError(f"entry {i} is numbered {e['index']!r}: entries are out of order")
            _check_epsilon(e["epsilon"], f"entry {i}'s epsilon")
            _check_delta(e["delta"], f"entry {i}'s delta")
            if e["delta_basis"] not in DELTA_BASES:
                raise ValueError(f"entry {i} has an unknown delta basis {e['delta_basis']!r}")
            if e["status"] not in STATUSES:
                raise ValueError(f"entry {i} has an unknown status {e['status']!r}")
        eps, delta = _basic_sums(entries)
        totals = state["totals"]
        if (
            totals["count"] != len(entries)
            or _exact(totals["epsilon"]) != eps
            or _exact(totals["delta"]) != delta
        ):
            raise ValueError("the running totals do not match the entries")
    except (KeyError, TypeError, ValueError) as err:
        msg = f"missing field {err}" if isinstance(err, KeyError) else str(err)
        raise LedgerError(f"inconsistent ledger: {msg}") from None
    return state


def _pld_epsilon(charges, delta_target: float) -> float:
    """ε at ``delta_target`` of the composed worst-case PLDs of ``(eps, delta)`` charges."""
    try:
        from dp_accounting.pld import common, privacy_loss_distribution
    except ImportError:  # pragma: no cover - the [budget] extra
        raise ImportError(
            "composition='optimal' uses dp_accounting: pip install 'pymc-manidp[budget]'"
        ) from None
    pld = None
    try:
        for eps, delta in charges:
            one = privacy_loss_distribution.from_privacy_parameters(
                common.DifferentialPrivacyParameters(eps, delta)
            )
            pld = one if pld is None else pld.compose(one)
        return float(pld.get_epsilon_for_delta(delta_target))
    except OverflowError:  # an epsilon past what the PLD can discretize (1e308): no bound
        return math.inf


def _spend(state, extra=()) -> Spend:
    """The total of ``state``'s entries (and ``extra`` charges ``(eps, delta, basis)``)."""
    charges = [(e["epsilon"], e["delta"], e["delta_basis"]) for e in state["entries"]]
    return _total(state["budget"], charges + list(extra))


def _total(budget, charges) -> Spend:
    """The total of ``charges`` ``(eps, delta, basis)`` under ``budget``'s rule."""
    proved = all(basis == "proved" for _, _, basis in charges)
    eps = sum((_exact(c[0]) for c in charges), Fraction(0))
    delta = sum((_exact(c[1]) for c in charges if c[2] != "estimated"), Fraction(0))
    # a sum past the largest float (two charges of 1e308) is inf: it fits no budget
    basic = Spend(_float(eps), _float(delta), proved, COMPOSITIONS["basic"])
    if budget["composition"] == "basic" or not charges:
        return basic
    if budget.get("plan") is None:  # an unplanned optimal ledger (module docstring)
        return Spend(basic.epsilon, basic.delta, proved, UNPLANNED)
    rule = COMPOSITIONS["optimal"]
    # (Σε, Σδ) while it fits: a total of pure charges then keeps δ = 0, where the PLD read
    # at the budget's δ would report (Σε - a hair, budget δ)
    if eps <= _exact(budget["epsilon"]) and delta <= _exact(budget["delta"]):
        return Spend(basic.epsilon, basic.delta, proved, rule)
    target = budget["delta"]
    counted = [(c[0], c[1] if c[2] != "estimated" else 0.0) for c in charges]
    optimal = _pld_epsilon(counted, target) if delta < _exact(target) else math.inf
    return Spend(optimal, float(target), proved, rule)


def _float(x: Fraction) -> float:
    try:
        return float(x)
    except OverflowError:
        return math.inf


def _fits(budget, spend: Spend) -> bool:
    if not math.isfinite(spend.epsilon):
        return False
    return _exact(spend.epsilon) <= _exact(budget["epsilon"]) and _exact(spend.delta) <= _exact(
        budget["delta"]
    )


def _fmt(x) -> str:
    return f"{x:.6g}"


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
        The total ε (> 0).
    delta : float, default 0.0
        The total δ, in [0, 1).
    composition : {"basic", "optimal"}
        How charges add up (module docstring); ``"optimal"`` needs dp_accounting and a
        ``plan``.
    plan : sequence of float or (float, float), optional
        ``composition="optimal"`` only, and required there: the charges
        ``(epsilon, delta)`` (a number alone is ``(epsilon, 0)``) the budget admits, in
        this order, declared before the first release. Refused unless the whole plan
        fits the budget; a charge other than the plan's next one is refused
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
    def plan(self) -> list[tuple[float, float]] | None:
        """The charges ``(epsilon, delta)`` an optimal budget admits, in order (None:
        basic composition, or an optimal ledger written before plans existed)."""
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
        return _total(state["budget"], [(e, d, "proved") for e, d in plan])

    @property
    def spent(self) -> Spend:
        """What the charges so far are together (a :class:`Spend`)."""
        return _spend(self._state())

    @property
    def remaining(self) -> tuple[float, float]:
        """``(epsilon, delta)`` left: the budget minus :attr:`spent`."""
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
        keep = ("index", "mechanism", "sampler", "epsilon", "delta", "delta_basis", "status")
        dataset = state["dataset"]
        return {
            "privacy_unit": state["privacy_unit"],
            "dataset": None if dataset is None else dataset.get("name"),
            "budget": dict(state["budget"]),
            "spent": {"epsilon": spend.epsilon, "delta": spend.delta, "proved": spend.proved},
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
    def check(self, epsilon, delta=0.0, *, delta_basis="proved") -> None:
        """Raise :class:`BudgetExceededError` if a charge of ``(epsilon, delta)`` would
        overspend; changes nothing."""
        epsilon, delta = _check_epsilon(epsilon), _check_delta(delta)
        _refuse_overspend(self._state(), epsilon, delta, delta_basis)

    def check_many(self, charges) -> None:
        """Raise :class:`BudgetExceededError` if the charges ``[(epsilon, delta), ...]``,
        made in this order, would overspend or leave the plan; changes nothing.

        For a call that charges several releases at once: it is refused before the
        first charge rather than after some (``Mechanism.release_many``).
        """
        state = self._state()
        for epsilon, delta in charges:
            epsilon, delta = _check_epsilon(epsilon), _check_delta(delta)
            _refuse_overspend(state, epsilon, delta, "proved")
            state["entries"].append({"epsilon": epsilon, "delta": delta, "delta_basis": "proved"})

    def charge(
        self,
        epsilon,
        delta=0.0,
        *,
        delta_basis="proved",
        mechanism="external",
        sampler="",
        status="external",
    ) -> int:
        """Charge ``(epsilon, delta)`` if it fits (checked and recorded at once, under
        the store's lock); returns the charge's index.

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
            raise ValueError(f"delta_basis must be one of {DELTA_BASES}, got {delta_basis!r}")
        if delta_basis == "estimated" and delta != 0:
            raise ValueError("an estimated delta is never charged: charge delta=0")
        if status not in ("charged", "external"):
            raise ValueError(f"status must be 'charged' or 'external', got {status!r}")
        with self._store.transaction() as state:
            _refuse_overspend(state, epsilon, delta, delta_basis)
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
                entry["delta_estimate"] = float(release.delta_estimate["delta_hat"])

    def fail(self, index: int, error: BaseException) -> None:
        """Mark charge ``index`` as failed (its release raised ``error``). The charge
        stands: the data were read, and whether a release fails can depend on them."""
        with self._store.transaction() as state:
            entry = state["entries"][index]
            entry["status"] = "failed"
            entry["error"] = type(error).__name__

    # --- context manager: the budget releases are charged to by default -------------------
    def __enter__(self) -> PrivacyBudget:
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
    eps_left = _exact(budget["epsilon"]) - _exact(spend.epsilon)
    delta_left = _exact(budget["delta"]) - _exact(spend.delta)
    return float(max(eps_left, Fraction(0))), float(max(delta_left, Fraction(0)))


def _refuse_overspend(state, epsilon, delta, delta_basis) -> None:
    budget = state["budget"]
    plan = budget.get("plan")
    before = _spend(state)
    if plan is not None:
        k = len(state["entries"])
        if k >= len(plan) or [epsilon, delta] != plan[k]:
            planned = (
                f"charge {k} of the plan is epsilon = {plan[k][0]!r}, delta = {plan[k][1]!r}"
                if k < len(plan)
                else f"all {len(plan)} charges of the plan are made"
            )
            raise BudgetExceededError(
                f"the release asks for epsilon = {epsilon!r}, delta = {delta!r}, but this "
                f"budget's optimal composition covers only its plan, declared before the "
                f"first release, and {planned}: nothing was computed or released. Optimal "
                "composition holds for (epsilon, delta) fixed in advance, not for ones "
                "chosen after seeing earlier releases (docs/privacy-budget.md): make the "
                "planned charge, or release nothing more from these records",
                spent=(before.epsilon, before.delta),
                remaining=_remaining(state, before),
                asked=(epsilon, delta),
            )
    after = _spend(state, extra=[(epsilon, delta, delta_basis)])
    if _fits(budget, after):
        return
    left = _remaining(state, before)
    raise BudgetExceededError(
        f"the release asks for epsilon = {_fmt(epsilon)}, delta = {_fmt(delta)}, but the "
        f"budget (epsilon = {_fmt(budget['epsilon'])}, delta = {_fmt(budget['delta'])}, "
        f"{budget['composition']} composition) has spent epsilon = {_fmt(before.epsilon)}, "
        f"delta = {_fmt(before.delta)} and has epsilon = {_fmt(left[0])}, "
        f"delta = {_fmt(left[1])} left: nothing was computed or released. Ask for less "
        "(a smaller epsilon) or release nothing more from these records",
        spent=(before.epsilon, before.delta),
        remaining=left,
        asked=(epsilon, delta),
    )


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
