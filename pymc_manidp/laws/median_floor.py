r"""A proved bound on the chance that the exact median sampler gives up (issue 43, item 5).

A release whose rejection sampler stops at its proposal cap after reading the data
publishes a bit no ε covers. This module bounds the probability of that event from
public facts only — σ, the public ball (its radius and manifold), the cap and ``n`` —
for every data set in the ball, and the mechanisms refuse, before any charge, the
parameters where the bound is above ``2^-64`` (docs/exact.md, "The median's proved
failure bound", which proves what follows).

The theorem. Let ``B = B_r(m0)`` (``r < r*``), ``d`` the dimension, ``κ`` an upper
bound of the sectional curvature, ``G`` the volume growth (``log J(c) <= G|c|``), ``η``
the ball's rounding bound of computed gradient norms, ``K`` the cap per draw. The
target is ``f(x) = exp(-|∇F(x)|/σ)`` with ``|∇F| <= 1`` (a mean of unit vectors), so
whatever the records ``Z_f = ∫_B f >= e^{-(1+η')/σ} V_κ(r)``, ``V_κ(r)`` the volume of
the radius-``r`` ball of the model space of curvature ``κ`` (Günther's comparison).
Every envelope the sampler may run to the cap has a mass below a data-free number:
the boxes lie in the cube ``[-r, r]^d`` with weight at most ``e^{G r}`` a unit of
volume (each box's bound of ``|∇F|`` is clamped at ``>= 0``), so ``Z_cells <= (2r)^d
e^{G r}``; the shells around the computed median cover a ball of radius ``t <= 2r``
and each shell's weight is at most the zero bound's, so ``Z_shells <= e^{10^-12/σ}
ω_d t^d e^{G t}``. Each proposal is accepted with probability ``Z_f / Z_envelope >=
a``, and a draw gives up only if fewer than ``s`` of ``K s`` i.i.d. proposals are
accepted (for the ``s`` draws still missing, ``s >= 1``): by Chernoff's bound that
has probability at most ``exp(-K D(1/K || a))`` whatever ``s`` (``D`` the Bernoulli
relative entropy; ``(1 - a)^K`` for ``s = 1``).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from scipy import special

__all__ = [
    "MEDIAN_FAILURE_LOG2_LIMIT",
    "MEDIAN_FLOOR_CHOICES",
    "FailureBound",
    "median_failure_bound",
    "median_largest_n_epsilon",
    "median_max_attempts",
]
# (MEDIAN_MIN_ATTEMPTS, MEDIAN_WORK and MEDIAN_MAX_ATTEMPTS: the default cap's parts)

#: The largest proved ``log2`` probability that an exact median release gives up
#: which a mechanism accepts by default (``median_floor="proved"``): ``2^-64``.
MEDIAN_FAILURE_LOG2_LIMIT = -64.0
#: ``KNGMechanism(median_floor=...)``: the default refuses where the proof does not
#: reach; ``"measured"`` is the explicit, recorded opt-in for the measured floors.
MEDIAN_FLOOR_CHOICES = ("proved", "measured")
#: The median's default cap is at least this many proposals per draw...
MEDIAN_MIN_ATTEMPTS = 1_000_000
#: ...and ``MEDIAN_WORK / n`` up to ``MEDIAN_MAX_ATTEMPTS``: a draw that reaches the cap
#: has evaluated at most this many gradient terms (a proposal costs one pass over the
#: ``n`` records), as 10^6 proposals at n = 10^4 did before...
MEDIAN_WORK = 10**10
#: ...and at most this many proposals (each also costs a few microseconds of its own:
#: 3.8 µs at n = 1 on S^2, 83 µs on SPD(3), measured 2026-11-28 on the shared cores).
#: Where the proved bound holds a draw expects fewer than 1/44 of the cap's proposals
#: (``K a >= 44``), whatever the data
MEDIAN_MAX_ATTEMPTS = 100_000_000
#: the margin for computed gradient norms above 1 (ulps of the unit vectors' mean)
_NORM_ULPS = 1e-9
#: the shells' offsets are lowered by this (``_MedianShells._shell_terms``)
_SHELL_OFFSET_SLACK = 1e-12
#: points of the Riemann sum of ``V_κ(r)`` (a lower sum: the integrand increases)
_QUADRATURE = 4096


class FailureBound(NamedTuple):
    """A proved bound on the chance an exact rejection sampler gives up (the median's
    here, the regression's in :mod:`~pymc_manidp.laws.regression_floor`): public
    numbers only.

    Attributes
    ----------
    log2_failure : float
        ``log2`` of the bound on the probability that a call gives up (any number of
        draws; ``-inf`` is not returned, the bound underflows to a finite negative).
    log_acceptance : float
        Natural log of ``a``, the proved least acceptance of a proposal.
    max_attempts : int
        The cap ``K`` the bound is for.
    """

    log2_failure: float
    log_acceptance: float
    max_attempts: int

    @property
    def failure(self) -> float:
        """The bound itself (``2 ** log2_failure``; 0.0 when it underflows)."""
        return float(2.0**self.log2_failure)


def _sn_power_integral(kappa: float, d: int, r: float) -> float:
    """A lower bound of ``∫_0^r sn_κ(t)^{d-1} dt`` (``sn_κ`` increasing on ``[0, r]``,
    as ``r < r* <= π/(4√κ)``): a left Riemann sum, lowered by a relative 1e-12."""
    if d == 1:
        return r * (1.0 - 1e-12)
    t = np.arange(_QUADRATURE) * (r / _QUADRATURE)
    if kappa > 0:
        k = math.sqrt(kappa)
        sn = np.sin(k * t) / k
    elif kappa < 0:
        k = math.sqrt(-kappa)
        sn = np.sinh(k * t) / k
    else:
        sn = t
    return float(np.sum(sn ** (d - 1)) * (r / _QUADRATURE)) * (1.0 - 1e-12)


def _log_unit_ball(d: int) -> float:
    return 0.5 * d * math.log(math.pi) - float(special.gammaln(0.5 * d + 1.0))


def _log_ball_volume_lower(manifold, radius: float) -> float:
    """``log V_κ(r)``, lowered: the volume of every geodesic ball of radius ``r < r*``
    is at least that of the model space of curvature ``κ = curvature_bounds[1]``."""
    d = int(manifold.dim)
    kappa = float(manifold.curvature_bounds[1])
    sphere = math.log(d) + _log_unit_ball(d)  # |S^{d-1}| = d ω_d
    return sphere + math.log(_sn_power_integral(kappa, d, radius))


def _log2_chernoff(log_a: float, cap: int) -> float:
    """``log2`` of ``exp(-K D(1/K || a))`` (``a <= 1/K``: 0, no bound)."""
    a = math.exp(log_a)
    p = 1.0 / cap
    if a <= p:
        return 0.0
    if a >= 1.0:
        return -math.inf
    # K D(1/K || a) = ln(1/(K a)) + (K - 1) ln((1 - 1/K)/(1 - a))
    nats = -math.log(cap) - log_a + (cap - 1) * (math.log1p(-p) - math.log1p(-a))
    # a relative 1e-9 outward: the sum's rounding is ~1e-15 of it (log1p to an ulp)
    return -max(nats, 0.0) * (1.0 - 1e-9) / math.log(2.0)


def _check_cap(max_attempts) -> int:
    if isinstance(max_attempts, bool) or not isinstance(max_attempts, (int, np.integer)):
        raise TypeError(f"max_attempts must be an int, got {type(max_attempts).__name__}")
    if max_attempts < 1:
        raise ValueError(f"max_attempts must be >= 1, got {max_attempts}")
    return int(max_attempts)


def median_max_attempts(n: int) -> int:
    """The median's default cap on proposals per draw for ``n`` records:
    ``max(10^6, min(10^8, 10^10 // n))`` (``MEDIAN_WORK``; public).

    Examples
    --------
    >>> median_max_attempts(40), median_max_attempts(1000), median_max_attempts(10**5)
    (100000000, 10000000, 1000000)
    """
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"n must be a positive int, got {n!r}")
    return max(MEDIAN_MIN_ATTEMPTS, min(MEDIAN_MAX_ATTEMPTS, MEDIAN_WORK // int(n)))


def median_failure_bound(domain, sigma: float, max_attempts: int) -> FailureBound:
    r"""The proved bound on the probability that the exact median sampler gives up.

    Public: it depends on σ, the ball (radius, manifold, rounding bound) and the cap
    only, never on the records; it holds for every data set inside the ball and every
    number of draws a call asks (module docstring; docs/exact.md, "The median's
    proved failure bound").

    Parameters
    ----------
    domain : DataDomain
        The public ball.
    sigma : float
        KNG's scale on the median, ``4/(n ε)``.
    max_attempts : int
        The sampler's cap on proposals per draw.

    Returns
    -------
    FailureBound

    Examples
    --------
    >>> import pymc_manidp as pmd
    >>> dom = pmd.DataDomain(pmd.Sphere(dim=2), [0, 0, 1.0], 0.5)
    >>> b = median_failure_bound(dom, 4.0 / 20, 10**6)  # n ε = 20
    >>> b.log2_failure < -1000
    True
    >>> median_failure_bound(dom, 4.0 / 100, 10**6).log2_failure  # n ε = 100: no bound
    0.0
    """
    cap = _check_cap(max_attempts)
    sigma = float(sigma)
    if not sigma > 0 or not math.isfinite(sigma):
        raise ValueError(f"sigma must be a positive finite float, got {sigma!r}")
    M = domain.manifold
    d, r = int(M.dim), float(domain.radius)
    growth = float(M.log_volume_growth)
    # the largest computed |grad F|: 1, the ball's rounding of gradient norms, ulps
    g_max = 1.0 + float(domain.rounding_error) + _NORM_ULPS
    log_target = -g_max / sigma + _log_ball_volume_lower(M, r)
    # the boxes tile the cube [-r, r]^d (a relative 1e-9 for the grid's rounding);
    # each box's volume bound is at most e^{G r}
    log_cells = d * math.log(2.0 * r * (1.0 + 1e-9)) + growth * r
    # the shells cover a ball of radius t_max <= min(2r, inj) around the computed median
    t_max = min(2.0 * r * (1.0 + 1e-9), float(M.injectivity_radius))
    log_shells = (
        _SHELL_OFFSET_SLACK / sigma + _log_unit_ball(d) + d * math.log(t_max) + growth * t_max
    )
    log_a = log_target - max(log_cells, log_shells)
    return FailureBound(_log2_chernoff(min(log_a, 0.0), cap), min(log_a, 0.0), cap)


def median_largest_n_epsilon(domain, max_attempts: int, limit=MEDIAN_FAILURE_LOG2_LIMIT) -> float:
    r"""The largest ``n ε`` whose proved failure bound is at most ``2^limit`` (public).

    The bound grows with ``n ε = 4/σ``; bisection on ``n ε`` to a relative ``1e-9``,
    rounded down.

    Examples
    --------
    >>> import pymc_manidp as pmd
    >>> dom = pmd.DataDomain(pmd.Sphere(dim=2), [0, 0, 1.0], 0.5)
    >>> round(median_largest_n_epsilon(dom, 10**6), 2)
    34.04
    """
    cap = _check_cap(max_attempts)

    def ok(ne):
        return median_failure_bound(domain, 4.0 / ne, cap).log2_failure <= limit

    lo, hi = 1e-6, 1.0
    if not ok(lo):
        return 0.0
    while ok(hi):
        lo, hi = hi, 2.0 * hi
        if hi > 1e6:
            return lo
    while hi - lo > 1e-9 * hi:
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if ok(mid) else (lo, mid)
    return lo
