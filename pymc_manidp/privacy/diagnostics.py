"""The diagnostics gate: MCMC output is released only from a run that looks converged.

An MCMC release is only approximately DP: if the draw's law is within total variation
``gamma`` of the mechanism's law, the release is ``(eps, (1 + e^eps) gamma)``-DP.
Nothing computable bounds ``gamma``; R-hat, effective sample sizes and divergences
are the evidence a curator has. The gate refuses a release when they fail, unless the
caller opts out explicitly (and the opt-out is recorded in the Release).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import arviz as az
import numpy as np

__all__ = ["DiagnosticsError", "DiagnosticsReport", "check_run", "summary"]

MAX_RHAT = 1.01
MIN_ESS = 400


class DiagnosticsError(RuntimeError):
    """The MCMC run failed a convergence check: nothing is released from it."""


@dataclass(frozen=True)
class DiagnosticsReport:
    """Convergence figures of a run, computed on the monitored quantities.

    ``failures`` lists each failed check in words; empty means the run passed.
    """

    rhat: dict
    ess_bulk: dict
    ess_tail: dict
    divergences: int
    draws: int
    failures: list = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not self.failures


def _monitored(idata, name):
    post = idata.posterior
    out = {"distance": np.asarray(post["distance"].values, float)}
    x = np.asarray(post[name].values, float)
    flat = x.reshape(x.shape[0], x.shape[1], -1)
    for j in range(flat.shape[-1]):
        if np.ptp(flat[..., j]) > 0:  # constant embedding coordinates carry no information
            out[f"{name}[{j}]"] = flat[..., j]
    return out


def check_run(idata, name="release", *, max_rhat=MAX_RHAT, min_ess=MIN_ESS) -> DiagnosticsReport:
    """Compute R-hat, bulk/tail ESS and divergences; list what fails.

    Monitored: the geodesic distance to the chart centre and every embedding
    coordinate of the released variable.
    """
    mon = _monitored(idata, name)
    rhat = {k: float(az.rhat(v)) for k, v in mon.items()}
    bulk = {k: float(az.ess(v)) for k, v in mon.items()}
    tail = {k: float(az.ess(v, method="tail", prob=(0.05, 0.95))) for k, v in mon.items()}
    stats = idata.sample_stats
    div = int(stats["diverging"].values.sum()) if "diverging" in stats else 0
    draws = int(np.prod(mon["distance"].shape))
    failures = []
    worst = max(rhat, key=lambda k: rhat[k])
    if not rhat[worst] <= max_rhat:
        failures.append(f"R-hat of {worst} is {rhat[worst]:.4f} > {max_rhat}")
    for label, ess in (("bulk", bulk), ("tail", tail)):
        k = min(ess, key=lambda key: ess[key])
        if not ess[k] >= min_ess:
            failures.append(f"{label} ESS of {k} is {ess[k]:.0f} < {min_ess}")
    if div:
        failures.append(f"{div} divergent transitions")
    return DiagnosticsReport(rhat, bulk, tail, div, draws, failures)


def summary(idata, name="release"):
    """ArviZ summary of the monitored quantities, for the curator (never for publication)."""
    return az.summary(idata, var_names=["distance", name])
