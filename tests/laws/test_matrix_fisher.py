"""The matrix Fisher law on SO(3) (issue 40, items 2 and 5): oracles, each catching a wrong variant.

Oracles: the normalizer against mpmath (Wood's 1993 integral over the proper singular
values, 30 digits: an independent route from ours, which takes the eigenvalues of the
quaternion form); ∫ exp(logp) = 1 over SO(3) by quadrature in ZYZ Euler angles (Haar
measure sin β dα dβ dγ, no quaternions) and by Haar draws; the gradient of log c(F) is
E[R] (the same quadrature); the law of the rotation angle of exact draws at diagonal F
against its density by quadrature, and at F = U S Vᵀ the angle of UᵀRV against the same
law (KS, α = 0.01, n = 3000, fixed seeds) — a wrong scale and a transposed F are refuted;
PyMC's compiled dlogp against finite differences at F = κ R0 (repeated eigenvalues of
M(F): the NaN gradient that biased NUTS); NUTS (PyMC and nutpie, slow tier) against exact
draws on a latent MF(F) and on the conjugate posterior R0 | y ~ MF(κ Σ y), and recovering
R0 and κ of F = κ R0. SciPy has no matrix Fisher law; its ``Rotation`` checks our
quaternion map.
"""

from __future__ import annotations

import functools
import math

import mpmath
import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats
from scipy.spatial.transform import Rotation

import pymc_manidp as pmd
from pymc_manidp.laws.matrix_fisher import (
    matrix_fisher_log_normalizer,
    quaternion_form,
    sample_matrix_fisher,
)
from tests.sbc import needs_nutpie

ALPHA = 0.01
N_KS = 3000
LOG_VOLUME = math.log(8 * math.pi**2)


def _rot(v):
    return Rotation.from_rotvec(v).as_matrix()


U0, V0 = _rot([0.3, -0.7, 1.1]), _rot([-1.2, 0.4, 0.5])


@functools.lru_cache
def _fns():
    f = pt.dmatrix("F")
    x = pt.tensor3("R")
    log_c = matrix_fisher_log_normalizer(f)
    logp = pm.logp(pmd.MatrixFisher.dist(pt.specify_shape(f, (3, 3))), x)
    return (
        pytensor.function([f], log_c),
        pytensor.function([f], pt.grad(log_c, f)),
        pytensor.function([x, f], logp),
    )


# --- the normalizer ---------------------------------------------------------------------------
mpmath.mp.dps = 30


def _mp_log_c(s):
    """Wood (1993): c = ∫_0^1 e^{s1(2t-1)} I0(t(s2+s3)) I0((1-t)(s2-s3)) dt."""
    s1, s2, s3 = (mpmath.mpf(float(v)) for v in s)

    def g(t):
        return (
            mpmath.exp(s1 * (2 * t - 1))
            * mpmath.besseli(0, t * (s2 + s3))
            * mpmath.besseli(0, (1 - t) * (s2 - s3))
        )

    edges = [0] + [1 - mpmath.mpf(10) ** -k for k in range(1, 12)] + [1]
    return float(mpmath.log(mpmath.quad(g, edges)))


SINGULAR = [
    [0.0, 0.0, 0.0],
    [1e-8, 1e-8, 1e-8],
    [1 / 3, 0.3333333333333333, -0.25],
    [3.0, 2.0, 1.0],
    [3.0, 2.0, -1.0],
    [10.0, 10.0, 10.0],
    # mpmath's integral costs 15-22 s each at these (loaded 2-core machine): slow tier;
    # [1e6, 0, 0] keeps a large extreme in the default tier
    pytest.param([50.0, 50.0, -50.0], marks=pytest.mark.slow),
    pytest.param([1e4, 1e2, 1.0], marks=pytest.mark.slow),
    pytest.param([1e5, 1e5, 1e5], marks=pytest.mark.slow),
    [1e6, 0.0, 0.0],
    pytest.param([1e6, 1e6, -1e6], marks=pytest.mark.slow),
]


