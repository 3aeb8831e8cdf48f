"""An MCMC run whose trace cannot fit in memory is refused from public facts, before
the charge and before the data are read (``release --sampler nuts --draws 100000000``
grew past 4 GB)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import pymc_manidp as pmd
from pymc_manidp.cli import main
from pymc_manidp.mcmc import MCMCSettings, check_mcmc_memory
from pymc_manidp.mcmc.memory_limit import trace_bytes

SPHERE = pmd.Sphere(dim=2)
LIMIT = pmd.options.default("mcmc_max_trace_bytes")

#: adversarial counts: huge ints, bools, floats, strings, None (MCMCSettings refuses the
#: wrong types and ranges; every accepted one is bounded exactly)
COUNTS = st.one_of(
    st.integers(1, 10**6),
    st.sampled_from([1, 2, 10**8, 2**31, 2**63, 2**64 + 1, 10**400]),
    st.sampled_from([True, 1.0, 1e8, float("nan"), float("inf"), 5e-324, "1000", None, 0, -1]),
)


@given(draws=COUNTS, chains=COUNTS, tune=st.sampled_from([0, 1000, 10**9]))
def test_the_bound_is_exact_and_refuses_past_the_limit(draws, chains, tune):
    try:
        s = MCMCSettings(draws=draws, chains=chains, tune=tune)
    except (TypeError, ValueError):
        return  # refused when made: never reaches a sampler
    # oracle: a point (3 values), chart coordinates (2), distance (1), 10 statistics
    expected = s.chains * (s.tune + s.draws) * (3 + 2 + 1 + 10) * 8
    assert trace_bytes(s, SPHERE) == expected
    # without the manifold: the smallest one, so never more than with it
    assert trace_bytes(s) == s.chains * (s.tune + s.draws) * 13 * 8 <= expected
    if expected <= LIMIT:
        assert check_mcmc_memory(s, SPHERE) == expected
    else:
        with pytest.raises(ValueError, match=r"mcmc_max_trace_bytes.*on a machine"):
            check_mcmc_memory(s, SPHERE)


def test_the_limit_is_an_option():
    s = MCMCSettings(draws=10**7)
    with pytest.raises(ValueError, match="fewer draws or chains"):
        check_mcmc_memory(s, SPHERE)
    with pmd.options.context(mcmc_max_trace_bytes=1e12):
        assert check_mcmc_memory(s, SPHERE) == trace_bytes(s, SPHERE)
    with pytest.raises(ValueError, match="finite number > 0"):
        pmd.options["mcmc_max_trace_bytes"] = math.inf


def test_the_release_refuses_before_the_charge_and_before_reading(tmp_path):
    mech = pmd.KNGMechanism(SPHERE, epsilon=0.5, center=[0, 0, 1.0], radius=0.7)
    data = np.full((20, 3), np.nan)  # read, these would be refused as not on the sphere
    budget = pmd.PrivacyBudget(1.0, 1e-6)
    with pytest.raises(ValueError, match="would hold at least"):
        mech.release(
            data, sampler="nuts", settings=MCMCSettings(draws=10**8), budget=budget, delta=1e-7
        )
    assert budget.spent.epsilon == 0 and budget.entries == []


def test_the_command_refuses_before_reading_the_file(tmp_path, capsys):
    argv = ["release", str(tmp_path / "none.csv"), "--manifold", "sphere", "--epsilon", "1"]
    argv += ["--center", "0,0,1", "--radius", "0.7", "--sampler", "nuts", "--draws", "100000000"]
    argv += ["--budget", str(tmp_path / "l.json"), "--budget-epsilon", "1", "--delta", "1e-7"]
    argv += ["--budget-delta", "1e-6"]
    try:
        code = main(argv)
    except SystemExit as exc:
        code = exc.code
    err = capsys.readouterr().err
    assert code == 2 and "would hold at least 42 GB" in err and "none.csv" not in err, err
    assert "PYMC_MANIDP_MCMC_MAX_TRACE_BYTES" in err
    assert list(tmp_path.iterdir()) == []


def test_the_time_limit_too_is_refused_before_the_charge_and_before_reading():
    # it was checked after the charge: the refusal left a failed charge of 0.5 standing
    mech = pmd.KNGMechanism(SPHERE, epsilon=0.5, center=[0, 0, 1.0], radius=0.7)
    data = np.full((20, 3), np.nan)  # read, these would be refused as not on the sphere
    budget = pmd.PrivacyBudget(1.0, 1e-6)
    with pmd.options.context(mcmc_max_seconds=1e-9):
        with pytest.raises(ValueError, match="would take at least"):
            mech.release(data, sampler="nuts", budget=budget, delta=1e-7)
    assert budget.spent.epsilon == 0 and budget.entries == []
