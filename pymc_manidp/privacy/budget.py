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
import decimal
import hashlib
import json
import math
import numbers
import re
import sys
import threading
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

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
#: 2: running totals as exact decimal strings (1 sealed them as floats, which could
#: disagree with the exact sums and brick the ledger; 1 is migrated on load)
VERSION = 2
LOADABLE_VERSIONS = (1, 2)
#: the deepest nesting a ledger may have (a release record is about 4 deep): a deeper
#: one is refused before anything recurses into it
MAX_DEPTH = 32
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
    exact : tuple of Fraction or None
        ``(epsilon, delta)`` exactly, as the budget compares them (the floats above
        are rounded to the nearest double for reading, and past the largest float are
        inf). None for an optimal total read from the PLD: a float, compared as the
        decimal it prints as.
    """

    epsilon: float
    delta: float
    proved: bool
    rule: str
    #: ``(epsilon, delta)`` as exact fractions when the floats above are rounded
    #: (basic sums, under either rule): what the budget is compared with
    exact: tuple[Fraction, Fraction] | None = field(default=None, repr=False, compare=False)


def _exact(x) -> Fraction:
    """``x`` as the decimal number it prints as (``0.1`` is 1/10): sums are exact."""
    return Fraction(repr(float(x)))


def _exact_spend(spend: Spend) -> tuple[Fraction, Fraction]:
    if spend.exact is not None:
        return spend.exact
    return _exact(spend.epsilon), _exact(spend.delta)


def _decimal_text(q: Fraction) -> str:
    """The exact decimal string of ``q`` (a sum of decimals: a finite decimal)."""
    den, k = q.denominator, 0
    while den % 10 == 0:
        den //= 10
        k += 1
    while den % 2 == 0 or den % 5 == 0:  # scale to a power of ten
        den //= 2 if den % 2 == 0 else 5
        k += 1
    if den != 1:  # pragma: no cover - sums of floats' decimals are finite decimals
        raise ValueError(f"{q} has no finite decimal expansion")
    digits = abs(q.numerator * 10**k // q.denominator)
    sign = "-" if q < 0 else ""
    if k == 0:
        return f"{sign}{digits}"
    text = str(digits).rjust(k + 1, "0")
    return f"{sign}{text[:-k]}.{text[-k:]}"


_DECIMAL = re.compile(r"\A(?:0|[1-9][0-9]*)(?:\.[0-9]+)?\Z")


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:20]}...{text[-8:]} ({len(text)} characters)"


def _given_exactly(value, name) -> Fraction:
    """The exact number the caller gave: a float as the decimal it prints as, an int,
    ``Fraction`` or ``Decimal`` as itself. Bools and strings are refused (TypeError):
    ``True`` is not ε = 1."""
    if isinstance(value, bool | np.bool_) or not isinstance(value, numbers.Real | decimal.Decimal):
        raise TypeError(
            f"{name} must be a real number (a float, int, Fraction or Decimal), got "
            f"{type(value).__name__} {_short(value)}"
        )
    if isinstance(value, decimal.Decimal):
        if not value.is_finite():
            raise ValueError(f"{name} must be a finite number, got {value!r}")
        return Fraction(value)
    if isinstance(value, numbers.Rational):
        return Fraction(int(value.numerator), int(value.denominator))
    x = float(value)
    if not math.isfinite(x):
        raise ValueError(f"{name} must be a finite number, got {_short(value)}")
    return _exact(x)


def _as_double(q: Fraction, name, *, up: bool) -> float:
    """The double whose decimal is the closest to ``q`` on the safe side: at least
    ``q`` for a charge (``up``), at most ``q`` for a budget."""
    try:
        x = float(q)
    except OverflowError:
        x = math.inf
    if math.isinf(x):
        raise ValueError(
            f"{name} must be at most {sys.float_info.max!r} (the largest float), got "
            f"{_short(q if q.denominator != 1 else q.numerator)}"
        )
    while (_exact(x) < q) if up else (_exact(x) > q):
        x = math.nextafter(x, math.inf if up else -math.inf)
    return x


def _check_epsilon(epsilon, name="epsilon", *, up: bool = True) -> float:
    q = _given_exactly(epsilon, name)
    x = _as_double(q, name, up=up) if q > 0 else 0.0
    if not (math.isfinite(x) and x > 0):
        raise ValueError(f"{name} must be a finite number > 0, got {_short(epsilon)}")
    return x


def _check_delta(delta, name="delta", *, up: bool = True) -> float:
    q = _given_exactly(delta, name)
    x = _as_double(q, name, up=up) if 0 <= q < 1 else -1.0
    if not (0 <= x < 1):
        raise ValueError(f"{name} must be in [0, 1), got {_short(delta)}")
    return x


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
            if isinstance(item, numbers.Real | decimal.Decimal) and not isinstance(item, bool):
                item = (item, 0.0)
            else:
                raise TypeError(f"plan[{i}] must be epsilon or (epsilon, delta), got {item!r}")
        if len(item) != 2:
            raise TypeError(f"plan[{i}] must be epsilon or (epsilon, delta), got {item!r}")
        if any(isinstance(v, bool) for v in item):  # True is no epsilon of 1
            raise TypeError(f"plan[{i}] must be real numbers, not bools, got {item!r}")
        # charges: an exact number is rounded up to a float's decimal, as charge() does,
        # so the i-th charge of the same number matches plan[i]
        pairs.append(
            [
                _check_epsilon(item[0], f"plan[{i}]'s epsilon"),
                _check_delta(item[1], f"plan[{i}]'s delta"),
            ]
        )
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
        # a budget given exactly is rounded down: the ledger never allows more
        "epsilon": _check_epsilon(epsilon, up=False),
        "delta": _check_delta(delta, up=False),
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
        "totals": {"count": 0, "epsilon": "0", "delta": "0"},
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
    """Recompute the running totals (exact decimal strings) and the checksum of
    ``state`` (in place; returned)."""
    eps, delta = _basic_sums(state["entries"])
    state["version"] = VERSION
    state["totals"] = {
        "count": len(state["entries"]),
        "epsilon": _decimal_text(eps),
        "delta": _decimal_text(delta),
    }
    state["checksum"] = checksum(state)
    return state


def _basic_sums(entries) -> tuple[Fraction, Fraction]:
    eps = sum((_exact(e["epsilon"]) for e in entries), Fraction(0))
    delta = sum(
        (_exact(e["delta"]) for e in entries if e["delta_basis"] != "estimated"), Fraction(0)
    )
    return eps, delta


_TOP = ("format", "version", "privacy_unit", "budget", "dataset", "entries", "totals", "checksum")
_ENTRY = (
    "index",
    "mechanism",
    "sampler",
    "epsilon",
    "delta",
    "delta_basis",
    "status",
    "release",
    "delta_estimate",
    "error",
)


class _Bad(Exception):
    """A field of a ledger state that is not what the writer writes."""


def _depth(value) -> int:
    """The nesting depth of ``value``, without recursion (refused past MAX_DEPTH)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            if depth > MAX_DEPTH:
                raise _Bad(f"the ledger is nested deeper than {MAX_DEPTH} levels")
            deepest = max(deepest, depth)
            stack.extend(
                (v, depth + 1) for v in (item.values() if isinstance(item, dict) else item)
            )
    return deepest


