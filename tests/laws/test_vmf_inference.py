r"""The von Mises–Fisher law as the prior of a noise-aware model (issue 40, item 4a).

Oracle: on S² the posterior of the footpoint η behind one unrestricted Laplace release
x̃ with a ``VonMisesFisher(μ₀, κ)`` prior has the density

.. math:: \pi(\eta \mid \tilde x) \propto e^{\kappa\mu_0^\top\eta - \rho(\eta, \tilde x)/\sigma},

integrated here by a product rule in polar coordinates about x̃ (independently of the
package: NumPy only), which gives the exact distribution function of the statistic
μ₀ᵀη; NUTS draws are compared with it by a KS test calibrated by the ESS
(``tests.radial.mcmc_ks``) at α = 0.01, and the same draws are rejected against the
quadrature at a wrong κ (κ/2). With random ``mu``/``kappa`` the model's joint
log-density is checked against SciPy's ``vonmises_fisher`` and the Laplace's own.
"""

from __future__ import annotations

import warnings

import numpy as np
import pymc as pm
import pytest
from scipy import stats

import pymc_manidp as pmd
from tests.radial import mcmc_ks

S2 = pmd.Sphere(dim=2)
ALPHA = 0.01
warnings.filterwarnings("ignore", message="Numba will use object mode")

RELEASE = S2.validate(np.array([0.48, 0.6, 0.64]))
MU0 = np.array([1.0, 0.0, 0.0])  # about 61° from the release
SIGMA = 0.3
KAPPA = 4.0


def _published(value, sigma):
    return {"value": value, "mechanism": "manifold Laplace", "sigma": sigma, "restricted": False}


def _posterior_cdf_of_cosine(kappa, n_theta=1500, n_phi=1500):
    """The distribution function of μ₀ᵀη under the posterior, by quadrature on S².

    Midpoint rule in polar coordinates (θ, φ) about the release: the density in θ is
    smooth there (the Laplace's cusp at θ = 0 is a kink only in the ambient chart).
    """
    theta = (np.arange(n_theta) + 0.5) * np.pi / n_theta
    phi = (np.arange(n_phi) + 0.5) * 2 * np.pi / n_phi
    e1 = MU0 - (MU0 @ RELEASE) * RELEASE
    e1 /= np.linalg.norm(e1)
    e2 = np.cross(RELEASE, e1)
    th, ph = np.meshgrid(theta, phi, indexing="ij")
    eta = (
        np.cos(th)[..., None] * RELEASE
        + (np.sin(th) * np.cos(ph))[..., None] * e1
        + (np.sin(th) * np.sin(ph))[..., None] * e2
    )
    s = eta @ MU0
    log_w = kappa * s - th / SIGMA + np.log(np.sin(th))
    w = np.exp(log_w - log_w.max()).ravel()
    order = np.argsort(s.ravel())
    s_sorted, cum = s.ravel()[order], np.cumsum(w[order])
    cum /= cum[-1]
    return lambda t: np.interp(t, s_sorted, cum, left=0.0, right=1.0)


def test_quadrature_oracle_is_a_distribution_function():
    cdf = _posterior_cdf_of_cosine(KAPPA, 400, 400)
    assert cdf(-1.0) == 0.0 and cdf(1.0) == 1.0
    # the prior pulls toward μ₀: the median cosine lies above the release's own
    assert cdf(RELEASE @ MU0) < 0.5


def test_vmf_prior_posterior_matches_quadrature_and_a_wrong_kappa_is_caught():
    # NUTS (PyMC's defaults for the step) 2 chains x 1,500 draws after 1,000 tuning;
    # KS of μ₀ᵀη against the quadrature, p-value for n = ESS, alpha = 0.01
    prior = lambda n, **kw: pmd.VonMisesFisher(n, MU0, KAPPA, **kw)  # noqa: E731
    model = pmd.noise_aware_model(_published(RELEASE, SIGMA), S2, prior=prior)
    with model:
        idata = pm.sample(
            1500,
            tune=1000,
            chains=2,
            random_seed=3,
            progressbar=False,
            compute_convergence_checks=False,
        )
    assert int(idata.sample_stats["diverging"].sum()) == 0
    s = idata.posterior["mean"].values @ MU0
    stat, pvalue, ess = mcmc_ks(s, _posterior_cdf_of_cosine(KAPPA))
    assert ess >= 400 and pvalue > ALPHA, (stat, pvalue, ess)
    # the same draws against the posterior of a prior with half the concentration
    _, wrong, _ = mcmc_ks(s, _posterior_cdf_of_cosine(KAPPA / 2))
    assert wrong < ALPHA, wrong


def test_random_mu_and_kappa_give_the_joint_density():
    """Hyperpriors on the vMF prior's μ and κ: the model's joint log-density (no
    Jacobian) at random points is the sum of SciPy's vMF, the Gamma and the Laplace's."""

    def prior(name, **kw):
        kappa = pm.Gamma("kappa", 2.0, 0.5)
        mu = pmd.VonMisesFisher("mu0", MU0, 2.0)
        return pmd.VonMisesFisher(name, mu, kappa, **kw)

    model = pmd.noise_aware_model(_published(RELEASE, SIGMA), S2, prior=prior)
    assert {v.name for v in model.free_RVs} == {"kappa", "mu0", "mean"}
    logp = model.compile_logp(jacobian=False)
    lap = pm.logp(pmd.ManifoldLaplace.dist(S2, RELEASE, SIGMA), RELEASE)  # the normalizer
    log_norm_laplace = float(lap.eval())  # at distance 0 the density is 1/Z
    rng = np.random.default_rng(0)
    for _ in range(5):
        mu0, eta = S2.sample_uniform(rng, (2,))
        kappa = rng.gamma(2.0, 2.0)
        point = model.initial_point()
        point["kappa_log__"] = np.log(kappa)
        point["mu0"] = mu0
        point["mean"] = eta
        # the latent values in their charts: set through the transforms
        for rv in (model["mu0"], model["mean"]):
            tr = model.rvs_to_transforms[rv]
            vname = model.rvs_to_values[rv].name
            point[vname] = tr.forward(point.pop(rv.name)).eval()
        expected = (
            stats.gamma(2.0, scale=2.0).logpdf(kappa)
            + stats.vonmises_fisher(MU0, 2.0).logpdf(mu0)
            + stats.vonmises_fisher(mu0, kappa).logpdf(eta)
            + log_norm_laplace
            - S2.dist(eta, RELEASE) / SIGMA
        )
        # SciPy's vMF log-density is good to about 1e-9 (absolute) at these κ
        np.testing.assert_allclose(logp(point), expected, rtol=0, atol=1e-7)


def test_a_prior_that_is_not_callable_is_refused():
    with pytest.raises(TypeError, match="prior must be a callable"):
        pmd.noise_aware_model(
            _published(RELEASE, SIGMA), S2, prior=pmd.VonMisesFisher.dist(MU0, KAPPA)
        )
