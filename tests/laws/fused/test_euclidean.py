"""The fused Euclidean kernels (issue 38 item 6) against the PyTensor graphs they replace.

Oracle 1: ``Euclidean.pt_log_volume_density`` and
``pt_frechet_gradient_norm(pt_exp_frame(frame, c), data)`` (the generic route: ``n``
log maps and a sum), with ``pytensor.grad``, compiled once per dimension. Oracle 2:
central differences of the kernel's own value. Tolerance: ``rtol = 1e-12`` plus an
absolute ``64 eps n (|x| + max|y_i|)`` (the sum of ``n`` differences rounds at that
scale in either order). Seed 20261128.
"""

from __future__ import annotations

import numpy as np
import pytensor
import pytensor.tensor as pt
import pytest

from pymc_manidp.geometry._numba.fused import euclidean as fused
from pymc_manidp.geometry.euclidean import Euclidean
from pymc_manidp.geometry.hyperbolic import Hyperbolic

DIMS = (1, 2, 5)
SIZES = (1, 7, 13, 16, 1000)  # 8-record lanes: none, one and a tail, two, many
SCALES = (1e-9, 1.0, 5.0)
SPREADS = (0.05, 1.0)
DRAWS = 20
SEED = 20261128
EPS = np.finfo(float).eps


@pytest.fixture(scope="module")
def graphs():
    """``dim -> f(c, origin, data) = (lvd, dlvd/dc, N, dN/dc)``, the graphs compiled."""
    out = {}
    for d in DIMS:
        E = Euclidean(dim=d)
        c, origin, data = pt.dvector("c"), pt.dvector("origin"), pt.dmatrix("data")
        lvd = E.pt_log_volume_density(c)
        kn = E.pt_frechet_gradient_norm(E.pt_exp_frame({"origin": origin}, c), data)
        out[d] = pytensor.function(
            [c, origin, data],
            # log J = 0 does not depend on c: its gradient is zeros
            [lvd, pytensor.grad(lvd, c, disconnected_inputs="ignore"), kn, pytensor.grad(kn, c)],
            mode="FAST_RUN",
        )
    return out


def _frame(E, origin):
    return tuple(E.chart_frame(origin).values())


def _kernel(E, frame, c, data, weight=1.0):
    """The two kernels' values and gradients (fresh accumulators)."""
    p = fused.params(E)
    g_lvd, g_kn = np.zeros(E.dim), np.zeros(E.dim)
    lvd = fused.log_volume_density(c, frame, p, g_lvd)
    kn = fused.kng_norm(c, frame, p, data, weight, g_kn)
    return lvd, g_lvd, kn, g_kn


@pytest.mark.parametrize("d", DIMS)
def test_kernels_equal_the_graph(graphs, d):
    rng = np.random.default_rng([SEED, d])
    E = Euclidean(dim=d)
    tried = 0
    for scale in SCALES:
        for n in SIZES:
            for spread in SPREADS:
                for _ in range(DRAWS):
                    origin = rng.normal(size=d) * 3.0  # not the canonical origin 0
                    c = rng.normal(size=d)
                    c *= scale / np.linalg.norm(c)
                    data = np.ascontiguousarray(origin + spread * rng.normal(size=(n, d)))
                    want = graphs[d](c, origin, data)
                    got = _kernel(E, _frame(E, origin), c, data)
                    atol = 64 * EPS * n * (np.abs(origin + c).max() + np.abs(data).max())
                    assert got[0] == 0.0 and want[0] == 0.0
                    np.testing.assert_array_equal(got[1], 0.0)
                    np.testing.assert_allclose(got[2], want[2], rtol=1e-12, atol=atol)
                    # dN/dc = -n G/N: its scale is n, whatever N
                    np.testing.assert_allclose(
                        got[3], want[3], rtol=1e-12, atol=atol / max(want[2], 1e-300) + 1e-12 * n
                    )
                    tried += 1
    assert tried == len(SCALES) * len(SIZES) * len(SPREADS) * DRAWS


@pytest.mark.parametrize("d", DIMS)
def test_gradient_is_the_value_s_central_difference(d):
    rng = np.random.default_rng([SEED, 1, d])
    E = Euclidean(dim=d)
    origin = rng.normal(size=d)
    frame = _frame(E, origin)
    data = np.ascontiguousarray(origin + rng.normal(size=(50, d)))
    p = fused.params(E)
    for scale in (1e-9, 1.0, 5.0):
        c = rng.normal(size=d)
        c *= scale / np.linalg.norm(c)
        g = np.zeros(d)
        fused.kng_norm(c, frame, p, data, 1.0, g)
        h = 1e-5
        fd = np.empty(d)
        for a in range(d):
            e = np.zeros(d)
            e[a] = h
            up = fused.kng_norm(c + e, frame, p, data, 1.0, np.zeros(d))
            down = fused.kng_norm(c - e, frame, p, data, 1.0, np.zeros(d))
            fd[a] = (up - down) / (2 * h)
        np.testing.assert_allclose(g, fd, rtol=1e-7, atol=1e-7 * len(data))


def test_gradient_is_added_times_weight():
    """``g_c`` is an accumulator: the kernel adds ``weight * dN/dc`` to what it holds."""
    E = Euclidean(dim=3)
    frame = _frame(E, np.array([1.0, -2.0, 0.5]))
    data = np.ascontiguousarray(np.arange(12.0).reshape(4, 3))
    c = np.array([0.3, 1 / 3, -0.2])
    p = fused.params(E)
    once = np.zeros(3)
    fused.kng_norm(c, frame, p, data, 1.0, once)
    g = np.ones(3)
    value = fused.kng_norm(c, frame, p, data, -2.5, g)
    np.testing.assert_allclose(g, 1.0 - 2.5 * once, rtol=1e-15)
    # the value is |sum_i (y_i - x)| = |sum_i y_i - n x|, computed here directly
    total = data.sum(axis=0) - 4 * (frame[0] + c)
    assert value == pytest.approx(np.linalg.norm(total), rel=1e-15)
    g2 = np.full(3, 7.0)
    assert fused.log_volume_density(c, frame, p, g2) == 0.0
    np.testing.assert_array_equal(g2, 7.0)


def test_gradient_is_finite_at_zero_norm():
    """At ``x`` = the mean the norm is the graph's floor ``1e-150`` and the gradient finite."""
    E = Euclidean(dim=2)
    frame = _frame(E, np.zeros(2))
    data = np.ascontiguousarray([[1.0, 0.0], [-1.0, 0.0]])
    g = np.zeros(2)
    assert fused.kng_norm(np.zeros(2), frame, fused.params(E), data, 1.0, g) == 1e-150
    assert np.all(np.isfinite(g))


def test_params_refuse_another_space():
    assert fused.params(Euclidean(dim=4)).shape == (0,)
    with pytest.raises(TypeError, match="Euclidean instance"):
        fused.params(Hyperbolic(dim=2))
    with pytest.raises(TypeError, match="Euclidean instance"):
        fused.params("euclidean")
