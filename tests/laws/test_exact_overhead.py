"""Issue 26's cuts of per-release overhead give the same numbers as the code they replace.

Oracles: the replaced code itself, written out here (``rng.choice`` with ``p`` and one
``_gamma_interval`` call per shell for the envelope's draw; ``np.sum`` for the column
sums), compared bit for bit; a deliberately wrong variant of each is shown to be caught
by the same comparison.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import special

import pymc_manidp as pmd
from pymc_manidp.geometry._numba.numerics import _sum_axes, angle_between, log_sinc
from pymc_manidp.laws import exact
from pymc_manidp.laws.exact import kng_mean, rejection
from pymc_manidp.stats.domain import DataDomain

S2 = pmd.Sphere(dim=2)
NORTH = np.array([0.0, 0.0, 1.0])


def _reference_t(env, m, rng, wrong=False):
    """Shells and radii as the draw made them before issue 26's cut."""
    shell = rng.choice(len(env.slopes), size=m, p=env.weights)
    t = np.empty(m)
    ks = np.unique(shell)
    for k in ks[::-1] if wrong else ks:  # wrong: the shells' blocks in another order
        at = shell == k
        lo, hi = env.edges[k], env.edges[k + 1]
        scale = env.sigma / env.slopes[k]
        if k > 0 and env.lower_tail[k]:
            # issue 43: a shell deep in the lower tail reads the same uniforms from its
            # outer edge inwards through P's inverse (Q's would keep no digits there)
            v = rng.random(at.sum())
            p = env.p_hi[k] - (env.p_hi[k] - env.p_lo[k]) * v
            t[at] = np.clip(scale * special.gammaincinv(env.M.dim, p), lo, hi)
        else:
            t[at] = rejection._gamma_interval(env.M.dim, scale, lo, hi, at.sum(), rng)
    return shell, t


def _fast_t(env, m, rng):
    """The draw's own shells and radii: its code up to the volume step, with the
    uniforms that step and the directions take replaced by a marker draw."""
    rec = {}
    real_radial = kng_mean._radial_log_ratio

    def spy(M, t):
        rec["t"] = t.copy()
        raise StopIteration

    kng_mean._radial_log_ratio = spy
    try:
        with pytest.raises(StopIteration):
            env.draw(m, rng, {})
    finally:
        kng_mean._radial_log_ratio = real_radial
    return rec["t"]


def _envelope(n, eps, seed, radius=np.pi / 8):
    rng = np.random.default_rng(seed)
    data = S2.exp_coords(NORTH, rng.uniform(-0.6, 0.6, (n, 2)) * radius)
    dom = DataDomain(S2, NORTH, radius)
    data = dom.check(data)
    sigma = dom.kng_sensitivity(n) * 2 / eps
    return kng_mean._KNGEnvelope.build(S2, data, sigma, dom, exact.DEFAULT_MAX_ATTEMPTS)


@pytest.mark.parametrize(("n", "eps"), [(1000, 1.0), (50, 0.2), (300, 30.0)])
def test_shell_draw_is_the_old_draw_bit_for_bit(n, eps):
    env = _envelope(n, eps, seed=n)
    assert env.curved and len(env.slopes) > 3
    for seed in range(40):
        m = 1 + seed % 9 * 7  # single proposals and batches across many shells
        _, t_ref = _reference_t(env, m, np.random.default_rng(seed))
        t = _fast_t(env, m, np.random.default_rng(seed))
        np.testing.assert_array_equal(t, t_ref)


def test_shell_draw_comparison_catches_a_wrong_stream_order():
    env = _envelope(1000, 1.0, seed=3)
    caught = 0
    for seed in range(20):
        m = 40
        _, t_wrong = _reference_t(env, m, np.random.default_rng(seed), wrong=True)
        t = _fast_t(env, m, np.random.default_rng(seed))
        caught += not np.array_equal(t, t_wrong)
    assert caught >= 15


def test_shell_weights_that_are_no_distribution_are_refused():
    env = _envelope(200, 1.0, seed=1)
    env.weights = env.weights * np.nan
    with pytest.raises(exact.ExactSamplingError, match="not a distribution"):
        env._shell_tables()


