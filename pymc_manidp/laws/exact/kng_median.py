r"""KNG on the Fréchet median, exactly (:func:`sample_kng_median`): the shells draw first,
the cells take over where they are tighter (``median_shells.py``, ``median_cells.py``).
"""

from __future__ import annotations

import numpy as np

from pymc_manidp.laws.exact.kng_mean import _kng_arguments, _kng_batches
from pymc_manidp.laws.exact.median_cells import _MedianCells
from pymc_manidp.laws.exact.median_shells import _MedianShells
from pymc_manidp.laws.exact.rejection import (
    ExactDraws,
    ExactSamplingError,
    _ball_proposals,
    _proposal_points,
    _rejection,
)
from pymc_manidp.stats import reductions

# The median's envelope accepts as little as 1 proposal in 10^3-10^4 in d >= 4
# (Kendall(4), n = 500: a median of 1,305 and a 90th percentile of 5,406 proposals a
# release over 300 replicates, 1 of them past 10^4). A cap only decides how often a
# release gives up after reading the data (a charged, failed release), never its law:
# 10^6 times the least acceptance measured where the median's σ is supported
# (5e-5, exact_range.median_sigma_floor) fails with probability below e^-50 a draw,
# and costs nothing where the acceptance is higher (issue 43)
DEFAULT_MEDIAN_MAX_ATTEMPTS = 1_000_000
#: proposals the shells' pilot may spend before the boxes are built
_SHELLS_PILOT = 4000


def _median_envelope(M, data, sigma, domain):
    """The first envelope of :func:`sample_kng_median` for checked data, and whether
    the boxes may follow it: the shells around the computed median, except over Dask
    (their slopes slice the records block by block, in memory; no Dask pass computes
    them yet: the boxes alone); the boxes take over
    after the shells' pilot only where most of the shells' mass is where their slopes
    stopped growing (there the shells can be far looser than the boxes)."""
    if reductions.is_dask(data):
        return None, True
    shells = _MedianShells.build(M, data, sigma, domain)
    return shells, shells.flat_share > 0.5


def _median_explain(sigma, domain, stats) -> str:
    rate = stats["kng_ratio_rate_num"] / max(stats["volume_accepted"], 1)
    return (
        f"Cause: KNG's median density exp(-|grad F|/sigma) accepted only {rate:.2g} of "
        f"the envelope's proposals: sigma = {sigma:.3g} is small against the ball's radius "
        f"{domain.radius:.3g} for the envelope's cells (their budget caps how finely it "
        "follows the law, docs/exact.md). Use sampler='nuts', or raise max_attempts "
        "(KNGMechanism(..., max_attempts=...)): the law does not depend on it."
    )


