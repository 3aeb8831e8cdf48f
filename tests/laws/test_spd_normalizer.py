"""The normalized manifold Laplace on SPD(k), k = 2, 3 (issue 11, item 3).

Oracles, each independent of the code under test:
- adaptive quadrature (scipy) of Weyl's eigenvalue integral with the radial part in
  closed form (the code uses Gauss-Laguerre and, for k = 2, a closed form of the rest);
- Monte Carlo in the full tangent space: symmetric matrices drawn from R^d's Laplace,
  their volume density from ``SPD.log_volume_density`` (an eigendecomposition per
  draw), no Weyl formula at all;
- the small-sigma limit: R^d's Laplace normalizer vol(S^{d-1}) Gamma(d) sigma^d;
- the density's integral over SPD(k) (through the PyMC distribution's own logp) is 1.
"""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
import pytest
from scipy import integrate, special

import pymc_manidp as pmd
from pymc_manidp.laws.normalizers import (
    ChebyshevSeries,
    laplace_log_normalizer,
    log_weyl_constant,
    spd_normalizer_max_sigma,
)


def _log_euclidean_z(d, sigma):
    return (
        np.log(2)
        + d / 2 * np.log(np.pi)
        - special.gammaln(d / 2)
        + special.gammaln(d)
        + (d * np.log(sigma))
    )


