"""The quadrature audit in the tangent chart (issue 39): tangent Gaussian and K-norm.

Oracles: the closed-form privacy profile of two Gaussians at distance |g - g'|
(Balle & Wang 2018, ``gaussian_delta``) and the K-norm loss |g - g'|/sigma (the
normalizers of two translates are equal). Each audit is shown to FAIL the mechanism
with sigma halved (``with_sigma_divided``), on S^2, H^2 and SPD(2).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

import pymc_manidp as pmd
from pymc_manidp.privacy import audit as A
from pymc_manidp.privacy.audit import neighbours
from pymc_manidp.stats.gaussian import gaussian_delta

SETTINGS = {
    "S2": (pmd.Sphere(dim=2), np.array([0.0, 0.0, 1.0]), np.pi / 8),
    "H2": (pmd.Hyperbolic(dim=2), np.array([1.0, 0.0, 0.0]), 1.0),
    "SPD2": (pmd.SPD(k=2), np.eye(2), 1.0),
}
# 2-D: 64 nodes across (x 8 along g - g' for the Gaussian); SPD(2) is 3-D
RESOLUTION = {"S2": 64, "H2": 64, "SPD2": 16}
N = 10


def make(kind, name, **kw):
    M, c, r = SETTINGS[name]
    if kind == "gaussian":
        return pmd.TangentGaussianMechanism(M, epsilon=1.0, delta=1e-6, center=c, radius=r, **kw)
    return pmd.TangentLaplaceMechanism(M, epsilon=1.0, center=c, radius=r, **kw)


def pairs_for(mech):
    # one frame direction (S^2, H^2 are isotropic at the center) and its clusters;
    # SPD(2): the boundary pairs of all three directions, the worst there (docs/audit.md)
    if mech.manifold.dim == 3:
        return [
            p
            for p in A.neighbour_pairs(mech.domain, N, random_pairs=0)
            if p.label.startswith("boundary (")
        ]
    return A.neighbour_pairs(mech.domain, N, directions=1, random_pairs=1, random_seed=0)


@pytest.mark.parametrize("name", ["S2", "H2", "SPD2"])
@pytest.mark.parametrize("kind", ["gaussian", "k-norm"])
def test_tangent_audit_passes_both_mechanisms_and_catches_sigma_over_2(kind, name):
    mech = make(kind, name)
    pairs = pairs_for(mech)
    res = A.tangent_audit(mech, pairs, resolution=RESOLUTION[name])
    assert res.passed, res.summary()
    assert res.noise == kind and "PASSED" in res.summary()
    # the search gets close to the bound: L = 1 and the boundary pair attains Delta
    # on H^2 and SPD(2); on S^2 L and Reimherr's Delta are conservative
    low = {"S2": 0.5, "H2": 0.98, "SPD2": 0.98}[name]
    if kind == "k-norm":
        assert low <= res.ratio <= 1.0, res.summary()
    else:
        assert res.worst - res.grid_error <= mech.delta, res.summary()
        if name != "S2":
            assert res.ratio >= 0.98, res.summary()
    bad = A.tangent_audit(A.with_sigma_divided(mech, 2.0), pairs, resolution=RESOLUTION[name])
    assert not bad.passed, bad.summary()
    assert "FAILED" in bad.summary()
    if kind == "gaussian":
        # sigma/2 doubles mu: delta(1) of mu = 0.47 is about 5e-3 (90e-6 on S^2, whose
        # worst pair is at 0.66 Delta_T)
        assert bad.worst - bad.grid_error > (50 if name == "S2" else 1000) * mech.delta
    else:
        assert bad.worst - bad.grid_error > mech.epsilon


@pytest.mark.parametrize("kind", ["gaussian", "k-norm"])
def test_tangent_audit_matches_the_closed_form_on_its_worst_pair(kind):
    mech = make(kind, "H2")
    pair = A.boundary_pair(mech.domain, N)
    res = A.tangent_audit(mech, pair, resolution=64)
    g, g2 = (mech.mean_coords(x) for x in (pair.data, pair.neighbour))
    shift = float(np.linalg.norm(g - g2)) / mech.sigma(N)
    if kind == "k-norm":
        assert res.worst == pytest.approx(shift, rel=1e-12)
        return
    # the reported quadrature error (fine - coarse) bounds the actual one
    assert abs(res.worst - gaussian_delta(1.0, shift)) <= res.grid_error
    assert res.worst == pytest.approx(gaussian_delta(1.0, shift), rel=3e-3)
    for eps, numerical, gdp in res.profile:
        exact = gaussian_delta(eps, shift)
        assert numerical == pytest.approx(exact, rel=3e-3, abs=1e-20)
        assert exact <= gdp * (1 + 1e-9)  # the pair's profile is below the charged mu's


def test_tangent_audit_catches_a_mu_that_understates_the_noise():
    """The μ the budget composes is audited too: a mechanism that keeps σ but claims a
    smaller μ passes the (ε, δ) check and fails the μ-GDP profile."""
    mech = make("gaussian", "H2")

    class Claims(type(mech)):
        def mu(self, n):
            return super().mu(n) / 1.5

    fake = object.__new__(Claims)
    fake.__dict__.update(mech.__dict__)
    res = A.tangent_audit(fake, A.boundary_pair(mech.domain, N), resolution=64)
    assert not res.passed, res.summary()
    assert any(num - gdp > 0 for _, num, gdp in res.profile if gdp > 1e-12)


def test_tangent_audit_refuses_a_manifold_law():
    M, c, r = SETTINGS["S2"]
    kng = pmd.KNGMechanism(M, epsilon=1.0, center=c, radius=r)
    with pytest.raises(TypeError, match=r"tangent mechanism .*quadrature_audit"):
        A.tangent_audit(kng, A.boundary_pair(kng.domain, N))


def test_tangent_audit_refuses_a_two_stage_release():
    M, c, r = SETTINGS["H2"]
    two = pmd.TwoStageTangentMechanism(M, epsilon=1.0, delta=1e-6, center=c, radius=r)
    with pytest.raises(TypeError, match="audit its stages"):
        A.tangent_audit(two, A.boundary_pair(two.domain, N))


def test_tangent_audit_refuses_a_grid_too_large_before_building_it():
    mech = make("k-norm", "SPD2")
    with pytest.raises(ValueError, match=r"choose resolution <= \d+"):
        A.tangent_audit(mech, A.boundary_pair(mech.domain, N), resolution=2**20, max_bytes=1e6)


ADVERSARIAL = st.one_of(
    st.sampled_from(
        [
            None, True, False, 0, 1, 7, 9, -4, 2**63, 10**400, 1e308, 5e-324, 1 / 3,
            0.3333333333333333, math.nextafter(8.0, 9.0), float("nan"), float("inf"),
            "64", [64], np.float64(64.0),
        ]
    ),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True, allow_infinity=True),
)  # fmt: skip


@given(resolution=ADVERSARIAL)
@example(resolution=10**400)  # its size estimate was an OverflowError, not a refusal
def test_tangent_audit_resolution_is_an_even_int_of_at_least_8(resolution):
    mech = make("k-norm", "H2")
    pair = A.boundary_pair(mech.domain, N)
    ok = (
        isinstance(resolution, int | np.integer)
        and not isinstance(resolution, bool)
        and 8 <= resolution <= 256
        and resolution % 2 == 0
    )
    if ok:
        assert A.tangent_audit(mech, pair, resolution=int(resolution)).passed
        return
    if isinstance(resolution, bool) or not isinstance(resolution, int | np.integer):
        with pytest.raises(TypeError, match="resolution must be an int"):
            A.tangent_audit(mech, pair, resolution=resolution)
    elif resolution > 256:
        with pytest.raises(ValueError, match="resolution"):
            A.tangent_audit(mech, pair, resolution=resolution, max_bytes=1e7)
    else:
        with pytest.raises(ValueError, match="resolution"):
            A.tangent_audit(mech, pair, resolution=resolution)


@given(epsilon=ADVERSARIAL)
def test_tangent_audit_epsilon_is_a_positive_real(epsilon):
    mech = make("k-norm", "H2")
    pair = A.boundary_pair(mech.domain, N)
    try:
        value = mech.epsilon if epsilon is None else float(epsilon)  # None: mech's own
    except (TypeError, ValueError, OverflowError):
        value = None
    good = (
        value is not None
        and not isinstance(epsilon, bool | str | list)
        and math.isfinite(value)
        and value > 0
    )
    if good:
        res = A.tangent_audit(mech, pair, epsilon=epsilon, resolution=8)
        assert res.epsilon == value
        assert res.passed == (res.worst + res.grid_error <= value)
    else:
        with pytest.raises((TypeError, ValueError), match="epsilon"):
            A.tangent_audit(mech, pair, epsilon=epsilon, resolution=8)


def test_tangent_audit_default_pairs_are_the_package_search():
    mech = make("k-norm", "H2")
    res = A.tangent_audit(mech, n=N, resolution=16)
    assert res.pairs_tried == neighbours.pair_count(2, N) and res.n == N
    # the boundary pair attains Delta; Delta_T is widened by the solver tolerance (1e-8)
    assert res.passed and 1 - 1e-7 < res.ratio <= 1.0, res.summary()


@given(n=st.sampled_from([10**400, 2**1024, 10**300, 2**70, 0, -1, True, 1.0, "10", None]))
def test_tangent_audit_n_is_refused_before_any_pair(n):
    # a huge n is refused by the pairs' memory estimate (it was an OverflowError there)
    with pytest.raises((TypeError, ValueError), match=r"\bn\b|n = "):
        A.tangent_audit(make("k-norm", "H2"), n=n, resolution=8)
