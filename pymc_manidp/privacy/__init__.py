"""Privacy layer: the Release record, the diagnostics gate and the privacy audits."""

from pymc_manidp.privacy.audit import (
    AuditResult,
    NeighbourPair,
    SampleTestResult,
    boundary_pair,
    neighbour_pairs,
    quadrature_audit,
    sample_test,
)
from pymc_manidp.privacy.diagnostics import DiagnosticsError, DiagnosticsReport, check_run
from pymc_manidp.privacy.release import Release

__all__ = [
    "AuditResult",
    "DiagnosticsError",
    "DiagnosticsReport",
    "NeighbourPair",
    "Release",
    "SampleTestResult",
    "boundary_pair",
    "check_run",
    "neighbour_pairs",
    "quadrature_audit",
    "sample_test",
]
