r"""KNG on the Fréchet mean, exactly (:func:`sample_kng`): rejection from ``e^{-g(t)/σ}``
around the computed mean, ``g`` a piecewise-linear lower bound of ``|grad F|`` on shells
(``_kng_shells``, a local form of 2022 Lemma 1), and the pieces the median sampler
shares (the checked arguments, the batch sizes).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np
from scipy import special

from pymc_manidp._validation import check_sigma
from pymc_manidp.laws.exact.laplace import _laplace_coords, _radial_log_ratio
from pymc_manidp.laws.exact.rejection import (
    _DASK_BATCH,
    _KNG_BATCH_LOG_MAPS,
    _REMEDY,
    DEFAULT_MAX_ATTEMPTS,
    ExactDraws,
    ExactSamplingError,
    _ball_cover,
    _check_domain,
    _check_exact_manifold,
    _check_max_attempts,
    _check_size,
    _directions,
    _gamma_truncated,
    _proposal_points,
    _rejection,
)
from pymc_manidp.rng import as_generator
from pymc_manidp.stats import reductions
from pymc_manidp.stats.domain import DataDomain
from pymc_manidp.stats.frechet import ConvergenceWarning, frechet_mean


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
