"""The fused hyperbolic kernels (issue 38 item 6) against the PyTensor graphs they replace.

Oracle 1: ``Hyperbolic.pt_log_volume_density(c)`` and
``pt_frechet_gradient_norm(pt_exp_frame(frame, c), data)`` with ``pytensor.grad``,
compiled once per dimension (d = 1, 2, 5), at chart origins at the base point and at
distance 2 from it (a boost), ``|c|`` from 1e-9 (every series branch) to 5, ``n`` in
{1, 7, 1000}, records spread 0.05 and 1.0 around the chart's origin or around ``x``
itself. Oracle 2: central differences of the kernel's own value.

Tolerance: ``rtol = 1e-9`` plus an absolute ``64 eps cosh^2(R)`` times the scale of
the quantity (``n (1 + rho_max)`` for ``N``; ``_compare`` for its gradient), ``R`` the
largest distance of ``x`` and the records from the base point: the Minkowski products
of the graph and of the kernel both cancel terms of size ``cosh^2 R``
(``Hyperbolic.rounding_error``; both measured within that of 50-digit mpmath).
Seed 20261128.
"""

from __future__ import annotations

import math

import numpy as np
import pytensor
import pytensor.tensor as pt
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pymc_manidp.geometry._numba.fused import hyperbolic as fused
from pymc_manidp.geometry.euclidean import Euclidean
from pymc_manidp.geometry.hyperbolic import Hyperbolic

DIMS = (1, 2, 5)
SIZES = (1, 7, 64, 1000)  # blocks of 64 records: part of one, one, many and a part
SCALES = (1e-9, 0.01, 1.0, 5.0)
SPREADS = (0.05, 1.0)
DRAWS = 20
SEED = 20261128
EPS = np.finfo(float).eps


@pytest.fixture(scope="module")
def graphs():
    """``dim -> f(c, origin, basis, data) = (lvd, dlvd/dc, N, dN/dc)``, compiled once."""
    out = {}
    for d in DIMS:
        H = Hyperbolic(dim=d)
        c, data = pt.dvector("c"), pt.dmatrix("data")
        frame = {"origin": pt.dvector("origin"), "basis": pt.dmatrix("basis")}
        lvd = H.pt_log_volume_density(c)
        kn = H.pt_frechet_gradient_norm(H.pt_exp_frame(frame, c), data)
        out[d] = pytensor.function(
            [c, frame["origin"], frame["basis"], data],
            [lvd, pytensor.grad(lvd, c), kn, pytensor.grad(kn, c)],
            mode="FAST_RUN",
        )
    return out


def _origins(H, rng):
    """The base point, and a point at distance 2 from it in a random direction."""
    w = rng.normal(size=H.dim)
    boosted = H.exp_coords(H.origin, 2.0 * w / np.linalg.norm(w))
    return (H.origin, boosted)


def _records(H, center, spread, n, rng):
    """``n`` records ``exp_center(spread * z)``, ``z`` standard normal in the frame."""
    basis = H.tangent_basis(center)
    return np.ascontiguousarray(H.exp(center[None], (spread * rng.normal(size=(n, H.dim))) @ basis))


def _kernel(H, frame, c, data, weight=1.0):
    """The two kernels' values and gradients (fresh accumulators)."""
    p = fused.params(H)
    g_lvd, g_kn = np.zeros(H.dim), np.zeros(H.dim)
    lvd = fused.log_volume_density(c, frame, p, g_lvd)
    kn = fused.kng_norm(c, frame, p, data, weight, g_kn)
    return lvd, g_lvd, kn, g_kn


