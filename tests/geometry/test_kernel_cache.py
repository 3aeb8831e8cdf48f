"""numba's cache of the geometry kernels lives in the package's checked cache folder.

Issue 43 item 7: the kernels used ``@njit(cache=True)``, so numba loaded their pickled
index and object code from ``$NUMBA_CACHE_DIR`` (or ``__pycache__`` beside the
sources), which nobody checked: a pickle planted there by another user ran on
``pmd.frechet_mean(Sphere(2), x)``. Issue 37 item 9: that cache sat in the source tree,
so every clone compiled the kernels again. Now ``geometry/_numba/cache.py``'s
``njit`` caches them in ``cache_dir()/numba/kernels``, keyed on the source's contents,
and reads nothing unless that folder is ours alone. Each test runs a fresh process (a
cache is read at a kernel's first call in a process):

- the control: a pickle planted in our own cache folder *does* run (so the planting
  is right and the refusals below can fail);
- the same pickle owned by another uid, or writable by others, does not run, the
  process warns and still computes the right mean;
- a pickle planted where numba's default locator reads (``$NUMBA_CACHE_DIR``, owned
  by another uid) does not run: the code before this change ran it;
- a second copy of the package, elsewhere on disk, loads the kernels the first
  compiled (cache hits, no compile), even when that first process ran under umask 002.
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]

PROBE = """
import json, sys
import numpy as np
import pymc_manidp as pmd
from pymc_manidp.geometry._numba import sphere_kernels

y = np.random.default_rng(0).normal(size=(40, 3)) * [0.2, 0.2, 1.0] + [0.0, 0.0, 4.0]
x = y / np.linalg.norm(y, axis=1, keepdims=True)
mean = pmd.frechet_mean(pmd.Sphere(2), x).mean
kernel = sphere_kernels.sphere_log_mean
hits = sum(kernel.stats.cache_hits.values())
line = kernel.py_func.__code__.co_firstlineno
print(json.dumps({"mean": list(mean), "hits": hits, "file": sphere_kernels.__file__, "line": line}))
"""


class _Planted:
    """A pickle that, when loaded, creates the folder ``marker`` (it could do anything)."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (os.makedirs, (self.marker, 0o777, True))  # numba may read the index twice


def _probe(cache, package_root=ROOT, umask=0o022, **env):
    """Run :data:`PROBE` in a fresh process with ``cache`` as the package's cache folder."""
    full = {k: v for k, v in os.environ.items() if not k.startswith("NUMBA_")}
    full.update(PYMC_MANIDP_CACHE_DIR=str(cache), PYTHONPATH=str(package_root), **env)
    out = subprocess.run(  # run from the cache's folder: the working folder is on sys.path
        [sys.executable, "-c", PROBE],
        env=full,
        capture_output=True,
        text=True,
        cwd=cache.parent,
        umask=umask,
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1]), out.stderr


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    """A cache folder where the sphere kernels were compiled, and the probe's answer.

    Compiled under umask 002 (a common default), which leaves numba's new files
    group-writable: the cache must still be ours alone for the next process."""
    cache = tmp_path_factory.mktemp("cache")
    first, _ = _probe(cache, umask=0o002)
    assert first["hits"] == 0
    return cache, first


def _fresh_copy(compiled, tmp_path):
    cache = tmp_path / "cache"
    shutil.copytree(compiled[0], cache)
    cache.chmod(0o700)
    (index,) = (cache / "numba" / "kernels").glob("sphere_kernels.sphere_log_mean-*.nbi")
    return cache, index


def _plant(index, marker):
    index.unlink()
    index.write_bytes(pickle.dumps(_Planted(marker)))
    index.chmod(0o600)


