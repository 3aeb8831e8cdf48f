"""The k >= 3 symmetric-matrix-function Ops: values, gradients, backends, static shapes.

Oracles: scipy.linalg's ``logm``/``expm``/``sqrtm`` and LAPACK's ``eigh`` (NumPy) for
values; 4th-order central finite differences for gradients, at and near repeated
eigenvalues (the identity included) where PyTensor's own ``eigh`` gradient is NaN.
The gradient check is shown to catch deliberately wrong pullbacks (a divided
difference without its equal-eigenvalue branch, a transposed congruence, a missing
symmetrization). Graphs compiled with the C backend (``CVM``) and the NUMBA backend
must agree. No timings here: see docs/benchmarks/bench_spd_twins.py.
"""

from __future__ import annotations

import numpy as np
import pytensor
import pytensor.tensor as pt
import pytest
import scipy.linalg as sl

import pymc_manidp as pmd
from pymc_manidp.geometry._numba import pt_numerics as ptn
from pymc_manidp.geometry._numba.pt_sym_ops import SymMatrixFunction
from pymc_manidp.geometry._numba.sym_kernels import (
    FUNC_CODES,
    _divided_difference,
    _jacobi_eigh,
    _jacobi_eigh3,
    sym_function,
    sym_function_pullback,
)
from pymc_manidp.geometry._numba.sym_sums import (
    _log_divided_difference,
    _soa_jacobi3,
    congruence_sum_eig,
    congruence_sum_pullback_eig,
    log_congruence_mean,
)

FUNCS = ["exp", "log", "sqrt", "invsqrt"]
PT_FUNCS = {"exp": ptn.expm, "log": ptn.logm, "sqrt": ptn.sqrtm, "invsqrt": ptn.invsqrtm}
SCALAR = {"exp": np.exp, "log": np.log, "sqrt": np.sqrt, "invsqrt": lambda w: 1 / np.sqrt(w)}
SCALAR_PRIME = {
    "exp": np.exp,
    "log": lambda w: 1 / w,
    "sqrt": lambda w: 0.5 / np.sqrt(w),
    "invsqrt": lambda w: -0.5 * w**-1.5,
}


def _rotated(eigenvalues, seed):
    w = np.asarray(eigenvalues, float)
    q = np.linalg.qr(np.random.default_rng(seed).normal(size=(w.size, w.size)))[0]
    return (q * w) @ q.T


def _cases(k):
    """(label, SPD matrix, condition number) for one matrix size."""
    rng = np.random.default_rng(k)
    a = rng.normal(size=(k, k))
    spread = np.geomspace(1e-4, 1e4, k)
    return [
        ("random", a @ a.T + 0.5 * np.eye(k), None),
        ("identity", np.eye(k), None),
        ("repeated", _rotated([1.0] * (k - 1) + [2.5], 1), None),
        ("all equal, rotated", _rotated([3.0] * k, 2), None),
        ("near repeated", _rotated([1.0, 1.0 + 1e-9] + [2.0] * (k - 2), 3), None),
        ("ill-conditioned", _rotated(spread, 4), 1e8),
        ("graded diagonal", np.diag(spread), 1e8),
    ]


def _scipy(func, x):
    if func == "exp":
        return sl.expm(x)
    if func == "log":
        return np.real(sl.logm(x))
    if func == "sqrt":
        return np.real(sl.sqrtm(x))
    return np.linalg.inv(np.real(sl.sqrtm(x)))


def _lapack(func, x):
    w, u = np.linalg.eigh(x)
    return (u * SCALAR[func](w)) @ u.T


