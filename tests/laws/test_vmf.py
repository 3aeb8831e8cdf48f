"""The von Mises–Fisher law (issue 40, items 1 and 5): oracles, each shown to catch a wrong variant.

Oracles: the normalizer against mpmath's Bessel function (50 digits); ∫ exp(logp) = 1 by
quadrature on S² and S³; the law of the cosine t = μᵀx of exact draws against its
density ∝ exp(κt)(1 − t²)^((p−3)/2) (KS, α = 0.01, fixed seeds); SciPy's
``vonmises_fisher`` (logpdf, and its draws by a two-sample KS); ``pm.VonMises`` on the
circle; a NUTS fit on simulated data. Each test also runs a planted wrong variant (a
wrong normalizer, a wrong κ) through the same check and asserts that it fails.
"""

from __future__ import annotations

import functools
import math
import warnings

import mpmath
import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import special, stats

import pymc_manidp as pmd
import pymc_manidp.laws
from pymc_manidp.laws import directional
from pymc_manidp.laws.directional import sample_vmf, vmf_log_normalizer
from tests.sbc import needs_nutpie

warnings.filterwarnings("ignore", message="Numba will use object mode")

ALPHA = 0.01


@functools.cache
def _normalizer_fns():
    """``log Z``, its gradient and the gradient of ``log Z - κ`` (the density's), compiled
    on first use, inside the session's strict floats (``tests/conftest.py``)."""
    k, p = pt.dvector("kappa"), pt.lscalar("p")
    log_z = vmf_log_normalizer(p, k)
    scaled = directional._scaled_log_normalizer(p, k)
    return (
        pytensor.function([p, k], log_z),
        pytensor.function([p, k], pt.grad(pt.sum(log_z), k)),
        pytensor.function([p, k], pt.grad(pt.sum(scaled), k)),
    )


def LOG_Z(p, kappas):
    return _normalizer_fns()[0](p, kappas)


def DLOG_Z(p, kappas):
    return _normalizer_fns()[1](p, kappas)


def _unit(v):
    v = np.asarray(v, float)
    return v / np.linalg.norm(v)


def _mu(p):
    return _unit(np.arange(1.0, p + 1) * (-1.0) ** np.arange(p))  # generic, not a pole


@functools.lru_cache
def _logp_fn(p):
    value = pt.dmatrix("x")
    mu = pt.dvector("mu")
    kappa = pt.dscalar("kappa")
    lp = pm.logp(pmd.VonMisesFisher.dist(mu, kappa), value)
    return pytensor.function([value, mu, kappa], lp)


# --- the normalizer -----------------------------------------------------------------------
mpmath.mp.dps = 50


def _mp_log_z(p, kappa):
    nu = mpmath.mpf(p) / 2 - 1
    if kappa == 0:
        return float(mpmath.log(2 * mpmath.pi ** (nu + 1) / mpmath.gamma(nu + 1)))
    k = mpmath.mpf(kappa)
    return float(
        (nu + 1) * mpmath.log(2 * mpmath.pi)
        - nu * mpmath.log(k)
        + mpmath.log(mpmath.besseli(nu, k))
    )


KAPPAS = np.concatenate([[0.0, 5e-324], np.logspace(-8, 6, 57), [1 / 3, 2.0, 14.2, 1e6]])


def _naive_log_z(p, kappa):
    """The textbook formula with the unscaled Bessel function: the wrong variant."""
    nu = p / 2 - 1
    with np.errstate(all="ignore"):
        return (nu + 1) * np.log(2 * np.pi) - nu * np.log(kappa) + np.log(special.iv(nu, kappa))


def _normalizer_errors(p, log_z):
    ref = np.array([_mp_log_z(p, k) for k in KAPPAS])
    with np.errstate(invalid="ignore"):
        return np.abs(log_z - ref) / np.maximum(1.0, np.abs(ref))


