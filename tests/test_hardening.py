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
    assert code == 2 and "File too large" in err, err
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