@pytest.mark.parametrize("k", [3, 4])
@pytest.mark.parametrize("func", FUNCS)
def test_values_against_scipy_and_lapack(func, k):
    cases = _cases(k)
    # exp acts on tangent vectors (any symmetric matrix): the logs of the cases
    args = [_lapack("log", x) if func == "exp" else x for _, x, _ in cases]
    got = sym_function(np.stack(args), FUNC_CODES[func])  # one stack, one call
    for (label, _, cond), arg, y in zip(cases, args, got, strict=True):
        ref = _lapack(func, arg)
        scale = np.abs(ref).max()
        if cond is None:
            np.testing.assert_allclose(y, _scipy(func, arg), rtol=0, atol=1e-12 * scale)
            np.testing.assert_allclose(y, ref, rtol=0, atol=1e-13 * scale, err_msg=label)
        else:
            # the rounded input fixes the small eigenvalues only to eps * cond relative
            np.testing.assert_allclose(y, ref, rtol=0, atol=1e-14 * cond * scale, err_msg=label)
        assert np.allclose(y, y.T, rtol=0, atol=0), label  # exactly symmetric


@pytest.mark.parametrize("k", [3, 4])
def test_round_trips_on_ill_conditioned_matrices(k):
    x = _cases(k)[5][1]
    back = sym_function(sym_function(x, FUNC_CODES["log"]), FUNC_CODES["exp"])
    np.testing.assert_allclose(back, x, rtol=0, atol=1e-11 * np.abs(x).max())
    s = sym_function(x, FUNC_CODES["sqrt"])
    si = sym_function(x, FUNC_CODES["invsqrt"])
    np.testing.assert_allclose(s @ s, x, rtol=0, atol=1e-11 * np.abs(x).max())
    np.testing.assert_allclose(si @ x @ si, np.eye(k), rtol=0, atol=1e-6)


def test_lapack_branch_for_larger_matrices():
    # k > JACOBI_MAX_K calls np.linalg.eigh inside the kernel
    x = _cases(9)[0][1]
    np.testing.assert_allclose(sym_function(x, 1), _scipy("log", x), atol=1e-12)


def test_batch_shapes_and_asymmetric_input():
    rng = np.random.default_rng(0)
    a = rng.normal(size=(2, 3, 4, 4))
    x = a @ np.swapaxes(a, -1, -2) + np.eye(4)
    y = sym_function(x, 1)
    assert y.shape == x.shape
    np.testing.assert_allclose(y[1, 2], _scipy("log", x[1, 2]), atol=1e-12)
    skew = rng.normal(size=(4, 4))
    skew = skew - skew.T
    np.testing.assert_allclose(sym_function(x + skew, 1), y, atol=1e-13)  # uses sym(x)
    assert sym_function(np.zeros((0, 3, 3)), 1).shape == (0, 3, 3)


# --- gradients ------------------------------------------------------------------------


def _reference_pullback(func, x, g, variant="right"):
    """Daleckii–Krein pullback in NumPy (LAPACK eigh); ``variant`` breaks it on purpose."""
    w, u = np.linalg.eigh(0.5 * (x + x.T))
    a, b = w[:, None], w[None, :]
    with np.errstate(divide="ignore", invalid="ignore"):
        quotient = (SCALAR[func](a) - SCALAR[func](b)) / (a - b)
    if variant == "no equal-eigenvalue branch":
        gam = quotient
    else:
        # near ties f'(midpoint), off by O(gap^2); the quotient cancels there
        tie = np.abs(a - b) <= 1e-8 * np.maximum(np.abs(a), np.abs(b))
        gam = np.where(tie, SCALAR_PRIME[func](0.5 * (a + b)), quotient)
    if variant == "transposed":
        inner = gam * (u @ g @ u.T)
        out = u.T @ inner @ u
    else:
        out = u @ (gam * (u.T @ g @ u)) @ u.T
    return out if variant == "unsymmetrized" else 0.5 * (out + out.T)


def _gradient_errors(func, x, pullback, seed=0, h=1e-5):
    """Largest relative mismatch of <pullback(x, r), d> against a 4th-order central
    difference of <f(sym(x)), r> along random directions d."""
    rng = np.random.default_rng(seed)
    r = rng.normal(size=x.shape)
    g = pullback(x, r)
    if not np.all(np.isfinite(g)):
        return np.inf
    scale = np.min(np.linalg.eigvalsh(0.5 * (x + x.T)))
    worst = 0.0
    for _ in range(3):
        d = rng.normal(size=x.shape) * scale  # steps stay inside the SPD cone

        def f(t, d=d):
            return float(np.sum(sym_function(x + t * d, FUNC_CODES[func]) * r))

        fd = (-f(2 * h) + 8 * f(h) - 8 * f(-h) + f(-2 * h)) / (12 * h)
        worst = max(worst, abs(float(np.sum(g * d)) - fd) / max(1.0, abs(fd)))
    return worst