@pytest.mark.parametrize("s", SINGULAR, ids=str)
def test_normalizer_matches_wood_integral_by_mpmath(s):
    # F = U diag(s) V^T with rotations U, V: the normalizer sees the proper singular values
    f = U0 @ np.diag(s) @ V0.T
    log_c, _, _ = _fns()
    ref = _mp_log_c(s)
    assert abs(log_c(f) - ref) <= 1e-12 * max(1.0, abs(ref)), (log_c(f), ref)
    if abs(s[2]) >= 0.1:  # the other sign of s3 (the plain singular values) is refuted
        bad = _mp_log_c([s[0], s[1], abs(s[2]) if s[2] < 0 else -s[2]])
        assert abs(bad - ref) > 1e-6


# --- quadrature over SO(3) ---------------------------------------------------------------------
@functools.lru_cache
def _euler_grid(n=40):
    """ZYZ Euler angles: R = Rz(α) Ry(β) Rz(γ), volume element sin β dα dβ dγ (total 8π²)."""
    u, wu = np.polynomial.legendre.leggauss(n)  # u = cos β
    ang = np.linspace(0, 2 * np.pi, 2 * n, endpoint=False)
    aa, uu, gg = np.meshgrid(ang, u, ang, indexing="ij")
    r = Rotation.from_euler("ZYZ", np.stack([aa, np.arccos(uu), gg], -1).reshape(-1, 3))
    w = np.broadcast_to(wu[None, :, None] * (np.pi / n) ** 2, aa.shape).reshape(-1)
    return r.as_matrix(), w


F_GENERIC = U0 @ np.diag([4.0, 2.5, -1.0]) @ V0.T


def test_density_integrates_to_one_over_so3():
    r, w = _euler_grid()
    assert abs(np.sum(w) - 8 * np.pi**2) < 1e-10
    _, _, logp = _fns()
    lp = logp(r, F_GENERIC)
    assert abs(np.sum(np.exp(lp) * w) - 1) < 1e-10
    # the textbook density w.r.t. the normalized Haar measure (no 1/8π²) is refuted
    assert abs(np.sum(np.exp(lp + LOG_VOLUME) * w) - 1) > 1
    # and so is the normalizer of the plain singular values (det F < 0 ignored)
    wrong_f = U0 @ np.diag([4.0, 2.5, 1.0]) @ V0.T
    log_c, _, _ = _fns()
    wrong = lp + log_c(F_GENERIC) - log_c(wrong_f)
    assert abs(np.sum(np.exp(wrong) * w) - 1) > 1e-3


def test_haar_draws_average_to_one():
    # E_Haar[8π² f(R)] = 1: 200,000 Haar rotations (standard error about 0.01 here)
    r = pmd.Rotations().sample_uniform(np.random.default_rng(0), (200_000,))
    _, _, logp = _fns()
    f = 0.3 * F_GENERIC
    vals = np.exp(logp(r, f) + LOG_VOLUME)
    se = vals.std() / np.sqrt(vals.size)
    assert abs(vals.mean() - 1) < 4 * se
    assert abs(np.exp(LOG_VOLUME) * vals.mean() - 1) > 4 * se  # the Haar-measure density


@pytest.mark.parametrize("f", [F_GENERIC, 3.0 * np.eye(3), 3.0 * U0], ids=["generic", "3I", "3U"])
def test_gradient_is_the_mean_rotation(f):
    # d log c / dF = E[R] (an exponential family); F = κ I has repeated singular values,
    # where PyTensor's own eigh gradient is NaN
    r, w = _euler_grid()
    _, dlog_c, logp = _fns()
    dens = np.exp(logp(r, f)) * w
    np.testing.assert_allclose(dlog_c(f), np.einsum("n,nij->ij", dens, r), atol=1e-10)


# --- the law of exact draws -----------------------------------------------------------------------
def _angle_cdf(s):
    """CDF of the rotation angle θ of R ~ MF(diag s): density (1 - cos θ) ×
    ∫_{S²} exp(tr(diag(s) R(θ, n))) dn, R_ii = cos θ + (1 - cos θ) n_i² (axis n uniform)."""
    u, wu = np.polynomial.legendre.leggauss(48)
    phi = np.linspace(0, 2 * np.pi, 96, endpoint=False)
    uu, pp = np.meshgrid(u, phi, indexing="ij")
    sq = np.sqrt(1 - uu**2)
    n2 = np.stack([(sq * np.cos(pp)) ** 2, (sq * np.sin(pp)) ** 2, uu**2], -1).reshape(-1, 3)
    wn = np.broadcast_to(wu[:, None], uu.shape).reshape(-1)
    theta = np.linspace(0, np.pi, 2001)
    c = np.cos(theta)
    expo = c[:, None] * np.sum(s) + (1 - c)[:, None] * (n2 @ np.asarray(s))[None, :]
    top = expo.max()
    pdf = (1 - c) * (np.exp(expo - top) @ wn)
    cdf = np.concatenate([[0], np.cumsum((pdf[1:] + pdf[:-1]) / 2)])
    return lambda q: np.interp(q, theta, cdf / cdf[-1])


