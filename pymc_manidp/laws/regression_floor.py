r"""A proved bound on the chance that the curved-space regression samplers give up (issue 41).

Both rejection samplers of geodesic regression on curved spaces (the joint law on
``TM``, :func:`~pymc_manidp.laws.regression.sample_regression_kng_uniform`, and the
sequential release's slope on one fibre,
:func:`~pymc_manidp.laws.regression_fibre.sample_fibre_kng_uniform`) propose from the
uniform law of the public domain and accept with probability ``exp(-g/σ)``, ``g`` the
gradient norm. A draw that reaches the cap after the data were read publishes a bit no
ε covers; this module bounds the probability of that from public facts only, and the
mechanisms refuse, before any charge and before the responses are read, the parameters
where the bound is above ``2^-64`` (docs/regression.md, "The exact samplers' proved
failure bound", which proves what follows).

The theorem. With ``T = r + R + L`` (``L = X V``) and the Jacobi factors ``A``, ``B`` of
the sensitivity theorem, every residual has norm at most ``T`` on the whole domain, so
``|grad_p E| <= T A`` and ``|grad_v E| <= T X B`` for every data set in the ball. The
acceptance of one proposal is the domain's average of ``exp(-g/σ)``, at least
``a = exp(-G/σ)`` with ``G = T (A^2 + X^2 B^2)^(1/2)`` (joint) or ``G = T X B``
(slope alone), whatever the records; ``s`` draws give up only if fewer than ``s`` of
``K s`` i.i.d. proposals are accepted, which has probability at most
``exp(-K D(1/K || a))`` (Chernoff; ``(1 - a)^K`` for ``s = 1``), as for the median
(:mod:`pymc_manidp.laws.median_floor`).
"""

from __future__ import annotations

import math

from pymc_manidp.laws.median_floor import FailureBound, _check_cap, _log2_chernoff

__all__ = [
    "REGRESSION_FAILURE_LOG2_LIMIT",
    "fibre_flat_log_acceptance",
    "flat_regression_log_acceptance",
    "regression_failure_bound",
    "regression_failure_from_acceptance",
    "regression_gradient_bounds",
    "regression_largest_exponent",
]

#: The largest proved ``log2`` probability that an exact regression release gives up
#: which the mechanisms accept: ``2^-64`` (the median's).
REGRESSION_FAILURE_LOG2_LIMIT = -64.0
#: a relative margin on ``G`` for the rounding of computed gradient norms (a sum of
#: ``n`` terms each a few ulps off: far below 1e-9 of ``G`` for any ``n < 10^6``)
_NORM_MARGIN = 1e-9


def regression_gradient_bounds(
    manifold, *, radius, covariate_bound, slope_bound, footpoint_radius
) -> tuple[float, float]:
    r"""``(G_p, G_v)``: public bounds of ``|grad_p E|`` and ``|grad_v E|`` on the domain.

    For every data set with responses in ``B_r(m)``, covariates ``|x_i| <= X`` and every
    ``(p, v)`` with ``rho(m, p) <= R``, ``|v| <= V``: each residual
    ``rho(Exp_p(x_i v), y_i) <= L + R + r = T`` (triangle inequality, ``L = X V``), and
    the adjoint Jacobi factors are at most ``A`` and ``|x_i| B`` (docs/regression.md,
    Theorem 2's proof), so ``G_p = T A`` and ``G_v = T X B``.

    Examples
    --------
    >>> import pymc_manidp as pmd
    >>> regression_gradient_bounds(pmd.Sphere(dim=2), radius=0.3, covariate_bound=1.0,
    ...                            slope_bound=0.3, footpoint_radius=0.3)
    (0.8999999999999999, 0.8999999999999999)
    """
    r, R = float(radius), float(footpoint_radius)
    X, V = float(covariate_bound), float(slope_bound)
    L = X * V
    kmin = float(manifold.curvature_bounds[0])
    c = math.sqrt(-kmin) if kmin < 0 else 0.0
    A = math.cosh(c * L)
    B = math.sinh(c * L) / (c * L) if c * L > 0 else 1.0
    T = r + R + L
    return T * A, T * X * B


