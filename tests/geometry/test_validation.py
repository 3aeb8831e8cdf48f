"""Bad input raises ValueError/TypeError with a message that names the problem."""

from __future__ import annotations

import numpy as np
import pytest

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
