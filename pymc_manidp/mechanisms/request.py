"""One value for a release's checked arguments, passed down the release path.

:meth:`~pymc_manidp.mechanisms.base.Mechanism.release` checks its keyword arguments
once, before any charge, and hands the steps after it one frozen
:class:`ReleaseRequest` instead of a dozen positional arguments: a step reads the
field it needs by name, and a new option is one field, not one more argument threaded
through every call. The data are not part of it: they are private, and read only
after the charge.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pymc_manidp.mcmc.settings import MCMCSettings
from pymc_manidp.privacy.release import Calibration

__all__ = ["ReleaseRequest"]


@dataclass(frozen=True)
class ReleaseRequest:
    """What one release was asked for, every field checked; all of it public.

    Attributes
    ----------
    sampler : str
        ``"exact"``, ``"nuts"`` or ``"metropolis"``, available for the mechanism.
    calibration : Calibration
        ``n``, Δ and σ, computed once before the charge from public facts.
    rng : numpy.random.Generator
        The release's random source (``resolve_rng(random_seed)``).
    seed_policy : str
        ``"OS entropy"`` or ``"fixed seed"``, as recorded.
    random_seed : int, numpy.random.Generator or None
        The seed as the caller gave it: the coupled kernel of ``estimate_delta``
        draws from its own stream derived from it.
    settings : MCMCSettings or None
        How long the MCMC run samples; ``None`` for an exact release.
    clip, project, skip_diagnostics, estimate_delta : bool
        The caller's opt-ins, each recorded in the Release when it acts.
    progressbar : bool
        Whether progress is shown (already resolved from ``None``).
    notes : tuple of str
        Notes the release adds to the record (the assumed δ of a charge).
    """

    sampler: str
    calibration: Calibration
    rng: np.random.Generator
    seed_policy: str
    random_seed: object
    settings: MCMCSettings | None
    clip: bool
    project: bool
    skip_diagnostics: bool
    estimate_delta: bool
    progressbar: bool
    notes: tuple[str, ...] = ()

    @property
    def is_mcmc(self) -> bool:
        """Whether the release samples by MCMC (it then carries its settings)."""
        return self.settings is not None
