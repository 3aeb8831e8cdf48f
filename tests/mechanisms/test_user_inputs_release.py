"""Releases from the inputs a user has (issue 38, items 1-3): SciPy ``Rotation`` objects
as data, center and footpoint; ``project=True`` (explicit, recorded, curator-only
distances); the command line's ``--layout quaternion|poincare``, ``--scalar-first`` and
``--project``, through the installed ``pymc-manidp`` command as well as ``main``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy.spatial.transform import Rotation

import pymc_manidp as pmd
from pymc_manidp.cli import main
from pymc_manidp.datasets import sphere_cap

ROOT = Path(__file__).resolve().parents[2]
SO3 = pmd.Rotations()
S2 = pmd.Sphere(dim=2)
SPD2 = pmd.SPD(k=2)
H2 = pmd.Hyperbolic(dim=2)


def _rotations(n=200, seed=0, spread=0.2):
    return Rotation.from_rotvec(spread * np.random.default_rng(seed).standard_normal((n, 3)))


# --- item 1 -------------------------------------------------------------------------------
@pytest.mark.parametrize("cls", [pmd.LaplaceMechanism, pmd.KNGMechanism])
def test_release_of_a_rotation_object_equals_the_release_of_its_matrices(cls):
    r = _rotations()
    mech = cls(SO3, epsilon=1.0, center=Rotation.identity(), radius=1.0)
    a = mech.release(r, random_seed=3)
    b = cls(SO3, epsilon=1.0, center=np.eye(3), radius=1.0).release(r.as_matrix(), random_seed=3)
    np.testing.assert_array_equal(a.value, b.value)
    assert a.n == 200 and a.sensitivity == b.sensitivity
    rels = mech.release_many([r, r[:50]], random_seed=[1, 2])
    assert rels.values.shape == (2, 3, 3) and [x.n for x in rels] == [200, 50]
    assert mech.sample(r, 4, random_seed=0).shape == (4, 3, 3)


def test_a_rotation_footpoint_in_a_pymc_model():
    import pymc as pm

    with pm.Model():
        x = pmd.ManifoldLaplace("x", SO3, footpoint=Rotation.from_rotvec([0, 0, 0.3]), sigma=0.2)
    draw = pm.draw(x, random_seed=0)
    SO3.validate(draw)


# --- item 2 -------------------------------------------------------------------------------
def test_project_is_explicit_recorded_and_its_distances_stay_with_the_curator(tmp_path):
    r = _rotations()
    rounded = np.round(r.as_matrix(), 4)
    mech = pmd.KNGMechanism(SO3, epsilon=1.0, center=np.eye(3), radius=1.0)
    with pytest.raises(ValueError, match=r"not orthogonal.*project=True.*--project"):
        mech.release(rounded, random_seed=0)  # never silent: refused without the opt-in
    rel = mech.release(rounded, random_seed=0, project=True)
    assert rel.opt_outs == ("project",) and rel.public()["opt_outs"] == ["project"]
    moved = rel.sampler_info["projection"]
    assert moved["records_moved"] == 200
    # oracle: the largest Frobenius distance from the rounded records to SciPy's matrices
    truth = np.max(np.linalg.norm(rounded - r.as_matrix(), axis=(1, 2)))
    assert 0 < moved["max_distance"] <= 1.01 * truth
    # the same release as from the exact matrices, up to the rounding: nearly the same value
    exact = mech.release(r.as_matrix(), random_seed=0)
    assert float(SO3.dist(exact.value, rel.value)) < 1e-3
    assert "projection" not in json.dumps(rel.public())
    rel.to_json(tmp_path / "public.json", public=True)
    assert "max_distance" not in (tmp_path / "public.json").read_text()
    rel.to_json(tmp_path / "curator.json")
    back = pmd.Release.from_json(tmp_path / "curator.json")
    assert back.opt_outs == ("project",) and back.sampler_info["projection"] == moved


def test_project_on_the_sphere_and_spd_and_the_sensitivity_is_unchanged():
    x = 1.01 * sphere_cap(100, radius=0.3, random_seed=0)
    mech = pmd.LaplaceMechanism(S2, epsilon=1.0, center=[0, 0, 1.0], radius=0.4)
    rel = mech.release(x, random_seed=1, project=True)
    assert rel.sensitivity == mech.sensitivity(100)  # a per-record map: Δ as without it
    assert rel.sampler_info["projection"]["max_distance"] == pytest.approx(0.01, rel=1e-9)
    spd = np.array([[[1.0, 0.1], [0.1000001, 1.0]]] * 20)
    rel = pmd.KNGMechanism(SPD2, epsilon=1.0, center=np.eye(2), radius=0.5).release(
        spd, random_seed=1, project=True
    )
    assert rel.sampler_info["projection"]["max_distance"] == pytest.approx(np.sqrt(2) * 5e-8)


def test_project_is_refused_before_any_charge_where_it_cannot_apply():
    budget = pmd.PrivacyBudget(epsilon=1.0)
    mech = pmd.KNGMechanism(H2, epsilon=0.5, center=H2.origin, radius=1.0)
    with pytest.raises(ValueError, match="offers no projection"):
        mech.release(np.tile(H2.origin, (5, 1)), project=True, budget=budget)
    import dask.array as da

    mech = pmd.KNGMechanism(S2, epsilon=0.5, center=[0, 0, 1.0], radius=0.5)
    lazy = da.from_array(np.tile([0, 0, 1.0], (10, 1)), chunks=5)
    with pytest.raises(ValueError, match="in memory"):
        mech.release(lazy, project=True, budget=budget)
    assert budget.spent.epsilon == 0 and budget.public()["charges"] == []


@given(project=st.one_of(st.none(), st.text(max_size=3), st.integers(), st.floats()))
def test_project_must_be_a_bool(project):
    mech = pmd.KNGMechanism(S2, epsilon=1.0, center=[0, 0, 1.0], radius=0.5)
    with pytest.raises(TypeError, match="project must be True or False"):
        mech.release(np.array([[0, 0, 1.0]]), project=project)


# --- the command line ---------------------------------------------------------------------
def run(argv, capsys):
    try:
        code = main(argv)
    except SystemExit as exc:
        code = exc.code
    out, err = capsys.readouterr()
    assert "Traceback" not in err + out, err
    return code, out, err


def _args(path, manifold, *extra):
    return [
        "release", str(path), "--manifold", manifold, "--epsilon", "1", "--center",
        "identity", "--radius", "1", "--seed", "5", "--allow-fixed-seed", "--out", "-", *extra,
    ]  # fmt: skip


def test_cli_quaternion_layout_scalar_last_and_first(tmp_path, capsys):
    r = _rotations(50)
    np.savetxt(tmp_path / "q.csv", r.as_quat(), delimiter=",")
    np.savetxt(tmp_path / "w.csv", r.as_quat(scalar_first=True), delimiter=",")
    code, _, err = run(_args(tmp_path / "q.csv", "rotations"), capsys)
    assert code == 2 and "--layout quaternion" in err and "scalar last" in err
    values = []
    for name, extra in (("q.csv", []), ("w.csv", ["--scalar-first"])):
        code, out, err = run(
            _args(tmp_path / name, "rotations", "--layout", "quaternion", *extra), capsys
        )
        assert code == 0, err
        values.append(json.loads(out)["release"]["value"])
    ref = pmd.KNGMechanism(SO3, epsilon=1.0, center=np.eye(3), radius=1.0)
    expected = ref.release(r.as_matrix(), random_seed=5).value
    np.testing.assert_allclose(values[0], expected, atol=1e-12)
    np.testing.assert_allclose(values[1], expected, atol=1e-12)
    # the wrong convention is not silently another rotation: norms are fine, values differ
    code, out, _ = run(_args(tmp_path / "w.csv", "rotations", "--layout", "quaternion"), capsys)
    assert code != 0 or not np.allclose(json.loads(out)["release"]["value"], expected)


def test_cli_poincare_layout_reads_h2(tmp_path, capsys):
    p = 0.3 * np.random.default_rng(1).uniform(-1, 1, (60, 2))
    np.savetxt(tmp_path / "p.csv", p, delimiter=",")
    code, _, err = run(_args(tmp_path / "p.csv", "hyperbolic"), capsys)
    assert code == 2 and "--layout poincare" in err
    code, out, err = run(_args(tmp_path / "p.csv", "hyperbolic", "--layout", "poincare"), capsys)
    assert code == 0, err
    doc = json.loads(out)
    assert doc["manifold"]["spec"] == "Hyperbolic(dim=2)"
    H2.validate(doc["release"]["value"])
    for extra, msg in (
        (["--layout", "quaternion"], "no layout 'quaternion'"),
        (["--scalar-first"], "--scalar-first is for --layout quaternion"),
        (["--layout", "poincare", "--scalar-first"], "--scalar-first is for --layout"),
    ):
        code, _, err = run(_args(tmp_path / "p.csv", "hyperbolic", *extra), capsys)
        assert code == 2 and msg in err, err
    np.savetxt(tmp_path / "edge.csv", [[0.6, 0.8]], delimiter=",")
    code, _, err = run(_args(tmp_path / "edge.csv", "hyperbolic", "--layout", "poincare"), capsys)
    assert code == 2 and "norm < 1" in err


def test_installed_command_projects_rounded_frames_and_says_so(tmp_path):
    """Frames rounded to 6 decimals (as the MEG helmet's): refused, naming --project;
    released with it, the output says so publicly, the distance goes to stderr only."""
    r = _rotations(100)
    np.savetxt(tmp_path / "m.csv", np.round(r.as_matrix().reshape(-1, 9), 6), delimiter=",")
    exe = Path(sys.executable).parent / "pymc-manidp"
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "pymc_manidp.cli"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    base = _args(tmp_path / "m.csv", "rotations")
    done = subprocess.run(cmd + base, capture_output=True, text=True, env=env, cwd=tmp_path)
    assert done.returncode == 2 and "--project" in done.stderr, done.stderr
    done = subprocess.run(
        [*cmd, *base, "--project"], capture_output=True, text=True, env=env, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["options"]["project"] is True and doc["release"]["opt_outs"] == ["project"]
    assert "max_distance" not in done.stdout and "farthest by" in done.stderr
