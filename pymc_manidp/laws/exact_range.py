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

The median's lower end, ``MEDIAN_SIGMA_FLOOR = 0.004`` (``n ε <= 1000``). Its density
``e^{-|grad F|/σ}`` has ``|grad F| <= 1`` on any ball: σ is measured against 1, not
against r (R^2 at radius 1 and 1,000 accept the same). Where the records allow a set of
medians (half of them at each of two opposite edge points: ``F`` is constant on the
segment between them), the law lives in a tube of width ``~σ`` around that segment;
neither the shells around one computed median (radial) nor the boxes (a budget of
``5·10^6/n`` gradient evaluations) follow it once σ is a few thousandths: Kendall(3) at
``r*(1 - 1e-9)`` hit the proposal cap at σ = 0.001, SPD(2) at radius 1 at 6.7e-4.
Nothing proves an acceptance above the trivial ``e^{-1/σ}``; the floor is measured: at
σ = 0.004 and the largest radius each shipped space supports for the median, five worst
placements of n = 6 records accept at least 6.2e-4 of the proposals
(``tests/mechanisms/test_median_supported.py`` asserts ``64 log 2 / 10^5``: the cap of
100,000 proposals then fails with probability at most 2^-64 a draw). Not covered:
dimension 4 and up (Kendall(4) accepts 1e-4 at n ε = 500) and n far above 1,000 at the
floor (docs/exact.md). A σ below it is refused before any charge, naming the ε this n
supports; MCMC is not limited.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import special

__all__ = ["MEDIAN_SIGMA_FLOOR", "SHELL_MASS_FLOOR", "SIGMA_FLOOR", "kng_sigma_range"]

#: ``σ_min / r`` of the exact KNG samplers (module docstring).
SIGMA_FLOOR = 1e-10
#: The least envelope mass (within 1 of the upper incomplete gamma) the shells need.
SHELL_MASS_FLOOR = math.sqrt(np.finfo(float).eps)
#: The smallest σ of the exact median sampler, on every space and radius
#: (:func:`kng_sigma_range`; docs/exact.md, "The median's supported σ").
MEDIAN_SIGMA_FLOOR = 0.004


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
        ``σ_min = 1e-10 r`` (the median: at least ``MEDIAN_SIGMA_FLOOR``, 0.004);
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
        return max(SIGMA_FLOOR * r, MEDIAN_SIGMA_FLOOR), hi
    return SIGMA_FLOOR * r, hi
