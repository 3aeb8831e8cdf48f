r"""The black-box sample test: a certified lower bound on the privacy loss.

**Black-box sample test** (:func:`sample_test`, any manifold), after DP-Auditorium's
histogram tester: draws from ``M(D)`` and ``M(D')`` are mapped to a scalar
(geodesic distance to a fixed point, a tangent coordinate), binned, and each bin
gets Clopper–Pearson bounds. With all bounds holding at once (Bonferroni over bins,
both directions and statistics), for every bin ``B``

.. math:: \log \frac{P(M(D) \in B)}{P(M(D') \in B)} \ge
          \log \frac{p_{\rm lo}(B)}{q_{\rm hi}(B)},

so ``eps_lb`` (the largest right-hand side over bins and directions) is a lower bound
on the privacy loss at the stated confidence. An ε-DP mechanism gives
``eps_lb > ε`` with probability at most ``1 - confidence``; the test passes when
``eps_lb <= ε``. It can only ever *refute* a privacy claim, never prove one.

Its memory is estimated from ``size`` and its time from one small timed draw
(:func:`sample_test_cost`) before any sample is drawn; either above its limit is
refused.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import numpy as np
from scipy import stats

from pymc_manidp._progress import progress_bar
from pymc_manidp._validation import check_positive_int
from pymc_manidp.privacy.audit import _cost
from pymc_manidp.privacy.audit.neighbours import as_pairs, audited_epsilon

__all__ = [
    "SampleTestResult",
    "clopper_pearson",
    "distance_statistic",
    "histogram_epsilon_lb",
    "sample_test",
    "sample_test_cost",
    "tangent_statistic",
]


# --- the black-box sample test -----------------------------------------------------------------
def clopper_pearson(k, n, alpha):
    """One-sided Clopper–Pearson bounds ``(lower, upper)`` for ``k`` successes in ``n``.

    Each bound holds with probability at least ``1 - alpha``.

    Examples
    --------
    >>> lo, hi = clopper_pearson(0, 10, 0.05)
    >>> float(lo), round(float(hi), 4)  # 1 - 0.05**(1/10)
    (0.0, 0.2589)
    """
    k, n = np.asarray(k, float), np.asarray(n, float)
    lo = np.where(k > 0, stats.beta.ppf(alpha, np.maximum(k, 1), n - k + 1), 0.0)
    hi = np.where(k < n, stats.beta.ppf(1 - alpha, k + 1, np.maximum(n - k, 1)), 1.0)
    return lo, hi


def histogram_epsilon_lb(stat_data, stat_neighbour, edges, *, alpha):
    r"""Certified lower bound on the privacy loss from binned scalar samples.

    With ``p_B, q_B`` the bin probabilities under ``M(D)`` and ``M(D')`` and
    Clopper–Pearson bounds each at level ``alpha``,

    .. math:: \varepsilon_{lb} = \max\Big(0, \max_B \log\frac{p_{lo}(B)}{q_{hi}(B)},
              \max_B \log\frac{q_{lo}(B)}{p_{hi}(B)}\Big).

    The caller splits its total error budget over the ``4 * bins`` bounds.
    ``edges`` are interior bin edges (the outer bins are open). Returns
    ``(eps_lb, bin, direction, counts_data, counts_neighbour)``.
    """
    edges = np.asarray(edges, float)
    a = np.bincount(np.searchsorted(edges, stat_data), minlength=len(edges) + 1)
    b = np.bincount(np.searchsorted(edges, stat_neighbour), minlength=len(edges) + 1)
    pa_lo, pa_hi = clopper_pearson(a, len(stat_data), alpha)
    pb_lo, pb_hi = clopper_pearson(b, len(stat_neighbour), alpha)
    with np.errstate(divide="ignore"):
        fwd = np.log(pa_lo) - np.log(pb_hi)
        bwd = np.log(pb_lo) - np.log(pa_hi)
    i, j = int(np.argmax(fwd)), int(np.argmax(bwd))
    if max(fwd[i], bwd[j]) <= 0:
        return 0.0, -1, "", a, b
    if fwd[i] >= bwd[j]:
        return float(fwd[i]), i, "D over D'", a, b
    return float(bwd[j]), j, "D' over D", a, b


def distance_statistic(manifold, point) -> Callable:
    """``x -> rho(point, x)``: geodesic distance to a fixed point."""
    point = manifold.validate(point)
    return lambda x: manifold.dist(point, x)


def tangent_statistic(manifold, base, direction) -> Callable:
    """``x -> <log_base(x), u>`` with ``u`` the unit tangent ``direction`` at ``base``."""
    base = manifold.validate(base)
    u = manifold.to_tangent(base, np.asarray(direction, float))
    nu = manifold.norm(base, u)
    if not nu > 0:
        raise ValueError("direction must be a non-zero tangent vector at base")
    u = u / nu
    return lambda x: manifold.inner(base, manifold.log(base, x), u)


@dataclass(frozen=True, eq=False)
class SampleTestResult:
    """Figures of a black-box histogram test.

    Attributes
    ----------
    epsilon : float
    epsilon_lb : float
        Lower bound on the privacy loss holding with probability ``confidence``.
    confidence : float
    size : int
        Draws from each of ``M(D)`` and ``M(D')`` (pilot draws for the bins extra).
    bins : int
    statistic : str
        The scalar post-processing that gave ``epsilon_lb``.
    bin_range : tuple of float
        The worst bin ``[lo, hi)`` of that statistic.
    direction : str
    counts : tuple of int
        Counts of the worst bin under ``D`` and ``D'``.
    passed : bool
        ``epsilon_lb <= epsilon``.
    all_lb : dict
        ``epsilon_lb`` of every statistic.
    """

    epsilon: float
    epsilon_lb: float
    confidence: float
    size: int
    bins: int
    statistic: str
    bin_range: tuple
    direction: str
    counts: tuple
    passed: bool
    all_lb: dict = field(default_factory=dict, repr=False)

    def summary(self) -> str:
        """One paragraph in words: the verdict and the worst statistic and bin."""
        verdict = "PASSED" if self.passed else "FAILED (privacy violation certified)"
        where = (
            f"; worst bin [{self.bin_range[0]:.4g}, {self.bin_range[1]:.4g}) of "
            f"'{self.statistic}', {self.direction}, counts {self.counts[0]} vs {self.counts[1]}"
            if self.statistic
            else ""
        )
        return (
            f"histogram sample test: eps = {self.epsilon:g}, certified lower bound eps_lb = "
            f"{self.epsilon_lb:.4g} at {100 * self.confidence:g}% confidence "
            f"({self.size} draws per dataset, {self.bins} bins){where}: {verdict}"
        )


def _default_sampler(mech):
    if not callable(getattr(mech, "sample", None)):
        raise ValueError(
            f"{getattr(mech, 'name', type(mech).__name__)} has no exact sample(data, size, "
            "random_seed=...) method: pass sample=callable(data, size, rng)"
        )
    return lambda data, size, rng: mech.sample(data, size, random_seed=rng)


def _pilot(size: int) -> int:
    """Pilot draws per dataset that set the bin edges."""
    return max(size // 10, 1000)


# Draws timed (per dataset) to estimate the sampler's speed.
_CALIBRATION_DRAWS = 256


def _sample_bytes(M, size: int, pilot: int) -> float:
    """Estimated peak memory of a sample test.

    Per draw: the draws kept (p numbers each), the sampler's own work while drawing
    and a statistic's (a geodesic distance on SPD(2) holds several matrices per
    draw): measured up to 18 p + 4, counted as 24 p + 16. Plus 32 MiB: the exact
    samplers work in batches of proposals (measured up to 25 MiB on SPD(2)). The
    tests check it against tracemalloc.
    """
    p = math.prod(M.point_shape)
    return 8.0 * (size + pilot) * (24 * p + 16) + 32 * 2**20


def sample_test_cost(
    mech,
    data,
    size: int = 200_000,
    *,
    sample=None,
    bins=20,
    max_bytes=None,
    max_seconds=None,
):
    """Estimated ``(bytes, seconds)`` of :func:`sample_test`; refuses a too large one.

    Memory is estimated from ``size`` alone, before anything is drawn; time from
    one timed call of the sampler for 256 draws of ``data`` (from a generator of its
    own, so the test's draws are not changed), scaled to the ``2 (size + pilot)``
    draws of the test. ``sample_test`` calls this first; call it yourself to check a
    size before other work.

    Parameters
    ----------
    mech : mechanism object
        Provides ``manifold`` (and ``sample`` for the default sampler).
    data : array ``(n, *point_shape)``
        The dataset whose draws are timed.
    size : int
        Draws from each dataset, as in :func:`sample_test`.
    sample : callable ``(data, size, rng) -> (size, *point_shape)``, optional
        The sampler, as in :func:`sample_test` (default ``mech.sample``).
    bins : int or array
        As in :func:`sample_test`: fixed bin edges need no pilot draws.
    max_bytes : float, optional
        Memory the test may take (default: half of this machine's memory).
    max_seconds : float, optional
        Computing time the test may take (default an hour).

    Returns
    -------
    tuple of float
        ``(bytes, seconds)``: the estimates.

    Raises
    ------
    ValueError
        An estimate above its limit (the message gives both estimates and the
        largest ``size`` that fits), or a bad ``size``.

    Examples
    --------
    >>> import numpy as np
    >>> import pymc_manidp as pmd
    >>> from pymc_manidp.privacy import boundary_pair
    >>> mech = pmd.LaplaceMechanism(pmd.Sphere(dim=2), epsilon=1.0, center=[0, 0, 1.0],
    ...                             radius=np.pi / 8)
    >>> p = boundary_pair(mech.domain, 10)
    >>> nbytes, seconds = sample_test_cost(mech, p.data, 200_000)
    >>> bool(nbytes < 2**30)
    True
    >>> sample_test_cost(mech, p.data, 10**12)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: the sample test (1000000000000 draws per dataset) would need about ... TiB ...
    """
    M = mech.manifold
    size = check_positive_int(size, "size", minimum=10)
    pilot = _pilot(size) if isinstance(bins, numbers.Integral) else 0
    limit_b, limit_s = _cost.memory_limit(max_bytes), _cost.time_limit(max_seconds)
    what = f"the sample test ({size} draws per dataset)"
    nbytes = _sample_bytes(M, size, pilot)
    if nbytes > limit_b:
        top = _cost.largest(
            lambda k: _sample_bytes(M, k, _pilot(k) if pilot else 0) <= limit_b, 10, size
        )
        _cost.refuse(
            what,
            nbytes,
            None,
            limit_b,
            limit_s,
            f"choose size <= {top}" if top >= 10 else "choose a smaller size",
        )
    sample = _default_sampler(mech) if sample is None else sample
    if not callable(sample):
        raise TypeError("sample must be a callable (data, size, rng) -> points")
    k = min(_CALIBRATION_DRAWS, size)
    rng = np.random.default_rng(0)  # its own stream: the test's draws stay as seeded
    per_draw = _cost.timed(lambda: sample(data, k, rng), repeats=1) / k

    def seconds(m):
        return 2 * (m + (_pilot(m) if pilot else 0)) * per_draw

    if seconds(size) > limit_s:
        top = _cost.largest(lambda m: seconds(m) <= limit_s, 10, size)
        _cost.refuse(
            what,
            nbytes,
            seconds(size),
            limit_b,
            limit_s,
            f"choose size <= {top}" if top >= 10 else "choose a faster sampler",
        )
    return nbytes, seconds(size)


def _default_statistics(M, m0, pair):
    a, b = pair.data[pair.index], pair.neighbour[pair.index]
    stats_ = {
        "distance to the moved record's new value": distance_statistic(M, b),
        "distance to the moved record's old value": distance_statistic(M, a),
    }
    w = M.log(m0, b) - M.log(m0, a)
    if M.norm(m0, M.to_tangent(m0, w)) > 0:
        stats_["tangent coordinate at m0 along the move"] = tangent_statistic(M, m0, w)
    return stats_


def sample_test(
    mech,
    data,
    neighbour,
    *,
    sample=None,
    statistics=None,
    size: int = 200_000,
    bins: int | Iterable = 20,
    confidence: float = 0.99,
    epsilon=None,
    random_seed=None,
    max_bytes=None,
    max_seconds=None,
    progressbar=None,
) -> SampleTestResult:
    """Black-box histogram test of ``P(M(D) in B) <= e^eps P(M(D') in B)`` on bins ``B``.

    Parameters
    ----------
    mech : mechanism object
        Provides ``manifold``, ``domain`` and ``epsilon`` (and ``sample`` for the
        default sampler).
    data, neighbour : arrays ``(n, *point_shape)``
        Neighbouring datasets (choose worst cases: :func:`boundary_pair`).
    sample : callable ``(data, size, rng) -> (size, *point_shape)``, optional
        An exact sampler of the mechanism. Default ``mech.sample(data, size,
        random_seed=rng)``.
    statistics : dict of name -> callable, optional
        Scalar post-processings ``(size, *point_shape) -> (size,)``. Default: the
        distances to the changed record's old and new values and the tangent
        coordinate at the center along the change.
    size : int
        Draws from each dataset. A separate pilot of ``max(size // 10, 1000)`` draws
        from each sets the bin edges (pooled quantiles), so the edges are independent
        of the counts the bounds use.
    bins : int or array
        Number of bins (``>= 2``) or increasing interior edges (used for every
        statistic).
    confidence : float
        In ``(0, 1)``; the bounds are Bonferroni-split over ``4 * bins`` bounds per
        statistic.
    epsilon : float, optional
        Budget to test (default ``mech.epsilon``).
    random_seed : int or Generator, optional
        Source of the draws (public: the test is no release).
    max_bytes, max_seconds : float, optional
        Limits on the estimated memory and computing time (default: half of this
        machine's memory, an hour); see ``privacy.audit.sample_test_cost``, which runs first
        (its timing call is the only extra call of ``sample``).
    progressbar : bool or None
        A bar over the batches of draws on stderr; ``None``: only when stderr is a
        terminal and ``$CI`` is unset. The draws are the same with or without it.

    Returns
    -------
    SampleTestResult
        The largest certified lower bound on ε over the statistics and bins, and the verdict.

    Raises
    ------
    ValueError
        Non-neighbouring datasets, bad ``size``/``bins``/``confidence``/``epsilon``,
        or a test whose estimated memory or time exceeds ``max_bytes``/``max_seconds``.

    Examples
    --------
    >>> import numpy as np
    >>> import pymc_manidp as pmd
    >>> from pymc_manidp.privacy import boundary_pair
    >>> mech = pmd.LaplaceMechanism(pmd.Sphere(dim=2), epsilon=1.0, center=[0, 0, 1.0],
    ...                             radius=np.pi / 8)
    >>> p = boundary_pair(mech.domain, 10)
    >>> res = sample_test(mech, p.data, p.neighbour, size=20_000, random_seed=0)
    >>> res.passed, bool(0 < res.epsilon_lb < 1)
    (True, True)
    """
    M = mech.manifold
    eps = audited_epsilon(mech, epsilon)
    size = check_positive_int(size, "size", minimum=10)
    if isinstance(confidence, bool) or not isinstance(confidence, numbers.Real):
        raise TypeError("confidence must be a real number")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    fixed_edges = None
    if isinstance(bins, bool):
        raise TypeError("bins must be an int or an array of bin edges")
    if isinstance(bins, numbers.Integral):
        nbins = check_positive_int(bins, "bins", minimum=2)
    else:
        try:
            fixed_edges = np.asarray(bins, float)
        except (TypeError, ValueError):
            raise TypeError("bins must be an int or an array of bin edges") from None
        if (
            fixed_edges.ndim != 1
            or len(fixed_edges) < 1
            or not np.all(np.isfinite(fixed_edges))
            or np.any(np.diff(fixed_edges) <= 0)
        ):
            raise ValueError("bin edges must be a non-empty, finite, increasing 1-d array")
        nbins = len(fixed_edges) + 1
    pair = as_pairs(M, (data, neighbour))[0]
    sample = _default_sampler(mech) if sample is None else sample
    if not callable(sample):
        raise TypeError("sample must be a callable (data, size, rng) -> points")
    if statistics is None:
        statistics = _default_statistics(M, mech.domain.center, pair)
    if not statistics:
        raise ValueError("statistics must name at least one scalar post-processing")
    sample_test_cost(
        mech,
        pair.data,
        size,
        sample=sample,
        bins=nbins if fixed_edges is None else fixed_edges,
        max_bytes=max_bytes,
        max_seconds=max_seconds,
    )
    rng = random_seed if isinstance(random_seed, np.random.Generator) else None
    rng = rng or np.random.default_rng(random_seed)

    def draw(d, k):
        x = np.asarray(sample(d, k, rng), float)
        if x.shape != (k, *M.point_shape):
            raise ValueError(f"sample returned shape {x.shape}, expected {(k, *M.point_shape)}")
        return x

    pilot = _pilot(size)
    label = getattr(mech, "name", type(mech).__name__)
    # one step per batch of draws (the test's cost); the same draws in the same order
    with progress_bar(
        f"sample test of {label}", 2 if fixed_edges is not None else 4, progressbar
    ) as advance:
        xp = draw(pair.data, size)
        advance()
        xq = draw(pair.neighbour, size)
        advance()
        pp = pq = None
        if fixed_edges is None:
            pp = draw(pair.data, pilot)
            advance()
            pq = draw(pair.neighbour, pilot)
            advance()
    alpha = (1.0 - confidence) / (4.0 * nbins * len(statistics))
    best, all_lb = None, {}
    for name, f in statistics.items():
        sp, sq = np.asarray(f(xp), float), np.asarray(f(xq), float)
        if fixed_edges is None:
            pooled = np.concatenate([f(pp), f(pq)])
            edges = np.unique(np.quantile(pooled, np.arange(1, nbins) / nbins))
        else:
            edges = fixed_edges
        lb, i, direction, ca, cb = histogram_epsilon_lb(sp, sq, edges, alpha=alpha)
        all_lb[name] = lb
        if best is None or lb > best[0]:
            lo = -np.inf if i <= 0 else edges[i - 1]
            hi = np.inf if i < 0 or i >= len(edges) else edges[i]
            counts = (int(ca[i]), int(cb[i])) if i >= 0 else (0, 0)
            best = (lb, name if i >= 0 else "", (float(lo), float(hi)), direction, counts)
    lb, name, rng_bin, direction, counts = best
    return SampleTestResult(
        epsilon=eps,
        epsilon_lb=lb,
        confidence=float(confidence),
        size=size,
        bins=nbins,
        statistic=name,
        bin_range=rng_bin,
        direction=direction,
        counts=counts,
        passed=bool(lb <= eps),
        all_lb=all_lb,
    )