@pytest.mark.parametrize("dim", [1, 2, 3, 10, 100])
def test_normalizer_matches_mpmath_to_1e_12(dim):
    p = dim + 1
    err = _normalizer_errors(p, LOG_Z(p, KAPPAS))
    assert np.all(err < 1e-12), (KAPPAS[np.argmax(err)], err.max())
    # the unscaled Bessel function overflows past kappa ~ 700 (and, for large p,
    # underflows at small kappa): the same check refutes it
    bad = _normalizer_errors(p, _naive_log_z(p, KAPPAS))
    assert not np.all(bad < 1e-12)


def _mp_mean_resultant_length(p, kappa):
    """``I_{ν+1}(κ)/I_ν(κ)`` and ``I_{ν+1}(κ)/I_ν(κ) - 1`` to 50 digits (0 and -1 at κ = 0)."""
    if kappa == 0:
        return 0.0, -1.0
    nu, k = mpmath.mpf(p) / 2 - 1, mpmath.mpf(kappa)
    # each returned as computed, not one from the other: A ~ κ/p at κ = 1e-300 and
    # A - 1 ~ -p/(2κ) at κ = 1e300 are below 50 digits of 1
    if kappa > 1e15:  # mpmath's Bessel functions are slow there; Hankel's expansion
        a_minus_1 = -(2 * nu + 1) / (2 * k) + (4 * nu**2 - 1) / (8 * k**2)  # next ~ 1/k³
        return float(1 + a_minus_1), float(a_minus_1)
    a = mpmath.besseli(nu + 1, k) / mpmath.besseli(nu, k)
    return float(a), float(a - 1)


# every branch of the gradient: 0, subnormal and tiny (the series, where (A - 1) + 1 would
# lose A's digits), the series' edge 2 sqrt(nu + 1), the middle (ive), Hankel's for the
# gradient (κ > 1000 (ν² + 1)) and for the value (κ > 1e8)
GRAD_KAPPAS = (0.0, 5e-324, 1e-300, 1e-8, 0.5, "edge", 30.0, 1e4, 1e6, 1e8, 1.5e8, 1e12, 1e300)


@pytest.mark.parametrize("dim", [1, 2, 10, 100])
def test_normalizer_gradient_is_the_mean_resultant_length(dim):
    # d log Z / d kappa = E[mu^T x] = I_{nu+1}(kappa) / I_nu(kappa) (0 at kappa = 0); the
    # density's log Z - kappa has A - 1, checked as such (A ~ 1 far out: A - 1 relative)
    p = dim + 1
    kappas = np.array([2 * math.sqrt(p / 2) if k == "edge" else k for k in GRAD_KAPPAS])
    ref = np.array([_mp_mean_resultant_length(p, k) for k in kappas])
    np.testing.assert_allclose(DLOG_Z(p, kappas), ref[:, 0], rtol=1e-12, atol=0)
    np.testing.assert_allclose(_normalizer_fns()[2](p, kappas), ref[:, 1], rtol=1e-12, atol=0)
    # the wrong order (the mean resultant length on S^p) is refuted by the same check
    wrong = DLOG_Z(p + 1, kappas)
    assert not np.allclose(wrong, ref[:, 0], rtol=1e-12, atol=0)


def test_normalizer_of_a_batch_of_dimensions():
    # p a vector (not what the density builds): the values of each p, broadcast
    ps, kappas = np.array([2, 3, 11, 101]), np.array([0.0, 1e-8, 30.0, 1e9])
    batch = vmf_log_normalizer(ps, kappas).eval()
    each = [LOG_Z(p, [k])[0] for p, k in zip(ps, kappas, strict=True)]
    np.testing.assert_allclose(batch, each, rtol=1e-15)


# --- quadrature --------------------------------------------------------------------------
def _s2_grid(n=200):
    u, wu = np.polynomial.legendre.leggauss(n)  # u = cos(theta): the area element du dphi
    phi = np.linspace(0, 2 * np.pi, 2 * n, endpoint=False)
    U, PHI = np.meshgrid(u, phi, indexing="ij")
    s = np.sqrt(1 - U**2)
    x = np.stack([s * np.cos(PHI), s * np.sin(PHI), U], -1).reshape(-1, 3)
    w = (wu[:, None] * np.full(PHI.shape[1], 2 * np.pi / PHI.shape[1])).reshape(-1)
    return x, w