GRAD_CASES = {
    "identity": [1.0, 1.0, 1.0, 1.0],
    "two equal": [1.0, 1.0, 2.0, 3.0],
    "gap 1e-9": [1.0, 1.0 + 1e-9, 2.0, 0.5],
    "gap 1e-5": [1.0, 1.0 + 1e-5, 1.0 + 2e-5, 0.7],
    "spread": [0.3, 1.0, 2.2, 4.0],
}


@pytest.mark.parametrize("k", [3, 4])
@pytest.mark.parametrize("func", FUNCS)
@pytest.mark.parametrize("case", list(GRAD_CASES))
def test_kernel_pullback_matches_finite_differences(case, func, k):
    x = _rotated(GRAD_CASES[case][:k], 7)
    err = _gradient_errors(func, x, lambda x, g: sym_function_pullback(x, g, FUNC_CODES[func]))
    assert err < 1e-7, err
    # an independent implementation (LAPACK eigh, NumPy) gives the same numbers
    if case != "gap 1e-5":  # (there the reference's quotient loses digits)
        r = np.random.default_rng(1).normal(size=(k, k))
        np.testing.assert_allclose(
            sym_function_pullback(x, r, FUNC_CODES[func]),
            _reference_pullback(func, x, r),
            atol=1e-10,
        )


@pytest.mark.parametrize(
    ("variant", "case"),
    [
        ("right", "identity"),  # the check itself passes a right pullback
        ("right", "spread"),
        ("no equal-eigenvalue branch", "identity"),  # 0/0 at ties
        ("transposed", "spread"),
        ("unsymmetrized", "spread"),
    ],
)
def test_gradient_check_can_fail(variant, case):
    x = _rotated(GRAD_CASES[case][:3], 7)
    err = _gradient_errors("log", x, lambda x, g: _reference_pullback("log", x, g, variant))
    assert (err < 1e-7) == (variant == "right"), (variant, err)


def test_naive_eigh_gradient_is_nan_where_the_op_is_finite():
    # why the Op has its own pullback: PyTensor's eigh gradient divides by gaps
    x = pt.tensor3("x")
    w, u = pt.linalg.eigh(x)
    naive = (u * pt.log(w)[..., None, :]) @ pt.swapaxes(u, -1, -2)
    eye = np.eye(3)[None]
    g = pytensor.function([x], pt.grad(naive[0, 0, 1] + naive.sum(), x), mode="FAST_COMPILE")(eye)
    assert not np.all(np.isfinite(g))
    ours = ptn.logm(x)
    g = pytensor.function([x], pt.grad(ours[0, 0, 1] + ours.sum(), x), mode="FAST_COMPILE")(eye)
    # d logm at I is the identity map, so the gradient is sym of the cotangent
    expected = np.ones((3, 3))
    expected[0, 1] = expected[1, 0] = 1.5
    np.testing.assert_allclose(g[0], expected, atol=1e-14)


# --- the Op in compiled graphs ------------------------------------------------------------


def _graph():
    """Every matrix function and an SPD(3) KNG-like term, with their gradients."""
    x = pt.tensor3("x")
    y = pt.tensor3("y")
    outs = [PT_FUNCS[f](x) for f in FUNCS]
    cost = sum(pt.sum(o * (i + 1.0) * pt.arange(9).reshape((3, 3))) for i, o in enumerate(outs))
    P = pmd.SPD(k=3)
    logs = P.pt_log(x[0], y)
    kng = -P.pt_norm(x[0], pt.sum(logs, axis=0)) + pt.sum(P.pt_dist(x[0], y))
    fused = pt.sum(P.pt_frechet_gradient_norm(x, y))  # the congruence-sum kernel, batched
    return [x, y], [*outs, cost, pt.grad(cost, x), kng, pt.grad(kng, x), fused, pt.grad(fused, x)]


