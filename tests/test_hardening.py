"""Issue 25 (hardening round 3): radii up to r*, immutable releases, environment
variables, an unwritable HOME and Ctrl-C during imports."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import pymc_manidp as pmd
from pymc_manidp.datasets import generators

NORTH = np.array([0.0, 0.0, 1.0])


# --- item 19: every radius in (0, r*) works ---------------------------------------------------
@pytest.mark.parametrize("mechanism", ["kng", "laplace"])
@pytest.mark.parametrize("below", [1, 2**20])  # one ulp below r*, and a million ulps
def test_a_radius_just_below_r_star_releases_a_point_in_the_ball(mechanism, below):
    S2 = pmd.Sphere(dim=2)
    r = float(S2.max_radius)
    for _ in range(below):  # r walks down `below` ulps: still in (0, r*)
        r = np.nextafter(r, 0.0)
    x = generators.sphere_cap(50, radius=0.99 * r, center=NORTH, random_seed=0)
    cls = pmd.KNGMechanism if mechanism == "kng" else pmd.LaplaceMechanism
    mech = cls(S2, epsilon=1.0, center=NORTH, radius=r)
    if mechanism == "kng" and below == 1:
        # issue 43 item 5: one ulp below r*, Lemma 1's slope H is ~4e-16 and the mean's
        # rounding bound exceeds sigma: the exact sampler would accept nothing, after
        # reading the data. Refused from public facts, before any charge
        budget = pmd.PrivacyBudget(5.0)
        with pytest.raises(ValueError, match="so close to r\\*"):
            mech.release(x, random_seed=1, budget=budget)
        assert budget.spent.epsilon == 0.0 and budget.entries == []
        return
    rel = mech.release(x, random_seed=1)
    assert rel.value.shape == (3,) and np.isclose(np.linalg.norm(rel.value), 1.0)
    if mechanism == "kng":  # KNG's law lives on the public ball
        assert S2.dist(NORTH, rel.value) <= r + 1e-12


# --- items 10-12: the output never replaces an input, is written whole, a/ is a folder --------
def _sphere_files(tmp_path):
    pts = generators.sphere_cap(30, radius=0.3, center=NORTH, random_seed=3)
    shards = tmp_path / "shards"
    shards.mkdir()
    for i, part in enumerate(np.array_split(pts, 3)):
        np.save(shards / f"part-{i}.npy", part)
    return pts, shards


def _release(data, out):
    return [
        "release", str(data), "--manifold", "sphere", "--epsilon", "1", "--center", "0,0,1",
        "--radius", "0.4", "--out", str(out),
    ]  # fmt: skip


def _run(argv, capsys):
    from pymc_manidp.cli import main

    try:
        code = main(argv)
    except SystemExit as exc:
        code = exc.code
    out, err = capsys.readouterr()
    assert "Traceback" not in err, err
    return code, out, err


def test_out_is_never_an_input_after_folders_patterns_and_links(tmp_path, capsys):
    _, shards = _sphere_files(tmp_path)
    before = {p: p.read_bytes() for p in shards.iterdir()}
    link = tmp_path / "link.json"
    link.symlink_to(shards / "part-2.npy")
    hard = tmp_path / "hard.json"
    os.link(shards / "part-0.npy", hard)
    cases = [
        (shards, shards / "part-0.npy"),  # a member of the folder
        (shards / "part-*.npy", shards / "part-1.npy"),  # a member of the pattern
        (shards, link),  # a symbolic link to a member
        (shards, hard),  # another name of a member
        (shards / "part-1.npy", tmp_path / "." / "shards" / "part-1.npy"),  # a single file
    ]
    for data, out in cases:
        code, _, err = _run(_release(data, out), capsys)
        assert code == 2 and "it would be overwritten" in err, (data, out, err)
    assert {p: p.read_bytes() for p in shards.iterdir()} == before


def test_out_with_a_trailing_slash_is_a_folder(tmp_path, capsys):
    _, shards = _sphere_files(tmp_path)
    code, _, err = _run(_release(shards, f"{tmp_path / 'newdir'}/"), capsys)
    assert code == 2 and "names a folder that does not exist" in err, err
    assert not (tmp_path / "newdir").exists()
    code, _, err = _run(_release(shards, f"{tmp_path}/"), capsys)
    assert code == 2 and "is a folder" in err, err


@pytest.mark.skipif(sys.platform == "win32", reason="needs RLIMIT_FSIZE")
def test_a_failed_write_keeps_the_previous_record(tmp_path, capsys):
    import resource

    _, shards = _sphere_files(tmp_path)
    data = tmp_path / "d.npy"
    np.save(data, np.concatenate([np.load(p) for p in sorted(shards.glob("*.npy"))]))
    out = tmp_path / "release.json"
    code, _, err = _run(_release(data, out), capsys)
    assert code == 0, err
    previous = out.read_bytes()
    assert len(previous) > 1024  # the record cannot fit under the limit below
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (1024, hard))  # as `ulimit -f 1`
    try:
        code, _, err = _run(_release(data, out), capsys)
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    # code 4, not 2: the release was made (issue 43, item 9), only its output was lost
    assert code == 4 and "File too large" in err and "the release was made" in err, err
    assert out.read_bytes() == previous  # the previous release is intact
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d.npy", "release.json", "shards"]
    code, _, err = _run(_release(data, out), capsys)  # and a later write replaces it whole
    assert code == 0 and out.read_bytes() != previous
    assert json.loads(out.read_text())["release"]["n"] == 30


# --- items 16-17: an unwritable HOME; Ctrl-C during the imports --------------------------------
def _cli(argv, env=None, code=None, timeout=300):
    """``pymc-manidp argv`` in a fresh interpreter importing this worktree's package."""
    root = Path(__file__).parents[1]
    env = {**os.environ, "PYTHONPATH": str(root), **(env or {})}
    script = code or "import sys; from pymc_manidp.cli import main; sys.exit(main(sys.argv[1:]))"
    return subprocess.run(
        [sys.executable, "-c", script, *argv],
        env=env, capture_output=True, text=True, timeout=timeout, cwd=root,
    )  # fmt: skip


