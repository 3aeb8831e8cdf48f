"""Issue 25 (hardening round 3): radii up to r*, immutable releases, environment
variables, an unwritable HOME and Ctrl-C during imports."""

from __future__ import annotations

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
