r"""Exact samplers: draws from the mechanisms' laws without MCMC (pure ε-DP releases).

Every sampler here is a composition of exact steps: Gamma variates, uniform
directions and rejection sampling, so the draws follow the target law up to
floating-point rounding (they are *not* hardened against least-significant-bit
attacks).

Manifold Laplace at a footpoint ``eta`` with scale ``sigma``: in normal coordinates
``c = t u`` at ``eta`` (``u`` uniform on the unit sphere of the tangent space,
``t = |c|``) the density w.r.t. Lebesgue measure is

.. math:: e^{-t/\sigma}\, J(c),

``J`` the volume density of the exponential chart (``M.log_volume_density``). What
the sampler needs of the manifold are its members (``M.exact_sampling`` says the class
vouches for them):

- a radial density with ``J <= 1`` (``M.volume_is_radial``, ``M.log_volume_growth ==
  0``): ``t`` has density ``∝ e^{-t/σ} t^{d-1} J(t)`` on ``[0, T]``, ``T`` the
  injectivity radius, drawn by rejection from ``Gamma(d, σ)`` (truncated to the
  support) accepting with ``J(t) <= 1``. Sphere ``S^d_R``: ``J = (sin(t/R)/(t/R))^{d-1}``
  on ``[0, πR]``; Kendall shapes (``d = 2k - 4``): ``(sin t / t)^{d-1} cos t`` on
  ``[0, π/2]``; Euclidean ``R^d``, where the exp chart is an isometry (``J = 1``, 2021
  supplement §1.4): ``t ~ Gamma(d, sigma)`` with no rejection;
- otherwise a growth bound ``log J(c) <= G|c|`` (``G = M.log_volume_growth``):
  rejection from the Euclidean K-norm with scale ``σ'``, ``1/σ' = 1/σ - β``, accepting
  with ``J(c) e^{-β t - (G-β) T}`` is exact for ``t <= T``; ``β = G`` (``T = ∞``) needs
  ``σ < 1/G`` (``M.check_laplace_normalizable``). SPD(k): ``J = ∏_{i<j}
  sinhc(|λ_i-λ_j|/2)`` (``λ`` the eigenvalues of the tangent matrix); since
  ``sinhc(y) <= e^y`` and ``Σ_{i<j}|λ_i-λ_j| <= C|λ|`` with ``C = sqrt(k(k²-1)/3)``,
  ``G = C/2`` and ``1/G = 2/C`` is the normalizability edge. An isotropic ``u`` makes
  the eigenvector frame Haar distributed, as it must be.

Restricted laws (``B_r(m0)``) are drawn from the law truncated to the geodesic ball
``B_T(eta)`` with ``T = rho(eta, m0) + r`` (which contains ``B_r(m0)``), keeping the
draws inside ``B_r(m0)``.

KNG, density ``∝ exp(-|grad F(x)|/σ)`` on ``B_r(m0)`` with
``F = (1/2n) Σ rho²(x, x_i)``: 2022 Lemma 1 gives ``|grad F(x)| >= H rho(x_bar, x)``
on the ball; a local form of it (the curvature of ``F`` along the geodesic from the
mean) gives a tighter piecewise-linear bound, whose exponential is the rejection
envelope: see :func:`sample_kng` and :func:`_kng_shells`.

Every rejection loop draws its proposals in batches and stops with
:class:`ExactSamplingError` after ``max_attempts`` proposals per requested draw.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field

import numpy as np
from scipy import special

from pymc_manidp._validation import (
    as_points,
    check_positive_int,
    check_positive_real,
    check_sigma,
)
from pymc_manidp.geometry.base import exp_chart_is_isometry
from pymc_manidp.geometry.spd import SPD
from pymc_manidp.rng import as_generator
from pymc_manidp.stats import reductions
from pymc_manidp.stats.domain import DataDomain
from pymc_manidp.stats.frechet import ConvergenceWarning, frechet_mean, frechet_means
from pymc_manidp.stats.median import frechet_median

__all__ = [
    "ExactDraws",
    "ExactSamplingError",
    "as_generator",
    "euclidean_laplace",
    "has_exact_sampler",
    "kng_envelope_slope",
    "knorm_noise",
    "laplace_coords",
    "sample_kng",
    "sample_kng_median",
    "sample_kng_stack",
    "sample_laplace",
    "sample_laplace_stack",
    "spd_edge_constant",
]

DEFAULT_MAX_ATTEMPTS = 10_000
# The median's envelope accepts as little as 1 proposal in 10^3-10^4 in d >= 4
# (Kendall(4), n = 500: a median of 1,305 and a 90th percentile of 5,406 proposals a
# release over 300 replicates, 1 of them past 10^4). A cap only decides how often a
# release gives up after reading the data (a charged, failed release), never its law:
# 10^6 times the least acceptance measured where the median's σ is supported
# (5e-5, exact_range.median_sigma_floor) fails with probability below e^-50 a draw,
# and costs nothing where the acceptance is higher (issue 43)
DEFAULT_MEDIAN_MAX_ATTEMPTS = 1_000_000
# KNG in memory: a batch of proposals costs at most this many log maps (a proposal
# costs a pass over the data, so for large n proposals go one at a time)
_KNG_BATCH_LOG_MAPS = 250_000
# many data sets at once: log maps (numbers of a point) a round of proposals may hold
_STACK_LOG_MAPS = 1_000_000
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


def spd_edge_constant(k: int) -> float:
    r"""``C = sqrt(k(k²-1)/3)``: :attr:`SPD.volume_growth_constant` (the manifold owns it)."""
    return SPD(k=k).volume_growth_constant


# --- building blocks ---------------------------------------------------------------------
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


def euclidean_laplace(footpoint, sigma, size, rng=None):
    r"""Euclidean K-norm (ℓ2) Laplace in ``R^d`` (2021 supplement §1.4).

    .. math:: f(y) \propto \exp(-|y - \bar x|_2 / \sigma),

    drawn as ``y = x_bar + t u`` with ``t ~ Gamma(d, sigma)`` and ``u`` uniform on
    the unit sphere.

    Parameters
    ----------
    footpoint : array, shape ``(d,)``
        The footpoint ``x_bar``.
    sigma : float
        The scale ``sigma > 0``.
    size : int
        Number of draws.
    rng : Generator, int or None
        Random source (a ``numpy.random.Generator`` or a seed).

    Returns
    -------
    ndarray, shape ``(size, d)``
        The draws ``y``.

    Examples
    --------
    >>> y = euclidean_laplace([0.0, 0.0, 0.0], 0.5, 4000, rng=1)
    >>> y.shape, bool(abs(np.linalg.norm(y, axis=1).mean() - 1.5) < 0.05)  # E t = d sigma
    ((4000, 3), True)
    """
    footpoint = as_points(footpoint, np.shape(footpoint)[-1:], name="footpoint")
    if footpoint.ndim != 1:
        raise ValueError(f"footpoint must be one point of shape (d,), got {footpoint.shape}")
    sigma = check_sigma(sigma)
    size = _check_size(size)
    rng = as_generator(rng)
    return footpoint + knorm_noise(rng, footpoint.shape[0], sigma, (size,))


def knorm_noise(rng, dim: int, sigma: float, size=()) -> np.ndarray:
    r"""Draw the ℓ2 K-norm (Euclidean Laplace) noise on :math:`\mathbb R^D`.

    .. math:: f(y) \propto \exp(-\|y\|_2/\sigma), \qquad
              \|Y\| \sim \mathrm{Gamma}(D, \sigma),\ Y/\|Y\| \text{ uniform on } S^{D-1}

    (2021 supplement §1.4: direction a normalized standard Gaussian).

    Parameters
    ----------
    rng : numpy.random.Generator
        The random source.
    dim : int
        ``D``.
    sigma : float
        The scale ``sigma > 0``.
    size : tuple of int
        Leading shape; the result has shape ``(*size, D)``.

    Returns
    -------
    ndarray, shape ``(*size, D)``
        The noise vectors ``Y``.

    Examples
    --------
    >>> y = knorm_noise(np.random.default_rng(0), 3, 0.5, (1000,))
    >>> y.shape, bool(abs(np.linalg.norm(y, axis=1).mean() - 1.5) < 0.1)  # E|Y| = D sigma
    ((1000, 3), True)
    """
    size = tuple(size)
    u = rng.standard_normal((*size, dim))
    norm = np.linalg.norm(u, axis=-1, keepdims=True)
    while np.any(norm == 0.0):  # a null event: redrawing it leaves the law unchanged
        u = np.where(norm == 0.0, rng.standard_normal(u.shape), u)
        norm = np.linalg.norm(u, axis=-1, keepdims=True)
    t = rng.gamma(shape=dim, scale=sigma, size=(*size, 1))
    return t * u / norm


# --- radial laws and normal coordinates ------------------------------------------------------
def _radial_log_ratio(M, t):
    """log(target radial density / Gamma(d, σ) density) ``= log J(t e_1)``, ``<= 0``.

    For the isotropic charts (sphere, Kendall, Euclidean) the volume density depends
    on ``|c|`` only, so the manifold's own ``log_volume_density`` along one axis is
    the radial ratio: one source for the formula.
    """
    c = np.zeros((*np.shape(t), M.dim))
    c[..., 0] = t
    return M.log_volume_density(c)


def _tilt(growth, sigma):
    """Envelope tilt ``β``: the K-norm proposal has rate ``1/σ - β``.

    ``β = G`` (``M.log_volume_growth``) makes the bound free of ``T`` (needed when
    ``T = ∞``). For a finite ``T`` any ``β`` in ``[0, G]`` with ``β < 1/σ`` gives a
    valid bound; measured on SPD(k) (``G = C/2``) over k = 2, 3, 5, σ in [0.02, 3] and
    T in {1, 3, 6} the largest allowed ``β`` always accepted most (docs/exact.md). The
    choice only affects speed, never the law.
    """
    return min(growth, 0.9 / sigma)


def _tilted_coords(M, sigma, size, rng, t_max, max_attempts, stats, what):
    """Normal coordinates of the Laplace law from the K-norm envelope tilted by
    ``G = M.log_volume_growth`` (a volume density that is not radial: SPD)."""
    d = M.dim
    growth = M.log_volume_growth
    if not np.isfinite(t_max):
        M.check_laplace_normalizable(sigma)
        # only beta = G bounds J e^{-beta t} on an unbounded chart: a smaller tilt
        # (sigma within 10% of the edge) would leave slack (G - beta) * inf, accepting nothing
        beta = growth
    else:
        beta = _tilt(growth, sigma)
    # 1/sigma - beta must itself be a normal float (sigma itself was checked)
    scale = check_sigma(1.0 / (1.0 / sigma - beta), "the SPD envelope's sigma 1/(1/sigma - beta)")
    slack = (growth - beta) * t_max if beta < growth else 0.0

    def propose(m):
        t = _gamma_truncated(d, scale, t_max, m, rng)
        c = t[:, None] * _directions(rng, m, d)
        # log J(c) <= G t (SPD: log prod sinhc(x_ij/2) <= sum x_ij/2 <= C t/2), so <= 0
        log_ratio = M.log_volume_density(c) - beta * t - slack
        return c, rng.random(m) < np.exp(log_ratio)

    c, proposed = _rejection(propose, size, max_attempts, what)
    stats["radial_proposals"] = stats.get("radial_proposals", 0) + proposed
    stats["radial_accepted"] = stats.get("radial_accepted", 0) + size
    return c


def laplace_coords(M, sigma, size, rng=None, *, t_max=None, max_attempts=DEFAULT_MAX_ATTEMPTS):
    r"""Normal coordinates ``(size, dim)`` of the manifold Laplace at any footpoint.

    .. math:: p(c) \propto e^{-|c|/\sigma} J(c), \qquad |c| \le T,

    ``J`` the exp chart's volume density (``M.log_volume_density``) and ``T`` the
    smaller of ``t_max`` and the chart's radius (``πR`` on spheres, ``π/2`` for
    Kendall shapes). Isotropic, so valid in the orthonormal frame of any footpoint.

    Parameters
    ----------
    M : Manifold
        The manifold (its dimension and volume density ``J``), with an exact sampler
        (``M.exact_sampling``: every shipped space says so in its class).
    sigma : float
        The scale ``sigma > 0``.
    size : int
        Number of draws.
    rng : Generator, int or None
        Random source (a ``numpy.random.Generator`` or a seed).
    t_max : float, optional
        Truncation radius (default: none).
    max_attempts : int
        Cap on proposals per draw.

    Returns
    -------
    ndarray, shape ``(size, dim)``
        The coordinates ``c`` in an orthonormal frame of the tangent space.

    Examples
    --------
    >>> import pymc_manidp as pmd
    >>> c = laplace_coords(pmd.Sphere(dim=2), 0.1, 5, rng=0)
    >>> c.shape
    (5, 2)
    """
    c, _ = _laplace_coords(M, sigma, size, rng, t_max, max_attempts)
    return c


def _check_exact_manifold(M):
    if not has_exact_sampler(M):
        raise ValueError(
            f"no exact sampler for {M!r}: exact samplers exist for Euclidean, Sphere, "
            "KendallShape, SPD and manifolds whose own class sets exact_sampling = True "
            "(not a subclass: it may change the geometry); use an MCMC sampler"
        )


def _laplace_coords(M, sigma, size, rng, t_max, max_attempts, what=None):
    """Normal coordinates of the Laplace law; ``what`` names the caller in errors."""
    _check_exact_manifold(M)
    what = what or f"the {M} Laplace radial law"
    sigma = check_sigma(sigma)
    size = _check_size(size)
    max_attempts = _check_max_attempts(max_attempts)
    rng = as_generator(rng)
    t_max = np.inf if t_max is None else check_positive_real(t_max, "t_max")
    stats: dict = {}
    if not (M.volume_is_radial and M.log_volume_growth == 0):
        return _tilted_coords(M, sigma, size, rng, t_max, max_attempts, stats, what), stats
    d = M.dim
    top = min(t_max, M.injectivity_radius)  # the exp chart's radius (inf if not compact)

    def propose(m):
        t = _gamma_truncated(d, sigma, top, m, rng)
        return t, rng.random(m) < np.exp(_radial_log_ratio(M, t))

    if exp_chart_is_isometry(M):  # J = 1: nothing to reject
        t, proposed = _gamma_truncated(d, sigma, top, size, rng), size
    else:
        t, proposed = _rejection(propose, size, max_attempts, what)
    stats["radial_proposals"] = proposed
    stats["radial_accepted"] = size
    return t[:, None] * _directions(rng, size, d), stats


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


def sample_laplace(
    M,
    footpoint,
    sigma,
    size,
    rng=None,
    *,
    domain=None,
    max_attempts=DEFAULT_MAX_ATTEMPTS,
) -> ExactDraws:
    r"""Exact draws of the manifold Laplace, whole space or restricted to a ball.

    .. math:: f(x) \propto \exp\{-\rho(\eta, x)/\sigma\}\ \text{w.r.t. volume},
              \quad x \in \mathcal M \ \text{or}\ x \in B_r(m_0).

    Parameters
    ----------
    M : Manifold
        The manifold of the release, with an exact sampler (``M.exact_sampling``).
    footpoint : array, shape ``point_shape``
        The footpoint ``eta``.
    sigma : float
        The scale ``sigma > 0``.
    size : int
        Number of draws.
    rng : Generator, int or None
        Random source (a ``numpy.random.Generator`` or a seed).
    domain : DataDomain, optional
        Restrict the law to ``B_r(m0)``: drawn from the law truncated to
        ``B_T(eta)``, ``T = rho(eta, m0) + r``, keeping the draws inside.
    max_attempts : int
        Cap on proposals per draw at each rejection stage.

    Returns
    -------
    ExactDraws
        ``points`` of shape ``(size, *point_shape)``, validated.

    Raises
    ------
    ValueError
        No exact sampler for ``M``; ``sigma`` outside the range where the law
        exists (unrestricted SPD).
    ExactSamplingError
        The cap on proposals was hit.

    Examples
    --------
    >>> import pymc_manidp as pmd
    >>> S = pmd.Sphere(dim=2)
    >>> draws = sample_laplace(S, [0.0, 0.0, 1.0], 0.05, 3, rng=0)
    >>> draws.points.shape
    (3, 3)
    """
    _check_exact_manifold(M)
    foot = M.validate(footpoint)
    if foot.shape != tuple(M.point_shape):
        raise ValueError(f"footpoint must be one point of shape {tuple(M.point_shape)}")
    sigma = check_sigma(sigma)
    size = _check_size(size)
    max_attempts = _check_max_attempts(max_attempts)
    domain = _check_domain(M, domain)
    rng = as_generator(rng)
    if domain is None:
        c, stats = _laplace_coords(M, sigma, size, rng, None, max_attempts)
        pts = _proposal_points(M, foot, c, "the Laplace sampler")
        return ExactDraws(pts, size, {"acceptance_rate": 1.0, **stats})
    t_max = _ball_cover(M, foot, domain)
    stats: dict = {}
    what = f"the restricted Laplace on {M} (ball of radius {domain.radius:.6g})"

    def propose(m):
        c, st = _laplace_coords(M, sigma, m, rng, t_max, max_attempts, what)
        for key, v in st.items():
            stats[key] = stats.get(key, 0) + v
        x = _proposal_points(M, foot, c, what)
        return x, domain.distances(x) <= domain.radius

    pts, proposed = _rejection(propose, size, max_attempts, what)
    info = {"acceptance_rate": size / proposed, "ball_proposals": proposed, **stats}
    return ExactDraws(pts, proposed, info)


# --- KNG ---------------------------------------------------------------------------------
def _h(s, kappa):
    """``h(s) = s sqrt(κ) cot(s sqrt(κ))`` (1 for κ <= 0): Hessian bound of ρ²/2."""
    if kappa <= 0:
        return np.ones_like(s)
    root = np.sqrt(kappa)
    a = np.asarray(s, float)
    a = a * root if root != 1.0 else a  # times 1.0 changes no number
    far = a > 1e-8
    if far.all():  # the series' branch would be computed only to be dropped
        return a / np.tan(a)
    return np.where(far, a / np.tan(np.where(far, a, 1.0)), 1.0 - a * a / 3.0)


def kng_envelope_slope(domain: DataDomain) -> float:
    r"""The slope ``H`` of 2022 Lemma 1: ``|grad F(x)| >= H rho(x_bar, x)`` on the ball.

    ``H = h_max(2r, κ_max) = 2r√κ cot(2r√κ)`` for ``κ_max > 0``, else 1. Why: for
    ``y`` in the (convex) ball every datum is within ``2r``, and the Hessian of
    ``ρ²(·, x_i)/2`` is at least ``h(ρ(y, x_i)) >= h(2r)`` (Hessian comparison with
    the upper curvature bound), so ``F`` is ``H``-strongly convex there; integrating
    along the geodesic from ``x_bar`` (where ``grad F = 0``) to ``x`` gives
    ``<grad F(x), γ'> >= H ρ(x_bar, x)``. The lower curvature bound enters only
    the lemma's *upper* bound (``h_min``), which the sampler does not need.

    Parameters
    ----------
    domain : DataDomain
        The public ball ``B_r(m0)`` (its radius and the manifold's curvature bound).

    Returns
    -------
    float
        ``H``, in ``(0, 1]``.

    Examples
    --------
    >>> import pymc_manidp as pmd
    >>> kng_envelope_slope(pmd.DataDomain(pmd.Euclidean(dim=2), [0.0, 0.0], 1.0))
    1.0
    """
    return domain.curvature_factor


def _grad_norms(M, x, data, profile=None):
    """``|grad F(x)| = |(1/n) Σ log_x(x_i)|_x`` for a batch ``x`` ``(m, *shape)``.

    One pass over the data for the whole batch (NumPy or Dask, see
    :func:`pymc_manidp.stats.reductions.grad_norms`; ``profile`` as there).
    """
    return reductions.grad_norms(M, x, data, profile=profile)


def _gamma_interval(shape, scale, lo, hi, m, rng):
    """``m`` draws of ``Gamma(shape, scale)`` conditioned on ``lo < t <= hi``."""
    if lo <= 0.0:
        return _gamma_truncated(shape, scale, hi, m, rng)
    # upper-tail inverse CDF: accurate where the interval lies far in the tail
    q_lo = special.gammaincc(shape, lo / scale)
    q_hi = special.gammaincc(shape, hi / scale) if np.isfinite(hi) else 0.0
    u = rng.uniform(q_hi, q_lo, m)
    return np.clip(scale * special.gammainccinv(shape, u), lo, hi)


def _kng_shells(M, sigma, H, r, rho_data, e, t_max, rho_weights=None):
    r"""The piecewise-linear lower bound ``g`` of ``|grad F|`` used as KNG's envelope.

    Returns ``(edges, slopes, offsets, log_weights)``: on shell ``k``
    (``edges[k] < t <= edges[k+1]``, ``t = ρ(x_hat, x)``)
    ``|grad F(x)| >= g(t) = offsets[k] + slopes[k] t``, and ``log_weights[k]`` is the
    log mass of ``e^{-g(t)/σ} t^{d-1}`` on the shell. ``rho_data`` are the distances
    ``ρ(x_hat, x_i)`` (or upper bounds of them, with ``rho_weights`` summing to 1:
    :func:`~pymc_manidp.stats.reductions.distance_profile` over Dask).

    Why it is a valid bound (a local form of 2022 Lemma 1). Let ``x`` be in the ball,
    ``x_bar`` the exact mean (``ρ(x_hat, x_bar) <= e``), ``γ`` the unit-speed
    geodesic from ``x_bar`` to ``x`` (inside the convex ball), ``u = ρ(x_bar, x)``.
    At ``γ(τ)``, ``ρ(γ(τ), x_i) <= min(2r, ρ(x_hat, x_i) + e + τ) =: s_i(τ)`` and the
    Hessian of ``ρ²(·, x_i)/2`` is at least ``h(s_i(τ))`` (Hessian comparison with
    ``κ_max``; ``h`` decreases), so ``d/dτ <grad F(γ), γ'> >= λ(τ) := mean_i
    h(s_i(τ))``. As ``grad F(x_bar) = 0``, ``|grad F(x)| >= G(u) := ∫_0^u λ``.
    ``λ`` decreases, so on a grid ``τ_j`` the lower sums ``G_{j+1} = G_j + λ(τ_{j+1})
    (τ_{j+1} - τ_j)`` and the lines between them stay below ``G``; ``G`` increases
    and ``u >= t - e``, so ``g(t) = G_j + λ(τ_{j+1})(t - e - τ_j)`` on
    ``τ_j + e < t <= τ_{j+1} + e`` is a lower bound (negative values are trivially
    so). ``λ >= H``: with ``λ = H`` throughout this is Lemma 1's ``H (t - e)``.
    Near the mean ``λ ≈ mean_i h(ρ(x_hat, x_i))``, the true curvature of ``F``,
    while ``H`` can be near 0 (radius near ``r*``): the envelope stays tight when
    ``σ`` is small (large ``n·ε``) or ``r`` is near ``r*``.
    """
    kappa = M.curvature_bounds[1]
    d = M.dim

    rho_data = np.asarray(rho_data, float)

    def lam(tau):
        """``λ(τ)`` at each grid point of ``tau`` ``(m,)``: one array pass for all of
        them (a row per τ, reduced along the row as the 1-D mean was: same numbers)."""
        h = _h(np.minimum(2.0 * r, rho_data[None, :] + e + tau[:, None]), kappa)
        if rho_weights is None:
            lam = np.mean(h, axis=-1)
        else:  # a dot per row (a matrix product sums in another order: other ulps)
            lam = np.array([np.dot(rho_weights, row) for row in h])
        return np.maximum(lam, H)

    # grid in u = t - e: doubling from a fraction of the law's scale
    tau = [0.0]
    step = min(sigma / float(lam(np.zeros(1))[0]) / 4.0, t_max / 256.0)
    # at least one shell: when e >= t_max (H tiny, r just below r*) the bound
    # g(t) = slope (t - e) <= 0 on [0, t_max] is trivially valid
    while tau[-1] + e < t_max or len(tau) == 1:
        tau.append(min(tau[-1] + step, t_max - e) if tau[-1] + step + e < t_max else t_max - e)
        step *= 1.5
    tau = np.array(tau)
    slopes = lam(tau[1:])
    G = np.concatenate([[0.0], np.cumsum(slopes * np.diff(tau))])[:-1]
    offsets = G - slopes * (e + tau[:-1])
    edges = tau + e
    edges[0] = 0.0
    scale = sigma / slopes
    # the tail that keeps the digits: near r* (slopes ~ H ~ 1e-16) or at a huge sigma
    # the upper tails are both 1 to working precision and their difference 0, a shell of
    # zero mass (then no shell had any: "the shells' weights are not a distribution")
    log_mass = _log_gamma_mass(d, edges[:-1] / scale, edges[1:] / scale)
    log_weights = -offsets / sigma + d * np.log(scale) + log_mass
    return edges, slopes, offsets, log_weights


def _log_gamma_mass(d, a, b):
    """``log(P(d, b) - P(d, a))`` (``P`` the regularized lower incomplete gamma) from the
    tail that keeps the digits: the lower one below the mode ``d``, the upper above."""
    lower = special.gammainc(d, b) - special.gammainc(d, a)
    upper = special.gammaincc(d, a) - special.gammaincc(d, b)
    with np.errstate(divide="ignore"):
        return np.log(np.maximum(np.where(a < d, lower, upper), 0.0))


#: below this lower-tail mass at its outer edge, a shell's radius is drawn through the
#: lower tail's inverse: the upper tail's would read u = 1 - P to an absolute 1e-16, a
#: relative error 1e-16/P in P (1e-13 at this threshold), and 0 where P < 1e-16
_LOWER_TAIL_BELOW = 1e-3


def _kng_arguments(M, data, sigma, size, rng, domain, max_attempts):
    """The checked arguments of a KNG sampler (mean or median): its law lives on the ball."""
    _check_exact_manifold(M)
    if domain is None:
        raise ValueError("KNG's law lives on the public ball: pass domain=DataDomain(...)")
    domain = _check_domain(M, domain)
    sigma = check_sigma(sigma)
    size = _check_size(size)
    max_attempts = _check_max_attempts(max_attempts)
    return domain, domain.check(data), sigma, size, max_attempts, as_generator(rng)


def sample_kng(
    M,
    data,
    sigma,
    size,
    rng=None,
    *,
    domain,
    max_attempts=DEFAULT_MAX_ATTEMPTS,
) -> ExactDraws:
    r"""Exact draws of KNG restricted to the public ball, by rejection.

    .. math:: f(x \mid D) \propto \exp\{-\|\nabla F(x)\|_x/\sigma\}
              = \exp\Big\{-\Big\|\sum_i \log_x(x_i)\Big\|_x \big/(\sigma n)\Big\},
              \quad x \in B_r(m_0).

    Envelope: ``e^{-g(t)/σ}`` w.r.t. volume, ``t = ρ(x_hat, x)`` the distance to the
    computed Fréchet mean ``x_hat``, truncated to ``B_T(x_hat) ⊇ B_r(m0)``, where
    ``g(t) <= |grad F(x)|`` is piecewise linear on shells around ``x_hat``, with
    slopes from the curvature of ``F`` along the way (private ``_kng_shells``; all
    ``>= H`` of 2022 Lemma 1, :func:`kng_envelope_slope`).
    A proposal inside ``B_r(m0)`` is accepted with probability

    .. math:: \exp\{-(\|\nabla F(x)\| - g(t))/\sigma\} \le 1.

    ``e`` bounds the error of the numerical mean: Lemma 1 at ``x_hat`` gives
    ``ρ(x_hat, x_bar) <= |grad F(x_hat)|/H`` (``DataDomain.footpoint_error``).
    Exactness does not depend on how well the mean converged, only the acceptance
    rate does (a factor ``e^{-Le/σ}``). On positively curved spaces the local slopes
    keep the acceptance rate from collapsing when ``σ`` is small (large ``n·ε``) or
    ``r`` is near ``r*`` (``H`` near 0); on SPD and Euclidean spaces ``L = H = 1``
    and the envelope is the Laplace at ``x_hat`` with rate ``σ``.

    Parameters
    ----------
    M : Manifold
        The manifold of the data, with an exact sampler (``M.exact_sampling``).
    data : array or dask.array.Array, shape ``(n, *point_shape)``
        Records, all inside ``domain`` (checked). A Dask array is never gathered:
        each batch of proposals costs one pass over it.
    sigma : float
        KNG's rate (``2Δ/ε``).
    size : int
        Number of draws.
    rng : Generator, int or None
        Random source (a ``numpy.random.Generator`` or a seed).
    domain : DataDomain
        The public ball ``B_r(m0)``.
    max_attempts : int
        Cap on proposals per draw at each rejection stage.

    Returns
    -------
    ExactDraws
        ``info`` holds ``acceptance_rate`` (accepted / envelope proposals), the
        fraction inside the ball, the KNG ratio's acceptance, ``H``, the local slope
        at the mean, ``e``.

    Raises
    ------
    ExactSamplingError
        The cap was hit (the message names the cause), or a proposal violated the
        bound (a failed premise: nothing should be released).

    Examples
    --------
    >>> import pymc_manidp as pmd
    >>> S = pmd.Sphere(dim=2)
    >>> dom = pmd.DataDomain(S, [0.0, 0.0, 1.0], np.pi / 8)
    >>> data = S.exp_coords([0.0, 0.0, 1.0], np.random.default_rng(0).normal(size=(50, 2)) * 0.1)
    >>> out = sample_kng(S, data, 0.05, 200, rng=1, domain=dom)
    >>> out.points.shape, 0.4 < out.acceptance_rate <= 1
    ((200, 3), True)
    """
    domain, data, sigma, size, max_attempts, rng = _kng_arguments(
        M, data, sigma, size, rng, domain, max_attempts
    )
    env = _KNGEnvelope.build(M, data, sigma, domain, max_attempts)
    stats = {"inside": 0, "proposals": 0}
    propose = _kng_proposer(env, data, rng, stats)
    batch_cap, min_batch = _kng_batches(M, data)
    # each proposal costs n log maps: small first batches suit single releases. Over
    # Dask each round is a pass: the local envelope accepts nearly every proposal at
    # large n (docs/scaling.md), so the first round asks one per draw; a pass then
    # computes 1 gradient instead of 4 and a second pass is rarely needed
    pts, proposed = _rejection(
        propose,
        size,
        max_attempts,
        env.what,
        batch_cap=batch_cap,
        min_batch=min_batch,
        explain=lambda: _kng_explain(env, stats),
        first=1 if reductions.is_dask(data) and env.curved else None,
    )
    info = {
        "acceptance_rate": size / proposed,
        "inside_ball_rate": stats["inside"] / stats["proposals"],
        "kng_ratio_rate": size / max(stats["inside"], 1),
        "envelope_slope_H": env.H,
        "envelope_slope_local": env.local_slope,
        "footpoint_error": env.e,
        "envelope_sigma": sigma / env.local_slope,
    }
    info.update({k: v for k, v in stats.items() if k.startswith("radial")})
    return ExactDraws(pts, proposed, info)


@dataclass
class _KNGEnvelope:
    """The envelope ``e^{-g(t)/σ}`` of :func:`sample_kng` around the computed mean.

    ``x_hat`` is the computed Fréchet mean (private), ``e`` the bound on its error,
    ``t_max`` the radius of the envelope's ball; on positively curved spaces ``g`` is
    piecewise linear on the shells ``edges`` with ``slopes``/``offsets`` and shell
    weights ``weights``; elsewhere one slope ``H``.
    """

    M: object
    domain: DataDomain
    sigma: float
    H: float
    x_hat: np.ndarray
    e: float
    t_max: float
    max_attempts: int
    curved: bool
    local_slope: float
    edges: np.ndarray | None = None
    slopes: np.ndarray | None = None
    offsets: np.ndarray | None = None
    weights: np.ndarray | None = None
    cdf: np.ndarray | None = None
    scales: np.ndarray | None = None
    q_lo: np.ndarray | None = None
    q_hi: np.ndarray | None = None

    @property
    def what(self) -> str:
        return f"KNG's exact sampler on {self.M}"

    @classmethod
    def build(cls, M, data, sigma, domain, max_attempts):
        """The envelope for checked ``data``: one Fréchet mean, one distance profile."""
        curved = M.curvature_bounds[1] > 0
        # out of core: each Fréchet pass also bins the distances from its point, so
        # the profile at the mean costs no pass of its own (the clipped mean's gradient
        # pass bins them too)
        profile = reductions.DistanceProfile(data, 2.0 * domain.radius) if curved else None
        return cls._build(M, data, sigma, domain, max_attempts, curved, profile)

    @classmethod
    def _build(cls, M, data, sigma, domain, max_attempts, curved, profile):
        H = kng_envelope_slope(domain)
        top = 2.0 * domain.radius  # the distance profile's cap
        with warnings.catch_warnings():
            # an unconverged mean is still a valid envelope center: its error is bounded
            warnings.simplefilter("ignore", ConvergenceWarning)
            mean = frechet_mean(M, data, tol=1e-12, atol=1e-3 * sigma * H, profile=profile)
        x_hat, g_hat_norm = mean.mean, mean.grad_norm  # the last gradient: no extra pass
        if not domain.distances(x_hat) <= domain.radius:
            x_hat = domain.check(x_hat[None], clip=True)[0]  # Lemma 1 needs x_hat in the ball
            g_hat_norm = float(_grad_norms(M, x_hat[None], data, profile)[0])
        # e >= rho(x_hat, x_bar); the slack absorbs the rounding of |grad F| and rho (a
        # few hundred ulps of r at most), so rounding cannot push a ratio above 1
        # x_hat and x_bar both lie in the ball: rho <= 2r even when H (near r*) is tiny.
        # Where a space's coordinates round worse (the hyperboloid far out), its bound
        # eta enters twice: in |grad F(x_hat)| (so in rho(x_hat, x_bar)) and in the
        # proposal's |grad F|, each moving the bound g = H (t - e) by eta
        eta = domain.rounding_error
        e = (
            min(domain.footpoint_error(g_hat_norm + 2.0 * eta), 2.0 * domain.radius)
            + 1e-12 * domain.radius
        )
        t_max = min(_ball_cover(M, x_hat, domain), M.injectivity_radius)
        env = cls(M, domain, sigma, H, x_hat, e, t_max, max_attempts, False, H)
        if curved:  # local slopes; the chart's volume density is <= 1
            rho, rho_w = reductions.distance_profile(M, x_hat, data, top, profile=profile)
            env.edges, env.slopes, env.offsets, log_w = _kng_shells(
                M, sigma, H, domain.radius, rho, e, t_max, rho_weights=rho_w
            )
            weights = np.exp(log_w - np.max(log_w))
            env.weights = weights / weights.sum()
            env.curved, env.local_slope = True, float(env.slopes[0])
            env._shell_tables()
        # else h = 1: one slope, the Laplace envelope (SPD's volume density needs its tilt)
        return env

    def _shell_tables(self):
        """Per-shell constants of :meth:`draw`, from the envelope alone: the weights'
        cdf (as ``rng.choice`` builds it, after the checks it makes of ``p``) and each
        shell's Gamma scale and tail probabilities at its edges (as
        :func:`_gamma_interval` computes them)."""
        w = self.weights
        if not (np.all(w >= 0) and abs(w.sum() - 1.0) <= np.sqrt(np.finfo(float).eps)):
            raise ExactSamplingError(f"{self.what}: the shells' weights are not a distribution")
        self.cdf = np.cumsum(w)
        self.cdf /= self.cdf[-1]
        d, lo, hi = self.M.dim, self.edges[:-1], self.edges[1:]
        self.scales = self.sigma / self.slopes
        self.q_lo = special.gammaincc(d, lo / self.scales)
        self.q_hi = np.where(np.isfinite(hi), special.gammaincc(d, hi / self.scales), 0.0)
        # shells deep in the lower tail (slopes near 0: r near r*, or sigma huge) draw
        # through P's inverse (the others as before: the same numbers)
        self.p_lo = special.gammainc(d, lo / self.scales)
        self.p_hi = special.gammainc(d, hi / self.scales)
        self.lower_tail = self.p_hi < _LOWER_TAIL_BELOW

    def draw(self, m, rng, stats):
        """``(x, g, ok)``: ``m`` proposals, the bound g(t) at them, the volume-density step."""
        M, sigma = self.M, self.sigma
        if not self.curved:
            c, st = _laplace_coords(
                M, sigma / self.H, m, rng, self.t_max, self.max_attempts, self.what
            )
            for key, v in st.items():
                stats[key] = stats.get(key, 0) + v
            t = np.linalg.norm(c, axis=-1)
            x = _proposal_points(M, self.x_hat, c, self.what)
            return x, self.H * (t - self.e), np.ones(m, bool)
        # rng.choice(len(weights), m, p=weights) without its checks of p on every call
        # (the weights are checked once, in _build): the same cdf, the same uniforms
        shell = self.cdf.searchsorted(rng.random(m), side="right")
        t = np.empty(m)
        # shell by shell in increasing order, each from its own block of the stream: the
        # first (from 0) by _gamma_truncated, the others' uniforms (what _gamma_interval
        # draws) in one call and their inverse CDFs vectorized: the same numbers
        first = shell == 0
        k0 = int(first.sum())
        if k0:
            t[first] = _gamma_truncated(M.dim, self.scales[0], self.edges[1], k0, rng)
        if k0 < m:
            pos = np.flatnonzero(~first)
            pos = pos[np.argsort(shell[pos], kind="stable")]
            k = shell[pos]
            q_lo, q_hi = self.q_lo[k], self.q_hi[k]
            v = rng.random(len(pos))
            u = q_hi + (q_lo - q_hi) * v  # rng.uniform(q_hi, q_lo)
            inv = special.gammainccinv(M.dim, u)
            low = self.lower_tail[k]
            if low.any():  # the same v, from the shell's outer edge inwards as above
                p = self.p_hi[k][low] - (self.p_hi[k][low] - self.p_lo[k][low]) * v[low]
                inv[low] = special.gammaincinv(M.dim, p)
            t[pos] = np.clip(self.scales[k] * inv, self.edges[k], self.edges[k + 1])
        # the chart's volume density J(t) <= 1: a first, cheap acceptance step
        ok = rng.random(m) < np.exp(_radial_log_ratio(M, t))
        c = t[:, None] * _directions(rng, m, M.dim)
        x = _proposal_points(M, self.x_hat, c, self.what)
        return x, self.offsets[shell] + self.slopes[shell] * t, ok


def _kng_proposer(env, data, rng, stats):
    """``propose(m) -> (x, keep)``: envelope proposals, then KNG's acceptance ratio."""
    M, domain, sigma = env.M, env.domain, env.sigma

    def propose(m):
        x, g, keep = env.draw(m, rng, stats)
        keep &= domain.distances(x) <= domain.radius
        idx = np.flatnonzero(keep)
        stats["proposals"] += m
        stats["inside"] += len(idx)
        if len(idx):
            log_ratio = -(_grad_norms(M, x[idx], data) - g[idx]) / sigma
            if np.any(log_ratio > 0):
                raise ExactSamplingError(
                    "a proposal violated the KNG envelope bound (2022 Lemma 1) by "
                    f"{float(log_ratio.max() * sigma):.3g}: a premise (data in the ball, "
                    "r < r*) failed at working precision, so nothing is released"
                )
            keep[idx] = rng.random(len(idx)) < np.exp(log_ratio)
        return x, keep

    return propose


