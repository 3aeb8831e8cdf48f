"""Euclidean baselines: calibration by hand formulas, exact noise laws, invariances.

Inputs are generated here, not by the library's generators.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

import pymc_manidp as pmd
from pymc_manidp.mechanisms.baselines import (
    EuclideanLaplace,
    LandmarkLaplace,
    ProjectedLaplace,
    knorm_noise,
    unvech,
    vech,
)

ALPHA = 0.01
NORTH = np.array([0.0, 0.0, 1.0])
R_SPHERE = np.pi / 8
R_SPD = 1.5


def _cap(n, r, rng):
    th, ph = rng.uniform(0, r, n), rng.uniform(0, 2 * np.pi, n)
    return np.stack([np.sin(th) * np.cos(ph), np.sin(th) * np.sin(ph), np.cos(th)], 1)


def _spd_ball(n, r, rng, k=2):
    """exp of random symmetric matrices of Frobenius norm <= r: inside B_r(I)."""
    a = rng.normal(size=(n, k, k))
    a = a + np.swapaxes(a, 1, 2)
    a *= (rng.uniform(0, r, n) / np.linalg.norm(a, axis=(1, 2)))[:, None, None]
    w, v = np.linalg.eigh(a)
    return (v * np.exp(w)[:, None, :]) @ np.swapaxes(v, 1, 2)


def _radius_pvalue(t, dim, sigma):
    return stats.kstest(t, stats.gamma(dim, scale=sigma).cdf).pvalue


# --- helpers --------------------------------------------------------------------------
def test_vech_round_trip_and_norm_below_frobenius():
    rng = np.random.default_rng(0)
    a = rng.normal(size=(50, 3, 3))
    s = a + np.swapaxes(a, 1, 2)
    assert vech(s).shape == (50, 6)
    np.testing.assert_array_equal(unvech(vech(s), 3), s)
    assert vech(np.array([[1.0, 2.0, 4.0], [2.0, 3.0, 5.0], [4.0, 5.0, 6.0]])).tolist() == [
        1.0, 2.0, 4.0, 3.0, 5.0, 6.0,
    ]  # fmt: skip
    # plain vech drops one copy of each off-diagonal: the Frobenius bound stays valid
    assert np.all(np.linalg.norm(vech(s), axis=1) <= np.linalg.norm(s, axis=(1, 2)))


@pytest.mark.parametrize(
    ("M", "center", "r", "tight"),
    [
        (pmd.Sphere(dim=2, radius=2.0), 2 * NORTH, 0.9, True),
        (pmd.Euclidean(dim=3), np.array([1.0, -2.0, 0.5]), 0.7, True),
        (pmd.SPD(k=2), np.diag([3.0, 1.0]), 1.0, False),
    ],
)
def test_the_manifolds_ambient_embedding_holds_the_ball(M, center, r, tight):
    """The members the baselines use: ``from_ambient`` inverts ``to_ambient``, and
    ``ambient_radius(center, r)`` bounds the ambient distance of every point of the
    geodesic ball's boundary (2,000 directions), attained where it is the exact chord."""
    coords = np.random.default_rng(0).normal(size=(2000, M.dim))
    x = M.exp_coords(center, r * coords / np.linalg.norm(coords, axis=1, keepdims=True))
    y = M.to_ambient(x)
    assert y.shape == (2000, M.ambient_dim)
    np.testing.assert_allclose(M.from_ambient(y), x, atol=1e-12)
    dist = np.linalg.norm(y - M.to_ambient(center), axis=1)
    r_e = M.ambient_radius(center, r)
    assert dist.max() <= r_e * (1 + 1e-12)
    if tight:
        np.testing.assert_allclose(dist, r_e, rtol=1e-12)
    else:  # off the identity the supplement's e^r - 1 alone would not hold
        assert dist.max() > np.expm1(r)


def test_baselines_ask_the_manifold_not_its_class():
    import inspect

    import pymc_manidp.mechanisms.baselines as baselines

    src = inspect.getsource(baselines)
    for name in ("Sphere", "SPD", "KendallShape", "Euclidean"):
        assert f"isinstance(manifold, {name}" not in src and f"import {name}" not in src
    S = pmd.Sphere(dim=2)
    np.testing.assert_allclose(S.project_ambient([0.0, 3.0, 4.0]), [0.0, 0.6, 0.8])
    with pytest.raises(FloatingPointError, match="exactly 0"):
        S.project_ambient(np.zeros(3))


