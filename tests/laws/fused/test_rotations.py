"""The fused SO(3) kernels against the PyTensor graphs they replace, and their own
finite differences (geometry/_numba/fused/rotations.py; the contract: issue 38 item 6).

Oracle 1 is the graph: ``Rotations.pt_log_volume_density(c)`` and
``Rotations.pt_frechet_gradient_norm(Rotations.pt_exp_frame(frame, c), data)`` with
``pytensor.grad``, compiled once. Oracle 2: central differences of the kernels' own
values. Cases: origins the identity and two other rotations; ``|c|`` 0, 1e-9 (the
series of Rodrigues' coefficients, of the right Jacobian and of the volume density),
0.099 (just inside the last two series' ranges, where their last terms matter), 0.3,
1.5, 0.99 pi and 3.3 (past the chart: ``-inf``); records within 0.05, 1.0 and 2.5 rad
of the chart point (2.5: angles past pi/2, the ``atan2`` branch), one of them the chart
point itself (``theta/sin theta``'s series); n in {1, 7, 1000}.
Oracle 3, for the branch-free ``_atan2_upper`` that lets ``kng_norm``'s loop vectorize:
libm's ``math.atan2`` (2 ulp), over the whole upper half plane, at its reduction
thresholds, subnormal, huge, signed zeros and non-finite; and for the kernel at records a
few 1e-16 from each branch point of their terms (blocks of 128 full, partial and one
record long): the graph, and the value's terms by libm summed exactly (``math.fsum``).
Tolerances: values and gradients within ``rel 1e-9`` plus ``1e-12 n`` absolute
(sums of ``n`` terms of size up to ``pi``: rounding is ~1e-16 n; measured differences
were below 2e-13 at n = 1,000). Seeds are fixed (``default_rng(seed)`` below).
"""

from __future__ import annotations

import math

import numpy as np
import pytensor
import pytensor.tensor as pt
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pymc_manidp.geometry._numba.fused import rotations as fused
from pymc_manidp.geometry.rotations import Rotations

M = Rotations()
PARAMS = fused.params(M)
RADII = (0.0, 1e-9, 0.099, 0.3, 1.5, 0.99 * np.pi, 3.3)
SPREADS = (0.05, 1.0, 2.5)
SIZES = (1, 7, 1000)
DRAWS = 21  # per (radius, spread): every (n, origin) pair of the three of each, 7 times over


@pytest.fixture(scope="module")
def graph():
    """The graph's four outputs ``(logJ, dlogJ/dc, N, dN/dc)`` of ``(c, origin, basis, data)``."""
    c = pt.dvector("c")
    origin = pt.dmatrix("origin")
    basis = pt.dtensor3("basis")
    data = pt.dtensor3("data")
    frame = {"origin": origin, "basis": basis}
    lvd = M.pt_log_volume_density(c)
    norm = M.pt_frechet_gradient_norm(M.pt_exp_frame(frame, c), data)
    outs = [lvd, pytensor.grad(lvd, c), norm, pytensor.grad(norm, c)]
    fn = pytensor.function([c, origin, basis, data], outs, mode="FAST_RUN")

    def run(c, frame, data):
        return [np.asarray(o) for o in fn(c, frame["origin"], frame["basis"], data)]

    return run


def _origin(kind, rng):
    if kind == 0:
        return np.eye(3)
    return M.validate(M.from_rotvecs(rng.normal(size=3) * kind))


