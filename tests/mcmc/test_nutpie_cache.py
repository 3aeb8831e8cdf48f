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
import json
import os
import shutil
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


def _plant(kind, root):
    """Make the cache tree under ``root`` writable by someone else, or a link out of it."""
    numba_dir, models = root / "numba", root / "models"
    some_file = sorted(numba_dir.iterdir())[0]
    outside = root.parent / "outside"
    outside.mkdir(exist_ok=True)
    if kind == "top world-writable":
        root.chmod(0o777)
    elif kind == "top group-writable":
        root.chmod(0o720)
    elif kind == "numba/ group-writable":
        numba_dir.chmod(0o770)
    elif kind == "a manifest world-writable":
        next(models.iterdir()).chmod(0o666)
    elif kind == "a numba file another user's":
        os.chown(some_file, 65534, 65534)
    elif kind == "models/ another user's":
        os.chown(models, 65534, 65534)
    elif kind == "a link out of the tree":
        (outside / "index").write_bytes(some_file.read_bytes())
        some_file.unlink()
        some_file.symlink_to(outside / "index")
    elif kind == "numba/ a link":
        shutil.move(numba_dir, outside / "numba")
        numba_dir.symlink_to(outside / "numba")
    elif kind == "a FIFO":
        os.mkfifo(models / "pipe.json")
    else:
        raise AssertionError(kind)


PLANTS = [
    "top world-writable",
    "top group-writable",
    "numba/ group-writable",
    "a manifest world-writable",
    "a numba file another user's",
    "models/ another user's",
    "a link out of the tree",
    "numba/ a link",
    "a FIFO",
]


@pytest.mark.parametrize("kind", PLANTS)
def test_a_cache_tree_others_can_write_to_is_refused(kind, monkeypatch, tmp_path):
    """Every folder and file the loader reads must be ours, writable by us only, and no
    link: checked on a tree laid out as the cache writes it (no nutpie needed)."""
    if "another user" in kind and os.getuid() != 0:
        pytest.skip("giving a file to another user needs root")
    root = tmp_path / "c"
    monkeypatch.setenv(mcmc.CACHE_ENV, str(root))
    assert nutpie_cache._cache_is_private()  # created with mode 0o700
    assert root.stat().st_mode & 0o777 == 0o700
    for sub, name in (
        ("numba", "w-ab.py312.nbi"),
        ("numba", "w-ab.py312.1.nbc"),
        ("models", "k.json"),
    ):
        (root / sub).mkdir(mode=0o700, exist_ok=True)
        (root / sub / name).write_bytes(b"x")
        (root / sub / name).chmod(0o644)
    (root / "notes").mkdir()  # the user's own files beside the cache are not read
    (root / "notes").chmod(0o777)
    assert nutpie_cache._cache_is_private()
    _plant(kind, root)
    with pytest.warns(UserWarning, match="not using the compile cache"):
        assert not nutpie_cache._cache_is_private()


def test_a_file_renamed_during_the_check_is_no_refusal(monkeypatch, tmp_path):
    """numba writes a temporary file and renames it: a racing process may list one that
    is gone when it is inspected. That is no reason to refuse the cache."""
    root = tmp_path / "c"
    (root / "numba").mkdir(mode=0o700, parents=True)
    root.chmod(0o700)
    walk = os.walk

    def racing_walk(top, **kwargs):
        for folder, dirs, files in walk(top, **kwargs):
            yield folder, dirs, [*files, "w-ab.py312.nbi.tmp.0123"]  # listed, then renamed

    monkeypatch.setattr(os, "walk", racing_walk)
    assert nutpie_cache._not_ours_alone(root) is None
    (root / "numba" / "w-ab.py312.nbi").write_bytes(b"x")
    (root / "numba" / "w-ab.py312.nbi").chmod(0o666)  # the check still reads the others
    assert "can be written by others" in nutpie_cache._not_ours_alone(root)


