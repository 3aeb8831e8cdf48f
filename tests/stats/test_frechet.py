"""Fréchet means: optimality, closed forms, invariance, edge cases, warnings."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy.stats import special_ortho_group

import pymc_manidp as pmd
from pymc_manidp.stats import ConvergenceWarning


def _expm_sym(a):
    """The matrix exponential of the symmetric part of ``a`` (an SPD matrix)."""
    w, u = np.linalg.eigh(0.5 * (a + np.swapaxes(a, -1, -2)))
    return (u * np.exp(w)[..., None, :]) @ np.swapaxes(u, -1, -2)


def _ball_data(M, rng, n, r):
    """n points in B_r(m0) around a random-ish center, direction uniform."""
    if isinstance(M, pmd.Sphere):
        m0 = np.zeros(M.dim + 1)
        m0[-1] = M.radius
    elif isinstance(M, pmd.SPD):
        m0 = np.diag(np.linspace(1.0, 3.0, M.k))
    else:
        t = np.linspace(0, 2 * np.pi, M.k_landmarks, endpoint=False)
        m0 = M.validate(np.stack([np.cos(t), 0.5 * np.sin(t)], -1))
    c = rng.normal(size=(n, M.dim))
    c *= r * rng.uniform(0, 1, (n, 1)) ** (1 / M.dim) / np.linalg.norm(c, axis=-1, keepdims=True)
    return m0, M.validate(M.exp_coords(np.broadcast_to(m0, (n, *m0.shape)), c))


CASES = {
    "S2": (pmd.Sphere(dim=2), 0.7),
    "S7": (pmd.Sphere(dim=7), 0.7),
    "SPD2": (pmd.SPD(k=2), 1.5),
    "SPD4": (pmd.SPD(k=4), 1.5),
    "Kendall5": (pmd.KendallShape(k_landmarks=5), 0.35),
    "Kendall12": (pmd.KendallShape(k_landmarks=12), 0.35),
}


@pytest.mark.parametrize("name", list(CASES))
def test_first_order_optimality(name):
    M, r = CASES[name]
    rng = np.random.default_rng(len(name))
    _, data = _ball_data(M, rng, 300, r)
    res = pmd.frechet_mean(M, data)
    assert res.converged and res.method == "gradient"
    # recompute the gradient independently of the result's own report
    g = M.log(res.mean, data).mean(axis=0)
    spread = np.sqrt(np.mean(M.dist(res.mean, data) ** 2))
    assert M.norm(res.mean, g) <= 1e-10 * spread
    assert res.grad_norm == pytest.approx(float(M.norm(res.mean, g)), rel=1e-6, abs=1e-15)
    # and it is a minimum: moving in any direction raises the energy
    energy = np.sum(M.dist(res.mean, data) ** 2)
    for c in rng.normal(size=(5, M.dim)) * 1e-3:
        assert np.sum(M.dist(M.exp_coords(res.mean, c), data) ** 2) > energy


def test_spd_two_point_closed_form_and_gradient_agree():
    P = pmd.SPD(k=2)
    a, b = np.diag([np.e**2, 1.0]), np.eye(2)
    res = pmd.frechet_mean(P, np.stack([a, b]))
    assert res.method == "closed-form"
    np.testing.assert_allclose(res.mean, np.diag([np.e, 1.0]), atol=1e-13)
    # three points, two equal: the weighted geodesic point at 2/3, found iteratively
    res3 = pmd.frechet_mean(P, np.stack([a, b, b]))
    assert res3.method == "gradient"
    np.testing.assert_allclose(res3.mean, np.diag([np.e ** (2 / 3), 1.0]), atol=1e-10)
    # weights reproduce the same point
    resw = pmd.frechet_mean(P, np.stack([a, b]), weights=[1.0, 2.0])
    np.testing.assert_allclose(resw.mean, res3.mean, atol=1e-10)


def test_single_point_and_euclidean_closed_forms():
    S = pmd.Sphere(dim=2)
    p = np.array([[0.0, 0.6, 0.8]])
    res = pmd.frechet_mean(S, p)
    assert res.iterations == 0 and res.grad_norm == 0.0
    np.testing.assert_allclose(res.mean, p[0])
    E = pmd.Euclidean(dim=3)
    x = np.random.default_rng(0).normal(size=(20, 3))
    np.testing.assert_allclose(pmd.frechet_mean(E, x).mean, x.mean(axis=0))


def test_rotating_the_data_rotates_the_mean():
    M, r = CASES["S7"]
    rng = np.random.default_rng(5)
    _, data = _ball_data(M, rng, 100, r)
    q = special_ortho_group.rvs(8, random_state=5)
    m1 = pmd.frechet_mean(M, data).mean
    m2 = pmd.frechet_mean(M, data @ q.T).mean
    np.testing.assert_allclose(m2, q @ m1, atol=1e-9)


def test_spd_mean_is_congruence_equivariant():
    M, r = CASES["SPD4"]
    rng = np.random.default_rng(6)
    _, data = _ball_data(M, rng, 100, r)
    a = _expm_sym(rng.normal(size=(4, 4)) * 0.3) @ special_ortho_group.rvs(4, random_state=6)
    m1 = pmd.frechet_mean(M, data).mean
    m2 = pmd.frechet_mean(M, a @ data @ a.T).mean
    np.testing.assert_allclose(m2, a @ m1 @ a.T, rtol=1e-8, atol=1e-9)


def test_shape_mean_ignores_similarity_transforms_of_each_record():
    M, r = CASES["Kendall5"]
    rng = np.random.default_rng(7)
    _, data = _ball_data(M, rng, 60, r)
    th = rng.uniform(0, 2 * np.pi, 60)
    rot = np.stack(
        [np.stack([np.cos(th), -np.sin(th)], -1), np.stack([np.sin(th), np.cos(th)], -1)], -2
    )
    moved = rng.uniform(0.5, 5, (60, 1, 1)) * np.einsum("nij,nkj->nki", rot, data)
    moved = moved + rng.normal(size=(60, 1, 2))
    m1 = pmd.frechet_mean(M, data).mean
    m2 = pmd.frechet_mean(M, moved).mean
    assert M.dist(m1, m2) < 1e-9


def test_supplement_algorithm_matches_default_to_its_tolerance():
    M, r = CASES["S2"]
    _, data = _ball_data(M, np.random.default_rng(8), 200, r)
    ref = pmd.frechet_mean(M, data).mean
    sup = pmd.frechet_mean(M, data, method="supplement")
    assert sup.method == "supplement" and sup.converged
    assert 0 < sup.iterations <= 500
    # step 0.5 halves the error each step; stopping at moves < 1e-5 leaves about that much
    assert M.dist(ref, sup.mean) < 2e-5


def test_non_convergence_warns_and_says_so():
    M, r = CASES["S2"]
    _, data = _ball_data(M, np.random.default_rng(9), 50, r)
    with pytest.warns(ConvergenceWarning, match="did not converge"):
        res = pmd.frechet_mean(M, data, max_iter=1, init=data[1])
    assert not res.converged and res.grad_norm > 1e-10


def test_no_warning_when_converged():
    M, r = CASES["SPD2"]
    _, data = _ball_data(M, np.random.default_rng(10), 50, r)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        pmd.frechet_mean(M, data)


@pytest.mark.parametrize(
    ("data", "kwargs", "exc", "msg"),
    [
        (np.zeros((0, 3)), {}, ValueError, "empty"),
        (np.array([[0.0, 0, 2.0]]), {}, ValueError, "not on the sphere"),
        (np.array([[0.0, np.nan, 1.0]]), {}, ValueError, "NaN"),
        (np.array([0.0, 0, 1.0]), {}, ValueError, r"shape \(n, 3\)"),
        (np.array([[0.0, 0, 1.0]] * 2), {"weights": [1.0]}, ValueError, "weights must have"),
        (np.array([[0.0, 0, 1.0]] * 2), {"weights": [1.0, -1.0]}, ValueError, "non-negative"),
        (np.array([[0.0, 0, 1.0]] * 2), {"method": "newton"}, ValueError, "method must be"),
        (np.array([[0.0, 0, 1.0]] * 2), {"max_iter": 0}, ValueError, "max_iter"),
    ],
)
def test_bad_input(data, kwargs, exc, msg):
    with pytest.raises(exc, match=msg):
        pmd.frechet_mean(pmd.Sphere(dim=2), data, **kwargs)


@pytest.mark.parametrize("name", ["S2", "S7", "SPD2", "SPD4"])
def test_fast_frechet_gradients_match_the_generic_definition(name):
    # Sphere and SPD override frechet_gradient for speed; the base class's
    # log-then-average definition is the oracle.
    from pymc_manidp.geometry.base import ManifoldBase

    M, r = CASES[name]
    rng = np.random.default_rng(11)
    m0, data = _ball_data(M, rng, 40, r)
    w = rng.uniform(0.1, 1.0, 40)
    w /= w.sum()
    g_fast, e_fast = M.frechet_gradient(m0, data, w)
    g_ref, e_ref = ManifoldBase.frechet_gradient(M, m0, data, w)
    np.testing.assert_allclose(g_fast, g_ref, atol=1e-12)
    assert e_fast == pytest.approx(e_ref, rel=1e-12)


@pytest.mark.parametrize("name", ["S2", "SPD2", "Kendall5"])
def test_tightly_clustered_data_converge(name):
    # Review regression: tol * spread fell below the gradient's rounding noise.
    M, _ = CASES[name]
    rng = np.random.default_rng(12)
    m0, data = _ball_data(M, rng, 50, 1e-9)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        res = pmd.frechet_mean(M, data)
    assert res.converged
    assert M.dist(res.mean, m0) < 1e-8


@pytest.mark.parametrize("name", ["S2", "S7", "SPD2", "SPD4", "Kendall5"])
def test_stack_frechet_gradients_match_the_single_one(name):
    # Sphere and SPD write stack_frechet_gradient with their own fast route; the
    # oracle is frechet_gradient (equal weights) data set by data set
    M, r = CASES[name]
    rng = np.random.default_rng(13)
    sets = [_ball_data(M, rng, 30, r) for _ in range(4)]
    x = np.stack([m0 for m0, _ in sets])
    stack = np.stack([d for _, d in sets])
    x = M.validate(M.exp_coords(x, 0.1 * r * rng.normal(size=(4, M.dim)) / np.sqrt(M.dim)))
    g, e = M.stack_frechet_gradient(x, stack)
    for j in range(4):
        g1, e1 = M.frechet_gradient(x[j], stack[j], np.full(30, 1 / 30))
        np.testing.assert_allclose(g[j], g1, atol=1e-12)
        assert e[j] == pytest.approx(e1, rel=1e-12)


@pytest.mark.parametrize("name", ["S2", "S7", "SPD2", "SPD4", "Kendall5"])
def test_frechet_means_of_a_stack_match_frechet_mean(name):
    """Each row's mean is the single mean to the tolerance: the oracle is
    frechet_mean's first-order optimality (|grad F| small) and agreement with it."""
    from pymc_manidp.stats.frechet import frechet_means

    M, r = CASES[name]
    rng = np.random.default_rng(14)
    stack = np.stack([_ball_data(M, rng, 50, r)[1] for _ in range(5)])
    res = frechet_means(M, stack, tol=1e-10)
    assert res.means.shape == (5, *M.point_shape) and res.converged.all()
    for j in range(5):
        single = pmd.frechet_mean(M, stack[j], tol=1e-10)
        assert M.dist(res.means[j], single.mean) < 1e-8
        g, _ = M.frechet_gradient(res.means[j], stack[j], np.full(50, 1 / 50))
        assert float(M.norm(res.means[j], g)) == pytest.approx(res.grad_norms[j], abs=1e-12)
        assert res.grad_norms[j] <= 1e-10 * r + 1e-14