def _kng_batches(M, data) -> tuple[int, int]:
    """``(batch_cap, min_batch)`` of the rejection loop for these data."""
    # in memory a proposal's gradient costs as much as a pass: batches stay small for
    # large n; over Dask reading the data dominates, so each pass serves a batch
    if reductions.is_dask(data):
        return _DASK_BATCH, 4
    n = reductions.n_rows(data)
    return max(1, _KNG_BATCH_LOG_MAPS // (n * math.prod(M.point_shape))), 2


def _kng_explain(env, stats) -> str:
    """Why the rejection loop hit its cap, and what to do."""
    inside = stats["inside"] / max(stats["proposals"], 1)
    slack = env.local_slope * env.e / env.sigma
    if slack > 5.0:
        return (
            f"Cause: floating point. sigma = {env.sigma:.3g} is below the precision to which "
            f"the Fréchet mean of the data can be computed (error bound e = {env.e:.3g}, "
            f"L e / sigma = {slack:.3g}): n * epsilon is too large for "
            "floating point. Use a smaller epsilon (the release would be as accurate as "
            "floating point allows anyway)."
        )
    if inside < 0.01:
        return (
            f"Cause: only {inside:.2g} of the envelope's proposals fell inside the public "
            "ball. Use an MCMC sampler, or raise max_attempts."
        )
    return _REMEDY


# --- KNG on the Fréchet median -------------------------------------------------------------
#: cells of the median envelope: the first grid per axis, and the budget of gradient
#: evaluations (cells x records) its refinement may spend
_CELLS_FIRST = 8
_CELL_LOG_MAPS = 5_000_000
#: the expected acceptance at which the refinement stops, and the lowest at which it
#: may stop when the boxes already outnumber the proposals the draws will need
_CELLS_ENOUGH = 0.3
_CELLS_FLOOR = 0.0015
#: proposals the shells' pilot may spend before the boxes are built
_SHELLS_PILOT = 4000
#: about how many cuts the shells try for records near the computed median
_SHELL_CUTS = 8


def _chart_distortion(M, radius):
    """Bound on ``rho(exp_m0 a, exp_m0 b) / |a - b|`` for ``|a|, |b| <= radius``.

    Rauch's comparison: the differential of ``exp`` is at most 1 in norm where the
    curvature is ``>= 0``, at most ``sinh(k t)/(k t)`` (``k = sqrt(-kappa_min)``) at
    radius ``t`` otherwise; a segment's image is then at most that much longer.
    """
    kappa = M.curvature_bounds[0]
    if kappa >= 0:
        return 1.0
    a = np.sqrt(-kappa) * radius
    return float(np.sinh(a) / a) if a > 0 else 1.0


def _cut_before_conjugate(M) -> bool:
    """Whether ``M``'s injectivity radius comes before its first conjugate radius
    ``pi/sqrt(kappa_max)`` (SO(3): pi against 2 pi): there a record's cut locus is not
    where the turn budget of the median's bounds charges its worst case (it charges 2
    only at the conjugate radius, :func:`~pymc_manidp.stats.reductions.turn_rate`)."""
    kappa_max = float(M.curvature_bounds[1])
    conjugate = np.pi / np.sqrt(kappa_max) if kappa_max > 0 else np.inf
    # a relative margin: on spheres the two are equal but for rounding (Sphere(radius=7.3)
    # has inj an ulp below pi/sqrt(kappa)), and there the turn budget does see the cut locus
    return bool(M.injectivity_radius < conjugate * (1.0 - 1e-9))


@dataclass
class _MedianCells:
    """The median envelope: boxes in normal coordinates at ``m0`` (centers ``a``,
    sides ``h``), a lower bound ``L`` of ``|grad F|`` on each (geodesic radius
    ``delta`` from its center) and the log weights ``log(h^d) - L/sigma``."""

    a: np.ndarray
    h: np.ndarray
    L: np.ndarray
    log_w: np.ndarray
    #: per box, ``G min(r, |a| + half diagonal)``: a bound of ``log J`` on the box's part
    #: in the ball (``log J(c) <= G |c|``), 0 where ``J <= 1`` (``G = 0``)
    log_J: np.ndarray = None

    @staticmethod
    def _log_J(M, a, h, r):
        growth = M.log_volume_growth
        if growth == 0:
            return np.zeros(len(a))
        reach = np.linalg.norm(a, axis=-1) + 0.5 * h * np.sqrt(M.dim)
        return growth * np.minimum(reach, r)

    @classmethod
    def build(cls, M, data, sigma, domain, size=1, ref=None):
        d, r, m0 = M.dim, domain.radius, domain.center
        # the secant bound's reference: any point of the ball (the computed median is
        # the best); its objective F(ref), one pass
        ref = m0 if ref is None else ref
        ref = (ref, float(reductions.median_terms(M, ref[None], data)[3][0]))
        n = reductions.n_rows(data)
        budget = max(256, _CELL_LOG_MAPS // max(n, 1))
        # 8 boxes per axis where the budget allows; in high dimension fewer (at worst
        # one box: the cube around the ball, a valid but loose envelope)
        g = max(1, min(_CELLS_FIRST, int(np.floor(budget ** (1.0 / d) + 1e-9))))
        side = 2.0 * r / g
        axes = -r + side * (np.arange(g) + 0.5)
        a = np.stack(np.meshgrid(*([axes] * d), indexing="ij"), -1).reshape(-1, d)
        h = np.full(len(a), side)
        a, h = cls._inside(a, h, r)
        L, slack = cls._bounds(M, data, m0, a, h, r, ref)
        while len(a) < budget:
            log_w = d * np.log(h) - L / sigma + cls._log_J(M, a, h, r)
            share = np.exp(log_w - special.logsumexp(log_w))
            # the acceptance to expect (the target's mass on a cell is about its value
            # at the center): once it is reached, more cells cost more than they save
            expect = np.sum(share * np.exp(-slack / sigma))
            if expect >= _CELLS_ENOUGH:
                break
            # each box costs a pass over the data, as each proposal does: once the boxes
            # outnumber the proposals still expected for the draws asked, stop (above a
            # floor that keeps the rejection loop well inside its cap)
            if expect >= _CELLS_FLOOR and len(a) >= size / expect:
                break
            # split the cells that carry mass and whose bound is loose against sigma
            split = (share > 0.25 / len(a)) & (slack > 0.5 * sigma)
            if not split.any() or len(a) + split.sum() * (2**d - 1) > budget:
                break
            offs = np.stack(
                np.meshgrid(*([np.array([-0.25, 0.25])] * d), indexing="ij"), -1
            ).reshape(-1, d)
            kids_a = (a[split][:, None, :] + offs[None] * h[split][:, None, None]).reshape(-1, d)
            kids_h = np.repeat(h[split] / 2.0, 2**d)
            kids_a, kids_h = cls._inside(kids_a, kids_h, r)
            kids_L, kids_slack = cls._bounds(M, data, m0, kids_a, kids_h, r, ref)
            keep = ~split
            a = np.concatenate([a[keep], kids_a])
            h = np.concatenate([h[keep], kids_h])
            L = np.concatenate([L[keep], kids_L])
            slack = np.concatenate([slack[keep], kids_slack])
        log_J = cls._log_J(M, a, h, r)
        return cls(a, h, L, d * np.log(h) - L / sigma + log_J, log_J)

    @property
    def prob(self):
        return np.exp(self.log_w - special.logsumexp(self.log_w))

    def log_mass(self, M, domain) -> float:
        """Log of the envelope's integral over the coordinates at ``m0`` (each box's
        volume bound ``e^{G min(r, |a| + half diagonal)}`` included)."""
        return float(special.logsumexp(self.log_w))

    @staticmethod
    def _inside(a, h, r):
        """Drop the boxes that miss the coordinate ball of radius r."""
        half = 0.5 * h[:, None]
        nearest = np.maximum(np.abs(a) - half, 0.0)
        keep = np.linalg.norm(nearest, axis=-1) < r
        return a[keep], h[keep]

    @staticmethod
    def _bounds(M, data, m0, a, h, r, ref=None):
        """``L`` and its slack on each box: the box's part in the ball lies in the
        geodesic ball of radius ``delta`` (half its diagonal, times the chart's
        distortion) around its anchor, the box's center, moved into the ball where the
        cut locus comes before the conjugate locus (docs/exact.md, "anchors"). ``L`` is
        the larger of two bounds: the turn budget's, and with ``ref = (x_ref, F(x_ref))``
        the secant's ``(F(anchor) - delta - F(x_ref)) / (rho(x_ref, anchor) + delta)``
        (docs/exact.md, "secant")."""
        d = M.dim
        half_diag = 0.5 * h * np.sqrt(d)
        norm_a = np.linalg.norm(a, axis=-1)
        reach = norm_a + half_diag
        delta = half_diag * np.array([_chart_distortion(M, t) for t in reach])
        delta = delta * (1 + 1e-9) + 1e-15 * r  # the rounding of rho and exp
        if _cut_before_conjugate(M):
            # a center outside the ball may sit a half turn from a record (SO(3): log
            # undefined there, and a path to the box may cross a record's cut locus,
            # which the turn budget does not see). Its projection onto the coordinate
            # ball is as close to every point of the box in the ball (a projection onto
            # a convex set is 1-Lipschitz and fixes those points), and lies in the ball
            a = a * np.minimum(1.0, r / np.maximum(norm_a, r))[:, None]
        centers = M.validate(M.exp_coords(np.broadcast_to(m0, (len(a), *m0.shape)), a))
        out_L, out_s, out_F = [], [], []
        step = max(
            1, _KNG_BATCH_LOG_MAPS // (reductions.n_rows(data) * int(np.prod(M.point_shape)))
        )
        if reductions.is_dask(data):
            # a pass over Dask data costs a read of every chunk however few boxes it
            # serves: the in-memory rule above gives one box a pass from n ~ 83,000 on
            # S^2, hundreds of reads; a batch of boxes a pass, as the KNG proposals
            # (_kng_batches). The reductions block each chunk by the boxes' number
            step = _DASK_BATCH
        for s in range(0, len(a), step):
            L, slack = reductions.median_cell_bounds(
                M, centers[s : s + step], data, delta[s : s + step]
            )
            out_L.append(L)
            out_s.append(slack)
            if ref is not None:
                out_F.append(reductions.median_terms(M, centers[s : s + step], data)[3])
        L = np.concatenate(out_L)
        grad_c = L + np.concatenate(out_s)  # |grad F| at the anchors
        if ref is not None:
            # F is 1-Lipschitz (F(x) >= F(anchor) - delta on the box) and convex along
            # the geodesic from x_ref to x in the ball, so |grad F(x)| >= (F(x) -
            # F(x_ref)) / rho(x_ref, x): it does not shrink with the box where the turn
            # budget (every record charged delta coth rho >= delta on H^d) gives nothing
            F_c = np.concatenate(out_F)
            num = F_c - delta - ref[1] - 1e-12 * (1.0 + np.abs(F_c))  # F's rounding
            den = M.dist(ref[0], centers) * (1 + 1e-12) + delta
            L = np.maximum(L, np.where(num > 0, num / np.maximum(den, 1e-300), 0.0))
        # a few ulps of the computed norms: rounding cannot push a ratio above 1
        L = L - 1e-12
        # |grad F| >= 0: a looser bound says nothing more, and would weigh e^{|L|/σ}
        clamped = np.maximum(L, 0.0)
        return clamped, np.maximum(grad_c - clamped, 0.0)


def _sin_k(t, kappa):
    """``sin(√κ t)/√κ`` (``t`` where ``κ <= 0``): the comparison space's law of sines."""
    t = np.asarray(t, float)
    if kappa <= 0:
        return t
    k = np.sqrt(kappa)
    return np.sin(np.minimum(k * t, 0.5 * np.pi)) / k


def _shell_best(a, b):
    """Per shell, the terms ``(lam, G, g0, slopes, offsets, log_w)`` of the lower bound
    of smaller mass: each is a lower bound of ``|grad F|`` on the shell, so either is."""
    take = b[-1] < a[-1]
    return tuple(np.where(take, y, x) for x, y in zip(a, b, strict=True))


def _log_shell_mass(d, slope, sigma, lo, hi):
    """``log ∫_lo^hi t^{d-1} e^{-slope t/σ} dt`` per shell (``slope >= 0``; 0: a power)."""
    out = np.empty(len(slope))
    flat = slope <= 0.0
    out[flat] = np.log(hi[flat] ** d - lo[flat] ** d) - np.log(d)
    s = ~flat
    scale = sigma / slope[s]
    a, b = lo[s] / scale, hi[s] / scale
    # the tail that keeps the difference's digits: lower below the mode d, upper above
    lower = special.gammainc(d, b) - special.gammainc(d, a)
    upper = special.gammaincc(d, a) - special.gammaincc(d, b)
    diff = np.where(a < d, lower, upper)
    with np.errstate(divide="ignore"):
        out[s] = special.gammaln(d) + d * np.log(scale) + np.log(np.maximum(diff, 0.0))
    return out


@dataclass
class _MedianShells:
    r"""The median envelope around the computed median ``x_hat`` (large ``n·ε``).

    On the shell ``edges[k] < t <= edges[k+1]`` (``t = ρ(x_hat, x)``, the radius of
    the normal coordinates ``c`` at ``x_hat``): ``|grad F(x)| >= g(t) = G[k] +
    lam[k] (t - edges[k]) - g0`` (:meth:`grad_bound`), and ``β_k(t) = offsets[k] +
    slopes[k] t <= g(t) - σ log J(c)`` with ``slopes >= 0`` (``J`` the chart's volume
    density, ``log J <= G_vol t``); ``log_w[k]`` is the log mass of
    ``e^{-β_k(t)/σ} t^{d-1}`` on the shell.

    Why ``g`` is a lower bound (docs/exact.md). For ``x`` in the ball, ``γ`` the
    unit-speed geodesic from ``x_hat`` to ``x`` (in the convex ball), ``u =
    ρ(x_hat, x)`` and ``φ = F∘γ`` (convex): ``|grad F(x)| >= φ'(u)``, ``φ'(0+) >=
    -g0`` with ``g0 = |U_far(x_hat)| + (weight of the records at x_hat)``, and
    ``φ''(u) >= lam[k]`` on shell ``k``: the Hessian comparison gives ``Hess ρ_i >=
    ct(κ_max, ρ_i) (I - w_i w_i^T)`` (``w_i`` the unit direction to record ``i``;
    records that may be crossed count 0 by convexity), ``ct`` decreases, and
    transported back to ``x_hat`` each ``w_i`` has turned by an angle ``<= u
    |Hess ρ_i|`` (``reductions.turn_rate``), which moves ``I - w_i w_i^T`` by at most
    its sine in operator norm: ``lam = λ_min(Σ_S a_i (I - ũ_i ũ_i^T))/n - Σ_S a_i
    min(1, u c_i)/n`` over a subset ``S`` of the records (the best of a few).
    """

    x_hat: np.ndarray
    edges: np.ndarray
    lam: np.ndarray
    G: np.ndarray
    #: ``-φ'(0+)``'s bound per shell (the first differs where records sit exactly at x_hat)
    g0: np.ndarray
    slopes: np.ndarray
    offsets: np.ndarray
    log_w: np.ndarray

    @classmethod
    def build(cls, M, data, sigma, domain):
        d, r = M.dim, domain.radius
        kappa_min, kappa_max = (float(k) for k in M.curvature_bounds)
        with warnings.catch_warnings():
            # an unconverged median is still a valid center: g0 accounts for it
            warnings.simplefilter("ignore", ConvergenceWarning)
            x_hat = frechet_median(M, data, tol=min(1e-3, 0.05 * sigma)).median
        if not domain.distances(x_hat) <= r:  # the geodesics from x_hat stay in the ball
            x_hat = domain.check(x_hat[None], clip=True)[0]
        # x_hat may be any point of the ball: at a record within zero_distance of it,
        # that record itself (below: records exactly at x_hat are not a worst case)
        n = reductions.n_rows(data)
        rows_at = reductions.rows_per_block(M.point_shape, 1)
        best, nearest = np.inf, None  # block by block: memory O(block), as the slopes
        for s in range(0, n, rows_at):
            rho_b = M.dist(x_hat, data[s : s + rows_at])
            j = int(np.argmin(rho_b))
            if rho_b[j] < best:
                best, nearest = float(rho_b[j]), data[s + j]
        if best <= reductions.zero_distance(M) and domain.distances(nearest) <= r:
            x_hat = np.array(nearest, dtype=float)
        u, _, eta, _, _, _ = reductions.median_terms(M, x_hat[None], data)
        # records bit-identical to x_hat: rho(gamma(u), x_i) = u exactly (unit-speed
        # geodesic from x_i itself, within the injectivity radius), so each adds its
        # weight to φ'(u) for every u > 0 instead of the worst case -weight: all records
        # at one point give g = 1, the law itself (issue 43: the cap at sigma < 0.002)
        point = x_hat.reshape(1, -1)

        def at_x_hat(block):
            return np.all(np.asarray(block, dtype=float).reshape(len(block), -1) == point, axis=1)

        exact_weight = sum(int(at_x_hat(data[s : s + rows_at]).sum()) for s in range(0, n, rows_at))
        exact_weight /= n
        # -φ'(0+) <= |U_far| + (the weight within zero_distance, each turning by <= 1).
        # The gradient drops records within zero_distance of x (reductions.median_terms),
        # so records exactly at x_hat count 0 within twice that distance (rounding of
        # rho) and +1 beyond: g0 per shell, the first shell [0, 2 zero_distance] apart
        g0_near = float(M.norm(x_hat, u[0])) + float(eta[0]) - exact_weight
        g0 = g0_near - exact_weight
        near_edge = 2.0 * reductions.zero_distance(M) if exact_weight > 0 else 0.0
        t_max = min(_ball_cover(M, x_hat, domain), M.injectivity_radius)
        qs = (1 / 32, 1 / 16, 1 / 8, 1 / 4, 1 / 2, 1.0)

        def records(m):
            """Per block of records: distances and projections ``(b,)``, ``(b, d, d)``
            at ``x_hat``; blocks of the passes' size for ``m`` shells, so that memory
            is O(block × shells), not O(n × shells) (issue 43 item 13)."""
            rows = reductions.rows_per_block(M.point_shape, m)
            for s in range(0, n, rows):
                block = data[s : s + rows]
                coords = M.log_coords(x_hat, block)  # in the chart at x_hat
                # a record exactly at x_hat is counted in g0 (slope exactly +1): its
                # rounded log (SPD: ~1e-17) must not count it as one about to be crossed
                rho = np.where(at_x_hat(block), 0.0, np.linalg.norm(coords, axis=-1))
                off = rho > reductions.zero_distance(M)
                dirs = np.where(off[:, None], coords / np.where(off, rho, 1.0)[:, None], 0.0)
                yield rho, np.eye(d)[None] - dirs[:, :, None] * dirs[:, None, :], dirs

        def slope_on(hi, cut=0.0):
            """``lam``: a lower bound of ``φ''`` on ``[0, hi]`` (per ``hi``, ``(m,)``),
            from the records farther than ``cut`` from ``x_hat`` only."""
            # the sums over the records, per q, added block by block in record order
            A = np.zeros((len(qs), len(hi), d, d))
            moved = np.zeros((len(qs), len(hi)))
            for rho, proj, _ in records(len(hi)):
                # records that cannot be crossed (and, for a cut, are not near x_hat)
                far = (rho[None, :] > hi[:, None]) & (rho[None, :] > cut)
                # in the ball every record is within 2r of every point
                rho_hi = np.minimum(rho[None, :] + hi[:, None], 2.0 * r)
                a_hi = _h(rho_hi, max(kappa_max, 0.0)) / rho_hi  # ct(κ_max) at the far side
                near_side = np.where(far, rho[None, :] - hi[:, None], 1.0)
                turn = reductions.turn_rate(
                    near_side, np.where(far, rho_hi, 1.0), kappa_min, kappa_max
                )
                move = np.minimum(1.0, hi[:, None] * turn)  # sine of the turned angle, bounded
                # any subset of the records gives a bound (each term is >= 0): those that
                # may turn by q or more are left out, for the best of a few q
                for j, q in enumerate(qs):
                    wa = np.where(far & (move <= q), a_hi, 0.0) / n
                    A[j] += np.einsum("mi,ijk->mjk", wa, proj)
                    moved[j] += (wa * move).sum(1)
            best = np.zeros(len(hi))
            for j in range(len(qs)):
                best = np.maximum(best, np.linalg.eigvalsh(A[j])[:, 0] - moved[j])
            # eigvalsh's rounding is a few ulps of |A|: a relative margin absorbs it
            return np.maximum(best - 1e-12 * np.abs(A[-1]).max(axis=(1, 2)), 0.0)

        zd = reductions.zero_distance(M)

        def near_bounds(cuts, lo):
            """``g0`` per cut and shell ``(c, m)`` of the split bound: ``-φ'(u) <=
            |U_far| - (1/n) Σ_near b_i(u)``, ``U_far`` the mean unit vector at ``x_hat``
            of the records farther than the cut, and for a record near it (within the
            cut) ``φ_i'(u) >= b_i(u) = max(-1, 1 - 2 ρ_i/u)`` (convexity: ``φ_i'(u) >=
            (φ_i(u) - φ_i(0))/u``, and ``φ_i(u) >= u - ρ_i``), at most 0 where the
            gradient may drop it (``u < ρ_i + zero_distance``); ``b_i`` increases with
            ``u``: its value at the shell's inner edge ``lo`` holds on the shell."""
            U = np.zeros((len(cuts), d))
            near = np.zeros((len(cuts), len(lo)))
            with np.errstate(divide="ignore", invalid="ignore"):
                for rho, _, dirs in records(len(lo)):
                    is_far = rho[None, :] > cuts[:, None]
                    U += np.einsum("ci,ij->cj", is_far.astype(float), dirs)
                    close = ~is_far.all(axis=0)
                    if not close.any():
                        continue
                    # an upper bound of the true distance (a record at x_hat: 2 zd)
                    up = rho[close] * (1.0 + 1e-9) + 2.0 * zd
                    b = np.where(lo[:, None] > 0, 1.0 - 2.0 * up[None, :] / lo[:, None], -1.0)
                    b = np.maximum(b, -1.0)
                    # the angle at x between the directions to x_hat and to the record is
                    # acute with sine <= s(ρ_i)/s(u) (CAT(κ_max) comparison, sides < r*)
                    ratio = _sin_k(up, kappa_max)[None, :] / _sin_k(lo, kappa_max)[:, None]
                    b = np.maximum(
                        b,
                        np.where(
                            ratio < 1.0,
                            np.sqrt(np.maximum(0.0, 1.0 - ratio**2)) * (1 - 1e-12),
                            -1.0,
                        ),
                    )
                    b = np.where(lo[:, None] < up[None, :] + zd, np.minimum(b, 0.0), b)
                    near += (~is_far[:, close]).astype(float) @ b.T
            g0_far = np.linalg.norm(U / n, axis=1) * (1.0 + 1e-12)
            return g0_far[:, None] - near / n

        def micro_bound(w_e):
            """``|grad F(x)| >=`` this for ``ρ(x_hat, x) <= 2 zd``: the records exactly
            at ``x_hat`` (weight ``w_e``) are all dropped by the gradient at ``x``
            (bit-identical: one computed distance) or all kept, along ``γ'`` then; the
            records within ``4 zd`` of ``x_hat`` (weight ``w_u``) may be either and
            turn any way; the others ``O`` are kept and their mean unit vector moves
            by at most ``T = Σ_O min(2, 2 zd turn_rate)/n`` from ``U_O(x_hat)``. So
            ``|grad F(x)| >= min(a, max(a - w_e, w_e - |U_O| - T - w_u))`` with ``a =
            |U_O| - T - w_u``."""
            U, T, w_u = np.zeros(d), 0.0, 0.0
            for rho, _, dirs in records(1):
                sure = rho > 4.0 * zd
                U += dirs[sure].sum(axis=0)
                w_u += float(np.count_nonzero(~sure))
                rate = reductions.turn_rate(
                    rho[sure] - 2.0 * zd, rho[sure] + 2.0 * zd, kappa_min, kappa_max
                )
                T += float(np.minimum(2.0, 2.0 * zd * rate).sum())
            u_o = float(np.linalg.norm(U / n))
            # the exact records (rho = 0 above) are w_e; rounding of the sums: 1e-12
            w_u = w_u / n - w_e
            a = u_o * (1.0 - 1e-12) - T / n - w_u - 1e-12
            return min(a, max(a - w_e, w_e - u_o * (1.0 + 1e-12) - T / n - w_u - 1e-12))

        # shells growing geometrically from a quarter of the law's scale at x_hat
        lam0 = float(slope_on(np.full(1, 1e-300))[0])
        step = min(sigma / max(lam0, 1e-12) / 4.0, t_max / 64.0)
        tau = [0.0] if near_edge == 0.0 else [0.0, near_edge]
        while tau[-1] < t_max:
            tau.append(min(tau[-1] + step, t_max))
            step *= 1.3
        tau = np.array(tau)
        lam = slope_on(tau[1:])  # valid on the whole shell: the bound at its outer edge
        G = np.concatenate([[0.0], np.cumsum(lam * np.diff(tau))])[:-1]
        g0s = np.full(len(lam), g0)
        if near_edge > 0.0:
            g0s[0] = g0_near
        best = cls._shell_terms(M, sigma, tau, lam, G, g0s)
        # records near x_hat (a tight cluster: its records are crossed within a few of
        # its radii, and the bound above counts them at their value at x_hat, about 0,
        # where the gradient is about their weight beyond; issue 43): the split bound
        # with each of a few cuts, per shell the tightest (docs/exact.md, "near records")
        # |grad F| >= 0: where a bound is below 0 on a whole shell, 0 is tighter
        zero = np.zeros(len(lam))
        best = _shell_best(best, cls._shell_terms(M, sigma, tau, zero, zero, zero))
        if near_edge > 0.0:
            # the micro-ball [0, 2 zd] around records exactly at x_hat: a bound of the
            # norm itself, not of φ' (docs/exact.md, "records exactly at the median")
            micro = zero.copy()
            micro[0] = -micro_bound(exact_weight)
            best = _shell_best(best, cls._shell_terms(M, sigma, tau, zero, zero, micro))
        cuts = cls._cuts(tau, 2.0 * zd)
        if cuts:
            g0_cuts = near_bounds(np.array(cuts), tau[:-1])
            for cut, g0_c in zip(cuts, g0_cuts, strict=True):
                lam_c = slope_on(tau[1:], cut)
                G_c = np.concatenate([[0.0], np.cumsum(lam_c * np.diff(tau))])[:-1]
                best = _shell_best(best, cls._shell_terms(M, sigma, tau, lam_c, G_c, g0_c))
        return cls(x_hat, tau, *best)

    @staticmethod
    def _cuts(tau, floor):
        """The near records' cuts tried: a few shell edges, each above ``floor``."""
        inner = tau[1:][tau[1:] > floor]
        if len(inner) == 0:
            return []
        return list(np.unique(inner[:: max(1, len(inner) // _SHELL_CUTS)]))

    @staticmethod
    def _shell_terms(M, sigma, tau, lam, G, g0s):
        """``(lam, G, g0, slopes, offsets, log_w)`` of the shells for one lower bound
        ``G + lam (t - tau_k) - g0`` of ``|grad F|`` per shell."""
        d = M.dim
        slopes = lam - sigma * M.log_volume_growth  # J <= e^{G_vol t}
        offsets = G - lam * tau[:-1] - g0s - 1e-12  # the rounding of the computed norms
        # a slope too small for a Gamma law (or negative): the shell's minimum, constant
        flat = slopes * tau[1:] / sigma < 1e-6
        low_end = np.where(slopes < 0.0, tau[1:], tau[:-1])
        offsets = np.where(flat, offsets + slopes * low_end, offsets)
        slopes = np.where(flat, 0.0, slopes)
        log_w = -offsets / sigma + _log_shell_mass(d, slopes, sigma, tau[:-1], tau[1:])
        return lam, G, np.asarray(g0s, float), slopes, offsets, log_w

    def grad_bound(self, t):
        """``g(t) <= |grad F(x)|`` at ``t = ρ(x_hat, x)`` ``(m,)``, ``x`` in the ball."""
        t = np.asarray(t, float)
        k = np.clip(np.searchsorted(self.edges, t, side="left") - 1, 0, len(self.lam) - 1)
        return self.G[k] + self.lam[k] * (t - self.edges[k]) - self.g0[k]

    def log_mass(self, M) -> float:
        """Log of the envelope's integral over the normal coordinates at ``x_hat``."""
        d = M.dim
        sphere = np.log(2.0) + 0.5 * d * np.log(np.pi) - special.gammaln(0.5 * d)
        return float(special.logsumexp(self.log_w)) + sphere

    @property
    def flat_share(self) -> float:
        """The share of the envelope's mass on shells where the bound stopped growing."""
        w = np.exp(self.log_w - special.logsumexp(self.log_w))
        return float(w[self.slopes <= 0.0].sum())

    def draw(self, M, m, sigma, rng):
        """``(c, beta)``: ``m`` normal coordinates at ``x_hat`` and the bound there."""
        p = np.exp(self.log_w - special.logsumexp(self.log_w))
        shell = rng.choice(len(p), size=m, p=p)
        t = np.empty(m)
        d = M.dim
        for k in np.unique(shell):
            at = shell == k
            lo, hi, s = self.edges[k], self.edges[k + 1], self.slopes[k]
            if s > 0:
                t[at] = _gamma_interval(d, sigma / s, lo, hi, int(at.sum()), rng)
            else:
                v = rng.random(int(at.sum()))
                t[at] = np.clip((lo**d + v * (hi**d - lo**d)) ** (1.0 / d), lo, hi)
        c = t[:, None] * _directions(rng, m, d)
        return c, self.offsets[shell] + self.slopes[shell] * t


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


# --- many data sets at once (issue 26 item 1) ------------------------------------------------
def _row_random(rng, R):
    """``(generator, None)`` for one random source shared by the ``R`` rows, or
    ``(None, generators)`` for a sequence of ``R`` sources, one per row."""
    if isinstance(rng, (list, tuple)):
        if len(rng) != R:
            raise ValueError(f"give one random source per data set: {R} expected, got {len(rng)}")
        return None, [as_generator(g) for g in rng]
    return as_generator(rng), None


def _first_accepted(ok, k_rows):
    """Per row (its proposals a segment of ``ok`` of length ``k_rows[i]``, in order):
    whether one was accepted, the flat index of the first one, and the proposals used
    (up to it, or all of the segment)."""
    starts = np.concatenate([[0], np.cumsum(k_rows)[:-1]])
    idx = np.where(ok, np.arange(len(ok)), len(ok))
    first = np.minimum.reduceat(idx, starts)
    has = first < starts + k_rows
    return has, first, np.where(has, first - starts + 1, k_rows)


def _widths(single, accepted, proposed, rounds, cap=64):
    """Proposals per pending row this round. One shared source: from the acceptance so
    far over all rows. One source per row: from the row's own rounds only (2, 4, 8,
    ...), so that what a row draws does not depend on the other rows."""
    if single:
        rate = max((accepted + 0.5) / (proposed + 1.0), 1e-3)
        return np.full(len(rounds), int(min(cap, max(1, np.ceil(1.0 / rate)))))
    return np.minimum(cap, 2 ** (rounds + 1))


def _uniforms(g, gens, rows, k_rows, cols):
    """Uniforms ``(sum(k_rows), cols)`` on [0, 1): from the shared source, or each row's
    block from its own source."""
    if gens is None:
        return g.random((int(k_rows.sum()), cols))
    return np.concatenate([gens[j].random((k, cols)) for j, k in zip(rows, k_rows, strict=True)])


def _row_directions(g, gens, rows, k_rows, d):
    """Uniform directions ``(sum(k_rows), d)`` (normalized standard normals), from the
    shared source or each row's block from its own."""
    if gens is None:
        return _directions(g, int(k_rows.sum()), d)
    return np.concatenate([_directions(gens[j], k, d) for j, k in zip(rows, k_rows, strict=True)])


def _row_coords(M, sigma, g, gens, rows, k_rows, t_max, max_attempts, what):
    """Normal coordinates of the Laplace law with scale ``sigma``, ``k_rows[i]`` for row
    ``rows[i]``, truncated to ``t_max[row]`` (or the largest of them with one source)."""
    if gens is None:
        top = None if t_max is None else float(np.max(t_max[rows]))
        return _laplace_coords(M, sigma, int(k_rows.sum()), g, top, max_attempts, what)[0]
    return np.concatenate(
        [
            _laplace_coords(
                M, sigma, k, gens[j], None if t_max is None else t_max[j], max_attempts, what
            )[0]
            for j, k in zip(rows, k_rows, strict=True)
        ]
    )


def sample_laplace_stack(
    M, footpoints, sigma, rng=None, *, domain=None, max_attempts=DEFAULT_MAX_ATTEMPTS
):
    r"""One exact draw of the manifold Laplace at each of ``R`` footpoints, at once.

    Row ``j`` of the result follows the law of :func:`sample_laplace` at
    ``footpoints[j]`` (size 1), independently of the other rows: the normal
    coordinates of all rows are drawn in one call of the radial sampler (the law is
    isotropic and the same at every footpoint) and mapped through each row's
    exponential chart. Restricted (``domain``): each row proposes from the law
    truncated to ``B_T(η_j)``, ``T = ρ(η_j, m0) + r`` (with one shared random source
    the largest ``T`` of the rows: a ball containing ``B_r(m0)`` for every row, so the
    law kept inside the ball is the same), and keeps its first proposal inside
    ``B_r(m0)``.

    Parameters
    ----------
    M : Manifold
        The manifold, with an exact sampler.
    footpoints : array, shape ``(R, *point_shape)``
        The footpoints ``η_j``.
    sigma : float
        The scale ``σ > 0`` (the same for every row).
    rng : Generator, int, None, or a sequence of them
        Random source: one for all rows, or one per row (a row then draws from its own
        source only, so its value does not depend on the other rows).
    domain : DataDomain, optional
        Restrict each law to ``B_r(m0)``.
    max_attempts : int
        Cap on proposals per row.

    Returns
    -------
    points : ndarray, shape ``(R, *point_shape)``
    proposals : ndarray of int, shape ``(R,)``
        Proposals each row used (1 without ``domain``).

    Examples
    --------
    >>> import pymc_manidp as pmd
    >>> S = pmd.Sphere(dim=2)
    >>> feet = S.exp_coords([0.0, 0.0, 1.0], np.zeros((4, 2)))
    >>> pts, used = sample_laplace_stack(S, feet, 0.05, rng=0)
    >>> pts.shape, used.tolist()
    ((4, 3), [1, 1, 1, 1])
    """
    _check_exact_manifold(M)
    feet = M.validate(footpoints)
    if feet.ndim != len(M.point_shape) + 1:
        raise ValueError(f"footpoints must have shape (R, {M.point_shape}), got {feet.shape}")
    sigma = check_sigma(sigma)
    max_attempts = _check_max_attempts(max_attempts)
    domain = _check_domain(M, domain)
    R = len(feet)
    g, gens = _row_random(rng, R)
    if domain is None:
        c = _row_coords(M, sigma, g, gens, np.arange(R), np.ones(R, int), None, max_attempts, None)
        return _proposal_points(M, feet, c, "the Laplace sampler"), np.ones(R, int)
    what = f"the restricted Laplace on {M} (ball of radius {domain.radius:.6g})"
    t_max = np.array([_ball_cover(M, f, domain) for f in feet])
    out = np.empty_like(feet)
    used, rounds = np.zeros(R, int), np.zeros(R, int)
    pending = np.ones(R, bool)
    accepted = proposed = 0
    while pending.any():
        rows = np.flatnonzero(pending)
        if used[rows].max() >= max_attempts:
            raise ExactSamplingError(
                f"{what}: a data set's draw was not accepted after {max_attempts} "
                f"proposals. {_REMEDY}"
            )
        k_rows = _widths(gens is None, accepted, proposed, rounds[rows])
        rep = np.repeat(rows, k_rows)
        c = _row_coords(M, sigma, g, gens, rows, k_rows, t_max, max_attempts, what)
        x = _proposal_points(M, feet[rep], c, what)
        has, first, n_used = _first_accepted(domain.distances(x) <= domain.radius, k_rows)
        used[rows] += n_used
        rounds[rows] += 1
        out[rows[has]] = x[first[has]]
        pending[rows[has]] = False
        accepted += int(has.sum())
        proposed += int(n_used.sum())
    return out, used


def _stack_grad_norms(M, x, data):
    """``|grad F_j(x_j)| = |(1/n) Σ_i log_{x_j}(x_{ji})|`` for proposals ``x`` ``(m,
    *shape)`` and their data sets ``data`` ``(m, n, *shape)``."""
    g, _ = M.stack_frechet_gradient(x, data)
    return M.norm(x, g)


def _gamma_shells(d, scale, lo, hi, u):
    """``Gamma(d, scale)`` conditioned on ``lo < t <= hi``, elementwise, from uniforms
    ``u`` on [0, 1).

    Inverse CDF: the lower tail (``gammaincinv``) on shells that start at 0, the upper
    tail (``gammainccinv``) on the others, each accurate where its shells lie (the same
    two formulas as :func:`_gamma_truncated` and :func:`_gamma_interval`).
    """
    t = np.empty(len(scale))
    first = lo <= 0.0
    if first.any():
        s, h = scale[first], hi[first]
        p = special.gammainc(d, h / s)
        t[first] = np.minimum(s * special.gammaincinv(d, u[first] * p), h)
    rest = ~first
    if rest.any():
        s, lo_r, hi_r = scale[rest], lo[rest], hi[rest]
        q_lo = special.gammaincc(d, lo_r / s)
        q_hi = np.where(np.isfinite(hi_r), special.gammaincc(d, hi_r / s), 0.0)
        v = q_hi + u[rest] * (q_lo - q_hi)
        t[rest] = np.clip(s * special.gammainccinv(d, v), lo_r, hi_r)
    return t


def sample_kng_stack(M, data, sigma, rng=None, *, n, domain, max_attempts=DEFAULT_MAX_ATTEMPTS):
    r"""One exact draw of KNG (Fréchet mean) for each of ``R`` data sets, at once.

    The data sets are given end to end, ``data[j*n:(j+1)*n]`` the ``j``-th: records
    are checked as records (one pass, named by row; an array this check already
    returned is not checked again). Row ``j`` of the result follows the law of
    :func:`sample_kng` for data set ``j`` (size 1): the same envelope (the computed
    mean ``x̂_j``, from :func:`~pymc_manidp.stats.frechet.frechet_means`, its error
    bound ``e_j``, the shells of ``_kng_shells`` on positively curved spaces, the
    Laplace at ``x̂_j`` with scale ``σ/H`` elsewhere) and the same acceptance ratio
    ``exp(-(|grad F_j(x)| - g_j(t))/σ)``, each row keeping its first accepted
    proposal. What is shared across rows is only the arithmetic: one array pass per
    round of proposals, for all rows still pending. On the shells, ``t`` is drawn by
    the inverse CDF on every shell (the single sampler draws the first shell by plain
    rejection when it holds most of the mass: the same law). Without curvature, the
    envelope's truncation ball is the largest of the pending rows' ``B_T(x̂_j)`` (each
    contains ``B_r(m0)``, outside of which nothing is kept: the same law); with one
    source per row, each row's own.

    Parameters
    ----------
    M : Manifold
        The manifold, with an exact sampler.
    data : array, shape ``(R * n, *point_shape)``
        ``R`` data sets of ``n`` records each, end to end, all inside ``domain``.
    sigma : float
        KNG's scale ``2Δ/ε`` (the same ``n`` for every data set, so the same σ).
    rng : Generator, int, None, or a sequence of them
        Random source: one for all rows, or one per row (a row then draws from its own
        source only, so its value does not depend on the other rows).
    n : int
        Records per data set.
    domain : DataDomain
        The public ball ``B_r(m0)``.
    max_attempts : int
        Cap on proposals per row.

    Returns
    -------
    points : ndarray, shape ``(R, *point_shape)``
    proposals : ndarray of int, shape ``(R,)``
        Envelope proposals each row used (for the curator: they depend on the data).

    Raises
    ------
    ExactSamplingError
        A row hit the cap, or a proposal violated the bound (nothing is released).

    Examples
    --------
    >>> import pymc_manidp as pmd
    >>> S = pmd.Sphere(dim=2)
    >>> dom = pmd.DataDomain(S, [0.0, 0.0, 1.0], np.pi / 8)
    >>> noise = np.random.default_rng(0).normal(size=(3 * 50, 2)) * 0.1
    >>> data = S.exp_coords([0.0, 0.0, 1.0], noise)  # 3 data sets of 50 records
    >>> pts, used = sample_kng_stack(S, data, 0.05, rng=1, n=50, domain=dom)
    >>> pts.shape, bool((used >= 1).all())
    ((3, 3), True)
    """
    _check_exact_manifold(M)
    if domain is None:
        raise ValueError("KNG's law lives on the public ball: pass domain=DataDomain(...)")
    domain = _check_domain(M, domain)
    n = check_positive_int(n, "n")
    data = domain.check(data)
    if len(data) % n:
        raise ValueError(f"{len(data)} records do not split into data sets of n = {n}")
    stack = np.asarray(data).reshape((len(data) // n, n, *M.point_shape))
    return _sample_kng_checked_stack(
        M, stack, check_sigma(sigma), rng, domain, _check_max_attempts(max_attempts)
    )


def _sample_kng_checked_stack(M, stack, sigma, rng, domain, max_attempts):
    """:func:`sample_kng_stack` for a stack already checked against ``domain``."""
    R, n = stack.shape[:2]
    g, gens = _row_random(rng, R)
    r, H, d = domain.radius, domain.curvature_factor, M.dim
    what = f"KNG's exact sampler on {M}"
    res = frechet_means(M, stack, tol=1e-12, atol=1e-3 * sigma * H, warn=False)
    x_hat, g_hat = res.means, res.grad_norms
    out_ball = ~(domain.distances(x_hat) <= r)
    for j in np.flatnonzero(out_ball):  # Lemma 1 needs x_hat in the ball
        x_hat[j] = domain.check(x_hat[j][None], clip=True)[0]
        g_hat[j] = float(_stack_grad_norms(M, x_hat[j][None], stack[j][None])[0])
    # as _KNGEnvelope._build: the space's rounding bound eta enters twice
    e = np.minimum((g_hat + 2.0 * domain.rounding_error) / H, 2.0 * r) + 1e-12 * r
    t_max = np.array([min(_ball_cover(M, x, domain), M.injectivity_radius) for x in x_hat])
    curved = M.curvature_bounds[1] > 0
    if curved:  # the shells of each row, padded to one table (zero weight beyond)
        rho = np.minimum(M.dist(np.expand_dims(x_hat, 1), stack), 2.0 * r)
        shells = []
        for j in range(R):
            rho_j, w_j = rho[j], None
            if n > 4 * 1024:  # as reductions.distance_profile: a histogram's upper edges
                edges = np.linspace(0.0, 2.0 * r, 1024 + 1)
                rho_j, w_j = edges[1:], np.histogram(rho[j], bins=edges)[0] / n
            shells.append(_kng_shells(M, sigma, H, r, rho_j, e[j], t_max[j], rho_weights=w_j))
        K = max(len(s[1]) for s in shells)
        edges = np.full((R, K + 1), np.inf)
        slopes, offsets, cum = np.ones((R, K)), np.zeros((R, K)), np.ones((R, K))
        for j, (ed, sl, of, lw) in enumerate(shells):
            k = len(sl)
            edges[j, : k + 1], slopes[j, :k], offsets[j, :k] = ed, sl, of
            w = np.exp(lw - np.max(lw))
            cum[j, :k] = np.cumsum(w / w.sum())
            cum[j, k - 1 :] = 1.0  # the rounding of the sum must not leave a gap at the top
    used, rounds = np.zeros(R, int), np.zeros(R, int)
    out = np.empty((R, *M.point_shape))
    pending = np.ones(R, bool)
    accepted = proposed = 0
    # proposals per round: each gradient is a pass over its row's n records
    row_cap = max(1, _STACK_LOG_MAPS // (n * int(np.prod(M.point_shape))))
    while pending.any():
        rows = np.flatnonzero(pending)[:row_cap]
        if used[rows].max() >= max_attempts:
            raise ExactSamplingError(
                f"{what}: a data set's draw was not accepted after {max_attempts} "
                f"proposals. {_REMEDY}"
            )
        k_rows = _widths(gens is None, accepted, proposed, rounds[rows])
        if gens is None:  # the round's size stays within the cap
            k_rows = np.minimum(k_rows, max(1, row_cap // len(rows)))
        rep = np.repeat(rows, k_rows)
        m = len(rep)
        if curved:
            # per proposal: shell, radius, the volume step, direction (each row's block
            # from its own source when there is one per row)
            U = _uniforms(g, gens, rows, k_rows, 3)
            # the first shell whose cumulative weight reaches u, u uniform on (0, 1]: a
            # shell of zero weight is never chosen (as rng.choice(p=weights) would not)
            shell = (cum[rep] < (1.0 - U[:, 0])[:, None]).sum(axis=1)
            lo, hi = edges[rep, shell], edges[rep, shell + 1]
            t = _gamma_shells(d, sigma / slopes[rep, shell], lo, hi, U[:, 1])
            ok = U[:, 2] < np.exp(_radial_log_ratio(M, t))
            c = t[:, None] * _row_directions(g, gens, rows, k_rows, d)
            bound = offsets[rep, shell] + slopes[rep, shell] * t
        else:
            c = _row_coords(M, sigma / H, g, gens, rows, k_rows, t_max, max_attempts, what)
            bound = H * (np.linalg.norm(c, axis=-1) - e[rep])
            ok = np.ones(m, bool)
        x = _proposal_points(M, x_hat[rep], c, what)
        ok &= domain.distances(x) <= r
        accept_u = _uniforms(g, gens, rows, k_rows, 1)[:, 0]  # KNG's ratio step
        idx = np.flatnonzero(ok)
        if len(idx):
            gn = _stack_grad_norms(M, x[idx], stack[rep[idx]])
            log_ratio = -(gn - bound[idx]) / sigma
            if np.any(log_ratio > 0):
                raise ExactSamplingError(
                    "a proposal violated the KNG envelope bound (2022 Lemma 1) by "
                    f"{float(log_ratio.max() * sigma):.3g}: a premise (data in the ball, "
                    "r < r*) failed at working precision, so nothing is released"
                )
            ok[idx] = accept_u[idx] < np.exp(log_ratio)
        has, first, n_used = _first_accepted(ok, k_rows)
        used[rows] += n_used
        rounds[rows] += 1
        out[rows[has]] = x[first[has]]
        pending[rows[has]] = False
        accepted += int(has.sum())
        proposed += int(n_used.sum())
    return out, used