def _data(rng, n=6, k=3):
    a = rng.normal(size=(n, k, k))
    y = a @ np.swapaxes(a, -1, -2) / k + 0.3 * np.eye(k)
    return y


# slow tier: C-compiling the graph on a clean clone's cold PyTensor compiledir took 75
# CPU-s in the worker and 20 in gcc (2026-11-28, the costliest default-tier test)
@pytest.mark.slow
def test_c_and_numba_backends_agree():
    rng = np.random.default_rng(3)
    x = _data(rng, 4)
    x[1] = np.eye(3)  # repeated eigenvalues inside the batch
    x[2] = _rotated([1.0, 1.0, 2.0], 1)
    y = _data(rng, 6)
    inputs, outputs = _graph()
    got = {
        mode: pytensor.function(inputs, outputs, mode=mode)(x, y)
        for mode in ("FAST_COMPILE", "CVM", "NUMBA")
    }
    for mode in ("CVM", "NUMBA"):
        for a, b in zip(got["FAST_COMPILE"], got[mode], strict=True):
            assert np.all(np.isfinite(b))
            np.testing.assert_allclose(b, a, rtol=1e-12, atol=1e-12)
    # and the forward values are scipy's
    for f, val in zip(FUNCS, got["NUMBA"][:4], strict=True):
        np.testing.assert_allclose(val[2], _scipy(f, x[2]), atol=1e-12)


def test_the_op_replaces_eigh_in_compiled_spd3_graphs():
    x = pt.matrix("x")
    y = pt.tensor3("y")
    f = pytensor.function([x, y], pmd.SPD(k=3).pt_log(x, y), mode="NUMBA")
    names = {type(node.op).__name__ for node in f.maker.fgraph.apply_nodes}
    assert "SymMatrixFunction" in names
    assert not any("Eigh" in str(node.op) for node in f.maker.fgraph.apply_nodes)


@pytest.mark.parametrize("method", ["kernel", "eigh"])
@pytest.mark.parametrize("mode", ["CVM", "NUMBA"])
def test_length_one_batch_broadcasts_against_the_data(mode, method):
    # Regression: a (1, k, k) operand typed (None, k, k) after a matrix function was
    # multiplied by an (n, k, k) stack through BatchedDot, which kept one row.
    k, n = 3, 4
    rng = np.random.default_rng(5)
    x_val, y_val = _data(rng, 1, k), _data(rng, n, k)
    x = pt.tensor("x", shape=(1, k, k))
    y = pt.tensor("y", shape=(None, k, k))
    xs, xi = ptn.sqrtm(x, method=method), ptn.invsqrtm(x, method=method)
    assert xs.type.shape == (1, k, k)
    out = ptn.sym(xs @ ptn.logm(xi @ y @ xi, method=method) @ xs)
    got = pytensor.function([x, y], out, mode=mode)(x_val, y_val)
    assert got.shape == (n, k, k)
    np.testing.assert_allclose(got, pmd.SPD(k=k).log(x_val, y_val), atol=1e-12)
    lvd = ptn.spectral_sum(lambda w: pt.sum(w, axis=-1), x)
    assert lvd.type.shape == (1,)


def test_vectorized_graph_applies_the_op_to_the_whole_batch():
    from pytensor.graph.replace import vectorize_graph

    x = pt.matrix("x")
    cost = pt.sum(ptn.logm(x) ** 2)
    g = pt.grad(cost, x)
    xb = pt.tensor3("xb")
    gb = vectorize_graph(g, {x: xb})
    stack = _data(np.random.default_rng(8), 5)
    got = pytensor.function([xb], gb, mode="FAST_COMPILE")(stack)
    one = pytensor.function([x], g, mode="FAST_COMPILE")
    np.testing.assert_allclose(got, np.stack([one(s) for s in stack]), atol=1e-14)


