"""SO(3) (``Rotations``): maps, closed forms, frames, volume density, twins, checks.

Oracles: scipy's ``Rotation`` (an independent implementation of quaternions,
rotation vectors and composition), closed forms (docs/architecture.md, facts for the
next manifolds: distance = rotation angle, volume 8 pi^2, Haar angle density
(1 - cos)/pi), a finite-difference sqrt det G of the exp chart, quadrature of the
Laplace normalizer, bisection for the ball's edge.
"""

from __future__ import annotations

import numpy as np
import pytensor
import pytensor.tensor as pt
import pytest
from scipy import integrate, stats
from scipy.spatial.transform import Rotation as SciRot

from pymc_manidp.geometry import max_radius_from
from pymc_manidp.geometry.base import check_manifold
from pymc_manidp.geometry.rotations import (
    Rotations,
    hat,
    quaternions_of,
    rotations_laplace_log_normalizer,
    vee,
)
from tests.geometry.contract import pulled_back_log_sqrt_det as _pulled_back_sqrt_det

M = Rotations()
ALPHA = 0.01


def _random(n, seed):
    return SciRot.random(n, random_state=seed).as_matrix()


def _near(center, n, max_angle, seed):
    """``n`` rotations within ``max_angle`` of ``center`` (uniform axis and angle)."""
    rng = np.random.default_rng(seed)
    axis = rng.normal(size=(n, 3))
    axis /= np.linalg.norm(axis, axis=-1, keepdims=True)
    angle = rng.uniform(0, max_angle, n)
    return center @ SciRot.from_rotvec(axis * angle[:, None]).as_matrix()


def _angle(x, y):
    """The rotation angle of x^T y by scipy."""
    return (SciRot.from_matrix(x).inv() * SciRot.from_matrix(y)).magnitude()


# --- constants and the registry ------------------------------------------------------------
def test_constants():
    assert check_manifold(M) is M and M == Rotations()
    assert M.dim == 3 and M.point_shape == (3, 3)
    assert M.curvature_bounds == (0.25, 0.25) and M.injectivity_radius == np.pi
    # r* = 1/2 min(pi, pi / (2 sqrt(1/4))) = pi/2
    assert M.max_radius == pytest.approx(np.pi / 2) == max_radius_from(np.pi, 0.25)
    assert M.log_volume == pytest.approx(np.log(8 * np.pi**2))
    assert M.exact_sampling and M.homogeneous and M.volume_is_radial
    assert M.log_volume_growth == 0.0 and M.laplace_max_sigma == np.inf
    np.testing.assert_array_equal(M.origin, np.eye(3))
    M.validate(M.generic_point)


def test_registry_members():
    assert Rotations.name == "rotations" and "(n, 9)" in Rotations.record_layout
    assert Rotations.from_record_shape((3, 3)) == M == Rotations.from_record_shape((9,))
    with pytest.raises(ValueError, match=r"shape \(3, 3\) or 9 numbers.*\(4,\)"):
        Rotations.from_record_shape((4,))
    space, center, radius, nodes = Rotations.audit_space()
    assert space == M and radius < M.max_radius and nodes >= 4
    np.testing.assert_array_equal(space.validate(center), np.eye(3))


# --- maps against scipy and closed forms --------------------------------------------------
def test_distance_is_the_rotation_angle():
    x, y = _random(200, 1), _random(200, 2)
    np.testing.assert_allclose(M.dist(x, y), _angle(x, y), rtol=0, atol=1e-13)
    np.testing.assert_allclose(M.dist(x, y), M.dist(y, x), rtol=0, atol=1e-15)
    # left and right translations are isometries (bi-invariance)
    g = _random(1, 3)[0]
    np.testing.assert_allclose(M.dist(g @ x, g @ y), M.dist(x, y), atol=1e-13)
    np.testing.assert_allclose(M.dist(x @ g, y @ g), M.dist(x, y), atol=1e-13)
    # a turn by theta about z: distance theta, folded into [0, pi]
    for theta, want in [(0.3, 0.3), (np.pi / 2, np.pi / 2), (4.0, 2 * np.pi - 4.0)]:
        rz = SciRot.from_rotvec([0, 0, theta]).as_matrix()
        assert M.dist(np.eye(3), rz) == pytest.approx(want, abs=1e-15)


