"""The command line: the demo runs, bad input gives one line and a non-zero exit."""

from __future__ import annotations

import pytest

from pymc_manidp.cli import main


def test_demo_runs_and_reports_exact_round_trips(capsys):
    assert main(["demo", "--seed", "1"]) == 0
    out = capsys.readouterr().out
    for name in ["sphere S^2", "SPD(3)", "Kendall", "Euclidean"]:
        assert name in out
    # every round-trip error printed is at rounding level
    rows = [line for line in out.splitlines() if line.startswith(("sphere", "SPD", "Kend", "Euc"))]
    errs = [float(line.split()[-2]) for line in rows]
    assert len(errs) == 4 and max(errs) < 1e-12
    # (2 - pi/4)/200 plus the footpoint tolerance; KNG (pi/4)(2 - pi/4)/200
    assert "sensitivity 0.006073" in out and "sensitivity 0.004770" in out
    assert out.count("passed") == 2  # both releases cleared the diagnostics gate


def test_unknown_command_exits_non_zero():
    with pytest.raises(SystemExit) as exc:
        main(["frobnicate"])
    assert exc.value.code != 0
