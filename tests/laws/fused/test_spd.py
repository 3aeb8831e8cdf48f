"""The fused SPD kernels (pymc_manidp/geometry/_numba/fused/spd.py) against their oracles.

Oracle 1 is the PyTensor graph the kernels replace: ``SPD.pt_log_volume_density(c)``
and ``SPD.pt_frechet_gradient_norm(SPD.pt_exp_frame(frame, c), data)`` with
``pytensor.grad``, compiled once per ``k`` (one function, four outputs). Oracle 2 is a
central finite difference of the kernels' own values. Cases: k = 2 (closed forms) and
k = 3 (Jacobi), the identity and two other origins, |c| = 1e-9 (tiny), 0.5 (moderate)
and 3 (large), c along the identity direction (all eigenvalues of W tied: the divided
differences at ties), records spread 0.05 and 1.0 around the origin, n in {1, 7, 1000}.
Seeds are fixed (numpy default_rng(20261128 + ...)); tolerances are stated where used.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import pytensor
import pytensor.tensor as pt
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pymc_manidp.geometry._numba.fused import spd as fused
from pymc_manidp.geometry.spd import SPD

KS = (2, 3)
SEED = 20261128
# the graph and the kernels compute the same maths in other orders: they agree to a few
# hundred rounding units of the value's scale (measured: 1e-14 at worst on these cases)
RTOL = 1e-9


@pytest.fixture(scope="module", params=KS, ids=lambda k: f"k{k}")
def oracle(request):
    """``(M, f)``: ``f(c, sqrt, data) -> (logJ, dlogJ/dc, N, dN/dc)`` from the graph."""
    k = request.param
    M = SPD(k=k)
    c = pt.dvector("c")
    sqrt = pt.dmatrix("sqrt")
    data = pt.dtensor3("data")
    lvd = M.pt_log_volume_density(c)
    kn = M.pt_frechet_gradient_norm(M.pt_exp_frame({"sqrt": sqrt}, c), data)
    f = pytensor.function(
        [c, sqrt, data],
        [lvd, pytensor.grad(lvd, c), kn, pytensor.grad(kn, c)],
        mode="FAST_RUN",
        on_unused_input="ignore",
    )
    return M, f


def _origins(M, rng):
    """The identity, a well-conditioned origin and one with eigenvalues e^{+-1.5}."""
    k = M.k
    q, _ = np.linalg.qr(rng.normal(size=(k, k)))
    spread = np.linspace(-1.5, 1.5, k)
    far = (q * np.exp(spread)) @ q.T
    near = M.exp(np.eye(k), M.to_tangent(np.eye(k), 0.3 * rng.normal(size=(k, k))))
    return [np.eye(k), near, far]


def _directions(M, rng):
    """Unit chart directions: random ones and the identity direction (W = t I)."""
    k = M.k
    ident = np.r_[np.ones(k), np.zeros(M.dim - k)] / math.sqrt(k)
    out = [ident]
    for _ in range(2):
        v = rng.normal(size=M.dim)
        out.append(v / np.linalg.norm(v))
    return out


def _lvd(M, c):
    g = np.zeros(M.dim)
    val = fused.log_volume_density(c, (np.eye(M.k),), fused.params(M), g)
    return val, g


def _close(got, want, rtol=RTOL, floor=0.0):
    """``|got - want|_inf <= rtol (|want|_inf + floor)`` (arrays or scalars)."""
    got, want = np.asarray(got, float), np.asarray(want, float)
    scale = float(np.max(np.abs(want), initial=0.0)) + floor
    return float(np.max(np.abs(got - want), initial=0.0)) <= rtol * scale + 1e-300


@pytest.mark.parametrize("radius", [0.0, 1e-9, 0.03, 0.5, 3.0, 30.0])
def test_log_volume_density_matches_graph(oracle, radius):
    """Value and gradient equal the graph's to RTOL for every direction: random ones and
    the identity direction (all eigenvalue gaps 0, the series branch), from 0 through the
    series/quotient switch (|gap|/2 = 0.05) to the asymptotic branch (30)."""
    M, f = oracle
    rng = np.random.default_rng(SEED + M.k)
    empty = np.zeros((1, M.k, M.k)) + np.eye(M.k)
    for u in _directions(M, rng) + _directions(M, rng):
        c = radius * u
        val, g = _lvd(M, c)
        want, want_g, _, _ = f(c, np.eye(M.k), empty)
        assert _close(val, want), (c, val, want)
        assert _close(g, want_g), (c, g, want_g)


@given(
    st.lists(
        st.one_of(
            st.floats(-4.0, 4.0),
            st.sampled_from([1 / 3, 0.3333333333333333, 5e-324, -5e-324, 0.0, 0.1]),
            st.sampled_from([math.nextafter(0.1, 1.0), 0.1 * (1 + 2**-52), 2.0]),
        ),
        min_size=6,
        max_size=6,
    )
)
def test_log_volume_density_adversarial_coordinates(oracle, coords):
    """Coordinates with subnormals, thirds, sub-ulp neighbours and ties between them
    (equal coordinates give tied eigenvalues) agree with the graph to RTOL."""
    M, f = oracle
    c = np.asarray(coords[: M.dim], float)
    val, g = _lvd(M, c)
    want, want_g, _, _ = f(c, np.eye(M.k), np.eye(M.k)[None])
    assert _close(val, want), (c, val, want)
    assert _close(g, want_g), (c, g, want_g)


@pytest.mark.parametrize("radius", [1e-9, 0.5, 3.0])
def test_log_volume_density_finite_differences(oracle, radius):
    """The gradient is the derivative of the kernel's own value: central differences,
    step 1e-6 |c| (1e-6 at |c| < 1), agree to 1e-6 of the gradient's scale."""
    M, _ = oracle
    rng = np.random.default_rng(SEED + 10 + M.k)
    for u in _directions(M, rng):
        c = radius * u
        _, g = _lvd(M, c)
        step = 1e-6 * max(radius, 1.0)
        fd = np.empty(M.dim)
        for a in range(M.dim):
            e = np.zeros(M.dim)
            e[a] = step
            fd[a] = (_lvd(M, c + e)[0] - _lvd(M, c - e)[0]) / (2 * step)
        # at |c| = 1e-9 log J ~ |c|^2/24: the differences see its gradient, ~1e-10
        assert _close(fd, g, rtol=1e-6, floor=1e-12 if radius < 1e-6 else 0.0), (c, fd, g)