def _case(radius, spread, k):
    """Draw ``k`` of a case: ``(c, frame, data)``; records within ``spread`` rad of the
    chart point, the first of them the point itself when ``n > 1``."""
    rng = np.random.default_rng(1000 * k + int(1e3 * radius) + int(1e2 * spread))
    n = SIZES[k % 3]
    frame = M.chart_frame(_origin((k // 3) % 3, rng))
    c = rng.normal(size=3)
    c *= radius / np.linalg.norm(c)
    x = frame["origin"] @ M.from_rotvecs(c)
    axes = rng.normal(size=(n, 3))
    axes /= np.linalg.norm(axes, axis=1, keepdims=True)
    # angles in [spread/2, spread]: a lone record away from x, so the norm's direction
    # is not rounding noise (n = 1, a record at x: a test of its own)
    angles = spread * rng.uniform(0.5, 1.0, size=(n, 1))
    data = x @ M.from_rotvecs(axes * angles)
    if n > 1:
        data[0] = x
    return c, frame, np.ascontiguousarray(data)


def _kernels(c, frame, data, weight=1.0):
    g_lvd, g_norm = np.zeros(3), np.zeros(3)
    ft = tuple(frame.values())
    lvd = fused.log_volume_density(c, ft, PARAMS, g_lvd)
    norm = fused.kng_norm(c, ft, PARAMS, np.ascontiguousarray(data), weight, g_norm)
    return lvd, g_lvd, norm, g_norm


def _close(got, want, n):
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12 * max(n, 1))


def test_params_and_frame_layout():
    assert PARAMS.shape == (0,) and PARAMS.dtype == np.float64
    frame = M.chart_frame(np.eye(3))
    # the kernels read the frame as (origin, basis) in this order and shape
    assert list(frame) == ["origin", "basis"]
    assert frame["origin"].shape == (3, 3) and frame["basis"].shape == (3, 3, 3)


@pytest.mark.parametrize("spread", SPREADS)
@pytest.mark.parametrize("radius", RADII)
def test_kernels_equal_the_graph(graph, radius, spread):
    for k in range(DRAWS):
        c, frame, data = _case(radius, spread, k)
        want = graph(c, frame, data)
        got = _kernels(c, frame, data)
        n = len(data)
        assert got[0] == want[0] or abs(got[0] - want[0]) <= 1e-15 * abs(want[0])
        _close(got[1], want[1], 1)
        _close(got[2], want[2], n)
        _close(got[3], want[3], n)


@pytest.mark.parametrize("spread", SPREADS)
@pytest.mark.parametrize("radius", RADII[:-1])
def test_gradients_equal_finite_differences(radius, spread):
    # n = 1000 records within 0.05 rad put the norm's cone tip (N = 0) ~6e-4 from c:
    # h = 1e-7 keeps the truncation (h / 6e-4)^2 near 3e-8, the rounding ~1e-9
    h = 1e-7
    for k in range(0, DRAWS, 4):
        c, frame, data = _case(radius, spread, k)
        _, g_lvd, _, g_norm = _kernels(c, frame, data)
        fd_lvd, fd_norm = np.zeros(3), np.zeros(3)
        for j in range(3):
            e = np.zeros(3)
            e[j] = h
            plus, minus = _kernels(c + e, frame, data), _kernels(c - e, frame, data)
            fd_lvd[j] = (plus[0] - minus[0]) / (2 * h)
            fd_norm[j] = (plus[2] - minus[2]) / (2 * h)
        np.testing.assert_allclose(g_lvd, fd_lvd, rtol=1e-6, atol=1e-8)
        np.testing.assert_allclose(g_norm, fd_norm, rtol=1e-6, atol=1e-8 * len(data))


def test_theta_over_sin_and_its_partials_equal_the_graph():
    """The per-record ``f = theta/sin theta`` and ``df/ds``, ``df/dc``, against
    PyTensor's gradient of ``pt_numerics.theta_over_sin``, on both sides of its series
    (``s < 1e-8``): there the records' own terms are too small (``|v|^2 < 1e-8``) for
    the norm's gradient to show an error in ``df/ds``."""
    from pymc_manidp.geometry._numba import pt_numerics as ptn

    s, c = pt.dscalar("s"), pt.dscalar("c")
    f = ptn.theta_over_sin(s, c)
    fn = pytensor.function([s, c], [f, *pytensor.grad(f, [s, c])], mode="FAST_RUN")
    for theta in (0.0, 1e-9, 5e-5, math.nextafter(1e-4, 0), 1e-4, 2e-4, 0.3, 1.5, 2.0, 3.1):
        for scale in (1.0, 1.0 + 1e-7):  # on the group, and a record slightly off it
            sv, cv = (scale * math.sin(theta)) ** 2, scale * math.cos(theta)
            want = fn(sv, cv)
            got = fused._theta_over_sin(sv, cv)
            np.testing.assert_allclose(got[0::2], want[0::2], rtol=1e-14)
            # outside the series df/ds is a difference of two terms ~1/s: each route
            # loses ~eps/s to rounding (4e-9 at the branch's edge; times |v|^2 = s in
            # the gradient)
            series = sv < 1e-8 and cv > 0
            atol = 0.0 if series else 1e-15 / sv
            np.testing.assert_allclose(got[1], want[1], rtol=1e-14, atol=atol)


def test_weight_scales_and_adds_in_place(graph):
    c, frame, data = _case(0.3, 1.0, 4)
    want = graph(c, frame, data)
    g = np.array([1.0, -2.0, 0.5])
    norm = fused.kng_norm(c, tuple(frame.values()), PARAMS, data, -2.5, g)
    _close(norm, want[2], len(data))
    _close(g, np.array([1.0, -2.0, 0.5]) - 2.5 * want[3], len(data))
    g = np.array([1.0, -2.0, 0.5])
    fused.log_volume_density(c, tuple(frame.values()), PARAMS, g)
    _close(g, np.array([1.0, -2.0, 0.5]) + want[1], 1)


def test_lone_record_at_the_point(graph):
    """n = 1 and the record is x: the norm is rounding noise (both near 0) and its
    gradient may be anything finite (the contract: measure zero)."""
    for k in range(3):
        rng = np.random.default_rng(k)
        frame = M.chart_frame(_origin(k, rng))
        c = rng.normal(size=3)
        data = (frame["origin"] @ M.from_rotvecs(c))[None]
        want = graph(c, frame, data)
        _, _, norm, g = _kernels(c, frame, data)
        assert abs(norm) < 1e-14 and abs(want[2]) < 1e-14
        assert np.all(np.isfinite(g))


def test_outside_the_chart_is_minus_inf_with_no_gradient(graph):
    c, frame, data = _case(3.3, 0.05, 1)
    lvd, g_lvd, _, _ = _kernels(c, frame, data)
    assert lvd == -np.inf and np.all(g_lvd == 0.0)
    assert graph(c, frame, data)[0] == -np.inf
    # the edge itself, |c| = pi, is inside (the graph's s <= pi^2)
    edge = np.array([np.pi, 0.0, 0.0])
    got = _kernels(edge, frame, data)
    want = graph(edge, frame, data)
    assert math.isclose(got[0], 2 * math.log(2 / math.pi), rel_tol=1e-15)
    _close(got[0], want[0], 1)
    _close(got[1], want[1], 1)


_COORD = st.one_of(
    st.floats(-3.3, 3.3, allow_subnormal=True),
    st.sampled_from([0.0, 5e-324, -5e-324, 1 / 3, 0.3333333333333333, 1e-9, 1e-4, 0.1]),
    st.sampled_from([math.nextafter(1e-4, 0), math.nextafter(0.1, 1), math.pi / 2]),
)


@given(c=st.tuples(_COORD, _COORD, _COORD), kind=st.integers(0, 2))
def test_kernels_equal_the_graph_at_adversarial_coordinates(graph, c, kind):
    """Coordinates on either side of every series threshold (|w|^2 = 1e-8, |c|/2 = 0.05,
    |w|^2 = 1e-2), subnormal, and up to past the chart's edge."""
    c = np.array(c, float)
    rng = np.random.default_rng(kind)
    frame = M.chart_frame(_origin(kind, rng))
    x = frame["origin"] @ M.from_rotvecs(c)
    data = np.ascontiguousarray(x @ M.from_rotvecs(rng.normal(size=(7, 3)) * 0.4))
    want = graph(c, frame, data)
    got = _kernels(c, frame, data)
    assert got[0] == want[0] or abs(got[0] - want[0]) <= 1e-15 * abs(want[0])
    for j in (1, 2, 3):
        _close(got[j], want[j], 7)


def test_nan_coordinates_propagate_as_in_the_graph(graph):
    c = np.array([np.nan, 0.0, 0.0])
    frame = M.chart_frame(np.eye(3))
    data = np.stack([np.eye(3), M.from_rotvecs([0.1, 0.0, 0.0])])
    want = graph(c, frame, data)
    got = _kernels(c, frame, data)
    assert got[0] == want[0] == -np.inf  # the graph's switch: NaN is not inside the chart
    assert np.isnan(got[2]) and np.isnan(want[2])


# _atan2_upper's reduction thresholds (r against |c|): tan(3 pi/8) and 0.66
_TAN_3PI_8 = 2.414213562373095


def _ulp_close(got, want):
    """Within 2 ulp (relative 4.5e-16) of libm, or two subnormal steps of it."""
    return got == want or abs(got - want) <= 4.5e-16 * abs(want) + 1e-323


_ANY_C = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False, allow_subnormal=True),
    st.sampled_from([0.0, -0.0, 5e-324, -5e-324, 1 / 3, -0.3333333333333333, 1e308, -1e308]),
)
_R = st.one_of(
    st.floats(0.0, 1e308, allow_subnormal=True),
    st.sampled_from([0.0, 5e-324, 1 / 3, 0.3333333333333333, 1.0, 1e308]),
)


