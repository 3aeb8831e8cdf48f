"""Geodesic regression (issue 41): the closed-form gradients, the fit, the sensitivity.

Oracles, each written here apart from the package:

- the energy ``E(p, v) = (1/2n) sum rho^2(Exp_p(x_i v), y_i)`` from the manifold's own
  ``exp`` and ``dist``, and its central finite differences along a footpoint direction
  with the slope carried by a transport written here (the ambient projection on the
  embedded spaces, whose Levi-Civita connection it is, so it agrees with parallel
  transport to first order; the congruence ``E v E^T`` on SPD, where projection is the
  identity and not parallel): docs/regression.md, "Gradients";
- ordinary least squares by ``numpy.linalg.lstsq`` on ``Euclidean``;
- noise-free data ``y_i = Exp_p(x_i v)``: the fit returns ``(p, v)``;
- the sensitivity bound against an adversarial search over neighbouring data sets.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

import pymc_manidp as pmd
from pymc_manidp.geometry.jacobi import regression_terms
from pymc_manidp.stats.regression import (
    geodesic_regression,
    regression_gradient,
    regression_sensitivity,
)

SPACES = {
    "S2": pmd.Sphere(dim=2),
    "S3(R=2)": pmd.Sphere(dim=3, radius=2.0),
    "H2": pmd.Hyperbolic(dim=2),
    "SPD2": pmd.SPD(k=2),
    "SPD3": pmd.SPD(k=3),
    "Kendall4": pmd.KendallShape(k_landmarks=4),
    "Kendall3": pmd.KendallShape(k_landmarks=3),
    "SO3": pmd.Rotations(),
    "R2": pmd.Euclidean(dim=2),
}


def base_point(M):
    if isinstance(M, (pmd.SPD, pmd.Rotations)):
        return np.eye(M.point_shape[0])
    if hasattr(M, "generic_point"):
        return M.validate(M.generic_point)
    return np.zeros(M.point_shape)


def tangent(M, p, rng, scale=1.0):
    basis = M.tangent_basis(p)
    return np.tensordot(scale * rng.standard_normal(len(basis)), basis, 1)


def energy(M, p, v, x, y):
    """E written again: the manifold's exp and dist, one record at a time."""
    yhat = np.stack([M.exp(p, xi * v) for xi in x])
    return 0.5 * float(np.mean(M.dist(yhat, y) ** 2))


def carry(M, p, w, v):
    """The slope at ``Exp_p(w)``: first-order parallel transport, written here."""
    q = M.exp(p, w)
    if isinstance(M, pmd.SPD):
        mu, U = np.linalg.eigh(p)
        root, iroot = (U * np.sqrt(mu)) @ U.T, (U / np.sqrt(mu)) @ U.T
        lam, Q = np.linalg.eigh(iroot @ w @ iroot)
        E = root @ (Q * np.exp(lam / 2)) @ Q.T @ iroot
        return q, E @ v @ E.T
    return q, M.to_tangent(q, v)


def problem(M, seed, n=7):
    rng = np.random.default_rng(seed)
    m = base_point(M)
    p = M.exp(m, tangent(M, m, rng, 0.15))
    v = tangent(M, p, rng, 0.3)
    x = rng.uniform(-1, 1, n)
    y = np.stack([M.exp(m, tangent(M, m, rng, 0.2)) for _ in range(n)])
    return rng, p, v, x, y


@pytest.mark.parametrize("name", sorted(SPACES))
@pytest.mark.parametrize("seed", [0, 1])
def test_gradients_match_finite_differences(name, seed):
    M = SPACES[name]
    rng, p, v, x, y = problem(M, seed)
    E, gp, gv = regression_gradient(M, p, v, x, y)
    assert E == pytest.approx(energy(M, p, v, x, y), rel=1e-12, abs=1e-15)
    h = 1e-5
    for _ in range(3):
        w, u = tangent(M, p, rng), tangent(M, p, rng)
        plus, minus = carry(M, p, h * w, v), carry(M, p, -h * w, v)
        fd_p = (energy(M, *plus, x, y) - energy(M, *minus, x, y)) / (2 * h)
        fd_v = (energy(M, p, v + h * u, x, y) - energy(M, p, v - h * u, x, y)) / (2 * h)
        assert float(M.inner(p, gp, w)) == pytest.approx(fd_p, rel=1e-6, abs=1e-8)
        assert float(M.inner(p, gv, u)) == pytest.approx(fd_v, rel=1e-6, abs=1e-8)