def test_method_choice_is_checked():
    x = pt.tensor3("x")
    with pytest.raises(ValueError, match="2 x 2"):
        ptn.logm(x, method="closed")  # unknown size: the closed form would be wrong
    with pytest.raises(ValueError, match="method must be"):
        ptn.logm(x, method="lapack")
    assert isinstance(ptn.logm(x, k=3).owner.op, SymMatrixFunction)
    assert not isinstance(ptn.logm(x, k=2).owner.op, SymMatrixFunction)  # closed form


# --- the unrolled 3 x 3 Jacobi ----------------------------------------------------------


@pytest.mark.parametrize("scale", [1.0, 1e-200, 1e120])
def test_unrolled_jacobi_agrees_with_the_loops_and_lapack(scale):
    # 1e120: off-diagonal entries above 1e100 take the square-root test (no overflow);
    # 1e-200: products of entries underflow
    for label, x, cond in _cases(3):
        x = x * scale
        w3, u3 = np.empty(3), np.empty((3, 3))
        w, u = np.empty(3), np.empty((3, 3))
        _jacobi_eigh3(x.copy(), w3, u3)
        _jacobi_eigh(x.copy(), w, u)
        tol = 4e-15 * (cond or 1.0) * np.abs(x).max()
        np.testing.assert_allclose(np.sort(w3), np.linalg.eigvalsh(x), rtol=0, atol=tol)
        np.testing.assert_allclose(np.sort(w3), np.sort(w), rtol=0, atol=tol, err_msg=label)
        np.testing.assert_allclose(u3 @ u3.T, np.eye(3), rtol=0, atol=4e-15)
        np.testing.assert_allclose((u3 * w3) @ u3.T, x, rtol=0, atol=tol, err_msg=label)


@pytest.mark.parametrize("scale", [1.0, 1e-200, 1e120])
def test_vectorized_jacobi_gives_each_matrix_the_scalar_result(scale):
    # one call for the whole stack: matrices that converge early must stay put while
    # the others rotate (t = 0 is an exact no-op)
    cases = [x * scale for _, x, _ in _cases(3)]
    rows = np.array([[x[0, 0], x[1, 1], x[2, 2], x[0, 1], x[0, 2], x[1, 2]] for x in cases]).T
    u = np.empty((9, len(cases)))
    _soa_jacobi3(rows, u)
    for j, x in enumerate(cases):
        w3, u3 = np.empty(3), np.empty((3, 3))
        _jacobi_eigh3(x.copy(), w3, u3)
        uj = u[:, j].reshape(3, 3)
        tol = 4e-15 * np.abs(x).max() * (1e8 if j >= 5 else 1.0)
        np.testing.assert_allclose(np.sort(rows[:3, j]), np.sort(w3), rtol=0, atol=tol)
        np.testing.assert_allclose((uj * rows[:3, j]) @ uj.T, x, rtol=0, atol=tol)
        np.testing.assert_allclose(uj @ uj.T, np.eye(3), rtol=0, atol=4e-15)


def _log_congruence_mean_reference(a, d, wts):
    """The Fréchet pass's sums from LAPACK's eigh, matrix by matrix."""
    k = a.shape[0]
    rows, cols = np.triu_indices(k, 1)
    s, energy, coords = np.zeros((k, k)), 0.0, []
    for di, wi in zip(d, wts, strict=True):
        w, u = np.linalg.eigh(a @ di @ a)
        log = (u * np.log(w)) @ u.T
        s += wi * log
        energy += 0.5 * wi * np.sum(np.log(w) ** 2)
        coords.append(np.concatenate([np.diag(log), np.sqrt(2.0) * log[rows, cols]]))
    c = np.array(coords)
    return s, energy, (c * wts[:, None]).T @ c