def test_a_second_copy_of_the_package_compiles_nothing(compiled, tmp_path):
    """Issue 37 item 9: the kernels are cached in the checked folder (not beside the
    sources), keyed on the source's contents, not its path: another copy of the same
    code loads them."""
    cache, first = _fresh_copy(compiled, tmp_path)[0], compiled[1]
    names = {p.name for p in (cache / "numba" / "kernels").iterdir()}
    assert any(n.startswith("sphere_kernels.sphere_log_mean-") for n in names), names
    clone = tmp_path / "clone"
    shutil.copytree(
        ROOT / "pymc_manidp", clone / "pymc_manidp", ignore=shutil.ignore_patterns("__pycache__")
    )
    again, stderr = _probe(cache, package_root=clone)
    assert again["file"].startswith(str(clone))
    assert again["hits"] >= 1 and "not using" not in stderr
    np.testing.assert_array_equal(again["mean"], first["mean"])


def test_a_pickle_planted_in_our_own_cache_runs_the_control(compiled, tmp_path):
    """Why the checks matter: numba unpickles the index it finds. Here the folder is
    ours alone, so it is read, planted pickle and all."""
    cache, index = _fresh_copy(compiled, tmp_path)
    marker = tmp_path / "planted-code-ran"
    _plant(index, marker)
    _, stderr = _probe(cache)
    assert marker.exists()
    assert "not using the compile cache" not in stderr


PLANTS = {
    "index owned by another uid": lambda cache, index: os.chown(index, 12345, 12345),
    "index writable by others": lambda cache, index: index.chmod(0o666),
}


@pytest.mark.parametrize("kind", list(PLANTS))
def test_a_planted_pickle_others_could_write_is_never_loaded(kind, compiled, tmp_path):
    if "uid" in kind and os.getuid() != 0:
        pytest.skip("giving a file to another user needs root")
    cache, index = _fresh_copy(compiled, tmp_path)
    marker = tmp_path / "planted-code-ran"
    _plant(index, marker)
    PLANTS[kind](cache, index)
    again, stderr = _probe(cache)
    assert not marker.exists(), kind
    assert "not using the compile cache" in stderr and str(cache) in stderr
    assert again["hits"] == 0
    np.testing.assert_array_equal(again["mean"], compiled[1]["mean"])


def test_numba_cache_dir_is_not_read_for_the_kernels(compiled, tmp_path):
    """The issue's reproduction: a pickle another user planted where numba's own
    locator looks (``$NUMBA_CACHE_DIR``) ran before this change; now the kernels are
    looked up in the checked folder only."""
    if os.getuid() != 0:
        pytest.skip("giving a file to another user needs root")
    from numba.core.caching import _CacheLocator

    cache = tmp_path / "cache"  # empty: the kernels compile
    numba_dir = tmp_path / "numba-cache"
    py_file, line = compiled[1]["file"], compiled[1]["line"]
    name = f"sphere_kernels.sphere_log_mean-{line}.py{sys.version_info[0]}{sys.version_info[1]}.nbi"
    planted = numba_dir / _CacheLocator.get_suitable_cache_subpath(py_file) / name
    planted.parent.mkdir(parents=True)
    marker = tmp_path / "planted-code-ran"
    planted.write_bytes(pickle.dumps(_Planted(marker)))
    for path in (planted, planted.parent, numba_dir):
        os.chown(path, 12345, 12345)
    again, _ = _probe(cache, NUMBA_CACHE_DIR=str(numba_dir))
    assert not marker.exists()
    np.testing.assert_array_equal(again["mean"], compiled[1]["mean"])


def test_an_empty_home_is_no_cache_in_the_working_folder(monkeypatch, tmp_path):
    """``HOME=''``: Python reads it as ``/`` (the default cache became
    ``/.cache/pymc-manidp``), PyTensor as the working folder (``./.pytensor``, issue 43
    item 11). Neither is the user's: refused by name, and a computation goes on
    uncached with a warning, writing nothing."""
    from pymc_manidp.geometry._numba import cache

    for name in (cache.CACHE_ENV, "XDG_CACHE_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", "")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match="HOME='' must be an absolute path"):
        cache.cache_dir()
    with pytest.warns(UserWarning, match="not using the compile cache: .*HOME=''"):
        assert cache.private_cache() is None
    assert list(tmp_path.iterdir()) == []