def _fields(obj, where: str, keys, optional=()) -> dict:
    if not isinstance(obj, dict):
        raise _Bad(f"{where} must be an object, got {type(obj).__name__}")
    missing = [k for k in keys if k not in obj]
    if missing:
        raise _Bad(f"{where}.{missing[0]} is missing")
    extra = sorted(k for k in obj if k not in keys and k not in optional)
    if extra:
        raise _Bad(f"{where}.{extra[0]} is not a field of a ledger")
    return obj


def _float(value, where: str, low: float, high: float, *, low_open=False, high_open=False):
    if not isinstance(value, float):  # the writer writes floats; 5, "5" and true are not
        raise _Bad(f"{where} must be a number written as a float, got {_short(value)}")
    ok = math.isfinite(value) and (value > low if low_open else value >= low)
    ok = ok and (value < high if high_open else value <= high)
    if not ok:
        lo, hi = "(["[not low_open], ")]"[not high_open]
        raise _Bad(f"{where} must be in {lo}{low:g}, {high:g}{hi}, got {_short(value)}")
    return value


def _text(value, where: str, choices=None):
    if not isinstance(value, str):
        raise _Bad(f"{where} must be a string, got {_short(value)}")
    if choices is not None and value not in choices:
        raise _Bad(f"{where} must be one of {', '.join(map(repr, choices))}, got {_short(value)}")
    return value