def _angles(r):
    return np.linalg.norm(Rotation.from_matrix(r).as_rotvec(), axis=-1)


@pytest.mark.parametrize("s", [[2.0, 1.0, 0.5], [8.0, 3.0, -2.0], [40.0, 40.0, 40.0]], ids=str)
def test_angle_law_at_diagonal_f(s):
    cdf = _angle_cdf(s)
    r = pm.draw(pmd.MatrixFisher.dist(np.diag(s), size=N_KS), random_seed=3)
    np.testing.assert_allclose(
        r @ np.swapaxes(r, -1, -2), np.broadcast_to(np.eye(3), r.shape), atol=1e-13
    )
    np.testing.assert_allclose(np.linalg.det(r), 1.0, atol=1e-13)
    assert stats.kstest(_angles(r), cdf).pvalue > ALPHA
    wrong = sample_matrix_fisher(1.3 * np.diag(s), (N_KS,), np.random.default_rng(3))
    assert stats.kstest(_angles(wrong), cdf).pvalue < ALPHA


def test_angle_law_at_a_general_f_and_transposed_f_is_refuted():
    # R ~ MF(U S V^T)  <=>  U^T R V ~ MF(S): its angle follows the diagonal law
    s = [6.0, 2.0, -1.0]
    f = U0 @ np.diag(s) @ V0.T
    cdf = _angle_cdf(s)
    r = sample_matrix_fisher(f, (N_KS,), np.random.default_rng(5))
    assert stats.kstest(_angles(U0.T @ r @ V0), cdf).pvalue > ALPHA
    wrong = sample_matrix_fisher(f.T, (N_KS,), np.random.default_rng(5))
    assert stats.kstest(_angles(U0.T @ wrong @ V0), cdf).pvalue < ALPHA


def test_quaternion_form_agrees_with_scipy_rotation():
    # tr(F^T R(q)) = q^T M(F) q with SciPy's quaternion map (scalar last there)
    rng = np.random.default_rng(0)
    q = rng.normal(size=(20, 4))
    q /= np.linalg.norm(q, axis=-1, keepdims=True)
    r = Rotation.from_quat(np.roll(q, -1, axis=-1)).as_matrix()
    f = rng.normal(size=(3, 3))
    np.testing.assert_allclose(
        np.einsum("ij,nij->n", f, r), np.einsum("ni,ij,nj->n", q, quaternion_form(f), q), atol=1e-13
    )
    eig = np.linalg.eigvalsh(quaternion_form(np.diag([3.0, 2.0, -1.0])))
    np.testing.assert_allclose(eig, [-6.0, 0.0, 2.0, 4.0], atol=1e-14)  # s1+s2+s3, ...


def test_huge_f_draws_and_logp_are_finite():
    f = 1e9 * U0
    r = sample_matrix_fisher(f, (1000,), np.random.default_rng(0))
    assert np.all(np.isfinite(r))
    # near U0, tr(F^T R) = kappa (3 - theta²) + ...: theta² ~ chi²_3 / (2 kappa),
    # E[theta²] = 3/(2 kappa); n = 1000 gives it to 4.5% (1 sd), a kappa 30% off is refuted
    theta2 = _angles(U0.T @ r) ** 2
    assert abs(np.mean(theta2) * 2e9 / 3 - 1) < 0.15
    wrong = _angles(U0.T @ sample_matrix_fisher(1.3 * f, (1000,), np.random.default_rng(0)))
    assert abs(np.mean(wrong**2) * 2e9 / 3 - 1) > 0.15
    _, _, logp = _fns()
    assert np.all(np.isfinite(logp(r[:5], f)))


