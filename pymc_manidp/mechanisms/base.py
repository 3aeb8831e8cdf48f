r"""The base class of the mechanisms: what every mechanism object shares.

In the spirit of diffprivlib's ``DPMechanism``: keyword-only constructor, every
argument checked (``TypeError`` for a wrong type, ``ValueError`` naming the accepted
range), checks repeated at release time. A mechanism provides

- ``sensitivity(n)`` and the claims behind its rate (``footpoint_free_normalizer``,
  ``check_law_exists``); :meth:`Mechanism.scale` turns them into ``sigma``, refusing a
  ``sigma`` floating point cannot represent;
- the public hooks the samplers and the release procedure use:
  :meth:`Mechanism.exact_draws` (exact law), :meth:`Mechanism.mcmc_inputs` and
  :meth:`Mechanism.mcmc_law`
  (the PyMC model's inputs and the mechanism's PyMC distribution), and ``model(data)``.

:meth:`Mechanism.sample` and :meth:`Mechanism.release` are the same for every mechanism.
"""

from __future__ import annotations

from pymc_manidp.geometry.validation import (
    check_bool,
    check_manifold,
    check_positive_int,
    check_positive_real,
    check_rate,
)
from pymc_manidp.mcmc import SamplerCache

# The release procedure is privacy's job (it builds the Release and runs the
# diagnostics gate): the mechanism objects sit one layer above the privacy layer, so
# that this import points down (tests/test_layers.py has the order and the reason).
from pymc_manidp.mechanisms.procedure import release as _release_procedure
from pymc_manidp.rng import as_generator
from pymc_manidp.stats.domain import DataDomain
from pymc_manidp.stats.sensitivity import rate

__all__ = ["Mechanism"]


class Mechanism:
    """Base class of the mechanisms: what every mechanism object shares.

    Subclassed by :class:`~pymc_manidp.mechanisms.LaplaceMechanism` and
    :class:`~pymc_manidp.mechanisms.KNGMechanism`.

    Parameters
    ----------
    manifold : Manifold
        A manifold instance, e.g. ``pmd.Sphere(dim=2)``.
    epsilon : float
        Privacy budget ``> 0``.
    center : array_like, shape ``point_shape``
        The public ball's centre ``m0``, chosen without looking at the data.
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
    last_sampler_info : dict or None
        Rejection statistics of the last :meth:`sample` (for the curator).
    """

    name = "mechanism"
    restricted = True
    footpoint_free_normalizer = False
    last_sampler_info: dict | None = None

    def __init__(self, manifold, *, epsilon, center, radius):
        self.manifold = check_manifold(manifold)
        self.epsilon = check_positive_real(epsilon, "epsilon")
        self.domain = DataDomain(manifold, center, radius)
        self.mcmc_cache = SamplerCache()  # compiled MCMC models, per (n, sampler)

    # --- the privacy map --------------------------------------------------------------
    def sensitivity(self, n: int) -> float:  # pragma: no cover - abstract
        """The mechanism's sensitivity ``Delta`` for ``n`` records (public)."""
        raise NotImplementedError

    def check_law_exists(self, sigma: float) -> None:
        """Raise ``ValueError`` if the density with rate ``sigma`` is not normalizable."""

    def scale(self, n: int) -> float:
        """The rate ``sigma`` for ``n`` records: ``2 Delta/eps`` (or ``Delta/eps``).

        Raises ``ValueError`` when ``sigma`` is not a normal float (``epsilon`` too
        large or too small for floating point) or the law does not exist.
        """
        sigma = rate(
            self.sensitivity(n),
            self.epsilon,
            footpoint_free_normalizer=self.footpoint_free_normalizer,
        )
        sigma = check_rate(sigma)
        self.check_law_exists(sigma)
        return sigma

    # --- hooks for the samplers (data already checked) ----------------------------------
    def exact_draws(self, data, size, rng):  # pragma: no cover - abstract
        """``size`` exact draws (an ``ExactDraws``) for checked ``data``."""
        raise NotImplementedError

    def mcmc_inputs(self, data):  # pragma: no cover - abstract
        """``(center, sigma, inputs)``: the chart centre, the rate and the density's
        inputs, the values of the PyMC model's ``pm.Data``."""
        raise NotImplementedError

    def mcmc_law(self, name, v, **kwargs):  # pragma: no cover - abstract
        """The mechanism's PyMC distribution (a model variable called ``name``) built
        from the ``pm.Data`` tensors ``v`` (``"scale"`` and the inputs of
        :meth:`mcmc_inputs`); ``kwargs`` go to the distribution (e.g. its transform)."""
        raise NotImplementedError

    # --- what users call --------------------------------------------------------------
    def sample(self, data, size, *, random_seed=None, clip=False):
        """``size`` i.i.d. draws ``(size, *point_shape)`` of the mechanism's exact law.

        For audits and tests: each draw alone is an ε-DP release of ``data``; all of
        them together are not (their privacy losses add up). The rejection statistics
        of the call are kept in the attribute ``last_sampler_info``.

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
        size = check_positive_int(size, "size")
        rng = as_generator(random_seed)
        data = self.domain.check(data, clip=check_bool(clip, "clip"))
        out = self.exact_draws(data, size, rng)
        self.last_sampler_info = {"proposals": out.proposals, **out.info}
        return out.points

    def release(
        self,
        data,
        *,
        sampler="exact",
        random_seed=None,
        draws=1000,
        tune=1000,
        chains=4,
        clip=False,
        skip_diagnostics=False,
        estimate_delta=False,
    ):
        """Release a private value of ``data``; returns a :class:`~pymc_manidp.Release`.

        ``sampler="exact"`` (default): pure ε-DP, ``delta = 0``, the rejection
        statistics in ``Release.sampler_info``; ``"nuts"``/``"metropolis"``: MCMC,
        approximately DP (``delta=None``, see its notes). The MCMC defaults are PyMC's
        (4 chains of 1,000 tuning steps and 1,000 draws): thousands of effective draws
        for the gate on the built-in targets (docs/benchmarks.md). The released value
        is one post-tuning draw; more draws sharpen the diagnostics, more tuning the
        convergence. ``random_seed`` makes the
        release reproducible, for tests only: anyone who guesses the seed can
        reproduce the noise. ``estimate_delta=True`` (MCMC only) draws the released
        value from a fixed coupled kernel and records its L-lag coupling estimate δ̂
        in ``Release.delta_estimate`` (curator side, an estimate; ``delta`` stays
        ``None``). The procedure is ``release`` in ``pymc_manidp/mechanisms/procedure.py``.
        """
        return _release_procedure(
            self,
            data,
            sampler=sampler,
            random_seed=random_seed,
            draws=draws,
            tune=tune,
            chains=chains,
            clip=check_bool(clip, "clip"),
            skip_diagnostics=check_bool(skip_diagnostics, "skip_diagnostics"),
            estimate_delta=check_bool(estimate_delta, "estimate_delta"),
        )
