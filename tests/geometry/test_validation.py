"""Bad input raises ValueError/TypeError with a message that names the problem."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import pymc_manidp as pmd

S2 = pmd.Sphere(dim=2)
P2 = pmd.SPD(k=2)
K4 = pmd.KendallShape(k_landmarks=4)
R3 = pmd.Euclidean(dim=3)
GOOD = {
    "sphere": (S2, np.array([[0.0, 0.0, 1.0], [1.0, 0.0, 0.0]])),
    "spd": (P2, np.stack([np.eye(2), np.diag([2.0, 3.0])])),
    "kendall": (K4, np.array([[[0.0, 0], [1, 0], [1, 1], [0, 1]]] * 2)),
    "euclid": (R3, np.zeros((2, 3))),
}


@pytest.mark.parametrize("name", list(GOOD))
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_points_are_rejected_with_their_row(name, bad):
    M, x = GOOD[name]
    x = x.copy()
    x.reshape(2, -1)[1, 0] = bad
    with pytest.raises(ValueError, match=r"NaN or infinite.*row 1"):
        M.validate(x)


@pytest.mark.parametrize("name", list(GOOD))
def test_wrong_shape_is_rejected(name):
    M, x = GOOD[name]
    with pytest.raises(ValueError, match="trailing shape"):
        M.validate(x[..., :-1])


@pytest.mark.parametrize("name", list(GOOD))
@pytest.mark.parametrize("bad", [[["a"] * 3], np.array([1 + 1j]), None, True])
def test_wrong_types_raise_type_error(name, bad):
    M, _ = GOOD[name]
    with pytest.raises(TypeError, match="real numbers"):
        M.validate(bad)


def test_points_off_the_sphere():
    x = np.array([[0.0, 0.0, 1.0], [0.0, 0.0, 1.01], [0, 0, 1 + 1e-9]])
    with pytest.raises(ValueError, match=r"not on the sphere.*1 of 3 rows, first at row 1"):
        S2.validate(x)
    # within tolerance: projected exactly onto the sphere
    ok = S2.validate(x[[0, 2]])
    np.testing.assert_allclose(np.linalg.norm(ok, axis=-1), 1.0, rtol=1e-15)
    with pytest.raises(ValueError, match=r"radius 2\.0"):
        pmd.Sphere(dim=2, radius=2.0).validate(x[0])


def test_non_symmetric_matrices():
    x = np.stack([np.eye(2), np.array([[1.0, 0.5], [0.0, 1.0]])])
    with pytest.raises(ValueError, match=r"not symmetric.*row 1"):
        P2.validate(x)


@pytest.mark.parametrize("bad", [np.diag([1.0, -1.0]), np.zeros((2, 2)), np.diag([1.0, 0.0])])
def test_non_positive_definite_matrices(bad):
    with pytest.raises(ValueError, match=r"not positive definite.*row 1"):
        P2.validate(np.stack([np.eye(2), bad]))


@pytest.mark.parametrize("k", [2, 3, 8])
def test_positive_definite_threshold_is_the_eigenvalue_criterion(k):
    # SPD.validate accepts lambda_min > 1e-14 lambda_max. Its fast path (one Cholesky of
    # x - 2e-14 tr(x) I) must decide exactly as that criterion, taken here from each
    # matrix's known spectrum, alone and in a batch of well-conditioned ones. A plain
    # Cholesky of x (no shift) accepts the ratios 0.3e-14 and 0.8e-14: caught below.
    rng = np.random.default_rng(k)
    q = np.linalg.qr(rng.normal(size=(k, k)))[0]
    M = pmd.SPD(k=k)
    good = np.stack([np.eye(k) + 0.1 * np.diag(rng.random(k)) for _ in range(5)])
    for ratio in (0.3e-14, 0.8e-14, 1.5e-14, 3e-14, 1e-12, 1e-3):
        lam = np.geomspace(ratio, 1.0, k) * 7.0  # lambda_min / lambda_max = ratio
        x = (q * lam) @ q.T
        x = 0.5 * (x + x.T)
        accept = ratio > 1e-14
        for batch in (x[None], np.concatenate([good, x[None], good])):
            if accept:
                np.testing.assert_array_equal(M.validate(batch), batch)
            else:
                with pytest.raises(ValueError, match="not positive definite"):
                    M.validate(batch)


def test_degenerate_shapes():
    x = np.stack([GOOD["kendall"][1][0], np.full((4, 2), 3.0)])
    with pytest.raises(ValueError, match=r"degenerate.*row 1"):
        K4.validate(x)
    with pytest.raises(ValueError, match="degenerate"):
        K4.dist(x[0], x[1])


def test_log_at_the_cut_locus():
    with pytest.raises(ValueError, match="antipodal"):
        S2.log(np.array([0.0, 0, 1]), np.array([0.0, 0, -1]))
    # two shapes at distance pi/2: a square's corners vs a configuration orthogonal to it
    K3 = pmd.KendallShape(k_landmarks=3)
    z = K3.validate(np.array([[1.0, 0], [-1, 0], [0, 0]]))
    w = K3.validate(np.array([[1.0, 0], [1, 0], [-2, 0]]))  # orthogonal in C^k, real
    assert K3.dist(z, w) == pytest.approx(np.pi / 2)
    with pytest.raises(ValueError, match="cut locus"):
        K3.log(z, w)


@pytest.mark.parametrize(
    ("factory", "exc", "msg"),
    [
        (lambda: pmd.Sphere(dim=0), ValueError, "dim must be an integer >= 1"),
        (lambda: pmd.Sphere(dim=2.5), TypeError, "dim must be an integer"),
        (lambda: pmd.Sphere(dim=2, radius=-1.0), ValueError, "radius must be a finite number"),
        (lambda: pmd.Sphere(dim=2, radius=np.inf), ValueError, "radius must be a finite"),
        (lambda: pmd.Sphere(dim=2, radius="1"), TypeError, "radius must be a real number"),
        (lambda: pmd.SPD(k=0), ValueError, "k must be an integer >= 1"),
        (
            lambda: pmd.KendallShape(k_landmarks=2),
            ValueError,
            "k_landmarks must be an integer >= 3",
        ),
        (lambda: pmd.Euclidean(dim=True), TypeError, "dim must be an integer"),
    ],
)
def test_bad_constructor_arguments(factory, exc, msg):
    with pytest.raises(exc, match=msg):
        factory()


def test_chart_center_must_be_one_point():
    with pytest.raises(ValueError, match="one point"):
        S2.pt_exp_coords(np.tile([0.0, 0.0, 1.0], (2, 1)), np.zeros(2))


# --- issue 43, items 10 and 15: the validators under adversarial input ----------------------

#: the six shipped manifolds (the validators' subjects)
SIX = {
    "sphere": pmd.Sphere(dim=2),
    "spd": pmd.SPD(k=2),
    "hyperbolic": pmd.Hyperbolic(dim=2),
    "kendall": pmd.KendallShape(k_landmarks=3),
    "rotations": pmd.Rotations(),
    "euclidean": pmd.Euclidean(dim=2),
}

EDGE_FLOATS = st.one_of(
    st.sampled_from(
        [
            0.0,
            -0.0,
            1.0,
            -1.0,
            1 / 3,
            5e-324,
            -5e-324,
            2.2e-308,
            1e-155,
            1e155,
            -1e155,
            1e300,
            -1e300,
            1.7976931348623157e308,
            math.nextafter(1.0, 2.0),
            math.nan,
            math.inf,
        ]
    ),
    st.floats(allow_nan=True, allow_infinity=True, allow_subnormal=True),
)


def _base_point(M):
    """A valid point of the manifold named ``M``."""
    base = {
        "sphere": np.array([0.0, 0.0, 1.0]),
        "spd": np.eye(2),
        "hyperbolic": np.array([1.0, 0.0, 0.0]),
        "kendall": np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]]),
        "rotations": np.eye(3),
        "euclidean": np.zeros(2),
    }[M]
    return base


def _assert_on(name, M, out, shape):
    """``out`` are points of ``M``: finite, of the input's shape, on the manifold."""
    assert out.shape == shape and np.all(np.isfinite(out))
    if name == "sphere":
        np.testing.assert_allclose(np.linalg.norm(out, axis=-1), M.radius, rtol=1e-12)
    elif name == "hyperbolic":
        x0, xs = out[..., 0], out[..., 1:]
        assert np.all(x0 >= 1.0)
        np.testing.assert_allclose(x0**2 - np.sum(xs * xs, -1), 1.0, atol=1e-9 * np.max(x0**2))
    elif name == "rotations":
        eye = np.broadcast_to(np.eye(3), out.shape)
        np.testing.assert_allclose(np.swapaxes(out, -1, -2) @ out, eye, atol=1e-12)
        assert np.all(np.linalg.det(out) > 0)
    elif name == "spd":
        np.testing.assert_array_equal(out, np.swapaxes(out, -1, -2))
        assert np.all(np.linalg.eigvalsh(out)[..., 0] > 0)
    elif name == "kendall":
        np.testing.assert_allclose(np.sum(out**2, axis=(-2, -1)), 1.0, rtol=1e-12)