class _Planted:
    """A pickle that, when loaded, creates the folder ``marker`` (it could do anything)."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (os.mkdir, (self.marker,))


def test_a_planted_pickle_in_the_cache_is_never_loaded(monkeypatch, tmp_path):
    """Issue 25 item 1: a pickle planted in ``numba/`` ran on the next release when the
    tree below the top folder was not checked. The control (the same pickle with our
    owner and modes) shows that it does run when loaded, so the refusals can fail."""
    pytest.importorskip("nutpie")
    import pickle

    root = tmp_path / "c"
    monkeypatch.setenv(mcmc.CACHE_ENV, str(root))
    umask = os.umask(0o002)  # group-writable new files: our own must still be private
    try:
        mcmc.compile_nutpie(_small_model([0.5], 1.0))
    finally:
        os.umask(umask)
    assert nutpie_cache._not_ours_alone(root) is None
    marker = tmp_path / "planted-code-ran"
    x = np.array([0.3, -1.2])
    want = -0.5 * ((x - 0.5) ** 2).sum() - np.log(2 * np.pi)

    def plant():
        index = next((root / "numba").glob("*logp_wrapper*.nbi"))
        index.unlink()
        index.write_bytes(pickle.dumps(_Planted(marker)))
        index.chmod(0o644)

    kinds = ["numba/ group-writable", "a link out of the tree"]
    if os.getuid() == 0:
        kinds.append("a numba file another user's")
    for kind in kinds:
        plant()
        _plant(kind, root)
        with pytest.warns(UserWarning, match="not using the compile cache"):
            compiled, hits = mcmc.compile_nutpie(_small_model([0.5], 1.0))
        assert hits == 0 and not marker.exists(), kind
        assert _call_logp(compiled, x)[0] == pytest.approx(want)
        shutil.rmtree(root)
        shutil.rmtree(tmp_path / "outside")
        mcmc.compile_nutpie(_small_model([0.5], 1.0))  # a clean cache again
    plant()  # control: a tree that is ours alone is loaded, planted pickle and all
    # the pickle runs at the cache lookup and again at the compile's read, where its
    # os.mkdir meets its own folder: that entry is unreadable, dropped and rewritten (the
    # "FileExistsError" a full test run warned about, not a race between workers)
    with pytest.warns(UserWarning, match=r"unreadable compiled-function cache entry \(FileExists"):
        mcmc.compile_nutpie(_small_model([0.5], 1.0))
    assert marker.exists()


def _tamper_model():
    import pymc as pm

    with pm.Model() as model:
        mu = pm.Data("mu", np.array([0.5, 0.25]))
        scale = pm.Data("scale", np.array(1.5))
        x = pm.Normal("x", mu=mu.sum(), sigma=scale, shape=2)
        s = pm.HalfNormal("s", scale)  # transformed: a reparameterized name
        pm.Deterministic("x2", x**2 * s)
    return model


def _info(m, i, value):
    info = list(m["shape_info"])
    info[i] = value
    return {**m, "shape_info": info}


TAMPERS = {
    "n_dim": lambda m: {**m, "n_dim": m["n_dim"] + 1},
    "n_dim as text": lambda m: {**m, "n_dim": str(m["n_dim"])},
    "n_expanded": lambda m: {**m, "n_expanded": m["n_expanded"] + 1},
    "names swapped": lambda m: _info(m, 0, m["shape_info"][0][::-1]),
    "slices": lambda m: _info(m, 1, [[0, 1]] * 4),
    "shapes": lambda m: _info(m, 2, [[1, 2], [], [], [2]]),
    "shapes and sizes": lambda m: {
        **m,
        "n_dim": m["n_dim"] + 1,
        "n_expanded": m["n_expanded"] + 2,
        "shape_info": [m["shape_info"][0], [[0, 3], [3, 4], [4, 5], [5, 8]], [[3], [], [], [3]]],
    },
    "reparameterized": lambda m: {**m, "reparameterized": []},
    "shared unknown": lambda m: {**m, "shared": ["mu", "__import__('os')"]},
    "shared repeated": lambda m: {**m, "shared": ["mu", "mu"]},
    "logp args": lambda m: {**m, "logp_args": ["s0", "s7"]},
    "args as code": lambda m: {**m, "logp_args": ["__import__('os').system('false')"]},
    "a field missing": lambda m: {k: v for k, v in m.items() if k != "expand_args"},
    "a field added": lambda m: {**m, "source": "import os"},
    "PyTensor's key not text": lambda m: {**m, "inner": [1, 2]},
    "not an object": lambda m: list(m),
}
# fields the model does not fix: caught by the entry points' key
BOUND = {
    "shared order": lambda m: {**m, "shared": m["shared"][::-1]},
    "logp args order": lambda m: {**m, "logp_args": m["logp_args"][::-1]},
    "expand args": lambda m: {**m, "expand_args": ["s1"]},
    "PyTensor's keys": lambda m: {**m, "inner": m["inner"][::-1]},
}


def test_a_tampered_manifest_is_a_miss_that_rewrites_the_entry(monkeypatch, tmp_path):
    """Issue 25 item 2: a changed ``n_expanded`` made nutpie panic, swapped names
    crashed. Every field tampered: the release draws what an untampered one draws
    with the same seed, and the manifest is written again."""
    pytest.importorskip("nutpie")
    monkeypatch.setenv(mcmc.CACHE_ENV, str(tmp_path))
    values = {"mu": np.array([1.0, 2.0]), "scale": np.array(0.5)}

    def draws():
        compiled = mcmc.CompiledSampler(_tamper_model(), "nuts", backend="nutpie")
        idata = compiled.sample(values, draws=20, tune=20, chains=2, random_seed=3)
        return compiled.cache_hits, idata.posterior["x"].values

    _, want = draws()
    (path,) = (tmp_path / "models").iterdir()
    good = json.loads(path.read_text())
    assert good["shared"] == ["mu", "scale"] and good["logp_args"] == ["s0", "s1"]
    nutpie_cache._check_manifest(_tamper_model(), good)  # the one written fits
    ncp = nutpie_cache._nutpie_internals()
    for name, tamper in {**TAMPERS, **BOUND}.items():
        bad = tamper(good)
        assert bad != good, name
        if name in TAMPERS:
            with pytest.raises((ValueError, TypeError, KeyError)):
                nutpie_cache._check_manifest(_tamper_model(), bad)
        else:  # passes the checks, finds no entry point
            nutpie_cache._check_manifest(_tamper_model(), bad)
            path.write_text(json.dumps(bad))
            assert nutpie_cache._load_compiled(ncp, _tamper_model(), path.stem) is None
        path.write_text(json.dumps(bad))
        hits, got = draws()
        assert np.array_equal(got, want), name
        assert json.loads(path.read_text()) == good, name  # rewritten
        assert hits == 2, name  # the entry points written with the true manifest
    assert draws()[0] == 2 and nutpie_cache._load_compiled(ncp, _tamper_model(), path.stem)


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


def test_two_processes_writing_one_entry_at_once_warn_nothing(tmp_path):
    """Two workers compile the same model into one empty cache at the same moment
    (started together, warnings as errors): both succeed, and a third process loads
    both entry points they wrote."""
    pytest.importorskip("nutpie")
    cache = tmp_path / "cache"
    env = dict(os.environ, PYMC_MANIDP_CACHE_DIR=str(cache))
    cmd = [sys.executable, "-W", "error", "-c", _CHILD.format(n=5, sigma=1.5)]
    writers = [
        subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for _ in range(2)
    ]
    for proc in writers:
        out, err = proc.communicate(timeout=900)
        assert proc.returncode == 0, err.decode()[-3000:]
        assert b"HITS" in out
    assert _fresh_process(cache, 7) == (2, 0)


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
    public compile (used, with a warning naming nutpie's version and the helper, if
    nutpie's internals change)."""
    pytest.importorskip("nutpie")
    monkeypatch.setenv(mcmc.CACHE_ENV, str(tmp_path))
    model = _small_model([0.0], 1.0)
    if own:
        compiled = mcmc.CompiledSampler(model, "nuts", backend="nutpie")
    else:
        from nutpie import compile_pymc

        make = compile_pymc._make_functions

        def changed(model, *, mode, compute_grad, join_expanded, pymc_initial_point_fn, var_names):
            """A new required parameter: nutpie's own compile passes it, the cache not."""
            kwargs = dict(mode=mode, compute_grad=compute_grad, join_expanded=join_expanded)
            return make(model, pymc_initial_point_fn=pymc_initial_point_fn, **kwargs)

        monkeypatch.setattr(compile_pymc, "_make_functions", changed)
        match = r"cannot cache .*: nutpie \S+: nutpie.compile_pymc._make_functions now has"
        with pytest.warns(UserWarning, match=match):
            compiled = mcmc.CompiledSampler(model, "nuts", backend="nutpie")
        assert compiled.cache_hits == 0 and not (tmp_path / "models").exists()
    # x ~ N(sum(mu), scale): 400 draws of sd 0.1 put the mean within 0.1 of sum(mu)
    assert _mean_x(compiled, [20.0, 30.0], 0.1, seed=1) == pytest.approx(50.0, abs=0.1)
    assert _mean_x(compiled, [-3.0], 0.1, seed=2) == pytest.approx(-3.0, abs=0.1)