def test_distance_is_accurate_near_0_and_pi():
    axis = np.array([1.0, 2.0, -2.0]) / 3.0
    for tiny in (1e-12, 1e-9, 1e-6):  # relative accuracy near 0 (arccos would lose it)
        y = M.from_rotvecs(tiny * axis)
        assert M.dist(np.eye(3), y) == pytest.approx(tiny, rel=1e-9)
    for gap in (1e-10, 1e-7, 1e-4):  # absolute accuracy near pi
        y = M.from_rotvecs((np.pi - gap) * axis)
        assert M.dist(np.eye(3), y) == pytest.approx(np.pi - gap, abs=1e-14)
    # the naive arccos((tr - 1)/2) is off by far more near 0: what the stable form avoids
    y = M.from_rotvecs(1e-9 * axis)
    naive = np.arccos(np.clip((np.trace(y) - 1) / 2, -1, 1))
    assert abs(naive - 1e-9) > 1e-9 * 1e-3


def test_exp_log_round_trips():
    rng = np.random.default_rng(0)
    x = _random(100, 4)
    c = rng.normal(size=(100, 3))
    c *= rng.uniform(0, 0.95 * np.pi, (100, 1)) / np.linalg.norm(c, axis=-1, keepdims=True)
    y = M.exp_coords(x, c)
    np.testing.assert_allclose(M.validate(y), y, atol=1e-14)  # exp lands on SO(3)
    np.testing.assert_allclose(M.log_coords(x, y), c, atol=1e-12)
    np.testing.assert_allclose(M.dist(x, y), np.linalg.norm(c, axis=-1), atol=1e-13)
    # exp_x(v) is x times scipy's rotation of the chart coordinates (the body frame)
    np.testing.assert_allclose(y, x @ SciRot.from_rotvec(c).as_matrix(), atol=1e-14)
    z = _near(np.eye(3), 100, 3.0, 5)
    np.testing.assert_allclose(M.exp(x, M.log(x, x @ z)), x @ z, atol=1e-12)
    # log at coinciding points is 0
    np.testing.assert_allclose(M.log(x, x), 0.0, atol=1e-15)


def test_log_refuses_half_turns():
    half = M.from_rotvecs([[0.0, 0.0, 0.1], [0.0, np.pi, 0.0]])
    with pytest.raises(ValueError, match=r"half turn apart.*1 of 2 rows, first at row 1"):
        M.log(np.eye(3), half)


def test_frame_is_orthonormal_and_tangent():
    x = _random(20, 6)
    b = M.tangent_basis(x)  # (20, 3, 3, 3)
    assert b.shape == (20, 3, 3, 3)
    gram = M.inner(x[:, None, None], b[:, :, None], b[:, None, :])
    np.testing.assert_allclose(gram, np.broadcast_to(np.eye(3), (20, 3, 3)), atol=1e-14)
    np.testing.assert_allclose(M.to_tangent(x[:, None], b), b, atol=1e-15)
    # to_tangent is the orthogonal projection: idempotent, and its remainder is normal
    a = np.random.default_rng(1).normal(size=(20, 3, 3))
    p = M.to_tangent(x, a)
    np.testing.assert_allclose(M.to_tangent(x, p), p, atol=1e-14)
    np.testing.assert_allclose(M.inner(x[:, None], b, (a - p)[:, None]), 0.0, atol=1e-13)
    # the norm of a tangent vector x hat(w) is |w| (the rotation angle)
    w = np.random.default_rng(2).normal(size=(20, 3))
    np.testing.assert_allclose(M.norm(x, x @ hat(w)), np.linalg.norm(w, axis=-1), rtol=1e-14)
    np.testing.assert_allclose(vee(hat(w)), w)


# --- volume density --------------------------------------------------------------------------
def test_log_volume_density_matches_pulled_back_metric():
    rng = np.random.default_rng(2027)
    for x in _random(3, 7):
        dirs = rng.normal(size=(24, 3))
        dirs /= np.linalg.norm(dirs, axis=-1, keepdims=True)
        t = np.concatenate([rng.uniform(0.05, 0.9 * np.pi, 20), [1e-3, 3e-3, 1e-2, 3e-2]])
        for c in dirs * t[:, None]:
            want = _pulled_back_sqrt_det(M, x, c)
            assert abs(np.expm1(M.log_volume_density(c) - want)) < 1e-6, (c, want)
    # the check can fail: the sphere's exponent (d - 1 = 2 powers of sin t / t) is off
    c = np.array([1.0, 0.5, -0.2])
    wrong = 2 * np.log(np.sinc(np.linalg.norm(c) / np.pi))
    assert abs(np.expm1(wrong - _pulled_back_sqrt_det(M, np.eye(3), c))) > 1e-2


