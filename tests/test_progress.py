"""Progress on the long calls (issue 38 item 5): one rule, ``pymc_manidp._progress``.

``progressbar=None`` (the default everywhere) shows progress only when stderr is a
terminal and ``$CI`` is unset; ``True``/``False`` force it. Progress goes to stderr
(stdout may carry a command's output) and never changes a result: the seeded releases
and studies below are equal with and without it.
"""

from __future__ import annotations

import io
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import pymc_manidp as pmd
from pymc_manidp import _progress
from pymc_manidp.mechanisms import base as mech_base

S2 = pmd.Sphere(dim=2)
NORTH = np.array([0.0, 0.0, 1.0])


class _Terminal(io.StringIO):
    def isatty(self):
        if self.closed:
            raise ValueError("I/O operation on closed file")
        return True


def _data(n, seed):
    rng = np.random.default_rng(seed)
    c = np.clip(rng.normal(size=(n, 2)) * 0.1, -0.3, 0.3)
    return S2.exp_coords(NORTH, c)


@pytest.mark.parametrize(
    ("ci", "terminal", "shown"),
    [
        (None, True, True),
        (None, False, False),
        ("true", True, False),
        ("1", True, False),
        ("false", True, True),
        ("0", True, True),
        ("", True, True),
        ("true", False, False),
    ],
)
def test_the_default_is_a_terminal_outside_ci(monkeypatch, ci, terminal, shown):
    if ci is None:
        monkeypatch.delenv("CI", raising=False)
    else:
        monkeypatch.setenv("CI", ci)
    monkeypatch.setattr("sys.stderr", _Terminal() if terminal else io.StringIO())
    assert _progress._progress_enabled(None) is shown
    # forcing wins over both
    assert _progress._progress_enabled(True) is True
    assert _progress._progress_enabled(np.bool_(False)) is False


