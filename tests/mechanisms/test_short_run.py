"""A NUTS release at the default length tries a short run first (issue 38 item 6).

``MCMCSettings.short_run``: the release samples ``4 x (300 + 500)`` and releases from
it when it passes the diagnostics gate; otherwise the full ``4 x (1000 + 1000)``
samples afresh and the gate judges it alone. The settings' stages are pure
configuration (tested as such, with adversarial values); the release path is tested
with a short run made to fail (5 draws a chain cannot reach the gate's ESS of 400) and
the full run made short, so both runs are seconds.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import pymc_manidp as pmd
from pymc_manidp import mcmc
from pymc_manidp.privacy.diagnostics import DiagnosticsError

S2 = pmd.Sphere(dim=2)
NORTH = np.array([0.0, 0.0, 1.0])
DATA = S2.exp_coords(NORTH, np.random.default_rng(0).normal(size=(40, 2)) * 0.1)
# the full run long enough for the gate (ESS >= 400 of 4 x 400 draws), the short one not
FALLBACK = mcmc.MCMCSettings(tune=200, draws=400, short_run=(10, 5))


def _kng():
    return pmd.KNGMechanism(S2, epsilon=1.0, center=NORTH, radius=np.pi / 8)


def _lengths(settings):
    return [(s.tune, s.draws) for s in settings.stages()]


# --- the stages: configuration -------------------------------------------------------------
def test_the_default_length_tries_the_short_run_and_a_chosen_length_does_not():
    assert _lengths(mcmc.MCMCSettings()) == [(300, 500), (1000, 1000)]
    assert _lengths(mcmc.MCMCSettings(chains=6)) == [(300, 500), (1000, 1000)]
    # the caller chose the length: exactly that run
    assert _lengths(mcmc.MCMCSettings(draws=2000)) == [(1000, 2000)]
    assert _lengths(mcmc.MCMCSettings(tune=500)) == [(500, 1000)]
    assert _lengths(mcmc.MCMCSettings(short_run=None)) == [(1000, 1000)]
    # an explicit short run applies to any length, cut to the full one
    assert _lengths(mcmc.MCMCSettings(draws=50, tune=20, short_run=(30, 10))) == [
        (20, 10),
        (20, 50),
    ]
    assert _lengths(mcmc.MCMCSettings(draws=50, tune=20, short_run=(30, 60))) == [(20, 50)]
    for stage in mcmc.MCMCSettings(chains=3, target_accept=0.95).stages():
        assert (stage.chains, stage.target_accept, stage.short_run) == (3, 0.95, None)


@pytest.mark.parametrize(
    "bad, exc, msg",
    [
        ("AUTO", TypeError, "short_run must be 'auto', None or a pair"),
        ("", TypeError, "short_run must be 'auto', None or a pair"),
        ((300,), TypeError, "short_run must be 'auto', None or a pair"),
        ((1, 2, 3), TypeError, "short_run must be 'auto', None or a pair"),
        (np.array([300, 500]), TypeError, "short_run must be 'auto', None or a pair"),
        (True, TypeError, "short_run must be 'auto', None or a pair"),
        (300, TypeError, "short_run must be 'auto', None or a pair"),
        ((300.0, 500), TypeError, "short_run's tune must be an integer"),
        ((300, 1 / 3), TypeError, "short_run's draws must be an integer"),
        ((True, 500), TypeError, "short_run's tune must be an integer"),
        ((-1, 500), ValueError, r"short_run's tune must be an integer >= 0"),
        ((300, 0), ValueError, r"short_run's draws must be an integer >= 1"),
    ],
)
def test_a_bad_short_run_is_refused_when_the_settings_are_made(bad, exc, msg):
    with pytest.raises(exc, match=msg):
        mcmc.MCMCSettings(short_run=bad)


@given(
    tune=st.integers(0, 10**6),
    draws=st.integers(1, 10**6),
    short=st.one_of(
        st.just("auto"),
        st.none(),
        st.tuples(
            st.one_of(st.integers(0, 10**6), st.just(10**400)),
            st.one_of(st.integers(1, 10**6), st.just(10**400)),
        ),
    ),
)
def test_every_stage_is_at_most_the_full_run_which_comes_last(tune, draws, short):
    settings = mcmc.MCMCSettings(tune=tune, draws=draws, short_run=short)
    stages = settings.stages()
    assert 1 <= len(stages) <= 2
    assert stages[-1] == dataclasses.replace(settings, short_run=None)
    if len(stages) == 2:
        first = stages[0]
        assert first.tune <= tune and first.draws <= draws
        assert (first.tune, first.draws) != (tune, draws)
        assert first.short_run is None and first.chains == settings.chains


# --- the release path ----------------------------------------------------------------------
def test_a_short_run_that_passes_is_released_from():
    rel = _kng().release(DATA, sampler="nuts", random_seed=3)
    post = rel.diagnostics.posterior
    assert (post.sizes["chain"], post.sizes["draw"]) == (4, 500)
    assert rel.sampler_info["runs"] == [
        {"chains": 4, "tune": 300, "draws": 500, "failed_checks": []}
    ]
    draws = post["release"].values.reshape(-1, 3)
    assert np.min(np.linalg.norm(draws - rel.value, axis=1)) < 1e-12  # one of its draws


def test_a_failed_short_run_is_not_released_from_and_the_full_run_samples_afresh():
    rel = _kng().release(DATA, sampler="nuts", random_seed=3, settings=FALLBACK)
    (short, full) = rel.sampler_info["runs"]
    assert (short["tune"], short["draws"]) == (10, 5)
    assert any("ESS" in failure for failure in short["failed_checks"])
    assert full == {"chains": 4, "tune": 200, "draws": 400, "failed_checks": []}
    post = rel.diagnostics.posterior  # the full run's draws: the gate's and the value's
    assert (post.sizes["chain"], post.sizes["draw"]) == (4, 400)
    draws = post["release"].values.reshape(-1, 3)
    assert np.min(np.linalg.norm(draws - rel.value, axis=1)) < 1e-12
    again = _kng().release(DATA, sampler="nuts", random_seed=3, settings=FALLBACK)
    np.testing.assert_array_equal(again.value, rel.value)  # both runs seeded by the release


def test_when_the_full_run_fails_too_nothing_is_released_and_the_charge_stands():
    budget = pmd.PrivacyBudget(epsilon=5.0, delta=1e-6)
    failing = mcmc.MCMCSettings(tune=30, draws=20, short_run=(10, 10))  # ESS <= 80
    with pytest.raises(DiagnosticsError, match=r"bulk ESS of \S+ is \d+ < 400"):
        _kng().release(
            DATA, sampler="nuts", settings=failing, budget=budget, delta=1e-7, random_seed=1
        )
    assert math.isclose(budget.spent.epsilon, 1.0)  # the failure may depend on the data
    assert [e["status"] for e in budget.entries] == ["failed"]


def test_no_short_run_without_the_gate_or_for_metropolis():
    # skip_diagnostics: nothing would judge the short run, so the full run samples
    rel = _kng().release(
        DATA, sampler="nuts", random_seed=3, skip_diagnostics=True, settings=FALLBACK
    )
    assert rel.diagnostics.posterior.sizes["draw"] == 400
    assert "runs" not in rel.sampler_info
    rel = _kng().release(
        DATA,
        sampler="metropolis",
        random_seed=3,
        skip_diagnostics=True,
        settings=mcmc.MCMCSettings(tune=20, draws=30, short_run=(10, 5)),
    )
    assert rel.diagnostics.posterior.sizes["draw"] == 30
    assert "runs" not in rel.sampler_info


# --- the command line ------------------------------------------------------------------------
class _Stop(Exception):
    """Raised by the stand-in release step once it has seen the request."""


@pytest.mark.parametrize(
    "extra, stages",
    [
        ([], [(300, 500), (1000, 1000)]),
        (["--no-short-run"], [(1000, 1000)]),
        (["--draws", "800"], [(1000, 800)]),
    ],
)
def test_the_command_line_runs_the_short_run_unless_told(
    extra, stages, tmp_path, capsys, monkeypatch
):
    from pymc_manidp.cli import main
    from pymc_manidp.mechanisms.base import Mechanism

    seen = []

    def stand_in(self, data, request):
        seen.append(request.settings)
        raise _Stop

    monkeypatch.setattr(Mechanism, "_release_checked", stand_in)
    np.savetxt(tmp_path / "north.csv", DATA, delimiter=",")
    argv = ["release", str(tmp_path / "north.csv"), "--manifold", "sphere", "--epsilon", "1"]
    argv += ["--center", "0,0,1", "--radius", "0.7", "--sampler", "nuts", *extra]
    with contextlib.suppress(SystemExit):
        main(argv)  # the command reports the stand-in's exception as an error
    (settings,) = seen
    assert _lengths(settings) == stages


def test_the_command_line_refuses_no_short_run_where_it_would_be_ignored(tmp_path, capsys):
    from tests.test_cli_budget import run

    np.savetxt(tmp_path / "north.csv", DATA, delimiter=",")
    argv = ["release", str(tmp_path / "north.csv"), "--manifold", "sphere", "--epsilon", "1"]
    argv += ["--center", "0,0,1", "--radius", "0.7", "--no-short-run"]
    for sampler in ("exact", "metropolis"):
        code, out, err = run([*argv, "--sampler", sampler], capsys)
        assert code == 2 and out == ""
        assert "--no-short-run has no effect" in err and "--no-short-run for nuts" in err


@pytest.mark.parametrize(
    "kwargs, length",
    [({}, (300, 500)), ({"skip_diagnostics": True}, (1000, 1000))],
)
def test_the_time_bound_before_the_charge_is_the_shortest_run_the_release_may_sample(
    kwargs, length, monkeypatch
):
    # check_mcmc_budget bounds the run's time from below: with a short run first, the
    # release may take only that long, so a bound on the full run could refuse a release
    # that fits the limit
    seen = []

    def stand_in(manifold, n, settings):
        seen.append((settings.tune, settings.draws))
        raise _Stop

    monkeypatch.setattr(mcmc, "check_mcmc_budget", stand_in)
    with pytest.raises(_Stop):
        _kng().release(DATA, sampler="nuts", random_seed=1, **kwargs)
    assert seen == [length]


def test_the_curators_report_says_which_runs_sampled():
    from pymc_manidp.privacy.diagnostics import report

    rel = _kng().release(DATA, sampler="nuts", random_seed=3, settings=FALLBACK)
    rep = report(rel)
    try:
        text = str(rep)
    finally:
        rep.close()
    line = next(line for line in text.splitlines() if line.startswith("runs: "))
    assert line.startswith("runs: 4 x (10 + 5) failed (")
    assert line.endswith("; then 4 x (200 + 400) passed")
    rep = report(
        _kng().release(
            DATA,
            sampler="nuts",
            random_seed=3,
            settings=mcmc.MCMCSettings(tune=200, draws=400),
        )
    )
    try:
        assert "runs: " not in str(rep)  # one run: nothing to say
    finally:
        rep.close()
