"""nutpie's compiled entry points are cached on disk, read new data, and are reused.

``mcmc.compile_nutpie`` replaces ``nutpie.compile_pymc_model``: the two numba cfuncs
nutpie would compile in every process (the data held as constants, uncacheable) read
their data through nutpie's ``user_data`` pointer instead, so numba caches them under
``mcmc.cache_dir()``. The tests check

- where the cache lives (``PYMC_MANIDP_CACHE_DIR``, else ``$XDG_CACHE_HOME``) and that
  ``clear_cache`` removes it (no nutpie needed);
- that the cfunc evaluates the model's log-density and gradient *at the data it was
  given*: after ``_nutpie_with_data`` it equals PyMC's own ``compile_logp`` /
  ``compile_dlogp`` of the model with the new ``pm.Data`` values, and differs from the
  old data's (so reading a stale or wrong pointer fails the test);
- that an unreadable cache entry is dropped and compiled again;
- that a second process loads both cfuncs from the cache and compiles no PyTensor
  function for NUTS (counted with numba's ``cache_hits`` and calls of nutpie's
  ``_make_functions``, not timed), even for another n; that a model with another
  constant compiles again; and that another cache directory starts empty.
"""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from pymc_manidp import mcmc
from pymc_manidp.mcmc import nutpie_cache, sampling

ROOT = Path(__file__).resolve().parents[2]


