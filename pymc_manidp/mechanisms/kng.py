r"""The K-norm gradient mechanism, KNG (Soto, Bharath, Reimherr & Slavković, 2022).

For the Fréchet mean (``statistic="mean"``, the paper's):

.. math:: f(x \mid D) \propto \exp\Big\{-\Big\|\sum_{i=1}^n \log_x(x_i)\Big\|_x
          \big/ (\sigma n)\Big\},\quad x \in B_r(m_0),

with gradient sensitivity ``Delta = 2r(2 - H)/n`` (Thm 2) and ``sigma = 2 Delta/eps``:
the normalizing constant depends on the data, so the factor 2 of Thm 1 is needed.

For the Fréchet median (``statistic="median"``, issue 24; KNG's construction for any
objective with a gradient of bounded sensitivity, 2022 Section 3):

.. math:: f(x \mid D) \propto \exp\Big\{-\Big\|\frac1n\sum_{i=1}^n
          \frac{\log_x(x_i)}{\rho(x, x_i)}\Big\|_x \Big/ \sigma\Big\},
          \quad x \in B_r(m_0),

a mean of unit vectors: ``Delta = 2/n`` on every manifold and ``sigma = 2 Delta/eps =
4/(n eps)`` (docs/mechanisms.md).
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from pymc_manidp._validation import check_positive_int
from pymc_manidp.geometry.capabilities import BallExit
from pymc_manidp.laws import exact
from pymc_manidp.laws.distributions import KNG, STATISTICS
from pymc_manidp.laws.exact_range import SIGMA_FLOOR, kng_sigma_range, median_sigma_floor
from pymc_manidp.laws.median_floor import (
    MEDIAN_FAILURE_LOG2_LIMIT,
    MEDIAN_FLOOR_CHOICES,
    median_failure_bound,
    median_largest_n_epsilon,
    median_max_attempts,
)
from pymc_manidp.mechanisms.base import EXACT_SAMPLERS, Mechanism
from pymc_manidp.stats import reductions
from pymc_manidp.stats.frechet import frechet_mean
from pymc_manidp.stats.median import frechet_median

__all__ = [
    "MEAN_GRADIENT_ULPS",
    "MEAN_SLACK_SIGMAS",
    "MEDIAN_GROWTH_LIMIT",
    "MEDIAN_MEASURED_NOTE",
    "MEDIAN_ROUNDING_LIMIT",
    "KNGMechanism",
]

#: The rounding of proposals and gradient norms (``manifold.rounding_error``) KNG on
#: the median accepts: 1% of ``|grad F| <= 1`` (``KNGMechanism._check_median_rounding``).
MEDIAN_ROUNDING_LIMIT = 1e-2
#: The largest ``G r`` (``G = manifold.log_volume_growth``) KNG on the median supports.
MEDIAN_GROWTH_LIMIT = 2.2
#: The rounding of the computed Fréchet mean's ``|grad F|``, in ulps of ``r``, that KNG
#: on the mean assumes (``KNGMechanism.check_precision``).
MEAN_GRADIENT_ULPS = 4096.0
#: How many σ that error bound may reach (``KNGMechanism.check_precision``).
MEAN_SLACK_SIGMAS = 8.0


#: The note of an exact median release with ``median_floor="measured"``.
MEDIAN_MEASURED_NOTE = (
    "exact median sampler with median_floor='measured': its acceptance floor was "
    "measured by an adversarial search, not proved; the chance it stops at its cap "
    "after reading the data (publishing that it failed) has no proved bound here "
    "(docs/exact.md, 'The median's supported sigma')"
)


class KNGMechanism(Mechanism):
    """Release a private mean or median with the K-norm gradient mechanism (on the ball).

    Parameters
    ----------
    manifold : Manifold
        A manifold instance, e.g. ``pmd.Sphere(dim=2)``.
    epsilon : float
        Privacy budget ``> 0``.
    center : array_like, shape ``point_shape``
        The public ball's center ``m0``, chosen without looking at the data.
    radius : float
        The public ball's radius ``r`` (``0 < r < r*``); the data lie in ``B_r(m0)``.
    statistic : {"mean", "median"}, default "mean"
        Release a private Fréchet mean (the 2022 paper's KNG, ``Delta = 2r(2 - H)/n``)
        or a private Fréchet median (``Delta = 2/n``, robust to outliers; exact
        sampler: rejection from a piecewise-uniform envelope, docs/exact.md).
    max_attempts : int, optional
        The exact sampler's cap on envelope proposals per draw (default
        ``laws.exact.DEFAULT_MAX_ATTEMPTS``, 10,000, for the mean; for the median
        ``laws.median_floor.median_max_attempts(n)``, ``max(10⁶, min(10⁸, 10^10/n))``
        for ``n`` records, or 10⁶ with ``median_floor="measured"``, when
        ``max_attempts`` is None: ``self.median_cap(n)``). A release that hits it
        raises ``ExactSamplingError`` and releases nothing, after the data were read
        (a budget's charge stands). The law does not depend on it, only how often a
        release gives up: the median's proved bound on that chance
        (``laws.median_floor.median_failure_bound``) shrinks as the cap grows.
    median_floor : {"proved", "measured"}, default "proved"
        The median's exact releases: ``"proved"`` accepts only where the chance the
        sampler gives up after reading the data is proved at most ``2^-64`` from
        public facts (σ, the ball, the cap; docs/exact.md, "The median's proved
        failure bound"), and refuses the rest before any charge; ``"measured"``
        accepts down to the σ floors an adversarial search measured
        (``laws.exact_range.median_sigma_floor``), not proved: recorded in the
        release (``opt_outs`` gets ``"median_floor_measured"``, and a note).

    Examples
    --------
    >>> import numpy as np
    >>> import pymc_manidp as pmd
    >>> mech = pmd.KNGMechanism(pmd.Sphere(dim=2), epsilon=1.0, center=[0, 0, 1.0],
    ...                         radius=np.pi / 8)
    >>> round(mech.sigma(100), 6)  # 2 * (pi/4)(2 - pi/4)/100
    0.019079
    >>> med = pmd.KNGMechanism(pmd.Sphere(dim=2), epsilon=1.0, center=[0, 0, 1.0],
    ...                        radius=np.pi / 8, statistic="median")
    >>> med.name, med.sigma(100)  # 2 * (2/100) / 1
    ('KNG-median', 0.04)
    """

    name = "KNG"
    restricted = True  # KNG's density always lives on the public ball
    # MCMC samples KNG's density on the whole chart and keeps the draws inside the
    # ball (the law conditioned on it), which spares NUTS the wall at the ball's edge
    mcmc_law = KNG
    mcmc_law_kwargs: ClassVar[dict] = {"domain": None}

    def __init__(
        self,
        manifold,
        *,
        epsilon,
        center,
        radius,
        statistic="mean",
        max_attempts=None,
        median_floor="proved",
    ):
        super().__init__(manifold, epsilon=epsilon, center=center, radius=radius)
        if statistic not in STATISTICS:
            raise ValueError(
                f"statistic must be one of {', '.join(map(repr, STATISTICS))}, got {statistic!r}"
            )
        if not isinstance(median_floor, str):
            raise TypeError(f"median_floor must be a string, got {type(median_floor).__name__}")
        if median_floor not in MEDIAN_FLOOR_CHOICES:
            raise ValueError(
                "median_floor must be one of "
                f"{', '.join(map(repr, MEDIAN_FLOOR_CHOICES))}, got {median_floor!r}"
            )
        if median_floor != "proved" and statistic != "median":
            raise ValueError(
                "median_floor is for statistic='median' (the mean's exact sampler has no "
                "measured floor): drop it"
            )
        self.median_floor = median_floor
        if max_attempts is None and statistic != "median":
            max_attempts = exact.DEFAULT_MAX_ATTEMPTS
        # the median's default cap depends on n (median_cap): None until a release
        self.max_attempts = (
            None if max_attempts is None else check_positive_int(max_attempts, "max_attempts")
        )
        self.statistic = statistic
        if statistic == "median":
            # the instance's own: the Release names the statistic it privatizes
            self.name = "KNG-median"
            # the median's gradient norm is at most 1, so its density is at least
            # e^{-1/sigma} everywhere: not normalizable beyond the ball on non-compact
            # spaces and a flat plateau NUTS wanders on compact ones. The chart is
            # capped at the ball's edge: it covers exactly the law's support
            self.mcmc_law_kwargs = {"domain": self.domain, "statistic": "median"}
            self.mcmc_chart_on_ball = True

    @property
    def samplers(self) -> tuple[str, ...]:
        """The samplers on this manifold; the median's MCMC needs a chart capped at the
        ball's edge (``manifold.pt_ball_exit``), without it only the exact sampler."""
        out = super().samplers
        if self.statistic == "median" and not isinstance(self.manifold, BallExit):
            return tuple(s for s in out if s in EXACT_SAMPLERS)
        return out

    def sensitivity(self, n: int) -> float:
        """The gradient's sensitivity for ``n`` records: ``DataDomain.kng_sensitivity``
        (mean) or ``DataDomain.median_sensitivity`` (median, ``2/n``)."""
        if self.statistic == "median":
            return self.domain.median_sensitivity(n)
        return self.domain.kng_sensitivity(n)

    def check_precision(self, sensitivity: float, sigma: float) -> None:
        """On the mean: as the base, and the floating point of Lemma 1's slope ``H``
        (the median: neither; how its envelope meets far-out rounding is its own).

        The exact sampler bounds the computed mean's error by ``|grad F(x_hat)|/H``;
        ``|grad F|`` cannot be computed below the rounding of its sum: with records on
        the ball's edge near ``r*`` the computed mean stops at ``|grad F| ~ 2000 eps r``
        (measured: Kendall(3) at ``r*(1 - 1e-9)`` 1.7e-13, 2000 ulps of ``r``; SO(3) at
        its largest radius 1400), so the error bound is at least that over ``H``, and
        the acceptance rate falls like ``e^{-|grad F|/(H sigma)}``. Within a few ulps of
        ``r*`` ``H`` is ``~1e-16`` and at large ``n eps`` nothing is accepted (issue 43:
        Sphere, Kendall, SO(3) at ``r* - 1 ulp``, ε = 1e6, n = 6 hit the cap after
        reading the data; Kendall(3) at ``r*(1 - 1e-9)`` and SO(3) at its largest
        radius at ε = 1e6 too). The envelope loses a factor about ``e^{-L e/σ}``,
        ``e = min(|grad F|/H, 2r)``, ``L <= 1`` its local slope (Kendall: ``L e/σ =
        104``; SO(3) 12). Refused when ``min(MEAN_GRADIENT_ULPS eps r/H, 2r) >
        MEAN_SLACK_SIGMAS sigma`` (4096 ulps, 8): ``H``, ``r`` and ``sigma`` are public;
        ε = 1 at ``r* - 1 ulp`` (``e = 2r``, 1.5 σ) still releases.
        """
        if self.statistic == "median":
            # not the mean's rule: on H^2 eta <= Delta/100 would refuse radius 6 at
            # n = 100 (eta 1.5e-3 > 2e-4), which the median releases
            self._check_median_rounding()
            return
        super().check_precision(sensitivity, sigma)
        H, r = self.domain.curvature_factor, self.domain.radius
        # the footpoint's error bound e = |grad F(x_hat)|/H, at most 2r (both in the ball)
        floor = min(MEAN_GRADIENT_ULPS * np.finfo(float).eps * r / H, 2.0 * r)
        if floor > MEAN_SLACK_SIGMAS * sigma:
            raise ValueError(
                f"KNG on {self.manifold}: the radius {r!r} is so close to r* = "
                f"{float(self.manifold.max_radius)!r} that Lemma 1's slope H = {H:.3g}, and "
                f"the Fréchet mean's error bound (min({MEAN_GRADIENT_ULPS:g} eps r/H, 2r) = "
                f"{floor:.3g}) exceeds sigma = {sigma:.3g} more than {MEAN_SLACK_SIGMAS:g} "
                "times: the exact sampler would accept almost nothing. Use a radius further "
                "below r* (r*(1 - 1e-9) has H ~ 1e-9), a smaller epsilon, or fewer records"
            )

    def _check_median_rounding(self) -> None:
        """The median's largest supported radius (public: refused before any charge).

        Two limits. The volume growth: on spaces where ``log J(c) <= G |c|``
        (``G = manifold.log_volume_growth``: H^d ``d - 1``, SPD(k) ``C/2``) the
        envelopes bound ``J`` by ``e^{G t}`` over a reach of up to ``2r``, so with the
        records placed worst (all at one edge point, or half at each of two opposite
        ones) the acceptance falls like ``e^{-c G r}``: H^2 with all records at one
        edge point accepted 5e-3 at radius 3, 4e-4 at 4.5 and 5e-5 at 6.4; SPD(2)
        with half at each of two opposite edge points 2.3e-4 at 4.24 (σ = 0.005).
        Refused when ``G r > MEDIAN_GROWTH_LIMIT`` (2.2: H^2 radius 2.2, SPD(2) 3.11,
        where every worst placement accepts at least 6e-4 at the σ floor:
        tests/mechanisms/test_median_supported.py). And the rounding: the ball's
        ``domain.rounding_error`` (proposals and gradient norms far from the origin)
        at most ``MEDIAN_ROUNDING_LIMIT``, 1% of ``|grad F| <= 1`` (a center far out).
        Issue 43: radius 1e3 failed after reading the data.
        """
        r, M = self.domain.radius, self.manifold
        growth = float(M.log_volume_growth)
        if growth * r > MEDIAN_GROWTH_LIMIT:
            raise ValueError(
                f"KNG-median on {M}: the radius {r!r} is above {MEDIAN_GROWTH_LIMIT / growth:.6g}, "
                "the largest the exact median sampler supports on this space: the volume "
                f"of its balls grows like e^({growth:g} r), and its envelopes would accept "
                "too few proposals for some placements of the records (the release would "
                "stop at its proposal cap after reading the data). Use a radius of at most "
                "that (docs/geometry.md, 'Supported radii')"
            )
        eta = self.domain.rounding_error
        if eta <= MEDIAN_ROUNDING_LIMIT:
            return
        largest = self.domain.largest_radius(MEDIAN_ROUNDING_LIMIT)
        raise ValueError(
            f"KNG-median on {M}: the public ball (radius {r!r}) reaches where the "
            "coordinates round the sampler's proposals and gradient norms by up to "
            f"{eta:.3g} (manifold.rounding_error), more than {MEDIAN_ROUNDING_LIMIT:g} of "
            "the gradient's scale 1: the proposals would not be representable. The "
            f"largest radius supported at this center is {largest:.6g}: use a radius of "
            "at most that, or a center nearer the origin (docs/geometry.md, 'Supported "
            "radii')"
        )

    def median_cap(self, n: int) -> int:
        """The median's cap on proposals per draw for ``n`` records: ``max_attempts``,
        or by default ``laws.median_floor.median_max_attempts(n)`` (proved floor) or
        ``laws.exact.DEFAULT_MEDIAN_MAX_ATTEMPTS``, 10⁶ (measured floor: the cap its
        floors were measured with; a larger one would only run longer on data the
        envelopes cannot follow)."""
        if self.max_attempts is not None:
            return self.max_attempts
        if self.median_floor == "measured":
            return exact.DEFAULT_MEDIAN_MAX_ATTEMPTS
        return median_max_attempts(n)

    def median_failure(self, cal):
        """The proved bound (``laws.median_floor.FailureBound``) on the chance an
        exact median release of ``cal`` (its ``n`` and σ) gives up: public."""
        return median_failure_bound(self.domain, cal.sigma, self.median_cap(cal.n))

    def public_calibration(self, data, sampler: str = "exact"):
        """As the base; an exact median release with ``median_floor="proved"`` is also
        refused, before any charge, where the proved bound on the chance its sampler
        gives up after reading the data is above ``2^-64`` (public: σ, the ball and
        the cap; docs/exact.md, "The median's proved failure bound")."""
        cal = super().public_calibration(data, sampler)
        if sampler in EXACT_SAMPLERS and self._proved_median():
            self._check_median_failure(cal)
        return cal

    def _proved_median(self) -> bool:
        return self.statistic == "median" and self.median_floor == "proved"

    def _check_median_failure(self, cal) -> None:
        bound = self.median_failure(cal)
        if bound.log2_failure <= MEDIAN_FAILURE_LOG2_LIMIT:
            return
        cap = self.median_cap(cal.n)
        ne = median_largest_n_epsilon(self.domain, cap)
        eps = self.epsilon_per_noise
        where = (
            f"use epsilon <= {ne / cal.n:.6g} for this n (n epsilon <= {ne:.4g}; a larger "
            "epsilon or more records make it worse: sigma = 4/(n epsilon) shrinks), "
            if ne > 0
            else ""
        )
        raise ValueError(
            f"KNG-median on {self.manifold} (radius {self.domain.radius:.6g}, n epsilon = "
            f"{cal.n * eps:.6g}, sigma = {cal.sigma:.6g}): the exact median sampler's chance "
            "of stopping at its cap of "
            f"{cap} proposals after reading the data (which publishes that it failed) is "
            + (
                f"proved only below 2^{bound.log2_failure:.4g}, not below "
                if bound.log2_failure < 0
                else "not bounded by the proof below 1, let alone "
            )
            + f"2^{MEDIAN_FAILURE_LOG2_LIMIT:g} (pymc_manidp.laws.median_floor; docs/exact.md, "
            f"'The median's proved failure bound'). The largest n epsilon proved at this "
            f"space, radius and cap is {ne:.4g}: {where}or sampler='nuts', or "
            "median_floor='measured' (the floors an adversarial search measured, not "
            "proved; recorded in the release). A larger cap (KNGMechanism(..., "
            "max_attempts=...)) helps only logarithmically"
        )

    def _record(self, value, cal, sampler, notes=(), validated=False, **fields):
        """As the base; an exact median release records the proved bound on the chance
        its sampler gives up, or that its floor is measured (``median_floor``)."""
        if self.statistic == "median" and sampler in EXACT_SAMPLERS:
            if self.median_floor == "measured":
                fields["opt_outs"] = (*fields.get("opt_outs", ()), "median_floor_measured")
                note = MEDIAN_MEASURED_NOTE
            else:
                bound = self.median_failure(cal)
                note = (
                    "exact median sampler: the chance it stops at its cap of "
                    f"{bound.max_attempts} proposals (publishing that it failed) is at most "
                    f"2^{bound.log2_failure:.4g} for every data set in the ball, proved "
                    "from public facts (docs/exact.md, 'The median's proved failure bound')"
                )
            notes = (*notes, note)
        return super()._record(value, cal, sampler, notes, validated, **fields)

    def check_exact_sigma(self, sigma: float) -> None:
        """Refuse a σ outside the exact sampler's range
        (``pymc_manidp.laws.exact_range.kng_sigma_range``): public, so before any
        charge, naming the ε range that works for this ``n``. With
        ``median_floor="proved"`` the median's floor is the proved bound's
        (:meth:`public_calibration`), not the measured one."""
        lo, hi = kng_sigma_range(self.domain, self.statistic)
        if self._proved_median():  # only the rounding's lower end (1e-10 r) stays
            lo = SIGMA_FLOOR * self.domain.radius
        if lo <= sigma <= hi:
            return
        # σ is proportional to 1/ε at fixed n: the ε range this n supports
        eps = self.epsilon_per_noise
        if sigma > hi:
            raise ValueError(
                f"sigma = {sigma:.6g} is above {hi:.6g}, the largest the exact KNG sampler "
                f"on {self.manifold} represents for radius {self.domain.radius:.6g}: its "
                "radial envelope would keep less than 2^-26 of its mass inside the ball, "
                "so the shells' weights would lose their precision "
                "(pymc_manidp.laws.exact_range). Use epsilon >= "
                f"{eps * sigma / hi:.6g} for this n (or more records; sigma is "
                "proportional to 1/(n epsilon)), or sampler='nuts'"
            )
        floor = median_sigma_floor(self.manifold)
        if self.statistic == "median" and lo == floor:
            d = self.manifold.dim
            if not np.isfinite(floor):
                raise ValueError(
                    f"KNG-median on {self.manifold}: the exact median sampler is not "
                    f"supported in dimension {d} (its envelopes' acceptance was measured "
                    "up to dimension 6 only: a release could stop at its proposal cap "
                    "after reading the data; pymc_manidp.laws.exact_range). Use "
                    "sampler='nuts'"
                )
            raise ValueError(
                f"sigma = {sigma:.6g} is below {lo:g}, the smallest the exact median "
                f"sampler supports on {self.manifold} (dimension {d}; measured, "
                "pymc_manidp.laws.exact_range.median_sigma_floor): below it some "
                "placements of the records (a tight cluster at the median, records on one "
                "geodesic) make its envelopes accept too few proposals, and the release "
                "would stop at its proposal cap after reading the data. Use "
                f"epsilon <= {eps * sigma / lo:.6g} for this n (n epsilon <= "
                f"{4.0 / lo:g}), or sampler='nuts'"
            )
        raise ValueError(
            f"sigma = {sigma:.6g} is below {lo:.6g} (1e-10 of the radius), the smallest "
            f"the exact KNG sampler on {self.manifold} resolves: the rounding of the "
            "gradient norms and the envelope's slack would decide the draw "
            "(pymc_manidp.laws.exact_range). Use epsilon <= "
            f"{eps * sigma / lo:.6g} for this n (noise that small is below 1e-10 of the "
            "ball anyway)"
        )

    def logp(self, x, data):
        """Unnormalized log-density (NumPy) w.r.t. volume at points ``x`` ``(..., *shape)``."""
        data = self.domain.check(data)
        x = self.manifold.validate(x)
        n = len(data)
        nshape = len(self.manifold.point_shape)
        if self.statistic == "median":
            flat = x.reshape((-1, *self.manifold.point_shape))
            g = reductions.median_grad_norms(self.manifold, flat, data).reshape(
                x.shape[: x.ndim - nshape]
            )
            lp = -g / self.sigma(n)
        else:
            xb = np.expand_dims(x, -nshape - 1)
            g = np.sum(self.manifold.log(xb, data), axis=-nshape - 1)
            lp = -self.manifold.norm(x, g) / (self.sigma(n) * n)
        return np.where(self.domain.distances(x) <= self.domain.radius, lp, -np.inf)

    def mcmc_inputs(self, data):
        """The data's Fréchet mean or median (the mode, the chart's origin) and the
        density's input, the data, for checked data."""
        # the chart's origin is only a sampling device: its accuracy affects efficiency
        if self.statistic == "median":
            mode = frechet_median(self.manifold, data).median
            # the capped chart needs its origin strictly inside the ball (a median on
            # the boundary, e.g. all records at one boundary point, would have an edge
            # at distance 0): pull it in along the geodesic from the center
            dom, r = self.domain, self.domain.radius
            d = float(dom.distances(mode))
            if d > 0.999 * r:
                v = self.manifold.log(dom.center, mode)
                mode = self.manifold.validate(self.manifold.exp(dom.center, (0.999 * r / d) * v))
            return mode, {"data": data}
        return frechet_mean(self.manifold, data).mean, {"data": data}

    def exact_draws(self, data, sigma, size, rng):
        """Exact draws for checked data (``ExactDraws``, with acceptance rates)."""
        sampler = exact.sample_kng_median if self.statistic == "median" else exact.sample_kng
        return sampler(
            self.manifold,
            data,
            sigma,
            size,
            rng,
            domain=self.domain,
            max_attempts=(
                self.median_cap(reductions.n_rows(data))
                if self.statistic == "median"
                else self.max_attempts
            ),
        )

    def exact_draws_stack(self, data, n, sigma, rng):
        """KNG on the mean: ``pymc_manidp.laws.exact.sample_kng_stack``, every data
        set at once; on the median, data set by data set (the base's loop)."""
        if self.statistic == "median":
            return super().exact_draws_stack(data, n, sigma, rng)
        points, used = exact.sample_kng_stack(
            self.manifold, data, sigma, rng, n=n, domain=self.domain
        )
        return points, [{"proposals": int(u), "acceptance_rate": 1.0 / u} for u in used]