@pytest.mark.parametrize("k", [4, 8])
def test_fused_log_sums_skip_only_pairs_no_matrix_rotates(k):
    # The vectorized Jacobi of the Fréchet pass skips a plane when no matrix of its
    # chunk (64) rotates in it. Chunks here: all diagonal (every plane skipped from the
    # first sweep), diagonal but one matrix coupled in one plane only (that plane must
    # still rotate), and generic. Oracle: LAPACK's eigh per matrix.
    rng = np.random.default_rng(k)
    diag = np.stack([np.diag(rng.uniform(0.5, 2.0, k)) for _ in range(130)])
    diag[64 + 17, 1, 2] = diag[64 + 17, 2, 1] = 0.3  # one plane of one matrix
    diag[64 + 40, 0, k - 1] = diag[64 + 40, k - 1, 0] = -0.2
    g = rng.normal(size=(100, k, k)) * 0.4
    w, u = np.linalg.eigh(0.5 * (g + np.swapaxes(g, -1, -2)))
    generic = (u * np.exp(w)[..., None, :]) @ np.swapaxes(u, -1, -2)
    d = np.ascontiguousarray(np.concatenate([diag, generic]))
    wts = rng.uniform(0.1, 1.0, len(d))
    wts /= wts.sum()
    for a in (np.eye(k), np.diag(rng.uniform(0.7, 1.3, k))):
        s, energy, moments = log_congruence_mean(a, d, wts, True)
        s_ref, e_ref, m_ref = _log_congruence_mean_reference(a, d, wts)
        np.testing.assert_allclose(s, s_ref, rtol=0, atol=1e-13)
        np.testing.assert_allclose(energy, e_ref, rtol=1e-13)
        np.testing.assert_allclose(moments, m_ref, rtol=0, atol=1e-13)


def test_log_divided_difference_across_its_branch_point():
    # series below a relative gap of 0.1, quotient of logs above: both against the
    # atanh form of the loop kernels, on both sides of the switch and at ties
    for b in (1e-3, 1.0, 7.5):
        for rel in (0.0, 1e-12, 1e-5, 0.05, 0.0999, 0.1001, 0.5, 0.99):
            a = b * (1 + rel) / (1 - rel)  # (a - b)/(a + b) = rel
            got = _log_divided_difference(a, b, np.log(a), np.log(b))
            want = _divided_difference(1, a, b)
            assert abs(got - want) <= 4e-15 * abs(want), (a, b, got, want)


# --- the congruence-sum kernel (KNG on SPD(k >= 3)) --------------------------------------


def _congruence_case(seed, k=3, n=5):
    rng = np.random.default_rng(seed)
    a = _data(rng, 2, k)  # two points: a batch
    d = _data(rng, n, k)
    a[1] = np.eye(k)  # A = I: A d_i A = d_i
    d[0] = np.linalg.inv(a[0] @ a[0])  # A d_0 A = I: every eigenvalue equal
    d[1] = _rotated([1.0, 1.0] + [2.0] * (k - 2), 9)  # two equal ones at A = I
    return a, d


def _congruence_reference(a, d, g, variant="right"):
    """sum_i f(a d_i a) and its pullback to a in NumPy (LAPACK), or a broken variant."""
    value = sum(_lapack("log", a @ di @ a) for di in d)
    out = np.zeros_like(a)
    for di in d:
        gbar = _reference_pullback("log", a @ di @ a, 0.5 * (g + g.T))
        m = gbar @ a @ di
        out += m if variant == "one-sided" else m + m.T
    return value, out


@pytest.mark.parametrize("k", [3, 4])
def test_congruence_sum_values_and_pullback(k):
    a, d = _congruence_case(1, k)
    s, w, fw, u = congruence_sum_eig(a, d, FUNC_CODES["log"])
    assert s.shape == a.shape and w.shape == fw.shape == (2, len(d), k)
    assert u.shape == (2, len(d), k, k)
    g = np.random.default_rng(2).normal(size=a.shape)
    pull = congruence_sum_pullback_eig(a, d, w, fw, u, g, FUNC_CODES["log"])
    for b in range(2):
        want, want_pull = _congruence_reference(a[b], d, g[b])
        np.testing.assert_allclose(s[b], want, rtol=0, atol=1e-12)
        np.testing.assert_allclose(pull[b], want_pull, rtol=0, atol=1e-10)
        err = _congruence_fd_error(a[b], d, g[b], pull[b])
        assert err < 1e-7, err