def sample_kng_median(
    M,
    data,
    sigma,
    size,
    rng=None,
    *,
    domain,
    max_attempts=DEFAULT_MEDIAN_MAX_ATTEMPTS,
) -> ExactDraws:
    r"""Exact draws of KNG on the Fréchet median, restricted to the public ball.

    .. math:: f(x \mid D) \propto \exp\{-\|\nabla F(x)\|_x/\sigma\}, \qquad
              \nabla F(x) = -\frac1n \sum_i \frac{\log_x(x_i)}{\rho(x, x_i)},
              \quad x \in B_r(m_0).

    By rejection from a piecewise-uniform envelope on boxes in normal coordinates at
    ``m0`` (docs/exact.md): on each box a lower bound ``L_k`` of ``|grad F|``
    (:func:`~pymc_manidp.stats.reductions.median_cell_bounds`, from the box's
    geodesic radius and the Hessian comparison), boxes refined where the bound is
    loose and the mass large. A box is chosen with probability ``∝ vol(box)
    e^{-L_k/σ}``, a point ``c`` uniformly in it (kept if ``|c| <= r``), and
    accepted with probability

    .. math:: J(c)\, e^{-G \rho_k} \cdot e^{-(\|\nabla F(x)\| - L_k)/\sigma} \le 1,

    ``J`` the exp chart's volume density, ``G = M.log_volume_growth`` (``J <=
    e^{G|c|}``) and ``ρ_k = min(r, |a_k| + half the box's diagonal) >= |c|`` (the box's
    volume bound, included in its weight). At small ``σ`` (large ``n·ε``) boxes
    cannot follow the law in ``d >= 3`` within their budget; there the envelope is
    radial around the computed median ``x_hat`` instead: on shells ``τ_k < t <= τ_{k+1}`` of
    ``t = ρ(x_hat, x)``, ``|grad F(x)| >= g(t)``, piecewise linear with the slopes
    of ``F``'s curvature along geodesics from ``x_hat`` (Hessian comparison, each
    record's turning bounded; private ``_MedianShells``), and a proposal
    ``x = exp_{x_hat}(c)`` is accepted with ``J(c) e^{-(|grad F(x)| - g(t) + σ G
    t)/σ} <= 1``. The shells draw first; where most of their mass lies where their
    bound stopped growing, they get a pilot of ``_SHELLS_PILOT`` proposals, then the
    boxes are built and the draws still missing come from the envelope of the
    smaller mass (the pilot stops on a count of proposals, so all draws are i.i.d.
    from the law, docs/exact.md; the shells cost no construction, the boxes a pass
    over the data each). A proposal that violates a bound
    raises :class:`ExactSamplingError` (a failed premise: nothing is released).

    Parameters
    ----------
    M : Manifold
        The manifold of the data, with an exact sampler (``M.exact_sampling``).
    data : array or dask.array.Array, shape ``(n, *point_shape)``
        Records, all inside ``domain`` (checked); a Dask array is read in passes.
    sigma : float
        KNG's scale (``2Δ/ε = 4/(nε)``).
    size : int
        Number of draws.
    rng : Generator, int or None
        Random source (a ``numpy.random.Generator`` or a seed).
    domain : DataDomain
        The public ball ``B_r(m0)``.
    max_attempts : int
        Cap on proposals per draw (default ``DEFAULT_MEDIAN_MAX_ATTEMPTS``, 10⁶: at
        the least acceptance measured where the mechanisms accept σ, 5e-5, it fails
        with probability below e^-50 a draw; ``laws.exact_range.median_sigma_floor``).

    Returns
    -------
    ExactDraws
        ``info`` holds ``acceptance_rate``, the volume step's (the ball's, for the
        shells) and the KNG ratio's rates, the envelopes used (``"MedianShells"``,
        ``"MedianCells"`` or ``"MedianShells+MedianCells"``), their numbers of shells
        and boxes, and ``shell_draws``, the draws the shells made.

    Raises
    ------
    ExactSamplingError
        The cap was hit (the message names the cause), or a bound failed.

    Examples
    --------
    >>> import pymc_manidp as pmd
    >>> S = pmd.Sphere(dim=2)
    >>> dom = pmd.DataDomain(S, [0.0, 0.0, 1.0], 0.3)
    >>> data = S.exp_coords([0.0, 0.0, 1.0], np.random.default_rng(0).normal(size=(20, 2)) * 0.1)
    >>> sample_kng_median(S, data, 0.2, 50, rng=1, domain=dom).points.shape
    (50, 3)
    """
    domain, data, sigma, size, max_attempts, rng = _kng_arguments(
        M, data, sigma, size, rng, domain, max_attempts
    )
    d, r = M.dim, domain.radius
    m0 = domain.center
    stats = {"proposals": 0, "volume_accepted": 0, "kng_ratio_rate_num": 0}
    what = f"KNG's median sampler on {M}"
    shells, fallback = _median_envelope(M, data, sigma, domain)
    cells = None

    def check(log_ratio):
        if np.any(log_ratio > 0):
            raise ExactSamplingError(
                "a proposal violated the median envelope's bound by "
                f"{float(log_ratio.max() * sigma):.3g}: a premise (data in the ball, "
                "r < r*) failed at working precision, so nothing is released"
            )

    def propose_shells(m):
        c, beta = shells.draw(M, m, sigma, rng)
        x, keep = _ball_proposals(M, shells.x_hat, c, domain, what)
        keep[keep] = domain.distances(x[keep]) <= r
        idx = np.flatnonzero(keep)
        stats["proposals"] += m
        stats["volume_accepted"] += len(idx)
        if len(idx):
            g = reductions.median_grad_norms(M, x[idx], data)
            log_ratio = M.log_volume_density(c[idx]) - (g - beta[idx]) / sigma
            check(log_ratio)
            keep[idx] = rng.random(len(idx)) < np.exp(log_ratio)
            stats["kng_ratio_rate_num"] += int(keep[idx].sum())
        return x, keep

    def propose_cells(m):
        prob = cells.prob
        k = rng.choice(len(prob), size=m, p=prob)
        c = cells.a[k] + cells.h[k][:, None] * (rng.random((m, d)) - 0.5)
        keep = np.linalg.norm(c, axis=-1) <= r
        # the box's own volume bound, not the ball's e^{G r}: on H^2 at r = 6 that step
        # alone accepted e^{-6} of the proposals where the law lives (near m0)
        keep &= rng.random(m) < np.exp(M.log_volume_density(c) - cells.log_J[k])
        x = _proposal_points(M, m0, c, what)
        keep &= domain.distances(x) <= r  # rounding only: exp_{m0}(c) is in the ball
        idx = np.flatnonzero(keep)
        stats["proposals"] += m
        stats["volume_accepted"] += len(idx)
        if len(idx):
            g = reductions.median_grad_norms(M, x[idx], data)
            log_ratio = -(g - cells.L[k[idx]]) / sigma
            check(log_ratio)
            keep[idx] = rng.random(len(idx)) < np.exp(log_ratio)
            stats["kng_ratio_rate_num"] += int(keep[idx].sum())
        return x, keep

    batch_cap, min_batch = _kng_batches(M, data)
    loop = {
        "batch_cap": batch_cap,
        "min_batch": min_batch,
        "explain": lambda: _median_explain(sigma, domain, stats),
    }
    parts, proposed, box_draws = [], 0, 0
    if shells is not None:
        # where the boxes may be tighter, the shells get a pilot of a few thousand
        # proposals first: they cost no construction, and where they are loose the
        # pilot is small against the boxes' (a box costs a pass, as a proposal). The
        # stop looks at counts only, never at the accepted points (docs/exact.md)
        cap = max_attempts * size
        pts, proposed = _rejection(
            propose_shells,
            size,
            max_attempts,
            what,
            cap=min(cap, _SHELLS_PILOT) if fallback else cap,
            partial=fallback,
            **loop,
        )
        parts.append(pts)
    got = sum(len(p) for p in parts)
    if got < size:
        # the draws still missing come from the envelope of the smaller mass (the
        # higher acceptance: both dominate the same target, whose mass is either
        # rate's numerator), the boxes built now for that number of draws; the stops
        # above looked at counts only, so all draws are i.i.d. (docs/exact.md)
        ref = None if shells is None else shells.x_hat
        cells = _MedianCells.build(M, data, sigma, domain, size - got, ref=ref)
        boxes = shells is None or cells.log_mass(M, domain) < shells.log_mass(M)
        pts, more = _rejection(
            propose_cells if boxes else propose_shells,
            size - got,
            max_attempts,
            what,
            cap=max_attempts * (size - got),  # the pilot's proposals come on top
            **loop,
        )
        parts.append(pts)
        proposed += more
        if not boxes:
            cells = None
        else:
            box_draws = len(pts)
    pts = np.concatenate([p for p in parts if len(p)])
    used = [type(e).__name__.strip("_") for e in (shells, cells) if e is not None]
    info = {
        "acceptance_rate": size / proposed,
        "volume_rate": stats["volume_accepted"] / max(stats["proposals"], 1),
        "kng_ratio_rate": stats["kng_ratio_rate_num"] / max(stats["volume_accepted"], 1),
        "envelope": "+".join(used),
        "envelope_cells": len(cells.a) if cells is not None else 0,
        "envelope_shells": len(shells.slopes) if shells is not None else 0,
        "shell_draws": size - box_draws,
    }
    return ExactDraws(pts, proposed, info)