# --- the PyMC workflow ------------------------------------------------------------------------
def test_batches_observed_and_predictive():
    fs = np.stack([5.0 * U0, np.zeros((3, 3))])
    d = pmd.MatrixFisher.dist(fs, size=(4, 2))
    x = pm.draw(d, random_seed=0)
    assert x.shape == (4, 2, 3, 3)
    lp = pm.logp(d, x).eval()
    np.testing.assert_allclose(lp[:, 1], -LOG_VOLUME, rtol=1e-13)
    _, _, logp = _fns()
    np.testing.assert_allclose(lp[:, 0], logp(x[:, 0], fs[0]), rtol=1e-12)
    with pm.Model() as m:
        r0 = pmd.ManifoldUniform("r0", pmd.Rotations())
        kappa = pm.Gamma("kappa", 2.0, 0.1)
        pmd.MatrixFisher("y", kappa * r0, observed=x[:, 0])
    prior = pm.sample_prior_predictive(draws=20, model=m, random_seed=1)
    y = prior.prior_predictive["y"].values[0]
    assert y.shape == (20, 4, 3, 3)
    np.testing.assert_allclose(np.linalg.det(y), 1.0, atol=1e-12)


def _recovery_model(data):
    with pm.Model() as m:
        r0 = pmd.ManifoldUniform("r0", pmd.Rotations())
        kappa = pm.Gamma("kappa", 2.0, 0.05)
        pmd.MatrixFisher("y", kappa * r0, observed=data)
    return m


def _quaternion(r):
    q = Rotation.from_matrix(r).as_quat()  # scalar last
    return np.r_[q[3], q[:3]]


def test_model_gradient_after_pymc_rewrites_at_repeated_singular_values():
    # PyMC's dlogp and nutpie both rewrite the logp graph ("canonicalize") BEFORE taking its
    # gradient; that removed the disconnected_grad around the eigenvectors, so the gradient
    # went through Eigh's, NaN at a repeated eigenvalue of M(F): at F = kappa R0 always
    # (M = kappa diag(3, -1, -1, -1)). NUTS then diverged at every step and stayed near its
    # start (0.74 rad from R0), the failure of the recovery tests. Oracle: central
    # differences of the compiled logp (step 1e-5, tolerance 1e-4 relative).
    data = sample_matrix_fisher(20.0 * U0, (10,), np.random.default_rng(3))
    m = _recovery_model(data)
    logp, dlogp = m.compile_logp(), m.compile_dlogp()
    for z, log_k in [(3.3 * _quaternion(U0), math.log(20.0)), ([1.0, 0.0, 0.0, 0.0], 0.0)]:
        point = {"r0_gaussian__": np.asarray(z, float), "kappa_log__": np.asarray(log_k)}
        flat = np.r_[point["r0_gaussian__"], log_k]
        fd = []
        for i in range(5):
            step = np.zeros(5)
            step[i] = 1e-5
            hi, lo = flat + step, flat - step
            fd.append(
                (
                    logp({"r0_gaussian__": hi[:4], "kappa_log__": hi[4]})
                    - logp({"r0_gaussian__": lo[:4], "kappa_log__": lo[4]})
                )
                / 2e-5
            )
        grad = dlogp(point)
        assert np.all(np.isfinite(grad)), grad
        np.testing.assert_allclose(grad, fd, rtol=1e-4, atol=1e-4)


# NUTS against exact draws. Statistics of the draws (chain, draw) are compared with exact
# draws of the same law: the mean against its exact value, within 4 Monte Carlo standard
# errors (ArviZ's mcse), and the whole law by a two-sample KS test counted at the chains'
# effective sample size (alpha = 0.01). Fixed seeds throughout.
N_EXACT = 4000


def _nuts(model, backend, draws=300, tune=300, seed=1):
    with model:
        return pm.sample(
            draws,
            tune=tune,
            chains=2,
            random_seed=seed,
            progressbar=False,
            nuts_sampler=backend,
            compute_convergence_checks=False,
        )


def _agrees_with_exact(chains_stat, exact_stat, exact_mean):
    """``(z, p)``: the chains' mean in MCSE units from ``exact_mean``, and the ESS-counted
    two-sample KS p-value of the chains' statistic ``(chain, draw)`` against exact draws."""
    import arviz as az

    x = np.asarray(chains_stat, float)
    z = (x.mean() - exact_mean) / float(az.mcse(x))
    ess = float(az.ess(x))
    d = stats.ks_2samp(x.ravel(), exact_stat).statistic
    n_eff = ess * len(exact_stat) / (ess + len(exact_stat))
    return z, float(stats.kstwo.sf(d, max(1, round(n_eff))))


