r"""The base class of the mechanisms: every mechanism object owns its release.

A release is one straight line down the layers (docs/architecture.md):

1. **check** the data against the public ball (``DataDomain.check``);
2. **calibrate**: the sensitivity Δ and the scale σ, computed once, in one
   :class:`~pymc_manidp.privacy.release.Calibration` (:meth:`Mechanism.calibrate`);
3. **draw**: exactly (:meth:`Mechanism.exact_draws`, the laws' samplers), or by MCMC on
   the polar model of :mod:`pymc_manidp.mcmc`, from the mode computed once
   (:meth:`Mechanism.mcmc_inputs`) and one :class:`~pymc_manidp.mcmc.MCMCSettings`;
4. **gate** an MCMC run on its diagnostics (:func:`~pymc_manidp.privacy.diagnostics.check_run`);
5. **record**: the :class:`~pymc_manidp.privacy.release.Release`, built here only
   (:meth:`Mechanism._record` calls :func:`~pymc_manidp.privacy.release.build_release`).

Nothing below calls back into a mechanism: the MCMC layer gets the mode, σ, the
density's inputs and the law's PyMC distribution class, never a mechanism method.

A mechanism provides ``sensitivity(n)``, the claims behind its σ
(``footpoint_free_normalizer``, ``check_law_exists``), ``exact_draws(data, sigma,
size, rng)`` and, for MCMC, ``mcmc_inputs(data)`` and the class attributes
``mcmc_law``/``mcmc_law_kwargs``. In the spirit of diffprivlib's ``DPMechanism``:
keyword-only constructor, every argument checked (``TypeError`` for a wrong type,
``ValueError`` naming the accepted range), checks repeated at release time.
"""

from __future__ import annotations

import math
import numbers
import warnings
from typing import ClassVar

import numpy as np

from pymc_manidp import mcmc
from pymc_manidp.geometry.validation import (
    check_bool,
    check_manifold,
    check_positive_int,
    check_positive_real,
    check_sigma,
)
from pymc_manidp.laws import exact
from pymc_manidp.mcmc import MCMCSettings, SamplerCache
from pymc_manidp.privacy.budget import PrivacyBudget, current_budget
from pymc_manidp.privacy.diagnostics import DiagnosticsError, check_run
from pymc_manidp.privacy.release import Calibration, Release, build_release
from pymc_manidp.rng import resolve_rng
from pymc_manidp.stats import reductions
from pymc_manidp.stats.domain import DataDomain
from pymc_manidp.stats.sensitivity import calibrated_sigma

__all__ = ["EXACT_SAMPLERS", "Mechanism", "available_samplers"]

EXACT_SAMPLERS: tuple[str, ...] = ("exact",)

_warned: set[str] = set()


def _deprecated(old: str, message: str) -> None:
    """Warn ``FutureWarning`` once per process for the deprecated name ``old``."""
    if old not in _warned:
        _warned.add(old)
        warnings.warn(message, FutureWarning, stacklevel=3)


def available_samplers(manifold) -> tuple[str, ...]:
    """Samplers of a law on ``manifold``: ``"exact"`` where an exact sampler exists,
    then the MCMC ones."""
    return (*(EXACT_SAMPLERS if exact.has_exact_sampler(manifold) else ()), *mcmc.SAMPLERS)


def _size(size) -> tuple[int, ...]:
    if isinstance(size, numbers.Integral) and not isinstance(size, bool):
        return (check_positive_int(size, "size"),)
    try:
        return tuple(check_positive_int(s, "size") for s in size)
    except TypeError:
        raise TypeError(f"size must be an int or a tuple of ints, got {size!r}") from None


