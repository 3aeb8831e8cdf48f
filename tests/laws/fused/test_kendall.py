"""The fused Kendall kernels against the PyTensor graph they replace, and against finite
differences of their own values.

Oracle 1: ``KendallShape.pt_log_volume_density(c)`` and
``pt_frechet_gradient_norm(pt_exp_frame(frame, c), data)`` with ``pytensor.grad``,
compiled once per ``k`` (the frame is an input, so every origin shares it). Oracle 2:
central differences. Tolerances: values rel 1e-11, gradients 1e-9 of their largest
entry (both agree to ~1e-15 today; the looser bound leaves room for the cancellation
both routes share in ``d(theta/sin theta)/dq`` for records ~1e-4 from the point).
Seeds are fixed per case (``_rng``).
"""

from __future__ import annotations

import functools
import math
import zlib

import numpy as np
import pytensor
import pytensor.tensor as pt
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pymc_manidp.geometry._numba.fused import kendall as fk
from pymc_manidp.geometry.kendall import KendallShape

HALF_PI = math.pi / 2  # the injectivity radius of the Procrustes distance
KS = (3, 4, 6)
RADII = (1e-9, 1e-5, 0.3, 1.0, 0.99 * HALF_PI)
SPREADS = (0.05 * HALF_PI, 0.5 * HALF_PI)
NS = (1, 7, 1000)
VALUE_RTOL = 1e-11
GRAD_RTOL = 1e-9


@functools.cache
def _graph(k):
    """``(lvd, dlvd/dc, norm, dnorm/dc)`` of ``(c, origin, basis, data)``: the graph."""
    M = KendallShape(k_landmarks=k)
    c, data = pt.dvector("c"), pt.dtensor3("data")
    origin, basis = pt.dmatrix("origin"), pt.dtensor3("basis")
    lvd = M.pt_log_volume_density(c)
    kn = M.pt_frechet_gradient_norm(M.pt_exp_frame({"origin": origin, "basis": basis}, c), data)
    outs = [lvd, pytensor.grad(lvd, c), kn, pytensor.grad(kn, c)]
    return pytensor.function([c, origin, basis, data], outs, mode="FAST_RUN")


def _rng(*key):
    """A generator seeded by the case's name (crc32: the same in every process)."""
    return np.random.default_rng([zlib.crc32(repr(key).encode()), 2026])


def _origins(M, rng):
    """A generic polygon, a random shape and the regular polygon (a symmetric shape)."""
    t = 2 * np.pi * np.arange(M.k_landmarks) / M.k_landmarks
    regular = np.stack([np.cos(t), np.sin(t)], -1)
    return {"generic": M.generic_point, "random": M.sample_uniform(rng), "regular": regular}


def _rotate(points, phase):
    """Pre-shapes turned by ``phase``: the same shapes, a different representative."""
    cs, sn = np.cos(phase)[:, None], np.sin(phase)[:, None]
    re, im = points[..., 0], points[..., 1]
    return np.stack([re * cs - im * sn, re * sn + im * cs], -1)


def _case(M, origin, radius, spread, n, rng, at_point=True, low=0.0):
    """Chart frame, ``c`` with ``|c| = radius`` and ``n`` records within ``spread`` of
    ``x = exp_frame(c)`` (at least ``low * spread`` from it), each turned by a random
    phase; the first is ``x`` itself if ``at_point``."""
    fr = M.chart_frame(origin)
    c = rng.standard_normal(M.dim)
    c *= radius / np.linalg.norm(c)
    x = M.exp(fr["origin"], np.tensordot(c, fr["basis"], 1))
    vs = M.to_tangent(x, rng.standard_normal((n, M.k_landmarks, 2)))
    vs *= (spread * rng.uniform(low, 1.0, n) / np.linalg.norm(vs, axis=(1, 2)))[:, None, None]
    data = M.exp(x[None], vs)
    if at_point:
        data[0] = x
    data = np.ascontiguousarray(_rotate(data, rng.uniform(0.0, 2 * np.pi, n)))
    return (fr["origin"], fr["basis"]), c, data