def test_frechet_means_flag_the_rows_that_do_not_converge():
    from pymc_manidp.stats.frechet import frechet_means

    M, r = CASES["S2"]
    rng = np.random.default_rng(15)
    stack = np.stack([_ball_data(M, rng, 50, r)[1] for _ in range(3)])
    stack[0] = stack[0, :1]  # all records equal: the start is the mean, no step needed
    with pytest.warns(pmd.stats.frechet.ConvergenceWarning, match=r"2 of 3 .* row 1"):
        res = frechet_means(M, stack, tol=1e-10, max_iter=1)
    assert res.converged.tolist() == [True, False, False]
    assert res.iterations.tolist() == [0, 1, 1]
    with pytest.raises(ValueError, match=r"shape \(R, n, 3\)"):
        frechet_means(M, stack[0])


@pytest.mark.parametrize(
    ("M", "center", "r"),
    [
        (pmd.Rotations(), np.eye(3), 0.8),
        (pmd.Hyperbolic(dim=3), np.eye(4)[0], 1.5),
        (pmd.Euclidean(dim=2), np.zeros(2), 1.0),
    ],
    ids=["SO(3)", "H3", "R2"],
)
def test_frechet_means_on_the_other_spaces(M, center, r):
    # their stack gradient is the generic log-then-average one; the oracle is
    # frechet_mean data set by data set (the closed form on R2)
    from pymc_manidp.stats.frechet import frechet_means

    rng = np.random.default_rng(16)
    c = rng.normal(size=(3 * 40, M.dim))
    c *= r * rng.uniform(0, 1, (len(c), 1)) / np.linalg.norm(c, axis=1, keepdims=True)
    feet = np.broadcast_to(center, (len(c), *center.shape))
    stack = M.validate(M.exp_coords(feet, c)).reshape((3, 40, *M.point_shape))
    res = frechet_means(M, stack, tol=1e-10)
    assert res.converged.all()
    for j in range(3):
        assert M.dist(res.means[j], pmd.frechet_mean(M, stack[j], tol=1e-10).mean) < 1e-9