def _compare(H, graph, origin, c, data):
    frame = H.chart_frame(origin)
    want = graph(c, frame["origin"], frame["basis"], data)
    got = _kernel(H, tuple(frame.values()), c, data)
    x = H.exp_coords(origin, c)
    base = H.origin
    reach = max(float(H.dist(base, x)), float(H.dist(base[None], data).max()))
    rho_max = float(H.dist(x[None], data).max())
    atol = 64 * EPS * math.cosh(reach) ** 2 * len(data) * (1 + rho_max)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-13, atol=1e-300)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-9, atol=1e-15 * np.abs(c).max())
    np.testing.assert_allclose(got[2], want[2], rtol=1e-9, atol=atol)
    # dN/dc = -dx/dc (W + F) T'/N: W + F has the scale n cosh(rho_max), dx/dc that of
    # sinh|c|/|c|; where N is small against the terms of T', its direction is rounding
    r = float(np.linalg.norm(c))
    stretch = math.sinh(r) / r if r > 1e-3 else 1.0
    n = len(data)
    g_scale = stretch * n * math.cosh(rho_max) * (1 + n * rho_max / max(want[2], 1e-300))
    g_atol = 64 * EPS * math.cosh(reach) ** 2 * g_scale
    np.testing.assert_allclose(got[3], want[3], rtol=1e-9, atol=g_atol)
    return got


@pytest.mark.parametrize("scale", SCALES)
@pytest.mark.parametrize("d", DIMS)
def test_kernels_equal_the_graph(graphs, d, scale):
    rng = np.random.default_rng([SEED, d, SCALES.index(scale)])
    H = Hyperbolic(dim=d)
    tried = 0
    for origin in _origins(H, rng):
        for n in SIZES:
            for spread in SPREADS:
                for draw in range(DRAWS):
                    c = rng.normal(size=d)
                    c *= scale / np.linalg.norm(c)
                    # records around the chart's origin, or around x (records at
                    # distance ~0 from x: the series of asinh(r)/r)
                    center = origin if draw % 2 else H.exp_coords(origin, c)
                    data = _records(H, center, spread, n, rng)
                    _compare(H, graphs[d], origin, c, data)
                    tried += 1
    assert tried == 2 * len(SIZES) * len(SPREADS) * DRAWS


@pytest.mark.parametrize("d", DIMS)
def test_log_volume_density_across_its_branches(graphs, d):
    """Both sides of the series (``|c| = 0.05``) and of the large form (``|c| = 20``)."""
    rng = np.random.default_rng([SEED, 2, d])
    H = Hyperbolic(dim=d)
    frame = H.chart_frame(H.origin)
    data = _records(H, H.origin, 0.5, 3, rng)
    for r in (0.0, 5e-324, 1e-9, 0.0499, 0.05, 0.0501, 1 / 3, 19.99, 20.0, 20.01, 40.0):
        u = rng.normal(size=d)
        c = r * u / np.linalg.norm(u)
        want = graphs[d](c, frame["origin"], frame["basis"], data)
        g = np.zeros(d)
        got = fused.log_volume_density(c, tuple(frame.values()), fused.params(H), g)
        np.testing.assert_allclose(got, want[0], rtol=1e-13, atol=1e-300)
        np.testing.assert_allclose(g, want[1], rtol=1e-9, atol=1e-300)


@given(
    st.lists(
        st.one_of(
            st.floats(-5.0, 5.0, allow_subnormal=True),
            st.sampled_from([0.0, 5e-324, 1 / 3, 0.3333333333333333, math.nextafter(0.01, 1)]),
        ),
        min_size=2,
        max_size=2,
    )
)
def test_kernels_equal_the_graph_at_adversarial_coordinates(graphs, coords):
    """H^2, chart at distance 2 from the base point, records around it and one at ``x``."""
    H = Hyperbolic(dim=2)
    rng = np.random.default_rng(SEED)
    origin = _origins(H, rng)[1]
    c = np.array(coords)
    data = _records(H, origin, 1.0, 7, rng)
    data[3] = H.exp_coords(origin, c)  # a record at x: s_i = 0 up to rounding
    _compare(H, graphs[2], origin, c, data)


