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

#: the default run's length (the fields' defaults below)
_DEFAULT_TUNE = 1000
_DEFAULT_DRAWS = 1000
#: the short run a release at the default length tries first: nutpie's own tuning
#: length and half the draws; on the built-in targets at n = 10^4 its tail ESS was
#: 726-894 in 4 x 500 draws against the gate's 400 (docs/benchmarks.md)
_AUTO_SHORT_RUN = (300, 500)


def _check_short_run(value):
    """``"auto"``, ``None`` or a pair of ints ``(tune >= 0, draws >= 1)``."""
    if value is None or (isinstance(value, str) and value == "auto"):
        return value
    if isinstance(value, str) or not isinstance(value, tuple | list) or len(value) != 2:
        raise TypeError(f"short_run must be 'auto', None or a pair (tune, draws), got {value!r}")
    tune = check_positive_int(value[0], "short_run's tune", minimum=0)
    draws = check_positive_int(value[1], "short_run's draws")
    return (tune, draws)


#: names of the NUTS implementations (``None`` or ``"auto"``: nutpie when installed)
_BACKENDS = (None, "auto", "nutpie", "pymc")


@dataclass(frozen=True)
class MCMCSettings:
    """How long and how an MCMC run samples; checked when made.

    The defaults are PyMC's: 4 chains of 1,000 tuning steps and 1,000 draws, enough
    effective draws for the diagnostics gate on the built-in targets
    (docs/benchmarks.md). A NUTS *release* at these defaults first tries a shorter
    run (``short_run``): one draw is released, and the run is there to pass the gate,
    which 4 x (300 + 500) did in 119 of 120 trials on the built-in targets, with at
    least 1.6 times the effective draws it asks (docs/benchmarks.md, "How long a
    release samples"); the full run samples only when the shorter one fails it.

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
    short_run : "auto", None or (int, int)
        ``(tune, draws)`` of a first, shorter run that a NUTS release tries before
        the full ``(tune, draws)``: its draw is released when it passes the
        diagnostics gate; otherwise the full run samples afresh (the next seed of the
        release's random source) and the gate judges that one alone. ``"auto"``
        (default): ``(300, 500)`` when ``tune`` and ``draws`` are the defaults, none
        when the caller chose the run's length (a run of exactly the length asked).
        ``None``: the full run at once. A length of the short run above the full
        one's is cut to it; a short run as long as the full one is no short run.
        Ignored by Metropolis (too correlated for the gate in a short run), by a
        release with ``skip_diagnostics=True`` (nothing would judge the short run)
        and outside releases.

    Examples
    --------
    >>> s = MCMCSettings()
    >>> s.draws, s.tune, s.chains
    (1000, 1000, 4)
    >>> s.with_overrides(chains=2, draws=None).chains  # None keeps the value
    2
    >>> [(r.tune, r.draws) for r in s.stages()]  # what a NUTS release may run, in turn
    [(300, 500), (1000, 1000)]
    >>> [(r.tune, r.draws) for r in MCMCSettings(draws=2000).stages()]
    [(1000, 2000)]
    >>> MCMCSettings(chains=1)
    Traceback (most recent call last):
    ...
    ValueError: chains must be an integer >= 2, got 1
    """

    draws: int = _DEFAULT_DRAWS
    tune: int = _DEFAULT_TUNE
    chains: int = 4
    target_accept: float = 0.9
    backend: str | None = None
    cores: int | None = None
    short_run: object = "auto"

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
        object.__setattr__(self, "short_run", _check_short_run(self.short_run))

    def stages(self) -> tuple[MCMCSettings, ...]:
        """The runs a NUTS release may sample, in turn: the short run (if any), then
        this one; each later run only when the one before failed the gate.

        Returns
        -------
        tuple of MCMCSettings
            One or two settings; every one has ``short_run=None``.
        """
        full = dataclasses.replace(self, short_run=None)
        short = self.short_run
        if short == "auto":
            defaults = (_DEFAULT_TUNE, _DEFAULT_DRAWS)
            short = _AUTO_SHORT_RUN if (self.tune, self.draws) == defaults else None
        if short is None:
            return (full,)
        tune, draws = min(short[0], self.tune), min(short[1], self.draws)
        if (tune, draws) == (self.tune, self.draws):
            return (full,)
        return (dataclasses.replace(full, tune=tune, draws=draws), full)

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
