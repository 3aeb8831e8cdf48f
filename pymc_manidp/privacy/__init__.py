"""Privacy layer: the Release record and the diagnostics gate."""

from pymc_manidp.privacy.diagnostics import DiagnosticsError, DiagnosticsReport, check_run
from pymc_manidp.privacy.release import Release

__all__ = ["DiagnosticsError", "DiagnosticsReport", "Release", "check_run"]
