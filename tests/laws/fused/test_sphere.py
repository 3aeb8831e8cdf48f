"""The sphere's fused kernels (``pymc_manidp/geometry/_numba/fused/sphere.py``, issue 38 item 6)
against their two oracles: the PyTensor graph they replace (``Sphere.pt_log_volume_density``,
``Sphere.pt_frechet_gradient_norm(Sphere.pt_exp_frame(frame, c), data)`` and
``pytensor.grad`` of both) and central finite differences of their own values.

Cases: ``d`` in 1, 2, 5, radius 1 and 2.5, origins at a pole, its antipode (the other
sign of the Householder frame) and random points; ``|c|/R`` from 0 and 1e-9 (the series
of ``cos``, ``sinc`` and ``log sinc``), across each series' threshold, to 0.99 pi (the
injectivity radius); ``n`` in 1, 7, 1000 records spread 0.05 and 0.5 of ``pi R`` around
the origin, and records at ``x`` itself and at angles across the thresholds of
``theta/sin(theta)`` (``q = sin^2 = 1e-8`` and ``1e-3``) and of the kernel's ``acos``
(``c = +-1/2``), with ``n`` across the kernel's blocks of 64 records. The kernel's ``acos`` against
libm's (1 ulp) and its ``f``, ``f'`` against 40-digit mpmath at and beside every
threshold. Seeds are fixed in each test.

Tolerances: the log volume density 1e-12 (relative); the norm 1e-11 of
``|G| + 1e-3 n R`` and its gradient 1e-9 of ``|grad| + n`` (``G = P - S x`` cancels when
``x`` is near the records' mean, so its rounding is relative to ``n R``, not to
``|G|``), plus, for each record at angle ``theta`` from ``x``, ``1e-14 R (pi-theta)^-2``
and ``1e-14 (pi-theta)^-3`` (the norm's conditioning near ``x``'s antipode:
:func:`check_close`); finite differences 1e-6.
"""

from __future__ import annotations

import math

import mpmath
import numba
import numpy as np
import pytensor
import pytensor.tensor as pt
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pymc_manidp.geometry import Euclidean, Sphere
from pymc_manidp.geometry._numba import pt_numerics
from pymc_manidp.geometry._numba.fused import sphere as fused

CASES = [(1, 1.0), (1, 2.5), (2, 1.0), (2, 2.5), (5, 1.0), (5, 2.5)]


@pytest.fixture(scope="module")
def graphs():
    """One compiled function per ``(d, R)``: the four outputs, frame as inputs."""
    out = {}
    for d, radius in CASES:
        space = Sphere(dim=d, radius=radius)
        c, data = pt.dvector("c"), pt.dmatrix("data")
        origin, basis = pt.dvector("origin"), pt.dmatrix("basis")
        frame = {"origin": origin, "basis": basis}
        lvd = space.pt_log_volume_density(c)
        norm = space.pt_frechet_gradient_norm(space.pt_exp_frame(frame, c), data)
        out[d, radius] = pytensor.function(
            [c, origin, basis, data],
            [lvd, norm, pytensor.grad(lvd, c), pytensor.grad(norm, c)],
            mode="FAST_RUN",
        )
    return out


def fused_all(space, c, frame, data, weight=1.0):
    """The kernels' values and gradients, as the graph function returns them."""
    prm = fused.params(space)
    tup = (frame["origin"], frame["basis"])
    g_lvd, g_norm = np.zeros(space.dim), np.zeros(space.dim)
    lvd = fused.log_volume_density(c, tup, prm, g_lvd)
    norm = fused.kng_norm(c, tup, prm, np.ascontiguousarray(data), weight, g_norm)
    return lvd, norm, g_lvd, g_norm


def origins(space, rng):
    pole = np.zeros(space.dim + 1)
    pole[-1] = space.radius
    return [pole, -pole, space.sample_uniform(rng), space.generic_point]