def test_finite_differences_catch_a_dropped_jacobi_factor():
    # the pure-transport "gradient" of the authors' first code (notes, 6-j): the cos
    # factor dropped; the check above must see it
    M = SPACES["S2"]
    rng, p, v, x, y = problem(M, 3)
    v = 4 * v  # long predictions: cos(s) far from 1
    _, gp, _ = regression_gradient(M, p, v, x, y)
    h = 1e-5
    w = tangent(M, p, rng)
    fd = (energy(M, *carry(M, p, h * w, v), x, y) - energy(M, *carry(M, p, -h * w, v), x, y)) / (
        2 * h
    )
    yhat = M.exp(p, x[:, None] * v)
    eps = M.log(yhat, y)
    # parallel transport back along the prediction geodesic, no Jacobi factor
    naive = -np.mean([M.to_tangent(p, e) for e in eps], axis=0)
    assert float(M.inner(p, gp, w)) == pytest.approx(fd, rel=1e-6)
    assert abs(float(M.inner(p, naive, w)) - fd) > 1e-3


def test_euclidean_fit_is_ordinary_least_squares():
    rng = np.random.default_rng(5)
    M = pmd.Euclidean(dim=3)
    x = rng.uniform(0, 3, 40)  # not centred: p and v are coupled
    y = 0.3 + np.outer(x, [1.0, -2.0, 0.5]) + rng.normal(0, 0.4, (40, 3))
    fit = geodesic_regression(M, x, y)
    design = np.stack([np.ones_like(x), x], axis=1)
    coef, *_ = np.linalg.lstsq(design, y, rcond=None)
    assert fit.converged
    np.testing.assert_allclose(fit.footpoint, coef[0], atol=1e-12)
    np.testing.assert_allclose(fit.slope, coef[1], atol=1e-12)
    resid = y - design @ coef
    assert fit.energy == pytest.approx(0.5 * np.mean(np.sum(resid**2, axis=1)), rel=1e-12)


@pytest.mark.parametrize("name", ["S2", "H2", "SPD2", "Kendall4", "SO3", "R2", "S3(R=2)"])
def test_noise_free_data_are_recovered_exactly(name):
    M = SPACES[name]
    rng = np.random.default_rng(11)
    m = base_point(M)
    p = M.exp(m, tangent(M, m, rng, 0.2))
    v = tangent(M, p, rng, 0.3)
    x = np.linspace(-1, 1, 12) + 0.4
    y = np.stack([M.exp(p, xi * v) for xi in x])
    fit = geodesic_regression(M, x, y)
    assert fit.converged
    assert fit.energy < 1e-20
    assert float(M.dist(fit.footpoint, p)) < 1e-9
    np.testing.assert_allclose(fit.slope, v, atol=1e-9)


@pytest.mark.parametrize("name", ["S2", "H2", "SPD2", "Kendall4", "SO3"])
def test_noisy_fit_is_a_stationary_point(name):
    M = SPACES[name]
    rng, _, _, x, y = problem(M, 2, n=15)
    fit = geodesic_regression(M, x, y)
    assert fit.converged
    E, gp, gv = regression_gradient(M, fit.footpoint, fit.slope, x, y)
    g = math.sqrt(float(M.inner(fit.footpoint, gp, gp) + M.inner(fit.footpoint, gv, gv)))
    assert g <= 1e-9
    # a minimum, not a saddle: random perturbations raise E (written-here energy)
    for _ in range(5):
        w, u = tangent(M, fit.footpoint, rng, 1e-3), tangent(M, fit.footpoint, rng, 1e-3)
        q, s = carry(M, fit.footpoint, w, fit.slope)
        assert energy(M, q, s + u, x, y) > E


def test_not_converging_warns_and_says_so():
    M = SPACES["Kendall4"]
    _, _, _, x, y = problem(M, 2, n=15)
    with pytest.warns(pmd.stats.ConvergenceWarning, match="did not converge in 1 iterations"):
        fit = geodesic_regression(M, x, y, max_iter=1)
    assert not fit.converged and fit.iterations == 1


