"""The packaged sensor orientations: rotations, their quaternions, the licence."""

from __future__ import annotations

from importlib import resources

import numpy as np
import pytest
from scipy.spatial.transform import Rotation as SciRot

import pymc_manidp as pmd
from pymc_manidp.datasets import ORIENTATIONS_ATTRIBUTION, load_orientations
from pymc_manidp.geometry.rotations import Rotations

M = Rotations()


@pytest.mark.parametrize(("recording", "n"), [("ngimu", 499), ("xio", 1579)])
def test_orientations_are_rotations_and_match_their_quaternions(recording, n):
    data = load_orientations(recording)
    assert data.recording == recording and data.points.shape == (n, 3, 3)
    np.testing.assert_allclose(M.validate(data.points), data.points, atol=1e-14)
    np.testing.assert_allclose(np.linalg.norm(data.quaternions, axis=1), 1.0, atol=1e-8)
    assert np.all(data.quaternions[:, 0] >= 0)
    # scipy reads the stored quaternions (scalar first) as the same rotations
    want = SciRot.from_quat(data.quaternions, scalar_first=True).as_matrix()
    np.testing.assert_allclose(data.points, want, atol=1e-12)
    assert np.all(np.diff(data.index) > 0)  # in recording order


def test_ngimu_fits_the_public_ball_and_xio_does_not():
    ng = load_orientations("ngimu")
    assert M.dist(np.eye(3), ng.points).max() < 0.6
    pmd.DataDomain(M, np.eye(3), np.pi / 4).check(ng.points)
    xio = load_orientations("xio")
    assert M.dist(np.eye(3), xio.points).max() > 3.0
    with pytest.raises(pmd.DomainError, match="lie outside"):
        pmd.DataDomain(M, np.eye(3), np.pi / 4).check(xio.points)


def test_orientations_bad_recording():
    with pytest.raises(ValueError, match="recording must be one of ngimu, xio"):
        load_orientations("vicon")


def test_orientations_file_small_and_licensed():
    data = resources.files("pymc_manidp.datasets").joinpath("data")
    assert len(data.joinpath("orientations.csv").read_bytes()) < 200_000
    lic = data.joinpath("LICENSES.md").read_text("utf-8")
    for needle in ("orientations.csv", "scikit-kinematics", "BSD-3-Clause", "Thomas Haslwanter"):
        assert needle in lic
    assert "BSD-3-Clause" in ORIENTATIONS_ATTRIBUTION
