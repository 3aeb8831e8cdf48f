"""docs/own-data.md ("Using your own data"): every Python block on the page runs, and
the page's claims are checked against the code (issue 38, item 13).

The page's blocks run in order in one namespace, as a reader pastes them into one
session. The Poincaré-to-hyperboloid formula the page gives is checked against the
package's ``Hyperbolic`` model (upper sheet, time-like coordinate first, curvature -1)
with an oracle independent of both: the distance from the disc's center is
``2 artanh |p|``. The refusals in the page's table are raised by the calls it names.
"""

from __future__ import annotations

import json
import math
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

import pymc_manidp as pmd
from pymc_manidp.geometry.hyperbolic import from_poincare, poincare_dist

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "own-data.md"
_BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


_BASH = re.compile(r"^```bash\n(.*?)^```", re.S | re.M)


def _blocks() -> list[str]:
    return _BLOCK.findall(PAGE.read_text(encoding="utf-8"))


def test_page_is_in_the_site_toctree():
    index = (ROOT / "docs" / "index.md").read_text(encoding="utf-8")
    assert re.search(r"^own-data$", index, re.M)


def test_every_python_block_runs(tmp_path, monkeypatch):
    blocks = _blocks()
    assert (
        len(blocks) >= 8
    )  # imports, files, SciPy x2, geomstats, pyRiemann, Poincaré, ball, refusals
    monkeypatch.chdir(tmp_path)
    namespace: dict = {"__name__": "own_data_page"}
    for i, code in enumerate(blocks):
        try:
            exec(compile(code, f"{PAGE.name}, python block {i + 1}", "exec"), namespace)
        except Exception as err:
            raise AssertionError(f"{PAGE.name}, python block {i + 1} fails:\n{code}") from err
    # the command line example, on the file the blocks wrote, through this checkout's CLI
    (command,) = _BASH.findall(PAGE.read_text(encoding="utf-8"))
    args = shlex.split(command.replace("\\\n", " "))
    assert args[:2] == ["pymc-manidp", "release"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cli = [sys.executable, "-m", "pymc_manidp.cli", *args[1:]]
    done = subprocess.run(cli, cwd=tmp_path, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    record = json.loads((tmp_path / "release.json").read_text())
    assert np.asarray(record["release"]["value"]).shape == (3, 3)
    assert record["release"]["n"] == 50


def _page_formula(p):
    # the page's formula, written out independently of from_poincare
    p = np.asarray(p, float)
    sq = np.sum(p**2, axis=-1, keepdims=True)
    return np.concatenate([(1 + sq) / (1 - sq), 2 * p / (1 - sq)], axis=-1)


@pytest.mark.parametrize(
    "p",
    [
        [0.0, 0.0],
        [1 / 3, 0.0],
        [0.3333333333333333, -0.3333333333333333],
        [5e-324, 0.0],
        [0.6, 0.79],  # |p| = 0.99: far out, x0 about 100
        [math.nextafter(0.5, 0.0), 0.5],
        [0.1, -0.2, 0.3],  # H^3
        [0.7],  # H^1
    ],
)
def test_poincare_formula_is_the_packages_hyperboloid(p):
    x = _page_formula(p)
    H = pmd.Hyperbolic(dim=len(p))
    assert x[0] > 0  # the upper sheet, time-like coordinate first
    assert np.allclose(H.validate(x), x, rtol=1e-12, atol=0)
    assert np.allclose(from_poincare(p), x, rtol=1e-12, atol=0)
    r = float(np.linalg.norm(p))
    assert math.isclose(float(H.dist(H.origin, x)), 2 * math.atanh(r), rel_tol=1e-9, abs_tol=1e-15)


# up to 4 coordinates of at most 0.49: |p| <= 0.98, inside the ball
_COORD = st.floats(-0.49, 0.49, allow_subnormal=True) | st.sampled_from(
    [1 / 3, 0.3333333333333333, 5e-324, -5e-324, math.nextafter(0.0, 1.0), 0.0]
)


@given(st.lists(_COORD, min_size=1, max_size=4))
@example([0.7, 0.7])  # |p| = 0.99: far out on the sheet
def test_poincare_formula_on_any_ball_point(p):
    x = _page_formula(p)
    H = pmd.Hyperbolic(dim=len(p))
    assert x[0] >= 1.0  # the upper sheet, time-like coordinate first
    assert np.allclose(from_poincare(p), x, rtol=1e-12, atol=0)
    assert np.allclose(H.validate(x), x, rtol=1e-12, atol=0)
    r = float(np.linalg.norm(p))
    assert math.isclose(float(H.dist(H.origin, x)), 2 * math.atanh(r), rel_tol=1e-8, abs_tol=1e-15)


def test_poincare_formula_keeps_distances():
    rng = np.random.default_rng(0)
    p = rng.uniform(-0.6, 0.6, (20, 2))
    q = rng.uniform(-0.6, 0.6, (20, 2))
    H = pmd.Hyperbolic(dim=2)
    assert np.allclose(H.dist(_page_formula(p), _page_formula(q)), poincare_dist(p, q), rtol=1e-10)


def test_the_refusals_in_the_table():
    S = pmd.Sphere(dim=2)
    north = np.array([0.0, 0.0, 1.0])
    mech = pmd.KNGMechanism(S, epsilon=1.0, center=north, radius=np.pi / 8)
    with pytest.raises(ValueError, match=r"^points are not on the sphere.*tolerance"):
        mech.release(np.array([[0.0, 0.0, 1.0], [0.0, 0.1, 0.995]]))
    with pytest.raises(pmd.DomainError, match=r"points lie outside the public ball of radius"):
        mech.release(np.array([[0.0, 0.0, 1.0], [0.0, 0.6, 0.8]]))
    with pytest.raises(ValueError, match=r"^radius 1 is not below r\* = "):
        pmd.KNGMechanism(S, epsilon=1.0, center=north, radius=1.0)
    with pytest.raises(ValueError, match=r"^points are not rotation matrices.*tolerance"):
        pmd.Rotations().validate(np.round(np.eye(3) + 1e-4 * np.ones((3, 3)), 4))
    with pytest.raises(ValueError, match=r"^points are not on the hyperboloid"):
        pmd.Hyperbolic(dim=2).validate(np.array([1.0, 0.5, 0.0]))  # x0 should be sqrt(1.25)
    with pytest.raises(ValueError, match=r"^matrices are not symmetric"):
        pmd.SPD(k=2).validate(np.array([[1.0, 0.2], [0.0, 1.0]]))
    with pytest.raises(ValueError, match=r"the unrestricted Laplace on .* is not normalizable"):
        pmd.LaplaceMechanism(
            pmd.Hyperbolic(dim=2), epsilon=1.0, center=[1.0, 0.0, 0.0], radius=3.0
        ).release(np.tile([1.0, 0.0, 0.0], (2, 1)))
    budget = pmd.PrivacyBudget(epsilon=1.0)
    spend = pmd.KNGMechanism(S, epsilon=0.6, center=north, radius=np.pi / 8)
    spend.release(np.tile(north, (3, 1)), budget=budget)
    with pytest.raises(pmd.BudgetExceededError, match=r"^the release asks for epsilon = 0\.6"):
        spend.release(np.tile(north, (3, 1)), budget=budget)


def test_the_csv_refusal_in_the_table(tmp_path):
    from pymc_manidp.io import read_points

    path = tmp_path / "d.csv"
    path.write_text("0,0,1\n0,1_0,0\n")
    with pytest.raises(ValueError, match=r"is not a number: every record must be plain decimals"):
        read_points(path)


def test_radii_quoted_on_the_page():
    # "π/4 on S², π/2 on SO(3), π/8 on Kendall shapes, unlimited on SPD, Hᵈ and Euclidean"
    assert pmd.Sphere(dim=2).max_radius == pytest.approx(np.pi / 4)
    assert pmd.Rotations().max_radius == pytest.approx(np.pi / 2)
    for k in (3, 4, 5, 8):
        assert pmd.KendallShape(k_landmarks=k).max_radius == pytest.approx(np.pi / 8)
    for M in (pmd.SPD(k=3), pmd.Hyperbolic(dim=2), pmd.Euclidean(dim=2)):
        assert M.max_radius == np.inf
