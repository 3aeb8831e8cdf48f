r"""The base class of the mechanisms: every mechanism object owns its release.

A release is one straight line down the layers (docs/architecture.md):

0. **public checks**, before any privacy budget is charged
   (:meth:`Mechanism.public_calibration`): the data's type, shape and ``n`` (never
   their values), σ, the law's existence and the exact sampler's range;
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
from pymc_manidp._progress import _progress_enabled, progress_bar, progress_status
from pymc_manidp._validation import (
    check_bool,
    check_positive_int,
    check_positive_real,
    check_sigma,
)
from pymc_manidp.geometry._numba.cache import check_environment_once
from pymc_manidp.geometry.base import check_manifold
from pymc_manidp.geometry.capabilities import Projection
from pymc_manidp.laws import exact
from pymc_manidp.mcmc import MCMCSettings, SamplerCache
from pymc_manidp.mechanisms import stacks
from pymc_manidp.mechanisms.request import ReleaseRequest
from pymc_manidp.privacy.budget import PrivacyBudget, budget_to_charge, current_budget
from pymc_manidp.privacy.diagnostics import DiagnosticsError, check_run
from pymc_manidp.privacy.release import (
    Calibration,
    FailedRelease,
    Release,
    Releases,
    build_release,
)
from pymc_manidp.rng import resolve_rng
from pymc_manidp.stats import reductions
from pymc_manidp.stats.domain import DataDomain
from pymc_manidp.stats.frechet import frechet_mean
from pymc_manidp.stats.sensitivity import calibrated_sigma

__all__ = [
    "EXACT_SAMPLERS",
    "Mechanism",
    "assumed_delta_note",
    "available_samplers",
    "gate_run",
]

EXACT_SAMPLERS: tuple[str, ...] = ("exact",)


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
    """

    name = "mechanism"
    restricted = True
    footpoint_free_normalizer = False
    mcmc_law = None
    mcmc_law_kwargs: ClassVar[dict] = {}
    mcmc_chart_on_ball = False
    value_on_manifold = True
    release_notes: tuple[str, ...] = ()

    def __init__(self, manifold, *, epsilon, center, radius):
        self.manifold = check_manifold(manifold)
        self.epsilon = check_positive_real(epsilon, "epsilon")
        self.domain = DataDomain(manifold, center, radius)
        self.mcmc_cache = SamplerCache()  # compiled MCMC models, per (n, sampler, backend)

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if callable(cls.__dict__.get("scale")) and "sigma" not in cls.__dict__:
            # sigma(n)'s name before 0.1.0 (docs/changelog.md): an override written for it
            # would now be ignored, and the subclass release with another sigma than it means
            raise TypeError(
                f"{cls.__name__} overrides scale(n), which was renamed sigma(n) in 0.1.0: "
                "override sigma(n) instead"
            )

    # --- the privacy map --------------------------------------------------------------
    def sensitivity(self, n: int) -> float:  # pragma: no cover - abstract
        """The mechanism's sensitivity ``Delta`` for ``n`` records (public)."""
        raise NotImplementedError

    def check_law_exists(self, sigma: float) -> None:
        """Raise ``ValueError`` if the density with scale ``sigma`` is not normalizable."""

    def check_precision(self, sensitivity: float, sigma: float) -> None:
        """Raise ``ValueError`` where the manifold's rounding in the public ball is not
        small beside Δ and σ (``DataDomain.check_precision``: the hyperboloid far from
        its origin); a no-op on every other shipped space."""
        self.domain.check_precision(sensitivity, sigma, f"{self.name} on {self.manifold}")

    def check_exact_sigma(self, sigma: float) -> None:
        """Raise ``ValueError`` if the exact sampler cannot represent the law with scale
        ``sigma`` in floating point (a public fact: checked before any charge)."""

    @property
    def planned_charge(self) -> tuple:
        """The charge one exact release makes to a budget, as a plan declares it:
        ``(epsilon, 0.0)`` (a Gaussian mechanism's adds its μ)."""
        return (self.epsilon, 0.0)

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
        self.check_precision(sensitivity, sigma)
        return Calibration(n=n, sensitivity=float(sensitivity), sigma=float(sigma))

    def public_calibration(self, data, sampler: str = "exact") -> Calibration:
        """The release's ``Calibration`` from public facts only, before any charge.

        ``n`` and the shape of a record come from the data's shape
        (``DataDomain.public_n``, no value read), then σ (a normal float), the
        law's existence and, for ``sampler="exact"``, the sampler's numerical range
        (:meth:`~pymc_manidp.mechanisms.Mechanism.check_exact_sigma`). Every refusal
        here is one a privacy budget is never charged for (docs/privacy-budget.md).
        """
        cal = self.calibrate(self.domain.public_n(data))
        if sampler in EXACT_SAMPLERS:
            self.check_exact_sigma(cal.sigma)
        return cal

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

    def exact_draws_stack(self, data, n, sigma, rng):
        """One exact draw for each of ``R`` checked data sets of ``n`` records.

        ``data`` holds them end to end, ``(R * n, *point_shape)``, as the check
        returned them; ``rng`` is one Generator, or a list of ``R``, one per data set
        (each row then draws from its own only). Returns ``(points, infos)``:
        ``points`` ``(R, *point_shape)``, row ``j`` a draw of the law for data set
        ``j`` at scale ``sigma``, independent of the other rows; ``infos`` one
        ``sampler_info`` dict per row (for the curator). This default draws data set
        by data set with :meth:`exact_draws`; mechanisms whose sampler vectorizes
        across data sets override it (the Laplace, KNG on the mean).
        """
        points, infos = [], []
        for j, s in enumerate(range(0, len(data), n)):
            source = rng[j] if isinstance(rng, list) else rng
            out = self.exact_draws(data[s : s + n], sigma, 1, source)
            points.append(out.points[0])
            infos.append({"proposals": out.proposals, **out.info})
        return np.stack(points), infos

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

    def _release_model(self, mode, sigma, inputs):
        """The model a NUTS or Metropolis release samples: the fused density where the
        manifold has kernels for this law (``mcmc.fused_law``), else :meth:`_polar_model`'s
        graph; the same law either way."""
        domain = self.domain if self.mcmc_chart_on_ball else None
        law = mcmc.fused_law(self.manifold, self.mcmc_law, self.mcmc_law_kwargs, domain=domain)
        if law is None:
            return self._polar_model(mode, sigma, inputs)
        return mcmc.fused_model(self.manifold, mode, sigma, law, inputs=inputs)

    def model(self, data, *, clip=False):
        """The ``pm.Model`` whose deterministic ``release`` follows the mechanism's law.

        The law is sampled on the manifold in a polar chart at its mode (for a
        restricted law the unrestricted one, conditioned on the ball by keeping the
        draws inside). σ, the chart and the density's inputs are ``pm.Data``
        (``mcmc.polar_model``). This is PyTensor's graph of the law, the model to
        inspect or extend; a NUTS release samples the same log-density through one
        fused kernel where the manifold has one (``mcmc.fused_model``).
        """
        self._check_sampler("nuts")
        data = self.domain.check(data, clip=check_bool(clip, "clip"))
        cal = self.calibrate(reductions.n_rows(data))
        mode, inputs = self.mcmc_inputs(data)
        return self._polar_model(mode, cal.sigma, inputs)

    def warm_cache(self, *, backend=None) -> int:
        """Compile this mechanism's NUTS model into the on-disk cache, before any data.

        A first NUTS release of a space and law compiles its model: a few CPU seconds
        where the manifold has fused kernels (every shipped space, for the Laplace and
        KNG on the mean), 34-80 through PyTensor's graph (KNG on the median, a user's
        own manifold; docs/benchmarks.md, "Fused log-densities").
        The compiled entry points are keyed on the model's structure, which depends on
        the manifold and the law, never on n, ε, σ or the data, nor on the public ball
        except for KNG on the median, whose chart is capped at the ball's edge
        (``tests/mcmc/test_first_release_inputs.py``): compiling once here, at install
        or in a CI job whose cache is kept, makes every later first release of this
        mechanism's kind (for the median: on this ball), in any process of this user, a
        warm one.

        It reads no data and charges no budget: the model is built from records all
        at the public center (a public fact), and nothing is sampled.

        Parameters
        ----------
        backend : {"nutpie", "pymc", "auto"}, optional
            As ``MCMCSettings.backend`` (default: ``PYMC_MANIDP_NUTS_BACKEND``, else
            nutpie). PyMC's NUTS compiles inside each run and caches nothing here.

        Returns
        -------
        int
            How many of nutpie's two compiled entry points were already in the cache
            (2: nothing was compiled; 0 with PyMC's NUTS).

        Raises
        ------
        ValueError
            This mechanism has no NUTS sampler on its manifold.
        """
        self._check_sampler("nuts")
        mcmc.nuts_backend(backend)  # a wrong backend is refused before the model is built
        # many records, so that sigma is one any release would use (the law is
        # normalizable there); their values and number do not enter the cache's key
        center = np.asarray(self.domain.center, dtype=float)
        records = self.domain.check(np.broadcast_to(center, (1000, *center.shape)).copy())
        mode, inputs = self.mcmc_inputs(records)
        model = self._release_model(mode, self.calibrate(1000).sigma, inputs)
        return mcmc.CompiledSampler(model, "nuts", backend=backend).cache_hits

    # --- what users call --------------------------------------------------------------
    def sample(self, data, size, *, random_seed=None, clip=False, return_info=False):
        """``size`` i.i.d. draws ``(*size, *point_shape)`` of the mechanism's exact law.

        For audits, tests and experiments' replicates: each draw alone is an ε-DP
        release of ``data``; all of them together are not (their privacy losses add
        up). ``size`` is an int or a tuple of ints. With ``return_info=True`` the
        call returns ``(draws, info)``, ``info`` the rejection statistics of the call
        (a dict like ``Release.sampler_info``: they depend on the data, so they are
        for the curator only).

        Examples
        --------
        >>> import numpy as np
        >>> import pymc_manidp as pmd
        >>> S = pmd.Sphere(dim=2)
        >>> mech = pmd.KNGMechanism(S, epsilon=1.0, center=[0, 0, 1.0], radius=0.7)
        >>> data = np.array([[0, 0, 1.0], [0, 0.6, 0.8]])
        >>> mech.sample(data, 5, random_seed=0).shape
        (5, 3)
        >>> draws, info = mech.sample(data, 5, random_seed=0, return_info=True)
        >>> 0 < info["acceptance_rate"] <= 1
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
        clip = check_bool(clip, "clip")
        return_info = check_bool(return_info, "return_info")
        cal = self.public_calibration(data, "exact")
        data = self.domain.check(data, clip=clip)
        out = self.exact_draws(data, cal.sigma, math.prod(shape), rng)
        info = {"proposals": out.proposals, **out.info}
        points = np.asarray(out.points)
        points = points.reshape((*shape, *points.shape[1:]))
        return (points, info) if return_info else points

    def release(
        self,
        data,
        *,
        sampler="exact",
        random_seed=None,
        settings=None,
        clip=False,
        skip_diagnostics=False,
        estimate_delta=False,
        budget=None,
        delta=None,
        project=False,
        progressbar=None,
    ) -> Release:
        """Release a private value of ``data``; returns a :class:`~pymc_manidp.Release`.

        ``sampler="exact"`` (default): pure ε-DP, ``delta = 0``, the rejection
        statistics in ``Release.sampler_info``; ``"nuts"``/``"metropolis"``: MCMC,
        approximately DP (``delta=None``, see its notes). How long a run samples is
        one :class:`~pymc_manidp.mcmc.MCMCSettings` (``settings``, e.g.
        ``MCMCSettings(draws=2000, chains=4)``); its defaults are PyMC's (4 chains
        of 1,000 tuning steps and 1,000 draws), and NUTS at the defaults first tries
        4 x (300 + 500), released from when it passes the gate (119 of 120 trials
        on the built-in targets, at least 1.6 times the effective draws the gate
        asks, docs/benchmarks.md), the full
        run sampling only when it fails (``MCMCSettings.short_run``; which runs
        sampled is in ``sampler_info["runs"]``). The released value is one
        post-tuning draw (inside the public ball when the law is restricted); more
        draws sharpen the diagnostics, more tuning the convergence. ``random_seed``
        makes the release reproducible, for tests only: anyone who guesses the seed
        can reproduce the noise. ``estimate_delta=True`` (MCMC only) draws the
        released value from a fixed coupled kernel and records its L-lag coupling
        estimate δ̂ in ``Release.delta_estimate`` (curator side, an estimate;
        ``delta`` stays ``None``).

        ``budget`` (a :class:`~pymc_manidp.privacy.budget.PrivacyBudget`; default: the
        one entered with ``with budget:``, if any; inside that block another budget is
        refused, since the entered one would go uncharged) is charged the release's
        (ε, δ) before the data are read: a release that would overspend raises
        :class:`~pymc_manidp.privacy.budget.BudgetExceededError` and reads nothing. An
        MCMC release has no proved δ, so charging one needs ``delta=`` (the δ the
        curator assumes, charged and noted in the release) or ``estimate_delta=True``
        (ε charged; δ̂ goes to the budget's "estimated, not proved" column). A charge
        stands even if the release then fails (the failure may depend on the data).

        An MCMC release compiles the model on the mechanism's first release of ``n``
        points with that sampler and reuses it for later data sets of the same size,
        every ``pm.Data`` replaced by the new data's values before sampling.

        ``project=True`` moves every record to the nearest point of the manifold
        before it is checked (``manifold.project``: the nearest rotation, unit
        vector or SPD matrix), for records that are on the manifold up to rounding.
        Explicit and recorded: ``"project"`` joins the public ``opt_outs`` (like
        ``"clip"``), and how many records moved and the largest distance moved
        (Euclidean, in the ambient coordinates) go to ``sampler_info["projection"]``,
        for the curator only (they depend on the data).

        ``progressbar`` (as ``pm.sample``'s): an MCMC release shows a spinner while it
        compiles and the sampler's own progress (nutpie's or PyMC's) while it samples;
        an exact release of a Dask array shows a bar per pass over the data. ``None``
        (default): only when stderr is a terminal and ``$CI`` is unset; ``True`` /
        ``False`` force it. It never changes the released value.
        """
        try:
            # the command line's checks of the environment, for Python (issue 43)
            check_environment_once()
            # every premise is checked before any work on the data
            data = self.manifold.coerce(data)  # e.g. a SciPy Rotation, converted once here
            project = check_bool(project, "project")
            if project and not isinstance(self.manifold, Projection):
                raise ValueError(
                    f"project=True: {self.manifold} offers no projection (Rotations, Sphere and "
                    "SPD do); pass points of the manifold"
                )
            if project and reductions.is_dask(data):
                raise ValueError(
                    "project=True takes data in memory: project a Dask array chunk by chunk "
                    "(data.map_blocks(manifold.project)) and release that"
                )
            is_mcmc = self._check_sampler(sampler)
            settings = MCMCSettings.resolve(settings)  # type-checked for every sampler
            clip = check_bool(clip, "clip")
            skip_diagnostics = check_bool(skip_diagnostics, "skip_diagnostics")
            estimate_delta = check_bool(estimate_delta, "estimate_delta")
            if estimate_delta and not is_mcmc:  # issue 17
                raise ValueError(
                    "estimate_delta=True is for MCMC samplers: an exact release has delta = 0"
                )
            shown = _progress_enabled(progressbar)
            rng, policy = resolve_rng(random_seed)
            if is_mcmc and reductions.is_dask(data):
                raise ValueError(
                    f"the {sampler} sampler keeps the data in its model: with a Dask array use "
                    "sampler='exact', which reads it in passes and never gathers it"
                )
            terms = self._charge_terms(budget, delta, is_mcmc, estimate_delta, sampler)
            # the δ assumed for a charge (terms: budget, basis, δ charged) is noted
            notes = () if delta is None else (assumed_delta_note(terms[2]),)
            # n, σ, the law and the sampler's range are public: refused before any charge
            request = ReleaseRequest(
                sampler=sampler,
                calibration=self.public_calibration(data, sampler),
                rng=rng,
                seed_policy=policy,
                random_seed=random_seed,
                settings=settings if is_mcmc else None,
                clip=clip,
                project=project,
                skip_diagnostics=skip_diagnostics,
                estimate_delta=estimate_delta,
                progressbar=shown,
                notes=notes,
            )
            if request.is_mcmc:  # the trace's size and the run's time (n) are public:
                # refused before the charge, which would otherwise stand as failed
                mcmc.check_mcmc_memory(request.settings, self.manifold)
                # the time's lower bound is the shortest run the release may sample
                mcmc.check_mcmc_budget(
                    self.manifold, request.calibration.n, self._stages(request)[0]
                )
            budget, charge = self._make_charge(terms, sampler)
        except BaseException:
            # refused before its charge: a ledger made for it is not left behind
            _refused(budget)
            raise
        if budget is None:
            return self._release_checked(data, request)
        try:
            rel = self._release_checked(data, request)
        except BaseException as err:
            budget.fail(charge[0], err)
            raise
        budget.settle(charge[0], rel)
        return rel

    def _release_checked(self, data, request: ReleaseRequest) -> Release:
        """The release path after its premises are checked (and any charge is made):
        ``request`` holds the checked arguments and the calibration computed once."""
        if request.progressbar and reductions.is_dask(data):  # a bar per pass over the data
            with reductions.progress():
                return self._release_steps(data, request)
        return self._release_steps(data, request)

    def _release_steps(self, data, request: ReleaseRequest) -> Release:
        """Steps 1 to 5 of the release path (the module's docstring) for ``request``."""
        cal = request.calibration
        projection = None
        if request.project:
            # each record is moved on its own, by a map fixed in advance (like clip): two
            # data sets that differ in one record still differ in one record after it, so
            # the sensitivity, and the guarantee, hold for the projected data unchanged
            raw = np.asarray(data, dtype=float)
            data = self.manifold.project(raw)
            axes = tuple(range(1, raw.ndim))
            moved = np.sqrt(np.sum((data - raw) ** 2, axis=axes)) if raw.size else np.zeros(0)
            projection = {
                "records_moved": int(np.count_nonzero(moved)),
                "max_distance": float(np.max(moved, initial=0.0)),
            }
        data = self.domain.check(data, clip=request.clip)
        if reductions.n_rows(data) != cal.n:  # the data changed since the charge
            raise ValueError(
                f"the data changed while being released: n was {cal.n} when the release "
                f"was calibrated and charged, {reductions.n_rows(data)} when checked"
            )
        opt_outs = ("clip",) * request.clip + ("project",) * request.project
        fields = {"seed_policy": request.seed_policy, "opt_outs": opt_outs, "notes": request.notes}
        # how far the records moved depends on the data: for the curator only
        extra = {} if projection is None else {"projection": projection}
        if not request.is_mcmc:
            out = self.exact_draws(data, cal.sigma, 1, request.rng)
            # the rejection statistics depend on the data: for the curator only
            info = {"proposals": out.proposals, **out.info, **extra}
            return self._record(out.points[0], cal, "exact", sampler_info=info, **fields)
        mode, inputs = self.mcmc_inputs(data)
        idata, info = self._run_mcmc(request, mode, inputs)
        info = {**info, **extra}
        if "failed_checks" in info:
            fields["opt_outs"] = (*fields["opt_outs"], "skip_diagnostics")
        value = self._pick_draw(idata, request.rng)
        # issue 17: with estimate_delta, the value comes from the chain whose delta is estimated
        if request.estimate_delta:
            value, fields["delta_estimate"] = self._coupled_draw(request, mode, inputs)
        return self._record(
            value, cal, request.sampler, diagnostics=idata, sampler_info=info, **fields
        )

    def release_many(
        self, datasets, *, random_seed=None, clip=False, budget=None, progressbar=None
    ) -> Releases:
        r"""Release each of many data sets, in one call: a ``Releases`` table.

        For simulation studies (issue 26): ``R`` data sets, each released as its own
        pure ε-DP release with the exact sampler, exactly as ``release(data)`` would
        (its own check, calibration, draw and :class:`~pymc_manidp.Release`), with
        the arithmetic shared across data sets: one domain pass over all of them, σ
        computed once per ``n``, and for the Laplace and KNG on the mean one array
        pass per step of the Fréchet means (``pymc_manidp.stats.frechet.frechet_means``)
        and per round of proposals for every data set still waiting
        (``pymc_manidp.laws.exact.sample_laplace_stack``, ``sample_kng_stack``).
        Other mechanisms (KNG on
        the median, the Euclidean baselines) draw data set by data set inside the
        call. The releases are independent: releasing the same records twice spends
        ε twice; each data set is assumed to be its own (e.g. replicates of a
        simulation), and nothing is composed across them.

        Exact sampler only: MCMC releases are refused (each is a run with its own
        diagnostics gate: call :meth:`release` in a loop).

        Parameters
        ----------
        datasets : array of shape ``(R, n, *point_shape)``, or a sequence of arrays
            A stack of ``R`` data sets of ``n`` records, or a list (or tuple) of data
            sets ``(n_j, *point_shape)`` of any sizes (grouped by size, each group
            drawn as a stack). In memory: a Dask array is refused (use
            :meth:`release`, which reads it in passes).
        random_seed : int, Generator, None, or a sequence of them
            One seed for the whole call (tests and simulation studies only: whoever
            guesses it reproduces every release's noise); the same seed gives the same
            values, which then depend on all the data sets of the call. A sequence of
            ``R`` seeds (ints, Generators or None), one per data set: each release
            draws from its own only, so its value does not depend on the other data
            sets or on how a study splits them into calls (the experiments' rule). Each
            release records its own seed policy. ``None``: OS entropy.
        clip : bool
            Move outside records onto the ball's boundary (recorded in each release)
            instead of refusing.
        budget : PrivacyBudget, optional
            Charged ε once **per data set** (default: the budget entered with
            ``with budget:``; another budget is refused inside that block), all
            before any data are read. A call whose ``R`` charges would overspend (or
            leave an optimal budget's plan) is refused before any is made; should
            another process charge the budget meanwhile, the charge that no longer
            fits raises :class:`~pymc_manidp.privacy.budget.BudgetExceededError` and
            the earlier ones are marked failed (no data were read, but the charges
            stand). Each
            data set's charge is settled with its own record: released, or failed
            (its charge stands, as for a failed :meth:`release`).
        progressbar : bool or None
            Show progress over the data sets on stderr (``None``: only in a
            terminal, not under CI; ``pymc_manidp._progress``). Never changes
            the values.

        Returns
        -------
        Releases
            ``R`` records in the order of ``datasets``: a
            :class:`~pymc_manidp.Release` per data set released, a
            :class:`~pymc_manidp.privacy.FailedRelease` (its position, error and
            reason) per data set whose release failed after its data were read
            (non-finite, off the manifold, outside the public ball without ``clip``,
            a draw that failed): the call **keeps going** with the others (issue 38
            item 8), and warns with ``Releases.summary()`` if any failed.
            ``.values`` stacks the values ``(R, *point_shape)`` (and refuses if any
            data set failed: ``.released.values``), ``.failed`` lists the failures.

        Raises
        ------
        ValueError, TypeError
            What is refusable from public facts (shapes, ``n``, σ, the seeds, the
            budget's arguments) refuses the whole call before any charge.
        BudgetExceededError
            The ``R`` charges would overspend: none is made.

        Examples
        --------
        >>> import numpy as np
        >>> import pymc_manidp as pmd
        >>> S = pmd.Sphere(dim=2)
        >>> mech = pmd.KNGMechanism(S, epsilon=1.0, center=[0, 0, 1.0], radius=0.5)
        >>> noise = np.random.default_rng(0).normal(size=(4, 100, 2)) * 0.1
        >>> stack = S.exp_coords(np.array([0, 0, 1.0]), np.clip(noise, -0.3, 0.3))
        >>> rels = mech.release_many(stack, random_seed=1)
        >>> len(rels), rels.values.shape, rels[0].n, rels[0].delta
        (4, (4, 3), 100, 0.0)
        >>> bool(np.array_equal(mech.release_many(stack, random_seed=1).values, rels.values))
        True
        """
        try:
            check_environment_once()
            self._check_sampler("exact")
            clip = check_bool(clip, "clip")
            groups, total = stacks.dataset_groups(self, datasets)
            if isinstance(random_seed, (list, tuple)):
                if len(random_seed) != total:
                    raise ValueError(
                        f"random_seed: give one seed per data set ({total}), got {len(random_seed)}"
                    )
                rng, policy = map(list, zip(*(resolve_rng(s) for s in random_seed), strict=True))
            else:
                rng, policy = resolve_rng(random_seed)
            budget = budget_to_charge(budget)  # refused: another budget than the one entered
            # n, σ, the law, the sampler's range: public, refused before any charge
            cals = {
                stack.shape[1]: self.public_calibration(stack[0], "exact") for _, stack in groups
            }
            if budget is not None:
                # all R charges (and an optimal budget's plan) before the first, summed exactly
                # (not epsilon * R rounded): none is charged if one cannot be
                budget.check_many([self.planned_charge] * total)
        except BaseException:
            _refused(budget)  # refused before any charge: no ledger left behind
            raise
        charges = []
        if budget is not None:  # one charge per data set, before any data are read
            try:
                for _ in range(total):
                    charges.append(self._charge(budget, None, False, False, "exact")[1][0])
            except BaseException as err:
                for index in charges:
                    budget.fail(index, err)
                raise
        try:
            with progress_bar(f"{self.name}: release_many", total, progressbar) as advance:
                made = stacks.release_groups(self, groups, total, rng, policy, clip, cals, advance)
        except BaseException as err:  # an interrupt, or a bug: nothing is returned
            for index in charges:
                budget.fail(index, err)
            raise
        for index, rec in zip(charges, made, strict=False):  # none without a budget
            if isinstance(rec, stacks.Failed):
                budget.fail(index, rec.error)
            else:
                budget.settle(index, rec)
        records = Releases(
            FailedRelease.of(j, rec.n, rec.error) if isinstance(rec, stacks.Failed) else rec
            for j, rec in enumerate(made)
        )
        if records.failed:  # never silent: the table holds each reason
            warnings.warn(f"release_many: {records.summary()}", UserWarning, stacklevel=2)
        return records

    def _charge(self, budget, delta, is_mcmc, estimate_delta, sampler):
        """Charge the release to ``budget`` (or the current one) before any data are read.

        Returns ``(budget, (index, delta charged))``, or ``(None, None)`` without a budget.
        """
        return self._make_charge(
            self._charge_terms(budget, delta, is_mcmc, estimate_delta, sampler), sampler
        )

    def _make_charge(self, terms, sampler):
        """The charge of :meth:`_charge_terms`' ``(budget, basis, delta)`` (one ledger entry)."""
        budget, basis, charged = terms
        if budget is None:
            return None, None
        # a Gaussian mechanism's plan entry carries its mu: an optimal plan then counts
        # the charge by its exact privacy loss (mu-GDP)
        plan_entry = self.planned_charge
        index = budget.charge(
            self.epsilon,
            charged,
            mu=plan_entry[2] if len(plan_entry) > 2 else None,
            delta_basis=basis,
            mechanism=self.name,
            sampler=sampler,
            status="charged",
        )
        return budget, (index, charged)

    def _charge_terms(self, budget, delta, is_mcmc, estimate_delta, sampler):
        """``(budget, delta basis, delta)`` of a charge, its arguments checked; nothing
        charged yet (``budget`` None: no budget)."""
        budget = budget_to_charge(budget)  # refused: another budget than the one entered
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
            return None, None, None
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
        return budget, basis, charged

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

    def _run_mcmc(self, request: ReleaseRequest, mode, inputs):
        """Sample the polar model at ``mode`` (compiled once per ``n``), gate the run.

        Returns the run (ArviZ ``DataTree``) and the Release's ``sampler_info``.
        """
        cal, sampler, settings = request.calibration, request.sampler, request.settings
        backend = mcmc.sampler_backend(sampler, settings.backend)
        compiled = self.mcmc_cache.find(cal.n, sampler, backend)
        if compiled is None:
            # the first release of n points: compiling can take longer than sampling
            with progress_status(
                f"compiling the {sampler} model of {self.name} for n = {cal.n} (once per n)",
                request.progressbar,
            ):
                model = self._release_model(mode, cal.sigma, inputs)
                compiled = self.mcmc_cache.add(
                    cal.n, mcmc.CompiledSampler(model, sampler, backend=backend)
                )
        fused = mcmc.is_fused(compiled.model)
        if fused:
            values = mcmc.fused_data(self.manifold, mode, cal.sigma, fused, inputs)
        else:
            values = mcmc.polar_data(self.manifold, mode, cal.sigma, inputs)
        # NUTS first tries the settings' short run, gated like any run; a failed one
        # is not released from, and the full run samples afresh (MCMCSettings.stages)
        stages = self._stages(request)
        tried = []
        for i, stage in enumerate(stages):
            seed = int(request.rng.integers(2**31 - 1))
            idata = compiled.sample(
                values, stage, random_seed=seed, progressbar=request.progressbar
            )
            if fused:
                idata = mcmc.expand_fused(self.manifold, mode, cal.sigma, idata)
            if i + 1 < len(stages):
                report = check_run(idata)
                tried.append(_run_summary(stage, report.failures))
                if not report.passed:
                    continue
                info = {"backend": compiled.backend}
            else:
                info = gate_run(idata, compiled.backend, request.skip_diagnostics)
                tried.append(_run_summary(stage, info.get("failed_checks", [])))
            if len(stages) > 1:
                # which runs sampled, and why a short one was not released from: the
                # failures quote data-dependent numbers, so for the curator only
                info["runs"] = tried
            return idata, info

    @staticmethod
    def _stages(request: ReleaseRequest):
        """The runs an MCMC release may sample, in turn: the settings' short run first
        for NUTS judged by the gate (``MCMCSettings.stages``), else the run asked."""
        if request.sampler == "nuts" and not request.skip_diagnostics:
            return request.settings.stages()
        return (request.settings,)

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

    def _coupled_draw(self, request: ReleaseRequest, mode, inputs):
        """The value at time ``tune`` of a fixed coupled kernel and its δ̂ record.

        The kernel samples a fresh model of the same data (the cached compiled one
        may hold another data set's values), built from the mode and σ already
        computed. Issue 17; :func:`~pymc_manidp.privacy.coupling.coupled_release`.
        """
        from pymc_manidp.privacy.coupling import coupled_release

        rng, _ = resolve_rng(request.random_seed)
        rng = np.random.default_rng([int(rng.integers(2**63 - 1)), 17])  # apart from the run's
        value, record = coupled_release(
            self._polar_model(mode, request.calibration.sigma, inputs),
            epsilon=self.epsilon,
            t=max(request.settings.tune, 1),
            kernel="hmc" if request.sampler == "nuts" else "rwmh",
            domain=self.domain if self.restricted else None,
            random_seed=rng,
        )
        # the record carries its own note; Release.notes are published, the estimate is not
        return np.asarray(value), record

    def _record(self, value, cal, sampler, notes=(), validated=False, **fields) -> Release:
        """The Release of ``value`` (validated when it is a point of the manifold,
        unless the caller ``validated`` it already)."""
        return build_release(
            value=self.manifold.validate(value)
            if self.value_on_manifold and not validated
            else value,
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


def gate_run(idata, backend, skip_diagnostics) -> dict:
    """The diagnostics gate of an MCMC run (every MCMC release passes it): raise
    ``DiagnosticsError`` unless the run passes ``check_run`` or the caller skipped the
    checks; returns the Release's ``sampler_info`` (the backend, and the failed checks
    when skipped)."""
    report = check_run(idata)
    # which NUTS implementation drew the run (nutpie or PyMC's): not data-dependent
    info = {"backend": backend}
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
    return info


def _run_summary(settings, failures) -> dict:
    """One run of a release, for ``sampler_info["runs"]``: its length, and the gate's
    failed checks (empty: passed)."""
    return {
        "chains": settings.chains,
        "tune": settings.tune,
        "draws": settings.draws,
        "failed_checks": list(failures),
    }


def _refused(budget) -> None:
    """A release refused before its charge: tell its budget (``budget=`` or the one
    entered), which removes a ledger file made for it and still unused."""
    if budget is None:
        budget = current_budget()
    if isinstance(budget, PrivacyBudget):
        budget.refused()


def assumed_delta_note(delta: float) -> str:
    """The note of an MCMC release charged with a δ the curator assumes."""
    return (
        f"charged to a privacy budget with delta = {delta:g}: the curator's assumption, "
        "not a proof (an MCMC release has no proved delta)"
    )


def converged_mean(manifold, domain, data, grad_tol):
    """The Fréchet mean of checked ``data``, refused unless it converged to
    ``|grad F| <= grad_tol`` and lies in ``domain``'s ball: the premises the mean
    mechanisms' sensitivity rests on (one place for the Laplace and tangent ones)."""
    res = frechet_mean(manifold, data, tol=1e-10, atol=grad_tol)
    if not (res.converged and res.grad_norm <= grad_tol):
        raise ValueError(
            f"the Fréchet mean did not converge to |grad F| <= {grad_tol:.3g} "
            f"(got {res.grad_norm:.3g}): nothing is released"
        )
    if not domain.distances(res.mean) <= domain.radius:
        raise ValueError("the computed Fréchet mean lies outside the public ball")
    return res.mean