MOVED_PROBE = """
import json, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
mod = __import__(sys.argv[2] + ".sphere_kernels", fromlist=["sphere_log_mean"])
x = np.array([0.0, 0.0, 1.0])
y = np.array([[np.sin(0.5), 0.0, np.cos(0.5)]])
g, energy, _, _ = mod.sphere_log_mean(x, y, np.ones(1), 1.0, False)
print(json.dumps({"g": list(g), "hits": sum(mod.sphere_log_mean.stats.cache_hits.values())}))
"""


def test_a_kernel_file_under_another_module_name_is_a_miss(tmp_path):
    """The key is the source's contents, so the same kernel file under another module
    name (a file moved between folders, as the fused kernels were) found the first
    module's index, whose functions it could not import (ModuleNotFoundError on
    load). The module's name is now part of the key: a miss, compiled again."""
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    src = ROOT / "pymc_manidp" / "geometry" / "_numba" / "sphere_kernels.py"
    for pkg in ("first_home", "second_home"):
        (tmp_path / pkg / pkg).mkdir(parents=True)
        (tmp_path / pkg / pkg / "__init__.py").write_text("")
        shutil.copy(src, tmp_path / pkg / pkg / "sphere_kernels.py")
    full = {k: v for k, v in os.environ.items() if not k.startswith("NUMBA_")}
    full.update(PYMC_MANIDP_CACHE_DIR=str(cache), PYTHONPATH=str(ROOT))
    answers = []
    for pkg in ("first_home", "second_home"):  # the second cannot import the first
        out = subprocess.run(
            [sys.executable, "-c", MOVED_PROBE, str(tmp_path / pkg), pkg],
            env=full,
            capture_output=True,
            text=True,
            cwd=tmp_path,
        )
        assert out.returncode == 0, out.stderr
        answers.append(json.loads(out.stdout.strip().splitlines()[-1]))
    assert answers[0]["hits"] == 0 and answers[1]["hits"] == 0
    np.testing.assert_allclose(answers[1]["g"], [0.5, 0.0, 0.0], atol=1e-15)
    np.testing.assert_array_equal(answers[1]["g"], answers[0]["g"])


CALLER = """
from pymc_manidp.geometry._numba.cache import njit
from pymc_manidp.geometry._numba.probe_callee import callee


@njit(cache=True)
def caller(x):
    return callee(x) + 1.0
"""

CALLER_PROBE = """
import json
from pymc_manidp.geometry._numba import probe_caller
value = probe_caller.caller(1.0)
print(json.dumps({"value": value, "hits": sum(probe_caller.caller.stats.cache_hits.values())}))
"""


def test_a_kernel_whose_callee_changed_in_another_file_is_compiled_again(tmp_path):
    """numba compiles a callee into its caller's cached object code but checks only the
    caller's file: after the callee's file changed, the caller's cache (its own file
    unchanged) still ran the old callee (here 3.0 after the callee was edited to give 11.0:
    fails on the key of the caller's file alone). The key now covers the kernel trees."""
    clone = tmp_path / "clone"
    shutil.copytree(
        ROOT / "pymc_manidp", clone / "pymc_manidp", ignore=shutil.ignore_patterns("__pycache__")
    )
    kernels = clone / "pymc_manidp" / "geometry" / "_numba"
    (kernels / "probe_caller.py").write_text(CALLER)
    callee = "from pymc_manidp.geometry._numba.cache import njit\n\n\n@njit\ndef callee(x):\n"
    (kernels / "probe_callee.py").write_text(callee + "    return 2.0 * x\n")
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    full = {k: v for k, v in os.environ.items() if not k.startswith("NUMBA_")}
    full.update(PYMC_MANIDP_CACHE_DIR=str(cache), PYTHONPATH=str(clone))

    def probe():
        out = subprocess.run(
            [sys.executable, "-c", CALLER_PROBE],
            env=full,
            capture_output=True,
            text=True,
            cwd=tmp_path,
        )
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout.strip().splitlines()[-1])

    assert probe() == {"value": 3.0, "hits": 0}
    assert probe() == {"value": 3.0, "hits": 1}  # cached: the same sources load
    (kernels / "probe_callee.py").write_text(callee + "    return 10.0 * x\n")
    assert probe() == {"value": 11.0, "hits": 0}