@pytest.mark.parametrize("k", range(1, 10))
def test_column_sums_are_numpys_sums_bit_for_bit(k):
    rng = np.random.default_rng(k)
    for shape in [(k,), (300, k), (4, 5, k), (0, k)]:
        a = rng.normal(size=shape) * np.exp(8 * rng.normal(size=shape))
        if a.size:  # signed zeros: the sum of (-0, -0, ...) is +0 in NumPy
            a.reshape(-1, k)[0] = -0.0
        for axes in [(-1,), (a.ndim - 1,)]:
            got, ref = _sum_axes(a, axes), np.sum(a, axis=axes)
            assert got.shape == ref.shape
            np.testing.assert_array_equal(got, ref)
            np.testing.assert_array_equal(np.signbit(got), np.signbit(ref))
    view = rng.normal(size=(20, k))[:, ::-1]  # not contiguous
    np.testing.assert_array_equal(_sum_axes(view, (-1,)), np.sum(view, axis=-1))


def test_column_sum_comparison_catches_another_order():
    rng = np.random.default_rng(0)
    a = rng.normal(size=(2000, 3)) * np.exp(8 * rng.normal(size=(2000, 3)))
    wrong = a[:, 0] + (a[:, 1] + a[:, 2])  # the same terms, summed in another order
    assert not np.array_equal(wrong, np.sum(a, axis=-1))
    np.testing.assert_array_equal(_sum_axes(a, (-1,)), np.sum(a, axis=-1))


def test_angle_between_and_log_sinc_keep_their_values():
    rng = np.random.default_rng(1)
    x, y = rng.normal(size=(500, 3)), rng.normal(size=(500, 3))
    ref = 2.0 * np.arctan2(
        np.sqrt(np.sum((x - y) ** 2, axis=-1)), np.sqrt(np.sum((x + y) ** 2, axis=-1))
    )
    np.testing.assert_array_equal(angle_between(x, y), ref)
    # log_sinc: all-small, all-large and mixed inputs against the two-branch formula
    for t in [rng.uniform(0, 0.04, 50), rng.uniform(0.06, 4.0, 50), rng.uniform(0, 4.0, 50)]:
        big = np.where(t < 0.05, 1.0, t)
        with np.errstate(divide="ignore", invalid="ignore"):
            val = np.where(big < np.pi, np.log(np.sin(big) / big), -np.inf)
        t2 = t * t
        series = -(t2 / 6 + t2**2 / 180 + t2**3 / 2835 + t2**4 / 37800 + t2**5 / 467775)
        expect = np.where(t < 0.05, series, val)
        np.testing.assert_allclose(log_sinc(t), expect, rtol=1e-15, atol=1e-300)


def test_many_points_kernel_is_the_single_kernel_bit_for_bit():
    from pymc_manidp.geometry._numba.sphere_kernels import sphere_log_mean, sphere_log_means

    rng = np.random.default_rng(4)
    for radius in (1.0, 2.5):
        S = pmd.Sphere(dim=3, radius=radius)
        center = np.array([0.0, 0.0, 0.0, radius])
        data = S.exp_coords(center, rng.normal(size=(257, 3)) * 0.4 * radius)
        xs = S.exp_coords(center, rng.normal(size=(6, 3)) * 0.3 * radius)
        w = rng.random(257)
        g, e, tmax = sphere_log_means(xs, data, w, radius)
        for k, x in enumerate(xs):
            g1, e1, _, t1 = sphere_log_mean(x, data, w, radius, False)
            np.testing.assert_array_equal(g[k], g1)
            assert e[k] == e1 and tmax[k] == t1
        # through the reductions: one call for all points = one call per point
        ref = np.array([S.frechet_gradient(x, data, w)[0] for x in xs])
        np.testing.assert_array_equal(S.frechet_gradients(xs, data, w)[0], ref)
        # the comparison sees a change of summation order (the data reversed)
        g_rev = sphere_log_means(xs, data[::-1].copy(), w[::-1].copy(), radius)[0]
        assert not np.array_equal(g_rev, g)


def test_many_points_kernel_refuses_the_cut_locus():
    S = pmd.Sphere(dim=2)
    xs = np.array([[0.0, 0.0, 1.0], [1.0, 0.0, 0.0]])
    data = np.array([[0.0, 0.0, -1.0]])  # antipodal to the first point
    with pytest.raises(ValueError, match="cut locus"):
        S.frechet_gradients(xs, data, np.ones(1))