def _fused(M, frame, c, data, weight=1.0):
    par = fk.params(M)
    g_lvd, g_kn = np.zeros(M.dim), np.zeros(M.dim)
    lvd = fk.log_volume_density(c, frame, par, g_lvd)
    kn = fk.kng_norm(c, frame, par, data, weight, g_kn)
    return lvd, g_lvd, kn, g_kn


def _close_grad(got, want, rtol=GRAD_RTOL):
    scale = np.max(np.abs(want))
    np.testing.assert_allclose(got, want, rtol=0, atol=rtol * scale + 1e-300)


def _cases():
    for k in KS:
        for name in ("generic", "random", "regular"):
            for ir, radius in enumerate(RADII):
                for spread in SPREADS:
                    yield k, name, radius, spread, NS[(ir + len(name)) % 3]


@pytest.mark.parametrize("k", KS)
def test_against_the_graph(k):
    """Values and gradients equal the graph's at 30 cases per k: three origins, |c| from
    1e-9 (series branches) to 0.99 pi/2, spreads 0.05 and 0.5 of pi/2, n in {1, 7, 1000},
    a record at the point itself whenever n > 1."""
    M = KendallShape(k_landmarks=k)
    f = _graph(k)
    count = 0
    for kk, name, radius, spread, n in _cases():
        if kk != k:
            continue
        rng = _rng(k, name, radius, spread)
        origin = _origins(M, rng)[name]
        frame, c, data = _case(M, origin, radius, spread, n, rng, at_point=n > 1)
        want = f(c, *frame, data)
        got = _fused(M, frame, c, data)
        for i in (0, 2):
            np.testing.assert_allclose(got[i], want[i], rtol=VALUE_RTOL, err_msg=f"{name} {radius}")
        _close_grad(got[1], want[1])
        _close_grad(got[3], want[3])
        count += 1
    assert count >= 20


def _central(fun, c, h):
    grad = np.empty_like(c)
    for a in range(c.size):
        e = np.zeros_like(c)
        e[a] = h
        grad[a] = (fun(c + e) - fun(c - e)) / (2 * h)
    return grad


@pytest.mark.parametrize("k", KS)
@pytest.mark.parametrize("radius", (1e-9, 0.3, 0.99 * HALF_PI))
@pytest.mark.parametrize("spread", SPREADS)
def test_gradients_match_finite_differences(k, radius, spread):
    """Central differences (h = 1e-6) of the kernels' own values; rel 1e-6 of the
    largest entry (truncation h^2 and rounding eps/h)."""
    M = KendallShape(k_landmarks=k)
    rng = _rng("fd", k, radius, spread)
    frame, c, data = _case(M, M.generic_point, radius, spread, 7, rng)
    par = fk.params(M)
    _, g_lvd, _, g_kn = _fused(M, frame, c, data)

    def lvd(cc):
        return fk.log_volume_density(cc, frame, par, np.zeros(M.dim))

    def kn(cc):
        return fk.kng_norm(cc, frame, par, data, 1.0, np.zeros(M.dim))

    _close_grad(g_lvd, _central(lvd, c, 1e-6), rtol=1e-6)
    _close_grad(g_kn, _central(kn, c, 1e-6), rtol=1e-6)


def test_weight_scales_the_gradient_and_adds():
    """``g_c`` is added to, scaled by ``weight``, and the value does not depend on it."""
    M = KendallShape(k_landmarks=4)
    frame, c, data = _case(M, M.generic_point, 0.4, SPREADS[1], 7, _rng("weight"))
    par = fk.params(M)
    g1 = np.zeros(M.dim)
    v1 = fk.kng_norm(c, frame, par, data, 1.0, g1)
    g = np.full(M.dim, 2.0)
    v2 = fk.kng_norm(c, frame, par, data, -0.25, g)
    assert v1 == v2
    np.testing.assert_allclose(g, 2.0 - 0.25 * g1, rtol=1e-15)
    g = np.full(M.dim, 3.0)
    v = fk.log_volume_density(c, frame, par, g)
    g0 = np.zeros(M.dim)
    assert v == fk.log_volume_density(c, frame, par, g0)
    np.testing.assert_allclose(g, 3.0 + g0, rtol=1e-15)


