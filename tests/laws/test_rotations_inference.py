"""Noise-aware inference on SO(3): the posterior of the footpoint behind a release.

Oracles: with the Haar prior the posterior of the footpoint is the Laplace at the
release (its normalizer does not depend on the footpoint: SO(3) is homogeneous), whose
distance law ∝ e^{-t/σ} sin²(t/2) on [0, π] is written here; and simulation-based
calibration (Talts et al. 2018). Each test refutes a wrong σ (halved).
"""

from __future__ import annotations

import warnings

import numpy as np
import pymc as pm
import pytest

import pymc_manidp as pmd
from pymc_manidp.geometry.rotations import Rotations
from tests.mechanisms.test_rotations_end_to_end import radial_cdf
from tests.radial import mcmc_ks
from tests.sbc import needs_nutpie, nutpie_sbc

M = Rotations()
ALPHA = 0.01
warnings.filterwarnings("ignore", message="Numba will use object mode")


def _published(value, sigma):
    return {"value": value, "mechanism": "manifold Laplace", "sigma": sigma, "restricted": False}


def test_noise_aware_model_of_a_rotation_release():
    x = M.from_rotvecs([0.3, -1.0, 0.4])
    m = pmd.noise_aware_model(_published(x, 0.2), M)
    assert [v.name for v in m.free_RVs] == ["mean"] and m.named_vars_to_dims["mean"] == (
        "row",
        "col",
    )
    ip = m.initial_point()
    assert np.isfinite(m.compile_logp()(ip))
    # its log-density is the Laplace's at the release, normalized: e^{-rho/sigma}/Z
    # plus the polar chart's Jacobian; the observed term alone:
    lp = pm.logp(pmd.ManifoldLaplace.dist(M, x, 0.2), x).eval()
    assert lp == pytest.approx(-float(M.pt_laplace_log_normalizer(0.2).eval()))


@pytest.mark.slow  # NUTS compile and 2 x 2,000 draws: about 1-2 min on 2 busy cores
def test_haar_prior_posterior_is_the_laplace_at_the_release():
    """NUTS 2 chains x 2,000 draws; KS of the distance to the release (p-value at n =
    ESS >= 400, alpha 0.01); the law with σ/2 is refuted by the same test."""
    sigma = 0.3
    x = M.from_rotvecs([0.3, -1.0, 0.4])
    with pmd.noise_aware_model(_published(x, sigma), M):
        idata = pm.sample(
            2000,
            tune=1000,
            chains=2,
            random_seed=1,
            progressbar=False,
            compute_convergence_checks=False,
        )
    assert int(idata.sample_stats["diverging"].sum()) == 0
    d = M.dist(x, idata.posterior["mean"].values)
    stat, pvalue, ess = mcmc_ks(d, radial_cdf(sigma))
    assert ess >= 400 and pvalue > ALPHA, (stat, pvalue, ess)
    assert mcmc_ks(d, radial_cdf(sigma / 2))[1] < ALPHA


@pytest.mark.slow
@needs_nutpie
def test_simulation_based_calibration():
    """Simulation-based calibration on nutpie (``tests/sbc.py``) of the noise-aware
    model (Haar prior, whose ``pm.draw`` is ``M.sample_uniform``; Laplace likelihood,
    releases at σ = 0.3): 200 replicates, ranks of the truth's entry [2, 2] among L = 50
    draws (2 chains x 100 after 100 tuning, thinned by 4), 10 bins, chi-square at
    alpha = 0.01, seed fixed. The model with σ/2 (releases still drawn at 0.3, 100
    replicates) is caught at the same alpha."""
    entry = lambda p: p[:, 2, 2]  # noqa: E731
    model = pmd.noise_aware_model(_published(np.eye(3), 0.3), M)
    p, res = nutpie_sbc(model, entry, 0.3, 200, seed=21)
    assert p > ALPHA, res.histogram.T
    wrong = pmd.noise_aware_model(_published(np.eye(3), 0.15), M)
    p, res = nutpie_sbc(wrong, entry, 0.15, 100, seed=22, release_factor=2.0)
    assert p < ALPHA, res.histogram.T