def _records(M, origin, spread, n, rng):
    """``n`` records ``exp_origin(v)``, ``|v|`` uniform in ``[spread/2, spread]``."""
    k = M.k
    v = M.to_tangent(origin, rng.normal(size=(n, k, k)))
    v *= (spread * rng.uniform(0.5, 1.0, size=n) / np.linalg.norm(v, axis=(1, 2)))[:, None, None]
    s = M.chart_frame(origin)["sqrt"]
    return np.ascontiguousarray(M.exp(np.broadcast_to(origin, (n, k, k)), s @ v @ s))


def _kng(M, c, sqrt, data, weight=1.0, start=0.0):
    g = np.full(M.dim, start)
    val = fused.kng_norm(c, (sqrt,), fused.params(M), data, weight, g)
    return val, g - start


@pytest.mark.parametrize("spread", [0.05, 1.0])
@pytest.mark.parametrize("radius", [1e-9, 0.5, 3.0])
def test_kng_norm_matches_graph(oracle, radius, spread):
    """Value and ``weight * gradient`` (added to a nonzero ``g_c``) equal the graph's to
    RTOL: three origins x three directions (one the identity direction: tied eigenvalues
    of W, the exponential's divided differences at ties) x n in {1, 7, 1000}."""
    M, f = oracle
    rng = np.random.default_rng(SEED + 100 * M.k + int(10 * spread) + int(radius))
    for origin in _origins(M, rng):
        sqrt = M.chart_frame(origin)["sqrt"]
        for u in _directions(M, rng):
            c = radius * u
            for n in (1, 7, 1000):
                data = _records(M, origin, spread, n, rng)
                val, g = _kng(M, c, sqrt, data, weight=0.7, start=0.25)
                _, _, want, want_g = f(c, sqrt, data)
                assert _close(val, want), (origin, c, n, val, want)
                assert _close(g, 0.7 * want_g), (origin, c, n, g, 0.7 * want_g)