def test_nutpie_internals_are_those_the_cache_was_written_for():
    """Fails, with the message a user would see, when a nutpie release changes them."""
    pytest.importorskip("nutpie")
    from nutpie import compile_pymc

    assert nutpie_cache._nutpie_internals() is compile_pymc


def test_every_nutpie_private_access_goes_through_the_check():
    """nutpie's compile_pymc is imported in one function of the package, and every
    attribute the cache takes from it is one that function checks."""
    import ast
    import re

    package = ROOT / "pymc_manidp"
    importers = [
        path.relative_to(package).as_posix()
        for path in package.rglob("*.py")
        if re.search(r"compile_pymc\b(?!_model)", path.read_text())
        and path.name != "nutpie_cache.py"
    ]
    assert importers == []
    tree = ast.parse((package / "mcmc" / "nutpie_cache.py").read_text())
    holders = [
        node.name
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef)
        and any(isinstance(n, ast.ImportFrom) and n.module == "nutpie" for n in ast.walk(node))
        and any(isinstance(n, ast.alias) and n.name == "compile_pymc" for n in ast.walk(node))
    ]
    assert holders == ["_nutpie_internals"]
    used = {
        node.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
        if node.value.id == "ncp"
    }
    assert used and used <= set(nutpie_cache._NUTPIE_PRIVATE), used


