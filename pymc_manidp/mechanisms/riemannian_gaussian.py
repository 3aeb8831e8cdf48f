r"""The Riemannian Gaussian mechanism of Jiang et al. (NeurIPS 2023) on S^d, as a
comparison mechanism (issue 39, item 4; docs/tangent.md, "The Riemannian Gaussian").

The release draws y with density w.r.t. the volume of S^d

.. math:: p(y \mid \bar x) \propto \exp\big(-\rho(\bar x, y)^2 / (2\sigma^2)\big),

whose normalizer does not depend on x̄ (S^d is homogeneous). Drawn exactly: the
distance s = ρ(x̄, y) has density ∝ e^{−s²/2σ²} sin^{d−1}s on [0, π] (by rejection,
below), the direction is uniform in T_x̄S^d, and y = Exp_x̄(s w).

**What is charged: proved bounds only.** For neighbours with means η₁, η₂ at distance
t ≤ Δ, the privacy loss is L(y) = (ρ(η₂, y)² − ρ(η₁, y)²)/(2σ²), and
|ρ₂² − ρ₁²| = |ρ₂ − ρ₁|(ρ₁ + ρ₂) ≤ t (2π − t) because |ρ₂ − ρ₁| ≤ t and, with −y
the antipode, ρ₁ + ρ₂ = 2π − ρ(−y, η₁) − ρ(−y, η₂) ≤ 2π − t. So the mechanism is
ε-DP with ε = Δ(2π − Δ)/(2σ²) (t(2π − t) increases on [0, π]), attained at y = −η₁.
With δ > 0, the loss is also at most U(s) = min(Δ(2s + Δ), Δ(2π − Δ))/(2σ²) with
s = ρ(η₁, y) (as ρ₂ ≤ s + Δ), so δ(ε) ≤ ∫ f(s)(1 − e^{ε−U(s)})₊ ds over the radial law
f, bounded above rigorously by a Riemann sum (``proved_delta``). σ is calibrated
from these bounds. Jiang et al.'s μ-GDP is computed there by MCMC, not proved;
here the privacy profile δ(ε) is computed deterministically as a two-dimensional
integral (:func:`estimated_profile`) and is **estimated**, never charged.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import roots_legendre

from pymc_manidp._validation import check_nonnegative_real, check_positive_real
from pymc_manidp.laws.exact import ExactDraws
from pymc_manidp.mechanisms.base import Mechanism, converged_mean

__all__ = [
    "RG_NOTE",
    "RiemannianGaussianMechanism",
    "estimated_mu",
    "estimated_profile",
    "proved_delta",
    "proved_epsilon",
    "radial_draws",
]


def proved_epsilon(sensitivity: float, sigma: float) -> float:
    r"""The pure ε the Riemannian Gaussian on S^d is proved to have.

    ``Delta (2 pi - Delta)/(2 sigma^2)`` (module docstring), for ``Delta <= pi``.

    Parameters
    ----------
    sensitivity : float
        Δ, the geodesic sensitivity of the mean, in ``(0, pi]``.
    sigma : float
        ``sigma > 0``.

    Returns
    -------
    float
        ε.

    Examples
    --------
    >>> round(proved_epsilon(0.1, 1.0), 6)  # 0.1 (2 pi - 0.1)/2
    0.309159
    """
    sensitivity = check_positive_real(sensitivity, "sensitivity")
    sigma = check_positive_real(sigma, "sigma")
    if sensitivity > math.pi:
        raise ValueError(f"sensitivity must be at most pi on S^d, got {sensitivity!r}")
    return sensitivity * (2 * math.pi - sensitivity) / (2 * sigma * sigma)


#: cells of the proved bound's Riemann sum (vectorized: a few ms per evaluation)
BOUND_CELLS = 20000
#: relative slack on the bound for the rounding of exp and sin (each ~1e-16)
BOUND_SLACK = 1e-9


def proved_delta(dim: int, sigma: float, sensitivity: float, epsilon: float) -> float:
    r"""A **proved** upper bound on δ(ε) of the Riemannian Gaussian on S^d.

    For means at distance at most ``sensitivity`` (Δ): docs/tangent.md, "The
    Riemannian Gaussian".

    With s = ρ(η₁, y), the loss is at most U(s) = min(Δ(2s + Δ), Δ(2π − Δ))/(2σ²)
    (ρ₂ ≤ s + Δ, and the pure bound), and (1 − e^{ε−L})₊ increases in L, so
    δ(ε) ≤ ∫ f(s) (1 − e^{ε−U(s)})₊ ds with f the radial law. That one-dimensional
    integral is bounded above rigorously: on each of :data:`BOUND_CELLS` cells the
    nondecreasing factor is taken at the right end, the unnormalized density
    e^{−s²/2σ²} sin^{d−1}s at its largest (numerator) and smallest (normalizer) on
    the cell (both factors are monotone on a cell that does not straddle π/2), the
    mass past ``sigma (sqrt(d) + 40)`` bounded by the χ_d tail (sin s ≤ s), and the
    result raised by :data:`BOUND_SLACK`.

    Parameters
    ----------
    dim : int
        d, the dimension of S^d.
    sigma : float
        ``sigma > 0``.
    sensitivity : float
        Δ in ``(0, pi]``.
    epsilon : float
        ``eps >= 0``.

    Returns
    -------
    float
        An upper bound on δ(ε), in ``[0, 1]``.

    Examples
    --------
    >>> b = proved_delta(2, 0.3, 0.05, 1.0)
    >>> 0 < b < 1e-6
    True
    """
    from scipy.special import gammaln
    from scipy.stats import chi

    d, sigma, D, eps = int(dim), float(sigma), float(sensitivity), float(epsilon)
    if not (0 < D <= math.pi and sigma > 0 and eps >= 0 and d >= 1):
        raise ValueError("proved_delta needs 0 < sensitivity <= pi, sigma > 0, epsilon >= 0")
    top = min(math.pi, sigma * (math.sqrt(d) + 40.0))
    edges = np.linspace(0.0, top, BOUND_CELLS + 1)
    if top > math.pi / 2:  # no cell straddles pi/2, where sin turns
        edges = np.unique(np.concatenate([edges, [math.pi / 2]]))
    a, b = edges[:-1], edges[1:]
    width = b - a
    sa, sb = np.sin(a), np.sin(b)
    s_max = np.where(b <= math.pi / 2, sb, np.where(a >= math.pi / 2, sa, 1.0))
    s_min = np.minimum(sa, sb)
    two_s2 = 2 * sigma * sigma
    with np.errstate(under="ignore"):
        g_max = np.exp(-(a * a) / two_s2) * s_max ** (d - 1) * width
        g_min = np.exp(-(b * b) / two_s2) * s_min ** (d - 1) * width
    loss = np.minimum(D * (2 * b + D), D * (2 * math.pi - D)) / two_s2
    h = np.clip(-np.expm1(eps - loss), 0.0, 1.0)
    numerator = float(np.sum(h * g_max))
    if top < math.pi:  # the mass past top: at most the chi_d tail (sin s <= s), h <= 1
        log_norm = d * math.log(sigma) + (d / 2 - 1) * math.log(2) + float(gammaln(d / 2))
        numerator += math.exp(log_norm) * float(chi.sf(top / sigma, d)) + 1e-300
    z = float(np.sum(g_min))
    if not z > 0:
        return 1.0
    return min(1.0, numerator / z * (1 + BOUND_SLACK))


def radial_draws(dim: int, sigma: float, size: int, rng) -> np.ndarray:
    r"""``size`` exact draws of s in [0, π] with density ∝ e^{−s²/2σ²} sin^{d−1}s.

    Rejection (exact): for σ < 2 the proposal is σ·χ_d (density ∝ s^{d−1}e^{−s²/2σ²}),
    kept when s ≤ π with probability (sin s/s)^{d−1} ≤ 1; for σ ≥ 2 it is the distance
    of a uniform point of S^d (density ∝ sin^{d−1}s), kept with probability
    e^{−s²/2σ²} ≥ e^{−π²/8}. Both accept at least about 0.04 of proposals.

    Parameters
    ----------
    dim : int
        d.
    sigma : float
        ``sigma > 0``.
    size : int
        The number of draws.
    rng : numpy.random.Generator
        The random source.

    Returns
    -------
    numpy.ndarray
        ``size`` distances in ``[0, pi]``.
    """
    out = np.empty(0)
    while out.size < size:
        m = 2 * (size - out.size) + 16
        if sigma < 2:
            s = sigma * np.sqrt(rng.chisquare(dim, size=m))
            with np.errstate(invalid="ignore", divide="ignore"):
                ratio = np.where(s > 0, np.sin(s) / s, 1.0)
            keep = (s <= math.pi) & (rng.random(m) < np.clip(ratio, 0, 1) ** (dim - 1))
        else:
            z = rng.standard_normal((m, dim + 1))
            s = np.arccos(np.clip(z[:, 0] / np.linalg.norm(z, axis=1), -1.0, 1.0))
            keep = rng.random(m) < np.exp(-(s * s) / (2 * sigma * sigma))
        out = np.concatenate([out, s[keep]])
    return out[:size]


def _nodes(k, a, b):
    x, w = roots_legendre(k)
    return 0.5 * (b - a) * x + 0.5 * (b + a), 0.5 * (b - a) * w


def estimated_profile(dim, sigma, distance, epsilons, *, nodes=(600, 300)) -> np.ndarray:
    r"""**Estimated** δ(ε) of the Riemannian Gaussian on S^d for two means.

    At ``distance`` t: E_{y∼P₁}[(1 − e^{ε − L(y)})₊], a two-dimensional integral over
    s = ρ(η₁, y) (weight e^{−s²/2σ²} sin^{d−1}s) and the angle φ at η₁ between y and
    η₂ (weight sin^{d−2}φ), with cos ρ(η₂, y) = cos t cos s + sin t sin s cos φ.

    Deterministic (Gauss–Legendre with ``nodes``), but not a bound: the integrand has a
    kink where L = ε, and the worst t ≤ Δ is assumed to be Δ. Never charged.

    Parameters
    ----------
    dim : int
        d >= 2.
    sigma : float
        ``sigma > 0``.
    distance : float
        t, the distance between the two means.
    epsilons : array_like
        The ε at which to evaluate.
    nodes : tuple of int, default (600, 300)
        Gauss–Legendre nodes in s and φ.

    Returns
    -------
    numpy.ndarray
        δ̂(ε) for each ε (estimated).
    """
    dim = int(dim)
    if dim < 2:
        raise ValueError(f"dim must be >= 2, got {dim}")
    s, ws = _nodes(nodes[0], 0.0, math.pi)
    phi, wp = _nodes(nodes[1], 0.0, math.pi)
    radial = ws * np.exp(-(s * s) / (2 * sigma * sigma)) * np.sin(s) ** (dim - 1)
    angular = wp * np.sin(phi) ** (dim - 2)
    radial, angular = radial / radial.sum(), angular / angular.sum()
    cos2 = np.cos(distance) * np.cos(s)[:, None] + np.sin(distance) * np.sin(s)[:, None] * np.cos(
        phi
    )
    rho2 = np.arccos(np.clip(cos2, -1.0, 1.0))
    loss = (rho2**2 - (s**2)[:, None]) / (2 * sigma * sigma)
    weight = radial[:, None] * angular[None, :]
    eps = np.atleast_1d(np.asarray(epsilons, dtype=float))
    return np.array([np.sum(weight * np.clip(-np.expm1(e - loss), 0, None)) for e in eps])


def estimated_mu(dim, sigma, distance, epsilons=None) -> float:
    """**Estimated** GDP μ of the Riemannian Gaussian on S^d; never charged.

    The largest μ whose Gaussian δ(ε) reaches :func:`estimated_profile` on the ε grid
    (Jiang et al.'s quantity, computed by quadrature instead of MCMC).

    Parameters
    ----------
    dim : int
        d >= 2.
    sigma : float
        ``sigma > 0``.
    distance : float
        t, the distance between the two means.
    epsilons : array_like, optional
        The ε grid (default 61 points in ``[0, 6]``).

    Returns
    -------
    float
        μ̂ (estimated).
    """
    from pymc_manidp.stats.gaussian import gaussian_delta

    if epsilons is None:
        epsilons = np.linspace(0.0, 6.0, 61)
    deltas = estimated_profile(dim, sigma, distance, epsilons)
    best = 0.0
    for e, d in zip(epsilons, deltas, strict=True):
        if d <= 0:
            continue
        lo, hi = 1e-9, 50.0
        for _ in range(80):
            mid = 0.5 * (lo + hi)
            if gaussian_delta(e, mid) < d:
                lo = mid
            else:
                hi = mid
        best = max(best, hi)
    return best


RG_NOTE = (
    "(epsilon, delta)-DP by a proved bound on the Riemannian Gaussian's privacy profile "
    "on S^d (docs/tangent.md, 'The Riemannian Gaussian': the loss is at most "
    "min(Delta(2s + Delta), Delta(2 pi - Delta))/(2 sigma^2), integrated over the exact "
    "radial law with a rigorous Riemann bound); Jiang et al.'s GDP mu is estimated, not "
    "charged; drawn exactly, without MCMC"
)


class RiemannianGaussianMechanism(Mechanism):
    r"""Release a private Fréchet mean on S^d with the Riemannian Gaussian (Jiang et al.).

    Calibrated and charged by **proved** bounds only (Jiang et al. 2023's density).

    ``delta = 0``: pure ε-DP with σ = sqrt(Δ(2π − Δ)/(2ε)) (``proved_epsilon``).
    ``delta > 0``: the smallest σ (to 1e-4 relative, by bisection) at which
    ``proved_delta`` is at most δ, or the pure σ if smaller; the release is
    (ε, δ)-DP, δ proved. :meth:`estimated_mu` gives the GDP μ of Jiang et al.'s
    accounting by quadrature: **estimated**, never charged.

    Parameters
    ----------
    manifold : Sphere
        S^d, d >= 2.
    epsilon : float
        ``eps > 0``.
    center : array_like, shape ``(d + 1,)``
        The public ball's center ``m0``.
    radius : float
        The public ball's radius ``r`` (``0 < r < r*``).
    delta : float, default 0.0
        0, or ``1e-300 <= delta < 1``.
    grad_tol : float, optional
        The Fréchet mean's tolerance on ``|grad F|`` (default ``1e-9 r``).

    Examples
    --------
    >>> import numpy as np
    >>> import pymc_manidp as pmd
    >>> mech = pmd.RiemannianGaussianMechanism(pmd.Sphere(dim=2), epsilon=1.0,
    ...                                        center=[0, 0, 1.0], radius=np.pi / 8)
    >>> proved_epsilon(mech.sensitivity(100), mech.sigma(100)) <= 1.0
    True
    """

    name = "Riemannian Gaussian"
    restricted = False
    mcmc_law = None

    def __init__(self, manifold, *, epsilon, center, radius, delta=0.0, grad_tol=None):
        from pymc_manidp.stats.gaussian import check_gaussian_delta

        # the privacy bounds below use the unit sphere's diameter pi (Delta (2 pi - Delta)
        # and the radial law sin^(d-1)): ask for that space by its geometry, not its class,
        # so a sphere of another radius (diameter pi R) is refused, not under-calibrated
        if not (
            tuple(manifold.curvature_bounds) == (1.0, 1.0)
            and manifold.injectivity_radius == math.pi
            and manifold.homogeneous
            and manifold.volume_is_radial
        ):
            raise TypeError(
                "the Riemannian Gaussian is built on the unit sphere S^d only (its bounds use "
                "the diameter pi and its normalizer is free of the mean there), got "
                f"{manifold!r}: use pmd.Sphere(dim) with radius 1, or "
                "pmd.TangentGaussianMechanism"
            )
        if isinstance(delta, bool):
            raise TypeError("delta must be a real number, got bool")
        self.delta = 0.0 if delta == 0 else check_gaussian_delta(delta)
        super().__init__(manifold, epsilon=epsilon, center=center, radius=radius)
        if self.manifold.dim < 2:
            raise ValueError("the Riemannian Gaussian needs S^d with d >= 2: use dim >= 2")
        self.grad_tol = (
            1e-9 * self.domain.radius
            if grad_tol is None
            else check_nonnegative_real(grad_tol, "grad_tol")
        )
        self._sigmas: dict[int, float] = {}

    def sensitivity(self, n: int) -> float:
        """Δ of the Fréchet mean widened by the solver's tolerance (as the Laplace)."""
        return self.domain.laplace_sensitivity(n, self.grad_tol)

    def sigma(self, n: int) -> float:
        """The smallest σ found whose proved bound is (ε, δ) (class docstring)."""
        if n not in self._sigmas:
            self._sigmas[n] = self._checked_sigma(self._calibrate(self.sensitivity(n)))
        return self._sigmas[n]

    def _calibrate(self, sens: float) -> float:
        if not sens < math.pi:
            raise ValueError(
                f"the sensitivity {sens:.6g} is not below pi: use more records or a smaller radius"
            )
        pure = math.sqrt(sens * (2 * math.pi - sens) / (2 * self.epsilon)) * (1 + 1e-12)
        if self.delta == 0:
            return pure
        d, eps, target = self.manifold.dim, self.epsilon, self.delta * (1 - 1e-7)

        def ok(sigma):
            return proved_delta(d, sigma, sens, eps) <= target

        hi = sens
        while not ok(hi):
            hi *= 2
            if hi >= pure:
                return pure
        lo = hi / 2
        while ok(lo) and lo > 1e-300:
            lo, hi = lo / 2, lo
        while hi - lo > 1e-4 * hi:
            mid = 0.5 * (lo + hi)
            lo, hi = (lo, mid) if ok(mid) else (mid, hi)
        return min(hi, pure)  # hi verified: proved_delta(hi) <= delta

    @property
    def planned_charge(self) -> tuple[float, float]:
        """``(epsilon, delta)``, an (ε, δ) charge (not a Gaussian one: no μ is proved)."""
        return (self.epsilon, self.delta)

    def _charge_terms(self, budget, delta, is_mcmc, estimate_delta, sampler):
        budget, _basis, _charged = super()._charge_terms(
            budget, delta, is_mcmc, estimate_delta, sampler
        )
        if budget is None:
            return None, None, None
        return budget, "proved", self.delta

    def _record(self, value, cal, sampler, notes=(), validated=False, **fields):
        extra = {} if self.delta == 0 else {"proved_delta": self.delta, "privacy_note": RG_NOTE}
        return super()._record(value, cal, sampler, notes, validated, **extra, **fields)

    def exact_draws(self, data, sigma, size, rng):
        """``size`` exact draws for checked data: the radial law by rejection, a uniform
        direction, ``Exp_x_bar``."""
        M = self.manifold
        mean = converged_mean(M, self.domain, data, self.grad_tol)
        s = radial_draws(M.dim, sigma, size, rng)
        w = rng.standard_normal((size, M.dim))
        w /= np.linalg.norm(w, axis=1, keepdims=True)
        points = M.exp_coords(mean, s[:, None] * w)
        return ExactDraws(points=np.asarray(points), proposals=size, info={})

    def estimated_mu(self, n: int) -> float:
        """**Estimated** μ-GDP at Δ for ``n`` records (quadrature; never charged)."""
        return estimated_mu(self.manifold.dim, self.sigma(n), self.sensitivity(n))
