"""PyTensor twins agree with NumPy to 1e-10 and have finite, correct gradients.

Gradients are checked against 4th-order central finite differences of a random
projection of the output along random directions (``verify_grad``'s one-sided
differences are too coarse for a 1e-6 tolerance), including at a chart origin
(coordinates 0), at the identity SPD matrix (repeated eigenvalues, where PyTensor's
own eigh gradient is NaN) and at log maps between coinciding points. Gradient graphs
are compiled in FAST_COMPILE mode (same graph, no C compilation) to keep the suite fast.
"""

from __future__ import annotations

import numpy as np
import pytensor
import pytensor.tensor as pt
import pytest

import pymc_manidp as pmd
from pymc_manidp.geometry._kernels import pt_numerics as ptn
from tests.cases import manifold_params, random_point, random_tangent

ALL = ["S1(R=2)", "S2(R=0.5)", "S5(R=3)", "SPD2", "SPD3", "Kendall3", "Kendall4", "Kendall10", "R3"]


def _compile(fn, *args, mode=None):
    syms = [pt.tensor(dtype="float64", shape=(None,) * np.ndim(a)) for a in args]
    return pytensor.function(syms, fn(*syms), on_unused_input="ignore", mode=mode)


def _vgrad(fn, args, seed, h=1e-4, rtol=1e-6):
    """Directional derivatives of <fn(x), r> against a 4th-order central difference."""
    rng = np.random.default_rng(seed)
    (x0,) = args
    t = pt.tensor(dtype="float64", shape=(None,) * np.ndim(x0))
    out = fn(t)
    shape = pytensor.function([t], out, mode="FAST_COMPILE")(x0).shape
    cost = pt.sum(out * rng.normal(size=shape))
    g_sym = pt.grad(cost, t, disconnected_inputs="ignore")  # flat density: no path
    f = pytensor.function([t], [cost, g_sym], mode="FAST_COMPILE")
    _, g = f(x0)
    assert np.all(np.isfinite(g))
    for _ in range(3):
        u = rng.normal(size=np.shape(x0))
        vals = [f(x0 + s * h * u)[0] for s in (2, 1, -1, -2)]
        fd = (-vals[0] + 8 * vals[1] - 8 * vals[2] + vals[3]) / (12 * h)
        an = float(np.sum(g * u))
        assert abs(an - fd) <= rtol * max(1.0, abs(fd)), (an, fd)


def _center_and_data(M, rng, n=5):
    x = M.validate(random_point(M, rng))
    v, _ = random_tangent(M, np.broadcast_to(x, (n, *x.shape)), rng, max_norm=0.6)
    return x, M.exp(x, v)


@manifold_params(ALL)
def test_twins_agree_with_numpy(M):
    rng = np.random.default_rng(7)
    x, ys = _center_and_data(M, rng)
    c = rng.normal(size=(8, M.dim))
    c *= 0.5 * min(M.injectivity_radius, 3.0) / np.linalg.norm(c, axis=-1, keepdims=True)
    c[0] = 0.0  # the chart origin
    want_log = M.log(x, ys)
    # one compiled function (default mode, as samplers use it) for all twins
    fn = _compile(
        lambda xx, yy, cc, vv: [
            M.pt_exp_coords(x, cc),
            M.pt_log(xx, yy),
            M.pt_dist(xx, yy),
            M.pt_norm(xx, vv),
            M.pt_log_volume_density(cc),
        ],
        x,
        ys,
        c,
        want_log,
    )
    exp_c, log_, dist_, norm_, lvd = fn(x, ys, c, want_log)
    np.testing.assert_allclose(exp_c, M.exp_coords(x, c), rtol=0, atol=1e-10)
    np.testing.assert_allclose(exp_c[0], x, rtol=0, atol=1e-12)
    np.testing.assert_allclose(log_, want_log, rtol=0, atol=1e-10)
    np.testing.assert_allclose(dist_, M.dist(x, ys), rtol=0, atol=1e-10)
    np.testing.assert_allclose(norm_, M.norm(x, want_log), rtol=0, atol=1e-10)
    np.testing.assert_allclose(lvd, M.log_volume_density(c), rtol=0, atol=1e-10)


@manifold_params(ALL)
def test_twin_gradients_match_finite_differences(M):
    rng = np.random.default_rng(11)
    x, ys = _center_and_data(M, rng)
    c = rng.normal(size=M.dim)
    c *= 0.4 * min(M.injectivity_radius, 3.0) / np.linalg.norm(c)  # inside the chart
    zero = np.zeros(M.dim)
    for i, cc in enumerate([c, zero]):  # away from and at the chart origin
        _vgrad(lambda t: M.pt_exp_coords(x, t), [cc], i)
        _vgrad(M.pt_log_volume_density, [cc], i)
    _vgrad(lambda t: M.pt_log(t, ys), [x], 3)
    _vgrad(lambda t: M.pt_dist(t, ys), [x], 4)
    _vgrad(lambda t: M.pt_log(t, ys[:1]), [ys[0]], 5)  # log between coinciding points
    v = M.log(x, ys)
    _vgrad(lambda t: M.pt_norm(x, t), [v], 6)