def _congruence_fd_error(a, d, g, pull, h=1e-5):
    rng = np.random.default_rng(4)
    worst = 0.0
    for _ in range(3):
        e = rng.normal(size=a.shape)
        e = 0.1 * (e + e.T)  # A stays symmetric positive definite

        def f(t, e=e):
            return float(np.sum(congruence_sum_eig(a + t * e, d, FUNC_CODES["log"])[0] * g))

        fd = (-f(2 * h) + 8 * f(h) - 8 * f(-h) + f(-2 * h)) / (12 * h)
        worst = max(worst, abs(float(np.sum(pull * e)) - fd) / max(1.0, abs(fd)))
    return worst


def test_congruence_fd_check_can_fail():
    a, d = _congruence_case(3)
    g = np.random.default_rng(5).normal(size=a.shape[1:])
    right = _congruence_reference(a[0], d, g)[1]
    wrong = _congruence_reference(a[0], d, g, variant="one-sided")[1]
    assert _congruence_fd_error(a[0], d, g, right) < 1e-7
    assert _congruence_fd_error(a[0], d, g, wrong) > 1e-3


def test_congruence_sum_gets_no_gradient_through_its_working_outputs():
    a, d = pt.matrix("a"), pt.tensor3("d")
    node = ptn.logm_congruence_sum(a, d, k=3).owner
    with pytest.raises(Exception, match="no gradient through"):
        pt.grad(pt.sum(node.outputs[1]), a)
    with pytest.raises(Exception, match="D is data"):
        pt.grad(pt.sum(node.outputs[0]), d)


# --- eigenvalues for symmetric functions (the SPD volume density) -------------------------


def test_spectral_sum_gradient_at_repeated_eigenvalues():
    # phi symmetric in the eigenvalues: U diag(phi'(w)) U^T is basis-free at ties
    x = pt.matrix("x")

    def phi(w):  # a symmetric function with distinct partial derivatives
        return pt.sum(w**3, axis=-1) + pt.prod(w, axis=-1)

    out = ptn.spectral_sum(phi, x)
    f = pytensor.function([x], [out, pt.grad(out, x)], mode="FAST_COMPILE")
    for case in ("identity", "two equal", "spread"):
        x0 = _rotated(GRAD_CASES[case][:3], 7)
        val, g = f(x0)
        w = np.linalg.eigvalsh(x0)
        assert np.isclose(val, np.sum(w**3) + np.prod(w), rtol=1e-12)
        # phi(X) = tr(X^3) + det(X): gradient 3 X^2 + det(X) X^{-1}
        want = 3 * x0 @ x0 + np.linalg.det(x0) * np.linalg.inv(x0)
        np.testing.assert_allclose(g, want, rtol=0, atol=1e-11)


def test_eigvalsh_refuses_a_gradient_through_its_eigenvectors():
    from pymc_manidp.geometry._numba.pt_sym_ops import SymEigvalsh

    x = pt.matrix("x")
    node = SymEigvalsh()(x).owner
    with pytest.raises(Exception, match="no gradient through U"):
        pt.grad(pt.sum(node.outputs[1]), x)


@pytest.mark.parametrize("b", [6.68e-14, 1e-300, 5e-324, 1e-3, 15.28 / 2001, 15.28 / 1999])
def test_log_divided_difference_of_far_apart_eigenvalues_is_finite_and_right(b):
    """f[a, b] for log with b/a below eps/2 rounded d = (a - b)/(a + b) to 1 and gave
    arctanh(1) = inf: a NaN gradient of the SPD(3) Laplace chart at eigenvalues 15.3 and
    6.7e-14 (tests/laws/test_numerical_failures.py). Oracle: mpmath at 50 digits."""
    mpmath = pytest.importorskip("mpmath")
    from pymc_manidp.geometry._numba.sym_kernels import _divided_difference

    a = 15.28
    mpmath.mp.dps = 50
    exact = (mpmath.log(a) - mpmath.log(b)) / (mpmath.mpf(a) - mpmath.mpf(b))
    got = _divided_difference(1, a, b)
    assert np.isfinite(got)
    assert abs(got - float(exact)) <= 1e-14 * float(exact)
    assert _divided_difference(1, b, a) == got  # symmetric
