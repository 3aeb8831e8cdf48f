"""The closed-form 2 x 2 matrix functions of ``pt_numerics`` (no eigendecomposition).

Oracles: LAPACK (``numpy.linalg.eigh``) for the values on random, exactly degenerate,
nearly degenerate and ill-conditioned matrices; 4th-order central finite differences
for the gradients at and near repeated eigenvalues (the identity included), where
PyTensor's own ``eigh`` gradient is NaN (shown below, so the comparison can fail).
"""

from __future__ import annotations

import numpy as np
import pytensor
import pytensor.tensor as pt
import pytest

from pymc_manidp.geometry._numba import pt_numerics as ptn

NAMES = ["expm", "logm", "sqrtm", "invsqrtm"]
SCALAR = {"expm": np.exp, "logm": np.log, "sqrtm": np.sqrt, "invsqrtm": lambda w: w**-0.5}


def _lapack(name, a):
    w, u = np.linalg.eigh(a)
    return (u * SCALAR[name](w)[..., None, :]) @ np.swapaxes(u, -1, -2)


def _rotation(theta):
    c, s = np.cos(theta), np.sin(theta)
    return np.array([[c, -s], [s, c]])


def _matrices():
    """SPD 2 x 2 matrices: random, degenerate, nearly degenerate, ill-conditioned."""
    rng = np.random.default_rng(0)
    out = []
    for _ in range(20):
        g = rng.normal(size=(2, 2))
        out.append(g @ g.T + 0.1 * np.eye(2))
    for lam in [1.0, 1e-3, 7.5]:
        out.append(lam * np.eye(2))  # exactly repeated
    for gap in [1e-12, 1e-9, 1e-7, 1e-5, 1e-3, 0.03, 0.1]:  # across the series switch
        q = _rotation(rng.uniform(0, np.pi))
        out.append(q @ np.diag([2.0, 2.0 * (1 + gap)]) @ q.T)
    for cond in [1e4, 1e8]:  # ill-conditioned
        q = _rotation(rng.uniform(0, np.pi))
        out.append(q @ np.diag([3.0, 3.0 / cond]) @ q.T)
    return np.stack(out)


def _fn(name, mode=None):
    x = pt.tensor3("x")
    return pytensor.function([x], getattr(ptn, name)(x, k=2), mode=mode)


@pytest.mark.parametrize("name", NAMES)
def test_closed_forms_agree_with_lapack(name):
    a = _matrices()
    if name == "expm":
        a = a - 1.5 * np.eye(2)  # expm is for any symmetric matrix: negative ones too
    got = _fn(name)(a)
    want = _lapack(name, a)
    # LAPACK's own accuracy: eigenvalues to eps * |X| absolute, so f(small eigenvalue)
    # only to eps * cond(X) relative; tolerance 100 eps * cond * max(1, |f(X)|)
    w = np.linalg.eigvalsh(a)
    cond = np.where(w[:, 0] > 0, np.abs(w).max(-1) / np.abs(w[:, 0]), 1.0)
    scale = np.maximum(1.0, np.abs(want).max(axis=(-2, -1)))
    err = np.abs(got - want).max(axis=(-2, -1))
    tol = 2e-14 * np.maximum(cond, 1.0) * scale
    assert np.all(err <= tol), (err / tol).max()
    # and the 2 x 2 route is taken: no eigh in the graph
    x = pt.tensor3("x")
    graph = pytensor.function([x], getattr(ptn, name)(x, k=2)).maker.fgraph
    assert not any("eigh" in str(node.op).lower() for node in graph.toposort())


def test_static_shape_selects_the_closed_form_and_matches_the_general_route():
    a = _matrices()[:5]
    x22 = pt.tensor("x", shape=(None, 2, 2))
    x = pt.tensor3("x")
    closed = pytensor.function([x22], ptn.logm(x22))(a)
    general = pytensor.function([x], ptn.logm(x))(a)
    np.testing.assert_allclose(closed, general, rtol=0, atol=1e-12)