@pytest.mark.parametrize("name", list(SIX))
@given(data=st.data())
def test_validate_returns_points_of_the_manifold_or_refuses(name, data):
    """Adversarial coordinates (NaN, inf, subnormal, 1e155 whose square overflows, the
    largest float) and adversarial tolerances (nan, 0, negative, bools, strings): a
    ``TypeError``/``ValueError``, or finite points on the manifold. Issue 43:
    ``Hyperbolic(2).validate([1e155, 1e155, 0])`` returned inf and
    ``Rotations().validate(1.5 I, tol=nan)`` a non-rotation."""
    M = SIX[name]
    shape = (data.draw(st.integers(1, 3)), *M.point_shape)
    base = _base_point(name)
    kind = data.draw(st.sampled_from(["edge", "nudged", "scaled"]))
    if kind == "edge":
        x = data.draw(hnp.arrays(float, shape, elements=EDGE_FLOATS))
    elif kind == "nudged":  # a valid point, some coordinates moved by an edge float
        x = np.broadcast_to(base, shape).copy()
        x.reshape(-1)[data.draw(st.integers(0, x.size - 1))] += data.draw(EDGE_FLOATS)
    else:  # a valid point times an edge float (1.5 I, 1e155 (1, 1, 0) ...)
        with np.errstate(all="ignore"):
            x = np.broadcast_to(base, shape) * data.draw(EDGE_FLOATS)
    tol = data.draw(
        st.one_of(st.just(None), EDGE_FLOATS, st.sampled_from([True, "1e-6", [1e-6], 0, -1]))
    )
    kwargs = {} if tol is None or name in ("kendall", "euclidean") else {"tol": tol}
    try:
        out = M.validate(x, **kwargs)
    except (TypeError, ValueError) as err:
        assert str(err)
        return
    if "tol" in kwargs:  # only a usable tolerance is accepted
        assert not isinstance(tol, (bool, str, list)) and math.isfinite(tol) and tol > 0
    _assert_on(name, M, out, shape)


