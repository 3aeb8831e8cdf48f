r"""How a budget's charges add up: the composition rules and the exact numbers they use.

Each ε and δ counts as the decimal number it prints as (:func:`_exact`), so sums are
exact and a total is compared with the budget as exact fractions, never as floats. A
charge given as a float, an int, a ``Fraction`` or a ``Decimal`` is read on the safe
side (:func:`_check_epsilon`: a charge rounded up, a budget rounded down). The rules:
``"basic"`` sums (Dwork & Roth 2014, Theorem 3.16), and ``"optimal"``, a plan declared
before the first release whose total is the basic one while it fits, otherwise the
worst-case privacy loss distributions composed by ``dp_accounting``
(:func:`_pld_epsilon`). :mod:`pymc_manidp.privacy.budget` explains which ε is charged
and why a plan; this module is its arithmetic, with no state of its own.

A Gaussian charge (``mu`` given: a release that is μ-GDP, e.g.
:class:`~pymc_manidp.mechanisms.tangent.TangentGaussianMechanism`) counts as its
``(epsilon, delta)`` in basic sums and by its exact privacy loss in an optimal plan's
total: all-Gaussian charges compose as μ-GDP, ``mu = sqrt(sum mu_i^2)`` (Dong, Roth &
Su 2022, Cor. 3.3), read at the budget's δ exactly (Cor. 2.13); mixed with other
charges, each Gaussian's PLD (``N(0, 1/mu^2)`` against ``N(1, 1/mu^2)``) is composed
with the others' worst-case PLDs by ``dp_accounting``.
"""

from __future__ import annotations

import decimal
import math
import numbers
import sys
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

