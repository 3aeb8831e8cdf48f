"""The public data domain: radius checks, containment, clipping, footpoint error."""

from __future__ import annotations

import numpy as np
import pytest

import pymc_manidp as pmd
from pymc_manidp.stats import DataDomain, DomainError

S2 = pmd.Sphere(dim=2)
NORTH = np.array([0.0, 0.0, 1.0])


def _at(theta, phi=0.0):
    return np.array([np.sin(theta) * np.cos(phi), np.sin(theta) * np.sin(phi), np.cos(theta)])


def test_radius_must_be_below_r_star():
    with pytest.raises(ValueError, match=r"not below r\* = 0.785398"):
        DataDomain(S2, NORTH, np.pi / 4)
    with pytest.raises(ValueError, match=r"r\* = 0.392699"):
        DataDomain(pmd.KendallShape(k_landmarks=5), np.eye(5, 2), 0.4)
    for bad in [-0.1, 0.0, np.nan, np.inf]:
        with pytest.raises(ValueError, match="radius must be a finite number > 0"):
            DataDomain(S2, NORTH, bad)
    with pytest.raises(TypeError):
        DataDomain(S2, NORTH, "0.3")
    # SPD has r* = inf: any finite radius is fine
    assert DataDomain(pmd.SPD(k=2), np.eye(2), 50.0).radius == 50.0


def test_center_must_be_one_valid_point():
    with pytest.raises(ValueError, match="not on the sphere"):
        DataDomain(S2, [0.0, 0.0, 2.0], 0.3)
    with pytest.raises(ValueError, match="one point"):
        DataDomain(S2, np.stack([NORTH, NORTH]), 0.3)


def test_data_outside_the_ball_raise_with_count_and_worst_distance():
    dom = DataDomain(S2, NORTH, 0.3)
    data = np.stack([_at(0.1), _at(0.5), _at(0.29), _at(0.7, 1.0)])
    with pytest.raises(DomainError, match=r"2 of 4 points.*exceeds it by 0.39999.*row 1") as err:
        dom.check(data)
    assert "clip=True" in str(err.value)
    assert isinstance(DomainError("x"), ValueError)


def test_clipping_moves_outside_points_onto_the_boundary_along_their_geodesic():
    dom = DataDomain(S2, NORTH, 0.3)
    data = np.stack([_at(0.1), _at(0.5, 2.0), _at(0.3), _at(1.2, -1.0)])
    out = dom.check(data, clip=True)
    np.testing.assert_array_equal(out[[0, 2]], data[[0, 2]])  # inside: untouched
    np.testing.assert_allclose(out[1], _at(0.3, 2.0), atol=1e-11)
    np.testing.assert_allclose(out[3], _at(0.3, -1.0), atol=1e-11)
    assert np.all(dom.distances(out) <= 0.3)
    dom.check(out)  # clipped data pass the strict check


def test_clipping_on_spd_and_shapes_keeps_direction():
    for M, c, r in [
        (pmd.SPD(k=3), np.diag([1.0, 2.0, 3.0]), 1.0),
        (pmd.KendallShape(k_landmarks=6), np.eye(6, 2) + np.arange(12).reshape(6, 2) / 7, 0.3),
    ]:
        dom = DataDomain(M, c, r)
        rng = np.random.default_rng(0)
        coords = rng.normal(size=(20, M.dim))
        coords *= 3 * r / np.linalg.norm(coords, axis=-1, keepdims=True)
        far = M.exp_coords(np.broadcast_to(dom.center, (20, *dom.center.shape)), coords)
        out = dom.check(far, clip=True)
        np.testing.assert_allclose(dom.distances(out), r, rtol=1e-8)
        back = M.log_coords(np.broadcast_to(dom.center, out.shape), out)
        np.testing.assert_allclose(back, coords / 3, atol=1e-8)


def test_antipodal_point_cannot_be_clipped():
    dom = DataDomain(S2, NORTH, 0.3)
    with pytest.raises(DomainError, match=r"cannot clip.*antipodal"):
        dom.check(np.stack([NORTH, -NORTH]), clip=True)


@pytest.mark.parametrize(
    ("data", "msg"),
    [
        (np.zeros((0, 3)), "empty"),
        (np.array([[0.0, 0.0, 3.0]]), "not on the sphere"),
        (np.array([[np.inf, 0.0, 1.0]]), "NaN or infinite"),
        (np.zeros((2, 2)), "trailing shape"),
    ],
)
def test_bad_data(data, msg):
    with pytest.raises(ValueError, match=msg):
        DataDomain(S2, NORTH, 0.3).check(data)


def test_footpoint_error_widens_the_laplace_sensitivity():
    dom = DataDomain(S2, NORTH, np.pi / 8)
    h = np.pi / 4
    assert dom.curvature_factor == pytest.approx(h)
    base = dom.laplace_sensitivity(10)
    assert base == pytest.approx((2 - h) / 10)
    assert dom.laplace_sensitivity(10, grad_tol=1e-6) == pytest.approx(base + 2e-6 / h)
    with pytest.raises(ValueError, match="grad_tol"):
        dom.laplace_sensitivity(10, grad_tol=-1.0)


