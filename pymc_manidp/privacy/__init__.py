"""Privacy layer: the Release record, the privacy budget across releases, the
diagnostics gate, the privacy audits and the L-lag coupling estimate of an MCMC
release's delta.

The coupling estimate runs chains of the MCMC layer (:mod:`pymc_manidp.mcmc`), loaded on
first use: importing this package loads no PyMC.
"""

from pymc_manidp.privacy import coupling as _coupling
from pymc_manidp.privacy.audit import (
    AuditResult,
    NeighbourPair,
    SampleTestResult,
    boundary_pair,
    neighbour_pairs,
    quadrature_audit,
    regression_audit,
    sample_test,
    tangent_audit,
)
from pymc_manidp.privacy.budget import (
    BudgetExceededError,
    LedgerError,
    PrivacyBudget,
    Spend,
    current_budget,
)
from pymc_manidp.privacy.coupling import (
    DeltaEstimate,
    TVBound,
    coupled_release,
    estimate_delta,
    none_late_upper,
    plot_tv_bound,
    tv_bound,
)
from pymc_manidp.privacy.diagnostics import DiagnosticsError, DiagnosticsReport, check_run
from pymc_manidp.privacy.release import (
    Calibration,
    FailedRelease,
    Release,
    ReleaseFileError,
    Releases,
)

#: Served by the coupling module on first use (it is the kernels' exception).
_FROM_COUPLING = ("CouplingError",)

__all__ = [
    "AuditResult",
    "BudgetExceededError",
    "Calibration",
    "CouplingError",
    "DeltaEstimate",
    "DiagnosticsError",
    "DiagnosticsReport",
    "FailedRelease",
    "LedgerError",
    "NeighbourPair",
    "PrivacyBudget",
    "Release",
    "ReleaseFileError",
    "Releases",
    "SampleTestResult",
    "Spend",
    "TVBound",
    "boundary_pair",
    "check_run",
    "coupled_release",
    "current_budget",
    "estimate_delta",
    "neighbour_pairs",
    "none_late_upper",
    "plot_tv_bound",
    "quadrature_audit",
    "regression_audit",
    "sample_test",
    "tangent_audit",
    "tv_bound",
]


def __getattr__(name):
    if name in _FROM_COUPLING:
        value = globals()[name] = getattr(_coupling, name)  # later look-ups skip this
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted({*globals(), *_FROM_COUPLING})