def test_kng_norm_ties_in_the_records(oracle):
    """Records at the point itself (``xi D xi = I`` to rounding: the logarithm's divided
    differences at ties), all records equal, and the chart's origin at c = 0."""
    M, f = oracle
    rng = np.random.default_rng(SEED + 7 * M.k)
    for origin in _origins(M, rng):
        sqrt = M.chart_frame(origin)["sqrt"]
        for c in (np.zeros(M.dim), 0.4 * _directions(M, rng)[0], 0.4 * _directions(M, rng)[1]):
            x = _exp_frame(M, sqrt, c)
            far = _records(M, origin, 1.0, 3, rng)
            for data in (
                np.stack([x] * 4),
                np.concatenate([np.stack([x] * 2), far]),
                far[:1].repeat(5, 0),
            ):
                data = np.ascontiguousarray(data)
                val, g = _kng(M, c, sqrt, data)
                _, _, want, want_g = f(c, sqrt, data)
                # records at x: T is rounding noise (~1e-15) and so is its direction; the
                # value is then compared absolutely, the gradient only where N is not noise
                if want < 1e-10:
                    assert abs(val - want) < 1e-12, (val, want)
                    assert np.all(np.isfinite(g))
                else:
                    assert _close(val, want), (c, val, want)
                    assert _close(g, want_g), (c, g, want_g)


def _exp_frame(M, sqrt, c):
    """``sym(S expm(W) S)`` in NumPy (the chart's point)."""
    w = np.tensordot(c, M._frame, axes=[[-1], [0]])
    lam, u = np.linalg.eigh(w)
    x = sqrt @ ((u * np.exp(lam)) @ u.T) @ sqrt
    return 0.5 * (x + x.T)


@pytest.mark.parametrize("radius", [1e-9, 0.5, 3.0])
def test_kng_norm_finite_differences(oracle, radius):
    """The gradient is the derivative of the kernel's own value: central differences
    (step 1e-6 max(|c|, 1)) agree to 1e-6 of the gradient's scale, at an origin away
    from I, n = 7 records of spread 1.0 and n = 200 of spread 0.05."""
    M, _ = oracle
    rng = np.random.default_rng(SEED + 300 + M.k)
    origin = _origins(M, rng)[2]
    sqrt = M.chart_frame(origin)["sqrt"]
    for spread, n in ((1.0, 7), (0.05, 200)):
        data = _records(M, origin, spread, n, rng)
        for u in _directions(M, rng):
            c = radius * u
            _, g = _kng(M, c, sqrt, data)
            step = 1e-6 * max(radius, 1.0)
            fd = np.empty(M.dim)
            for a in range(M.dim):
                e = np.zeros(M.dim)
                e[a] = step
                fd[a] = (_kng(M, c + e, sqrt, data)[0] - _kng(M, c - e, sqrt, data)[0]) / (2 * step)
            assert _close(fd, g, rtol=1e-6), (c, fd, g)


@pytest.mark.parametrize("k", [1, 4])
def test_other_sizes_match_graph(k):
    """SPD(1) (no eigenvalue pairs) and SPD(4) (the general-k loops, not the k = 3
    vectorized chunks) against the graph, to RTOL, at an origin away from I."""
    M = SPD(k=k)
    c = pt.dvector("c")
    sqrt = pt.dmatrix("sqrt")
    data = pt.dtensor3("data")
    lvd = M.pt_log_volume_density(c)
    kn = M.pt_frechet_gradient_norm(M.pt_exp_frame({"sqrt": sqrt}, c), data)
    f = pytensor.function(
        [c, sqrt, data], [lvd, pytensor.grad(lvd, c), kn, pytensor.grad(kn, c)], mode="FAST_RUN"
    )
    rng = np.random.default_rng(SEED + 400 + k)
    origin = _origins(M, rng)[2]
    sqrt_v = M.chart_frame(origin)["sqrt"]
    for radius in (1e-9, 0.5, 3.0):
        for u in _directions(M, rng):
            c_v = radius * u
            data_v = _records(M, origin, 1.0, 7, rng)
            want = f(c_v, sqrt_v, data_v)
            val, g = _lvd(M, c_v)
            assert _close(val, want[0]) and _close(g, want[1]), (c_v, val, g, want[:2])
            val, g = _kng(M, c_v, sqrt_v, data_v)
            assert _close(val, want[2]) and _close(g, want[3]), (c_v, val, g, want[2:])


