r"""The analytic Gaussian mechanism's calibration (Balle & Wang 2018, Thm 8).

Adding ``N(0, sigma^2 I)`` to a statistic of ℓ2 sensitivity ``Delta`` is
(ε, δ)-DP **if and only if**

.. math:: \Phi\Big(\frac{\mu}{2} - \frac{\varepsilon}{\mu}\Big)
          - e^{\varepsilon}\,\Phi\Big(-\frac{\mu}{2} - \frac{\varepsilon}{\mu}\Big)
          \le \delta, \qquad \mu = \Delta/\sigma,

and the left side is ``delta(eps)`` of μ-GDP (Dong, Roth & Su 2022, Cor. 2.13): one
function serves both. It increases with μ, so the largest admissible μ is found by
bisection; ``sigma = Delta/mu``. docs/tangent.md states the facts and their sources.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import erfcx, log_ndtr

from pymc_manidp._validation import check_positive_real

__all__ = [
    "DELTA_MARGIN",
    "MIN_DELTA",
    "READ_MARGIN",
    "check_gaussian_delta",
    "compose_mu",
    "gaussian_delta",
    "gaussian_mu",
    "gaussian_sigma",
    "gdp_epsilon",
]

_SQRT2 = math.sqrt(2.0)
#: log of the smallest positive float (5e-324): a probability below it is 0 in floats
_LOG_SMALLEST = math.log(5e-324)
_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)
#: The relative margin the calibration keeps below the target δ: the computed
#: ``gaussian_delta`` is accurate to about 1e-12 relative down to δ = 1e-300
#: (tests/stats/test_gaussian_calibration.py against 60-digit mpmath), so a μ whose
#: computed δ is at most ``(1 - DELTA_MARGIN) delta`` has a true δ below ``delta``.
DELTA_MARGIN = 1e-7
#: The margin :func:`gdp_epsilon` keeps when it reads a composed μ back as ε: half the
#: calibration's, still far above the 1e-12 accuracy (so the ε read is an upper
#: bound), so that what was calibrated at exactly (ε, δ) and composed with μ rounded up
#: by a few ulps (:func:`compose_mu`) reads as at most ε: with the same margin a plan cut
#: exactly at its budget read ε = 1.0000000000000007 and was refused.
READ_MARGIN = DELTA_MARGIN / 2


#: The smallest δ calibrated: below it δ(μ) is a subnormal float, with too few bits
#: for the margin ``DELTA_MARGIN`` to mean anything.
MIN_DELTA = 1e-300


def check_gaussian_delta(delta) -> float:
    """Return ``delta`` as a float if it is a real number in ``[1e-300, 1)``."""
    delta = check_positive_real(delta, "delta")
    if not MIN_DELTA <= delta < 1:
        raise ValueError(
            f"delta must be in [{MIN_DELTA:g}, 1), got {delta!r}: use e.g. delta=1e-6 "
            "(below 1e-300 the calibration's floats are subnormal)"
        )
    return delta


def gaussian_delta(epsilon: float, mu: float) -> float:
    r"""The smallest δ for which μ-GDP noise is (ε, δ)-DP (Balle & Wang 2018, Thm 8).

    Computed as :math:`\Phi(a)\,(1 - e^{\varepsilon + \log\Phi(b) - \log\Phi(a)})` with
    ``a = mu/2 - eps/mu``, ``b = -mu/2 - eps/mu``, the logarithms through
    ``scipy.special.erfcx`` (``a < 0``) or ``log_ndtr``: both terms of the difference
    can be far below the smallest float and agree in most digits (small μ); their
    quotient is what matters.

    Parameters
    ----------
    epsilon : float
        ``eps >= 0``.
    mu : float
        ``Delta/sigma > 0``.

    Returns
    -------
    float
        δ in ``[0, 1)``.

    Examples
    --------
    >>> round(gaussian_delta(1.0, 1.0), 6)  # Dong, Roth & Su's 1-GDP at eps = 1
    0.126937
    """
    epsilon = float(epsilon)
    mu = check_positive_real(mu, "mu")
    if not (math.isfinite(epsilon) and epsilon >= 0):
        raise ValueError(f"epsilon must be a finite number >= 0, got {epsilon!r}")
    a = mu / 2 - epsilon / mu
    b = -mu / 2 - epsilon / mu
    if math.isinf(a):  # eps/mu past the largest float: Phi(a) = 0, and so is delta
        return 0.0
    if a < 0:
        # Phi(x) = erfc(-x/sqrt 2)/2 = e^{-x^2/2} erfcx(-x/sqrt 2)/2 and b^2 - a^2 = 2 eps
        # exactly, so eps + log Phi(b) - log Phi(a) = log erfcx(-b/sqrt 2) - log
        # erfcx(-a/sqrt 2): no difference of two numbers near -a^2/2 (which loses
        # a^2/2 ulps where delta is tiny)
        xa, h = -a / _SQRT2, mu / _SQRT2  # -b/sqrt 2 = xa + h
        ea = float(erfcx(xa))
        log_phi_a = -0.5 * a * a + math.log(0.5 * ea)
        if log_phi_a < _LOG_SMALLEST:
            # delta <= Phi(a) is below the smallest float: 0. The increment below
            # cancels there (2y erfcx(y) - 2/sqrt(pi) at y ~ 1e150) and its log1p
            # raised "math domain error" (gaussian_mu(1e300, 1e-7), found by attack)
            return 0.0
        t = math.log1p(_erfcx_increment(xa, h) / ea)
    else:  # Phi(a) >= 1/2: delta is not small, the plain logs are accurate
        log_phi_a = float(log_ndtr(a))
        t = epsilon + float(log_ndtr(b)) - log_phi_a
    return float(max(0.0, math.exp(log_phi_a) * -math.expm1(min(t, 0.0))))


def _erfcx_increment(x: float, h: float) -> float:
    """``erfcx(x + h) - erfcx(x)``, accurate where ``h`` is tiny beside ``x``.

    The plain difference loses ``log10(x/h)`` digits (μ = 1e-11 at ε = 1e-10: 12 of
    them); there the integral of ``erfcx'(y) = 2y erfcx(y) - 2/sqrt(pi)`` over
    ``[x, x + h]`` by 3-point Gauss–Legendre (the integrand varies by a factor
    ``1 + O(h/x)``) keeps all but ~3.
    """
    if h > 1e-3 * max(1.0, abs(x)):
        return float(erfcx(x + h)) - float(erfcx(x))
    nodes = (-math.sqrt(0.6), 0.0, math.sqrt(0.6))
    weights = (5.0 / 9.0, 8.0 / 9.0, 5.0 / 9.0)
    total = 0.0
    for node, weight in zip(nodes, weights, strict=True):
        y = x + 0.5 * h * (1.0 + node)
        total += weight * (2.0 * y * float(erfcx(y)) - _TWO_OVER_SQRT_PI)
    return 0.5 * h * total


def gaussian_mu(epsilon: float, delta: float) -> float:
    """The largest μ with ``gaussian_delta(epsilon, mu) <= delta``, by bisection.

    The bisection ends when its bracket is one ulp wide and returns its lower end,
    whose computed δ is at most ``(1 - DELTA_MARGIN) delta``: the noise never spends
    more than it is charged, with room for the rounding of ``gaussian_delta``.
    ``sigma = Delta/mu`` is then (ε, δ)-DP and μ-GDP.

    Parameters
    ----------
    epsilon : float
        ``eps > 0``.
    delta : float
        ``0 < delta < 1``.

    Returns
    -------
    float

    Examples
    --------
    >>> mu = gaussian_mu(1.0, 1e-5)
    >>> round(mu, 4), gaussian_delta(1.0, mu) <= 1e-5
    (0.2681, True)
    """
    epsilon = check_positive_real(epsilon, "epsilon")
    delta = check_gaussian_delta(delta) * (1.0 - DELTA_MARGIN)
    lo, hi = 1.0, 1.0
    while gaussian_delta(epsilon, hi) <= delta:  # grows: delta(mu) -> 1 as mu -> inf
        lo, hi = hi, 2.0 * hi
        if hi > 1e300:
            raise ValueError(
                f"epsilon = {epsilon!r} is too large for the Gaussian calibration in floating "
                "point: use a smaller epsilon"
            )
    while gaussian_delta(epsilon, lo) > delta:
        lo, hi = lo / 2.0, lo
        if lo < 1e-300:
            raise ValueError(
                f"delta = {delta!r} is too small at epsilon = {epsilon!r} for floating point: "
                "use a larger delta or epsilon"
            )
    # invariant: delta(lo) <= target < delta(hi)
    while True:
        mid = 0.5 * (lo + hi)
        if mid <= lo or mid >= hi:
            break
        if gaussian_delta(epsilon, mid) <= delta:
            lo = mid
        else:
            hi = mid
    return lo


def gaussian_sigma(sensitivity: float, epsilon: float, delta: float) -> tuple[float, float]:
    """``(sigma, mu)``: the analytic Gaussian's σ for ℓ2 sensitivity Δ at (ε, δ), and
    ``mu = Delta/sigma`` as computed in floating point (at most :func:`gaussian_mu`).

    Examples
    --------
    >>> sigma, mu = gaussian_sigma(0.1, 1.0, 1e-5)
    >>> round(sigma, 4), mu <= gaussian_mu(1.0, 1e-5)
    (0.3731, True)
    """
    sensitivity = check_positive_real(sensitivity, "sensitivity")
    mu_max = gaussian_mu(epsilon, delta)
    sigma = sensitivity / mu_max
    # the division rounds: step sigma up until Delta/sigma is at most the calibrated mu
    while math.isfinite(sigma) and sensitivity / sigma > mu_max:
        sigma = float(np.nextafter(sigma, math.inf))
    return sigma, sensitivity / sigma


def compose_mu(mus) -> float:
    r"""``sqrt(sum mu_i^2)``, rounded up: the μ-GDP of releases that are μᵢ-GDP.

    Composition of Gaussian trade-off functions is exact and holds for adaptively
    chosen mechanisms whose μᵢ are fixed in advance (Dong, Roth & Su 2022, Cor. 3.3:
    :math:`G_{\mu_1} \otimes \cdots \otimes G_{\mu_k} = G_{\sqrt{\sum_i \mu_i^2}}`).
    Each square and the sum round by at most half an ulp and the root halves that:
    two ulps up cover it, so the result is never below the exact value. inf when the
    squares overflow (no bound).

    Examples
    --------
    >>> compose_mu([0.3, 0.4]) >= 0.5, round(compose_mu([0.1] * 100), 12)
    (True, 1.0)
    """
    total = math.fsum(float(m) * float(m) for m in mus)
    if not math.isfinite(total):
        return math.inf
    return math.nextafter(math.nextafter(math.sqrt(total), math.inf), math.inf)


def gdp_epsilon(mu: float, delta: float) -> float:
    r"""The smallest ε at which μ-GDP is (ε, δ)-DP, rounded up (Dong, Roth & Su 2022,
    Cor. 2.13: δ(ε) = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2), decreasing in ε).

    Bisection on ε for :func:`gaussian_delta` at most ``(1 - READ_MARGIN) delta``,
    returning the bracket's upper end: the ε reported is never below the true one
    (the margin is far above the computed δ's error), and a μ calibrated at (ε, δ) by
    :func:`gaussian_mu` (margin ``DELTA_MARGIN``, twice as wide), even rounded up by a
    few ulps, reads as at most ε.
    ``inf`` when no finite ε up to 1e300 reaches δ, when μ is inf, or when δ is below
    ``MIN_DELTA`` (no bound is claimed there).

    Parameters
    ----------
    mu : float
        ``mu > 0`` (inf allowed: no bound).
    delta : float
        ``0 <= delta < 1``.

    Returns
    -------
    float
        ε ``>= 0``, or inf.

    Examples
    --------
    >>> eps = gdp_epsilon(1.0, 0.126937)
    >>> round(eps, 4), gaussian_delta(eps, 1.0) <= 0.126937
    (1.0, True)
    """
    mu, delta = float(mu), float(delta)
    if not (mu > 0) or math.isnan(mu):
        raise ValueError(f"mu must be > 0, got {mu!r}")
    if not (0 <= delta < 1):
        raise ValueError(f"delta must be in [0, 1), got {delta!r}")
    if math.isinf(mu) or delta < MIN_DELTA:
        return math.inf
    target = delta * (1.0 - READ_MARGIN)

    def fits(eps: float) -> bool:
        try:
            return gaussian_delta(eps, mu) <= target
        except (ValueError, OverflowError, ZeroDivisionError):  # past floating point
            return False

    if fits(0.0):
        return 0.0
    lo, hi = 0.0, 1.0
    while not fits(hi):
        lo, hi = hi, 2.0 * hi
        if hi > 1e300:
            return math.inf
    # invariant: delta(lo) > target >= delta(hi)
    while True:
        mid = 0.5 * (lo + hi)
        if mid <= lo or mid >= hi:
            return hi
        if fits(mid):
            hi = mid
        else:
            lo = mid
