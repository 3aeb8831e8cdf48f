"""Inputs a user has (issue 38, items 1-3): SciPy ``Rotation`` objects, records near the
manifold (``project``), Poincaré-ball coordinates, and the other layouts of data files.

Oracles: SciPy's own matrices for a ``Rotation``; the SVD's polar factor, checked as the
nearest rotation against many random rotations; the distance from the disc's center,
``2 artanh |p|``, for the Poincaré maps.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from scipy.spatial.transform import Rotation

import pymc_manidp as pmd

SO3 = pmd.Rotations()
S2 = pmd.Sphere(dim=2)
SPD2 = pmd.SPD(k=2)
H2 = pmd.Hyperbolic(dim=2)

ADVERSARIAL = [
    0.0,
    1 / 3,
    0.3333333333333333,
    5e-324,
    -5e-324,
    1e-300,
    1e308,
    -1e308,
    math.nextafter(1.0, 2.0),
    math.nextafter(1.0, 0.0),
]
reals = st.one_of(
    st.sampled_from(ADVERSARIAL), st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False)
)
junk = st.one_of(
    st.none(),
    st.booleans(),
    st.text(max_size=3),
    st.just(10**400),
    st.just(float("nan")),
    st.just(float("inf")),
    st.just([1.0, 2.0]),
    st.just(np.zeros((2, 5))),
    st.just(np.array(["a", "b", "c"])),
    st.just(np.ones(3, dtype=bool)),
    st.just(np.ones(3, dtype=complex)),
)


# --- item 1: SciPy Rotation objects ---------------------------------------------------
def test_a_scipy_rotation_is_read_as_its_matrices_everywhere_a_point_goes():
    r = Rotation.from_rotvec(0.3 * np.random.default_rng(0).standard_normal((20, 3)))
    np.testing.assert_allclose(SO3.validate(r), r.as_matrix(), atol=1e-15)
    np.testing.assert_allclose(SO3.validate(r[0]), r[0].as_matrix(), atol=1e-15)
    assert SO3.validate(Rotation.identity()).shape == (3, 3)
    # a list of Rotations (single or stacked) is one stack
    assert SO3.coerce([r[0], r[1:3]]).shape == (3, 3, 3)
    # the public ball's center, and the Fréchet mean of Rotation data
    dom = pmd.DataDomain(SO3, Rotation.identity(), 1.0)
    np.testing.assert_array_equal(dom.center, np.eye(3))
    assert dom.public_n(r) == 20
    np.testing.assert_allclose(dom.check(r), r.as_matrix(), atol=1e-15)
    mean = pmd.frechet_mean(SO3, r).mean
    np.testing.assert_allclose(mean, pmd.frechet_mean(SO3, r.as_matrix()).mean, atol=1e-12)


def test_rotation_objects_are_not_points_of_other_spaces():
    # only SO(3) converts them: elsewhere they stay objects, refused as before
    with pytest.raises(TypeError, match="real numbers"):
        pmd.Sphere(dim=8).validate(Rotation.identity())
    assert S2.coerce(Rotation.identity()) is not None
    assert isinstance(S2.coerce(Rotation.identity()), Rotation)


@given(q=st.lists(st.tuples(reals, reals, reals, reals), min_size=1, max_size=5))
@example(q=[(0.0, 0.0, 0.0, 1e308)])
@example(q=[(5e-324, 0.0, 0.0, 0.0)])
def test_rotation_of_any_quaternion_matches_scipy(q):
    q = np.array(q, float)
    norms = np.linalg.norm(q / np.maximum(np.abs(q).max(1, keepdims=True), 1e-300), axis=1)
    if np.any(norms == 0) or not np.all(np.isfinite(q)):
        return
    try:
        r = Rotation.from_quat(q)
    except ValueError:  # SciPy refuses zero norms (after its own scaling)
        return
    m = r.as_matrix()
    if not np.allclose(np.swapaxes(m, -1, -2) @ m, np.eye(3), atol=1e-9):
        # SciPy 1.18 turns a quaternion of norm ~1e308 into the zero "rotation" (its norm
        # overflows): refused, never taken as a point
        with pytest.raises(ValueError, match="not orthogonal"):
            SO3.validate(r)
        return
    np.testing.assert_allclose(SO3.validate(r), m, atol=1e-12)


# --- item 2: projection ---------------------------------------------------------------
def test_rotations_project_is_the_nearest_rotation_and_fixes_the_sign():
    rng = np.random.default_rng(1)
    a = rng.standard_normal((50, 3, 3))
    p = SO3.project(a)
    np.testing.assert_allclose(
        np.swapaxes(p, -1, -2) @ p, np.broadcast_to(np.eye(3), p.shape), atol=1e-12
    )
    np.testing.assert_allclose(np.linalg.det(p), 1.0, atol=1e-12)
    # oracle: no rotation among 20,000 Haar draws is nearer (Frobenius) than the projection
    others = SO3.sample_uniform(rng, (20_000,))
    for ai, pi in zip(a[:10], p[:10], strict=True):
        best = np.min(np.linalg.norm(others - ai, axis=(-2, -1)))
        assert np.linalg.norm(pi - ai) <= best + 1e-12
    # a rotation is its own projection; a rounded one comes back to within the rounding
    r = SO3.from_rotvecs(rng.standard_normal((30, 3)))
    np.testing.assert_allclose(SO3.project(r), r, atol=1e-14)
    np.testing.assert_allclose(SO3.project(np.round(r, 6)), r, atol=2e-6)
    # scale-free: a huge or subnormal multiple projects to the same rotation
    np.testing.assert_allclose(SO3.project(1e300 * r), r, atol=1e-14)
    np.testing.assert_allclose(SO3.project(r * 1e-310), r, atol=1e-5)


def test_rotations_project_planted_without_the_sign_fix_gives_a_reflection():
    # the plain polar factor of a reflection is the reflection itself: det -1
    a = np.diag([1.0, 1.0, -1.0]) @ SO3.generic_point
    u, _, vt = np.linalg.svd(a)
    assert np.linalg.det(u @ vt) < 0
    assert np.linalg.det(SO3.project(a)) == pytest.approx(1.0)


def test_sphere_and_spd_project():
    x = np.array([[3.0, 4.0, 0.0], [1e308, 1e308, 1e308], [5e-324, 0.0, 0.0], [0, 0, -2.0]])
    p = S2.project(x)
    np.testing.assert_allclose(np.linalg.norm(p, axis=1), 1.0, atol=1e-15)
    np.testing.assert_allclose(p[0], [0.6, 0.8, 0.0])
    np.testing.assert_allclose(p[2], [1.0, 0.0, 0.0])
    np.testing.assert_allclose(pmd.Sphere(dim=2, radius=2.0).project(x[:1]), [[1.2, 1.6, 0.0]])
    with pytest.raises(ValueError, match=r"zero vector.*row 1"):
        S2.project([[1.0, 0, 0], [0.0, 0.0, 0.0]])
    # SPD: symmetrize, then floor the eigenvalues at floor * the largest
    a = np.array([[2.0, 1.0], [1.0, 2.0]])  # eigenvalues 1 and 3
    np.testing.assert_allclose(SPD2.project(a), a, rtol=1e-14)
    np.testing.assert_allclose(SPD2.project(np.array([[2.0, 1.5], [0.5, 2.0]])), a, rtol=1e-14)
    w = np.linalg.eigvalsh(SPD2.project([[1.0, 2.0], [2.0, 1.0]]))  # eigenvalues -1 and 3
    np.testing.assert_allclose(w, [3e-8, 3.0], rtol=1e-6)
    np.testing.assert_allclose(
        np.linalg.eigvalsh(SPD2.project([[1.0, 2.0], [2.0, 1.0]], floor=0.01)),
        [0.03, 3.0],
        rtol=1e-9,
    )
    SPD2.validate(SPD2.project([[1.0, 2.0], [2.0, 1.0]]))  # on the manifold
    with pytest.raises(ValueError, match="row 1 has no positive eigenvalue"):
        SPD2.project([np.eye(2), -np.eye(2)])
    with pytest.raises(ValueError, match="floor"):
        SPD2.project(np.eye(2), floor=0.5)


@pytest.mark.parametrize(
    ("M", "shape"), [(SO3, (3, 3)), (S2, (3,)), (SPD2, (2, 2))], ids=["so3", "s2", "spd2"]
)
@given(entries=st.lists(reals, min_size=9, max_size=9))
def test_project_lands_on_the_manifold_or_refuses_with_a_message(M, shape, entries):
    x = np.array(entries[: math.prod(shape)], float).reshape(shape)
    try:
        p = M.project(x)
    except ValueError as err:
        assert any(w in str(err) for w in ("zero", "no positive eigenvalue")), err
        return
    assert p.shape == shape and np.all(np.isfinite(p))
    if np.max(np.abs(p)) < 1e150:  # SPD.validate squares entries: past 1e154 it overflows
        M.validate(p)  # raises if off the manifold


@pytest.mark.parametrize("M", [SO3, S2, SPD2], ids=["so3", "s2", "spd2"])
@given(bad=junk)
def test_project_refuses_wrong_types_and_shapes(M, bad):
    with pytest.raises((TypeError, ValueError)) as info:
        M.project(bad)
    msg = str(info.value)
    assert any(w in msg for w in ("real numbers", "trailing shape", "NaN", "zero", "eigenvalue")), (
        msg
    )


def test_the_refusals_of_records_off_the_manifold_name_project():
    near = np.round(SO3.from_rotvecs([[0.1, 0.2, 0.3]]), 4)
    with pytest.raises(ValueError, match=r"Rotations\(\)\.project.*--project"):
        SO3.validate(near)
    with pytest.raises(ValueError, match=r"Sphere\.project.*--project"):
        S2.validate([[0.0, 0.0, 1.001]])
    with pytest.raises(ValueError, match=r"SPD\.project.*--project"):
        SPD2.validate([[1.0, 0.1], [0.2, 1.0]])
    with pytest.raises(ValueError, match=r"SPD\.project.*--project"):
        SPD2.validate([[1.0, 2.0], [2.0, 1.0]])


# --- item 3: Poincaré coordinates --------------------------------------------------------
@given(p=st.tuples(reals, reals))
@example(p=(0.0, 0.0))
@example(p=(math.nextafter(1.0, 0.0), 0.0))
@example(p=(1 / 3, 0.3333333333333333))
@example(p=(5e-324, -5e-324))
def test_poincare_round_trip_and_distance_from_the_center(p):
    p = np.array(p, float)
    r = float(np.hypot(*p))  # without overflow at 1e308
    if not r < 1.0:
        with pytest.raises(ValueError, match="norm < 1"):
            H2.from_poincare(p)
        return
    x = H2.from_poincare(p)
    assert x.shape == (3,)
    # oracle: the distance from the disc's center is 2 artanh |p|
    assert float(H2.dist(H2.origin, x)) == pytest.approx(2 * math.atanh(r), rel=1e-9, abs=1e-15)
    if r < 0.999:  # beyond, |p| loses digits to the round trip (1 - |p|^2 cancels)
        np.testing.assert_allclose(H2.to_poincare(x), p, atol=1e-13)


def test_poincare_methods_check_their_dimension_and_refuse_the_boundary():
    H3 = pmd.Hyperbolic(dim=3)
    assert H3.from_poincare([[0.1, 0.2, 0.3]]).shape == (1, 4)
    with pytest.raises(ValueError, match=r"trailing shape \(3,\)"):
        H3.from_poincare([[0.1, 0.2]])
    with pytest.raises(ValueError, match=r"norm < 1.*row 1"):
        H2.from_poincare([[0.0, 0.5], [0.6, 0.8]])
    with pytest.raises(ValueError, match="NaN"):
        H2.from_poincare([[np.nan, 0.0]])
    with pytest.raises(TypeError):
        H2.from_poincare("0.1,0.2")
    x = H2.from_poincare([[0.1, 0.2], [-0.5, 0.25]])
    np.testing.assert_allclose(H2.to_poincare(x), [[0.1, 0.2], [-0.5, 0.25]], atol=1e-15)
    # the refusal of Poincaré points read as hyperboloid ones says what to do
    with pytest.raises(ValueError, match="from_poincare or --layout poincare"):
        pmd.Hyperbolic(dim=1).validate([[0.1, 0.2]])


# --- file layouts --------------------------------------------------------------------------
def test_layouts_quaternion_and_poincare():
    q = Rotation.from_rotvec([[0.1, 0.2, 0.3], [0.0, -1.0, 0.5]])
    _M, x = pmd.Rotations.from_layout("quaternion", q.as_quat())
    np.testing.assert_allclose(x, q.as_matrix(), atol=1e-15)
    _, x = pmd.Rotations.from_layout("quaternion", q.as_quat(scalar_first=True), scalar_first=True)
    np.testing.assert_allclose(x, q.as_matrix(), atol=1e-15)
    H, y = pmd.Hyperbolic.from_layout("poincare", [[0.5, 0.0], [0.0, 0.0]])
    assert H == H2 and y.shape == (2, 3)
    with pytest.raises(ValueError, match=r"\(n, 4\)"):
        pmd.Rotations.from_layout("quaternion", np.zeros((2, 3)))
    with pytest.raises(ValueError, match=r"no layout 'poincare'.*quaternion"):
        pmd.Rotations.from_layout("poincare", np.zeros((2, 2)))
    with pytest.raises(ValueError, match="no layout"):
        pmd.Sphere.from_layout("quaternion", np.zeros((2, 4)))
    with pytest.raises(TypeError, match="scalar_first"):
        pmd.Rotations.from_layout("quaternion", q.as_quat(), scalar_first="yes")
    # a 4-column file read as rotation matrices: the refusal names the layout
    with pytest.raises(ValueError, match=r"--layout quaternion.*scalar last"):
        pmd.Rotations.from_record_shape((4,))


@given(bad=junk)
def test_poincare_methods_and_layouts_refuse_junk_with_a_message(bad):
    calls = [
        H2.from_poincare,
        H2.to_poincare,
        lambda b: pmd.Rotations.from_layout("quaternion", b),
    ]
    if not (isinstance(bad, np.ndarray) and bad.dtype == float):  # zeros (2, 5): H^5 data
        calls.append(lambda b: pmd.Hyperbolic.from_layout("poincare", b))
    for call in calls:
        with pytest.raises((TypeError, ValueError)) as info:
            call(bad)
        assert str(info.value)