def records(space, center, n, spread, rng):
    """``n`` records at geodesic distance up to ``spread * pi R`` from ``center``."""
    v = space.to_tangent(center, rng.standard_normal((n, space.dim + 1)))
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    r = spread * np.pi * space.radius * rng.uniform(0, 1, (n, 1))
    return space.exp(np.broadcast_to(center, v.shape), r * v)


def chart_coords(d, radius, rng):
    """Directions times ``|c|/R`` in 0, 1e-9, around 1e-4 and 0.05, moderate, 0.99 pi."""
    mags = [0.0, 1e-9, 0.99e-4, 1.01e-4, 0.0499, 0.0501, 0.3, 1.0, 2.0, 0.99 * np.pi]
    out = []
    for mag in mags:
        u = rng.standard_normal(d)
        out.append(mag * radius * u / np.linalg.norm(u))
    return out


def check_close(space, got, want, c, frame, data):
    lvd, norm, g_lvd, g_norm = got
    lvd0, norm0, g_lvd0, g_norm0 = want
    n = len(data)
    scale = n * space.radius
    assert abs(lvd - lvd0) <= 1e-12 * (1 + abs(lvd0)), (lvd, lvd0)
    # a record at angle theta from x makes the norm ill-conditioned: the rounding of c_i
    # (eps) moves f(c_i) |u_i| by ~ eps R (pi-theta)^-2 and f'(c_i) |u_i|^2 by
    # ~ eps (pi-theta)^-3, in either computation (7e-6 from the antipode on S^1: the
    # graph's gradient and the kernel's both ~2 off in 1,000, mpmath's exact derivative
    # at the float64 inputs between them)
    x = space.exp(frame["origin"], c @ frame["basis"])
    gap = np.pi - space.dist(x, data) / space.radius
    tol = 1e-11 * (abs(norm0) + 1e-3 * scale) + 1e-14 * space.radius * np.sum(gap**-2.0)
    assert abs(norm - norm0) <= tol, (norm, norm0)
    np.testing.assert_allclose(g_lvd, g_lvd0, rtol=0, atol=1e-12 * (1 + np.abs(g_lvd0).max()))
    tol = 1e-9 * (np.abs(g_norm0).max() + n) + 1e-14 * np.sum(gap**-3.0)
    np.testing.assert_allclose(g_norm, g_norm0, rtol=0, atol=tol)


def near_x_records(space, x, rng):
    """Records at ``x`` and at angles across ``q = 1e-8`` and ``q = 1e-3`` from it."""
    angles = [0.0, 1e-9, 0.99e-4, 1.01e-4, 0.0315, 0.0317, 0.2]
    v = space.to_tangent(x, rng.standard_normal((len(angles), space.dim + 1)))
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    r = space.radius * np.asarray(angles)[:, None]
    return space.exp(np.broadcast_to(x, v.shape), r * v)


@pytest.mark.parametrize(("d", "radius"), CASES)
def test_matches_the_graph(graphs, d, radius):
    """Values and gradients equal the graph's at 4 origins x 10 chart points x 4 data
    sets (n = 1, 7, 1000 at spread 0.05 and 0.5 of pi R): seed 38."""
    space, graph = Sphere(dim=d, radius=radius), graphs[d, radius]
    rng = np.random.default_rng(38)
    for origin in origins(space, rng):
        frame = space.chart_frame(origin)
        sets = [
            records(space, origin, 1, 0.5, rng),
            records(space, origin, 7, 0.05, rng),
            records(space, origin, 1000, 0.05, rng),
            records(space, origin, 1000, 0.5, rng),
        ]
        for c in chart_coords(d, radius, rng):
            for data in sets:
                want = graph(c, frame["origin"], frame["basis"], data)
                check_close(space, fused_all(space, c, frame, data), want, c, frame, data)