def test_init_is_used_and_checked():
    M = SPACES["S2"]
    _, _, v, x, y = problem(M, 4)
    fit = geodesic_regression(M, x, y)
    again = geodesic_regression(M, x, y, init=(fit.footpoint, fit.slope))
    assert again.iterations == 0 and again.converged
    with pytest.raises(ValueError, match="trailing shape"):
        geodesic_regression(M, x, y, init=(np.ones(4), v))


def test_the_papers_sphere_design_is_recovered():
    S = pmd.Sphere(dim=2)
    p, v = np.array([1.0, 0, 0]), np.array([0, np.pi / 4, 0])
    x = np.arange(-1, 1, 0.1)
    fit = geodesic_regression(S, x, S.exp(p, x[:, None] * v))
    np.testing.assert_allclose(fit.footpoint, p, atol=1e-12)
    np.testing.assert_allclose(fit.slope, v, atol=1e-12)


BAD_COVARIATES = [
    (np.array([1.0, np.nan, 2.0]), ValueError, "NaN or infinite"),
    (np.array([1.0, np.inf, 2.0]), ValueError, "NaN or infinite"),
    (np.ones(3), ValueError, "single value"),
    (np.array([1 / 3, 0.3333333333333333, math.nextafter(1 / 3, 1)]), ValueError, "barely vary"),
    (np.array([0.0, 1.0, 1e200]), ValueError, "rescale them"),
    (np.array([[1.0], [2.0], [3.0]]), ValueError, "1-d array"),
    (np.array([1.0, 2.0]), ValueError, "one row per record"),
    (np.array(["a", "b", "c"]), TypeError, "real numbers"),
    (np.array([True, False, True]), TypeError, "real numbers"),
]


@pytest.mark.parametrize(("x", "err", "match"), BAD_COVARIATES)
def test_bad_covariates_are_refused_by_message(x, err, match):
    S = pmd.Sphere(dim=2)
    y = S.exp(np.array([0, 0, 1.0]), np.array([[0.1, 0, 0], [0, 0.1, 0], [0.1, 0.1, 0]]))
    with pytest.raises(err, match=match):
        geodesic_regression(S, x, y)


# the two inputs CI's run found: a spread that overflows (np.ptp) and (1 + G11)^2 that does
@example([1 / 3, 1e308, -7.976931348623158e307])
@example([1 / 3, 1 / 3, 2.0055778167358104e77])
@given(
    st.lists(
        st.one_of(
            st.sampled_from([1 / 3, 0.3333333333333333, math.nextafter(1 / 3, 1), 5e-324]),
            st.floats(allow_nan=True, allow_infinity=True),
            st.sampled_from([1e308, -1e308, 0.0]),
        ),
        min_size=3,
        max_size=3,
    )
)
def test_adversarial_covariates_fit_or_refuse(xs):
    # the contract: a finite fit, or a ValueError naming the problem; never NaN
    M = pmd.Euclidean(dim=1)
    y = np.array([[0.0], [0.5], [1.0]])
    try:
        fit = geodesic_regression(M, np.array(xs), y)
    except ValueError as err:
        assert any(
            w in str(err) for w in ("NaN or infinite", "single value", "barely vary", "|x| <=")
        )
        return
    assert np.isfinite(fit.energy)
    assert np.all(np.isfinite(fit.footpoint)) or not fit.converged


def test_responses_off_the_manifold_are_refused():
    S = pmd.Sphere(dim=2)
    with pytest.raises(ValueError, match="not on the sphere"):
        geodesic_regression(S, [0.0, 1.0, 2.0], np.ones((3, 3)))


def test_a_space_without_jacobi_fields_is_refused():
    class Other(pmd.Sphere):
        pass

    with pytest.raises(ValueError, match="Jacobi spectrum"):
        geodesic_regression(Other(dim=2), [0.0, 1.0], np.eye(3)[:2])


# --- the sensitivity --------------------------------------------------------------------


