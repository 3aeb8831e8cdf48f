"""A ledger's state: the sealed JSON-able dict a privacy budget keeps, and its checks.

:func:`new_state` makes an empty one, :func:`seal` recomputes its running totals (exact
decimal strings) and its SHA-256 :func:`checksum`, and :func:`check_state` refuses one
that is not consistent: every field's type and range, the nesting depth, the checksum,
then the entries against the plan and the running totals. States of versions 1
(totals sealed as floats) and 2 (no ``mu``) are migrated on load, every record kept.
The same state serves the in-memory
:class:`~pymc_manidp.privacy.budget.PrivacyBudget` and the ledger file
(:mod:`pymc_manidp.io.ledger`).
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
import re
from fractions import Fraction

from pymc_manidp.privacy.composition import (
    COMPOSITIONS,
    MAX_PLAN,
    _basic_sums,
    _check_delta,
    _check_epsilon,
    _check_mu,
    _check_plan,
    _decimal_text,
    _fits,
    _fmt,
    _short,
    _total,
    charge_form,
)

__all__ = [
    "DELTA_BASES",
    "FORMAT",
    "VERSION",
    "LedgerError",
    "check_state",
    "checksum",
    "new_state",
    "seal",
]

#: where a charge's δ comes from: a proof (exact samplers: 0), the curator's
#: assumption (MCMC), or the coupling estimate (MCMC; never in the total)
DELTA_BASES = ("proved", "assumed", "estimated")
STATUSES = ("charged", "released", "failed", "external")
FORMAT = "pymc-manidp privacy ledger"
#: 2: running totals as exact decimal strings (1 sealed them as floats, which could
#: disagree with the exact sums and brick the ledger); 3: each entry's ``mu`` (null, or
#: the μ-GDP of a Gaussian charge) and Gaussian charges ``[epsilon, delta, mu]`` in a
#: plan. 1 and 2 are migrated on load (``mu`` null: every charge they hold is an
#: (epsilon, delta) one), every record kept
VERSION = 3
LOADABLE_VERSIONS = (1, 2, 3)
#: the deepest nesting a ledger may have (a release record is about 4 deep): a deeper
#: one is refused before anything recurses into it
MAX_DEPTH = 32
PRIVACY_UNIT = "one record; neighbours replace one record; n public"


class LedgerError(ValueError):
    """A ledger that cannot be trusted.

    Edited into an inconsistent state, a checksum that does not match, or one that
    names another data set.
    """


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
        whole = _total(budget, [(c[0], c[1], "proved", *c[2:]) for c in budget["plan"]])
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


_DECIMAL = re.compile(r"\A(?:0|[1-9][0-9]*)(?:\.[0-9]+)?\Z")


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
    "mu",
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


def _check_plan_field(budget, version) -> None:
    """``budget.plan``: null, or (optimal composition only) 1 to ``MAX_PLAN`` pairs
    ``[epsilon, delta]`` of floats in the ranges of a charge's (version 3: or Gaussian
    charges ``[epsilon, delta, mu]``)."""
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
    lengths = (2, 3) if version >= 3 else (2,)
    for i, pair in enumerate(plan):
        if not isinstance(pair, list) or len(pair) not in lengths:
            raise _Bad(
                f"budget.plan[{i}] must be a pair [epsilon, delta]"
                f"{' or a Gaussian charge [epsilon, delta, mu]' if version >= 3 else ''}, "
                f"got {_short(pair)}"
            )
        _float(pair[0], f"budget.plan[{i}][0] (epsilon)", 0, math.inf, low_open=True)
        _float(pair[1], f"budget.plan[{i}][1] (delta)", 0, 1, high_open=True)
        if len(pair) == 3:
            _gaussian(pair[0], pair[1], pair[2], f"budget.plan[{i}][2] (mu)")


def _gaussian(epsilon, delta, mu, where: str) -> None:
    """A Gaussian charge's μ: a float > 0 at which μ-GDP is (epsilon, delta)-DP."""
    _float(mu, where, 0, math.inf, low_open=True)
    try:
        _check_mu(epsilon, delta, mu, where)
    except (TypeError, ValueError) as err:
        raise _Bad(str(err)) from None


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
    _check_plan_field(budget, version)
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
        # mu: from version 3 on (an older entry is an (epsilon, delta) charge)
        _fields(e, at, _ENTRY if version >= 3 else _ENTRY[:-1])
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
        if e.get("mu") is not None:
            if e["delta_basis"] != "proved":
                raise _Bad(f"{at}.mu: a Gaussian charge's delta is proved, not {e['delta_basis']}")
            _gaussian(e["epsilon"], e["delta"], e["mu"], f"{at}.mu")
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
    exact totals; versions 1 and 2 gain each entry's ``mu``, null; every entry kept).

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
        if i >= len(plan) or charge_form(e["epsilon"], e["delta"], e.get("mu")) != plan[i]:
            planned = f"budget.plan[{i}] = {plan[i]!r}" if i < len(plan) else "past the plan"
            raise LedgerError(
                f"inconsistent ledger: entries[{i}]: the charge "
                f"{charge_form(e['epsilon'], e['delta'], e.get('mu'))!r} is not the plan's "
                f"charge {i} ({planned}): "
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
        state = copy.deepcopy(state)
        for e in state["entries"]:
            e["mu"] = None  # versions 1 and 2 hold (epsilon, delta) charges only
        state = seal(state)
    return state
