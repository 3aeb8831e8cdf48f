"""Closed forms and invariances that pin the geometry to known mathematics."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import special_ortho_group

import pymc_manidp as pmd
from tests.geometry.contract import random_point


def test_spd_two_point_midpoint_closed_form():
    # The geodesic midpoint of A and B is A^{1/2}(A^{-1/2} B A^{-1/2})^{1/2} A^{1/2};
    # for A = diag(e^2, 1), B = I it is diag(e, 1).
    P = pmd.SPD(k=2)
    a, b = np.diag([np.e**2, 1.0]), np.eye(2)
    mid = P.exp(a, 0.5 * P.log(a, b))
    np.testing.assert_allclose(mid, np.diag([np.e, 1.0]), atol=1e-13)
    assert P.dist(a, b) == pytest.approx(2.0, abs=1e-14)


@pytest.mark.parametrize("k", [2, 3, 5])
def test_spd_distance_congruence_invariant(k):
    rng = np.random.default_rng(k)
    P = pmd.SPD(k=k)
    p, q = random_point(P, rng, 10), random_point(P, rng, 10)
    # invertible maps with singular values in [0.3, 3]: rounding grows with cond(a)^2
    u = special_ortho_group.rvs(k, size=10, random_state=rng) if k > 1 else None
    w = special_ortho_group.rvs(k, size=10, random_state=rng)
    a = u * rng.uniform(0.3, 3.0, size=(10, 1, k)) @ w
    d1 = P.dist(p, q)
    d2 = P.dist(a @ p @ np.swapaxes(a, -1, -2), a @ q @ np.swapaxes(a, -1, -2))
    np.testing.assert_allclose(d2, d1, rtol=1e-9)
    # and under inversion, an isometry of the affine-invariant metric
    np.testing.assert_allclose(P.dist(np.linalg.inv(p), np.linalg.inv(q)), d1, rtol=1e-9)


@pytest.mark.parametrize("k", [3, 4, 10])
def test_kendall_distance_similarity_invariant(k):
    rng = np.random.default_rng(k)
    K = pmd.KendallShape(k_landmarks=k)
    x, y = random_point(K, rng, 10), random_point(K, rng, 10)
    d = K.dist(x, y)
    for _ in range(3):
        th = rng.uniform(0, 2 * np.pi)
        rot = np.array([[np.cos(th), -np.sin(th)], [np.sin(th), np.cos(th)]])
        moved = rng.uniform(0.1, 10) * x @ rot.T + rng.normal(size=2) * 5
        np.testing.assert_allclose(K.dist(moved, y), d, rtol=1e-10)
        np.testing.assert_allclose(K.dist(y, moved), d, rtol=1e-10)
    # a reflection is not a rotation: it changes the shape distance in general
    assert not np.allclose(K.dist(x * np.array([1.0, -1.0]), y), d)


@pytest.mark.parametrize(("dim", "radius"), [(2, 1.0), (5, 3.0)])
def test_sphere_distance_orthogonal_invariant(dim, radius):
    rng = np.random.default_rng(dim)
    S = pmd.Sphere(dim=dim, radius=radius)
    x, y = random_point(S, rng, 10), random_point(S, rng, 10)
    q = special_ortho_group.rvs(dim + 1, random_state=1)
    q[:, 0] *= -1  # include a reflection: O(d+1), not only SO(d+1)
    np.testing.assert_allclose(S.dist(x @ q.T, y @ q.T), S.dist(x, y), rtol=1e-10)


def _hopf(z):
    """Kendall(3) pre-shape -> point of the sphere of radius 1/2 in R^3."""
    h = pmd.geometry.kendall.helmert(3)
    zc = h @ (z[..., 0] + 1j * z[..., 1])[..., None]
    a, b = zc[..., 0, 0], zc[..., 1, 0]
    ab = np.conj(a) * b
    return 0.5 * np.stack([np.abs(a) ** 2 - np.abs(b) ** 2, 2 * ab.real, 2 * ab.imag], -1)


def test_kendall_three_landmarks_is_sphere_of_radius_half():
    rng = np.random.default_rng(3)
    K = pmd.KendallShape(k_landmarks=3)
    S = pmd.Sphere(dim=2, radius=0.5)
    x, y = random_point(K, rng, 50), random_point(K, rng, 50)
    hx, hy = _hopf(K.validate(x)), _hopf(K.validate(y))
    np.testing.assert_allclose(np.linalg.norm(hx, axis=-1), 0.5, rtol=1e-12)
    np.testing.assert_allclose(K.dist(x, y), S.dist(hx, hy), rtol=1e-9, atol=1e-12)
    assert K.curvature_bounds == (4.0, 4.0)
    assert S.curvature_bounds == (4.0, 4.0)


def test_circle_arc_lengths():
    S = pmd.Sphere(dim=1, radius=2.0)
    angles = np.array([0.0, 0.3, 1.0, 2.0, 3.0, np.pi - 1e-6])
    pts = 2.0 * np.stack([np.cos(angles), np.sin(angles)], -1)
    np.testing.assert_allclose(S.dist(pts[0], pts), 2.0 * angles, rtol=1e-9, atol=1e-15)
    # going the short way round: 350 degrees apart is 10 degrees
    a, b = np.deg2rad(5.0), np.deg2rad(355.0)
    pa, pb = 2.0 * np.array([np.cos(a), np.sin(a)]), 2.0 * np.array([np.cos(b), np.sin(b)])
    assert S.dist(pa, pb) == pytest.approx(2.0 * np.deg2rad(10.0), rel=1e-12)
    # exp walks along the circle by arc length
    v = np.array([0.0, 2.0 * 0.7])  # tangent at (2, 0), length 1.4 -> angle 0.7
    np.testing.assert_allclose(
        S.exp(np.array([2.0, 0.0]), v), 2.0 * np.array([np.cos(0.7), np.sin(0.7)])
    )


def test_sphere_exp_uses_the_radius():
    # The papers print cos(|v|): that is only right for R = 1.
    S = pmd.Sphere(dim=2, radius=3.0)
    p = np.array([0.0, 0.0, 3.0])
    v = np.array([3.0 * np.pi / 2, 0.0, 0.0])  # a quarter of the great circle
    np.testing.assert_allclose(S.exp(p, v), [3.0, 0.0, 0.0], atol=1e-14)


@pytest.mark.parametrize(
    ("M", "inj", "kappa", "rstar"),
    [
        (pmd.Sphere(dim=2, radius=2.0), 2 * np.pi, (0.25, 0.25), np.pi / 2),
        (pmd.Sphere(dim=1), np.pi, (0.0, 0.0), np.pi / 2),
        (pmd.SPD(k=3), np.inf, (-0.5, 0.0), np.inf),
        (pmd.KendallShape(k_landmarks=6), np.pi / 2, (1.0, 4.0), np.pi / 8),
        (pmd.Euclidean(dim=4), np.inf, (0.0, 0.0), np.inf),
    ],
)
def test_constants(M, inj, kappa, rstar):
    assert M.injectivity_radius == pytest.approx(inj)
    assert M.curvature_bounds == pytest.approx(kappa)
    assert M.max_radius == pytest.approx(rstar)


def test_dimensions():
    assert pmd.Sphere(dim=5).dim == 5
    assert pmd.SPD(k=4).dim == 10
    assert pmd.KendallShape(k_landmarks=8).dim == 12
    assert pmd.Euclidean(dim=3).dim == 3


def test_log_is_accurate_for_tiny_and_near_cut_locus_separations():
    S = pmd.Sphere(dim=2)
    p = np.array([0.0, 0.0, 1.0])
    for t in [1e-12, 1e-8, 1e-4, np.pi - 1e-6]:
        q = np.array([np.sin(t), 0.0, np.cos(t)])
        np.testing.assert_allclose(S.log(p, q), [t, 0.0, 0.0], rtol=1e-9)
        assert S.dist(p, q) == pytest.approx(t, rel=1e-12)


def test_log_sinhc_is_accurate_across_its_branches():
    from pymc_manidp.geometry._numba.numerics import log_sinhc

    t = np.array([1e-5, 1.01e-4, 3e-4, 1e-3, 1e-2])
    t2 = t * t
    series = t2 / 6 - t2**2 / 180 + t2**3 / 2835 - t2**4 / 37800 + t2**5 / 467775
    np.testing.assert_allclose(log_sinhc(t), series, rtol=1e-12)
    big = np.array([19.9, 20.0, 20.1, 300.0])
    np.testing.assert_allclose(log_sinhc(big), big - np.log(2 * big), rtol=1e-12)
    mid = np.array([0.5, 2.0, 10.0])
    np.testing.assert_allclose(log_sinhc(mid), np.log(np.sinh(mid) / mid), rtol=1e-14)
    # and the sphere's log(sin t / t) across its series switch
    from pymc_manidp.geometry._numba.numerics import log_sinc

    t = np.array([1e-3, 0.0499, 0.0501, 0.3])
    t2 = t * t
    ref = -(t2 / 6 + t2**2 / 180 + t2**3 / 2835 + t2**4 / 37800 + t2**5 / 467775)
    np.testing.assert_allclose(log_sinc(t[:3]), ref[:3], rtol=1e-12)
    np.testing.assert_allclose(log_sinc(t[3]), np.log(np.sin(0.3) / 0.3), rtol=1e-14)


def _symmetric_2x2_cases(rng):
    """Random, degenerate, diagonal, negative, zero and ill-conditioned 2 x 2 matrices."""
    a = rng.normal(size=(500, 2, 2))
    special = [
        np.zeros((2, 2)),
        np.eye(2),
        -np.eye(2),
        np.diag([3.0, -1.0]),
        np.diag([-1.0, 3.0]),
        [[1.0, 1e-9], [1e-9, 1.0]],
        [[1.0, 1.0], [1.0, 1.0]],  # singular
        [[1e8, 1.0], [1.0, 1e-8]],  # condition number about 1e16
        [[0.0, 2.0], [2.0, 0.0]],
    ]
    return np.concatenate([a, np.asarray(special, float)[None].reshape(-1, 2, 2)])


def test_closed_form_2x2_eigh_matches_lapack():
    from pymc_manidp.geometry._numba.numerics import sym, sym_eigh, sym_eigvalsh

    a = sym(_symmetric_2x2_cases(np.random.default_rng(0)))
    w, u = sym_eigh(a)
    scale = np.linalg.norm(a, axis=(-2, -1), keepdims=True)[..., 0] + 1e-300
    w_ref = np.linalg.eigvalsh(a)
    np.testing.assert_allclose(w / scale, w_ref / scale, rtol=0, atol=4e-16)
    np.testing.assert_array_equal(sym_eigvalsh(a), w)
    assert np.all(np.diff(w, axis=-1) >= 0)
    eye = np.broadcast_to(np.eye(2), a.shape)
    np.testing.assert_allclose(np.swapaxes(u, -1, -2) @ u, eye, atol=1e-15)
    back = (u * w[..., None, :]) @ np.swapaxes(u, -1, -2)
    np.testing.assert_allclose(back / scale[..., None], a / scale[..., None], atol=1e-15)


def test_closed_form_2x2_small_eigenvalue_keeps_relative_accuracy():
    # Condition number 1e16: "m - r" would return 0 for the small eigenvalue (it is lost
    # to cancellation); "det / big" keeps it to LAPACK's relative accuracy.
    from pymc_manidp.geometry._numba.numerics import sym_eigvalsh

    for off in (0.0, 1e-3, -0.25):
        a = np.array([[1e-8 + off**2 * 1e-8, off], [off, 1e8]])
        w, w_ref = sym_eigvalsh(a), np.linalg.eigvalsh(a)
        np.testing.assert_allclose(w, w_ref, rtol=1e-12)
        assert w[0] > 0


def test_log_volume_density_is_minus_inf_outside_injective_chart():
    S = pmd.Sphere(dim=3, radius=2.0)
    assert S.log_volume_density(np.array([2.0 * np.pi + 0.1, 0, 0])) == -np.inf
    K = pmd.KendallShape(k_landmarks=5)
    assert K.log_volume_density(np.array([np.pi / 2 + 0.01, 0, 0, 0, 0, 0])) == -np.inf