def test_sensitivity_closed_forms():
    n = 20
    # Hadamard: residual differences at most 2r; H^2 factors cosh L, sinh L / L
    dp, dv = regression_sensitivity(
        pmd.Hyperbolic(dim=2), n, radius=0.5, covariate_bound=2.0, slope_bound=0.5
    )
    assert dp == pytest.approx(2 * 0.5 * math.cosh(1.0) / n)
    assert dv == pytest.approx(2 * 0.5 * 2.0 * math.sinh(1.0) / n)
    # SPD: kappa_min = -1/2
    dp, dv = regression_sensitivity(
        pmd.SPD(k=2), n, radius=0.5, covariate_bound=1.0, slope_bound=1.0
    )
    a = 1 / math.sqrt(2)
    assert (dp, dv) == pytest.approx((math.cosh(a) / n, math.sinh(a) / a / n))
    # positive curvature: residual moves 2 min(tau, r f(tau)), tau = r + R + L, factors 1
    dp, dv = regression_sensitivity(
        pmd.Sphere(dim=2), n, radius=0.5, covariate_bound=2.0, slope_bound=0.25,
        footpoint_radius=0.3,
    )  # fmt: skip
    s = 2 * 0.5 * 1.3 / math.sin(1.3)  # r f(tau) = 0.536 < tau = 1.3
    assert (dp, dv) == pytest.approx((s / n, s * 2.0 / n))
    # far from the ball the Lipschitz constant exceeds tau/r: 2 tau wins
    dp, _ = regression_sensitivity(
        pmd.Sphere(dim=2), n, radius=0.7, covariate_bound=1.0, slope_bound=1.2,
        footpoint_radius=1.2,
    )  # fmt: skip
    assert 0.7 * 3.1 / math.sin(3.1) > 3.1
    assert dp == pytest.approx(2 * 3.1 / n)
    # Kendall: kappa_max = 4
    dp, _ = regression_sensitivity(
        pmd.KendallShape(k_landmarks=4), n, radius=0.2, covariate_bound=1.0,
        slope_bound=0.3, footpoint_radius=0.2,
    )  # fmt: skip
    assert dp == pytest.approx(2 * 0.2 * 1.4 / math.sin(1.4) / n)
    with pytest.raises(ValueError, match="footpoint_radius"):
        regression_sensitivity(
            pmd.Sphere(dim=2), n, radius=0.5, covariate_bound=1.0, slope_bound=0.25
        )


def _ball_edge(M, m, r, rng, k):
    """``k`` points on the edge of ``B_r(m)`` and the center."""
    dirs = np.stack([tangent(M, m, rng) for _ in range(k)])
    norms = np.sqrt(np.array([float(M.inner(m, d, d)) for d in dirs]))
    pts = np.stack([M.exp(m, r * d / s) for d, s in zip(dirs, norms, strict=True)])
    return np.concatenate([pts, m[None]])


def _largest_change(M, m, r, X, V, R, rng, trials, aimed):
    """The largest change of (grad_p, grad_v) (times n) when one response of the ball's
    edge is replaced by another, over random (p, v) of the domain and both signs of x."""
    worst_p = worst_v = 0.0
    for t in range(trials):
        if aimed and t % 2 == 0:
            # predictions aimed at the ball: the residuals are longest in angle there
            q = M.exp(m, tangent(M, m, rng, 0.1 * r))
            e = tangent(M, q, rng)
            e = e / math.sqrt(float(M.inner(q, e, e)))
            p = M.exp(q, -X * V * e)
            if float(M.dist(m, p)) > R:
                continue
            v = M.log(p, q) / X
        else:
            p = M.exp(m, tangent(M, m, rng))
            if float(M.dist(m, p)) > R:
                p = M.exp(m, M.log(m, p) * (R * rng.uniform() / float(M.dist(m, p))))
            v = tangent(M, p, rng)
            v = v * (V * rng.uniform(0.8, 1.0) / math.sqrt(float(M.inner(p, v, v))))
        y = _ball_edge(M, m, r, rng, 24)
        for sign in (1.0, -1.0):
            x = np.full(len(y), sign * X)
            _, gp, gv = regression_terms(M, p, v, x, y)
            for g, which in ((gp, "p"), (gv, "v")):
                diff = g[:, None] - g[None, :]
                ip = M.inner(p, diff, diff)
                change = float(np.sqrt(np.max(ip)))
                if which == "p":
                    worst_p = max(worst_p, change)
                else:
                    worst_v = max(worst_v, change)
    return worst_p, worst_v