def _numpy_spd_frechet_gradient(self, x, data, weights):
    """The SPD Fréchet gradient before the fused kernel (issue 26 item 4): NumPy's
    batched ``eigh`` of the whitened data, logs summed, congruence back. The oracle."""
    w, u = np.linalg.eigh(np.linalg.inv(np.linalg.cholesky(x)) @ data @ np.linalg.inv(
        np.linalg.cholesky(x)).T)  # fmt: skip
    lw = np.log(w)
    white = np.einsum("n,nij,nj,nkj->ik", weights, u, lw, u)
    c = np.linalg.cholesky(x)
    return c @ white @ c.T, 0.5 * float(np.sum(weights * np.sum(lw**2, axis=-1)))


@pytest.mark.parametrize("k", [2, 3, 5, 8, 9])
def test_fused_spd_gradient_matches_the_numpy_route(k):
    # the fused numba kernel (closed form at k = 2, vectorized Jacobi for 3 <= k <= 8,
    # LAPACK beyond) against an independent route: Cholesky whitening (another square
    # root of x, same gradient) and NumPy's eigh, at a footpoint away from the data
    P = pmd.SPD(k=k)
    rng = np.random.default_rng(100 + k)
    data = P.validate(_expm_sym(0.4 * rng.normal(size=(150, k, k))))
    x = P.validate(_expm_sym(0.3 * rng.normal(size=(k, k))))
    w = rng.uniform(0.1, 1.0, len(data))
    w /= w.sum()
    g, e = P.frechet_gradient(x, data, w)
    g_ref, e_ref = _numpy_spd_frechet_gradient(P, x, data, w)
    scale = np.sqrt(2 * e_ref)
    assert P.norm(x, g - g_ref) <= 1e-12 * scale
    assert e == pytest.approx(e_ref, rel=1e-12)
    # a wrong variant is caught: dropping the weights moves the gradient far beyond that
    g_bad, _ = P.frechet_gradient(x, data, np.full(len(data), 1 / len(data)))
    assert P.norm(x, g_bad - g_ref) > 1e-6 * scale