@pytest.mark.parametrize("k", [1, 2, 3, 4])
def test_kernels_of_one_size_equal_the_general_ones(k):
    """``kernels(str(k))`` (the variants compiled with one size's code) gives the general
    kernels' numbers bit for bit: they run the same code for that size."""
    M = SPD(k=k)
    lvd, kng = fused.kernels(str(k))
    rng = np.random.default_rng(SEED + 500 + k)
    origin = _origins(M, rng)[1]
    sqrt = M.chart_frame(origin)["sqrt"]
    data = _records(M, origin, 1.0, 9, rng)
    c = 0.7 * _directions(M, rng)[1]
    g1, g2 = np.zeros(M.dim), np.zeros(M.dim)
    assert lvd(c, (sqrt,), fused.params(M), g1) == fused.log_volume_density(
        c, (sqrt,), fused.params(M), g2
    )
    assert np.array_equal(g1, g2)
    assert kng(c, (sqrt,), fused.params(M), data, 0.3, g1) == fused.kng_norm(
        c, (sqrt,), fused.params(M), data, 0.3, g2
    )
    assert np.array_equal(g1, g2)


# --- k = 2: the vectorized records' loop (_sum2) and its logarithm (_log) -----------------

mpmath = pytest.importorskip("mpmath")


def _bits(u):
    """The float64 whose bits are the int ``u`` (0 <= u < 2^64)."""
    return float(np.array([u], dtype=np.uint64).view(np.float64)[0])


_REDUCTION = 0x3FE6A09E00000000  # the mantissa where _log's f = x/2^k - 1 changes binade
_ADVERSARIAL_LOGS = [
    0.0,
    -0.0,
    5e-324,
    1e-323,
    2.2250738585072014e-308,  # least normal: _log's subnormal scaling switch
    math.nextafter(2.2250738585072014e-308, 0.0),
    math.nextafter(2.2250738585072014e-308, 1.0),
    1 / 3,
    0.3333333333333333,
    1.0,
    math.nextafter(1.0, 0.0),
    math.nextafter(1.0, 2.0),
    2.0,
    0.5,
    math.sqrt(2.0),
    math.sqrt(0.5),
    _bits(_REDUCTION),
    _bits(_REDUCTION - 1),
    _bits(_REDUCTION + 1),
    _bits(_REDUCTION + (1 << 52)),  # the same mantissa one binade up
    _bits(_REDUCTION + (1 << 52) - 1),
    _bits(_REDUCTION - (1 << 52)),  # and in the subnormals' scaled range
    _bits(0x000FFFFFFFFFFFFF),  # the largest subnormal
    _bits(0x0006A09E00000000),
    _bits(0x0006A09DFFFFFFFF),
    1e308,
    1.7976931348623157e308,
    float("inf"),
]


def _ulps(got, x):
    """``|got - log x|`` in units of the last place of ``log x`` (mpmath, 60 digits)."""
    with mpmath.workdps(60):
        exact = mpmath.log(mpmath.mpf(x))
        return float(abs(mpmath.mpf(got) - exact) / mpmath.mpf(math.ulp(float(exact))))