def _s3_grid(n=64):
    # x = (cos a, sin a cos b, sin a sin b cos c, sin a sin b sin c); dA = sin²a sin b
    a, wa = np.polynomial.legendre.leggauss(n)
    a, wa = (a + 1) * np.pi / 2, wa * np.pi / 2
    u, wu = np.polynomial.legendre.leggauss(n)  # u = cos b
    c = np.linspace(0, 2 * np.pi, 2 * n, endpoint=False)
    A, U, C = np.meshgrid(a, u, c, indexing="ij")
    sb = np.sqrt(1 - U**2)
    x = np.stack(
        [np.cos(A), np.sin(A) * U, np.sin(A) * sb * np.cos(C), np.sin(A) * sb * np.sin(C)], -1
    ).reshape(-1, 4)
    w = (wa[:, None, None] * np.sin(A) ** 2 * wu[None, :, None] * (2 * np.pi / len(c))).reshape(-1)
    return x, w


@pytest.mark.parametrize(("grid", "p"), [(_s2_grid, 3), (_s3_grid, 4)])
@pytest.mark.parametrize("kappa", [0.0, 0.7, 12.0])
def test_density_integrates_to_one(grid, p, kappa):
    x, w = grid()
    mu = _mu(p)
    lp = _logp_fn(p)(x, mu, kappa)
    assert abs(np.sum(np.exp(lp) * w) - 1) < 1e-9
    if kappa > 0:  # a wrong normalizer (the order nu + 1/2 of the next sphere) is refuted
        wrong = lp + LOG_Z(p, [kappa])[0] - LOG_Z(p + 1, [kappa])[0]
        assert abs(np.sum(np.exp(wrong) * w) - 1) > 1e-3


# --- the law of the cosine ----------------------------------------------------------------
def _theta_cdf(p, kappa):
    """The CDF of theta = arccos(mu^T x): density ∝ exp(kappa (cos θ - 1)) sin^(p-2) θ."""
    grid = np.linspace(0, np.pi, 400001)
    pdf = np.exp(kappa * (np.cos(grid) - 1)) * np.sin(grid) ** (p - 2)
    cdf = np.concatenate([[0], np.cumsum((pdf[1:] + pdf[:-1]) / 2)])
    cdf /= cdf[-1]
    return lambda q: np.interp(q, grid, cdf)


N_KS = 4000


@pytest.mark.parametrize(
    ("p", "kappa"), [(2, 1.0), (2, 50.0), (3, 1.0), (3, 50.0), (4, 1.0), (11, 5.0), (101, 1e3)]
)
def test_cosine_law_of_draws(p, kappa):
    # KS of theta = arccos(t) (smooth where t's density has the (1 - t²) factors),
    # alpha = 0.01, n = 4000, fixed seed; the exact sampler that pm.draw calls
    mu = _mu(p)
    cdf = _theta_cdf(p, kappa)
    x = sample_vmf(mu, kappa, (N_KS,), np.random.default_rng(p))
    np.testing.assert_allclose(np.linalg.norm(x, axis=-1), 1, atol=1e-14)
    assert stats.kstest(np.arccos(np.clip(x @ mu, -1, 1)), cdf).pvalue > ALPHA
    wrong = sample_vmf(mu, 1.3 * kappa, (N_KS,), np.random.default_rng(p))
    assert stats.kstest(np.arccos(np.clip(wrong @ mu, -1, 1)), cdf).pvalue < ALPHA


def test_pm_draw_is_the_exact_sampler():
    # pm.draw runs rng_fn = sample_vmf with PyMC's Generator: the same KS oracle
    mu, kappa = _mu(3), 5.0
    x = pm.draw(pmd.VonMisesFisher.dist(mu, kappa, size=N_KS), random_seed=1)
    assert stats.kstest(np.arccos(np.clip(x @ mu, -1, 1)), _theta_cdf(3, kappa)).pvalue > ALPHA