@pytest.mark.parametrize(("d", "radius"), CASES)
def test_records_at_and_near_the_point(graphs, d, radius):
    """Records at ``x = exp(c)`` itself (the series branch of ``theta/sin(theta)``, also
    at ``q <= 0`` by rounding) and across both thresholds: seed 6."""
    space, graph = Sphere(dim=d, radius=radius), graphs[d, radius]
    rng = np.random.default_rng(6)
    origin = space.sample_uniform(rng)
    frame = space.chart_frame(origin)
    for c in chart_coords(d, radius, rng)[:-1]:
        x = space.exp(origin, c @ frame["basis"])
        data = np.vstack([near_x_records(space, x, rng), records(space, origin, 20, 0.05, rng)])
        got = fused_all(space, c, frame, data)
        assert np.all(np.isfinite(got[3]))
        check_close(space, got, graph(c, frame["origin"], frame["basis"], data), c, frame, data)


def central_difference(fun, c, h):
    out = np.empty_like(c)
    for k in range(c.size):
        e = np.zeros_like(c)
        e[k] = h
        out[k] = (fun(c + e) - fun(c - e)) / (2 * h)
    return out


@pytest.mark.parametrize(("d", "radius"), CASES)
def test_gradients_are_the_values_derivatives(d, radius):
    """Central differences (step 1e-6 R) of the kernels' own values, at chart points
    away from the series thresholds (a difference across one sees the jump of rounding
    between two branches): rtol 1e-6, seed 7."""
    space = Sphere(dim=d, radius=radius)
    rng = np.random.default_rng(7)
    origin = space.sample_uniform(rng)
    frame = space.chart_frame(origin)
    tup, prm = (frame["origin"], frame["basis"]), fused.params(space)
    data = records(space, origin, 50, 0.3, rng)
    h = 1e-6 * radius
    for mag in [0.01, 0.3, 1.0, 2.0, 0.99 * np.pi]:
        u = rng.standard_normal(d)
        c = mag * radius * u / np.linalg.norm(u)
        _, _, g_lvd, g_norm = fused_all(space, c, frame, data)
        fd_lvd = central_difference(
            lambda c: fused.log_volume_density(c, tup, prm, np.zeros(d)), c, h
        )
        fd_norm = central_difference(
            lambda c: fused.kng_norm(c, tup, prm, data, 1.0, np.zeros(d)), c, h
        )
        np.testing.assert_allclose(g_lvd, fd_lvd, rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(g_norm, fd_norm, rtol=1e-6, atol=1e-6 * len(data))


_MAGS = st.one_of(
    st.sampled_from(
        [0.0, 5e-324, 1e-300, 1e-9, 1e-4, 0.05, 1 / 3, 0.3333333333333333, 0.99 * math.pi]
    ).flatmap(lambda m: st.sampled_from([m, math.nextafter(m, 0.0), math.nextafter(m, math.inf)])),
    st.floats(0.0, 0.99 * math.pi),
)


@given(mag=_MAGS, seed=st.integers(0, 2**32 - 1))
def test_matches_the_graph_at_adversarial_radii(graphs, mag, seed):
    """``|c|/R`` at the series thresholds (s = 1e-8, 0.0025) and one ulp either side,
    subnormal and zero: the same branches as the graph's (S^2 of radius 2.5)."""
    d, radius = 2, 2.5
    space = Sphere(dim=d, radius=radius)
    rng = np.random.default_rng(seed)
    origin = space.sample_uniform(rng)
    frame = space.chart_frame(origin)
    u = rng.standard_normal(d)
    c = mag * radius * u / np.linalg.norm(u)
    data = records(space, origin, 7, 0.3, rng)
    want = graphs[d, radius](c, frame["origin"], frame["basis"], data)
    check_close(space, fused_all(space, c, frame, data), want, c, frame, data)


def test_gradient_is_added_times_the_weight():
    """``g_c`` accumulates ``weight * grad`` (the Op sums several terms into one)."""
    space = Sphere(dim=2, radius=2.5)
    rng = np.random.default_rng(1)
    origin = space.sample_uniform(rng)
    frame = space.chart_frame(origin)
    tup, prm = (frame["origin"], frame["basis"]), fused.params(space)
    data = records(space, origin, 30, 0.3, rng)
    c = np.array([0.4, -0.7])
    _, norm, g_lvd, g_norm = fused_all(space, c, frame, data)
    for weight in [0.0, -0.37, 2.0]:
        g = np.array([1.0, -2.0])
        assert fused.kng_norm(c, tup, prm, data, weight, g) == norm
        np.testing.assert_allclose(g, [1.0, -2.0] + weight * g_norm, rtol=1e-15)
    g = np.array([1.0, -2.0])
    fused.log_volume_density(c, tup, prm, g)
    np.testing.assert_allclose(g, np.array([1.0, -2.0]) + g_lvd, rtol=1e-15)


@pytest.mark.parametrize("d", [1, 2, 5])
def test_log_volume_density_beyond_the_injectivity_radius(graphs, d):
    """From ``|c| = pi R`` on the graph's ``-inf`` (``0`` on S^1, whose density is flat),
    and no gradient added."""
    space = Sphere(dim=d, radius=2.5)
    frame = space.chart_frame(space.generic_point)
    tup, prm = (frame["origin"], frame["basis"]), fused.params(space)
    c = np.full(d, (1 + 1e-12) * np.pi * 2.5 / np.sqrt(d))
    g = np.zeros(d)
    got = fused.log_volume_density(c, tup, prm, g)
    want = graphs[d, 2.5](c, frame["origin"], frame["basis"], space.generic_point[None])[0]
    assert got == want == (0.0 if d == 1 else -np.inf)
    assert np.all(g == 0.0)


def test_constants_are_the_graphs():
    """The kernel's thresholds and series are pt_numerics' (each value takes the
    graph's branch)."""
    assert fused._SMALL_SQ == pt_numerics._SMALL_SQ
    assert fused._LOG_SERIES_SQ == pt_numerics._LOG_SERIES_SQ
    assert fused._LOG_SINC_COEF == pt_numerics._LOG_SINC_COEF


def test_params_is_the_radius_and_refuses_other_spaces():
    assert fused.params(Sphere(dim=3, radius=2.5)).tolist() == [2.5]
    assert fused.params(Sphere(dim=3)).dtype == np.float64
    with pytest.raises(TypeError, match="need a Sphere, got Euclidean"):
        fused.params(Euclidean(dim=2))


def _q_edge(q):
    """The ``c > 0`` at which ``(1 - c)(1 + c)`` is about ``q``."""
    return math.sqrt(1.0 - q)


# the kernel's thresholds in c: acos's reduction (|c| = 1/2), the series of f and f'
# (q = 1e-8, 1e-3), the ends; each with its neighbours one ulp either side
_C_EDGES = [
    -1.0, -0.5, -1 / 3, -0.3333333333333333, -5e-324, 0.0, 5e-324, 1 / 3, 0.5,
    _q_edge(fused._ASIN_SERIES), _q_edge(fused._SMALL_SQ), 1.0,
]  # fmt: skip
_CS = st.one_of(
    st.sampled_from(_C_EDGES).flatmap(
        lambda m: st.sampled_from([m, math.nextafter(m, -2.0), math.nextafter(m, 2.0)])
    ),
    st.floats(-1.0, 1.0),
)


@given(c=_CS)
def test_acos_is_libms_to_one_ulp(c):
    """The kernel's branch-free ``acos`` (fdlibm's reduction and rational) is within one
    ulp of libm's on ``[-1, 1]``, at each branch point of its reduction and beside it."""
    if abs(c) > 1.0:  # the neighbours of -1 and 1 outside
        assert math.isnan(fused._acos(c))
        return
    want = math.acos(c)
    assert abs(fused._acos(c) - want) <= math.ulp(want), (c, fused._acos(c), want)


@given(c=st.sampled_from([math.nextafter(1.0, 2.0), math.nextafter(-1.0, -2.0), 1e308, -1e308]))
def test_acos_is_nan_outside_its_domain(c):
    assert math.isnan(fused._acos(c))
    assert math.isnan(fused._acos(math.nan)) and math.isnan(fused._acos(math.inf))


@numba.njit(error_model="numpy")
def _acos_loop(cs):  # the vectorized loop the kernel runs, not one call at a time
    out = np.empty_like(cs)
    for i in range(cs.size):
        out[i] = fused._acos(cs[i])
    return out


def test_acos_is_libms_on_a_dense_grid():
    """2e5 points: uniform on [-1, 1] and geometric towards -1, 0 and 1 (seed 3)."""
    rng = np.random.default_rng(3)
    tail = np.logspace(-17, 0, 20_000)
    cs = np.concatenate([rng.uniform(-1, 1, 100_000), 1 - tail, tail - 1, tail, -tail])
    got = _acos_loop(cs)
    want = np.array([math.acos(c) for c in cs])
    ulps = np.array([math.ulp(w) for w in want])
    assert np.all(np.abs(got - want) <= ulps)


def _weights_mpmath(c):
    """``theta/sin(theta)`` and its derivative in ``c = cos(theta)``, 40 digits."""
    with mpmath.workdps(40):
        cm = mpmath.mpf(c)
        q = (1 - cm) * (1 + cm)
        f = mpmath.acos(cm) / mpmath.sqrt(q)
        return float(f), float((cm * f - 1) / q)


@given(c=_CS)
def test_weights_are_mpmaths(c):
    """``f`` to 1e-15 (relative) on ``(-1, 1)``; ``f'`` to ``2e-15 (1 + 1/q)`` for
    ``c > 0`` (the cancellation in ``(c f - 1)/q`` above ``q = 1e-3``, where its series
    stops) and 2e-15 for ``c <= 0``; at ``c = 1`` the limits 1 and -1/3, at ``c = -1``
    the graph's ``inf`` and ``-inf``, beyond them the graph's series and NaN."""
    f, fp = fused._weights(c)
    if c >= 1.0:  # q <= 0 by rounding: the series, as the graph
        assert abs(f - 1.0) <= 1e-15 and abs(fp + 1 / 3) <= 1e-15, (c, f, fp)
        return
    if c == -1.0:
        assert (f, fp) == (math.inf, -math.inf)
        return
    if c < -1.0:  # the graph's sqrt of a negative q
        assert math.isnan(f) and math.isnan(fp)
        return
    f0, fp0 = _weights_mpmath(c)
    q = (1.0 - c) * (1.0 + c)
    assert abs(f - f0) <= 1e-15 * f0, (c, f, f0)
    tol = 2e-15 * (1.0 + 1.0 / q) if c > 0.0 else 2e-15
    assert abs(fp - fp0) <= tol * abs(fp0), (c, fp, fp0)


@pytest.mark.parametrize(("d", "radius"), [(1, 1.0), (2, 2.5), (5, 1.0)])
@pytest.mark.parametrize("n", [1, 63, 64, 65, 129])
def test_records_at_the_kernels_thresholds(graphs, d, radius, n):
    """Records beside each branch point of the kernel's ``acos`` (angles pi/3, 2pi/3 and
    pi/2 from ``x``, 1e-13 either side) and of ``f``, ``f'`` (plus records at ``x``), the
    rest spread 0.3 of ``pi R``; ``n`` across the blocks of 64 records: the graph's
    values and gradients (seed 11)."""
    space, graph = Sphere(dim=d, radius=radius), graphs[d, radius]
    rng = np.random.default_rng(11)
    origin = space.sample_uniform(rng)
    frame = space.chart_frame(origin)
    c = 0.3 * radius * rng.standard_normal(d)
    x = space.exp(origin, c @ frame["basis"])
    angles = np.pi * np.array([1 / 3, 2 / 3, 1 / 2])[:, None] + np.array([-1e-13, 0.0, 1e-13])
    v = space.to_tangent(x, rng.standard_normal((angles.size, space.dim + 1)))
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    edges = space.exp(np.broadcast_to(x, v.shape), radius * angles.reshape(-1, 1) * v)
    data = np.vstack([edges, near_x_records(space, x, rng)])
    data = np.vstack([data, records(space, origin, max(n - len(data), 0), 0.3, rng)])[:n]
    data = data[rng.permutation(n)]
    check_close(
        space,
        fused_all(space, c, frame, data),
        graph(c, frame["origin"], frame["basis"], data),
        c,
        frame,
        data,
    )