def regression_failure_bound(grad_bound, sigma, max_attempts) -> FailureBound:
    r"""The proved bound on the chance an exact curved-space regression sampler gives up.

    Parameters
    ----------
    grad_bound : float
        ``G``: a public bound of the gradient norm the sampler accepts by, over the
        domain and every data set in the ball (:func:`regression_gradient_bounds`).
    sigma : float
        KNG's scale.
    max_attempts : int
        The cap ``K``: proposals (gradient evaluations) per draw.

    Returns
    -------
    FailureBound

    Examples
    --------
    >>> b = regression_failure_bound(1.0, 0.5, 10_000)  # a = e^-2
    >>> b.log2_failure < -1000
    True
    >>> regression_failure_bound(1.0, 0.01, 10_000).log2_failure  # a = e^-100: none
    0.0
    """
    # a cap beyond 2^62 only lowers the bound: clamp it (and its float conversion)
    cap = min(_check_cap(max_attempts), 2**62)
    sigma, G = float(sigma), float(grad_bound)
    if not (sigma > 0 and math.isfinite(sigma)):
        raise ValueError(f"sigma must be a positive finite float, got {sigma!r}")
    if not (G >= 0 and math.isfinite(G)):
        raise ValueError(f"grad_bound must be a finite float >= 0, got {G!r}")
    log_a = min(-G * (1.0 + _NORM_MARGIN) / sigma, 0.0)
    return FailureBound(_log2_chernoff(log_a, cap), log_a, cap)


def regression_largest_exponent(max_attempts, limit=REGRESSION_FAILURE_LOG2_LIMIT) -> float:
    r"""The largest ``G/σ`` whose proved failure bound at cap ``K`` is at most ``2^limit``.

    The bound increases with ``G/σ``; bisection to a relative 1e-12, rounded down. A
    mechanism's largest ``n ε`` is this times ``2 n Δ / G`` (σ = 2Δ/ε, and ``n Δ``
    does not depend on ``n``).

    Examples
    --------
    >>> round(regression_largest_exponent(10_000), 3)  # a = e^-5.316 = 49/K
    5.316
    """
    cap = _check_cap(max_attempts)

    def ok(t):
        return regression_failure_bound(1.0, 1.0 / t, cap).log2_failure <= limit

    lo, hi = 1e-12, 1.0
    if not ok(lo):
        return 0.0
    while ok(hi):
        lo, hi = hi, 2.0 * hi
    while hi - lo > 1e-12 * hi:
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if ok(mid) else (lo, mid)
    return lo


# --- the flat K-norm samplers without a compact footpoint domain ------------------------
def _log_ball_hit(scale, reach, slope_bound, dim) -> float:
    r"""``log`` of a lower bound of :math:`\int_{B_V} e^{-|v - c|/s}\,dv \,/\,
    (\Gamma(d)\,\omega_{d-1} s^d)` over every centre ``|c| <= reach``.

    For ``0 < h <= V`` the ball ``B_h(w)``, ``w = c min(1, (V - h)/|c|)``, lies in
    ``B_V`` and within ``(reach - V + h)_+`` of ``c``, so the ratio is at least
    ``(h/s)^d exp(-(h + (reach - V + h)_+)/s) / d!`` (``vol B_h = omega_{d-1} h^d/d``);
    every ``h`` gives a bound, and the best of the two stationary points and the
    kinks is taken (docs/regression.md, "The flat samplers' acceptance floor").
    """
    s, rho, V, d = float(scale), float(reach), float(slope_bound), int(dim)
    if not (s > 0 and math.isfinite(s) and math.isfinite(rho)):
        return -math.inf
    cands = {V, min(V, d * s), min(V, max(d * s / 2, V - rho))}
    if V > rho:
        cands.add(V - rho)
    best = -math.inf
    for h in cands:
        if 0 < h <= V:
            far = max(rho - V + h, 0.0)
            best = max(best, d * math.log(h / s) - (h + far) / s - math.lgamma(d + 1))
    return best


def _log_omega(k: int) -> float:
    """``log`` of the area of the unit sphere ``S^{k-1}`` in ``R^k``."""
    return math.log(2.0) + (k / 2) * math.log(math.pi) - math.lgamma(k / 2)


def _margin(log_a: float) -> float:
    """Outward rounding of a computed log acceptance (a relative 1e-9; the covariate
    moments are two-pass sums, off by far less for any ``n < 10^6``)."""
    return min(log_a - 1e-9 * (abs(log_a) + 1.0), 0.0)