@given(
    st.one_of(
        st.sampled_from(_ADVERSARIAL_LOGS),
        st.floats(min_value=0.0, allow_infinity=True, allow_nan=False),
        st.integers(0, 0x7FF0000000000000).map(_bits),  # every binade alike
        st.floats(0.5, 2.0),
        st.integers(-64, 64).map(lambda j: _bits(_REDUCTION + j)),
    )
)
def test_log_is_within_one_ulp(x):
    """``_log`` (the vectorizable logarithm of the k = 2 kernel) against mpmath: less
    than one unit in the last place over the whole range (subnormals, the subnormal
    scaling switch, the reduction's switch at sqrt(2)/2 in several binades, 1 and its
    neighbours, the largest float); ``-inf`` at 0 (both signs), ``inf`` at ``inf``."""
    got = fused._log(x)
    if x == 0.0:
        assert got == -math.inf
    elif math.isinf(x):
        assert got == math.inf
    else:
        assert _ulps(got, x) < 1.0, (x, got, math.log(x))


@given(
    st.one_of(
        st.floats(max_value=-5e-324, allow_infinity=True, allow_nan=False),
        st.just(float("nan")),
        st.sampled_from([-5e-324, -1.0, -math.inf, _bits(0x7FF8000000000001)]),
    )
)
def test_log_of_negatives_and_nan_is_nan(x):
    """Negative numbers (subnormal, -inf included) and nans give nan, as libm's ``log``."""
    assert math.isnan(fused._log(x))


def test_log_agrees_with_libm_on_a_million_bit_patterns():
    """The vectorized loop's ``_log`` (the compiled kernel's path: 8 lanes per
    instruction) against ``np.log`` on 10^6 random positive bit patterns (every binade,
    subnormals included) and 10^5 values in [0.5, 2]: within one ulp of libm's
    (both are faithful, so they may differ by their last bit), and at most 5% differ."""
    rng = np.random.default_rng(SEED + 600)
    x = np.concatenate(
        [
            rng.integers(1, 0x7FF0000000000000, size=1_000_000, dtype=np.int64).view(np.float64),
            rng.uniform(0.5, 2.0, size=100_000),
        ]
    )
    got = _log_all(x)
    want = np.log(x)
    diff = np.abs(got - want) / np.spacing(np.abs(want))
    assert diff.max() <= 1.0, x[np.argmax(diff)]
    assert np.mean(diff > 0) < 0.05


@functools.cache
def _log_all_kernel():
    from numba import njit

    @njit(error_model="numpy")
    def log_all(x, out):
        for i in range(x.shape[0]):  # a loop like _sum2's: LLVM vectorizes it
            out[i] = fused._log(x[i])

    return log_all


def _log_all(x):
    out = np.empty_like(x)
    _log_all_kernel()(x, out)
    return out


def _kng2(M, c, sqrt, data, weight=1.0, start=0.0):
    """:func:`_kng` through ``kng_norm_2`` (the kernel ``kernels("2")`` gives), compiled
    alone for a new array layout, not the kernel of every size."""
    g = np.full(3, start)
    val = fused.kng_norm_2(c, (sqrt,), fused.params(M), data, weight, g)
    return val, g - start


def _threshold_records(scale, thresholds=(1e-3, 1e-2)):
    """2 x 2 records ``scale (I + [[a, b], [b, -a]])`` with ``a^2 + b^2`` stepping by
    single ulps across each threshold of ``_sum2``'s switches on ``d^2 = s/m^2`` (the
    series of atanh below 1e-3, of ``d beta/ds`` below 1e-2), at three angles."""
    out = []
    for thr in thresholds:
        for angle in (0.0, 0.7, math.pi / 2):
            for j in range(-6, 7):
                h = math.sqrt(thr) * (1.0 + j * 2.0**-52)
                a, b = h * math.cos(angle), h * math.sin(angle)
                out.append(scale * np.array([[1.0 + a, b], [b, 1.0 - a]]))
    return np.ascontiguousarray(np.stack(out))


def _d2_at_identity(data):
    """``d^2 = s/m^2`` of each record as ``_sum2`` computes it when ``xi = I``."""
    p, r = data[:, 0, 0], data[:, 1, 1]
    q = 0.5 * (data[:, 0, 1] + data[:, 1, 0])
    m, h = 0.5 * (p + r), 0.5 * (p - r)
    return (h * h + q * q) / (m * m)


