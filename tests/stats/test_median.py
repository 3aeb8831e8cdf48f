"""Fréchet medians: an independent Weiszfeld, known geometric medians, records at the median."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import pymc_manidp as pmd
from pymc_manidp.stats import ConvergenceWarning
from tests.stats.test_frechet import _ball_data

CASES = {
    "S2": (pmd.Sphere(dim=2), 0.7),
    "SPD3": (pmd.SPD(k=3), 1.5),
    "Kendall5": (pmd.KendallShape(k_landmarks=5), 0.35),
}


def _weiszfeld(M, data, x, iters=3000):
    """Plain manifold Weiszfeld (Fletcher et al. 2009), written apart from the package:
    unit step, no record handling (the test data avoid the iterates)."""
    for _ in range(iters):
        logs = M.log(x, data)
        rho = np.sqrt(np.maximum(M.inner(x, logs, logs), 0.0))
        shape = (-1,) + (1,) * (data.ndim - 1)
        v = np.sum(logs / rho.reshape(shape), axis=0) / np.sum(1.0 / rho)
        x = M.validate(M.exp(x, v))
    return x


@pytest.mark.parametrize("name", list(CASES))
def test_median_matches_an_independent_weiszfeld(name):
    M, r = CASES[name]
    rng = np.random.default_rng(7)
    _, data = _ball_data(M, rng, 60, r)
    res = pmd.frechet_median(M, data)
    assert res.converged and res.method == "weiszfeld"
    # its own start: off the records, near none of the package's iterates
    ref = _weiszfeld(M, data, M.exp_coords(data[1], np.full(M.dim, 0.01)))
    assert float(M.dist(res.median, ref)) < 1e-7
    # the gradient recomputed here: a mean of unit vectors, ~0 at the median
    logs = M.log(res.median, data)
    rho = M.dist(res.median, data)
    g = np.mean(logs / rho.reshape((-1,) + (1,) * (data.ndim - 1)), axis=0)
    assert float(M.norm(res.median, g)) < 1e-9
    # and a minimum of F: any small move raises it
    F = np.sum(rho)
    for c in rng.normal(size=(5, M.dim)) * 1e-4:
        assert np.sum(M.dist(M.exp_coords(res.median, c), data)) > F


def _line_intersection(p1, p2, q1, q2):
    a = np.column_stack([p2 - p1, q1 - q2])
    s, _ = np.linalg.solve(a, q1 - p1)
    return p1 + s * (p2 - p1)


def test_euclidean_median_of_a_convex_quadrilateral_is_the_diagonals_crossing():
    # a classical fact: for four points in convex position the geometric median is
    # where the diagonals cross (each pair of opposite unit vectors cancels there)
    E = pmd.Euclidean(dim=2)
    quad = np.array([[0.0, 0.0], [4.0, 0.0], [5.0, 3.0], [1.0, 2.0]])
    res = pmd.frechet_median(E, quad)
    cross = _line_intersection(quad[0], quad[2], quad[1], quad[3])
    np.testing.assert_allclose(res.median, cross, atol=1e-9)


def test_euclidean_triangle_with_a_wide_angle_has_its_median_at_that_vertex():
    # Fermat–Torricelli: an angle >= 120 degrees puts the median at its vertex (a
    # record: reached exactly through the record test, not only in the limit)
    E = pmd.Euclidean(dim=2)
    tri = np.array([[0.0, 0.0], [4.0, 0.3], [-4.0, 0.3]])
    res = pmd.frechet_median(E, tri, init=[0.5, 1.0])
    assert res.converged and res.grad_norm == 0.0
    np.testing.assert_array_equal(res.median, tri[0])


def test_a_start_at_a_record_that_is_not_the_median_moves_off_it():
    # Vardi–Zhang: at a record the pull of the others (|R| = 1/2 + 1/4 ... > w_k) wins
    E = pmd.Euclidean(dim=1)
    data = np.array([[0.0], [1.0], [3.0], [3.5]])
    res = pmd.frechet_median(E, data, init=[3.5])
    # every point of [1, 3] is a median of these four: F is flat there
    assert res.converged and 1.0 - 1e-9 <= res.median[0] <= 3.0 + 1e-9


@pytest.mark.parametrize("name", list(CASES))
def test_median_at_a_record_on_curved_spaces(name):
    # a record with enough weight is the median: |R_k| <= w_k at it
    M, r = CASES[name]
    rng = np.random.default_rng(3)
    _, data = _ball_data(M, rng, 9, r)
    w = np.ones(9)
    w[4] = 9.0  # weight 9/17 > 1/2: the weighted median is that record
    res = pmd.frechet_median(M, data, weights=w)
    assert res.converged and res.grad_norm == 0.0
    assert float(M.dist(res.median, data[4])) < 1e-12


def test_weights_equal_repeated_records():
    S = pmd.Sphere(dim=2)
    _, data = _ball_data(S, np.random.default_rng(1), 12, 0.6)
    w = np.arange(1.0, 13.0) % 3 + 1
    rep = np.repeat(data, w.astype(int), axis=0)
    a = pmd.frechet_median(S, data, weights=w)
    b = pmd.frechet_median(S, rep)
    assert float(S.dist(a.median, b.median)) < 1e-8


def test_single_record_and_non_convergence_warning():
    S = pmd.Sphere(dim=2)
    one = pmd.frechet_median(S, np.array([[0.0, 0.0, 1.0]]))
    assert one.method == "single-point" and one.converged
    _, data = _ball_data(S, np.random.default_rng(2), 30, 0.6)
    with pytest.warns(ConvergenceWarning, match="did not converge in 1 iterations"):
        res = pmd.frechet_median(S, data, max_iter=1)
    assert not res.converged
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert pmd.frechet_median(S, data).converged


@pytest.mark.parametrize(
    ("data", "kwargs", "msg"),
    [
        (np.zeros((0, 3)), {}, "data is empty: the Fréchet median"),
        (np.array([[0.0, 0.0, 1.0], [0.0, 1.0, 0.0]]), {"weights": [1.0]}, "weights must"),
        (np.array([[0.0, 0.0, 1.0], [0.0, 1.0, 0.0]]), {"tol": -1.0}, "tol"),
    ],
)
def test_bad_input(data, kwargs, msg):
    with pytest.raises(ValueError, match=msg):
        pmd.frechet_median(pmd.Sphere(dim=2), data, **kwargs)


def test_dask_median_equals_numpy():
    da = pytest.importorskip("dask.array")
    S = pmd.Sphere(dim=2)
    _, data = _ball_data(S, np.random.default_rng(5), 500, 0.5)
    lazy = da.from_array(data, chunks=(120, 3))
    dom = pmd.DataDomain(S, [0.0, 0.0, 1.0], 0.5 + 1e-9)
    m_np = pmd.frechet_median(S, data)
    m_lazy = pmd.frechet_median(S, lazy)
    m_checked = pmd.frechet_median(S, dom.check(lazy))
    assert float(S.dist(m_lazy.median, m_np.median)) < 1e-9
    assert float(S.dist(m_checked.median, m_np.median)) < 1e-9