def test_an_unwritable_home_compiles_in_a_temporary_folder_with_one_warning(tmp_path):
    env = {"HOME": "/proc", "PYTENSOR_FLAGS": "", "PYTENSORRC": ""}
    help_ = _cli(["--help"], env)
    assert help_.returncode == 0 and "usage: pymc-manidp" in help_.stdout, help_.stderr
    assert "Traceback" not in help_.stderr
    assert help_.stderr.count("\n") == 1 and "PYTENSOR_FLAGS=base_compiledir" in help_.stderr
    data = tmp_path / "d.csv"
    np.savetxt(
        data, generators.sphere_cap(20, radius=0.3, center=NORTH, random_seed=1), delimiter=","
    )
    rel = _cli(_release(data, tmp_path / "r.json"), env)
    assert rel.returncode == 0, rel.stderr
    assert json.loads((tmp_path / "r.json").read_text())["release"]["n"] == 20
    folder = rel.stderr.split("compiling in ")[1].split(",")[0]
    assert not Path(folder).exists()  # removed at exit


INTERRUPT_AT = """
import sys

class Interrupt:  # Ctrl-C while {module} is being imported
    def find_spec(self, name, path=None, target=None):
        if name == "{module}":
            raise KeyboardInterrupt

sys.meta_path.insert(0, Interrupt())
from pymc_manidp.cli import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.parametrize("module", ["numpy", "pytensor", "scipy"])
def test_ctrl_c_during_the_imports_exits_130_with_one_line(module, tmp_path):
    data = tmp_path / "d.csv"
    data.write_text("0,0,1\n")
    proc = _cli(_release(data, "-"), code=INTERRUPT_AT.format(module=module))
    assert proc.returncode == 130, proc.stderr
    assert proc.stderr == "pymc-manidp: interrupted\n"


# --- item 15: every environment variable the package reads is validated, by name --------------
@pytest.mark.parametrize("value", ["nan", "abc", "inf", "-1", "0"])
def test_a_bad_mcmc_time_limit_is_refused_naming_the_variable(value, monkeypatch):
    from pymc_manidp.mcmc.time_limit import MAX_SECONDS_ENV, check_mcmc_budget

    monkeypatch.setenv(MAX_SECONDS_ENV, value)
    with pytest.raises(ValueError, match=f"{MAX_SECONDS_ENV}='{value}' must be a finite number"):
        check_mcmc_budget(pmd.Sphere(dim=2), 10**7)  # nan switched the limit off
    monkeypatch.setenv(MAX_SECONDS_ENV, "1e-9")  # a valid limit is used: this run exceeds it
    with pytest.raises(ValueError, match="over the 0 s budget"):
        check_mcmc_budget(pmd.Sphere(dim=2), 1000)


def test_backend_and_cache_variables_are_validated_by_name(monkeypatch, tmp_path):
    from pymc_manidp.mcmc.nutpie_cache import CACHE_ENV, cache_dir
    from pymc_manidp.mcmc.sampling import BACKEND_ENV, nuts_backend

    monkeypatch.setenv(BACKEND_ENV, "gibbs")
    with pytest.raises(
        ValueError, match=rf"{BACKEND_ENV}='gibbs' \(the NUTS backend\) must be one of"
    ):
        nuts_backend()
    monkeypatch.setenv(BACKEND_ENV, " PyMC ")
    assert nuts_backend() == "pymc"
    monkeypatch.setenv(CACHE_ENV, "relative/cache")  # would move with the working folder
    with pytest.raises(ValueError, match=f"{CACHE_ENV}='relative/cache' must be an absolute"):
        cache_dir()
    monkeypatch.setenv(CACHE_ENV, str(tmp_path))
    assert cache_dir() == tmp_path
    monkeypatch.delenv(CACHE_ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", "cache")
    with pytest.raises(ValueError, match="XDG_CACHE_HOME='cache' must be an absolute"):
        cache_dir()
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert cache_dir() == tmp_path / "pymc-manidp"


# --- item 20: a release cannot be changed after it is made ------------------------------------
def test_a_release_value_is_read_only_and_not_shared_with_the_caller():
    from pymc_manidp.privacy.release import Calibration, build_release

    given = np.array([0.0, 0.6, 0.8])
    rel = build_release(
        value=given, mechanism="KNG", epsilon=1.0,
        calibration=Calibration(n=10, sensitivity=0.05, sigma=0.1),
        sampler="exact", seed_policy="OS entropy", exact=True,
    )  # fmt: skip
    with pytest.raises(ValueError, match="read-only"):
        rel.value[0] = 99.0
    given[0] = 99.0  # the caller's array is not the record's
    assert rel.public()["value"] == [0.0, 0.6, 0.8]
    x = generators.sphere_cap(20, radius=0.3, center=NORTH, random_seed=0)
    real = pmd.KNGMechanism(pmd.Sphere(dim=2), epsilon=1.0, center=NORTH, radius=0.4)
    released = real.release(x, random_seed=0)
    with pytest.raises(ValueError, match="read-only"):
        released.value[:] = 0.0
    copy = np.array(released.value)  # a copy out is writable and leaves the record alone
    copy[0] = 5.0
    assert released.public()["value"][0] != 5.0