@pytest.mark.parametrize("k", [2, 3, 5])
def test_spd_gradients_at_the_identity(k):
    P = pmd.SPD(k=k)
    eye = np.eye(k)
    rng = np.random.default_rng(k)
    y = random_point(P, rng, 3)
    _vgrad(lambda t: P.pt_exp_coords(eye, t), [np.zeros(P.dim)], 1)
    _vgrad(lambda t: P.pt_log(t, y), [eye], 2)
    _vgrad(lambda t: P.pt_dist(t, y), [eye], 3)
    _vgrad(lambda t: P.pt_log(t, eye), [eye], 4)  # log_I(I): every eigenvalue equal
    _vgrad(P.pt_log_volume_density, [np.zeros(P.dim)], 5)
    # and every gradient is finite there, where PyTensor's eigh gradient is not
    x = pt.matrix("x")
    g = pytensor.function([x], pt.grad(pt.sum(P.pt_log(x, y) ** 2), x), mode="FAST_COMPILE")(eye)
    assert np.all(np.isfinite(g))


def test_naive_eigh_gradient_is_nan_at_identity():
    # Why the custom pullback exists: this is what it replaces.
    x = pt.matrix("x")
    w, u = pt.linalg.eigh(x)
    naive = (u * pt.exp(w)[None, :]) @ u.T
    fast = "FAST_COMPILE"
    naive_grad = pytensor.function([x], pt.grad(naive[0, 1] + naive.sum(), x), mode=fast)
    with pytest.warns(RuntimeWarning, match="encountered in"):  # the 0/0 it makes, on purpose
        g = naive_grad(np.eye(3))
    assert not np.all(np.isfinite(g))
    cost = ptn.expm(x)[0, 1] + ptn.expm(x).sum()
    ours = pytensor.function([x], pt.grad(cost, x), mode=fast)(np.eye(3))
    assert np.all(np.isfinite(ours))


@pytest.mark.parametrize("name", ["expm", "logm", "sqrtm", "invsqrtm"])
def test_matrix_functions_near_repeated_eigenvalues(name):
    fn = getattr(ptn, name)
    rng = np.random.default_rng(0)
    for gap in [0.0, 1e-9, 1e-5, 0.3]:
        a = np.diag([1.0, 1.0 + gap, 2.0])
        q = np.linalg.qr(rng.normal(size=(3, 3)))[0]
        _vgrad(fn, [q @ a @ q.T], 0)


@manifold_params(ALL)
def test_dist_and_norm_gradients_are_finite_at_zero(M):
    # A sampler may sit exactly at its footpoint (a chart origin): the cusp of
    # rho(eta, x) must give a finite (zero) gradient there, not NaN.
    rng = np.random.default_rng(2)
    x = M.validate(random_point(M, rng))
    t = pt.tensor(dtype="float64", shape=(None,) * x.ndim)
    g_dist = pt.grad(M.pt_dist(t, x), t)
    g_norm = pt.grad(M.pt_norm(x, t), t)
    f_dist = pytensor.function([t], g_dist, mode="FAST_COMPILE")
    f_norm = pytensor.function([t], g_norm, mode="FAST_COMPILE")
    assert np.all(np.isfinite(f_dist(x)))  # rho(x, x)
    assert np.all(np.isfinite(f_norm(np.zeros_like(x))))  # |0|


@manifold_params(ALL)
def test_exp_chart_from_a_shared_frame_follows_a_new_center(M):
    """``pt_exp_frame`` with the frame in shared variables: one compiled function,
    and setting the frame of another center moves the chart there (as ``pm.Data``
    does in a compiled MCMC model)."""
    rng = np.random.default_rng(11)
    x1, x2 = (M.validate(random_point(M, rng)) for _ in range(2))
    c = 0.3 * rng.normal(size=(4, M.dim))
    frame = {k: pytensor.shared(v, name=k) for k, v in M.chart_frame(x1).items()}
    cc = pt.matrix("cc")
    fn = pytensor.function([cc], M.pt_exp_frame(frame, cc), mode="FAST_COMPILE")
    np.testing.assert_allclose(fn(c), M.exp_coords(x1, c), rtol=0, atol=1e-10)
    for k, v in M.chart_frame(x2).items():
        frame[k].set_value(v)
    np.testing.assert_allclose(fn(c), M.exp_coords(x2, c), rtol=0, atol=1e-10)
    assert not np.allclose(M.exp_coords(x1, c), M.exp_coords(x2, c))


@manifold_params(ALL)
def test_frechet_gradient_norm_twin(M):
    """KNG's norm ``||sum_i log_x(x_i)||_x``: NumPy's value, and the gradient along the
    chart (where samplers move ``x``; overrides may assume ``x`` on the manifold)."""
    rng = np.random.default_rng(13)
    x, ys = _center_and_data(M, rng, n=7)
    want = M.norm(x, np.sum(M.log(x, ys), axis=0))
    got = _compile(M.pt_frechet_gradient_norm, x, ys, mode="FAST_COMPILE")(x, ys)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    batch = M.exp_coords(x, 0.3 * rng.normal(size=(4, M.dim)))  # batched points
    got = _compile(M.pt_frechet_gradient_norm, batch, ys, mode="FAST_COMPILE")(batch, ys)
    want = [M.norm(b, np.sum(M.log(b, ys), axis=0)) for b in batch]
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    c = rng.normal(size=M.dim)
    c *= 0.3 * min(M.injectivity_radius, 3.0) / np.linalg.norm(c)
    for i, cc in enumerate([c, np.zeros(M.dim)]):
        _vgrad(lambda t: M.pt_frechet_gradient_norm(M.pt_exp_coords(x, t), ys), [cc], 20 + i)