@given(r=_R, c=_ANY_C)
def test_atan2_upper_equals_libm(r, c):
    """Cephes' atan with selects only (what lets kng_norm's loop vectorize), against
    ``math.atan2`` in the whole upper half plane: subnormal to 1e308, both signs of
    ``c`` (``-0.0`` included: libm's ``pi``)."""
    got = fused._atan2_upper(r, c)
    assert _ulp_close(got, math.atan2(r, c)), (r, c, got, math.atan2(r, c))


@given(
    c=st.one_of(st.floats(1e-300, 1e300), st.sampled_from([1.0, 1 / 3, 5e-324, 1e308])),
    ratio=st.sampled_from([_TAN_3PI_8, 0.66]),
    steps=st.integers(-4, 4),
    sign=st.sampled_from([1.0, -1.0]),
)
def test_atan2_upper_at_its_reduction_thresholds(c, ratio, steps, sign):
    """``r`` a few ulp either side of ``tan(3 pi/8)|c|`` and ``0.66|c|``, where the
    reduction changes branch (a branch used past its range loses accuracy there)."""
    r = ratio * c
    for _ in range(abs(steps)):
        r = math.nextafter(r, math.inf if steps > 0 else 0.0)
    got = fused._atan2_upper(r, sign * c)
    assert _ulp_close(got, math.atan2(r, sign * c)), (r, sign * c, got)