def test_volume_density_integrates_to_the_volume():
    """4 pi int_0^pi t^2 J(t) dt = 8 pi^2, and J is -inf beyond the injective chart."""

    def integrand(t):
        return 4 * np.pi * t**2 * np.exp(M.log_volume_density(np.array([t, 0.0, 0.0])))

    vol, _ = integrate.quad(integrand, 0, np.pi)
    assert vol == pytest.approx(np.exp(M.log_volume), rel=1e-12)
    assert M.log_volume_density(np.array([0.0, np.pi + 1e-9, 0.0])) == -np.inf
    assert np.isfinite(M.log_volume_density(np.array([0.0, 0.0, np.pi])))


def test_haar_draws_have_the_angle_density():
    """``sample_uniform``: angles KS against (1 - cos t)/pi (n = 4000, alpha 0.01); a
    uniform angle (the wrong law) is refuted; the axes are isotropic."""
    x = M.sample_uniform(np.random.default_rng(3), (4000,))
    np.testing.assert_allclose(M.validate(x), x, atol=1e-14)
    theta = M.dist(np.eye(3), x)

    def haar_cdf(t):
        return (t - np.sin(t)) / np.pi

    assert stats.kstest(theta, haar_cdf).pvalue > ALPHA
    assert stats.kstest(theta, stats.uniform(0, np.pi).cdf).pvalue < 1e-6
    axis = M.to_rotvecs(x) / theta[:, None]
    assert stats.kstest(axis[:, 2], stats.uniform(-1, 2).cdf).pvalue > ALPHA


# --- the Laplace normalizer -----------------------------------------------------------------
@pytest.mark.parametrize("sigma", [1e-3, 0.05, 0.4, 1.0, 3.0, 50.0])
def test_laplace_normalizer_closed_form_matches_quadrature(sigma):
    """Z = vol(S^2) int_0^pi e^{-t/sigma} t^2 J(t) dt, J by the manifold's density."""

    def integrand(t):
        return np.exp(-t / sigma + M.log_volume_density(np.array([t, 0.0, 0.0]))) * t**2

    val, _ = integrate.quad(integrand, 0, np.pi, points=[min(3 * sigma, 3.0)], epsabs=0)
    want = np.log(4 * np.pi * val)
    got = float(rotations_laplace_log_normalizer(sigma).eval())
    assert got == pytest.approx(want, abs=1e-10)
    assert float(M.pt_laplace_log_normalizer(sigma).eval()) == got


def test_laplace_normalizer_limits_and_gradient():
    # sigma -> 0: R^3's Laplace 8 pi sigma^3; sigma -> inf: the volume 8 pi^2
    small = float(rotations_laplace_log_normalizer(1e-100).eval())
    assert small == pytest.approx(np.log(8 * np.pi) + 3 * np.log(1e-100), rel=1e-14)
    big = float(rotations_laplace_log_normalizer(1e150).eval())
    assert big == pytest.approx(np.log(8 * np.pi**2), abs=1e-12)
    s = pt.dscalar("s")
    f = pytensor.function([s], pt.grad(rotations_laplace_log_normalizer(s), s))
    h = 1e-6
    for sig in (0.1, 1.0, 10.0):
        fd = (
            rotations_laplace_log_normalizer(sig + h).eval()
            - rotations_laplace_log_normalizer(sig - h).eval()
        ) / (2 * h)
        assert float(f(sig)) == pytest.approx(float(fd), rel=1e-6)


# --- validation -------------------------------------------------------------------------------
def test_validate_orthonormalizes_near_rotations():
    x = _random(10, 8)
    noisy = x + 1e-8 * np.random.default_rng(0).normal(size=x.shape)
    got = M.validate(noisy)
    np.testing.assert_allclose(
        np.swapaxes(got, -1, -2) @ got, np.broadcast_to(np.eye(3), x.shape), atol=2e-16 * 8
    )
    np.testing.assert_allclose(got, x, atol=1e-7)
    # the polar factor: the nearest rotation (scipy's SVD-free quaternion fit agrees)
    np.testing.assert_allclose(got, SciRot.from_matrix(noisy).as_matrix(), atol=1e-12)
    assert M.validate(np.eye(3, dtype=int)).dtype == float


def test_validate_refuses_reflections_and_non_rotations_naming_the_row():
    x = _random(5, 9)
    bad = x.copy()
    bad[3] = -bad[3]  # det -1: orthogonal but a reflection
    with pytest.raises(
        ValueError, match=r"reflections: 1 of 5 rows, first at row 3.*determinant -1"
    ):
        M.validate(bad)
    bad = x.copy()
    bad[2] *= 1.01  # not orthogonal
    with pytest.raises(ValueError, match=r"not rotation matrices: 1 of 5 rows, first at row 2"):
        M.validate(bad)
    bad = x.copy()
    bad[4, 0, 0] = np.nan
    with pytest.raises(ValueError, match=r"NaN or infinite values: 1 of 5 rows, first at row 4"):
        M.validate(bad)
    with pytest.raises(ValueError, match=r"trailing shape \(3, 3\)"):
        M.validate(np.zeros((5, 9)))
    with pytest.raises(TypeError, match="real numbers"):
        M.validate(x.astype(complex))