@pytest.mark.parametrize("p", [3, 11, 101])
def test_huge_kappa_draws_are_stable(p):
    # at kappa = 1e6 the angle is ~ sqrt((p-1)/kappa): E[1 - t²] = (p-1)/kappa (1 + O(1/kappa));
    # n = 20000 gives that mean to 0.7% (p = 3); a kappa 10% off moves it by 10%
    kappa, n = 1e6, 20000
    mu = _mu(p)
    x = sample_vmf(mu, kappa, (n,), np.random.default_rng(5))
    assert np.all(np.isfinite(x))
    np.testing.assert_allclose(np.linalg.norm(x, axis=-1), 1, atol=1e-14)
    perp = x - (x @ mu)[:, None] * mu
    spread = np.mean(np.sum(perp**2, -1))
    assert abs(spread / ((p - 1) / kappa) - 1) < 0.03
    wrong = sample_vmf(mu, 1.1 * kappa, (n,), np.random.default_rng(5))
    perp = wrong - (wrong @ mu)[:, None] * mu
    assert abs(np.mean(np.sum(perp**2, -1)) / ((p - 1) / kappa) - 1) > 0.03
    # and beyond: kappa = 1e300 is the point mu, not NaN
    np.testing.assert_allclose(sample_vmf(mu, 1e300, (3,), np.random.default_rng(0)), [mu] * 3)


@pytest.mark.parametrize("p", [2, 3, 11])
def test_kappa_zero_is_uniform(p):
    # (t + 1)/2 ~ Beta((p-1)/2, (p-1)/2) for the uniform law; and logp = -log area
    mu = _mu(p)
    x = pm.draw(pmd.VonMisesFisher.dist(mu, 0.0, size=N_KS), random_seed=7)
    law = stats.beta((p - 1) / 2, (p - 1) / 2)
    assert stats.kstest((x @ mu + 1) / 2, law.cdf).pvalue > ALPHA
    other = _unit(np.ones(p))  # any axis: the law is rotation invariant
    assert stats.kstest((x @ other + 1) / 2, law.cdf).pvalue > ALPHA
    lp = pm.logp(pmd.VonMisesFisher.dist(mu, 0.0), x[:5]).eval()
    np.testing.assert_allclose(lp, -pmd.Sphere(dim=p - 1).log_volume, rtol=1e-14)
    wrong = sample_vmf(mu, 0.3, (N_KS,), np.random.default_rng(7))
    assert stats.kstest((wrong @ mu + 1) / 2, law.cdf).pvalue < ALPHA


# --- other libraries ------------------------------------------------------------------------
@pytest.mark.parametrize("p", [3, 5, 11])
@pytest.mark.parametrize("kappa", [1e-3, 2.0, 1e4])
def test_logpdf_matches_scipy(p, kappa):
    mu = _mu(p)
    x = stats.vonmises_fisher(mu, kappa).rvs(50, random_state=np.random.default_rng(1))
    ours = _logp_fn(p)(x, mu, kappa)
    np.testing.assert_allclose(ours, stats.vonmises_fisher(mu, kappa).logpdf(x), rtol=1e-10)
    wrong = ours - LOG_Z(p, [kappa])[0] + LOG_Z(p + 2, [kappa])[0]
    assert not np.allclose(wrong, stats.vonmises_fisher(mu, kappa).logpdf(x), rtol=1e-10)


@pytest.mark.parametrize(("p", "kappa"), [(3, 4.0), (11, 30.0)])
def test_draws_match_scipy_two_sample_ks(p, kappa):
    mu = _mu(p)
    n = 3000
    theirs = stats.vonmises_fisher(mu, kappa).rvs(n, random_state=np.random.default_rng(2)) @ mu
    ours = sample_vmf(mu, kappa, (n,), np.random.default_rng(3)) @ mu
    assert stats.ks_2samp(ours, theirs).pvalue > ALPHA
    wrong = sample_vmf(mu, 1.3 * kappa, (n,), np.random.default_rng(3)) @ mu
    assert stats.ks_2samp(wrong, theirs).pvalue < ALPHA


