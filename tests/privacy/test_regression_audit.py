"""The quadrature audit of private geodesic regression (issue 41: "the privacy audit passes
the regression mechanism on S^2 and catches sigma/2").

Oracles: the Sasaki volume of the domain in closed form (cap area times the slope
disc); the library's own gradient (geometry/jacobi.py, independent code) for the audit's
batched one; and the verdicts on a correct mechanism and on the same mechanism with
sigma / 2 (``with_sigma_divided``), which must be caught by a margin larger than the
grid error. The default tier runs the circle (TM of dimension 2, seconds); S^2 proper
(TM of dimension 4) is in the slow tier.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

import pymc_manidp as pmd
from pymc_manidp.privacy.audit import check_neighbours, with_sigma_divided
from pymc_manidp.privacy.audit import regression as RA

S1 = pmd.Sphere(dim=1)
S2 = pmd.Sphere(dim=2)


def circle_mech(epsilon=5.0):
    # r, V, R of the order of the law's spread at n = 10, eps = 5: the fit can sit on
    # the domain's edge, where the normalizers differ most
    return pmd.RegressionKNGMechanism(
        S1, epsilon=epsilon, center=[1.0, 0.0], radius=0.3, covariate_bound=1.0,
        slope_bound=0.3, footpoint_radius=0.2,
    )  # fmt: skip


def sphere_mech(M=S2, epsilon=5.0, scale=1.0):
    center = np.zeros(M.dim + 1)
    center[0] = M.radius
    return pmd.RegressionKNGMechanism(
        M, epsilon=epsilon, center=center, radius=0.1 * scale, covariate_bound=1.0,
        slope_bound=0.1 * scale, footpoint_radius=0.067 * scale,
    )  # fmt: skip


X10 = np.linspace(-1.0, 1.0, 10)


@pytest.mark.parametrize(
    ("mech", "volume"),
    [
        (circle_mech(), (2 * 0.2) * (2 * 0.3)),
        (sphere_mech(), 2 * np.pi * (1 - np.cos(0.067)) * np.pi * 0.1**2),
    ],
    ids=["TS1", "TS2"],
)
def test_grid_integrates_the_sasaki_volume_of_the_domain(mech, volume):
    P, V, lw = RA.tm_grid(mech, (24,) * (2 * mech.manifold.dim))
    np.testing.assert_allclose(np.exp(lw).sum(), volume, rtol=2e-3)
    M = mech.manifold
    assert np.all(mech.domain.distances(P) < mech.footpoint_radius)
    assert np.all(np.sqrt(np.sum(V * V, axis=-1)) < mech.slope_bound)
    np.testing.assert_allclose(np.sum(V * P, axis=-1), 0.0, atol=1e-12)  # tangent at P
    assert M.validate(P).shape == P.shape


@pytest.mark.parametrize("M", [S1, S2, pmd.Sphere(dim=2, radius=2.0)], ids=repr)
def test_batched_gradient_norm_is_the_librarys(M):
    mech = sphere_mech(M, scale=M.radius * 3)
    rng = np.random.default_rng(0)
    P, V, _ = RA.tm_grid(mech, (6,) * (2 * M.dim))
    pick = rng.choice(len(P), 40, replace=False)
    P, V = P[pick], V[pick]
    V[0] = 0.0  # the slope zero: every Jacobi factor is 1
    x = rng.uniform(-1, 1, 7)
    y = RA.regression_pairs(mech, x)[-1].data
    got = RA.sphere_grad_norms(M, P, V, x, np.asarray(y))
    want = [mech.grad_norm(p, v, x, y) for p, v in zip(P, V, strict=True)]
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-14)


def test_pairs_are_neighbours_in_the_ball_and_reach_the_domains_edges():
    mech = sphere_mech()
    pairs = RA.regression_pairs(mech, X10, random_pairs=2)
    assert len(pairs) == 9 * 5 * 2 + 2
    for p in pairs:
        assert check_neighbours(S2, p.data, p.neighbour) == p.index == 0  # x = -1 leads
        mech.domain.check(p.data)
        mech.domain.check(p.neighbour)


def test_circle_audit_passes_sigma_and_catches_sigma_over_2():
    mech = circle_mech()
    ok = RA.regression_audit(mech, X10, resolution=60)
    assert ok.passed and ok.pairs_tried == 17
    # the density term alone reaches eps/2 = Delta/sigma on the circle (flat: Delta is
    # attained); the edge of the domain adds the normalizers' share
    assert 0.55 < ok.ratio < 0.7
    bad = RA.regression_audit(with_sigma_divided(mech, 2.0), X10, resolution=60)
    assert not bad.passed
    # caught by the loss itself, not by the grid error
    assert bad.worst_log_ratio - bad.grid_error > 1.05 * bad.epsilon
    assert "v0 = -V" in bad.pair.label or "v0 = +V" in bad.pair.label


def test_the_density_term_alone_cannot_catch_sigma_over_2():
    # with the fit far inside the domain the normalizers hardly differ: the loss of the
    # broken mechanism stays at its density term Delta/(sigma/2) = eps -- why the
    # default pairs put the fit on the domain's edge
    mech = with_sigma_divided(circle_mech(), 2.0)
    inner = [p for p in RA.regression_pairs(mech, X10) if p.label.startswith("p0 = m, v0 = 0")]
    res = RA.regression_audit(mech, X10, inner, resolution=60)
    assert res.worst_log_ratio < 1.02 * res.epsilon


def test_audit_refuses_a_density_that_is_not_the_mechanisms():
    class Other(pmd.RegressionKNGMechanism):
        def grad_norm(self, p, v, x, y):
            return 1.1 * super().grad_norm(p, v, x, y)

    m = circle_mech()
    other = Other(
        S1, epsilon=5.0, center=[1.0, 0.0], radius=0.3, covariate_bound=1.0,
        slope_bound=0.3, footpoint_radius=0.2,
    )  # fmt: skip
    pairs = RA.regression_pairs(m, X10, random_pairs=0)[:1]
    with pytest.raises(AssertionError, match="disagrees with"):
        RA.regression_audit(other, X10, pairs, resolution=8)


def test_audit_refusals():
    S3 = pmd.Sphere(dim=3)
    m3 = pmd.RegressionKNGMechanism(
        S3, epsilon=1.0, center=[1.0, 0, 0, 0], radius=0.1, covariate_bound=1.0,
        slope_bound=0.1, footpoint_radius=0.1,
    )  # fmt: skip
    with pytest.raises(ValueError, match="dimension 1 or 2"):
        RA.regression_audit(m3, X10)
    with pytest.raises(ValueError, match="4 node counts"):
        RA.regression_audit(sphere_mech(), X10, resolution=(8, 8))
    with pytest.raises(ValueError, match="resolution"):
        RA.regression_audit(circle_mech(), X10, resolution=2)
    flat = pmd.RegressionKNGMechanism(
        pmd.Euclidean(dim=1), epsilon=1.0, center=[0.0], radius=1.0, covariate_bound=1.0,
        slope_bound=1.0,
    )  # fmt: skip
    with pytest.raises(ValueError, match="footpoint_radius"):
        RA.regression_audit(flat, X10)


@pytest.mark.slow
def test_sphere_audit_passes_sigma_and_catches_sigma_over_2():
    # S^2 proper: TM of dimension 4, 92 pairs on a 10^4 grid, the worst 2 on 20^4
    mech = sphere_mech()
    ok = RA.regression_audit(mech, X10, resolution=20)
    assert ok.passed
    bad = RA.regression_audit(with_sigma_divided(mech, 2.0), X10, resolution=20)
    assert not bad.passed
    assert bad.worst_log_ratio > 1.05 * bad.epsilon


BAD_ARGS = st.one_of(
    st.none(),
    st.booleans(),
    st.sampled_from([1 / 3, 0.3333333333333333, 5e-324, 1e308, math.inf, math.nan, -4, 0, 3]),
    st.text(max_size=3),
    # too large: refused by the grid's memory estimate before any grid (an
    # OverflowError from the grid's step, or a MemoryError, before)
    st.sampled_from([10**400, 2**1024, 10**6, (4, 10**9), (10**400, 4)]),
)


@given(resolution=BAD_ARGS)
@example(resolution=10**400)
@example(resolution=(4, 10**9))
def test_audit_refuses_bad_resolutions_before_any_grid(resolution):
    with pytest.raises((TypeError, ValueError), match="resolution"):
        RA.regression_audit(circle_mech(), X10, resolution=resolution)


@given(
    epsilon=st.one_of(
        st.booleans(),
        st.sampled_from([math.inf, math.nan, -4, 0, -5e-324, "1"]),
        st.text(max_size=3),
    )
)
def test_audit_refuses_bad_epsilons(epsilon):
    with pytest.raises((TypeError, ValueError), match="epsilon"):
        RA.regression_audit(circle_mech(), X10, epsilon=epsilon)


@pytest.mark.parametrize(
    "x, match",
    [(np.array([-1.0, 2.0, 0.0]), "covariate"), (np.array([0.0, np.nan]), "finite")],
)
def test_audit_checks_the_public_covariates(x, match):
    with pytest.raises(ValueError, match=match):
        RA.regression_audit(circle_mech(), x)


@given(mech=st.sampled_from([None, 1.0, "mech", [4, 4], object()]))
def test_audit_refuses_what_is_not_a_regression_mechanism(mech):
    with pytest.raises(TypeError, match="regression mechanism"):
        RA.regression_audit(mech, X10)


def test_audit_says_which_resolution_fits():
    with pytest.raises(ValueError, match=r"grid .* would need .*: choose resolution <= \d+"):
        RA.regression_audit(circle_mech(), X10, resolution=64, max_bytes=1e5)