@pytest.mark.parametrize("k", [2, 3, 8])
def test_frechet_mean_with_the_fused_kernel_is_the_old_mean(k, monkeypatch):
    # the same descent through the old NumPy gradient: the same mean to 1e-10, both
    # converged; and with too few iterations both warn the same ConvergenceWarning
    P = pmd.SPD(k=k)
    rng = np.random.default_rng(200 + k)
    data = P.validate(_expm_sym(0.3 * rng.normal(size=(400, k, k))))
    new = pmd.frechet_mean(P, data)
    with pytest.warns(ConvergenceWarning, match="did not converge in 1 iterations") as rec_new:
        pmd.frechet_mean(P, data, max_iter=1)
    monkeypatch.setattr(pmd.SPD, "frechet_gradient", _numpy_spd_frechet_gradient)
    old = pmd.frechet_mean(P, data)
    with pytest.warns(ConvergenceWarning, match="did not converge in 1 iterations") as rec_old:
        pmd.frechet_mean(P, data, max_iter=1)
    assert new.converged and old.converged
    assert P.dist(new.mean, old.mean) <= 1e-10
    assert str(rec_new[0].message).split(":")[0] == str(rec_old[0].message).split(":")[0]


def _numpy_sphere_frechet_gradient(self, x, data, weights):
    """The sphere's Fréchet gradient before the fused kernel: the oracle's route."""
    c = (data @ x) / self.radius**2
    u = data - c[:, None] * x
    su = np.sqrt(np.sum(u * u, axis=-1)) / self.radius
    theta = np.arctan2(su, c)
    fac = np.where(su > 0, theta / np.where(su > 0, su, 1.0), 1.0)
    return (weights * fac) @ u, 0.5 * float(np.sum(weights * (self.radius * theta) ** 2))


