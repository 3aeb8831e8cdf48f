r"""The range of σ the exact KNG samplers represent in floating point: public numbers.

A release must refuse, before its privacy budget is charged, every parameter it can
refuse from public facts (issue 43, item 4). The exact samplers' numerical range is
such a fact: it depends on σ (from ε, n and r), the public ball and the manifold,
never on the records. :func:`kng_sigma_range` states it, and the mechanisms check it
before the charge (``Mechanism.check_exact_sigma``).

Why an upper end (positively curved spaces, KNG on the mean). The envelope of
:func:`~pymc_manidp.laws.exact.sample_kng` puts a Gamma(d, σ/λ_k) radial law on
shells ``[t_k, t_{k+1}]`` that cover ``[0, t_max]``, with ``t_max <= 2r`` (the ball
seen from a point of it) and slopes ``H <= λ_k <= 1``
(:func:`~pymc_manidp.laws.exact.kng_envelope_slope`; ``h(s) = s√κ cot(s√κ) <= 1``).
Its shell weights and in-shell inverse CDFs are differences of upper incomplete gamma
values ``Q(d, t/scale)``, numbers within ``P(d, t_max λ/σ)`` of 1. For a tiny
interval the Gamma mass grows as the scale shrinks, so whatever the data the envelope's
total mass is at most ``P(d, 2r/σ)``. When that is below ``2^-26`` (√eps) the
differences keep fewer than 26 bits for every data set: the sampler finds no mass at
all ("the shells' weights are not a distribution", e.g. Sphere(2) at ε = 1e-8,
Sphere(10) at n ε = 0.1) or draws from a grid of a few hundred radii. Hence
``σ_max = 2r / P^{-1}(d, 2^-26)``, refused before the charge.

Below ``σ_max`` the mass depends on the data (the slopes near the mean): with every
slope at its floor ``H`` it is only ``P(d, r H/σ)``, so between ``r H / P^{-1}(d,
2^-26)`` and ``σ_max`` a data set far from its mean can still lose the shells'
precision. That is the sampler's to fix (masses from the lower incomplete gamma when
they are tiny), not a refusal: near ``r*``, where ``H -> 0``, refusing the worst case
would refuse every σ that releases today.

Why a lower end (every space, both statistics). The samplers widen the envelope by a
rounding slack of ``1e-12 r`` (the footpoint's error bound) and compare gradient norms
computed to a few ulps of ``r``: when σ is within a few hundred times that, the
acceptance ratio ``exp(-H slack/σ)`` and the rounding of ``|grad F|/σ`` decide the
draw (the KNG mean stops at its proposal cap near σ = 1e-14, the median's cell weights
stop summing to 1 near σ = 1e-13). ``σ_min = 1e-10 r`` keeps that slack below
``e^{-0.01}``. A σ that small is a release whose noise is below ``1e-10`` of the ball:
a larger n or a smaller ε changes nothing a reader could see.

The median's lower end, ``median_sigma_floor``: measured, not proved; since the proved
bound of :mod:`pymc_manidp.laws.median_floor` it is the floor of the explicit opt-in
``KNGMechanism(..., median_floor="measured")`` only (recorded in the release), and the
default refuses where that bound is above ``2^-64``. Its density
``e^{-|grad F|/σ}`` has ``|grad F| <= 1`` on any ball: σ is measured against 1, not
against r (R^2 at radius 1 and 1,000 accept the same). Its envelopes (shells around
the computed median, boxes on a grid of a budget of ``5·10^6/n`` gradient
evaluations, docs/exact.md) dominate the law, so every draw is exact, but nothing
bounds below, for every data set, the share of their mass the law holds: a law
concentrated on a thin set away from the computed median (a tube along a segment on
which F is flat, a cone around a cluster's direction) defeats both once σ is small
against the data's scale, more so in higher dimension and where the volume grows.
The floors come from an adversarial search (``docs/benchmarks/median_floor_search.py``,
2026-11-28: 24 placements of the records including tight clusters at and off the
median, at each space's largest supported radius and the box budgets of n <= 40,
1,000 and >= 2e4, about 1,100 runs): at the floor the least acceptance measured was
1.0e-3 (d <= 2, σ = 0.004), 6.2e-4 (d = 3 without volume growth, 0.04), 1.8e-4 (d = 3
with growth, 0.1) and 1.1e-4 (4 <= d <= 6 without growth, 0.1); SPD(3) failed at 0.1,
so d >= 4 with growth, and d >= 7 (not measured), are refused. With the cap of 10^6
proposals a draw (``laws.exact.DEFAULT_MEDIAN_MAX_ATTEMPTS``) an acceptance of 5e-5
fails with probability below e^-50 a draw (``tests/mechanisms/test_median_floor.py``
asserts it for each space's worst placement found). A σ below the floor is refused
before any charge, naming the largest ε this n supports; MCMC is not limited.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import special

__all__ = [
    "MEDIAN_SIGMA_FLOOR",
    "MEDIAN_SIGMA_FLOOR_CURVED_3D",
    "MEDIAN_SIGMA_FLOOR_FLAT_3D",
    "MEDIAN_SIGMA_FLOOR_HIGH",
    "SHELL_MASS_FLOOR",
    "SIGMA_FLOOR",
    "kng_sigma_range",
    "median_sigma_floor",
]

#: ``σ_min / r`` of the exact KNG samplers (module docstring).
SIGMA_FLOOR = 1e-10
#: The least envelope mass (within 1 of the upper incomplete gamma) the shells need.
SHELL_MASS_FLOOR = math.sqrt(np.finfo(float).eps)
#: The smallest σ of the exact median sampler on spaces of dimension <= 2, every
#: radius (``median_sigma_floor``; docs/exact.md, "The median's supported σ").
MEDIAN_SIGMA_FLOOR = 0.004
#: The same in dimension 3 where the volume density is at most 1 (SO(3), S^3, R^3).
MEDIAN_SIGMA_FLOOR_FLAT_3D = 0.04
#: The same in dimension 3 where the volume grows (H^3, SPD(2)).
MEDIAN_SIGMA_FLOOR_CURVED_3D = 0.1
#: The same in dimensions 4 to ``MEDIAN_MAX_DIM`` without volume growth.
MEDIAN_SIGMA_FLOOR_HIGH = 0.1
#: The largest dimension at which the exact median's floor was measured.
MEDIAN_MAX_DIM = 6


def median_sigma_floor(manifold) -> float:
    r"""The smallest σ the exact median sampler supports on ``manifold`` with
    ``median_floor="measured"`` (public; the default's floor is proved,
    :func:`pymc_manidp.laws.median_floor.median_failure_bound`).

    Measured, not proved (module docstring): at and above it, every worst placement
    of the records the adversarial search tried (docs/exact.md, "The median's
    supported σ") accepted at least ``5e-5`` of the proposals at the largest radius
    the space supports, so the cap of ``DEFAULT_MEDIAN_MAX_ATTEMPTS = 10^6``
    proposals per draw fails with probability below ``e^{-50}``.

    Parameters
    ----------
    manifold : Manifold
        The space (its ``dim`` and ``log_volume_growth``).

    Returns
    -------
    float
        ``0.004`` for ``dim <= 2``; ``0.04`` for ``dim == 3`` without volume growth;
        ``0.1`` for ``dim == 3`` with it and for ``4 <= dim <= 6``; ``inf`` above
        (not measured: refused, use ``sampler="nuts"``).

    Examples
    --------
    >>> import pymc_manidp as pmd
    >>> median_sigma_floor(pmd.Sphere(dim=2)), median_sigma_floor(pmd.Rotations())
    (0.004, 0.04)
    >>> median_sigma_floor(pmd.KendallShape(k_landmarks=4))
    0.1
    """
    d = int(manifold.dim)
    if d <= 2:
        return MEDIAN_SIGMA_FLOOR
    if d == 3:
        if float(manifold.log_volume_growth) == 0.0:
            return MEDIAN_SIGMA_FLOOR_FLAT_3D
        return MEDIAN_SIGMA_FLOOR_CURVED_3D
    if d <= MEDIAN_MAX_DIM and float(manifold.log_volume_growth) == 0.0:
        return MEDIAN_SIGMA_FLOOR_HIGH
    # SPD(3) (d = 6) at its largest radius failed at 0.1: not measured where it holds
    return math.inf


def kng_sigma_range(domain, statistic: str = "mean") -> tuple[float, float]:
    r"""``(σ_min, σ_max)``: the σ the exact KNG sampler represents on ``domain``.

    Public: it depends on the ball and the manifold only. Outside it the sampler
    would fail after reading the data, or draw from a law rounding has changed
    (module docstring); the mechanisms refuse such a σ before any budget is charged.

    Parameters
    ----------
    domain : DataDomain
        The public ball.
    statistic : {"mean", "median"}
        KNG on the mean (shells of a Gamma radial envelope on positively curved
        spaces: an upper end) or on the median (the lower end only).

    Returns
    -------
    tuple of float
        ``σ_min = 1e-10 r`` (the median: at least ``median_sigma_floor(manifold)``);
        ``σ_max = 2r / P^{-1}(d, 2^-26)`` for the mean on a positively curved space,
        else ``inf``.

    Examples
    --------
    >>> import pymc_manidp as pmd
    >>> lo, hi = kng_sigma_range(pmd.DataDomain(pmd.Sphere(dim=2), [0, 0, 1.0], 0.5))
    >>> lo, round(hi)
    (5e-11, 5792)
    >>> kng_sigma_range(pmd.DataDomain(pmd.Euclidean(dim=2), [0.0, 0.0], 1.0))[1]
    inf
    >>> kng_sigma_range(pmd.DataDomain(pmd.Sphere(dim=2), [0, 0, 1.0], 0.5), "median")
    (0.004, inf)
    """
    r = float(domain.radius)
    M = domain.manifold
    hi = math.inf
    if statistic == "mean" and M.curvature_bounds[1] > 0:
        hi = 2.0 * r / float(special.gammaincinv(M.dim, SHELL_MASS_FLOOR))
    if statistic == "median":
        # |grad F| <= 1 whatever r: the median's law and its envelopes are shaped by
        # sigma itself, not sigma/r (module docstring, "the median's lower end")
        return max(SIGMA_FLOOR * r, median_sigma_floor(M)), hi
    return SIGMA_FLOOR * r, hi
