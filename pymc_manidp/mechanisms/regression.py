r"""KNG for geodesic regression: a private footpoint and slope ``(p, v)`` in one draw on ``TM``.

The law (docs/regression.md):

.. math:: f(p, v \mid D) \propto \exp\Big\{-\big(\|\nabla_pE\|_p^2 + \|\nabla_vE\|_p^2\big)^{1/2}
          \big/\sigma\Big\}\quad\text{on } \{\rho(m, p) \le R,\ \|v\|_p \le V\},

with respect to the Sasaki (Liouville) measure :math:`\mathrm{vol}_M(dp)\,dv`, where
:math:`E(p, v) = \frac1{2n}\sum_i\rho^2(\operatorname{Exp}_p(x_iv), y_i)`,
:math:`\sigma = 2\Delta/\varepsilon` and
:math:`\Delta = (\Delta_p^2 + \Delta_v^2)^{1/2}` from public bounds only
(:func:`pymc_manidp.stats.regression_sensitivity`). The covariates are
**public**: they are read and checked before any charge, and the neighbouring data sets
differ in one response :math:`y_i`. Both gradients are evaluated at the same
:math:`(p, v)`, so no vectors of different tangent spaces are compared, and no private
plug-in enters the density.
"""

from __future__ import annotations

import math

import numpy as np

from pymc_manidp import mcmc
from pymc_manidp._progress import _progress_enabled, progress_status
from pymc_manidp._validation import check_bool, check_positive_int, check_positive_real
from pymc_manidp.geometry._numba.cache import check_environment_once
from pymc_manidp.geometry.jacobi import REGRESSION_SPACES, has_regression_terms, transport
from pymc_manidp.geometry.jacobi_twins import has_regression_twin
from pymc_manidp.laws.regression import (
    sample_flat_regression_kng,
    sample_regression_kng_uniform,
)
from pymc_manidp.laws.regression_floor import (
    REGRESSION_FAILURE_LOG2_LIMIT,
    flat_regression_log_acceptance,
    regression_failure_bound,
    regression_failure_from_acceptance,
    regression_gradient_bounds,
    regression_largest_exponent,
)
from pymc_manidp.mcmc import MCMCSettings
from pymc_manidp.mechanisms.base import EXACT_SAMPLERS, Mechanism, assumed_delta_note, gate_run
from pymc_manidp.privacy.budget import PrivacyBudget, current_budget
from pymc_manidp.rng import resolve_rng
from pymc_manidp.stats.regression import (
    check_covariates,
    covariate_gram,
    regression_gradient,
    regression_sensitivity,
)

__all__ = ["RegressionKNGMechanism"]

PUBLIC_COVARIATES_NOTE = (
    "the covariates are public: neighbouring data sets differ in one response; privatize "
    "the covariates separately if they are private (docs/regression.md)"
)