def test_knorm_noise_radius_gamma_and_wrong_sigma_caught():
    """|Y| ~ Gamma(D, sigma): KS n = 4000, alpha = 0.01; 1.1 sigma is rejected."""
    y = knorm_noise(np.random.default_rng(1), 4, 0.7, (4000,))
    t = np.linalg.norm(y, axis=1)
    assert _radius_pvalue(t, 4, 0.7) > ALPHA
    assert _radius_pvalue(t, 4, 0.77) < 1e-4
    # direction uniform on S^3: each coordinate of u has |u_1| law Beta-like; check
    # the mean direction is near 0 and the first coordinate's square ~ Beta(1/2, 3/2)
    u = y / t[:, None]
    assert stats.kstest(u[:, 0] ** 2, stats.beta(0.5, 1.5).cdf).pvalue > ALPHA


# --- Euclidean Laplace on the sphere ---------------------------------------------------
def _sphere_mech(eps=1.0):
    return EuclideanLaplace(pmd.Sphere(dim=2), epsilon=eps, center=NORTH, radius=R_SPHERE)


def test_sphere_calibration_hand_formula():
    mech = _sphere_mech(eps=0.5)
    r_e = 2 * np.sin(np.pi / 16)  # supplement §1.3.2
    assert mech.ambient_radius == pytest.approx(r_e)
    assert mech.sensitivity(40) == pytest.approx(2 * r_e / 40)
    assert mech.sigma(40) == pytest.approx(2 * r_e / 40 / 0.5)
    assert mech.ambient_dim == 3


def test_sphere_sensitivity_attained_and_not_exceeded():
    """Replacing one record moves the ambient mean by <= 2 r_E / n. The worst case is
    two opposite boundary points, 2 sin(r) apart (the cap's diameter, about 2% below
    2 r_E = 4 sin(r/2) at r = pi/8: the supplement's bound is valid, not tight)."""
    mech = _sphere_mech()
    rng = np.random.default_rng(2)
    x = _cap(30, R_SPHERE, rng)
    worst, rb = 0.0, R_SPHERE * (1 - 1e-12)  # a hair inside: rounding must not leave the ball
    for phi in np.linspace(0, np.pi, 13):
        a = np.array([np.sin(rb) * np.cos(phi), np.sin(rb) * np.sin(phi), np.cos(rb)])
        b = a * [-1, -1, 1]
        x1, x2 = x.copy(), x.copy()
        x1[-1], x2[-1] = a, b
        worst = max(worst, np.linalg.norm(mech.summary(x1) - mech.summary(x2)))
    assert worst <= mech.sensitivity(30)
    assert worst == pytest.approx(2 * np.sin(R_SPHERE) / 30, rel=1e-9)


def test_sphere_euclidean_noise_radius_law():
    """Distance of the (unprojected) release to the ambient mean ~ Gamma(3, sigma):
    KS, 4000 replicates, alpha = 0.01; a wrong sigma (the manifold-Laplace scale σ with
    Delta/eps from Thm 2, or 2 Delta/eps) is rejected."""
    mech = _sphere_mech()
    x = _cap(25, R_SPHERE, np.random.default_rng(3))
    y = mech.sample(x, 4000, random_seed=4)
    assert y.shape == (4000, 3)
    t = np.linalg.norm(y - x.mean(axis=0), axis=1)
    sigma = mech.sigma(25)
    assert _radius_pvalue(t, 3, sigma) > ALPHA
    assert _radius_pvalue(t, 3, 2 * sigma) < 1e-6
    assert _radius_pvalue(t, 3, 1.1 * sigma) < 1e-3


