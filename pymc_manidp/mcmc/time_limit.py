"""A lower bound on an MCMC run's time, checked before anything is compiled."""

from __future__ import annotations

import os

from pymc_manidp._options import options
from pymc_manidp.mcmc.settings import MCMCSettings

__all__ = ["MAX_SECONDS_ENV", "MCMC_MAX_SECONDS", "check_mcmc_budget"]

# A lower bound on the seconds one gradient evaluation of the log-density costs per data
# point is the manifold's own measurement (``manifold.mcmc_seconds_per_point``: KNG's
# norm by the manifold's own route, docs/benchmarks/bench_kng_norm.py). NUTS pays at
# least ~3 evaluations per draw (measured 4.7-6.9); one evaluation is one pass over the
# data.
_LEAPFROG_PER_DRAW = 3
MCMC_MAX_SECONDS = options.default("mcmc_max_seconds")
MAX_SECONDS_ENV = options.env("mcmc_max_seconds")


def check_mcmc_budget(
    manifold, n, settings=None, *, chains=None, tune=None, draws=None, max_seconds=None
):
    """Refuse an MCMC run whose log-density passes over ``n`` points far too often.

    Every leapfrog step of NUTS (and every Metropolis step) evaluates the density, one
    pass over the data: the time grows like ``n * chains * (tune + draws)``. This
    estimates a *lower bound* of that time from measured costs per point and raises
    a ``ValueError`` pointing to the exact sampler when it exceeds ``max_seconds``.

    Parameters
    ----------
    manifold : Manifold
        The manifold sampled on; its ``mcmc_seconds_per_point`` is the measured cost
        of one gradient evaluation per data point.
    n : int
        Number of data points the log-density passes over.
    settings : MCMCSettings, optional
        The run's settings (default ``MCMCSettings()``, the one set of defaults).
    chains, tune, draws : int, optional
        Override the fields of ``settings``.
    max_seconds : float, optional
        The budget in seconds; by default ``pymc_manidp.options["mcmc_max_seconds"]``
        (set in Python, else ``$PYMC_MANIDP_MCMC_MAX_SECONDS``, a finite number > 0,
        else :data:`MCMC_MAX_SECONDS`, 600).

    Returns
    -------
    float
        The estimate (a lower bound on the run's time) in seconds, when it is within
        the budget.

    Raises
    ------
    ValueError
        The estimate exceeds the budget (the message gives the estimate and the ways
        out), or the environment variable is not a finite number > 0 (named).

    Examples
    --------
    >>> import pymc_manidp as pmd
    >>> check_mcmc_budget(pmd.Sphere(dim=2), 1000) < 1
    True
    >>> check_mcmc_budget(pmd.Sphere(dim=2), 10**7)
    Traceback (most recent call last):
    ...
    ValueError: MCMC on n = 10000000 data points would take at least ...
    """
    settings = MCMCSettings.resolve(settings, chains=chains, tune=tune, draws=draws)
    chains, tune, draws = settings.chains, settings.tune, settings.draws
    if max_seconds is None:
        max_seconds = options["mcmc_max_seconds"]
    evals = int(chains) * (int(tune) + int(draws)) * _LEAPFROG_PER_DRAW
    # nutpie runs chains on all cores; bound from below by dividing by them
    estimate = int(n) * evals * manifold.mcmc_seconds_per_point / max(1, os.cpu_count() or 1)
    if estimate > max_seconds:
        raise ValueError(
            f"MCMC on n = {int(n)} data points would take at least {estimate / 60:.0f} "
            f"minutes here ({chains} chains x {int(tune) + int(draws)} steps, each step "
            f"one pass over the data), over the {max_seconds:.0f} s budget. Use "
            "sampler='exact' (pure epsilon-DP, seconds for any n), or fewer draws or "
            f"chains, or raise the budget (${MAX_SECONDS_ENV})."
        )
    return estimate
