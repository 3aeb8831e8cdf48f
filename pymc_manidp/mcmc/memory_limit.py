"""A lower bound on an MCMC run's memory, checked before anything is charged or read.

The size of a run's trace is a public fact: the number of draws each chain keeps,
the chains and what each draw stores follow from the settings and the manifold, not
from the data. A run whose trace cannot fit is refused before the budget is charged
and before the data are read, as :func:`~pymc_manidp.mcmc.time_limit.check_mcmc_budget`
refuses one that would take hours (``release --sampler nuts --draws 100000000`` grew
past 4 GB before failing).
"""

from __future__ import annotations

import decimal
import math

from pymc_manidp._options import options
from pymc_manidp.mcmc.settings import MCMCSettings

__all__ = ["MAX_TRACE_BYTES_ENV", "MCMC_MAX_TRACE_BYTES", "check_mcmc_memory", "trace_bytes"]

MCMC_MAX_TRACE_BYTES = options.default("mcmc_max_trace_bytes")
MAX_TRACE_BYTES_ENV = options.env("mcmc_max_trace_bytes")
# sampler statistics kept per draw: PyMC's NUTS records 17 (step size, tree depth,
# energy, divergences, timings, ...), nutpie about as many; a lower bound on both
_STATS_PER_DRAW = 10
_BYTES_PER_VALUE = 8  # float64 (the statistics' ints and bools are counted as doubles)


def _gigabytes(size) -> str:
    """``size`` bytes in GB, two digits, for any size (10**400 draws overflow a float)."""
    return f"{decimal.Decimal(size) / 10**9:.2g}"


def trace_bytes(settings, manifold=None) -> int:
    """A lower bound on the bytes of a run's trace, from public facts only.

    Each chain keeps ``tune + draws`` draws while it runs (PyMC's buffers hold the
    tuning steps too); each draw stores the point (``prod(point_shape)`` values), its
    chart coordinates (``dim``), its distance to the mode (1) and the sampler's
    statistics (at least 10), 8 bytes each. Without a manifold the smallest any
    manifold has is assumed (``dim = 1``, one value per point): a bound that holds
    before the data say which manifold it is.

    Parameters
    ----------
    settings : MCMCSettings
        The run's settings.
    manifold : Manifold, optional
        The manifold sampled on (its ``dim`` and ``point_shape``).

    Returns
    -------
    int
        Bytes (an exact Python int: no overflow for any draws or chains).
    """
    settings = MCMCSettings.resolve(settings)
    dim = 1 if manifold is None else int(manifold.dim)
    point = 1 if manifold is None else math.prod(int(k) for k in manifold.point_shape)
    per_draw = (point + dim + 1 + _STATS_PER_DRAW) * _BYTES_PER_VALUE
    return settings.chains * (settings.tune + settings.draws) * per_draw


def check_mcmc_memory(settings, manifold=None, *, max_bytes=None) -> int:
    """Refuse an MCMC run whose trace alone would exceed the memory limit.

    Parameters
    ----------
    settings : MCMCSettings
        The run's settings.
    manifold : Manifold, optional
        The manifold sampled on; ``None`` bounds the trace for the smallest one (the
        command line checks that before reading the data that name the manifold).
    max_bytes : float, optional
        The limit; by default ``pymc_manidp.options["mcmc_max_trace_bytes"]`` (set in
        Python, else ``$PYMC_MANIDP_MCMC_MAX_TRACE_BYTES``, else
        :data:`MCMC_MAX_TRACE_BYTES`, 2e9: 2 GB, a trace a laptop holds with room for
        the copies ArviZ makes of it).

    Returns
    -------
    int
        The bound of ``trace_bytes``, when it is within the limit.

    Raises
    ------
    ValueError
        The bound exceeds the limit; the message gives the size and the ways out.

    Examples
    --------
    >>> import pymc_manidp as pmd
    >>> check_mcmc_memory(MCMCSettings(), pmd.Sphere(dim=2))  # bytes: 4 x 2000 draws of 16 values
    1024000
    >>> check_mcmc_memory(MCMCSettings(draws=10**8))
    Traceback (most recent call last):
    ...
    ValueError: the MCMC trace of 4 chains x (1000 tuning + 100000000) draws would hold ...
    """
    settings = MCMCSettings.resolve(settings)
    if max_bytes is None:
        max_bytes = options["mcmc_max_trace_bytes"]
    size = trace_bytes(settings, manifold)
    if size > max_bytes:
        raise ValueError(
            f"the MCMC trace of {settings.chains} chains x ({settings.tune} tuning + "
            f"{settings.draws}) draws would hold at least "
            f"{_gigabytes(size)} GB in memory, over the limit of "
            f"{_gigabytes(max_bytes)} GB: use fewer draws or chains (one draw is released; "
            "the defaults, 4 x 1000, pass the diagnostics), or sampler='exact', or raise "
            f"the limit (pymc_manidp.options['mcmc_max_trace_bytes'], or "
            f"${MAX_TRACE_BYTES_ENV}) on a machine with that memory"
        )
    return size
