"""Hierarchical models of private releases (issue 28, item 4): six groups, each with a
private Laplace release of its own mean, the group means Laplace around a uniform
population mean. A latent variable whose footpoint is random is sampled in the moving
tangent chart (the non-centred form, ``MovingTangentChart``) by default, and the
population mean in the normalized-Gaussian chart with a chi(3 + 8) auxiliary radius.

Seeded, PyMC's NUTS at its default ``target_accept`` (0.8), 4 chains x (1,000 + 1,000):
no divergent transition, R-hat <= 1.01 and bulk ESS >= 400 for every scalar (issue 28's
target). Measured with strict floats (``docs/benchmarks/hierarchical_charts.py``): 0
divergences on each of the data sets 0-7, where the moving polar chart with a
standard-normal auxiliary (the defaults before) gave 0, 1, 1, 1 on data sets 0-3, its
divergences starting near the origin of an auxiliary radius (the population mean's
``|z|``, or ``|P w|`` where the polar direction ``P w/|P w|`` is undefined;
docs/mechanisms.md). The old defaults are the deliberately worse variant: they diverge
on the data set tested here. The same data in the normalized-Gaussian chart fixed in
space (the centred form) must have a bulk ESS at least 1.5 times smaller, which is what
makes the moving chart the default.
"""

from __future__ import annotations

import arviz as az
import numpy as np
import pymc as pm
import pytest

import pymc_manidp as pmd
from pymc_manidp.laws import MovingPolarChart, MovingTangentChart, NormalizedGaussian
from pymc_manidp.mcmc.sampling import strict_floats

S = pmd.Sphere(dim=2)
GROUPS, TAU, SIGMA = 6, 0.1, 0.3
DATA = 1  # the data set's seed


def _six_groups(seed, chart="default"):
    """The six-group model; ``chart``: ``"default"``, ``"centred"`` (the group means in
    the normalized Gaussian fixed in space) or ``"old"`` (the moving polar chart and a
    standard-normal auxiliary for the population mean, the defaults before)."""
    rng = np.random.default_rng(seed)
    population = S.sample_uniform(rng, ())
    means = pm.draw(pmd.ManifoldLaplace.dist(S, population, TAU, size=GROUPS), random_seed=seed)
    releases = pm.draw(pmd.ManifoldLaplace.dist(S, means, SIGMA), random_seed=seed + 1)
    kw_mu, kw = {}, {}
    if chart == "centred":
        kw = {"default_transform": NormalizedGaussian(S)}
    elif chart == "old":
        kw_mu = {"default_transform": NormalizedGaussian(S, extra_dof=0.0)}
        kw = {"default_transform": MovingPolarChart(S)}
    with pm.Model() as model:
        mu = pmd.ManifoldUniform("mu", S, **kw_mu)
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
    model, theta = _six_groups(seed=DATA)
    assert isinstance(model.rvs_to_transforms[theta], MovingTangentChart)
    divergences, summary = _fit(model, seed=3)
    assert divergences == 0
    assert summary["r_hat"].max() <= 1.01
    assert summary["ess_bulk"].min() >= 400
    # the same data, the same sampler, the chart fixed in space
    centred, _ = _six_groups(seed=DATA, chart="centred")
    _, summary_c = _fit(centred, seed=3)
    assert summary["ess_bulk"].min() >= 1.5 * summary_c["ess_bulk"].min()


@pytest.mark.slow
def test_the_old_default_charts_diverge_on_the_same_data():
    """The check above can fail: the defaults before (moving polar chart, standard-normal
    auxiliary radius) diverge on this data set and seed (measured: 1)."""
    model, _ = _six_groups(seed=DATA, chart="old")
    divergences, _ = _fit(model, seed=3)
    assert divergences > 0