def test_projected_releases_are_unit_vectors():
    mech = ProjectedLaplace(pmd.Sphere(dim=2), epsilon=1.0, center=NORTH, radius=R_SPHERE)
    x = _cap(10, R_SPHERE, np.random.default_rng(5))
    y = mech.sample(x, (50, 4), random_seed=6)
    assert y.shape == (50, 4, 3)
    np.testing.assert_allclose(np.linalg.norm(y, axis=-1), 1.0, atol=1e-14)
    rel = mech.release(x, random_seed=7)
    assert rel.delta == 0.0 and rel.sampler == "exact" and rel.seed_policy == "fixed seed"
    assert rel.n == 10 and rel.sigma == pytest.approx(mech.sigma(10))
    assert rel.value.shape == (3,) and np.linalg.norm(rel.value) == pytest.approx(1.0)
    # projection is post-processing of the Euclidean release with the same draw
    euc = _sphere_mech().release(x, random_seed=7)
    np.testing.assert_allclose(rel.value, euc.value / np.linalg.norm(euc.value))
    np.testing.assert_array_equal(
        mech.release(x, random_seed=7).value, mech.release(x, random_seed=7).value
    )


def test_projected_sphere_of_radius_two():
    S = pmd.Sphere(dim=2, radius=2.0)
    mech = ProjectedLaplace(S, epsilon=1.0, center=2 * NORTH, radius=0.5)
    assert mech.ambient_radius == pytest.approx(4 * np.sin(0.5 / 4))
    x = 2 * _cap(10, 0.25, np.random.default_rng(8))
    np.testing.assert_allclose(np.linalg.norm(mech.sample(x, 20, random_seed=1), axis=-1), 2.0)


# --- Euclidean Laplace on SPD ----------------------------------------------------------
def test_spd_calibration_hand_formula():
    mech = EuclideanLaplace(pmd.SPD(k=2), epsilon=2.0, center=np.eye(2), radius=R_SPD)
    assert mech.ambient_radius == pytest.approx(np.exp(1.5) - 1)  # supplement Prop. 1
    assert mech.sigma(20) == pytest.approx(2 * (np.exp(1.5) - 1) / 20 / 2.0)
    other = EuclideanLaplace(pmd.SPD(k=2), epsilon=2.0, center=np.diag([3.0, 1.0]), radius=1.0)
    assert other.ambient_radius == pytest.approx(3 * (np.e - 1))


def test_spd_ambient_radius_contains_ball():
    """Every point of B_r(m0) is within r_E of m0 in Frobenius norm (and in vech)."""
    rng = np.random.default_rng(9)
    m0 = np.array([[2.0, 0.5], [0.5, 1.0]])
    mech = EuclideanLaplace(pmd.SPD(k=2), epsilon=1.0, center=m0, radius=1.0)
    w, v = np.linalg.eigh(m0)
    h = (v * np.sqrt(w)) @ v.T
    x = h @ _spd_ball(3000, 1.0, rng) @ h
    assert np.max(np.linalg.norm(x - m0, axis=(1, 2))) <= mech.ambient_radius


def test_spd_noise_law_and_release():
    """vech-distance of the release to vech(mean) ~ Gamma(3, sigma) (KS, 4000, alpha
    0.01). (Non-PD shares are measured by the reproduction, docs/reproduction.md.)"""
    mech = EuclideanLaplace(pmd.SPD(k=2), epsilon=1.0, center=np.eye(2), radius=R_SPD)
    x = _spd_ball(20, R_SPD, np.random.default_rng(10))
    y = mech.sample(x, 4000, random_seed=11)
    assert y.shape == (4000, 2, 2)
    np.testing.assert_array_equal(y, np.swapaxes(y, 1, 2))
    t = np.linalg.norm(vech(y) - vech(x.mean(axis=0)), axis=1)
    assert _radius_pvalue(t, 3, mech.sigma(20)) > ALPHA
    assert _radius_pvalue(t, 3, 0.9 * mech.sigma(20)) < 1e-3
    rel = mech.release(x, random_seed=3)
    assert rel.value.shape == (2, 2) and rel.delta == 0.0


# --- landmark-wise Laplace -------------------------------------------------------------
K6 = pmd.KendallShape(k_landmarks=6)
M0 = K6.validate(
    np.array([[2.0, 0.0], [1.0, 1.2], [-0.8, 1.0], [-2.0, 0.1], [-1.0, -1.1], [1.1, -0.9]])
)
R_K = 0.3


