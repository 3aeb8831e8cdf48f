"""The machinery every exact sampler shares: the rejection loop and its cap, Gamma draws
truncated to an interval, uniform directions, the argument checks, and the proposals'
points (validated as the sampler's own, not the user's).

:class:`ExactDraws` (the draws and their rejection statistics) and
:class:`ExactSamplingError` are the samplers' result and failure; ``DEFAULT_MAX_ATTEMPTS``
the cap on proposals per draw.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy import special

from pymc_manidp._validation import check_positive_int
from pymc_manidp.stats.domain import DataDomain

DEFAULT_MAX_ATTEMPTS = 10_000
# KNG in memory: a batch of proposals costs at most this many log maps (a proposal
# costs a pass over the data, so for large n proposals go one at a time)
_KNG_BATCH_LOG_MAPS = 250_000
# KNG proposals whose gradients one pass over Dask data evaluates at most
_DASK_BATCH = 64


class ExactSamplingError(RuntimeError):
    """An exact sampler stopped: too many rejections, or a bound it relies on failed."""


@dataclass(frozen=True)
class ExactDraws:
    """I.i.d. draws of an exact sampler with its rejection statistics.

    Attributes
    ----------
    points : ndarray, shape ``(size, *point_shape)``
    proposals : int
        Envelope proposals drawn at the outermost rejection stage.
    info : dict
        ``acceptance_rate`` (``size / proposals``) and per-stage figures. The number
        of proposals depends on the data: it is for the curator, not for publication.
    """

    points: np.ndarray
    proposals: int
    info: dict = field(default_factory=dict)

    @property
    def acceptance_rate(self) -> float:
        """Accepted draws per proposal (1.0 when nothing was proposed)."""
        return len(self.points) / self.proposals if self.proposals else 1.0


def has_exact_sampler(manifold) -> bool:
    """Whether an exact sampler exists for this manifold (``manifold.exact_sampling``).

    Parameters
    ----------
    manifold : Manifold
        The manifold of the release.

    Returns
    -------
    bool
        True if the manifold's own class vouches for the samplers' premises
        (``exact_sampling``, not inherited: a subclass may change the geometry, and a
        sampler for the wrong law is worse than none).

    Examples
    --------
    >>> import pymc_manidp as pmd
    >>> has_exact_sampler(pmd.Sphere(dim=2))
    True
    """
    return bool(getattr(manifold, "exact_sampling", False))


def _check_size(size) -> int:
    return check_positive_int(size, "size")


def _check_max_attempts(max_attempts) -> int:
    return check_positive_int(max_attempts, "max_attempts")


def _directions(rng, m, d):
    u = rng.standard_normal((m, d))
    return u / np.linalg.norm(u, axis=-1, keepdims=True)


_REMEDY = "Raise max_attempts, or use an MCMC sampler."


def _rejection(
    propose,
    size,
    max_attempts,
    what,
    *,
    batch_cap=1 << 16,
    min_batch=16,
    explain=None,
    cap=None,
    partial=False,
    first=None,
):
    """Run ``propose(m) -> (candidates, keep_mask)`` in batches until ``size`` are kept.

    ``first``: proposals per wanted draw in the first round (default: from an assumed
    acceptance rate of 1/2, at least ``min_batch``); later rounds follow the rate seen.

    The kept candidates are returned in proposal order; as proposals are i.i.d.,
    the first ``size`` kept ones are i.i.d. from the accepted law. ``explain()``, if
    given, returns the cause and remedy for the error when the cap is hit. The cap
    is ``max_attempts * size`` proposals unless ``cap`` is given; with ``partial``
    the draws kept by then are returned (fewer than ``size``) instead of an error: a
    stop that depends only on the number of proposals leaves the kept ones i.i.d.
    """
    cap = max_attempts * size if cap is None else int(cap)
    kept, got, proposed, rate = [], 0, 0, 0.5
    while got < size:
        need = size - got
        m = (
            max(np.ceil(1.2 * need / rate) + 1, min_batch)
            if proposed or not first
            else first * need
        )
        m = int(min(m, batch_cap, cap - proposed))
        if m <= 0:
            if partial:
                break
            raise ExactSamplingError(
                f"{what}: {got} of {size} draws accepted after {proposed} proposals "
                f"(acceptance rate {got / max(proposed, 1):.2g}); stopped at the cap of "
                f"max_attempts = {max_attempts} proposals per draw. "
                + (explain() if explain is not None else _REMEDY)
            )
        cand, keep = propose(m)
        idx = np.flatnonzero(keep)[:need]
        # count only the proposals up to the last one used: the rates stay unbiased
        proposed += int(idx[-1]) + 1 if len(idx) == need else m
        kept.append(cand[idx])
        got += len(idx)
        rate = max((got + 0.5) / (proposed + 1.0), 1e-4)
    if not kept:
        return np.empty((0,)), proposed
    return np.concatenate(kept)[:size], proposed


def _gamma_truncated(shape, scale, t_max, m, rng):
    """``m`` draws of ``Gamma(shape, scale)`` conditioned on ``t <= t_max``."""
    if not np.isfinite(t_max):
        return rng.gamma(shape, scale, m)
    p = float(special.gammainc(shape, t_max / scale))
    if p >= 0.25:  # plain rejection keeps at least a quarter: cheap and exact
        t, _ = _rejection(
            lambda k: ((s := rng.gamma(shape, scale, k)), s <= t_max),
            m,
            DEFAULT_MAX_ATTEMPTS,
            "truncated Gamma",
        )
        return t
    # inverse CDF: u ~ U(0, p) mapped through the regularized incomplete gamma
    # inverse (accurate to ~1e-14 relative); min() only absorbs its rounding at t_max
    u = rng.uniform(0.0, p, m)
    return np.minimum(scale * special.gammaincinv(shape, u), t_max)


def _check_exact_manifold(M):
    if not has_exact_sampler(M):
        raise ValueError(
            f"no exact sampler for {M!r}: exact samplers exist for Euclidean, Sphere, "
            "KendallShape, SPD and manifolds whose own class sets exact_sampling = True "
            "(not a subclass: it may change the geometry); use an MCMC sampler"
        )


def _proposal_points(M, foot, c, what, rounding=0.0):
    """Points ``exp_foot(c)`` of the sampler's own proposals, validated.

    A failure here is the sampler's, not the user's data: the error says so. With
    ``rounding > 0`` (``domain.rounding_error``, the absolute rounding of proposals in
    the ball, so a relative one for coordinates ``>= 1``), rows that fail the default
    tolerance are validated again with ``4 rounding`` (at most 0.05): the hyperboloid's
    proposals through the ball from an edge point (H^2, radius 6.4) round by 4e-6
    relative, within that bound, and are projected back onto the manifold.
    """
    x = M.exp_coords(foot, c)
    try:
        return M.validate(x)
    except ValueError as err:
        if rounding > 0:
            try:
                return M.validate(x, tol=min(0.05, max(1e-6, 4.0 * rounding)))
            except ValueError:
                pass
        raise ExactSamplingError(
            f"{what}: a proposal of the sampler itself (not one of your records) could not "
            f"be represented at working precision ({err}); the chart at the footpoint is "
            "too ill-conditioned: use an MCMC sampler"
        ) from None


def _ball_proposals(M, foot, c, domain, what):
    """``(x, maybe_in)``: ``_proposal_points`` for proposals that count only inside
    ``domain``'s ball, and which rows may be inside it.

    A row whose unvalidated ``exp_foot(c)`` lies outside the ball by more than a
    relative 1e-6 plus the space's rounding bound is rejected without being validated
    (its ``x`` is ``foot``, never used): far outside the ball the hyperboloid's
    coordinates may fail validation (H^2 at radius 6.4, proposals from an edge point
    reach 2r further out) though no point the law can take is involved. The other
    rows are validated as before, row by row the same numbers: seeded draws are
    unchanged.
    """
    raw = M.exp_coords(foot, c)
    with np.errstate(all="ignore"):
        try:
            d_raw = np.asarray(domain.distances(raw))
        except ValueError:  # not even a raw distance: validate every row (raises)
            d_raw = np.zeros(len(c))
    maybe_in = ~(d_raw > domain.radius * (1 + 1e-6) + domain.rounding_error)
    if maybe_in.all():
        return _proposal_points(M, foot, c, what, domain.rounding_error), maybe_in
    x = np.empty_like(raw)
    x[~maybe_in] = foot
    x[maybe_in] = _proposal_points(M, foot, c[maybe_in], what, domain.rounding_error)
    return x, maybe_in


def _check_domain(M, domain):
    if domain is None:
        return None
    if not isinstance(domain, DataDomain):
        raise TypeError(f"domain must be a DataDomain or None, got {type(domain).__name__}")
    if domain.manifold != M:
        raise ValueError("domain is defined on a different manifold")
    return domain


def _ball_cover(M, foot, domain):
    """Radius of a geodesic ball at ``foot`` containing ``domain`` (triangle inequality)."""
    t = float(M.dist(foot, domain.center)) + domain.radius
    return t * (1.0 + 1e-12) + 1e-300  # rounding of the distance must not cut the ball


def _gamma_interval(shape, scale, lo, hi, m, rng):
    """``m`` draws of ``Gamma(shape, scale)`` conditioned on ``lo < t <= hi``."""
    if lo <= 0.0:
        return _gamma_truncated(shape, scale, hi, m, rng)
    # upper-tail inverse CDF: accurate where the interval lies far in the tail
    q_lo = special.gammaincc(shape, lo / scale)
    q_hi = special.gammaincc(shape, hi / scale) if np.isfinite(hi) else 0.0
    u = rng.uniform(q_hi, q_lo, m)
    return np.clip(scale * special.gammainccinv(shape, u), lo, hi)