def _check_against_exact(stats_pairs):
    for name, chains_stat, exact_stat, exact_mean in stats_pairs:
        z, p = _agrees_with_exact(chains_stat, exact_stat, exact_mean)
        assert abs(z) < 4 and p > ALPHA, (name, z, p)


def _mean_rotation(f):
    """E[R] of MF(F): the gradient of log c(F) (checked by quadrature above)."""
    return _fns()[1](np.asarray(f, float))


F_NUTS = U0 @ np.diag([6.0, 3.0, -1.0]) @ V0.T  # det F < 0: the proper singular values


def _latent_law_check(backend):
    # R ~ MF(F) alone, in the quaternion chart (NormalizedGaussian): the chart's Jacobian and
    # the measure (logp w.r.t. the volume 8 pi^2, the chart's log vol(SO(3))) are what is
    # tested; F is a constant, so no eigenvalue gradient is involved
    with pm.Model() as m:
        pmd.MatrixFisher("r", F_NUTS)
    idata = _nuts(m, backend)
    r = idata.posterior["r"].values  # (chain, draw, 3, 3)
    exact = sample_matrix_fisher(F_NUTS, (N_EXACT,), np.random.default_rng(7))
    trace = np.einsum("ij,...ij->...", F_NUTS, r)
    angle = _angles(U0.T @ r.reshape(-1, 3, 3) @ V0).reshape(trace.shape)  # from the mode
    _check_against_exact(
        [
            (
                "tr(F'R)",
                trace,
                np.einsum("ij,nij->n", F_NUTS, exact),
                np.sum(F_NUTS * _mean_rotation(F_NUTS)),
            ),
            ("angle", angle, _angles(U0.T @ exact @ V0), np.mean(_angles(U0.T @ exact @ V0))),
        ]
    )
    assert int(idata.sample_stats["diverging"].sum()) == 0


KAPPA_CONJ = 20.0
DATA_CONJ = sample_matrix_fisher(KAPPA_CONJ * U0, (10,), np.random.default_rng(11))


def _conjugate_check(backend):
    # y_i ~ MF(kappa R0), R0 uniform, kappa known: the posterior of R0 is MF(kappa S),
    # S = sum_i y_i, exactly (the likelihood is exp(tr((kappa S)^T R0)) times a constant).
    # F = kappa R0 has repeated singular values, so the gradient goes through the
    # eigenvalues of M(F) at a repeated one: the NaN-gradient bug fails this test.
    with pm.Model() as m:
        r0 = pmd.ManifoldUniform("r0", pmd.Rotations())
        pmd.MatrixFisher("y", KAPPA_CONJ * r0, observed=DATA_CONJ)
    idata = _nuts(m, backend)
    r = idata.posterior["r0"].values
    f_post = KAPPA_CONJ * DATA_CONJ.sum(0)
    u, _, vt = np.linalg.svd(f_post)
    mode = u @ np.diag([1.0, 1.0, np.linalg.det(u @ vt)]) @ vt
    exact = sample_matrix_fisher(f_post, (N_EXACT,), np.random.default_rng(8))
    trace = np.einsum("ij,...ij->...", f_post, r)
    angle = _angles(mode.T @ r.reshape(-1, 3, 3)).reshape(trace.shape)
    _check_against_exact(
        [
            (
                "tr(F'R0)",
                trace,
                np.einsum("ij,nij->n", f_post, exact),
                np.sum(f_post * _mean_rotation(f_post)),
            ),
            ("angle", angle, _angles(mode.T @ exact), np.mean(_angles(mode.T @ exact))),
        ]
    )
    assert int(idata.sample_stats["diverging"].sum()) == 0


