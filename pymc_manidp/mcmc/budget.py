"""A lower bound on an MCMC run's time, checked before anything is compiled."""

from __future__ import annotations

import os

from pymc_manidp.geometry.validation import read_env

__all__ = ["MAX_SECONDS_ENV", "MCMC_MAX_SECONDS", "check_mcmc_budget"]

# Lower bounds on the seconds one gradient evaluation of the log-density costs per
# data point (NUMBA backend, 2 cores, 2026-11-24, KNG's norm by the manifolds' own
# routes: S^2 27 ns, Kendall(8) 46 ns, i.e. 8 ns per half dimension, SPD(2) 177 ns;
# docs/benchmarks/bench_kng_norm.py). NUTS pays at least ~3 evaluations per draw
# (measured 4.7-6.9); one evaluation is one pass over the data.
_SECONDS_PER_POINT = {"Sphere": 2e-8, "KendallShape": 5e-9, "Euclidean": 5e-9, "SPD2": 1e-7}
_LEAPFROG_PER_DRAW = 3
MCMC_MAX_SECONDS = 600.0
MAX_SECONDS_ENV = "PYMC_MANIDP_MCMC_MAX_SECONDS"


def _seconds_per_point(manifold) -> float:
    name = type(manifold).__name__
    if name == "SPD":
        k = manifold.k
        # k = 2: closed forms; k = 3: the vectorized congruence-sum kernel (0.17 us
        # measured, docs/benchmarks/bench_kng_norm.py); k >= 4: its loops (2.6 us at 4)
        if k == 2:
            return _SECONDS_PER_POINT["SPD2"]
        return 1.5e-7 if k == 3 else 1e-6 * (k / 4) ** 3
    scale = max(1.0, manifold.dim / 2)
    return _SECONDS_PER_POINT.get(name, 1e-7) * scale


def check_mcmc_budget(manifold, n, *, chains=4, tune=1000, draws=1000, max_seconds=None):
    """Refuse an MCMC run whose log-density passes over ``n`` points far too often.

    Every leapfrog step of NUTS (and every Metropolis step) evaluates the density, one
    pass over the data: the time grows like ``n * chains * (tune + draws)``. This
    estimates a *lower bound* of that time from measured costs per point and raises
    a ``ValueError`` pointing to the exact sampler when it exceeds ``max_seconds``
    (default 600 s, or the environment variable ``PYMC_MANIDP_MCMC_MAX_SECONDS``).

    Returns the estimate in seconds when the run is within budget.

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
    if max_seconds is None:
        max_seconds = read_env(MAX_SECONDS_ENV, "positive real", float(MCMC_MAX_SECONDS))
    evals = int(chains) * (int(tune) + int(draws)) * _LEAPFROG_PER_DRAW
    # nutpie runs chains on all cores; bound from below by dividing by them
    estimate = int(n) * evals * _seconds_per_point(manifold) / max(1, os.cpu_count() or 1)
    if estimate > max_seconds:
        raise ValueError(
            f"MCMC on n = {int(n)} data points would take at least {estimate / 60:.0f} "
            f"minutes here ({chains} chains x {int(tune) + int(draws)} steps, each step "
            f"one pass over the data), over the {max_seconds:.0f} s budget. Use "
            "sampler='exact' (pure epsilon-DP, seconds for any n), or fewer draws or "
            f"chains, or raise the budget (${MAX_SECONDS_ENV})."
        )
    return estimate