def test_atan2_upper_on_a_dense_sweep_and_at_special_points():
    """2 x 10^4 angles over [0, pi] at radii 1e-300 to 1e300, and the axes, the
    subnormal and huge corners and non-finite arguments (``r = +inf`` is ``pi/2``, NaN
    propagates)."""
    rng = np.random.default_rng(7)
    theta = np.concatenate([np.linspace(0.0, np.pi, 10_001), rng.uniform(0, np.pi, 10_000)])
    radius = 10.0 ** rng.uniform(-300, 300, theta.size)
    for r, c in zip(np.abs(radius * np.sin(theta)), radius * np.cos(theta), strict=True):
        assert _ulp_close(fused._atan2_upper(r, c), math.atan2(r, c)), (r, c)
    for r, c in [(0.0, 0.0), (0.0, -0.0), (1.0, 0.0), (1.0, -0.0), (0.0, 1.0), (0.0, -1.0)]:
        assert fused._atan2_upper(r, c) == math.atan2(r, c)
    # where 0.66|c| and tan(3 pi/8)|c| round (subnormal) or overflow
    for r, c in [(5e-324, 5e-324), (1e-323, 5e-324), (3e-323, 1e-323), (1e308, 1e308)]:
        for sign in (1.0, -1.0):
            assert _ulp_close(fused._atan2_upper(r, sign * c), math.atan2(r, sign * c)), (r, c)
    assert fused._atan2_upper(math.inf, 1e308) == math.pi / 2
    assert fused._atan2_upper(math.inf, 1.0) == math.pi / 2
    assert fused._atan2_upper(1.0, math.inf) == 0.0
    assert math.isnan(fused._atan2_upper(math.nan, 1.0))
    assert math.isnan(fused._atan2_upper(1.0, math.nan))


