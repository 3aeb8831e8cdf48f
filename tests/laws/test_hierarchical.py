"""Hierarchical models of private releases (issue 28, item 4): six groups, each with a
private Laplace release of its own mean, the group means Laplace around a uniform
population mean. A latent variable whose footpoint is random is sampled in the moving
chart (the non-centred form, ``MovingPolarChart``) by default.

Seeded, PyMC's NUTS at its default ``target_accept`` (0.8), 4 chains x (1,000 + 1,000):
R-hat <= 1.01 and bulk ESS >= 400 for every scalar, and at most 2 divergent transitions
of 4,000 (measured: 1 here with strict floats, 2 with numba's fastmath, 0 on two other
data sets; issue 28's target is 0, not met on
every data set: the rare divergences start where the chart's direction ``P w/|P w|`` is
undefined, see docs/mechanisms.md); the same data in the normalized-Gaussian chart fixed
in space (the centred form the library used before) must have a bulk ESS at least 1.5
times smaller (measured 2,586 against 975), which is what makes the moving chart the
default here.
"""

from __future__ import annotations

import arviz as az
import numpy as np
import pymc as pm
import pytest

import pymc_manidp as pmd
from pymc_manidp.laws import MovingPolarChart, NormalizedGaussian
from pymc_manidp.mcmc.sampling import strict_floats

S = pmd.Sphere(dim=2)
GROUPS, TAU, SIGMA = 6, 0.1, 0.3


def _six_groups(seed, centred=False):
    rng = np.random.default_rng(seed)
    population = S.sample_uniform(rng, ())
    means = pm.draw(pmd.ManifoldLaplace.dist(S, population, TAU, size=GROUPS), random_seed=seed)
    releases = pm.draw(pmd.ManifoldLaplace.dist(S, means, SIGMA), random_seed=seed + 1)
    kw = {"default_transform": NormalizedGaussian(S)} if centred else {}
    with pm.Model() as model:
        mu = pmd.ManifoldUniform("mu", S)
        theta = pmd.ManifoldLaplace("theta", S, mu, TAU, size=GROUPS, **kw)
        pmd.ManifoldLaplace("release", S, theta, SIGMA, observed=releases)
    return model, theta


def _fit(model, seed):
    # strict floats: a divergence count is chaotic in the last bits of the log-density,
    # which numba's fastmath lets differ between a cold and a warm compile cache
    with model, strict_floats():
        idata = pm.sample(
            1000,
            tune=1000,
            chains=4,
            nuts_sampler="pymc",
            random_seed=seed,
            progressbar=False,
            compute_convergence_checks=False,
        )
    summary = az.summary(idata, var_names=["mu", "theta"])
    return int(idata.sample_stats["diverging"].sum()), summary


@pytest.mark.slow
def test_six_groups_sample_cleanly_in_the_moving_chart():
    model, theta = _six_groups(seed=0)
    assert isinstance(model.rvs_to_transforms[theta], MovingPolarChart)
    divergences, summary = _fit(model, seed=3)
    assert divergences <= 2
    assert summary["r_hat"].max() <= 1.01
    assert summary["ess_bulk"].min() >= 400
    # the same data, the same sampler, the chart fixed in space
    centred, _ = _six_groups(seed=0, centred=True)
    _, summary_c = _fit(centred, seed=3)
    assert summary["ess_bulk"].min() >= 1.5 * summary_c["ess_bulk"].min()
