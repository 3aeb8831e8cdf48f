"""Property tests of exp/log/dist on every manifold (hypothesis draws the seeds)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import pymc_manidp as pmd
from tests.cases import manifold_params, random_point, random_tangent, reach, standard

seeds = st.integers(min_value=0, max_value=2**32 - 1)
prop = settings(max_examples=25, deadline=None)
BATCH = 6


def _close_points(M, a, b, atol=1e-9):
    """Compare as points of M (as shapes for Kendall, where pre-shapes differ by rotation)."""
    if isinstance(M, pmd.KendallShape):
        np.testing.assert_allclose(M.dist(a, b), 0.0, atol=atol)
    else:
        scale = max(1.0, float(np.max(np.abs(a))))
        np.testing.assert_allclose(a, b, atol=atol * scale)


@manifold_params()
@prop
@given(seed=seeds)
def test_exp_log_round_trips(M, seed):
    rng = np.random.default_rng(seed)
    x = random_point(M, rng, BATCH)
    v, _ = random_tangent(M, x, rng)
    y = M.exp(x, v)
    # log(x, exp(x, v)) == v below the injectivity radius
    np.testing.assert_allclose(M.log(x, y), v, atol=1e-8 * max(1.0, float(np.abs(v).max())))
    # exp(x, log(x, y)) == y for arbitrary y within reach
    _close_points(M, M.exp(x, M.log(x, y)), standard(M, y))


@manifold_params()
@prop
@given(seed=seeds)
def test_dist_is_norm_of_log_and_symmetric(M, seed):
    rng = np.random.default_rng(seed)
    x = random_point(M, rng, BATCH)
    v, c = random_tangent(M, x, rng)
    y = M.exp(x, v)
    d = M.dist(x, y)
    np.testing.assert_allclose(d, np.linalg.norm(c, axis=-1), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(M.norm(x, M.log(x, y)), d, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(M.dist(y, x), d, rtol=1e-9, atol=1e-12)
    assert np.all(M.dist(x, x) < 1e-7)


@manifold_params()
@prop
@given(seed=seeds)
def test_triangle_inequality(M, seed):
    rng = np.random.default_rng(seed)
    x, y, z = (random_point(M, rng, BATCH) for _ in range(3))
    assert np.all(M.dist(x, z) <= M.dist(x, y) + M.dist(y, z) + 1e-10)


@manifold_params()
@prop
@given(seed=seeds)
def test_tangent_vectors_stay_tangent_and_points_stay_on_manifold(M, seed):
    rng = np.random.default_rng(seed)
    x = random_point(M, rng, BATCH)
    v, _ = random_tangent(M, x, rng)
    # frame vectors and log outputs are tangent: projection leaves them unchanged
    basis = M.tangent_basis(x)
    xb = np.expand_dims(x, -len(M.point_shape) - 1)
    np.testing.assert_allclose(M.to_tangent(xb, basis), basis, atol=1e-12)
    y = M.exp(x, v)
    w = M.log(y, x)
    np.testing.assert_allclose(M.to_tangent(y, w), w, atol=1e-10)
    # exp lands on the manifold (validate with a tight tolerance does not raise)
    if isinstance(M, pmd.Sphere):
        np.testing.assert_allclose(np.linalg.norm(y, axis=-1), M.radius, rtol=1e-13)
    elif isinstance(M, pmd.SPD):
        np.testing.assert_allclose(y, np.swapaxes(y, -1, -2), rtol=0, atol=0)
        assert np.all(np.linalg.eigvalsh(y) > 0)
    elif isinstance(M, pmd.KendallShape):
        np.testing.assert_allclose(y.mean(axis=-2), 0.0, atol=1e-14)
        np.testing.assert_allclose(np.sum(y**2, axis=(-2, -1)), 1.0, rtol=1e-13)
    M.validate(y)


@manifold_params()
@prop
@given(seed=seeds)
def test_chart_coordinates_round_trip(M, seed):
    rng = np.random.default_rng(seed)
    x = random_point(M, rng, BATCH)
    c = rng.normal(size=(BATCH, M.dim))
    c *= rng.uniform(0, reach(M), size=(BATCH, 1)) / np.linalg.norm(c, axis=-1, keepdims=True)
    np.testing.assert_allclose(M.log_coords(x, M.exp_coords(x, c)), c, atol=1e-8)
    # the frame is orthonormal
    basis = M.tangent_basis(x)
    nb = len(M.point_shape) + 1
    xe = np.expand_dims(x, (-nb, -nb - 1))
    gram = M.inner(xe, np.expand_dims(basis, -nb), np.expand_dims(basis, -nb - 1))
    np.testing.assert_allclose(gram, np.broadcast_to(np.eye(M.dim), gram.shape), atol=1e-12)