def _norm_by_fsum(c, frame, data):
    """KNG's norm from the module's formula, each record's ``theta/sin theta`` by
    libm's ``atan2`` (or the graph's series) and the sums exact (``math.fsum``), and
    the sum of the terms' lengths (the scale of the sums' rounding)."""
    x = frame["origin"] @ M.from_rotvecs(c)  # the chart point (A = I for these frames)
    terms = []
    for rec in data:
        m = x.T @ rec
        v = 0.5 * np.array([m[2, 1] - m[1, 2], m[0, 2] - m[2, 0], m[1, 0] - m[0, 1]])
        s, cs = float(v @ v), 0.5 * (np.trace(m) - 1.0)
        r = math.sqrt(s)
        f = 1.0 + s / 6.0 + 3.0 * s * s / 40.0 if s < 1e-8 and cs > 0 else math.atan2(r, cs) / r
        terms.append(f * v)
    t = [math.fsum(col) for col in np.array(terms).T]
    return math.sqrt(sum(ti * ti for ti in t) + 1e-300), float(np.linalg.norm(terms, axis=1).sum())


# angles from x at each branch point of the records' terms: theta/sin's series
# (sin^2 = 1e-8), the atan reduction's (tan = 0.66, tan = tan(3 pi/8)), cos = 0 (pi/2,
# where atan2's c changes sign), and near the half turn (sin^2 < 1e-8 with cos < 0)
_THRESHOLD_ANGLES = (
    math.asin(1e-4),
    math.atan(0.66),
    3 * math.pi / 8,
    math.pi / 2,
    math.pi - 5e-5,
)


@pytest.mark.parametrize("n", [5, 127, 128, 129, 300])
def test_kernel_at_the_branch_points_of_the_records(graph, n):
    """Records at angles a few 1e-16 either side of every branch point of the records'
    terms, among random ones; ``n`` across the kernel's blocks of 128 (a last block
    full, one record long, partial). Oracles: the graph (rel 1e-9, as above) and, for
    the value, the same terms by libm's ``atan2`` summed exactly (within 1e-14 of the
    sum of the terms' lengths, plus the half turn's conditioning, below)."""
    rng = np.random.default_rng(n)
    for kind in range(3):
        frame = M.chart_frame(_origin(kind, rng))
        c = rng.normal(size=3) * 0.2
        x = frame["origin"] @ M.from_rotvecs(c)
        angles = rng.uniform(0.0, 1.2, size=n)
        picks = [a + k * 1e-16 for a in _THRESHOLD_ANGLES for k in (-3, -1, 0, 1, 3)]
        picks = list(rng.permutation(picks))
        places = rng.choice(n, size=min(n, len(picks)), replace=False)
        angles[places] = picks[: len(places)]
        axes = rng.normal(size=(n, 3))
        axes /= np.linalg.norm(axes, axis=1, keepdims=True)
        data = np.ascontiguousarray(x @ M.from_rotvecs(axes * angles[:, None]))
        want = graph(c, frame, data)
        got = _kernels(c, frame, data)
        _close(got[2], want[2], n)
        # a record near the half turn has f = theta/sin theta ~ 6e4 and a v known to
        # ~1e-16 absolute (a difference of entries ~1), so its gradient term, ~f^2 |dv|,
        # moves with the rounding of M: both routes alike (the old kernel's gradient
        # was as far from the graph's)
        f_max = max(a / math.sin(a) if a > 0 else 1.0 for a in angles)
        np.testing.assert_allclose(got[3], want[3], rtol=1e-9, atol=1e-12 * n + 1e-16 * f_max**2)
        # rounding of x's 9 entries moves each term ~1e-16 of its length, and the half
        # turn's term theta v/|v| by ~1e-16 f (v's absolute rounding over |v|)
        exact, scale = _norm_by_fsum(c, frame, data)
        tol = 1e-14 * scale + 2e-16 * f_max
        assert abs(got[2] - exact) <= tol, (got[2], exact, tol)