@pytest.mark.parametrize("d", DIMS)
def test_gradient_is_the_value_s_central_difference(d):
    rng = np.random.default_rng([SEED, 3, d])
    H = Hyperbolic(dim=d)
    origin = _origins(H, rng)[1]
    frame = tuple(H.chart_frame(origin).values())
    p = fused.params(H)
    for scale in (1e-9, 0.01, 1.0, 5.0):
        for spread, around_x in ((0.05, False), (1.0, False), (0.05, True)):
            c = rng.normal(size=d)
            c *= scale / np.linalg.norm(c)
            # around x: phi's series branch (rho < 0.1), and one record at x itself
            center = H.exp_coords(origin, c) if around_x else origin
            data = _records(H, center, spread, 50, rng)
            if around_x:
                data[0] = center
            g = np.zeros(d)
            value = fused.kng_norm(c, frame, p, data, 1.0, g)
            g_lvd = np.zeros(d)
            fused.log_volume_density(c, frame, p, g_lvd)
            h = 1e-6
            fd, fd_lvd = np.empty(d), np.empty(d)
            for a in range(d):
                e = np.zeros(d)
                e[a] = h
                vals = [
                    fused.kng_norm(c + s * e, frame, p, data, 1.0, np.zeros(d)) for s in (1, -1)
                ]
                fd[a] = (vals[0] - vals[1]) / (2 * h)
                lv = [fused.log_volume_density(c + s * e, frame, p, np.zeros(d)) for s in (1, -1)]
                fd_lvd[a] = (lv[0] - lv[1]) / (2 * h)
            # the differences' rounding: eps N / h, amplified by cosh^2 of the reach
            atol = 1e-8 * value * math.cosh(scale + 3.0) ** 2
            np.testing.assert_allclose(g, fd, rtol=1e-6, atol=atol)
            np.testing.assert_allclose(g_lvd, fd_lvd, rtol=1e-6, atol=1e-8)


def test_gradient_is_added_times_weight():
    """``g_c`` is an accumulator: the kernels add ``weight * dN/dc`` to what it holds."""
    H = Hyperbolic(dim=2)
    rng = np.random.default_rng([SEED, 4])
    origin = _origins(H, rng)[1]
    frame = tuple(H.chart_frame(origin).values())
    data = _records(H, origin, 1.0, 9, rng)
    c = np.array([0.3, 1 / 3])
    p = fused.params(H)
    once = np.zeros(2)
    fused.kng_norm(c, frame, p, data, 1.0, once)
    g = np.ones(2)
    value = fused.kng_norm(c, frame, p, data, -2.5, g)
    np.testing.assert_allclose(g, 1.0 - 2.5 * once, rtol=1e-15)
    # the value from the NumPy log map, summed and measured in the Minkowski norm
    x = H.exp_coords(origin, c)
    total = H.log(x[None], data).sum(axis=0)
    assert value == pytest.approx(np.sqrt(H.inner(x, total, total)), rel=1e-12)
    lvd_once = np.zeros(2)
    fused.log_volume_density(c, frame, p, lvd_once)
    g2 = np.full(2, 7.0)
    fused.log_volume_density(c, frame, p, g2)
    np.testing.assert_allclose(g2, 7.0 + lvd_once, rtol=1e-15)


def test_one_record_at_x_gives_a_finite_gradient():
    """``n = 1`` record at ``x``: the norm is 0 up to rounding, the gradient finite."""
    H = Hyperbolic(dim=2)
    origin = H.exp_coords(H.origin, np.array([2.0, 0.0]))
    frame = tuple(H.chart_frame(origin).values())
    c = np.array([0.2, -0.1])
    data = np.ascontiguousarray(H.exp_coords(origin, c)[None])
    g = np.zeros(2)
    value = fused.kng_norm(c, frame, fused.params(H), data, 1.0, g)
    assert value < 1e-7
    assert np.all(np.isfinite(g))


def test_params_refuse_another_space():
    assert fused.params(Hyperbolic(dim=3)).shape == (0,)
    with pytest.raises(TypeError, match="Hyperbolic instance"):
        fused.params(Euclidean(dim=2))
    with pytest.raises(TypeError, match="Hyperbolic instance"):
        fused.params(None)