def test_single_record_at_the_point_is_finite():
    """One record equal to the point: the norm is 0 to rounding (as the graph's), the
    gradient is finite (it is arbitrary there: a set of measure zero)."""
    for k in KS:
        M = KendallShape(k_landmarks=k)
        frame, c, data = _case(M, M.generic_point, 0.7, 0.0, 1, _rng("one", k))
        got = _fused(M, frame, c, data)
        want = _graph(k)(c, *frame, data)
        assert got[2] < 1e-14 and want[2] < 1e-14
        assert np.all(np.isfinite(got[3]))


# |c| at and beside every branch point of the graph: the exp chart's series (|c| = 1e-4),
# log sinc's series for 4|c|^2 and |c|^2 (0.025, 0.05), the cap of log sinc(2|c|)
# (pi/2) and beyond it (-inf, no gradient), and the smallest positive numbers
_EDGES = [0.0, 5e-324, 1e-300, 1e-9, 1 / 3, 0.3333333333333333, HALF_PI * 0.99, 2.0]
for _b in (1e-4, 0.025, 0.05, HALF_PI):
    _EDGES += [_b, math.nextafter(_b, 0.0), math.nextafter(_b, 1.0)]


@given(
    k=st.sampled_from(KS),
    radius=st.sampled_from(_EDGES),
    seed=st.integers(0, 2**32 - 1),
)
def test_branch_points_against_the_graph(k, radius, seed):
    """At the graph's branch points both routes take the same branch: values and
    gradients agree (-inf beyond pi/2 with a zero gradient from that term)."""
    M = KendallShape(k_landmarks=k)
    rng = np.random.default_rng(seed)
    frame, c, data = _case(M, M.generic_point, radius, SPREADS[1], 7, rng)
    if radius == 0.0:
        c = np.zeros(M.dim)
    want = _graph(k)(c, *frame, data)
    got = _fused(M, frame, c, data)
    np.testing.assert_allclose(got[0], want[0], rtol=VALUE_RTOL)
    np.testing.assert_allclose(got[2], want[2], rtol=VALUE_RTOL)
    _close_grad(got[1], want[1])
    _close_grad(got[3], want[3])


def test_params():
    np.testing.assert_array_equal(fk.params(KendallShape(k_landmarks=5)), [4.0])


@pytest.mark.parametrize("k", KS)
def test_records_in_the_series_branch(k):
    """Every record within 1e-4 of the point (theta/sin theta by its series): there the
    series' derivative weighs ~theta^2 of the gradient, above the tolerance at theta
    near 1e-4 (at theta = 0 it multiplies a zero leg and no test can see it)."""
    M = KendallShape(k_landmarks=k)
    for radius in (1e-9, 0.6):
        rng = _rng("series", k, radius)
        frame, c, data = _case(M, M.generic_point, radius, 0.99e-4, 7, rng, False, low=0.7)
        want = _graph(k)(c, *frame, data)
        got = _fused(M, frame, c, data)
        np.testing.assert_allclose(got[2], want[2], rtol=VALUE_RTOL)
        _close_grad(got[3], want[3])