def test_the_issue_examples_of_the_validators():
    with pytest.raises(ValueError, match="too far from the origin"):
        pmd.Hyperbolic(dim=2).validate([1e155, 1e155, 0])
    with pytest.raises(ValueError, match=r"tol must be a finite number in \(0, 0.1\).*got nan"):
        pmd.Rotations().validate(1.5 * np.eye(3), tol=np.nan)
    with pytest.raises(ValueError, match=r"radius must be in \[1e-150, 1e\+150\]"):
        pmd.Sphere(dim=2, radius=1e300)
    R = pmd.Rotations().from_rotvecs([1e300, 0, 0])  # a rotation about x, angle 1e300 mod 2 pi
    a = math.atan2(math.sin(1e300), math.cos(1e300))
    np.testing.assert_allclose(R, pmd.Rotations().from_rotvecs([a, 0, 0]), atol=1e-15)


@given(w=hnp.arrays(float, st.sampled_from([(3,), (2, 3)]), elements=EDGE_FLOATS))
def test_from_rotvecs_returns_rotations_or_refuses(w):
    """Any rotation vector of finite length is a rotation (angle reduced mod 2 pi when
    huge); NaN/inf, and lengths past the largest float, are refused."""
    try:
        out = pmd.Rotations().from_rotvecs(w)
    except ValueError as err:
        lengths = [math.hypot(*row) for row in w.reshape(-1, 3)]  # inf past 1.8e308
        assert not all(math.isfinite(t) for t in lengths), err
        return
    _assert_on("rotations", pmd.Rotations(), out, (*w.shape[:-1], 3, 3))


@pytest.mark.parametrize("cls", ["sphere", "spd", "hyperbolic", "kendall", "euclidean"])
@given(
    size=st.one_of(st.integers(-2, 12), st.sampled_from([10**400, True, 2.0, "3", None])),
    radius=EDGE_FLOATS,
)
def test_max_radius_is_a_positive_number_or_the_constructor_refuses(cls, size, radius):
    """``r*`` of every manifold a constructor accepts is a positive float or inf, never an
    exception or NaN (issue 43: ``Sphere(2, radius=1e300).max_radius`` raised
    OverflowError)."""
    make = {
        "sphere": lambda: pmd.Sphere(dim=size, radius=radius),
        "spd": lambda: pmd.SPD(k=size),
        "hyperbolic": lambda: pmd.Hyperbolic(dim=size),
        "kendall": lambda: pmd.KendallShape(k_landmarks=size),
        "euclidean": lambda: pmd.Euclidean(dim=size),
    }[cls]
    try:
        M = make()
    except (TypeError, ValueError) as err:
        assert str(err)
        return
    r = M.max_radius
    assert isinstance(float(r), float) and r > 0 and not math.isnan(r)
    assert pmd.Rotations().max_radius == pytest.approx(math.pi / 2)