@pytest.mark.parametrize("change", ["missing", "renamed", "new required parameter", "version"])
def test_a_changed_nutpie_internal_is_named(change, monkeypatch):
    pytest.importorskip("nutpie")
    import nutpie
    from nutpie import compile_pymc as ncp

    if change == "missing":
        monkeypatch.delattr(ncp, "CompiledPyMCModel")
        match = r"^nutpie \S+: nutpie.compile_pymc.CompiledPyMCModel is missing"
    elif change == "renamed":
        monkeypatch.setattr(ncp, "_prepare_dims_and_coords", lambda model, shape_info, names: 0)
        match = r"_prepare_dims_and_coords now has the signature .*\(model, shape_info, names\)"
    elif change == "new required parameter":
        monkeypatch.setattr(ncp, "_rv_dict_to_flat_array_wrapper", lambda fn, names, shapes, d: 0)
        match = "_rv_dict_to_flat_array_wrapper now has the signature"
    else:
        monkeypatch.setattr(nutpie, "__version__", "0.17.0")
        match = r"^nutpie 0\.17\.0: .*tested with nutpie 0\.16\.x only"
    with pytest.raises(nutpie_cache.NutpieInternalsError, match=match) as err:
        nutpie_cache._nutpie_internals()
    assert "nutpie>=0.16.10,<0.17" in str(err.value)  # says what to install
    with pytest.raises(nutpie_cache.NutpieInternalsError, match=match):
        mcmc.compile_nutpie(_small_model([0.0], 1.0))  # checked before anything else


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