def test_circle_agrees_with_von_mises():
    # p = 2: the density of pm.VonMises at the angle (both w.r.t. arc length)
    angles = np.linspace(-np.pi, np.pi, 13)
    x = np.stack([np.cos(angles), np.sin(angles)], -1)
    for kappa in (0.0, 0.4, 3.0, 500.0):
        mu_angle = 0.3
        ours = pm.logp(pmd.VonMisesFisher.dist([np.cos(mu_angle), np.sin(mu_angle)], kappa), x)
        ours = ours.eval()
        # SciPy to 1e-12; PyMC's VonMises (its i0e) agrees to 1e-6 only
        np.testing.assert_allclose(
            ours, stats.vonmises.logpdf(angles, kappa, loc=mu_angle), rtol=1e-12, atol=1e-12
        )
        if kappa > 0:  # pm.VonMises refuses kappa = 0
            theirs = pm.logp(pm.VonMises.dist(mu_angle, kappa), angles).eval()
            np.testing.assert_allclose(ours, theirs, rtol=1e-6)


# --- the PyMC workflow ------------------------------------------------------------------------
def test_batches_draw_and_logp():
    mus = np.stack([_mu(3), -_mu(3)])
    kappas = np.array([100.0, 1.0])
    d = pmd.VonMisesFisher.dist(mus, kappas, size=(5, 2))
    x = pm.draw(d, random_seed=0)
    assert x.shape == (5, 2, 3)
    assert np.all(x[:, 0] @ mus[0] > 0.8)  # each member follows its own mu and kappa
    lp = pm.logp(d, x).eval()
    assert lp.shape == (5, 2)
    one = pm.logp(pmd.VonMisesFisher.dist(mus[1], 1.0), x[3, 1]).eval()
    np.testing.assert_allclose(lp[3, 1], one, rtol=1e-13)


def test_observed_batch_and_predictive():
    mu0 = _mu(3)
    data = sample_vmf(mu0, 10.0, (30,), np.random.default_rng(0))
    with pm.Model() as m:
        mu = pmd.ManifoldUniform("mu", pmd.Sphere(dim=2))
        kappa = pm.Gamma("kappa", 2.0, 0.1)
        pmd.VonMisesFisher("y", mu, kappa, observed=data)
    point = {"mu_gaussian__": 3 * mu0, "kappa_log__": np.log(10.0)}
    total = m.compile_logp(vars=[m["y"]], sum=True)(point)
    ref = np.sum(stats.vonmises_fisher(mu0, 10.0).logpdf(data))
    np.testing.assert_allclose(total, ref, rtol=1e-12)
    prior = pm.sample_prior_predictive(draws=40, model=m, random_seed=1)
    y = prior.prior_predictive["y"].values
    assert y.shape == (1, 40, 30, 3)
    np.testing.assert_allclose(np.linalg.norm(y, axis=-1), 1.0)
    # each prior draw's data sit around that draw's mu
    mus = prior.prior["mu"].values[0]
    assert np.median(np.einsum("dnp,dp->dn", y[0], mus)) > 0.5


def _fit(backend):
    mu0, k0 = _unit([0.6, 0.0, 0.8]), 20.0
    data = sample_vmf(mu0, k0, (200,), np.random.default_rng(3))
    with pm.Model():
        mu = pmd.ManifoldUniform("mu", pmd.Sphere(dim=2))
        kappa = pm.Gamma("kappa", 2.0, 0.05)
        pmd.VonMisesFisher("y", mu, kappa, observed=data)
        idata = pm.sample(
            200, tune=300, chains=2, random_seed=1, progressbar=False, nuts_sampler=backend
        )
    post = idata.posterior
    mu_hat = _unit(post["mu"].mean(("chain", "draw")).values)
    k_hat = float(post["kappa"].mean())
    # posterior sd of kappa ~ 1.4, of the direction ~ 1/sqrt(n kappa) = 0.016 rad: a
    # normalizer with the wrong order (p + 1) moves kappa's posterior by ~50% (about 10)
    assert math.acos(min(1.0, mu_hat @ mu0)) < 0.06
    assert abs(k_hat - k0) < 4.0
    return idata


