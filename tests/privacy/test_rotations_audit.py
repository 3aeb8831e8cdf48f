"""The quadrature audit on SO(3): both mechanisms pass, and sigma / 2 is caught.

Oracle for the unrestricted Laplace: SO(3) is homogeneous, so the normalizer does not
depend on the footpoint and the privacy loss of a pair is the shift of the Fréchet
mean over sigma (the triangle inequality, attained along the geodesic through both
means).
"""

from __future__ import annotations

import numpy as np
import pytest

import pymc_manidp as pmd
from pymc_manidp.geometry.rotations import Rotations
from pymc_manidp.privacy import audit as A

M = Rotations()
CENTER, RADIUS = np.eye(3), np.pi / 8
N = 10
# KNG lives on the ball; the unrestricted Laplace on all of SO(3), radial around each
# grid's center: many radial nodes (spacing well below sigma = 0.09), few angles
RESOLUTION = {"KNG": (40, 12, 24), "Laplace": (200, 8, 16), "Laplace-ball": (40, 12, 24)}


def _mech(kind):
    if kind == "KNG":
        return pmd.KNGMechanism(M, epsilon=1.0, center=CENTER, radius=RADIUS)
    restrict = kind == "Laplace-ball"
    return pmd.LaplaceMechanism(M, epsilon=1.0, center=CENTER, radius=RADIUS, restrict=restrict)


@pytest.mark.parametrize("kind", ["KNG", "Laplace", "Laplace-ball"])
def test_audit_passes_both_mechanisms_and_catches_sigma_halved(kind):
    """Boundary, cluster and 2 random pairs (one direction: SO(3) is isotropic), n = 10,
    eps = 1: the mechanism passes; with sigma / 2 the loss doubles and it fails."""
    mech = _mech(kind)
    pairs = A.neighbour_pairs(mech.domain, N, directions=1, random_pairs=2, random_seed=0)
    res = A.quadrature_audit(mech, pairs, resolution=RESOLUTION[kind], refine=1)
    assert res.passed and 0.4 < res.ratio <= 1.0, res.summary()
    assert res.grid_error < 0.03 * res.worst_log_ratio
    if kind == "Laplace":
        shift = M.dist(
            pmd.frechet_mean(M, res.pair.data).mean, pmd.frechet_mean(M, res.pair.neighbour).mean
        )
        assert res.worst_log_ratio == pytest.approx(shift / mech.sigma(N), rel=1e-6)
    bad = A.quadrature_audit(
        A.with_sigma_divided(mech, 2.0), pairs, resolution=RESOLUTION[kind], refine=1
    )
    assert not bad.passed and bad.worst_log_ratio - bad.grid_error > 1.0, bad.summary()
    assert "FAILED" in bad.summary()


@pytest.mark.parametrize("resolution", [4, 5, 7])
def test_the_smallest_int_resolutions_run_in_three_dimensions(resolution):
    """Issue 43, item 14: ``audit --manifold rotations --resolution 4`` said "got 1" (the
    polar axis got 4 // 2 = 2 nodes, halved to 1 by the error estimate). The polar axis
    now keeps at least 4, so every int the CLI accepts (>= 4) runs."""
    mech = _mech("KNG")
    pair = A.boundary_pair(mech.domain, 3)
    loss, err, _ = A.audit_pair(mech, pair.data, pair.neighbour, resolution=resolution)
    assert np.isfinite(loss) and np.isfinite(err)


def test_a_tuple_too_small_to_halve_names_the_fix():
    mech = _mech("KNG")
    pair = A.boundary_pair(mech.domain, 3)
    with pytest.raises(ValueError, match=r"every axis needs at least 4 nodes.*\(4, 1, 4\)"):
        A.audit_pair(mech, pair.data, pair.neighbour, resolution=(8, 3, 8))