def _moments(x):
    x = [float(t) for t in x]
    n = len(x)
    mean = math.fsum(x) / n
    var = math.fsum((t - mean) ** 2 for t in x) / n
    m2 = math.fsum(t * t for t in x) / n
    # shrink the spreads and grow |mean| by 1e-9: each is a bound the proof may use
    return abs(mean) * (1 + 1e-9), var * (1 - 1e-9), m2 * (1 - 1e-9)


def flat_regression_log_acceptance(x, *, radius, slope_bound, sigma, dim) -> float:
    r"""``log`` of a proved least acceptance of the flat joint K-norm sampler with
    footpoints free in ``R^d`` (no footpoint_radius): public, from the covariates.

    With ``u = p - (ȳ - x̄ v)``: ``grad_p E = u`` and ``grad_v E = var(x)(v - v̂) + x̄ u``,
    ``v̂ = cov(x, y)/var(x)``, ``|v̂| <= r/sqrt(var x)`` (Cauchy-Schwarz, responses in
    ``B_r(m)``). So ``|grad E| <= sqrt(1 + x̄^2)|u| + var(x)|v - v̂|``; integrating
    ``u`` over ``R^d`` and ``v`` over ``B_V`` against the K-norm's total mass
    ``Gamma(2d) omega_{2d-1} sigma^{2d} / var(x)^d`` (docs/regression.md, "The flat
    samplers' acceptance floor"), the acceptance is at least
    ``k_d (1 + x̄^2)^{-d/2} * hit``, ``k_d = Gamma(d)^2 omega_{d-1}^2 /
    (Gamma(2d) omega_{2d-1})`` and ``hit`` the slope-ball bound of scale
    ``sigma/var(x)`` and reach ``r/sqrt(var x)``.

    Examples
    --------
    >>> import numpy as np
    >>> x = np.linspace(-1, 1, 10)
    >>> round(flat_regression_log_acceptance(x, radius=1.0, slope_bound=2.0, sigma=0.1,
    ...                                      dim=2), 4)
    -2.4204
    """
    xbar, var, _ = _moments(x)
    if not var > 0:
        return -math.inf
    d = int(dim)
    log_k = 2 * (math.lgamma(d) + _log_omega(d)) - math.lgamma(2 * d) - _log_omega(2 * d)
    hit = _log_ball_hit(float(sigma) / var, float(radius) / math.sqrt(var), slope_bound, d)
    return _margin(log_k - 0.5 * d * math.log1p(xbar * xbar) + hit)


def fibre_flat_log_acceptance(x, *, radius, slope_bound, sigma, dim) -> float:
    r"""``log`` of a proved least acceptance of the sequential release's flat slope
    sampler (the K-norm on one fibre): public, from the covariates.

    At a footpoint ``p̃`` in ``B_r(m)``: ``grad_v E = m2 (v - v*)``, ``m2 = mean(x^2)``,
    ``|v*| = |mean(x (y - p̃))|/m2 <= 2 r / sqrt(m2)`` (Cauchy-Schwarz,
    ``|y - p̃| <= 2r``); the K-norm of scale ``sigma/m2`` lands in ``B_V`` with at
    least the slope-ball bound (docs/regression.md, "The flat samplers' acceptance
    floor").

    Examples
    --------
    >>> import numpy as np
    >>> x = np.linspace(-1, 1, 10)
    >>> round(fibre_flat_log_acceptance(x, radius=0.5, slope_bound=2.0, sigma=0.1, dim=2), 4)
    -1.3218
    """
    _, _, m2 = _moments(x)
    if not m2 > 0:
        return -math.inf
    hit = _log_ball_hit(float(sigma) / m2, 2.0 * float(radius) / math.sqrt(m2), slope_bound, dim)
    return _margin(hit)


def regression_failure_from_acceptance(log_acceptance, max_attempts) -> FailureBound:
    r"""The failure bound of a sampler whose proposals are accepted with probability at
    least ``exp(log_acceptance)``: ``exp(-K D(1/K || a))`` as in
    :func:`regression_failure_bound`.

    Examples
    --------
    >>> regression_failure_from_acceptance(-2.0, 10_000).log2_failure < -1000
    True
    """
    cap = min(_check_cap(max_attempts), 2**62)
    log_a = min(float(log_acceptance), 0.0)
    if math.isnan(log_a):
        raise ValueError("log_acceptance must be a float <= 0, got nan")
    if log_a == -math.inf:
        return FailureBound(0.0, log_a, cap)
    return FailureBound(_log2_chernoff(log_a, cap), log_a, cap)