def _weyl_quad(k, sigma):
    """Z by nested adaptive quadrature over eigenvalue directions (an oracle)."""
    a = 1.0 / sigma

    def radial(b):  # int_0^inf t^{k-1} e^{-a t} prod sinh(t b) dt, exponentially scaled
        beta = a - b.sum()

        def f(y):
            return y ** (k - 1) * np.exp(-y) * np.prod(-np.expm1(-2 * y * b / beta)) / 2.0 ** len(b)

        return integrate.quad(f, 0, np.inf, epsabs=0, epsrel=1e-12, limit=200)[0] / beta**k

    c = np.exp(log_weyl_constant(k)) * 2.0 ** (k * (k - 1) // 2)
    if k == 2:  # w = (cos th, sin th): one half-gap |cos th - sin th|/2
        g = lambda th: radial(np.array([abs(np.cos(th) - np.sin(th)) / 2]))  # noqa: E731
        return c * integrate.quad(g, 0, 2 * np.pi, points=[np.pi / 4, 5 * np.pi / 4], limit=200)[0]

    # k = 3: the radial integral in closed form, int_0^inf t^2 e^{-a t} prod sinh(t b) dt
    # = 2^-3 sum_eps (prod eps) 2 / (a - eps.b)^3 (a sum of exponentials; it cancels
    # near the trace axis, where the integrand is tiny). The directions: the angle phi
    # to the trace axis and psi in the trace-free plane, where the integrand is smooth
    # on [0, pi/2] x [0, pi/6] and the sphere is 24 copies of that patch (the eigenvalue
    # permutations and w -> -w); the Monte Carlo test below checks that reduction.
    signs = np.array(np.meshgrid(*[[1.0, -1.0]] * 3, indexing="ij")).reshape(3, -1).T
    e = np.array([[1, 1, 1] / np.sqrt(3), [1, -1, 0] / np.sqrt(2), [1, 1, -2] / np.sqrt(6)])

    def on_sphere(psi, phi):
        w = np.cos(phi) * e[0] + np.sin(phi) * (np.cos(psi) * e[1] + np.sin(psi) * e[2])
        b = np.abs(w[[0, 0, 1]] - w[[1, 2, 2]]) / 2
        radial = np.sum(np.prod(signs, 1) * 2 / (a - signs @ b) ** 3) / 8
        return radial * np.sin(phi)

    val = integrate.dblquad(on_sphere, 0, np.pi / 2, 0, np.pi / 6, epsabs=0, epsrel=1e-11)[0]
    return c * 24 * val


def _log_z(k, sigma):
    return float(laplace_log_normalizer(pmd.SPD(k=k), sigma).eval())


@pytest.mark.parametrize("sigma", [0.05, 0.3, 1.0, 1.35])
def test_spd2_closed_form_matches_adaptive_quadrature(sigma):
    assert np.isclose(_log_z(2, sigma), np.log(_weyl_quad(2, sigma)), rtol=0, atol=1e-9)


@pytest.mark.parametrize("sigma", [0.1, 0.4, 0.6])
# the oracle's nested adaptive quadrature reports roundoff in its own error estimate;
# what the test checks is the agreement to atol 1e-7 below
@pytest.mark.filterwarnings("ignore:The occurrence of roundoff error:UserWarning")
def test_spd3_table_matches_adaptive_quadrature(sigma):
    assert np.isclose(_log_z(3, sigma), np.log(_weyl_quad(3, sigma)), rtol=0, atol=1e-7)


@pytest.mark.parametrize("k", [1, 2, 3])
def test_small_sigma_is_euclidean(k):
    # J = 1 + O(sigma^2): at sigma = 1e-4 the two agree to about 1e-7
    d = k * (k + 1) // 2
    assert abs(_log_z(k, 1e-4) - _log_euclidean_z(d, 1e-4)) < 1e-6


@pytest.mark.parametrize("k,sigma", [(2, 0.3), (2, 0.6), (3, 0.15), (3, 0.25)])
def test_monte_carlo_in_the_tangent_space(k, sigma):
    # Z = Z_E * E[J(V)] with V from R^d's Laplace (rate sigma): a mean of 4e5 draws, its
    # standard error estimated; |z| < 4.4 (alpha = 1e-5). A Z off by 2 % is caught.
    P = pmd.SPD(k=k)
    d, n = P.dim, 400_000
    rng = np.random.default_rng(20261124 + k)
    t = rng.gamma(d, sigma, n)
    u = rng.standard_normal((n, d))
    v = t[:, None] * u / np.linalg.norm(u, axis=1, keepdims=True)
    w = np.exp(P.log_volume_density(v))
    z_mc, se = w.mean(), w.std() / np.sqrt(n)
    ratio = np.exp(_log_z(k, sigma) - _log_euclidean_z(d, sigma))
    assert abs(ratio - z_mc) < 4.4 * se, (ratio, z_mc, se)
    assert se < 0.002 * z_mc  # precise enough that a 2 % error is refuted
    assert abs(1.02 * ratio - z_mc) > 4.4 * se


@pytest.mark.parametrize("k,sigma", [(2, 0.4), (3, 0.2)])
def test_density_integrates_to_one(k, sigma):
    # integrate exp(logp) of the PyMC distribution (footpoint not the identity) over
    # SPD(k) in the exp chart at the footpoint: importance sampling from R^d's Laplace
    # with rate 1.3 sigma; alpha = 1e-5 (|z| < 4.4). The unnormalized logp is refuted.
    P = pmd.SPD(k=k)
    d, n, s_q = P.dim, 100_000, 1.3 * sigma
    rng = np.random.default_rng(7 + k)
    eta = P.exp(np.eye(k), P.to_tangent(np.eye(k), rng.normal(size=(k, k)) * 0.5))
    t = rng.gamma(d, s_q, n)
    u = rng.standard_normal((n, d))
    v = t[:, None] * u / np.linalg.norm(u, axis=1, keepdims=True)
    x = P.exp_coords(eta, v)
    with pm.Model() as m:
        pmd.ManifoldLaplace("y", P, eta, sigma, observed=x)
    logp = m.compile_logp(sum=False)({})[0]
    log_q = -t / s_q - _log_euclidean_z(d, s_q)
    w = np.exp(logp + P.log_volume_density(v) - log_q)
    total, se = w.mean(), w.std() / np.sqrt(n)
    assert abs(total - 1) < 4.4 * se and se < 0.01, (total, se)
    unnormalized = total * np.exp(_log_z(k, sigma))
    assert abs(unnormalized - 1) > 4.4 * se * np.exp(_log_z(k, sigma))


@pytest.mark.parametrize("k", [2, 3])
def test_gradient_in_sigma_matches_finite_differences(k):
    s = pt.dscalar("s")
    log_z = laplace_log_normalizer(pmd.SPD(k=k), s)
    f = pytensor.function([s], [log_z, pytensor.grad(log_z, s)])
    for sigma in (0.05, 0.3, 0.6):
        h = 1e-6 * sigma
        fd = (f(sigma + h)[0] - f(sigma - h)[0]) / (2 * h)
        assert np.isclose(f(sigma)[1], fd, rtol=1e-6)


def test_chebyshev_op_agrees_in_both_backends_and_its_gradient_is_checked():
    coef = np.array([0.3, -1.2, 0.5, 0.25])
    x = pt.dvector("x")
    y = ChebyshevSeries(coef)(x)
    xs = np.array([-0.9, 0.1, 0.7])
    want = np.polynomial.chebyshev.chebval(xs, coef)
    for mode in ("FAST_RUN", "NUMBA"):
        f = pytensor.function([x], [y, pytensor.grad(y.sum(), x)], mode=mode)
        val, grad = f(xs)
        assert np.allclose(val, want)
        h = 1e-6
        fd = (f(xs + h)[0] - f(xs - h)[0]) / (2 * h)
        assert np.allclose(grad, fd, rtol=1e-6)
    pytensor.gradient.verify_grad(ChebyshevSeries(coef), [xs], rng=np.random.default_rng(0))


def test_edge_and_tabulated_range_are_refused_with_a_reason():
    P2, P3 = pmd.SPD(k=2), pmd.SPD(k=3)
    with pytest.raises(ValueError, match="normalizability edge"):
        pmd.ManifoldLaplace.dist(P2, np.eye(2), 1.5)
    top = spd_normalizer_max_sigma(3)
    with pytest.raises(ValueError, match="tabulated range"):
        pmd.ManifoldLaplace.dist(P3, np.eye(3), 0.5 * (top + P3.laplace_max_sigma))
    pmd.ManifoldLaplace.dist(P3, np.eye(3), 0.99 * top)  # inside: accepted
    # the restricted law has no normalizer and no edge
    dom = pmd.DataDomain(P2, np.eye(2), 1.0)
    pmd.ManifoldLaplace.dist(P2, np.eye(2), 3.0, domain=dom)
    # a pm.Data sigma beyond the edge is refused in the graph: the model's logp is -inf
    # there (PyMC's way), and the check's own message names the edge
    with pm.Model() as m:
        s = pm.Data("s", 2.0)
        y = pmd.ManifoldLaplace("y", P2, np.eye(2), s, observed=np.eye(2))
    assert m.compile_logp()({}) == -np.inf
    s.set_value(1.0)
    assert np.isfinite(m.compile_logp()({}))
    s.set_value(2.0)
    with pytest.raises(pm.logprob.utils.ParameterValueError, match="edge"):
        pm.logp(y, np.eye(2)).eval()


def test_random_sigma_on_spd_samples_and_recovers_it():
    # sigma is random now (it was refused): a HalfNormal prior and 30 observed draws of
    # SPD(2)'s Laplace with sigma 0.3. The posterior sd is about 0.02, so |mean - 0.3| <
    # 0.05 is a 2.5-sd band (alpha about 0.01 for the posterior mean, fixed seeds).
    # The same check refutes the model without the normalizer (a pm.Potential of the
    # unnormalized log-density): there a larger sigma always fits better.
    P = pmd.SPD(k=2)
    obs = pm.draw(pmd.ManifoldLaplace.dist(P, np.eye(2), 0.3, size=30), random_seed=3)
    dist = P.dist(np.eye(2), obs)

    def posterior_mean(normalized):
        with pm.Model():
            s = pm.HalfNormal("s", 1.0)
            if normalized:
                pmd.ManifoldLaplace("y", P, np.eye(2), s, observed=obs)
            else:
                pm.Potential("y", -pt.sum(dist) / s)
            idata = pm.sample(500, tune=500, chains=2, random_seed=4, progressbar=False)
        assert int(idata.sample_stats["diverging"].sum()) == 0
        return float(idata.posterior["s"].values.mean())

    assert abs(posterior_mean(True) - 0.3) < 0.05
    assert abs(posterior_mean(False) - 0.3) > 0.05