@pytest.mark.parametrize(
    ("name", "r", "X", "V", "R"),
    [
        ("S2", 0.7, 1.0, 0.1, 0.05),
        ("H2", 0.5, 1.0, 1.0, 1.5),
        ("SPD2", 0.5, 1.0, 1.0, 1.5),
        ("Kendall4", 0.3, 1.0, 0.3, 0.1),
        ("SO3", 0.5, 1.0, 0.8, 0.5),
    ],
)
def test_sensitivity_holds_and_is_nearly_attained(name, r, X, V, R):
    # adversarial search (seeded): 300 (p, v) of the domain, 25 responses of the ball's
    # edge and its center each, every pair of them as the replaced record, x = +-X
    M = SPACES[name]
    m = base_point(M)
    n = 10
    dp, dv = regression_sensitivity(
        M, n, radius=r, covariate_bound=X, slope_bound=V, footpoint_radius=R
    )
    rng = np.random.default_rng(41)
    worst_p, worst_v = _largest_change(M, m, r, X, V, R, rng, 300, aimed=name != "S2")
    assert worst_p / n <= dp * (1 + 1e-9)
    assert worst_v / n <= dv * (1 + 1e-9)
    assert worst_p / n >= dp / 2
    assert worst_v / n >= dv / 2


# --- Dask passes ------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["S2", "SPD2", "Kendall4"])
def test_the_fit_from_a_chunked_dask_array_equals_the_numpy_fit(name):
    """The same fit (to 1e-12) whether the responses are in memory or a chunked Dask
    array read in passes on the local scheduler; the passes are counted, so a fit that
    gathered the array instead (no pass) fails, and so does one that skipped the Dask
    route's chunk sums (a chunk left out changes the fit by far more than 1e-12)."""
    da = pytest.importorskip("dask.array")
    import dask

    from pymc_manidp.stats import reductions

    M = SPACES[name]
    rng, p, v, x, _ = problem(M, 3, n=40)
    line = [M.exp(p, xi * v) for xi in x]
    y = M.validate(np.stack([M.exp(q, tangent(M, q, rng, 0.05)) for q in line]))
    ref = geodesic_regression(M, x, y)
    lazy = da.from_array(y, chunks=(7, *M.point_shape))
    before = reductions.pass_count()
    with dask.config.set(scheduler="threads"):
        got = geodesic_regression(M, x, lazy)
        # the covariates may be a Dask array too (public: read into memory)
        got2 = geodesic_regression(M, da.from_array(x, chunks=9), lazy)
    assert reductions.pass_count() - before >= 2 * (got.iterations + 1)
    assert ref.converged and got.converged and got.iterations == ref.iterations
    for fit in (got, got2):
        np.testing.assert_allclose(fit.footpoint, ref.footpoint, rtol=0, atol=1e-12)
        np.testing.assert_allclose(fit.slope, ref.slope, rtol=0, atol=1e-12)
        assert fit.energy == pytest.approx(ref.energy, rel=1e-12)
    # a Dask array of the wrong rows for the covariates is refused before any pass
    with pytest.raises(ValueError, match="one row per record"):
        geodesic_regression(M, x[:-1], lazy)


_init_coordinate = st.sampled_from(
    [0.0, 1.0, 1 / 3, 5e-324, 1e308, 10**400, math.nan, True, "0", None]
)
_init_vector = st.one_of(
    st.lists(_init_coordinate, min_size=0, max_size=4), _init_coordinate, st.just([0.0, 0.0, 1.0])
)


@example(init=([10**400, 0, 1.0], [0.0, 0.0, 0.0]))  # was an OverflowError
@example(init=([0.0, 0.0, 1.0], [10**400, 0, 0]))
@example(init=5)  # was "cannot unpack non-iterable int"
@given(init=st.one_of(st.tuples(_init_vector, _init_vector), _init_coordinate, st.text(max_size=2)))
def test_init_contract(init):
    """``init``: a fit, or a TypeError/ValueError naming init (or the point); never an
    OverflowError, an unpacking error or a bool read as a coordinate."""
    S = pmd.Sphere(dim=2)
    x = np.linspace(-1.0, 1.0, 8)
    y = S.exp_coords(np.array([0.0, 0.0, 1.0]), np.stack([0.1 * x, 0.05 * np.ones(8)], axis=1))
    try:
        fit = geodesic_regression(S, x, y, init=init)
    except TypeError as err:
        assert "init" in str(err)
        return
    except ValueError as err:
        assert any(w in str(err) for w in ("init", "points are not on the sphere"))
        return
    assert init is None or np.all(np.isfinite(np.asarray(init[1], float)))
    assert np.all(np.isfinite(fit.footpoint)) and np.all(np.isfinite(fit.slope))
