"""``pymc_manidp.options``: one validated object for the package's three settings.

Each option is validated when set (``TypeError`` for a wrong type, ``ValueError`` naming
the accepted range), falls back to its environment variable read at each use, and a
``with options.context(...)`` block restores what was set before, even on an error.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

import pymc_manidp as pmd
from pymc_manidp import mcmc
from pymc_manidp._options import options
from pymc_manidp.geometry._numba.cache import cache_dir
from pymc_manidp.mcmc.sampling import nuts_backend

ENVS = (
    "PYMC_MANIDP_MCMC_MAX_SECONDS",
    "PYMC_MANIDP_NUTS_BACKEND",
    "PYMC_MANIDP_CACHE_DIR",
    "PYMC_MANIDP_MCMC_MAX_TRACE_BYTES",
    "PYMC_MANIDP_NUTS_DENSITY",
)


@pytest.fixture(autouse=True)
def _clean(monkeypatch):
    for name in ENVS:
        monkeypatch.delenv(name, raising=False)
    options.reset()
    yield
    options.reset()


def test_the_public_object_is_the_one_the_layers_read():
    assert pmd.options is options
    assert list(options) == [
        "mcmc_max_seconds",
        "nuts_backend",
        "cache_dir",
        "mcmc_max_trace_bytes",
        "nuts_density",
    ]
    assert [options.env(k) for k in options] == list(ENVS)
    assert options["mcmc_max_seconds"] == 600.0 == mcmc.MCMC_MAX_SECONDS
    assert options["nuts_backend"] == "auto" and options["cache_dir"] is None
    assert options["mcmc_max_trace_bytes"] == 2e9 == mcmc.MCMC_MAX_TRACE_BYTES
    assert options["nuts_density"] == "auto"


@given(
    st.one_of(
        st.floats(allow_nan=True, allow_infinity=True).filter(lambda v: not v > 0 or math.isinf(v)),
        st.sampled_from([0, -1, -5e-324, 10**400, -(10**400)]),
    )
)
def test_max_seconds_outside_its_range_is_refused_and_changes_nothing(value):
    with pytest.raises(
        ValueError, match=r"options\['mcmc_max_seconds'\] must be a finite number > 0|too large"
    ):
        options["mcmc_max_seconds"] = value
    with pytest.raises(ValueError, match="mcmc_max_seconds"):
        with options.context(nuts_backend="pymc", mcmc_max_seconds=value):
            pass  # pragma: no cover - refused before the block
    assert options["mcmc_max_seconds"] == 600.0 and options["nuts_backend"] == "auto"


@given(st.sampled_from([True, "600", None.__class__, [1.0], b"1"]))
def test_max_seconds_of_another_type_is_a_type_error(value):
    with pytest.raises(TypeError, match="mcmc_max_seconds"):
        options["mcmc_max_seconds"] = value


@given(
    st.floats(min_value=5e-324, max_value=1e308) | st.sampled_from([1 / 3, 0.3333333333333333, 1])
)
def test_max_seconds_in_range_is_kept_as_float(value):
    options["mcmc_max_seconds"] = value
    assert options["mcmc_max_seconds"] == float(value)
    options.reset("mcmc_max_seconds")


@pytest.mark.parametrize(
    "value, err",
    [
        ("cuda", ValueError),
        ("", ValueError),
        ("nutpie ", None),
        ("PyMC", None),
        (3, TypeError),
        (b"pymc", TypeError),
    ],
)
def test_backend_is_one_of_three_words(value, err):
    if err is None:
        options["nuts_backend"] = value
        assert options["nuts_backend"] == value.strip().lower()
    else:
        with pytest.raises(err, match=r"options\['nuts_backend'\].*nutpie, pymc, auto"):
            options["nuts_backend"] = value


@pytest.mark.parametrize(
    "value, err",
    [
        ("fused", ValueError),
        ("", ValueError),
        (" Graph", None),
        (1, TypeError),
        (["graph"], TypeError),
    ],
)
def test_nuts_density_is_auto_or_graph(value, err, monkeypatch):
    if err is None:
        options["nuts_density"] = value
        assert options["nuts_density"] == "graph"
    else:
        with pytest.raises(err, match=r"options\['nuts_density'\].*auto, graph"):
            options["nuts_density"] = value
    # the environment variable is read, and refused the same way, when no value is set
    options.reset()
    monkeypatch.setenv("PYMC_MANIDP_NUTS_DENSITY", "sometimes")
    with pytest.raises(ValueError, match="PYMC_MANIDP_NUTS_DENSITY"):
        options["nuts_density"]


@pytest.mark.parametrize(
    "value, err",
    [("relative/dir", ValueError), ("a\0b", ValueError), (3, TypeError), (b"/tmp", TypeError)],
)
def test_cache_dir_must_be_an_absolute_path(value, err):
    with pytest.raises(err, match=r"options\['cache_dir'\]"):
        options["cache_dir"] = value


def test_unknown_key_is_a_key_error_naming_the_keys():
    for bad in ("max_seconds", None, ["nuts_backend"]):
        with pytest.raises(KeyError, match="mcmc_max_seconds, nuts_backend, cache_dir"):
            options[bad] = 1.0
        with pytest.raises(KeyError, match="the options are"):
            options[bad]
    with pytest.raises(KeyError, match="the options are"):
        with options.context(backend="pymc"):
            pass  # pragma: no cover


def test_python_wins_over_the_environment_which_is_read_at_each_use(monkeypatch, tmp_path):
    monkeypatch.setenv("PYMC_MANIDP_MCMC_MAX_SECONDS", "30")
    assert options["mcmc_max_seconds"] == 30.0  # set after import: still counts
    monkeypatch.setenv("PYMC_MANIDP_MCMC_MAX_SECONDS", "nan")
    with pytest.raises(ValueError, match="environment variable PYMC_MANIDP_MCMC_MAX_SECONDS='nan'"):
        options["mcmc_max_seconds"]
    options["mcmc_max_seconds"] = 45
    assert options["mcmc_max_seconds"] == 45.0  # the bad variable is not read
    options["mcmc_max_seconds"] = None  # back to the variable
    with pytest.raises(ValueError, match="PYMC_MANIDP_MCMC_MAX_SECONDS"):
        options["mcmc_max_seconds"]


def test_context_restores_what_was_set_even_on_error(tmp_path):
    options["nuts_backend"] = "nutpie"
    with pytest.raises(RuntimeError):
        with options.context(nuts_backend="pymc", cache_dir=tmp_path) as o:
            assert o is options
            assert options["nuts_backend"] == "pymc" and options["cache_dir"] == str(tmp_path)
            with options.context(nuts_backend=None):  # None: back to variable and default
                assert options["nuts_backend"] == "auto"
            assert options["nuts_backend"] == "pymc"
            raise RuntimeError
    assert options["nuts_backend"] == "nutpie" and options["cache_dir"] is None


def test_the_three_readers_follow_the_options(tmp_path, monkeypatch):
    with options.context(cache_dir=tmp_path / "c", nuts_backend="pymc", mcmc_max_seconds=1e-9):
        assert cache_dir() == tmp_path / "c"
        assert nuts_backend() == "pymc"
        assert nuts_backend("auto") in ("nutpie", "pymc")  # an argument still wins
        with pytest.raises(ValueError, match="over the 0 s budget"):
            mcmc.check_mcmc_budget(pmd.Sphere(dim=2), 1000)
    assert mcmc.check_mcmc_budget(pmd.Sphere(dim=2), 1000) < 600
    monkeypatch.setenv("PYMC_MANIDP_CACHE_DIR", str(tmp_path / "env"))
    assert cache_dir() == tmp_path / "env"


def test_repr_says_where_each_value_comes_from(monkeypatch):
    monkeypatch.setenv("PYMC_MANIDP_NUTS_BACKEND", "abc")
    options["mcmc_max_seconds"] = 5
    text = repr(options)
    assert "mcmc_max_seconds: 5.0 (set)" in text
    assert "nuts_backend: <invalid $PYMC_MANIDP_NUTS_BACKEND> (env)" in text
    assert "cache_dir: None (default)" in text