class RegressionKNGMechanism(Mechanism):
    r"""Release a private geodesic regression ``(p, v)`` with KNG, jointly on ``TM``.

    Parameters
    ----------
    manifold : Manifold
        One of the shipped spaces (``Euclidean``, ``Sphere``, ``Hyperbolic``, ``SPD``,
        ``Rotations``, ``KendallShape``).
    epsilon : float
        Privacy budget ``> 0``.
    center : array_like, shape ``point_shape``
        The public ball's center ``m``, chosen without looking at the data.
    radius : float
        The public ball's radius ``r``; the responses lie in ``B_r(m)``.
    covariate_bound : float
        ``X >= |x_i|`` for every covariate (public; checked before any charge).
    slope_bound : float
        ``V``: the law lives on slopes ``|v| <= V``.
    footpoint_radius : float, optional
        ``R``: the law lives on footpoints ``p in B_R(m)``. Required on every curved
        space (exponential volume growth on ``Hyperbolic``/``SPD``; on compact spaces
        the residuals must stay below the injectivity radius, ``r + R + X V < inj``);
        ``None`` only on flat spaces without cut locus (``Euclidean``), where
        footpoints range over the whole space.
    max_attempts : int
        The exact sampler's proposals (on curved spaces: gradient evaluations) per
        draw before it gives up, after the data were read.

    Notes
    -----
    The released value is an array ``(2, *point_shape)``: row 0 the footpoint
    :math:`\tilde p`, row 1 the slope :math:`\tilde v \in T_{\tilde p}M`. The exact
    samplers (pure ε-DP): on flat spaces the K-norm law around the least-squares fit
    (at most ``max_attempts`` proposals per draw; then, with a ``footpoint_radius``,
    the uniform stage below: docs/regression.md, "The flat sampler's
    pilot-then-switch"); elsewhere rejection from the uniform law of the domain (the
    density is at most 1), whose acceptance falls as ``n epsilon`` grows (at most
    ``max_attempts`` gradient evaluations per draw). There, and on flat spaces with a
    ``footpoint_radius``, it is refused, before any charge and before the
    responses are read, wherever the proved bound on the chance that it stops at its
    cap is above ``2^-64`` (:meth:`exact_failure`, :meth:`largest_n_epsilon`;
    docs/regression.md, "The exact samplers' proved failure bound"), and a release
    records the bound. Without a ``footpoint_radius`` on ``Euclidean`` the K-norm
    sampler alone runs, refused likewise where its acceptance floor, proved from the
    public covariates, leaves a chance of giving up above ``2^-64`` (docs/regression.md,
    "The flat samplers' acceptance floor"). ``sampler="nuts"`` on
    ``Euclidean``, ``Sphere`` and ``Hyperbolic``: the same law in a chart of ``TM``
    (normal coordinates at ``center``, the slope in the transported frame), gated and
    charged as the mean's MCMC releases are (docs/regression.md, "NUTS on TM").

    Examples
    --------
    >>> import numpy as np
    >>> import pymc_manidp as pmd
    >>> mech = pmd.RegressionKNGMechanism(pmd.Euclidean(dim=2), epsilon=1.0,
    ...     center=[0.0, 0.0], radius=1.0, covariate_bound=1.0, slope_bound=2.0)
    >>> mech.sensitivities(10)  # (2r/n, 2rX/n)
    (0.2, 0.2)
    >>> x = np.linspace(-1, 1, 10)
    >>> y = np.stack([0.5 * x, 0.2 * np.ones(10)], axis=1)
    >>> rel = mech.release(x, y, random_seed=0)
    >>> rel.value.shape, rel.delta
    ((2, 2), 0.0)
    """

    name = "KNG-regression"
    restricted = True
    value_on_manifold = False
    release_notes = (PUBLIC_COVARIATES_NOTE,)
    #: what the recorded failure bound is of
    _failure_what = "exact regression sampler"
    #: the flat K-norm sampler switches to uniform proposals on a compact domain (a
    #: footpoint_radius given) after its pilot: the proved bound then covers it too
    _flat_switch = True

    def __init__(
        self,
        manifold,
        *,
        epsilon,
        center,
        radius,
        covariate_bound,
        slope_bound,
        footpoint_radius=None,
        max_attempts=10_000,
    ):
        super().__init__(manifold, epsilon=epsilon, center=center, radius=radius)
        M = self.manifold
        if not has_regression_terms(M):
            names = ", ".join(c.__name__ for c in REGRESSION_SPACES)
            raise ValueError(
                f"{M} has no closed-form Jacobi fields in this library (regression KNG is "
                f"written for {names}): use one of those spaces"
            )
        self.covariate_bound = check_positive_real(covariate_bound, "covariate_bound")
        self.slope_bound = check_positive_real(slope_bound, "slope_bound")
        self.max_attempts = check_positive_int(max_attempts, "max_attempts")
        kmin, kmax = (float(k) for k in M.curvature_bounds)
        inj = float(M.injectivity_radius)
        self.flat = kmin == kmax == 0.0 and math.isinf(inj)
        L = self.covariate_bound * self.slope_bound
        r = self.domain.radius
        if footpoint_radius is None:
            if not self.flat:
                raise ValueError(
                    f"footpoint_radius is required on {M}: "
                    + (
                        "the volume grows exponentially, so the law is not normalizable "
                        "over all footpoints"
                        if math.isinf(inj)
                        else "the residuals must stay below the injectivity radius for the "
                        "sensitivity bound and the gradient to exist"
                    )
                    + "; pass footpoint_radius=R, a public radius around center where the "
                    "footpoint lies"
                )
            self.footpoint_radius = None
        else:
            self.footpoint_radius = check_positive_real(footpoint_radius, "footpoint_radius")
        if L >= inj:
            raise ValueError(
                f"covariate_bound * slope_bound = {L:.6g} reaches the injectivity radius "
                f"{inj:.6g} of {M}: the geodesic y = Exp_p(x v) is not identifiable beyond "
                "it; use a smaller slope_bound or rescale the covariates by a public constant"
            )
        if not math.isinf(inj):
            reach = r + self.footpoint_radius + L
            if reach >= inj:
                raise ValueError(
                    f"radius + footpoint_radius + covariate_bound * slope_bound = {reach:.6g} "
                    f"reaches the injectivity radius {inj:.6g} of {M}: residuals could cross "
                    "the cut locus, where the gradient and its sensitivity bound fail; use a "
                    "smaller footpoint_radius, slope_bound or radius (or rescale the covariates)"
                )

    # --- the privacy map ----------------------------------------------------------------
    def sensitivities(self, n: int) -> tuple[float, float]:
        """``(Delta_p, Delta_v)`` for ``n`` records
        (:func:`~pymc_manidp.stats.regression_sensitivity`)."""
        return regression_sensitivity(
            self.manifold,
            n,
            radius=self.domain.radius,
            covariate_bound=self.covariate_bound,
            slope_bound=self.slope_bound,
            footpoint_radius=self.footpoint_radius,
        )

    def sensitivity(self, n: int) -> float:
        """The joint sensitivity ``(Delta_p^2 + Delta_v^2)^(1/2)`` of ``(grad_p E, grad_v E)``."""
        dp, dv = self.sensitivities(n)
        return math.hypot(dp, dv)

    @property
    def samplers(self) -> tuple[str, ...]:
        """``("exact", "nuts")`` where the gradient has a PyTensor twin (``Euclidean``,
        ``Sphere``, ``Hyperbolic``: ``pymc_manidp.geometry.jacobi_twins``), else
        ``("exact",)``. Exact: the K-norm law around the least-squares fit on flat
        spaces, rejection from the domain's uniform law elsewhere; NUTS: the law in a
        chart of ``TM`` (docs/regression.md)."""
        if has_regression_twin(self.manifold):
            return (*EXACT_SAMPLERS, "nuts")
        return EXACT_SAMPLERS

    # --- the proved failure bound of the curved exact sampler ------------------------------
    def gradient_bound(self) -> float:
        """``G``: a public bound of the norm the curved exact sampler accepts by,
        ``|(grad_p E, grad_v E)| <= T (A^2 + X^2 B^2)^(1/2)`` on the domain for every
        data set in the ball
        (``pymc_manidp.laws.regression_floor.regression_gradient_bounds``)."""
        gp, gv = regression_gradient_bounds(
            self.manifold, radius=self.domain.radius, covariate_bound=self.covariate_bound,
            slope_bound=self.slope_bound, footpoint_radius=self.footpoint_radius,
        )  # fmt: skip
        return math.hypot(gp, gv)

    def _proved_floor(self) -> bool:
        """Whether the exact sampler's chance of giving up has the proved bound: every
        curved space, and flat spaces with a footpoint_radius (the K-norm pilot, then
        uniform proposals on the compact domain, docs/regression.md, "The flat
        sampler's pilot-then-switch")."""
        return not self.flat or (self._flat_switch and self.footpoint_radius is not None)

    def _flat_log_acceptance(self, x, sigma) -> float:
        """``log`` of the proved least acceptance of the flat K-norm sampler with
        footpoints free in ``R^d``: public, from the covariates
        (:func:`~pymc_manidp.laws.regression_floor.flat_regression_log_acceptance`)."""
        return flat_regression_log_acceptance(
            x, radius=self.domain.radius, slope_bound=self.slope_bound, sigma=sigma,
            dim=self.manifold.dim,
        )  # fmt: skip

    def exact_failure(self, n: int, x=None):
        """The proved bound (``FailureBound``) on the chance an exact release
        of ``n`` records stops at its cap after reading the data. Public: ``n``, σ, the
        bounds, the cap and, for the flat K-norm samplers alone (``Euclidean`` without a
        footpoint_radius; the sequential release's slope on ``Euclidean``), the public
        covariates ``x`` (``None`` there when ``x`` is not given; docs/regression.md,
        "The flat samplers' acceptance floor")."""
        sigma = self.calibrate(n).sigma
        if not self._proved_floor():
            if x is None:
                return None
            log_a = self._flat_log_acceptance(np.asarray(x, float), sigma)
            return regression_failure_from_acceptance(log_a, self.max_attempts)
        return regression_failure_bound(self.gradient_bound(), sigma, self.max_attempts)

    def largest_n_epsilon(self) -> float:
        """The largest ``n epsilon`` whose proved failure bound is at most ``2^-64``
        (``inf`` where no bound applies, :meth:`exact_failure`): ``G/σ`` is proportional
        to ``n epsilon``."""
        if not self._proved_floor():
            return math.inf
        # σ = 2Δ/ε' (ε' = epsilon_per_noise, a fixed share of ε) and nΔ is free of n
        t = regression_largest_exponent(self.max_attempts)
        share = self.epsilon / self.epsilon_per_noise
        return t * 2.0 * self.sensitivity(1) * share / self.gradient_bound()

    def check_exact_failure(self, n: int, x=None) -> None:
        """Refuse (``ValueError``) an exact release of ``n`` records whose proved chance
        of giving up after reading the data is above ``2^-64``: public (``x``, the
        covariates, are public), so called before any charge and before the responses
        are read."""
        bound = self.exact_failure(n, x)
        if bound is None or bound.log2_failure <= REGRESSION_FAILURE_LOG2_LIMIT:
            return
        if not self._proved_floor():
            x = np.asarray(x, float)
            raise ValueError(
                f"{self.name} on {self.manifold} (n epsilon = {n * self.epsilon:.6g}): the "
                "flat exact sampler's K-norm proposals land in the slope ball with a "
                f"probability proved only above e^{bound.log_acceptance:.4g} for these "
                f"public covariates (mean {float(np.mean(x)):.4g}, variance "
                f"{float(np.var(x)):.4g}), so its chance of stopping at its cap of "
                f"{self.max_attempts} proposals after reading the data (which publishes "
                f"that it failed) is not proved below 2^{REGRESSION_FAILURE_LOG2_LIMIT:g} "
                "(docs/regression.md, 'The flat samplers' acceptance floor'). Spread or "
                "centre the covariates (a public rescaling), raise slope_bound, use "
                "pmd.RegressionKNGMechanism with a footpoint_radius (its uniform stage has "
                "a proved bound), or sampler='nuts'"
            )
        ne = self.largest_n_epsilon()
        nuts = (
            "sampler='nuts' (on this space)"
            if "nuts" in self.samplers
            else "sampler='nuts' on Euclidean, Sphere or Hyperbolic (not on this space)"
        )
        raise ValueError(
            f"{self.name} on {self.manifold} (n epsilon = {n * self.epsilon:.6g}): the exact "
            f"sampler's chance of stopping at its cap of {self.max_attempts} proposals per "
            "draw after reading the data (which publishes that it failed) is "
            + (
                f"proved only below 2^{bound.log2_failure:.4g}, not below "
                if bound.log2_failure < 0
                else "not bounded by the proof below 1, let alone "
            )
            + f"2^{REGRESSION_FAILURE_LOG2_LIMIT:g} (docs/regression.md, 'The exact samplers' "
            f"proved failure bound'). The largest n epsilon proved for these bounds and cap "
            f"is {ne:.4g}: use epsilon <= {ne / n:.6g} for this n, or {nuts}, or smaller "
            "public bounds (radius, footpoint_radius, slope_bound); a larger max_attempts "
            "helps only logarithmically"
        )

    def _record(self, value, cal, sampler, notes=(), validated=False, covariates=None, **fields):
        """As the base; an exact release records the proved bound on the chance its
        sampler gives up (the flat K-norm samplers' from the public ``covariates``)."""
        bound = None
        if sampler in EXACT_SAMPLERS:
            bound = self.exact_failure(cal.n, covariates)
        if bound is not None:
            notes = (
                *notes,
                f"{self._failure_what}: the chance it stops at its cap of "
                f"{bound.max_attempts} proposals per draw (publishing that it failed) is at "
                f"most 2^{bound.log2_failure:.4g} for every data set in the ball, proved "
                "from public facts (docs/regression.md, 'The exact samplers' proved failure "
                "bound')",
            )
        return super()._record(value, cal, sampler, notes, validated, **fields)

    # --- the law --------------------------------------------------------------------------
    def in_domain(self, p, v) -> bool:
        """Whether ``(p, v)`` lies in the law's public domain."""
        if float(np.sqrt(self.manifold.inner(p, v, v))) > self.slope_bound:
            return False
        if self.footpoint_radius is None:
            return True
        return bool(self.domain.distances(p) <= self.footpoint_radius)

    def logp(self, theta, x, y) -> float:
        """Unnormalized log density at ``theta = (p, v)`` ``(2, *point_shape)`` with
        respect to the Sasaki measure: ``-|grad E(p, v)|/sigma`` in the domain,
        ``-inf`` outside."""
        x = check_covariates(x, bound=self.covariate_bound)
        y = self.domain.check(y)
        p = self.manifold.validate(np.asarray(theta[0], float)[None])[0]
        v = self.manifold.to_tangent(p, np.asarray(theta[1], float))
        if not self.in_domain(p, v):
            return -np.inf
        return -self.grad_norm(p, v, x, y) / self.sigma(len(x))

    # --- the flat exact draw ----------------------------------------------------------------
    def _to_coords(self, p, v):
        """Normal coordinates at the center of a footpoint and of its slope moved to the
        center (a flat space: the chart is an isometry, the transport path-independent)."""
        m = self.domain.center
        a = self.manifold.log_coords(m, p)
        b = self.manifold.to_coords(m, transport(self.manifold, p, self.manifold.log(p, m), v))
        return np.stack([a, b])

    def _from_coords(self, theta):
        M, m = self.manifold, self.domain.center
        w = M.from_coords(m, theta[0])
        p = M.validate(M.exp(m, w)[None])[0]
        return p, M.to_tangent(p, transport(M, m, w, M.from_coords(m, theta[1])))

    def grad_norm(self, p, v, x, y) -> float:
        """``|(grad_p E, grad_v E)|`` at ``(p, v)`` (the norm on ``T_pM + T_pM``)."""
        M = self.manifold
        _, gp, gv = regression_gradient(M, p, v, x, y)
        return math.sqrt(max(float(M.inner(p, gp, gp) + M.inner(p, gv, gv)), 0.0))

    def exact_draws_xy(self, x, y, sigma, size, rng):
        """``size`` exact draws ``(size, 2, *point_shape)`` for checked ``x``, ``y``:
        the flat K-norm sampler, or rejection from the domain's uniform law."""
        M, m = self.manifold, self.domain.center
        if not self.flat:
            out = sample_regression_kng_uniform(
                M, m, self.footpoint_radius, self.slope_bound,
                lambda p, v: self.grad_norm(p, v, x, y), sigma, size, rng,
                max_attempts=self.max_attempts,
            )  # fmt: skip
            return out.points, {"proposals": out.proposals, **out.info}
        c = M.log_coords(m, y)  # (n, d): the chart is linear in a flat space
        G = covariate_gram(x)
        rhs = np.stack([c.mean(axis=0), (x[:, None] * c).mean(axis=0)])
        theta_hat = np.linalg.solve(G, rhs)
        V, R = self.slope_bound, self.footpoint_radius

        def accept(theta):
            ok = np.sqrt(np.sum(theta[:, 1] ** 2, axis=-1)) <= V
            if R is not None:
                ok &= np.sqrt(np.sum(theta[:, 0] ** 2, axis=-1)) <= R
            return ok

        fallback = None
        if self._proved_floor():
            # after the pilot (a fixed count of K-norm proposals): uniform proposals on
            # the compact domain, whose chance of giving up is the proved bound
            def fallback(need, rng):
                rest = sample_regression_kng_uniform(
                    M, m, R, V, lambda p, v: self.grad_norm(p, v, x, y), sigma, need, rng,
                    max_attempts=self.max_attempts,
                )  # fmt: skip
                coords = [self._to_coords(p, v) for p, v in rest.points]
                return np.stack(coords), rest.proposals

        out = sample_flat_regression_kng(
            theta_hat, G, sigma, size, rng, accept=accept, max_attempts=self.max_attempts,
            fallback=fallback,
        )  # fmt: skip
        points = np.stack([np.stack(self._from_coords(t)) for t in out.points])
        return points, {"proposals": out.proposals, **out.info}

    # --- what users call --------------------------------------------------------------------
    def _public(self, x, y):
        """The public checks of a release: the covariates (public), ``n`` from the
        responses' shape, σ."""
        x = check_covariates(x, bound=self.covariate_bound)
        n = self.domain.public_n(y)
        if n != len(x):
            raise ValueError(
                f"covariates and responses must have one row per record: {len(x)} covariates, "
                f"{n} responses"
            )
        return x, self.calibrate(n)

    def release_many(self, *args, **kwargs):
        """Not offered: a regression release takes covariates and responses; call
        :meth:`release` once per data set."""
        raise NotImplementedError(
            f"{self.name} releases one data set at a time: call release(x, y) for each"
        )

    def model(self, x, y):
        """The ``pm.Model`` a NUTS release samples (:func:`~pymc_manidp.mcmc.regression_model`):
        the law on ``TM`` in the chart at the public center, for checked ``x``, ``y``."""
        self._check_sampler("nuts")
        x, cal = self._public(x, y)
        y = self.domain.check(y)
        return self._model(x, y, cal.sigma)

    def _model(self, x, y, sigma):
        return mcmc.regression_model(
            self.manifold, self.domain.center, self.footpoint_radius, self.slope_bound,
            x, y, sigma,
        )  # fmt: skip

    def sample(self, x, y, size, *, random_seed=None, return_info=False):
        """``size`` i.i.d. draws ``(size, 2, *point_shape)`` of the exact law (for tests and
        audits on public data: never charged, refused inside ``with budget:``). Not
        refused beyond the proved failure bound (:meth:`check_exact_failure`, which
        :meth:`release` applies): on public data a sampler that gives up publishes
        nothing private, and the law's tests need larger n ε."""
        if current_budget() is not None:
            raise ValueError(
                "sample() draws many values of the law, each an epsilon-DP release: use "
                "release() inside 'with budget:'"
            )
        self._check_sampler("exact")
        size = check_positive_int(size, "size")
        rng, _ = resolve_rng(random_seed)
        x, cal = self._public(x, y)
        y = self.domain.check(y)
        points, info = self.exact_draws_xy(x, y, cal.sigma, size, rng)
        return (points, info) if return_info else points

    def release(
        self,
        x,
        y,
        *,
        sampler="exact",
        random_seed=None,
        settings=None,
        skip_diagnostics=False,
        estimate_delta=False,
        budget=None,
        delta=None,
        progressbar=None,
    ):
        """Release ``(p, v)`` privately: a :class:`~pymc_manidp.Release` whose value is
        ``(2, *point_shape)``.

        Every public premise (the covariates against ``covariate_bound``, the shapes,
        ``n``, σ, the sampler, for NUTS the run's memory and time) is checked before
        ``budget`` (or the one entered with ``with budget:``) is charged; then the
        responses are checked against the public ball and the law is drawn.

        ``sampler="exact"`` (default): pure ε-DP, ``delta = 0``. ``sampler="nuts"``
        (on ``Euclidean``, ``Sphere``, ``Hyperbolic``): the law in a chart of ``TM``,
        approximately DP like every MCMC release (``delta = None``), released only from
        a run that passes the diagnostics gate (``skip_diagnostics=True`` opts out,
        recorded); ``estimate_delta=True`` draws the value from a coupled kernel and
        records its δ̂ for the curator; charging a budget needs ``delta=`` (assumed) or
        ``estimate_delta=True`` (estimated), as for the mean's MCMC releases.
        ``settings``, ``progressbar``: as :meth:`Mechanism.release`.
        """
        try:
            check_environment_once()
            is_mcmc = self._check_sampler(sampler)
            settings = MCMCSettings.resolve(settings)
            skip_diagnostics = check_bool(skip_diagnostics, "skip_diagnostics")
            estimate_delta = check_bool(estimate_delta, "estimate_delta")
            if estimate_delta and not is_mcmc:
                raise ValueError(
                    "estimate_delta=True is for MCMC samplers: an exact release has delta = 0"
                )
            shown = _progress_enabled(progressbar)
            rng, policy = resolve_rng(random_seed)
            terms = self._charge_terms(budget, delta, is_mcmc, estimate_delta, sampler)
            x, cal = self._public(x, y)
            if is_mcmc:  # the trace's size and the run's time are public: before the charge
                mcmc.check_mcmc_memory(settings, self.manifold)
                mcmc.check_mcmc_budget(self.manifold, cal.n, settings)
            else:  # the proved chance of giving up after the charge is public too
                self.check_exact_failure(cal.n, x)
            budget, charge = self._make_charge(terms, sampler)
        except BaseException:
            entered = budget if budget is not None else current_budget()
            if isinstance(entered, PrivacyBudget):
                entered.refused()
            raise
        try:
            y = self.domain.check(y)
            if is_mcmc:
                rel = self._mcmc_release(
                    x, y, cal, rng, policy, settings, skip_diagnostics, estimate_delta,
                    random_seed, shown, terms[2],
                )  # fmt: skip
            else:
                points, info = self.exact_draws_xy(x, y, cal.sigma, 1, rng)
                rel = self._record(
                    points[0], cal, sampler, sampler_info=info, seed_policy=policy,
                    opt_outs=(), covariates=x,
                )  # fmt: skip
        except BaseException as err:
            if budget is not None:
                budget.fail(charge[0], err)
            raise
        if budget is not None:
            budget.settle(charge[0], rel)
        return rel

    def _mcmc_release(
        self, x, y, cal, rng, policy, settings, skip, estimate_delta, seed, shown, charged
    ):
        """NUTS on ``TM`` for checked data, compiled once per ``n``, gated as the
        mean's MCMC releases are (:func:`~pymc_manidp.mechanisms.base.gate_run`)."""
        backend = mcmc.sampler_backend("nuts", settings.backend)
        compiled = self.mcmc_cache.find(cal.n, "nuts", backend)
        if compiled is None:
            with progress_status(
                f"compiling the NUTS model of {self.name} for n = {cal.n} (once per n)", shown
            ):
                compiled = self.mcmc_cache.add(
                    cal.n, mcmc.CompiledSampler(self._model(x, y, cal.sigma), backend=backend)
                )
        values = mcmc.regression_data(x, y, cal.sigma)
        run_seed = int(rng.integers(2**31 - 1))
        idata = compiled.sample(values, settings, random_seed=run_seed, progressbar=shown)
        info = gate_run(idata, compiled.backend, skip)
        opt_outs = ("skip_diagnostics",) if "failed_checks" in info else ()
        # the chart covers exactly the public domain: every draw is in it
        flat = np.asarray(idata.posterior["release"].values)
        flat = flat.reshape((-1, 2, *self.manifold.point_shape))
        value = flat[rng.integers(len(flat))]
        fields = {}
        if estimate_delta:
            from pymc_manidp.privacy.coupling import coupled_release

            coupled_rng, _ = resolve_rng(seed)
            coupled_rng = np.random.default_rng([int(coupled_rng.integers(2**63 - 1)), 17])
            value, fields["delta_estimate"] = coupled_release(
                self._model(x, y, cal.sigma), epsilon=self.epsilon,
                t=max(settings.tune, 1), kernel="hmc", random_seed=coupled_rng,
            )  # fmt: skip
            value = np.asarray(value)
        notes = () if charged in (None, 0.0) else (assumed_delta_note(charged),)
        return self._record(
            value, cal, "nuts", notes=notes, diagnostics=idata, sampler_info=info,
            seed_policy=policy, opt_outs=opt_outs, **fields,
        )  # fmt: skip