def test_a_closed_or_missing_stderr_is_no_terminal(monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    closed = _Terminal()
    closed.close()  # isatty on a closed stream raises ValueError
    monkeypatch.setattr("sys.stderr", closed)
    assert _progress._progress_enabled(None) is False
    monkeypatch.setattr("sys.stderr", None)  # pythonw, a daemon
    assert _progress._progress_enabled(None) is False


@given(
    st.one_of(
        st.text(max_size=5),  # "no" is truthy: never read as True
        st.integers(min_value=-(10**400), max_value=10**400),
        st.sampled_from([1 / 3, 0.3333333333333333, 5e-324, 1e308, math.nan, math.inf]),
        st.just([True]),
        st.just(np.array([True, False])),
    )
)
def test_anything_but_a_bool_or_none_is_a_type_error(value):
    with pytest.raises(TypeError, match=r"progressbar must be True, False or None"):
        _progress._progress_enabled(value)


def test_a_forced_bar_goes_to_stderr_and_an_off_one_prints_nothing(capsys):
    with _progress.progress_bar("counting", 3, True) as advance:
        for _ in range(3):
            advance()
    out, err = capsys.readouterr()
    assert out == "" and "counting" in err and "3/3" in err
    with _progress.progress_bar("counting", 3, False) as advance:
        advance(3)
    assert capsys.readouterr() == ("", "")


def test_release_many_progress_is_on_stderr_and_changes_no_value(capsys, monkeypatch):
    mech = pmd.KNGMechanism(S2, epsilon=1.0, center=NORTH, radius=0.5)
    stack = np.stack([_data(20, s) for s in range(6)])
    shown = mech.release_many(stack, random_seed=4, progressbar=True).values
    out, err = capsys.readouterr()
    assert out == "" and "release_many" in err and "6/6" in err
    monkeypatch.setenv("CI", "true")  # the default under CI: nothing
    hidden = mech.release_many(stack, random_seed=4).values
    assert capsys.readouterr() == ("", "")
    np.testing.assert_array_equal(shown, hidden)
    monkeypatch.delenv("CI")  # not a terminal (pytest captures stderr): nothing
    mech.release_many(stack, random_seed=4)
    assert capsys.readouterr() == ("", "")
    with pytest.raises(TypeError, match="progressbar"):
        mech.release_many(stack, progressbar="yes")


SHORT = pmd.mcmc.MCMCSettings(draws=200, tune=200, chains=2, cores=1)


def test_a_nuts_release_passes_progress_to_nutpie_and_releases_the_same(monkeypatch):
    """Forced on: the compile spinner runs and nutpie gets ``progress_bar=True``;
    forced off or by default outside a terminal: neither. Seeded values are equal."""
    pytest.importorskip("nutpie")
    import nutpie

    asked, status = [], []
    real_sample, real_status = nutpie.sample, mech_base.progress_status

    def spy(*args, **kwargs):
        asked.append(kwargs["progress_bar"])
        return real_sample(*args, **kwargs)

    def spy_status(message, progressbar=None):
        status.append((message, progressbar))
        return real_status(message, progressbar)

    monkeypatch.setattr(nutpie, "sample", spy)
    monkeypatch.setattr(mech_base, "progress_status", spy_status)
    monkeypatch.delenv("CI", raising=False)
    mech = pmd.KNGMechanism(S2, epsilon=1.0, center=NORTH, radius=0.5)
    data = _data(30, 0)
    # a short run (the gate is not what is tested): its value, not its diagnostics
    kw = dict(sampler="nuts", settings=SHORT, random_seed=3, skip_diagnostics=True)
    on = mech.release(data, progressbar=True, **kw)
    off = mech.release(data, progressbar=False, **kw)
    default = mech.release(data, **kw)  # stderr is pytest's: not a terminal
    assert asked == [True, False, False]
    assert status == [(f"compiling the nuts model of {mech.name} for n = 30 (once per n)", True)]
    np.testing.assert_array_equal(on.value, off.value)
    np.testing.assert_array_equal(on.value, default.value)


def test_pymc_nuts_draws_its_bar_on_stderr_not_stdout(capsys):
    """PyMC draws its bars on stdout; a forced bar is moved to stderr (stdout may carry
    a command's output), and the seeded run is the same without it. A one-variable
    model: what is tested is the display, not the law (compiled in seconds)."""
    import pymc as pm

    with pm.Model() as model:
        pm.Normal("x", 0.0, 1.0)
    kw = dict(settings=SHORT.with_overrides(backend="pymc"), random_seed=5)
    on = pmd.mcmc.sample(model, "nuts", progressbar=True, **kw)
    out, err = capsys.readouterr()
    assert out == "" and "Progress" in err and "Draw" in err, err  # PyMC's table
    off = pmd.mcmc.sample(model, "nuts", progressbar=False, **kw)
    out, err = capsys.readouterr()
    assert "Progress" not in out + err and "Draw" not in out + err
    np.testing.assert_array_equal(on.posterior["x"].values, off.posterior["x"].values)


def test_an_audit_shows_its_pairs_and_finds_the_same(capsys):
    from pymc_manidp.privacy import boundary_pair, quadrature_audit, sample_test

    mech = pmd.KNGMechanism(S2, epsilon=1.0, center=NORTH, radius=np.pi / 8)
    pair = boundary_pair(mech.domain, 10)
    a = quadrature_audit(mech, [pair, pair], resolution=20, refine=1, progressbar=True)
    out, err = capsys.readouterr()
    assert out == "" and "quadrature audit" in err and "3/3" in err
    b = quadrature_audit(mech, [pair, pair], resolution=20, refine=1)
    assert capsys.readouterr() == ("", "")
    assert a.worst_log_ratio == b.worst_log_ratio
    t = sample_test(mech, pair.data, pair.neighbour, size=2_000, random_seed=0, progressbar=True)
    out, err = capsys.readouterr()
    assert out == "" and "sample test" in err and "4/4" in err
    u = sample_test(mech, pair.data, pair.neighbour, size=2_000, random_seed=0)
    assert t.epsilon_lb == u.epsilon_lb


def test_a_calibration_study_counts_its_replicates(capsys):
    """One study (compiling its model costs about 10 s): the bar counts the replicates
    on stderr. That it changes no result is the shared rule's, tested above on the
    releases (the bar draws no random number; ``advance`` runs after each replicate)."""
    pytest.importorskip("nutpie")
    rec = {"value": NORTH, "mechanism": "manifold Laplace", "sigma": 0.3, "restricted": False}
    kw = dict(replicates=3, draws=20, tune=20, backend="nutpie", random_seed=4)
    res = pmd.calibration_study(pmd.noise_aware_model(rec, S2), progressbar=True, **kw)
    out, err = capsys.readouterr()
    assert out == "" and "calibration study" in err and "3/3" in err
    assert res.ranks.shape == (3, 3)


def test_reproduce_shows_a_bar_only_where_asked(capsys, monkeypatch):
    """``pymc-manidp reproduce`` / ``experiments.run``: ``progress=None`` by default,
    resolved by the same rule in the experiments' job runner (a trivial job here)."""
    import inspect

    from pymc_manidp import experiments
    from pymc_manidp.experiments._common import parallel_map

    assert inspect.signature(experiments.run).parameters["progress"].default is None
    jobs = [(k,) for k in range(4)]
    got = parallel_map(abs, jobs, workers=1, progress=True, description="replicates")
    assert got == [0, 1, 2, 3]
    out, err = capsys.readouterr()
    assert out == "" and "replicates" in err and "4/4" in err
    monkeypatch.setenv("CI", "true")
    term = _Terminal()
    monkeypatch.setattr("sys.stderr", term)  # a terminal, but under CI: none
    assert parallel_map(abs, jobs, workers=1, progress=None, description="replicates") == got
    assert term.getvalue() == ""
    monkeypatch.delenv("CI")  # a terminal outside CI: the bar
    parallel_map(abs, jobs, workers=1, progress=None, description="replicates")
    assert "replicates" in term.getvalue()