def test_branch_free_atan2_matches_libm():
    """``_atan2_pos`` (Cephes' atan, selects only) within rel 5e-16 (about 2 ulp) of
    libm's ``atan2`` on the quarter plane the kernel uses: 10^5 angles in [0, pi/2],
    tiny ones down to 1e-300, the reduction's seams (tan 3pi/8, 0.66) and the axes."""
    rng = np.random.default_rng(38)
    th = np.concatenate(
        [
            rng.uniform(0.0, HALF_PI, 10**5),
            np.geomspace(1e-300, 1.0, 1000),
            np.arctan([2.41421356237309504880, 0.66]),
            [0.0, HALF_PI, math.nextafter(HALF_PI, 0.0)],
        ]
    )
    r, c = np.sin(th), np.cos(th)
    got = np.array([fk._atan2_pos(a, b) for a, b in zip(r, c, strict=True)])
    want = np.arctan2(r, c)
    np.testing.assert_allclose(got, want, rtol=5e-16, atol=0)
    assert fk._atan2_pos(1.0, 0.0) == math.pi / 2
    assert fk._atan2_pos(0.0, 1.0) == 0.0


# the per-record branch points: theta/sin theta's series (sin^2 theta = 1e-8, with a
# margin above the rounding of q = cos^2 theta), the seams of _atan2_pos's reduction
# (tan theta = 0.66 and tan(3 pi/8)), a record at the point, and one ~1e-3 from pi/2
_THETA_EDGES = [0.0, 1e-300, 1e-5, HALF_PI - 1e-3, 1 / 3]
for _b in (math.asin(1e-4), math.atan(0.66), 3 * math.pi / 8):
    _THETA_EDGES += [_b, _b * (1 - 1e-6), _b * (1 + 1e-6), math.nextafter(_b, 0.0)]
# records per block of the kernel and its neighbours (spare lanes in the last block)
_BLOCK_NS = (1, 2, fk._BLOCK - 1, fk._BLOCK, fk._BLOCK + 1, 2 * fk._BLOCK + 3)


@given(
    k=st.sampled_from(KS),
    n=st.sampled_from(_BLOCK_NS),
    radius=st.sampled_from((1e-9, 0.3, 1.0)),
    seed=st.integers(0, 2**32 - 1),
)
def test_records_at_the_branch_points_against_the_graph(k, n, radius, seed):
    """Records at Procrustes distances on each side of every per-record branch point
    (the edges cycled, so every block holds several), ``n`` on each side of a block's
    size: values and gradients equal the graph's. Both round ``T`` (terms up to pi/2),
    so the values get an absolute ``1e-14 n`` too, and the gradients, ``T/N``'s
    direction, are compared where ``N > 1e-4`` (not when the few records lie within
    rounding of the point, where it is arbitrary)."""
    M = KendallShape(k_landmarks=k)
    rng = np.random.default_rng(seed)
    frame, c, _ = _case(M, M.generic_point, radius, 0.0, 1, rng)
    x = M.exp(frame[0], np.tensordot(c, frame[1], 1))
    u = M.to_tangent(x, rng.standard_normal((n, k, 2)))
    u /= np.linalg.norm(u, axis=(1, 2))[:, None, None]
    theta = np.resize(rng.permutation(_THETA_EDGES), n)[:, None, None]
    data = np.cos(theta) * x + np.sin(theta) * u
    data = np.ascontiguousarray(_rotate(data, rng.uniform(0.0, 2 * np.pi, n)))
    want = _graph(k)(c, *frame, data)
    got = _fused(M, frame, c, data)
    np.testing.assert_allclose(got[2], want[2], rtol=VALUE_RTOL, atol=1e-14 * n)
    if want[2] > 1e-4:
        _close_grad(got[3], want[3])


@pytest.mark.parametrize("k", (3, 8))
def test_records_beyond_the_workspace_against_the_graph(k):
    """More records than the kernel's workspace holds (the later blocks computed again in
    the second pass), the last block partial: value and gradient equal the graph's."""
    M = KendallShape(k_landmarks=k)
    per_block = (8 + 2 * k) * fk._BLOCK
    n = (fk._WORK_DOUBLES // per_block + 2) * fk._BLOCK + 5
    frame, c, data = _case(M, M.generic_point, 0.3, SPREADS[1], n, _rng("beyond", k))
    want = _graph(k)(c, *frame, data)
    got = _fused(M, frame, c, data)
    np.testing.assert_allclose(got[2], want[2], rtol=VALUE_RTOL)
    _close_grad(got[3], want[3])