@pytest.mark.parametrize(
    "M", [pmd.Sphere(dim=2), pmd.Sphere(dim=4, radius=2.0), pmd.SPD(k=2), pmd.SPD(k=3)]
)
def test_newton_statistic_gives_the_energy_hessian(M):
    # the Newton step H^{-1} g against a Hessian of F by finite differences of the
    # gradient (covariant: the connection's term included) at a point away from the
    # mean: exact on spheres, to second order in the spread on SPD (z coth z truncated
    # after z^2/3); the Karcher step (H = I) is at least 5 times farther off
    rng = np.random.default_rng(7)
    r = 1.5 if isinstance(M, pmd.SPD) else 0.6
    m0, data = _ball_data(M, rng, 60, r)
    x = M.exp_coords(m0, 0.05 * rng.normal(size=M.dim))
    w = np.full(len(data), 1 / len(data))
    g, e, h = M.frechet_gradient_hessian(x, data, w)
    g_ref, e_ref = M.frechet_gradient(x, data, w)
    np.testing.assert_allclose(g, g_ref, atol=1e-14)
    assert e == pytest.approx(e_ref, rel=1e-13)
    v = M.newton_direction(x, g, h)
    basis = M.tangent_basis(x)
    step = 1e-5
    cols = []
    for b in basis:  # -d(g)/d(coords) along each frame vector (g is minus the gradient)
        gp, _ = M.frechet_gradient(M.exp(x, step * b), data, w)
        gm, _ = M.frechet_gradient(M.exp(x, -step * b), data, w)
        dg = (gp - gm) / (2 * step)
        if isinstance(M, pmd.SPD):  # the affine-invariant connection's Christoffel term
            xi = np.linalg.inv(x)
            dg = dg - 0.5 * (b @ xi @ g + g @ xi @ b)
        # on spheres the covariant derivative is the tangent part: to_coords projects
        cols.append(-M.to_coords(x, dg))
    hess = np.array(cols).T
    hess = 0.5 * (hess + hess.T)
    newton = np.linalg.solve(hess, M.to_coords(x, g))
    # SPD at spread 1.5: the truncation measured 9e-4 (k = 2) and 2.4e-3 (k = 3)
    tol = 1e-6 if isinstance(M, pmd.Sphere) else 5e-3
    err = np.linalg.norm(M.to_coords(x, v) - newton) / np.linalg.norm(newton)
    assert err < tol
    karcher = np.linalg.norm(M.to_coords(x, g) - newton) / np.linalg.norm(newton)
    assert karcher > 5 * err


@pytest.mark.parametrize("M", [pmd.Sphere(dim=2), pmd.Sphere(dim=5, radius=3.0)])
def test_sphere_newton_mean_is_the_old_mean(M, monkeypatch):
    # the fused kernel's Newton descent against the old NumPy Karcher descent: the
    # same mean to 1e-10, both converged; too few iterations warn in both
    rng = np.random.default_rng(31)
    _, data = _ball_data(M, rng, 2000, 0.9 * M.radius)
    new = pmd.frechet_mean(M, data, tol=1e-12)
    monkeypatch.setattr(type(M), "frechet_newton", False)
    monkeypatch.setattr(type(M), "frechet_gradient", _numpy_sphere_frechet_gradient)
    old = pmd.frechet_mean(M, data, tol=1e-12)
    assert new.converged and old.converged
    assert new.iterations < old.iterations
    assert M.dist(new.mean, old.mean) <= 1e-10 * M.radius
    with pytest.warns(ConvergenceWarning, match="did not converge in 1 iterations"):
        pmd.frechet_mean(M, data, max_iter=1, tol=1e-15, init=data[0])