@pytest.mark.parametrize("scale", [1.0, 3.7, 1e-3])
def test_kng_norm_2_at_the_switches_matches_graph(scale):
    """Records placed one ulp apart across both switches of the k = 2 records' loop
    (so one block holds records on both sides of each, and the 78 records span two
    blocks of 64): the value and gradient equal the graph's to RTOL, at the chart's
    origin (``xi = I`` exactly, so the records' own ``d^2`` is what the loop tests:
    checked to fall on both sides) and at two points off it."""
    M = SPD(k=2)
    oracle_f = _oracle_2()
    data = _threshold_records(scale)
    d2 = _d2_at_identity(data)
    for thr in (1e-3, 1e-2):
        near = np.abs(d2 / thr - 1.0) < 1e-13
        assert np.any(near & (d2 < thr)) and np.any(near & (d2 >= thr)), thr
    rng = np.random.default_rng(SEED + 700)
    for c in (np.zeros(3), 0.3 * _directions(M, rng)[1], 1.5 * _directions(M, rng)[2]):
        val, g = _kng2(M, c, np.eye(2), data, weight=0.7, start=0.25)
        _, _, want, want_g = oracle_f(c, np.eye(2), data)
        assert _close(val, want), (c, val, want)
        assert _close(g, 0.7 * want_g), (c, g, 0.7 * want_g)


@functools.cache
def _oracle_2():
    M = SPD(k=2)
    c = pt.dvector("c")
    sqrt = pt.dmatrix("sqrt")
    data = pt.dtensor3("data")
    kn = M.pt_frechet_gradient_norm(M.pt_exp_frame({"sqrt": sqrt}, c), data)
    return pytensor.function(
        [c, sqrt, data],
        [kn, kn, kn, pytensor.grad(kn, c)],
        mode="FAST_RUN",
        on_unused_input="ignore",
    )


@pytest.mark.parametrize("n", [63, 64, 65, 129])
def test_kng_norm_2_is_independent_of_the_blocks(n):
    """The records' order and the blocks' boundaries change the sums only by rounding:
    the records reversed and shifted by one block give the same value and gradient to
    1e-13 (relative), for n around one and two blocks of 64."""
    M = SPD(k=2)
    rng = np.random.default_rng(SEED + 800 + n)
    data = _records(M, np.eye(2), 1.0, n, rng)
    c = 0.4 * _directions(M, rng)[1]
    val, g = _kng2(M, c, np.eye(2), data)
    for perm in (data[::-1], np.roll(data, 64 % n, axis=0)):
        v2, g2 = _kng2(M, c, np.eye(2), np.ascontiguousarray(perm))
        assert _close(v2, val, rtol=1e-13) and _close(g2, g, rtol=1e-13), (n, v2, val)


def test_kng_norm_2_reads_strided_records():
    """Records in a non-contiguous view (every other one of a larger array, and the
    transposed matrices: the same symmetric records) give the contiguous copy's numbers
    bit for bit: the loop copies the records it reads, whatever their strides."""
    M = SPD(k=2)
    rng = np.random.default_rng(SEED + 900)
    big = _records(M, np.eye(2), 1.0, 200, rng)
    view = big[::2].transpose(0, 2, 1)
    c = 0.4 * _directions(M, rng)[2]
    assert _kng2(M, c, np.eye(2), view)[0] == _kng2(M, c, np.eye(2), np.ascontiguousarray(view))[0]


def test_kng_norm_2_nan_records_give_nan():
    """A record with a nan entry, or one that is not positive definite (the logarithm
    of a negative determinant), makes the value nan, as in the graph."""
    M = SPD(k=2)
    oracle_f = _oracle_2()
    rng = np.random.default_rng(SEED + 1000)
    data = _records(M, np.eye(2), 1.0, 70, rng)
    c = 0.2 * _directions(M, rng)[1]
    for i, bad in (
        (3, np.array([[np.nan, 0.0], [0.0, 1.0]])),
        (66, np.array([[1.0, 2.0], [2.0, 1.0]])),
    ):
        d = data.copy()
        d[i] = bad
        val, _ = _kng2(M, c, np.eye(2), d)
        assert math.isnan(val) and math.isnan(oracle_f(c, np.eye(2), d)[2])