def test_footpoint_error_bound_holds_for_approximate_means():
    # Lemma 1 of the 2022 paper: rho(x, x_bar) <= |grad F(x)| / H at any x in the ball
    dom = DataDomain(S2, NORTH, np.pi / 8)
    rng = np.random.default_rng(3)
    theta = rng.uniform(0, np.pi / 8, 40)
    data = np.stack([_at(t, p) for t, p in zip(theta, rng.uniform(0, 2 * np.pi, 40), strict=True)])
    exact = pmd.frechet_mean(S2, data).mean
    for s in np.linspace(0.01, np.pi / 8, 8):
        x = _at(s, rng.uniform(0, 2 * np.pi))
        g = S2.norm(x, S2.log(x, data).mean(axis=0))
        assert S2.dist(x, exact) <= dom.footpoint_error(g) * (1 + 1e-12)


# --- regressions found in review: the domain check must fail closed -------------------


def test_clipping_near_the_cut_locus_stays_inside():
    dom = DataDomain(S2, NORTH, np.pi / 4 - 1e-9)
    th = np.pi - 1.1e-8
    out = dom.check(np.array([[np.sin(th), 0.0, np.cos(th)]]), clip=True)
    assert S2.dist(NORTH, out[0]) <= dom.radius
    dom.check(out)


def test_clipping_ill_conditioned_spd_never_returns_points_outside():
    P = pmd.SPD(k=3)
    dom = DataDomain(P, np.eye(3), radius=1.0)
    rng = np.random.default_rng(3)
    for _ in range(200):
        q, _ = np.linalg.qr(rng.normal(size=(3, 3)))
        y = (q * np.exp([-8.0, 0.3, 8.0])) @ q.T
        try:
            out = dom.check(0.5 * (y + y.T)[None], clip=True)
        except DomainError:
            continue  # failing closed is allowed; returning an outside point is not
        assert P.dist(np.eye(3), out[0]) <= 1.0


def test_non_finite_distances_are_refused():
    # A pair that both validate but whose whitened product has a negative eigenvalue
    # at working precision: the distance is undefined, so the point is not "inside".
    P = pmd.SPD(k=3)
    rng = np.random.default_rng(0)

    def rspd(lo, hi):
        q, _ = np.linalg.qr(rng.normal(size=(3, 3)))
        y = (q * np.exp(rng.uniform(lo, hi, 3))) @ q.T
        return 0.5 * (y + y.T)

    refused = 0
    for _ in range(3000):
        try:
            c, y = P.validate(rspd(-12, 12)), P.validate(rspd(-15, 15))
        except ValueError:
            continue
        dom = DataDomain(P, c, radius=1.0)
        try:
            out = dom.check(y[None])
        except ValueError:  # DomainError (outside / undefined) or undefined distance
            refused += 1
            continue
        assert P.dist(c, out[0]) <= 1.0  # anything accepted is provably inside
    assert refused > 0


@pytest.mark.parametrize(
    "M, center, radius",
    [
        (S2, NORTH, 0.7),
        (pmd.Euclidean(dim=2), np.array([1e8, -1e8]), 1e-3),
        (pmd.SPD(k=2), np.diag([2.0, 0.5]), 1.0),
        (pmd.KendallShape(k_landmarks=4), np.array([[0, 0], [1, 0], [1, 1], [0, 1.0]]), 0.3),
    ],
)
def test_points_on_the_boundary_give_the_excess_at_full_precision_and_clip_always_succeeds(
    M, center, radius
):
    """Decision (docs/mechanisms.md): points a rounding error outside are refused, with
    the excess printed exactly and the advice that clip=True fixes it; clip=True must
    then succeed, even where one ulp of the coordinates is a sizeable part of r."""
    dom = DataDomain(M, center, radius)
    rng = np.random.default_rng(5)
    c = rng.normal(size=(40, M.dim))
    c *= radius / np.linalg.norm(c, axis=1, keepdims=True)
    on_boundary = M.exp_coords(dom.center, c)  # "exactly" on the boundary, up to rounding
    outside = M.exp_coords(dom.center, 3.0 * c)
    data = np.concatenate([on_boundary, outside])
    d = dom.distances(data)
    if np.any(d[:40] > radius):  # rounding put some outside: the message says by how much
        with pytest.raises(DomainError, match=r"exceeds it by \d\.\d{6,}") as err:
            dom.check(on_boundary)
        assert "clip=True" in str(err.value)
    clipped = dom.check(data, clip=True)
    assert np.all(dom.distances(clipped) <= radius)
    # a per-record map: each record's image depends on that record only
    again = dom.check(data[::-1], clip=True)[::-1]
    np.testing.assert_array_equal(again, clipped)


def test_clip_must_be_a_real_bool():
    dom = DataDomain(S2, NORTH, 0.3)
    with pytest.raises(TypeError, match="clip must be True or False"):
        dom.check(np.stack([_at(0.5)]), clip="no")
