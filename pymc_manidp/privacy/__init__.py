"""Privacy layer: the Release record, the diagnostics gate, the privacy audits and the
L-lag coupling estimate of an MCMC release's delta."""

from pymc_manidp.privacy.audit import (
    AuditResult,
    NeighbourPair,
    SampleTestResult,
    boundary_pair,
    neighbour_pairs,
    quadrature_audit,
    sample_test,
)
from pymc_manidp.privacy.coupling import (
    HMC,
    RWMH,
    BatchTarget,
    CouplingError,
    DeltaEstimate,
    TVBound,
    coupled_release,
    estimate_delta,
    meeting_times,
    plot_tv_bound,
    tv_bound,
)
from pymc_manidp.privacy.diagnostics import DiagnosticsError, DiagnosticsReport, check_run
from pymc_manidp.privacy.release import Release

__all__ = [
    "HMC",
    "RWMH",
    "AuditResult",
    "BatchTarget",
    "CouplingError",
    "DeltaEstimate",
    "DiagnosticsError",
    "DiagnosticsReport",
    "NeighbourPair",
    "Release",
    "SampleTestResult",
    "TVBound",
    "boundary_pair",
    "check_run",
    "coupled_release",
    "estimate_delta",
    "meeting_times",
    "neighbour_pairs",
    "plot_tv_bound",
    "quadrature_audit",
    "sample_test",
    "tv_bound",
]