def test_cache_dir_setting_and_clear(monkeypatch, tmp_path):
    monkeypatch.setenv(mcmc.CACHE_ENV, str(tmp_path / "mine"))
    assert mcmc.cache_dir() == tmp_path / "mine"
    monkeypatch.delenv(mcmc.CACHE_ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert mcmc.cache_dir() == tmp_path / "xdg" / "pymc-manidp"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert mcmc.cache_dir() == Path.home() / ".cache" / "pymc-manidp"
    monkeypatch.setenv(mcmc.CACHE_ENV, str(tmp_path / "mine"))
    (tmp_path / "mine" / "numba").mkdir(parents=True)
    (tmp_path / "mine" / "numba" / "x.nbi").write_text("stale")
    (tmp_path / "mine" / "notes.txt").write_text("the user's own file")
    mcmc.clear_cache()
    assert not (tmp_path / "mine" / "numba").exists()
    assert (tmp_path / "mine" / "notes.txt").exists()  # only our folders are removed
    mcmc.clear_cache()  # clearing an absent cache is fine


def test_a_cache_others_can_write_to_is_not_used(monkeypatch, tmp_path):
    monkeypatch.setenv(mcmc.CACHE_ENV, str(tmp_path / "c"))
    assert nutpie_cache._cache_is_private()  # created with mode 0o700
    assert (tmp_path / "c").stat().st_mode & 0o777 == 0o700
    (tmp_path / "c").chmod(0o777)
    assert not nutpie_cache._cache_is_private()
    (tmp_path / "c").chmod(0o720)
    assert not nutpie_cache._cache_is_private()


def test_a_tampered_manifest_is_a_miss_and_runs_no_code(monkeypatch, tmp_path):
    import json

    monkeypatch.setenv(mcmc.CACHE_ENV, str(tmp_path))
    model = _small_model([0.5], 1.0)
    key = "ab" * 32
    entry = {"args": ["s0"], "key": key}
    good = {"n_dim": 2, "n_expanded": 2, "shared": ["mu"], "logp": entry, "expand": entry}
    nutpie_cache._manifest_path(key).parent.mkdir(parents=True)
    for bad in (
        {**good, "logp": {"args": ["__import__('os').system('false')"], "key": key}},
        {**good, "logp": {"args": ["s0"], "key": "../../etc/passwd"}},
        {**good, "n_dim": "2); import os; (1"},
        {**good, "shared": ["not a pm.Data"]},
        {k: v for k, v in good.items() if k != "expand"},
    ):
        nutpie_cache._manifest_path(key).write_text(json.dumps(bad))
        assert nutpie_cache._load_compiled(model, key) is None


def test_structure_key_sees_check_bounds():
    pytest.importorskip("nutpie")
    import pymc as pm

    keys = []
    for check in (True, False):
        with pm.Model(check_bounds=check) as model:
            pm.HalfNormal("s", 1.0)
        keys.append(nutpie_cache._structure_key(model))
    assert None not in keys and keys[0] != keys[1]


def _small_model(mu, scale):
    import pymc as pm

    with pm.Model() as model:
        m = pm.Data("mu", np.asarray(mu, float))
        s = pm.Data("scale", np.asarray(scale, float))
        x = pm.Normal("x", mu=m.sum(), sigma=s, shape=2)
        pm.Deterministic("x2", x**2)
    return model


def _call_logp(compiled, x):
    cfunc = compiled.compiled_logp_func
    f = ctypes.CFUNCTYPE(
        ctypes.c_int64,
        ctypes.c_uint64,
        ctypes.c_void_p,
        ctypes.c_void_p,
        ctypes.c_void_p,
        ctypes.c_void_p,
    )(cfunc.address)
    x = np.ascontiguousarray(x, float)
    grad = np.zeros_like(x)
    logp = np.zeros(())
    code = f(
        len(x), x.ctypes.data, grad.ctypes.data, logp.ctypes.data, compiled.user_data.ctypes.data
    )
    assert code == 0
    return float(logp), grad


def test_cfunc_reads_the_data_it_is_given(tmp_path, monkeypatch):
    pytest.importorskip("nutpie")
    monkeypatch.setenv(mcmc.CACHE_ENV, str(tmp_path))
    model = _small_model([0.5, 0.25, 0.0], 2.0)
    compiled, _ = mcmc.compile_nutpie(model)
    x = np.array([0.3, -1.2])
    new = {"mu": np.array([1.0, 2.0, -0.5, 0.1]), "scale": np.array(0.7)}  # other n too
    moved = nutpie_cache._nutpie_with_data(compiled, new)
    import pymc as pm

    for values, comp in ((None, compiled), (new, moved)):
        if values is not None:
            pm.set_data(values, model=model)
        point = {"x": x}
        want_lp = model.compile_logp()(point)
        want_grad = model.compile_dlogp()(point)
        lp, grad = _call_logp(comp, x)
        np.testing.assert_allclose(lp, want_lp, rtol=1e-12)
        np.testing.assert_allclose(grad, want_grad, rtol=1e-12)
    # the two data sets give different densities: the check above can fail
    assert not np.isclose(_call_logp(compiled, x)[0], _call_logp(moved, x)[0])
    # an unreadable cache entry is dropped with a warning and compiled again
    for path in (tmp_path / "numba").glob("*.nbi"):
        path.write_bytes(b"not a pickle")
    with pytest.warns(UserWarning, match="unreadable"):
        again, hits = mcmc.compile_nutpie(_small_model([0.0], 1.0))
    assert hits == 0
    assert _call_logp(again, x)[0] == pytest.approx(-0.5 * (x**2).sum() - np.log(2 * np.pi))
    assert mcmc.compile_nutpie(_small_model([0.0], 1.0))[1] == 2  # saved again
    # the original keeps its own arrays (the copy did not write into them)
    np.testing.assert_array_equal(
        compiled.shared_data[compiled.shared_var_keys[model["mu"]]], [0.5, 0.25, 0.0]
    )


_CHILD = textwrap.dedent(
    """
    import numpy as np, pymc as pm
    from nutpie import compile_pymc as ncp
    from pymc_manidp import mcmc
    calls = []  # PyTensor compilations of the NUTS functions (nutpie's _make_functions)
    make = ncp._make_functions
    ncp._make_functions = lambda *a, **k: (calls.append(1), make(*a, **k))[1]
    with pm.Model() as model:
        m = pm.Data("mu", np.arange({n}, dtype=float))
        x = pm.Normal("x", mu=m.mean(), sigma={sigma}, shape=2)
    compiled, hits = mcmc.compile_nutpie(model)
    print("HITS", hits, len(calls))
    """
)


def _fresh_process(cache, n, sigma=1.5):
    """(entry points loaded from the cache, PyTensor compilations) in a new process."""
    env = dict(os.environ, PYMC_MANIDP_CACHE_DIR=str(cache))
    out = subprocess.run(
        [sys.executable, "-c", _CHILD.format(n=n, sigma=sigma)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=900,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    line = next(line for line in out.stdout.splitlines() if line.startswith("HITS"))
    return tuple(int(v) for v in line.split()[1:])


def test_second_process_loads_the_compiled_model(tmp_path):
    pytest.importorskip("nutpie")
    cache = tmp_path / "cache"
    assert _fresh_process(cache, 5) == (0, 1)  # compiled and saved
    assert sorted(p.suffix for p in (cache / "numba").iterdir()) == [".nbc", ".nbc", ".nbi", ".nbi"]
    assert len(list((cache / "models").iterdir())) == 1
    # other data, other n: both entry points loaded, nothing compiled
    assert _fresh_process(cache, 7) == (2, 0)
    # another constant in the graph is another model: compiled again
    assert _fresh_process(cache, 5, sigma=2.5)[1] == 1
    assert _fresh_process(tmp_path / "other", 5) == (0, 1)  # another directory: empty


def _mean_x(compiled, mu, scale, seed):
    idata = compiled.sample(
        {"mu": np.asarray(mu, float), "scale": np.asarray(scale, float)},
        draws=200,
        tune=200,
        chains=2,
        random_seed=seed,
    )
    assert idata.attrs["sampler_backend"] == "nutpie"
    return float(idata.posterior["x"].mean())


@pytest.mark.parametrize("own", [True, False], ids=["cached-wrappers", "nutpie-fallback"])
def test_compiled_sampler_follows_new_data(own, monkeypatch, tmp_path):
    """Sampling with new data draws the new law, with our wrappers and with nutpie's
    own compile (used, with a warning, if nutpie's internals change)."""
    pytest.importorskip("nutpie")
    monkeypatch.setenv(mcmc.CACHE_ENV, str(tmp_path))
    model = _small_model([0.0], 1.0)
    if own:
        compiled = mcmc.CompiledSampler(model, "nuts", backend="nutpie")
    else:

        def moved(model):
            raise AttributeError("nutpie.compile_pymc has no attribute '_make_functions'")

        monkeypatch.setattr(nutpie_cache, "compile_nutpie", moved)
        with pytest.warns(UserWarning, match="cannot cache"):
            compiled = mcmc.CompiledSampler(model, "nuts", backend="nutpie")
        assert compiled.cache_hits == 0
    # x ~ N(sum(mu), scale): 400 draws of sd 0.1 put the mean within 0.1 of sum(mu)
    assert _mean_x(compiled, [20.0, 30.0], 0.1, seed=1) == pytest.approx(50.0, abs=0.1)
    assert _mean_x(compiled, [-3.0], 0.1, seed=2) == pytest.approx(-3.0, abs=0.1)


def test_default_install_samples_nuts_with_nutpie(monkeypatch):
    """nutpie is a core dependency (issue 12: 3-16x faster releases, its compilation
    cached), so ``auto`` means nutpie in a default install; PyMC's NUTS on request."""
    import tomllib

    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert any(d.split(">")[0].split("<")[0].strip() == "nutpie" for d in deps)
    monkeypatch.delenv(mcmc.BACKEND_ENV, raising=False)
    monkeypatch.setattr(sampling, "has_nutpie", lambda: True)
    assert mcmc.nuts_backend() == "nutpie"
    monkeypatch.setenv(mcmc.BACKEND_ENV, "pymc")
    assert mcmc.nuts_backend() == "pymc"
    monkeypatch.setattr(sampling, "has_nutpie", lambda: False)  # e.g. installed --no-deps
    monkeypatch.setenv(mcmc.BACKEND_ENV, "auto")
    assert mcmc.nuts_backend() == "pymc"


def test_structure_key_ignores_data_values_and_sees_every_constant():
    pytest.importorskip("nutpie")
    import pymc as pm
    import pytensor.tensor as pt

    def model(data, const):
        with pm.Model() as m:
            d = pm.Data("d", np.asarray(data, float))
            pm.Normal("x", mu=d.mean() + pt.as_tensor(const).sum(), sigma=1.0, shape=2)
        return m

    big = np.arange(5000.0)  # long enough that its repr elides the middle
    other = big.copy()
    other[2500] += 1.0
    key = nutpie_cache._structure_key(model([1.0, 2.0], big))
    assert key is not None
    assert nutpie_cache._structure_key(model([5.0, -1.0, 3.0], big)) == key  # other data, other n
    assert nutpie_cache._structure_key(model([1.0, 2.0], other)) != key
    assert nutpie_cache._structure_key(model(np.ones((2, 2)), big)) != key  # data of another rank


@pytest.mark.parametrize("k", [2, 3])
def test_every_mechanism_model_on_spd_can_be_keyed(k):
    # SPD(k >= 3)'s volume density used an OpFromGraph (no __props__): its models were
    # compiled again in every process. Each mechanism's model must now have a key, the
    # same for other data of the same n and shape
    pytest.importorskip("nutpie")
    import pymc_manidp as pmd
    from pymc_manidp.datasets.generators import uniform_radius_ball

    M = pmd.SPD(k=k)
    for cls in (pmd.KNGMechanism, pmd.LaplaceMechanism):
        mech = cls(M, epsilon=1.0, center=np.eye(k), radius=1.0)
        keys = [
            nutpie_cache._structure_key(
                mech.model(uniform_radius_ball(M, 20, center=np.eye(k), radius=0.9, random_seed=s))
            )
            for s in (0, 1)
        ]
        assert keys[0] is not None and keys[0] == keys[1], cls.__name__