def test_point_checks_in_the_graph():
    x = _random(3, 10)
    refl = -x
    skewed = x * 1.01
    t = pt.tensor3("t")
    f = pytensor.function(
        [t], [pt.all(c, axis=tuple(range(1, c.ndim))) for c in M.pt_point_checks(t)]
    )
    for pts, want in [(x, [True, True]), (refl, [True, False]), (skewed, [False, True])]:
        got = [bool(np.all(v)) for v in f(pts)]
        assert got == want


# --- converters ------------------------------------------------------------------------------
def test_quaternion_converters_round_trip_against_scipy():
    x = _random(50, 11)
    rot = SciRot.from_matrix(x)
    for scalar_first in (False, True):
        q = rot.as_quat(scalar_first=scalar_first)
        np.testing.assert_allclose(M.from_quaternions(q, scalar_first=scalar_first), x, atol=1e-14)
        got = M.to_quaternions(x, scalar_first=scalar_first)
        w = got[:, 0] if scalar_first else got[:, 3]
        assert np.all(w >= 0)
        # q and -q are the same rotation: compare up to sign
        sign = np.sign(np.sum(got * q, axis=-1))[:, None]
        np.testing.assert_allclose(got, sign * q, atol=1e-14)
    # the conventions differ: a scalar-last quaternion read as scalar-first is another rotation
    q = rot.as_quat()
    assert not np.allclose(M.from_quaternions(q, scalar_first=True), x)
    # batched shapes pass through
    assert M.from_quaternions(q.reshape(5, 10, 4)).shape == (5, 10, 3, 3)
    np.testing.assert_allclose(
        quaternions_of(np.diag([-1.0, -1.0, 1.0])), [[0, 0, 0, 1.0]][0], atol=0
    )


def test_quaternion_converter_refuses_unnormalized_rows():
    q = SciRot.random(4, random_state=0).as_quat()
    q[2] *= 2.0
    with pytest.raises(ValueError, match=r"norm 1 .*1 of 4 rows, first at row 2"):
        M.from_quaternions(q)


def test_rotation_vector_converters_against_scipy():
    x = _random(50, 12)
    v = SciRot.from_matrix(x).as_rotvec()
    np.testing.assert_allclose(M.to_rotvecs(x), v, atol=1e-13)
    np.testing.assert_allclose(M.from_rotvecs(v), x, atol=1e-14)
    np.testing.assert_allclose(M.to_rotvecs(x), M.log_coords(np.eye(3), x), atol=1e-13)


# --- PyTensor twins (values and gradients: the contract suite, tests/geometry/contract.py) ---
def test_uniform_chart_is_the_gaussian_quaternions_rotation():
    """``pt_from_gaussian`` reads a Gaussian as a scalar-first quaternion (scipy's
    converter as the oracle); the generic round trip is the suite's."""
    z = np.random.default_rng(7).normal(size=(5, 4))
    from_z = M.pt_from_gaussian(z).eval()
    np.testing.assert_allclose(
        from_z,
        M.from_quaternions(z / np.linalg.norm(z, axis=-1, keepdims=True), scalar_first=True),
        atol=1e-14,
    )


def test_ball_exit_matches_bisection():
    """``pt_ball_exit``: the distance along chart directions to the edge of B_r(m0)."""
    rng = np.random.default_rng(17)
    m0 = _random(1, 18)[0]
    r = 1.2
    origin = _near(m0, 1, 0.8, 19)[0]  # inside the ball
    frame = M.chart_frame(origin)
    omega = rng.normal(size=(12, 3))
    omega /= np.linalg.norm(omega, axis=-1, keepdims=True)
    got = M.pt_ball_exit(frame, pt.as_tensor(omega), m0, r).eval()
    for w, t_exit in zip(omega, got, strict=True):
        lo, hi = 0.0, 2 * r + 0.1
        for _ in range(80):
            mid = 0.5 * (lo + hi)
            if M.dist(m0, M.exp_coords(origin, mid * w)) <= r:
                lo = mid
            else:
                hi = mid
        assert t_exit == pytest.approx(lo, abs=1e-10)