def test_samplers_compile_with_strict_floats(monkeypatch):
    # numba's fastmath let a fresh compilation and one loaded from the cache differ in
    # the last bits, so a seeded release differed cold and warm (issue 28, item 6: the
    # coordinates of an S^2 NUTS release differed in about their last 10 bits; with
    # fastmath off a cold, a warm and a second cold run were bit-identical). Every
    # compilation of a release's sampler must run with the flag off.
    import pymc as pm
    import pytensor

    import pymc_manidp as pmd

    seen = []

    def record(model):
        seen.append(pytensor.config.numba__fastmath)
        raise ImportError("stop here: only the flag is under test")

    monkeypatch.setattr(sampling, "_compile_nutpie_or_fallback", record)
    with pm.Model() as model:
        pmd.ManifoldLaplace("x", pmd.Sphere(dim=2), np.array([0.0, 0.0, 1.0]), 0.2)
    # PyTensor's default, which the sampler overrides (tests/conftest.py turns it off for
    # the other tests)
    with pytensor.config.change_flags(numba__fastmath=True):
        with pytest.raises(ImportError, match="stop here"):
            sampling.CompiledSampler(model, "nuts", backend="nutpie")
        assert pytensor.config.numba__fastmath  # restored
    assert seen == [False]


@pytest.mark.parametrize("space", ["sphere", "rotations", "kendall"])
def test_noise_aware_models_can_be_keyed(space):
    # SO(3)'s Laplace normalizer used pt.logaddexp, whose op has no __props__: every
    # noise-aware SO(3) model was compiled again in every process (20-30 s each; found
    # when the SBC tests moved to nutpie). A model must have a key, the same for another
    # release of the same shape, another for another sigma
    pytest.importorskip("nutpie")
    import pymc_manidp as pmd

    M = {
        "sphere": pmd.Sphere(dim=2),
        "rotations": pmd.Rotations(),
        "kendall": pmd.KendallShape(k_landmarks=4),
    }[space]
    rng = np.random.default_rng(0)
    x = M.sample_uniform(rng)

    def key(value, sigma):
        rec = {"value": value, "mechanism": "manifold Laplace", "sigma": sigma, "restricted": False}
        return nutpie_cache._structure_key(pmd.noise_aware_model(rec, M))

    k0 = key(x, 0.3)
    assert k0 is not None
    assert key(M.sample_uniform(rng), 0.3) == k0
    assert key(x, 0.2) != k0


def _tree_hash_reference(root):
    """The source hash as first written (``Path.relative_to``, one update a file)."""
    import hashlib

    h = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        h.update(str(path.relative_to(root)).encode() + path.read_bytes())
    return h.hexdigest()


def test_source_hash_is_the_relative_to_digest_and_sees_every_edit(tmp_path):
    """The cache key's source hash (now sliced strings, not ``relative_to``) is the
    digest of the first formula on a tree whose names sort differently as strings and
    as paths (the files a-x and a/b: "a-x" sorts first as a string, last as a path,
    since "-" < "/" but "a" < "a-x"), with an empty file,
    a non-ASCII name; on the package itself; and it
    changes with one byte, a rename and a new file."""
    root = tmp_path / "pkg"
    files = {
        "a-x.py": b"x = 1\n",
        "a/b.py": b"y = 1/3\n",
        "a_b.py": b"",
        "a/c/d.py": b"z = 0.3333333333333333\n",
        "\u00e9t\u00e9.py": "caf\u00e9 = 1\n".encode(),
        "m/inner.py": b"w = 2\n",
        "notes.txt": b"not hashed",
    }
    for name, data in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    digest = nutpie_cache._tree_hash(root)
    assert digest == _tree_hash_reference(root)
    package = Path(nutpie_cache.__file__).resolve().parents[1]
    assert nutpie_cache._source_hash() == _tree_hash_reference(package)
    (root / "notes.txt").write_bytes(b"edited")  # not source: same key
    assert nutpie_cache._tree_hash(root) == digest
    (root / "a/b.py").write_bytes(b"y = 1/3\n ")
    edited = nutpie_cache._tree_hash(root)
    (root / "a/b.py").rename(root / "a/b2.py")
    renamed = nutpie_cache._tree_hash(root)
    (root / "new.py").write_bytes(b"")
    added = nutpie_cache._tree_hash(root)
    assert len({digest, edited, renamed, added}) == 4
    assert added == _tree_hash_reference(root)