def _kendall_ball(n, r, rng, m0=M0):
    """Pre-shapes cos(t) m0 + sin(t) u, u a unit horizontal vector at m0: distance t."""
    z = m0[..., 0] + 1j * m0[..., 1]
    g = rng.normal(size=(n, len(z))) + 1j * rng.normal(size=(n, len(z)))
    g -= g.mean(axis=1, keepdims=True)
    g -= (g @ np.conj(z))[:, None] * z  # complex projection: horizontal and centered
    g /= np.linalg.norm(g, axis=1, keepdims=True)
    t = rng.uniform(0, r, (n, 1))
    w = np.cos(t) * z + np.sin(t) * g
    return np.stack([w.real, w.imag], axis=-1)


def _rotate(x, angles, scale=1.0, shift=(0.0, 0.0)):
    c, s = np.cos(angles)[:, None], np.sin(angles)[:, None]
    out = np.stack([c * x[..., 0] - s * x[..., 1], s * x[..., 0] + c * x[..., 1]], -1)
    return scale * out + np.asarray(shift)


def test_landmark_budget_split_hand_formula():
    n, eps, k = 40, 0.8, 6
    al = LandmarkLaplace(K6, epsilon=eps, center=M0, radius=R_K)
    assert al.sensitivity(n) == pytest.approx(4 * np.sin(R_K / 2) / n)
    assert al.sigma(n) == pytest.approx(k * 4 * np.sin(R_K / 2) / (n * eps))
    na = LandmarkLaplace(K6, epsilon=eps, center=M0, radius=R_K, align=False)
    top = np.max(np.hypot(M0[:, 0], M0[:, 1]))
    assert na.sensitivity(n) == pytest.approx(2 * min(1.0, top + 2 * np.sin(R_K / 2)) / n)
    assert na.sigma(n) == pytest.approx(k * na.sensitivity(n) / eps)


@pytest.mark.parametrize("align", [True, False])
def test_landmark_sensitivity_not_exceeded(align):
    """Replacing one record moves each landmark of the mean by <= Delta."""
    rng = np.random.default_rng(12)
    mech = LandmarkLaplace(K6, epsilon=1.0, center=M0, radius=R_K, align=align)
    x = _kendall_ball(15, R_K, rng)
    cand = _rotate(_kendall_ball(400, R_K, rng), rng.uniform(0, 2 * np.pi, 400))
    # the summary is a mean of per-record maps f: one replaced record moves it by
    # (f(a) - f(b)) / n; check that on one pair, then search all pairs at once
    f = np.stack([mech.summary(c[None]) for c in cand])
    x1, x2 = x.copy(), x.copy()
    x1[-1], x2[-1] = cand[0], cand[1]
    np.testing.assert_allclose(mech.summary(x1) - mech.summary(x2), (f[0] - f[1]) / 15)
    diff = f[:, None] - f[None, :]
    worst = float(np.max(np.linalg.norm(diff, axis=-1))) / 15
    # measured: worst / Delta = 0.66 (aligned), 0.77 (not aligned); a halved Delta
    # (e.g. forgetting the factor 2 of the triangle inequality) would fail here
    assert 0.5 * mech.sensitivity(15) < worst <= mech.sensitivity(15)


def test_landmark_noise_per_landmark_radius_law():
    """Unprojected noise per landmark ~ planar Laplace, radius Gamma(2, k Delta/eps):
    KS on 3000 x 6 radii, alpha = 0.01; the unsplit rate Delta/eps is rejected."""
    mech = LandmarkLaplace(K6, epsilon=1.0, center=M0, radius=R_K, project=False)
    x = _kendall_ball(30, R_K, np.random.default_rng(13))
    y = mech.sample(x, 3000, random_seed=14)
    assert y.shape == (3000, 6, 2)
    t = np.linalg.norm(y - mech.summary(x), axis=-1).ravel()
    sigma = mech.sigma(30)
    assert _radius_pvalue(t, 2, sigma) > ALPHA
    assert _radius_pvalue(t, 2, sigma / 6) < 1e-6  # wrong: budget not split
    # landmarks independent: correlation of radii across landmarks is small
    r = np.linalg.norm(y - mech.summary(x), axis=-1)
    assert np.max(np.abs(np.corrcoef(r.T) - np.eye(6))) < 0.08