def _recovery_check(backend):
    k0 = 20.0
    data = sample_matrix_fisher(k0 * U0, (100,), np.random.default_rng(3))
    idata = _nuts(_recovery_model(data), backend, draws=200, tune=300)
    post = idata.posterior
    r_hat = Rotation.from_matrix(post["r0"].values.reshape(-1, 3, 3)).mean().as_matrix()
    k_hat = float(post["kappa"].mean())
    # the posterior sd of kappa is about 1.2 and of R0's angle about 0.02 rad (the data's
    # polar mean is 0.036 rad from U0); a normalizer off by a factor (the Haar-measure
    # density) leaves these alone, a wrong c(F) does not
    assert _angles((r_hat.T @ U0)[None])[0] < 0.08
    assert abs(k_hat - k0) < 4.0
    # a few divergences remain (2-4 of 400, both backends, tune 300 or 600): with kappa
    # random the cone of R0 in the quaternion chart narrows as kappa grows, a funnel a
    # diagonal mass matrix does not straighten (docs/distributions.md); the fixed-kappa
    # posterior above has none. The NaN-gradient bug made every draw divergent.
    assert int(idata.sample_stats["diverging"].sum()) <= 8


BACKENDS = ["pymc", pytest.param("nutpie", marks=needs_nutpie)]


@pytest.mark.slow  # PyMC about 5 min, nutpie 1.5 min on 2 loaded cores
@pytest.mark.parametrize("backend", BACKENDS)
def test_nuts_posterior_of_the_mean_rotation_is_matrix_fisher_of_the_sum(backend):
    _conjugate_check(backend)


@pytest.mark.slow
@pytest.mark.parametrize("backend", BACKENDS)
def test_nuts_draws_of_a_latent_matrix_fisher_match_exact_draws(backend):
    _latent_law_check(backend)


@pytest.mark.slow
@pytest.mark.parametrize("backend", BACKENDS)
def test_nuts_recovers_the_mean_rotation_and_kappa(backend):
    _recovery_check(backend)


def test_latent_matrix_fisher_uses_the_quaternion_chart():
    with pm.Model() as m:
        pmd.MatrixFisher("r", 10.0 * U0)
    assert m.rvs_to_transforms[m["r"]].name == "gaussian"
    start = m.initial_point()["r_gaussian__"]
    np.testing.assert_allclose(pmd.Rotations().pt_from_gaussian(start).eval(), U0, atol=1e-12)


# --- bad inputs -------------------------------------------------------------------------------
@given(f=st.sampled_from([1.0, np.zeros(3), np.zeros((2, 2)), np.zeros((3, 4)), np.zeros((4, 4))]))
def test_f_of_a_wrong_shape_is_refused(f):
    with pytest.raises(
        ValueError, match=r"F must have shape \(\.\.\., (p, p\) with p >= 2|3, 3\))"
    ):
        pmd.MatrixFisher.dist(f)


@given(
    f=st.sampled_from(
        [None, "F", np.eye(3, dtype=complex), np.eye(3, dtype=bool), [[1.0], [1.0, 2.0]]]
    )
)
def test_f_of_a_wrong_type_is_refused(f):
    with pytest.raises(TypeError, match="F must be"):
        pmd.MatrixFisher.dist(f)


@given(bad=st.sampled_from([math.nan, math.inf, -math.inf, 1e308, 2e11, 10**400]))
def test_f_not_finite_or_huge_is_refused(bad):
    f = np.zeros((3, 3), dtype=object if isinstance(bad, int) else float)
    f[0, 2] = bad
    with pytest.raises(
        ValueError, match=r"F( must be finite|'s singular values may be at most| is too large)"
    ):
        pmd.MatrixFisher.dist(f)


@given(scale=st.sampled_from([0.0, 5e-324, 1 / 3, 1e6, 1e10]))
def test_good_f_gives_finite_logp_and_draws(scale):
    f = scale * F_GENERIC / 4.0
    pmd.MatrixFisher.dist(f)
    r = sample_matrix_fisher(f, (2,), np.random.default_rng(0))
    _, _, logp = _fns()
    assert np.all(np.isfinite(logp(r, f)))


def test_random_f_is_checked_in_the_graph():
    f = pt.dmatrix("F")
    fn = pytensor.function(
        [f], pm.logp(pmd.MatrixFisher.dist(pt.specify_shape(f, (3, 3))), np.eye(3))
    )
    assert np.isfinite(fn(np.eye(3)))
    with pytest.raises(Exception, match="F finite"):
        fn(np.full((3, 3), np.nan))


def test_public_names():
    assert {"MatrixFisher", "Bingham"} <= set(pmd.__all__)
    assert pmd.MatrixFisher is pmd.laws.MatrixFisher