def _grad_check(name, x0, seed, h=1e-5, rtol=1e-6):
    """Directional derivatives of <f(x), R> against a 4th-order central difference."""
    rng = np.random.default_rng(seed)
    t = pt.matrix("t")
    cost = pt.sum(getattr(ptn, name)(t, k=2) * rng.normal(size=(2, 2)))
    f = pytensor.function([t], [cost, pt.grad(cost, t)], mode="FAST_COMPILE")
    _, g = f(x0)
    assert np.all(np.isfinite(g)), g
    for _ in range(3):
        u = rng.normal(size=(2, 2))
        u = u + u.T  # symmetric directions (the functions read sym(x))
        vals = [f(x0 + s * h * u)[0] for s in (2, 1, -1, -2)]
        fd = (-vals[0] + 8 * vals[1] - 8 * vals[2] + vals[3]) / (12 * h)
        assert abs(float(np.sum(g * u)) - fd) <= rtol * max(1.0, abs(fd)), (name, g, fd)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("gap", [0.0, 1e-9, 1e-6, 1e-3, 0.05, 0.5])
def test_gradients_at_and_near_repeated_eigenvalues(name, gap):
    q = _rotation(0.3)
    _grad_check(name, q @ np.diag([1.3, 1.3 * (1 + gap)]) @ q.T, seed=int(gap * 1e3) + 1)


@pytest.mark.parametrize("name", NAMES)
def test_gradients_at_the_identity_and_ill_conditioned(name):
    _grad_check(name, np.eye(2), seed=3)
    q = _rotation(1.1)
    _grad_check(name, q @ np.diag([2.0, 2e-3]) @ q.T, seed=4, h=1e-7, rtol=1e-5)


def test_naive_eigh_gradient_is_nan_at_identity_where_the_closed_form_is_not():
    x = pt.matrix("x")
    w, u = pt.linalg.eigh(x)
    naive = (u * pt.log(w)[None, :]) @ u.T
    fast = "FAST_COMPILE"
    with np.errstate(all="ignore"):
        g = pytensor.function([x], pt.grad(naive[0, 1] + naive.sum(), x), mode=fast)(np.eye(2))
    assert not np.all(np.isfinite(g))
    ours = ptn.logm(x, k=2)
    g = pytensor.function([x], pt.grad(ours[0, 1] + ours.sum(), x), mode=fast)(np.eye(2))
    # d logm at I is the identity map: d/dX of (X_01 + sum X) with X symmetrized
    np.testing.assert_allclose(g, [[1.0, 1.5], [1.5, 1.0]], rtol=0, atol=1e-14)


def test_log_sinhc_sqrt_and_friends_match_numpy():
    s = np.array([0.0, 1e-12, 1e-6, 1e-4, 2.4e-3, 2.6e-3, 0.5, 4.0, 900.0])
    v = pt.vector("s")
    f = pytensor.function([v], [ptn.cosh_sqrt(v), ptn.sinhc_sqrt(v), ptn.log_sinhc_sqrt(v)])
    r = np.sqrt(s)
    with np.errstate(invalid="ignore", divide="ignore"):
        sinhc = np.where(r > 0, np.sinh(r) / np.where(r > 0, r, 1), 1.0)
    cosh_, sinhc_, log_sinhc_ = f(s)
    np.testing.assert_allclose(cosh_, np.cosh(r), rtol=1e-14)
    np.testing.assert_allclose(sinhc_, sinhc, rtol=1e-14)
    # log sinhc: log1p of sinhc - 1 summed as its own series sum_j s^j/(2j+1)! (no
    # cancellation near 0), except at the overflow end (log form there)
    term, excess = np.ones_like(s), np.zeros_like(s)
    for j in range(1, 40):
        term = term * s / ((2 * j) * (2 * j + 1))
        excess = excess + term
    want = np.log1p(excess[:-1])
    np.testing.assert_allclose(log_sinhc_[:-1], want, rtol=1e-13, atol=1e-16)
    np.testing.assert_allclose(log_sinhc_[-1], 30 - np.log(60) + np.log1p(-np.exp(-60)), rtol=1e-14)


def test_congruence_matches_matrix_products():
    rng = np.random.default_rng(5)
    x = rng.normal(size=(2, 2))
    x = x + x.T
    y = rng.normal(size=(6, 2, 2))  # not symmetric: the congruence reads sym(y)
    xx, yy = pt.matrix("x"), pt.tensor3("y")
    got = pytensor.function([xx, yy], ptn.sym2_congruence(xx, yy))(x, y)
    ys = 0.5 * (y + np.swapaxes(y, -1, -2))
    np.testing.assert_allclose(got, x @ ys @ x, rtol=1e-13, atol=1e-14)