def test_aligned_release_invariant_to_rotating_the_data():
    """Each record rotated, scaled and translated differently: the aligned release with
    the same seed is unchanged (so is its shape distance to m0); the unaligned one
    changes (wrong variant)."""
    rng = np.random.default_rng(15)
    x = _kendall_ball(25, R_K, rng)
    moved = _rotate(x, rng.uniform(0, 2 * np.pi, 25), scale=3.7, shift=(4.0, -1.0))
    al = LandmarkLaplace(K6, epsilon=1.0, center=M0, radius=R_K)
    a, b = al.release(x, random_seed=16), al.release(moved, random_seed=16)
    np.testing.assert_allclose(a.value, b.value, atol=1e-12)
    assert K6.dist(M0, a.value) == pytest.approx(K6.dist(M0, b.value), abs=1e-12)
    np.testing.assert_allclose(
        al.sample(x, 10, random_seed=2), al.sample(moved, 10, random_seed=2), atol=1e-12
    )
    na = LandmarkLaplace(K6, epsilon=1.0, center=M0, radius=R_K, align=False)
    c, d = na.release(x, random_seed=16), na.release(moved, random_seed=16)
    assert K6.dist(c.value, d.value) > 1e-3


def test_landmark_release_record():
    mech = LandmarkLaplace(K6, epsilon=1.0, center=M0, radius=R_K)
    x = _kendall_ball(10, R_K, np.random.default_rng(17))
    rel = mech.release(x, random_seed=1)
    assert rel.value.shape == (6, 2) and rel.delta == 0.0 and rel.sampler == "exact"
    np.testing.assert_allclose(np.sum(rel.value**2), 1.0)  # a pre-shape
    assert rel.sigma == pytest.approx(mech.sigma(10))
    assert any("split" in note for note in rel.notes)
    assert rel.public()["mechanism"] == "landmark-wise Laplace (aligned)"


# --- input checks ----------------------------------------------------------------------
def test_premises_checked():
    mech = _sphere_mech()
    far = _cap(5, 0.3, np.random.default_rng(0)) @ np.array([[1, 0, 0], [0, 0, -1], [0, 1, 0.0]])
    with pytest.raises(pmd.DomainError, match="outside the public ball"):
        mech.release(far, random_seed=0)
    with pytest.raises(pmd.DomainError):
        mech.sample(far, 3, random_seed=0)
    rel = mech.release(far, random_seed=0, clip=True)
    assert rel.opt_outs == ("clip",)
    with pytest.raises(TypeError, match="LandmarkLaplace"):
        EuclideanLaplace(K6, epsilon=1.0, center=M0, radius=R_K)
    with pytest.raises(TypeError, match="Sphere"):
        ProjectedLaplace(pmd.SPD(k=2), epsilon=1.0, center=np.eye(2), radius=1.0)
    with pytest.raises(TypeError, match="KendallShape"):
        LandmarkLaplace(pmd.Sphere(dim=2), epsilon=1.0, center=NORTH, radius=0.3)
    with pytest.raises(TypeError, match="bools"):
        LandmarkLaplace(K6, epsilon=1.0, center=M0, radius=R_K, align=1)
    with pytest.raises(ValueError, match="epsilon"):
        _sphere_mech(eps=0.0)
    with pytest.raises(ValueError, match="r\\*"):
        LandmarkLaplace(K6, epsilon=1.0, center=M0, radius=0.5)
    with pytest.raises(TypeError, match="random_seed"):
        mech.release(_cap(3, 0.1, np.random.default_rng(0)), random_seed=1.5)
    with pytest.raises(ValueError, match="size"):
        mech.sample(_cap(3, 0.1, np.random.default_rng(0)), 0)
    with pytest.raises(ValueError):
        mech.sensitivity(0)
    assert mech.release(_cap(3, 0.1, np.random.default_rng(0))).seed_policy == "OS entropy"