def test_nuts_recovers_mu_and_kappa():
    _fit("pymc")


@needs_nutpie
def test_nutpie_recovers_mu_and_kappa():
    _fit("nutpie")


# --- bad inputs -------------------------------------------------------------------------------
BAD_KAPPA = st.one_of(
    st.sampled_from([-1.0, -5e-324, math.nan, math.inf, -math.inf, -(10**400), 10**400]),
    st.floats(max_value=-1e-300),
)


@given(kappa=BAD_KAPPA)
def test_bad_kappa_is_refused(kappa):
    with pytest.raises(ValueError, match=r"kappa .*(>= 0|too large)"):
        pmd.VonMisesFisher.dist([0.0, 0.0, 1.0], kappa)


@given(kappa=st.sampled_from(["1", None, True, np.bool_(False), [1, "a"], b"1"]))
def test_kappa_of_a_wrong_type_is_refused(kappa):
    with pytest.raises(TypeError, match="kappa must be"):
        pmd.VonMisesFisher.dist([0.0, 0.0, 1.0], kappa)


@given(kappa=st.sampled_from([0.0, 5e-324, 1 / 3, 0.3333333333333333, 1e6, 1e308, 10**300]))
def test_good_kappa_gives_finite_logp_and_draws(kappa):
    mu = np.array([0.0, 0.0, 1.0])
    pmd.VonMisesFisher.dist(mu, kappa)  # accepted
    # the same numbers through one compiled logp (a compile per example is seconds)
    assert np.isfinite(_logp_fn(3)(mu[None], mu, float(kappa))[0])
    assert np.all(np.isfinite(sample_vmf(mu, float(kappa), (2,), np.random.default_rng(0))))


@given(
    scale=st.one_of(
        st.sampled_from([0.0, 2.0, 1 + 1e-5, math.nan, math.inf, 1e308]),
        st.floats(min_value=1e-3, max_value=0.999),
    )
)
def test_mu_not_unit_is_refused(scale):
    with np.errstate(invalid="ignore"):  # inf * 0: the test's own input, a nan on purpose
        mu = scale * np.array([0.0, 0.6, 0.8])
    with pytest.raises(ValueError, match="mu must be unit vectors"):
        pmd.VonMisesFisher.dist(mu, 1.0)


def test_mu_within_tolerance_is_accepted():
    mu = np.array([0.0, 0.6, 0.8]) * math.nextafter(1.0, 2.0)
    pm.draw(pmd.VonMisesFisher.dist(mu, 1.0), random_seed=0)


@given(mu=st.sampled_from([1.0, [1.0], [[1.0]], np.zeros((2, 0))]))
def test_mu_of_a_wrong_shape_is_refused(mu):
    with pytest.raises(ValueError, match=r"mu must have shape \(\.\.\., p\) with p >= 2"):
        pmd.VonMisesFisher.dist(mu, 1.0)


@given(mu=st.sampled_from([None, "north", [1j, 0.0], [[1.0, 0.0], [1.0]], np.bool_([0, 1])]))
def test_mu_of_a_wrong_type_is_refused(mu):
    with pytest.raises(TypeError, match="mu must be"):
        pmd.VonMisesFisher.dist(mu, 1.0)


def test_random_parameters_are_checked_in_the_graph():
    x, mu, kappa = pt.dvector("x"), pt.dvector("mu"), pt.dscalar("kappa")
    f = pytensor.function([x, mu, kappa], pm.logp(pmd.VonMisesFisher.dist(mu, kappa), x))
    assert np.isfinite(f([0.0, 0.0, 1.0], [0.0, 0.0, 1.0], 2.0))
    for bad_mu, bad_kappa in (([0.0, 0.0, 2.0], 2.0), ([0.0, 0.0, 1.0], -1.0)):
        with pytest.raises(Exception, match="kappa >= 0 finite and mu a unit vector"):
            f([0.0, 0.0, 1.0], bad_mu, bad_kappa)


def test_public_name():
    assert "VonMisesFisher" in pmd.__all__
    assert pmd.VonMisesFisher is pmd.laws.VonMisesFisher