__all__ = [
    "COMPOSITIONS",
    "GDP_RULE",
    "MAX_PLAN",
    "MIXED_RULE",
    "UNPLANNED",
    "Spend",
    "split_epsilon",
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
#: the rule of an optimal total whose charges are all Gaussian (past the basic sums)
GDP_RULE = (
    "a plan of charges declared before the first release, all Gaussian: mu-GDP composed "
    "exactly, mu = sqrt(sum of mu_i^2) (Dong, Roth & Su 2022, Cor. 3.3: valid for adaptively "
    "chosen releases with each mu_i fixed in advance), converted to epsilon at the budget's "
    "delta exactly (ibid., Cor. 2.13)"
)
#: the rule of an optimal total mixing Gaussian and other charges (past the basic sums)
MIXED_RULE = (
    "a plan of charges declared before the first release, Gaussian and (epsilon, delta) "
    "mixed: each Gaussian's privacy loss distribution composed with the others' worst-case "
    "ones by dp_accounting (pessimistic discretization: an upper bound; dominating pairs "
    "compose adaptively with each release's parameters fixed in advance, Zhu, Dong & Wang "
    "2022, Thm 10), read at the budget's delta"
)
#: the longest plan: each charge recomposes the plan's charges so far (1,000 unequal
#: charges take seconds)
MAX_PLAN = 1000


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


def _check_mu(epsilon: float, delta: float, mu, name="mu") -> float:
    """``mu`` of a Gaussian charge ``(epsilon, delta)``: a float ``> 0`` at which μ-GDP
    is (ε, δ)-DP (so its basic view holds), refused otherwise."""
    from pymc_manidp.stats.gaussian import MIN_DELTA, READ_MARGIN, gaussian_delta

    if isinstance(mu, bool | np.bool_) or not isinstance(mu, numbers.Real | decimal.Decimal):
        raise TypeError(f"{name} must be a real number, got {type(mu).__name__} {_short(mu)}")
    try:
        mu = float(mu)
    except OverflowError:  # an int past 1.8e308
        mu = math.inf
    if not (math.isfinite(mu) and mu > 0):
        raise ValueError(f"{name} must be a finite number > 0, got {_short(mu)}")
    if 0 < delta < MIN_DELTA:
        raise ValueError(
            f"a Gaussian charge needs delta >= {MIN_DELTA:g}, got {delta!r}: below it "
            "delta(mu) is a subnormal float, too coarse to prove the charge (the "
            "mechanisms calibrate no lower); charge it as (epsilon, delta) without mu"
        )
    # the computed delta(mu) is accurate to ~1e-12 relative, not exactly: a mu at the
    # edge (computed delta = delta) has a true delta above it by up to 1e-13 relative.
    # READ_MARGIN (5e-8) covers that; a mechanism's mu keeps twice it (DELTA_MARGIN)
    if not delta > 0 or gaussian_delta(epsilon, mu) > delta * (1.0 - READ_MARGIN):
        raise ValueError(
            f"a Gaussian charge of {name} = {mu!r} is not (epsilon, delta) = ({epsilon!r}, "
            f"{delta!r})-DP (Balle & Wang 2018, Thm 8): state the (epsilon, delta) the "
            "mechanism was calibrated at with its mu (mechanism.planned_charge), or a "
            "smaller mu"
        )
    return mu


def charge_form(epsilon: float, delta: float, mu: float | None) -> list:
    """A charge as a plan holds it: ``[epsilon, delta]``, or ``[epsilon, delta, mu]``
    for a Gaussian charge."""
    return [epsilon, delta] if mu is None else [epsilon, delta, mu]


def _check_plan(plan, composition) -> list[list[float]] | None:
    """The plan as ``[[epsilon, delta(, mu)], ...]`` (floats), or None for basic
    composition."""
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
        if len(item) not in (2, 3):
            raise TypeError(
                f"plan[{i}] must be epsilon, (epsilon, delta) or a Gaussian charge "
                f"(epsilon, delta, mu), got {_short(item)}"
            )
        if any(isinstance(v, bool) for v in item):  # True is no epsilon of 1
            raise TypeError(f"plan[{i}] must be real numbers, not bools, got {item!r}")
        # charges: an exact number is rounded up to a float's decimal, as charge() does,
        # so the i-th charge of the same number matches plan[i]
        pair = [
            _check_epsilon(item[0], f"plan[{i}]'s epsilon"),
            _check_delta(item[1], f"plan[{i}]'s delta"),
        ]
        if len(item) == 3:
            pair.append(_check_mu(pair[0], pair[1], item[2], f"plan[{i}]'s mu"))
        pairs.append(pair)
    if not pairs:
        raise ValueError("the plan is empty: declare at least one (epsilon, delta) charge")
    return pairs


def _basic_sums(entries) -> tuple[Fraction, Fraction]:
    eps = sum((_exact(e["epsilon"]) for e in entries), Fraction(0))
    delta = sum(
        (_exact(e["delta"]) for e in entries if e["delta_basis"] != "estimated"), Fraction(0)
    )
    return eps, delta


def _gaussian_pld(mu: float):
    """The PLD of a μ-GDP charge: ``N(0, 1/mu^2)`` against ``N(1, 1/mu^2)`` (its
    dominating pair; the neighbours' sensitivity is already in μ, so no factor 2 for
    replace-one as dp_accounting's ``GaussianDpEvent`` needs under ``REPLACE_ONE``)."""
    from dp_accounting.pld import privacy_loss_distribution

    # sd rounded down: the privacy loss is never understated
    return privacy_loss_distribution.from_gaussian_mechanism(
        standard_deviation=math.nextafter(1.0 / mu, 0.0), sensitivity=1.0
    )


def _pld_epsilon(charges, delta_target: float) -> float:
    """ε at ``delta_target`` of the composed PLDs of ``(eps, delta, mu)`` charges: a
    Gaussian's (``mu`` not None: ``N(0, 1/mu^2)`` against ``N(1, 1/mu^2)``, its
    dominating pair) or the worst-case one of ``(eps, delta)``-DP."""
    try:
        from dp_accounting.pld import common, privacy_loss_distribution
    except ImportError:  # pragma: no cover - the [budget] extra
        raise ImportError(
            "composition='optimal' uses dp_accounting: pip install 'pymc-manidp[budget]'"
        ) from None
    pld = None
    try:
        for eps, delta, mu in charges:
            if mu is None:
                one = privacy_loss_distribution.from_privacy_parameters(
                    common.DifferentialPrivacyParameters(eps, delta)
                )
            else:
                one = _gaussian_pld(mu)
            pld = one if pld is None else pld.compose(one)
        return float(pld.get_epsilon_for_delta(delta_target))
    except OverflowError:  # an epsilon past what the PLD can discretize (1e308): no bound
        return math.inf


def _spend(state, extra=()) -> Spend:
    """The total of ``state``'s entries (and ``extra`` charges ``(eps, delta, basis)``)."""
    charges = [(e["epsilon"], e["delta"], e["delta_basis"], e.get("mu")) for e in state["entries"]]
    return _total(state["budget"], charges + list(extra))


def _total(budget, charges) -> Spend:
    """The total of ``charges`` ``(eps, delta, basis[, mu])`` under ``budget``'s rule."""
    charges = [(*c[:3], c[3] if len(c) > 3 else None) for c in charges]
    proved = all(c[2] == "proved" for c in charges)
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
    fits = eps <= _exact(budget["epsilon"]) and delta <= _exact(budget["delta"])
    target = budget["delta"]
    mus = [c[3] for c in charges if c[3] is not None]
    # (Σε, Σδ) while it fits, compared exactly: a total of pure charges then keeps δ = 0,
    # where the PLD read at the budget's δ would report (Σε - a hair, budget δ)
    if fits and not mus:
        return Spend(basic.epsilon, basic.delta, proved, rule, basic.exact)
    if mus and len(mus) == len(charges):  # all Gaussian: exact, no discretization
        from pymc_manidp.stats.gaussian import compose_mu, gdp_epsilon

        tight = Spend(gdp_epsilon(compose_mu(mus), target), float(target), proved, GDP_RULE)
    else:
        counted = [(c[0], c[1] if c[2] != "estimated" else 0.0, c[3]) for c in charges]
        # the Gaussians' delta is in their PLD; the others' deltas must leave room at target
        rest = sum((_exact(c[1]) for c in counted if c[2] is None), Fraction(0))
        optimal = _pld_epsilon(counted, target) if rest < _exact(target) else math.inf
        # the PLD's epsilon is a float: compared as the decimal it prints as (its repr)
        tight = Spend(optimal, float(target), proved, MIXED_RULE if mus else rule)
    # with Gaussian charges both totals are bounds at delta > 0: the smaller epsilon
    # that fits is the one to state (the composed Gaussians' is smaller past a few)
    if fits and not (math.isfinite(tight.epsilon) and _exact(tight.epsilon) < eps):
        return Spend(basic.epsilon, basic.delta, proved, rule, basic.exact)
    return tight


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


def split_epsilon(epsilon: float, split, *, first_stage: str, hint: str):
    """Two stages' ε by basic composition: ``(split, epsilon_1, epsilon_2)``.

    ``epsilon_1 = split * epsilon`` and ``epsilon_2`` the largest double with
    ``epsilon_1 + epsilon_2 <= epsilon`` as the decimals they print as (the charge is
    counted so, :func:`_exact`). ``split`` must be a real number in (0, 1); a bool is a
    TypeError, an int too large for a float is out of range (not an OverflowError), and
    a split leaving a stage no ε in floating point is refused. ``first_stage`` names
    what the first stage releases and ``hint`` the fix to suggest, both for messages.
    Used by the two-stage tangent and the sequential regression mechanisms.

    >>> split_epsilon(1.0, 0.2, first_stage="the coarse point", hint="split=0.2")
    (0.2, 0.2, 0.8)
    """
    if isinstance(split, bool) or not isinstance(split, numbers.Real):
        raise TypeError(f"split must be a float in (0, 1), got {type(split).__name__}")
    # an int past 1.8e308 has no float: out of (0, 1) all the same (no OverflowError)
    split = float(split) if not isinstance(split, int) or abs(split) < 2**1024 else math.inf
    if not 0 < split < 1:
        raise ValueError(
            f"split must be in (0, 1), the share of epsilon spent on {first_stage}, "
            f"got {split!r}: use e.g. {hint}"
        )
    eps_1 = epsilon * split
    rest = Fraction(repr(epsilon)) - Fraction(repr(eps_1))
    eps_2 = float(rest)
    while eps_2 > 0 and Fraction(repr(eps_2)) > rest:
        eps_2 = math.nextafter(eps_2, 0.0)
    if not (eps_1 > 0 and eps_2 > 0 and math.isfinite(eps_1)):
        raise ValueError(
            f"split = {split!r} of epsilon = {epsilon!r} leaves a stage with no "
            "epsilon in floating point: use a split nearer 0.5 or a larger epsilon"
        )
    return split, eps_1, eps_2


def _fmt(x) -> str:
    # six digits where they name the double exactly, else all of them: a spend of
    # 1.0000000000000007 printed as "1" beside a budget of 1 read as no overspend
    short = f"{x:.6g}"
    return short if float(short) == float(x) else repr(float(x))