class Mechanism:
    """Base class of the mechanisms: what every mechanism object shares.

    Subclassed by :class:`~pymc_manidp.mechanisms.LaplaceMechanism`,
    :class:`~pymc_manidp.mechanisms.KNGMechanism` and the Euclidean baselines.

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

    Attributes
    ----------
    name : str
    restricted : bool
        Whether the law lives on the public ball only.
    footpoint_free_normalizer : bool
        Whether the normalizing constant is free of the data (then ``sigma = Delta/eps``
        rather than ``2 Delta/eps``, 2021 Thm 1).
    mcmc_law : PyMC distribution class or None
        The law's distribution for MCMC (``mcmc.polar_model`` calls it with the
        ``pm.Data`` of :meth:`mcmc_inputs` and σ, and ``mcmc_law_kwargs``); None: the
        mechanism has an exact sampler only.
    mcmc_chart_on_ball : bool
        Whether the MCMC chart is capped at the public ball's edge (a law that is not
        normalizable, or mixes badly, beyond the ball: KNG on the median).
    value_on_manifold : bool
        Whether the released value is a point of the manifold (validated when
        recorded) rather than an ambient value.
    release_notes : tuple of str
        The mechanism's own caveats, first in every Release's notes.
    last_sampler_info : dict or None
        Rejection statistics of the last :meth:`sample` (for the curator).
    """

    name = "mechanism"
    restricted = True
    footpoint_free_normalizer = False
    mcmc_law = None
    mcmc_law_kwargs: ClassVar[dict] = {}
    mcmc_chart_on_ball = False
    value_on_manifold = True
    release_notes: tuple[str, ...] = ()
    last_sampler_info: dict | None = None

    def __init__(self, manifold, *, epsilon, center, radius):
        self.manifold = check_manifold(manifold)
        self.epsilon = check_positive_real(epsilon, "epsilon")
        self.domain = DataDomain(manifold, center, radius)
        self.mcmc_cache = SamplerCache()  # compiled MCMC models, per (n, sampler, backend)

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "scale" in cls.__dict__ and "sigma" not in cls.__dict__:
            # written for the old name: its scale(n) is its sigma(n), so that a release
            # draws with the sigma the subclass means (a silently ignored override
            # would release with another sigma than the one it claims)
            warnings.warn(
                f"{cls.__name__} overrides scale(n), which is renamed sigma(n): "
                "override sigma instead; scale will be removed",
                FutureWarning,
                stacklevel=2,
            )
            old = cls.__dict__["scale"]

            def sigma(self, n, _old=old):
                return _old(self, n)

            sigma._from_scale = True
            cls.sigma = sigma

    # --- the privacy map --------------------------------------------------------------
    def sensitivity(self, n: int) -> float:  # pragma: no cover - abstract
        """The mechanism's sensitivity ``Delta`` for ``n`` records (public)."""
        raise NotImplementedError

    def check_law_exists(self, sigma: float) -> None:
        """Raise ``ValueError`` if the density with scale ``sigma`` is not normalizable."""

    @property
    def epsilon_per_noise(self) -> float:
        """The budget each noise draw spends: ``epsilon``, or a share of it when the
        budget is split over independent noises (basic composition)."""
        return self.epsilon

    def _sigma_of(self, sensitivity: float) -> float:
        """σ for the sensitivity ``sensitivity`` (checked; the law must exist)."""
        sigma = calibrated_sigma(
            sensitivity,
            self.epsilon_per_noise,
            footpoint_free_normalizer=self.footpoint_free_normalizer,
        )
        return self._checked_sigma(sigma)

    def _checked_sigma(self, sigma) -> float:
        sigma = check_sigma(sigma)
        self.check_law_exists(sigma)
        return sigma

    def sigma(self, n: int) -> float:
        """The scale ``sigma`` for ``n`` records: ``2 Delta/eps`` (or ``Delta/eps``).

        Raises ``ValueError`` when ``sigma`` is not a normal float (``epsilon`` too
        large or too small for floating point) or the law does not exist.
        """
        return self._sigma_of(self.sensitivity(n))

    def scale(self, n: int) -> float:
        """Deprecated alias of :meth:`sigma` (warns ``FutureWarning`` once)."""
        _deprecated("scale", "Mechanism.scale(n) is renamed sigma(n); scale will be removed")
        # the sigma below any subclass that still overrides scale (reached through its
        # super().scale(n)); for every other mechanism simply its sigma(n)
        for klass in type(self).__mro__:
            own = klass.__dict__.get("sigma")
            if own is not None and not getattr(own, "_from_scale", False):
                return own(self, n)
        raise AssertionError("Mechanism defines sigma")  # pragma: no cover

    def calibrate(self, n: int) -> Calibration:
        """``n``, Δ and σ of a release of ``n`` records, each computed once.

        Examples
        --------
        >>> import pymc_manidp as pmd
        >>> mech = pmd.KNGMechanism(pmd.Sphere(dim=2), epsilon=1.0, center=[0, 0, 1.0],
        ...                         radius=0.3)
        >>> cal = mech.calibrate(100)
        >>> cal.sigma == 2 * cal.sensitivity / 1.0 == mech.sigma(100)
        True
        """
        n = check_positive_int(n, "n")
        sensitivity = self.sensitivity(n)
        if getattr(self.sigma, "__func__", None) is Mechanism.sigma:
            sigma = self._sigma_of(sensitivity)
        else:  # a subclass's own sigma(n), e.g. the deliberately broken one of an audit
            sigma = self._checked_sigma(self.sigma(n))
        return Calibration(n=n, sensitivity=float(sensitivity), sigma=float(sigma))

    # --- hooks (data already checked) ---------------------------------------------------
    @property
    def samplers(self) -> tuple[str, ...]:
        """The samplers this mechanism releases with on its manifold."""
        if self.mcmc_law is None:
            return EXACT_SAMPLERS
        return available_samplers(self.manifold)

    def exact_draws(self, data, sigma, size, rng):  # pragma: no cover - abstract
        """``size`` exact draws (an ``ExactDraws``) of the law with scale ``sigma``
        for checked ``data``."""
        raise NotImplementedError

    def mcmc_inputs(self, data):  # pragma: no cover - abstract
        """``(mode, inputs)`` for checked data: the density's mode (private; the
        polar chart's origin) and its data-dependent inputs, named as the
        ``pm.Data`` of the model (:func:`~pymc_manidp.mcmc.polar_data`)."""
        raise NotImplementedError

    def _polar_model(self, mode, sigma, inputs):
        return mcmc.polar_model(
            self.manifold,
            mode,
            sigma,
            self.mcmc_law,
            inputs=inputs,
            law_kwargs=self.mcmc_law_kwargs,
            domain=self.domain if self.mcmc_chart_on_ball else None,
        )

    def model(self, data, *, clip=False):
        """The ``pm.Model`` whose deterministic ``release`` follows the mechanism's law.

        The law is sampled on the manifold in a polar chart at its mode (for a
        restricted law the unrestricted one, conditioned on the ball by keeping the
        draws inside). σ, the chart and the density's inputs are ``pm.Data``
        (``mcmc.polar_model``).
        """
        self._check_sampler("nuts")
        data = self.domain.check(data, clip=check_bool(clip, "clip"))
        cal = self.calibrate(reductions.n_rows(data))
        mode, inputs = self.mcmc_inputs(data)
        return self._polar_model(mode, cal.sigma, inputs)

    # --- what users call --------------------------------------------------------------
    def sample(self, data, size, *, random_seed=None, clip=False):
        """``size`` i.i.d. draws ``(*size, *point_shape)`` of the mechanism's exact law.

        For audits, tests and experiments' replicates: each draw alone is an ε-DP
        release of ``data``; all of them together are not (their privacy losses add
        up). ``size`` is an int or a tuple of ints. The rejection statistics of the
        call are kept in the attribute ``last_sampler_info``.

        Examples
        --------
        >>> import numpy as np
        >>> import pymc_manidp as pmd
        >>> S = pmd.Sphere(dim=2)
        >>> mech = pmd.KNGMechanism(S, epsilon=1.0, center=[0, 0, 1.0], radius=0.7)
        >>> mech.sample(np.array([[0, 0, 1.0], [0, 0.6, 0.8]]), 5, random_seed=0).shape
        (5, 3)
        >>> 0 < mech.last_sampler_info["acceptance_rate"] <= 1
        True
        """
        shape = _size(size)
        if current_budget() is not None:  # each draw spends epsilon: never uncharged
            raise ValueError(
                "sample() draws many values of the law, each an epsilon-DP release (for "
                "audits and tests on public data): it is not charged to the privacy budget "
                "entered here; use release() inside 'with budget:'"
            )
        rng, _ = resolve_rng(random_seed)
        self._check_sampler("exact")
        data = self.domain.check(data, clip=check_bool(clip, "clip"))
        cal = self.calibrate(reductions.n_rows(data))
        out = self.exact_draws(data, cal.sigma, math.prod(shape), rng)
        self.last_sampler_info = {"proposals": out.proposals, **out.info}
        points = np.asarray(out.points)
        return points.reshape((*shape, *points.shape[1:]))

    def release(
        self,
        data,
        *,
        sampler="exact",
        random_seed=None,
        settings=None,
        draws=None,
        tune=None,
        chains=None,
        clip=False,
        skip_diagnostics=False,
        estimate_delta=False,
        budget=None,
        delta=None,
    ) -> Release:
        """Release a private value of ``data``; returns a :class:`~pymc_manidp.Release`.

        ``sampler="exact"`` (default): pure ε-DP, ``delta = 0``, the rejection
        statistics in ``Release.sampler_info``; ``"nuts"``/``"metropolis"``: MCMC,
        approximately DP (``delta=None``, see its notes). How long a run samples is
        one :class:`~pymc_manidp.mcmc.MCMCSettings` (``settings``; ``draws``,
        ``tune``, ``chains`` override its fields); the defaults are PyMC's (4 chains
        of 1,000 tuning steps and 1,000 draws): thousands of effective draws for the
        gate on the built-in targets (docs/benchmarks.md). The released value is one
        post-tuning draw (inside the public ball when the law is restricted); more
        draws sharpen the diagnostics, more tuning the convergence. ``random_seed``
        makes the release reproducible, for tests only: anyone who guesses the seed
        can reproduce the noise. ``estimate_delta=True`` (MCMC only) draws the
        released value from a fixed coupled kernel and records its L-lag coupling
        estimate δ̂ in ``Release.delta_estimate`` (curator side, an estimate;
        ``delta`` stays ``None``).

        ``budget`` (a :class:`~pymc_manidp.privacy.budget.PrivacyBudget`; default: the
        one entered with ``with budget:``, if any) is charged the release's (ε, δ)
        before the data are read: a release that would overspend raises
        :class:`~pymc_manidp.privacy.budget.BudgetExceededError` and reads nothing. An
        MCMC release has no proved δ, so charging one needs ``delta=`` (the δ the
        curator assumes, charged and noted in the release) or ``estimate_delta=True``
        (ε charged; δ̂ goes to the budget's "estimated, not proved" column). A charge
        stands even if the release then fails (the failure may depend on the data).

        An MCMC release compiles the model on the mechanism's first release of ``n``
        points with that sampler and reuses it for later data sets of the same size,
        every ``pm.Data`` replaced by the new data's values before sampling.
        """
        # every premise is checked before any work on the data
        is_mcmc = self._check_sampler(sampler)
        if is_mcmc:
            settings = MCMCSettings.resolve(settings, draws=draws, tune=tune, chains=chains)
        clip = check_bool(clip, "clip")
        skip_diagnostics = check_bool(skip_diagnostics, "skip_diagnostics")
        if check_bool(estimate_delta, "estimate_delta") and not is_mcmc:  # issue 17
            raise ValueError(
                "estimate_delta=True is for MCMC samplers: an exact release has delta = 0"
            )
        rng, policy = resolve_rng(random_seed)
        if is_mcmc and reductions.is_dask(data):
            raise ValueError(
                f"the {sampler} sampler keeps the data in its model: with a Dask array use "
                "sampler='exact', which reads it in passes and never gathers it"
            )
        budget, charge = self._charge(budget, delta, is_mcmc, estimate_delta, sampler)
        if budget is None:
            return self._release_checked(
                data, sampler, rng, policy, settings, clip, skip_diagnostics, estimate_delta,
                random_seed, notes=(),
            )  # fmt: skip
        notes = () if delta is None else (_assumed_delta_note(charge[1]),)
        try:
            rel = self._release_checked(
                data, sampler, rng, policy, settings, clip, skip_diagnostics, estimate_delta,
                random_seed, notes=notes,
            )  # fmt: skip
        except BaseException as err:
            budget.fail(charge[0], err)
            raise
        budget.settle(charge[0], rel)
        return rel

    def _release_checked(
        self, data, sampler, rng, policy, settings, clip, skip_diagnostics, estimate_delta,
        random_seed, notes,
    ) -> Release:  # fmt: skip
        """The release path after its premises are checked (and any charge is made)."""
        is_mcmc = sampler not in EXACT_SAMPLERS
        data = self.domain.check(data, clip=clip)
        cal = self.calibrate(reductions.n_rows(data))  # raises if the law does not exist
        fields = {"seed_policy": policy, "opt_outs": ("clip",) if clip else (), "notes": notes}
        if not is_mcmc:
            out = self.exact_draws(data, cal.sigma, 1, rng)
            # the rejection statistics depend on the data: for the curator only
            info = {"proposals": out.proposals, **out.info}
            return self._record(out.points[0], cal, "exact", sampler_info=info, **fields)
        # one pass over the data per leapfrog step: refuse runs that would take hours
        mcmc.check_mcmc_budget(self.manifold, cal.n, settings)
        mode, inputs = self.mcmc_inputs(data)
        idata, info = self._run_mcmc(cal, mode, inputs, sampler, settings, rng, skip_diagnostics)
        if "failed_checks" in info:
            fields["opt_outs"] = (*fields["opt_outs"], "skip_diagnostics")
        value = self._pick_draw(idata, rng)
        if estimate_delta:  # issue 17: the value comes from the chain whose delta is estimated
            value, fields["delta_estimate"] = self._coupled_draw(
                mode, cal.sigma, inputs, sampler, settings, random_seed
            )
        return self._record(value, cal, sampler, diagnostics=idata, sampler_info=info, **fields)

    def _charge(self, budget, delta, is_mcmc, estimate_delta, sampler):
        """Charge the release to ``budget`` (or the current one) before any data are read.

        Returns ``(budget, (index, delta charged))``, or ``(None, None)`` without a budget.
        """
        if budget is None:
            budget = current_budget()
        elif not isinstance(budget, PrivacyBudget):
            raise TypeError(f"budget must be a PrivacyBudget, got {type(budget).__name__}")
        if delta is not None:
            if not is_mcmc:
                raise ValueError(
                    "delta= states the delta of an MCMC release charged to a budget; an "
                    "exact release has delta = 0 (proved): drop delta="
                )
            if budget is None:
                raise ValueError(
                    "delta= is the delta an MCMC release is charged to a budget with: pass "
                    "budget= (or release inside 'with budget:')"
                )
            delta = check_positive_real(delta, "delta")
            if delta >= 1:
                raise ValueError(f"delta must be in (0, 1), got {delta!r}")
        if budget is None:
            return None, None
        if not is_mcmc:
            basis, charged = "proved", 0.0
        elif delta is not None:
            basis, charged = "assumed", delta
        elif estimate_delta:
            basis, charged = "estimated", 0.0
        else:
            raise ValueError(
                f"an MCMC release ({sampler}) has no proved delta, so a budget cannot be "
                "charged for it: state the delta you assume (delta=1e-6, recorded as your "
                "assumption), or pass estimate_delta=True (the coupling estimate, recorded "
                "apart as estimated, not proved), or release with sampler='exact'"
            )
        index = budget.charge(
            self.epsilon,
            charged,
            delta_basis=basis,
            mechanism=self.name,
            sampler=sampler,
            status="charged",
        )
        return budget, (index, charged)

    # --- the steps of a release -----------------------------------------------------------
    def _check_sampler(self, sampler) -> bool:
        """Refuse a sampler this mechanism lacks on its manifold; True for MCMC ones."""
        known = (*EXACT_SAMPLERS, *mcmc.SAMPLERS)
        available = self.samplers
        if sampler not in available:
            if sampler in known:
                raise ValueError(
                    f"no {sampler!r} sampler exists for {self.name} on {self.manifold}: "
                    f"available samplers for it are {', '.join(available)}"
                )
            raise ValueError(f"unknown sampler {sampler!r}; available: {', '.join(available)}")
        return sampler not in EXACT_SAMPLERS

    def _run_mcmc(self, cal, mode, inputs, sampler, settings, rng, skip_diagnostics):
        """Sample the polar model at ``mode`` (compiled once per ``n``), gate the run.

        Returns the run (ArviZ ``DataTree``) and the Release's ``sampler_info``.
        """
        backend = mcmc.sampler_backend(sampler, settings.backend)
        compiled = self.mcmc_cache.find(cal.n, sampler, backend)
        if compiled is None:
            model = self._polar_model(mode, cal.sigma, inputs)
            compiled = self.mcmc_cache.add(
                cal.n, mcmc.CompiledSampler(model, sampler, backend=backend)
            )
        seed = int(rng.integers(2**31 - 1))
        values = mcmc.polar_data(self.manifold, mode, cal.sigma, inputs)
        idata = compiled.sample(values, settings, random_seed=seed)
        report = check_run(idata)
        # which NUTS implementation drew the run (nutpie or PyMC's): not data-dependent
        info = {"backend": compiled.backend}
        if not report.passed:
            if not skip_diagnostics:
                raise DiagnosticsError(
                    "the MCMC run failed its convergence checks, so nothing is released: "
                    + "; ".join(report.failures)
                    + ". Run longer (more draws/tune) or more chains; skip_diagnostics=True "
                    "releases anyway and records that choice."
                )
            # the failures quote data-dependent numbers (R-hat, ESS): the curator keeps
            # them; the published record says only that the check was skipped
            info["failed_checks"] = list(report.failures)
        return idata, info

    def _pick_draw(self, idata, rng):
        """One uniformly random post-tuning draw (inside the public ball if restricted)."""
        flat = np.asarray(idata.posterior["release"].values)
        flat = flat.reshape((-1, *self.manifold.point_shape))
        candidates = np.arange(len(flat))
        if self.restricted:
            inside = self.domain.distances(flat) <= self.domain.radius
            candidates = candidates[inside]
            if len(candidates) < 0.5 * len(flat):
                raise DiagnosticsError(
                    f"only {len(candidates)} of {len(flat)} draws fell inside the public "
                    "ball: the restricted law is poorly represented; use more data or a "
                    "larger epsilon"
                )
        return flat[rng.choice(candidates)]

    def _coupled_draw(self, mode, sigma, inputs, sampler, settings, random_seed):
        """The value at time ``tune`` of a fixed coupled kernel and its δ̂ record.

        The kernel samples a fresh model of the same data (the cached compiled one
        may hold another data set's values), built from the mode and σ already
        computed. Issue 17; :func:`~pymc_manidp.privacy.coupling.coupled_release`.
        """
        from pymc_manidp.privacy.coupling import coupled_release

        rng, _ = resolve_rng(random_seed)
        rng = np.random.default_rng([int(rng.integers(2**63 - 1)), 17])  # apart from the run's
        value, record = coupled_release(
            self._polar_model(mode, sigma, inputs),
            epsilon=self.epsilon,
            t=max(settings.tune, 1),
            kernel="hmc" if sampler == "nuts" else "rwmh",
            domain=self.domain if self.restricted else None,
            random_seed=rng,
        )
        # the record carries its own note; Release.notes are published, the estimate is not
        return np.asarray(value), record

    def _record(self, value, cal, sampler, notes=(), **fields) -> Release:
        """The Release of ``value`` (validated when it is a point of the manifold)."""
        return build_release(
            value=self.manifold.validate(value) if self.value_on_manifold else value,
            mechanism=self.name,
            epsilon=self.epsilon,
            calibration=cal,
            sampler=sampler,
            exact=sampler in EXACT_SAMPLERS,
            extra_notes=(*self.release_notes, *notes),
            restricted=self.restricted,
            domain=self.domain,
            **fields,
        )


def _assumed_delta_note(delta: float) -> str:
    return (
        f"charged to a privacy budget with delta = {delta:g}: the curator's assumption, "
        "not a proof (an MCMC release has no proved delta)"
    )
