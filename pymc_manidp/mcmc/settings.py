"""One value for the settings of an MCMC run, with one set of defaults.

A release takes only an :class:`MCMCSettings` (``settings=``);
:func:`~pymc_manidp.mcmc.sampling.sample` and
:meth:`~pymc_manidp.mcmc.sampling.CompiledSampler.sample` take one too, and the
keyword arguments ``draws=``, ``tune=``, ``chains=`` they also accept only build one
(:meth:`MCMCSettings.with_overrides`), so the defaults live here and nowhere else. This
module imports no PyMC.
"""

from __future__ import annotations

import dataclasses
import numbers
from dataclasses import dataclass

from pymc_manidp._validation import check_positive_int

__all__ = ["MCMCSettings"]

#: names of the NUTS implementations (``None`` or ``"auto"``: nutpie when installed)
_BACKENDS = (None, "auto", "nutpie", "pymc")


@dataclass(frozen=True)
class MCMCSettings:
    """How long and how an MCMC run samples; checked when made.

    The defaults are PyMC's: 4 chains of 1,000 tuning steps and 1,000 draws, enough
    effective draws for the diagnostics gate on the built-in targets
    (docs/benchmarks.md).

    Parameters
    ----------
    draws : int
        Draws per chain after tuning, ``>= 1``.
    tune : int
        Tuning (warm-up) steps per chain, ``>= 0``; discarded.
    chains : int
        Independent chains, ``>= 2`` (the gate's R-hat compares chains).
    target_accept : float
        NUTS's target acceptance probability, in ``(0, 1)``; 0.9 rather than PyMC's
        0.8 because the polar chart's radial coordinate is stiff near the mode.
    backend : {None, "auto", "nutpie", "pymc"}
        NUTS implementation; ``None`` follows ``$PYMC_MANIDP_NUTS_BACKEND``, then
        ``"auto"`` (nutpie when installed). Metropolis is always PyMC's.
    cores : int, optional
        How many processes PyMC's own samplers (its NUTS, Metropolis) run the chains
        in, ``>= 1``; ``None`` is PyMC's default (one per core, at most 4). ``1`` runs
        the chains one after another in this process: the same draws for a seed (PyMC
        seeds each chain on its own), without starting processes that each import
        PyMC and compile the model again, which costs more than a short run samples
        (the test suite uses it). nutpie runs its chains on threads and ignores it.

    Examples
    --------
    >>> s = MCMCSettings()
    >>> s.draws, s.tune, s.chains
    (1000, 1000, 4)
    >>> s.with_overrides(chains=2, draws=None).chains  # None keeps the value
    2
    >>> MCMCSettings(chains=1)
    Traceback (most recent call last):
    ...
    ValueError: chains must be an integer >= 2, got 1
    """

    draws: int = 1000
    tune: int = 1000
    chains: int = 4
    target_accept: float = 0.9
    backend: str | None = None
    cores: int | None = None

    def __post_init__(self):
        object.__setattr__(self, "draws", check_positive_int(self.draws, "draws"))
        object.__setattr__(self, "tune", check_positive_int(self.tune, "tune", minimum=0))
        object.__setattr__(self, "chains", check_positive_int(self.chains, "chains", minimum=2))
        ta = self.target_accept
        if isinstance(ta, bool) or not isinstance(ta, numbers.Real):
            raise TypeError(f"target_accept must be a real number, got {type(ta).__name__}")
        if not 0.0 < ta < 1.0:
            raise ValueError(f"target_accept must lie in (0, 1), got {ta!r}")
        object.__setattr__(self, "target_accept", float(ta))
        backend = self.backend.lower() if isinstance(self.backend, str) else self.backend
        if backend not in _BACKENDS:
            raise ValueError(
                f"backend must be one of {_BACKENDS}, got {self.backend!r}: None or 'auto' "
                "picks nutpie when it is installed"
            )
        object.__setattr__(self, "backend", backend)
        if self.cores is not None:
            object.__setattr__(self, "cores", check_positive_int(self.cores, "cores"))

    def with_overrides(self, **changes) -> MCMCSettings:
        """A copy with the fields given and not ``None`` replaced (checked again)."""
        fields = {f.name for f in dataclasses.fields(self)}
        unknown = set(changes) - fields
        if unknown:
            raise TypeError(f"unknown MCMC settings {sorted(unknown)}; known: {sorted(fields)}")
        given = {k: v for k, v in changes.items() if v is not None}
        return dataclasses.replace(self, **given) if given else self

    @classmethod
    def resolve(cls, settings=None, **changes) -> MCMCSettings:
        """``settings`` (default: the defaults) with ``changes`` applied; type-checked."""
        if settings is None:
            settings = cls()
        elif not isinstance(settings, cls):
            raise TypeError(
                f"settings must be an MCMCSettings, got {type(settings).__name__}: "
                "e.g. pymc_manidp.mcmc.MCMCSettings(draws=2000)"
            )
        return settings.with_overrides(**changes)