def _count(value, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise _Bad(f"{where} must be a whole number >= 0, got {_short(value)}")
    return value


def _check_plan_field(budget) -> None:
    """``budget.plan``: null, or (optimal composition only) 1 to ``MAX_PLAN`` pairs
    ``[epsilon, delta]`` of floats in the ranges of a charge's."""
    plan = budget.get("plan")
    if plan is None:
        return None
    if budget["composition"] != "optimal":
        raise _Bad(
            f"budget.plan must be null for {budget['composition']!r} composition (a plan "
            "is for optimal composition), got a plan"
        )
    if not isinstance(plan, list) or not 1 <= len(plan) <= MAX_PLAN:
        raise _Bad(
            f"budget.plan must be null or a list of 1 to {MAX_PLAN} [epsilon, delta] pairs, "
            f"got {_short(plan)}"
        )
    for i, pair in enumerate(plan):
        if not isinstance(pair, list) or len(pair) != 2:
            raise _Bad(f"budget.plan[{i}] must be a pair [epsilon, delta], got {_short(pair)}")
        _float(pair[0], f"budget.plan[{i}][0] (epsilon)", 0, math.inf, low_open=True)
        _float(pair[1], f"budget.plan[{i}][1] (delta)", 0, 1, high_open=True)


def _check_schema(state) -> int:
    """Every field's type and range; returns the version. Raises ``_Bad``."""
    _depth(state)
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        raise _Bad(f"not a {FORMAT} (no 'format': {FORMAT!r})")
    version = state.get("version")
    if isinstance(version, bool) or version not in LOADABLE_VERSIONS:
        raise _Bad(
            f"unknown ledger version {_short(version)} (this code reads versions "
            f"{', '.join(map(str, LOADABLE_VERSIONS))})"
        )
    _fields(state, "ledger", _TOP)
    _text(state["privacy_unit"], "privacy_unit", (PRIVACY_UNIT,))
    # plan: absent in ledgers written before plans existed (read as null)
    budget = _fields(
        state["budget"], "budget", ("epsilon", "delta", "composition"), optional=("plan",)
    )
    _float(budget["epsilon"], "budget.epsilon", 0, math.inf, low_open=True)
    _float(budget["delta"], "budget.delta", 0, 1, high_open=True)
    _text(budget["composition"], "budget.composition", tuple(COMPOSITIONS))
    _check_plan_field(budget)
    dataset = state["dataset"]
    if dataset is not None:
        _fields(dataset, "dataset", ("name", "key", "fingerprint"))
        _text(dataset["name"], "dataset.name")
        key = _text(dataset["key"], "dataset.key")
        if not re.fullmatch(r"(?:[0-9a-f]{2}){16,64}", key):
            raise _Bad("dataset.key must be 16 to 64 bytes in lowercase hex")
        _text(dataset["fingerprint"], "dataset.fingerprint")
    entries = state["entries"]
    if not isinstance(entries, list):
        raise _Bad(f"entries must be a list, got {type(entries).__name__}")
    for i, e in enumerate(entries):
        at = f"entries[{i}]"
        _fields(e, at, _ENTRY)
        _count(e["index"], f"{at}.index")
        _text(e["mechanism"], f"{at}.mechanism")
        _text(e["sampler"], f"{at}.sampler")
        _float(e["epsilon"], f"{at}.epsilon", 0, math.inf, low_open=True)
        _float(e["delta"], f"{at}.delta", 0, 1, high_open=True)
        _text(e["delta_basis"], f"{at}.delta_basis", DELTA_BASES)
        _text(e["status"], f"{at}.status", STATUSES)
        if e["delta_basis"] == "estimated" and e["delta"] != 0:
            raise _Bad(
                f"{at}.delta must be 0 for an estimated delta (the estimate is never "
                f"charged), got {_short(e['delta'])}"
            )
        if e["release"] is not None and not isinstance(e["release"], dict):
            raise _Bad(f"{at}.release must be a release record or null")
        if (e["release"] is not None) != (e["status"] == "released"):
            raise _Bad(f"{at}.release: a release record goes with status 'released' only")
        if e["delta_estimate"] is not None:
            _float(e["delta_estimate"], f"{at}.delta_estimate", 0, math.inf)
        if e["error"] is not None:
            _text(e["error"], f"{at}.error")
    totals = _fields(state["totals"], "totals", ("count", "epsilon", "delta"))
    _count(totals["count"], "totals.count")
    for k in ("epsilon", "delta"):
        if version == 1:  # sealed as floats
            _float(totals[k], f"totals.{k}", 0, math.inf)
        elif not (isinstance(totals[k], str) and _DECIMAL.match(totals[k])):
            raise _Bad(f"totals.{k} must be an exact decimal string, got {_short(totals[k])}")
    _text(state["checksum"], "checksum")
    return version


def check_state(state) -> dict:
    """Refuse a ledger state that is not consistent; returns it (migrated to this
    version: a version 1 state, whose totals were sealed as floats, is resealed with
    exact totals, every entry kept).

    Checks, in order: every field's type and range (the schema a writer of this
    package writes, at most ``MAX_DEPTH`` deep; ``budget.plan`` null, or for optimal
    composition a list of ``[epsilon, delta]`` charges), the checksum, then the
    entries (numbered in order, the i-th equal to ``budget.plan[i]`` when there is a
    plan) against the running totals. The checksum catches edits and
    truncation by mistake, not a forger (who can recompute it): the ledger guards the
    curator against errors, it is not a signature; a resealed state is still refused
    field by field.

    Raises
    ------
    LedgerError
        Saying what is inconsistent, naming the field.
    """
    try:
        version = _check_schema(state)
    except _Bad as err:
        raise LedgerError(f"inconsistent ledger: {err}") from None
    try:
        expected = checksum(state)
    except (TypeError, ValueError, RecursionError) as err:  # pragma: no cover - schema first
        raise LedgerError(f"the ledger is not plain JSON: {err}") from None
    if state["checksum"] != expected:
        raise LedgerError(
            "the ledger's checksum does not match its content: it was edited or damaged "
            "after it was written; restore it from a backup (a ledger is never edited by hand)"
        )
    entries = state["entries"]
    for i, e in enumerate(entries):
        if e["index"] != i:
            raise LedgerError(
                f"inconsistent ledger: entries[{i}].index: entry {i} is numbered "
                f"{e['index']!r}: entries are out of order"
            )
    plan = state["budget"].get("plan")
    for i, e in enumerate(entries if plan is not None else ()):
        if i >= len(plan) or [e["epsilon"], e["delta"]] != plan[i]:
            planned = f"budget.plan[{i}] = {plan[i]!r}" if i < len(plan) else "past the plan"
            raise LedgerError(
                f"inconsistent ledger: entries[{i}]: the charge (epsilon, delta) = "
                f"({e['epsilon']!r}, {e['delta']!r}) is not the plan's charge {i} ({planned}): "
                "an optimal budget admits only its plan"
            )
    eps, delta = _basic_sums(entries)
    totals = state["totals"]
    if version == 1:  # what version 1's seal wrote: the exact sums rounded to floats
        same = totals["epsilon"] == float(eps) and totals["delta"] == float(delta)
    else:
        same = Fraction(totals["epsilon"]) == eps and Fraction(totals["delta"]) == delta
    if totals["count"] != len(entries) or not same:
        raise LedgerError("inconsistent ledger: the running totals do not match the entries")
    if version != VERSION:
        state = seal(copy.deepcopy(state))
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
    # a sum past the largest float (two charges of 1e308) reads as inf; the exact
    # sums are kept beside it and are what the budget is compared with
    basic = Spend(_to_float(eps), _to_float(delta), proved, COMPOSITIONS["basic"], (eps, delta))
    if budget["composition"] == "basic" or not charges:
        return basic
    if budget.get("plan") is None:  # an unplanned optimal ledger (module docstring)
        return Spend(basic.epsilon, basic.delta, proved, UNPLANNED, basic.exact)
    rule = COMPOSITIONS["optimal"]
    # (Σε, Σδ) while it fits, compared exactly: a total of pure charges then keeps δ = 0,
    # where the PLD read at the budget's δ would report (Σε - a hair, budget δ)
    if eps <= _exact(budget["epsilon"]) and delta <= _exact(budget["delta"]):
        return Spend(basic.epsilon, basic.delta, proved, rule, basic.exact)
    target = budget["delta"]
    counted = [(c[0], c[1] if c[2] != "estimated" else 0.0) for c in charges]
    optimal = _pld_epsilon(counted, target) if delta < _exact(target) else math.inf
    # the PLD's epsilon is a float: compared as the decimal it prints as (its repr)
    return Spend(optimal, float(target), proved, rule)


def _to_float(x: Fraction) -> float:
    """``x`` to read, inf past the largest float (the exact value is kept beside it)."""
    try:
        return float(x)
    except OverflowError:
        return math.inf


def _fits(budget, spend: Spend) -> bool:
    """Whether ``spend`` fits ``budget``, compared as exact fractions (a float total
    rounds: 1e16 + 1 is 1e16 in floating point). Both ε and δ, under either rule: an
    optimal total read from the PLD is read at the budget's δ."""
    if not math.isfinite(spend.epsilon):
        return False
    eps, delta = _exact_spend(spend)
    return eps <= _exact(budget["epsilon"]) and delta <= _exact(budget["delta"])


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
        exact = _exact_spend(spend)
        keep = ("index", "mechanism", "sampler", "epsilon", "delta", "delta_basis", "status")
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
    def check(self, epsilon, delta=0.0, *, delta_basis="proved", count=1) -> None:
        """Raise :class:`BudgetExceededError` if ``count`` charges of ``(epsilon,
        delta)`` would overspend; changes nothing.

        ``count`` checks a batch at once (``release_many``) with the exact sum, where
        ``epsilon * count`` in floating point may round below it.
        """
        epsilon, delta = _check_epsilon(epsilon), _check_delta(delta)
        if delta_basis not in DELTA_BASES:
            raise ValueError(f"delta_basis must be one of {DELTA_BASES}, got {delta_basis!r}")
        if isinstance(count, bool) or not isinstance(count, numbers.Integral) or count < 1:
            raise TypeError(f"count must be a whole number >= 1, got {_short(count)}")
        _refuse_overspend(self._state(), epsilon, delta, delta_basis, count=int(count))

    def check_many(self, charges) -> None:
        """Raise :class:`BudgetExceededError` if the charges ``[(epsilon, delta), ...]``,
        made in this order, would overspend or leave the plan; changes nothing.

        For a call that charges several releases at once: it is refused before the
        first charge rather than after some (``Mechanism.release_many``).
        """
        pairs = [(_check_epsilon(e), _check_delta(d)) for e, d in charges]
        state = self._state()  # a copy: the trial entries below are never written
        runs = []  # consecutive equal charges, checked as one exact sum
        for pair in pairs:
            if runs and runs[-1][0] == pair:
                runs[-1][1] += 1
            else:
                runs.append([pair, 1])
        planned = state["budget"].get("plan") is not None
        for (epsilon, delta), count in runs:
            if planned:  # the total may come from the PLD: checked after each, as charge() will
                for _ in range(count):
                    _refuse_overspend(state, epsilon, delta, "proved")
                    state["entries"].append(_trial(epsilon, delta))
            else:  # basic sums only grow: the run fits iff its exact sum does
                _refuse_overspend(state, epsilon, delta, "proved", count=count)
                state["entries"].extend(_trial(epsilon, delta) for _ in range(count))

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
            raise ValueError(f"delta_basis must be one of {DELTA_BASES}, got {_short(delta_basis)}")
        if delta_basis == "estimated" and delta != 0:
            raise ValueError("an estimated delta is never charged: charge delta=0")
        if status not in ("charged", "external"):
            raise ValueError(f"status must be 'charged' or 'external', got {_short(status)}")
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


def _trial(epsilon, delta) -> dict:
    """An entry ``_spend`` counts, for a check that charges nothing."""
    return {"epsilon": epsilon, "delta": delta, "delta_basis": "proved"}


def _refuse_overspend(state, epsilon, delta, delta_basis, count=1) -> None:
    """Raise BudgetExceededError unless ``count`` charges of ``(epsilon, delta)`` are
    the plan's next ones (a planned budget) and their total, with the charges made,
    fits the budget (compared exactly)."""
    budget = state["budget"]
    plan = budget.get("plan")
    before = _spend(state)
    made = len(state["entries"])
    for k in range(made, made + count) if plan is not None else ():
        if k >= len(plan) or [epsilon, delta] != plan[k]:
            planned = (
                f"charge {k} of the plan is epsilon = {plan[k][0]!r}, delta = {plan[k][1]!r}"
                if k < len(plan)
                else f"all {len(plan)} charges of the plan are made"
            )
            batch = "" if count == 1 else f"{count} charges of "
            raise BudgetExceededError(
                f"the release asks for {batch}epsilon = {epsilon!r}, delta = {delta!r}, but "
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
    after = _spend(state, extra=[(epsilon, delta, delta_basis)] * count)
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
