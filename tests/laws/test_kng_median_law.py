"""The law of KNG on the Fréchet median against a quadrature of its density on S² (issue 24).

The density is written here again, apart from the package (the sphere's log map in
closed form), and integrated on a 500 × 500 polar midpoint grid over the public ball.
KS tests at α = 0.01 on the distance of the draws to the data's median: the right σ
passes, σ × 1.2 is refuted with the same draws.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

import pymc_manidp as pmd

S2 = pmd.Sphere(dim=2)
NORTH = np.array([0.0, 0.0, 1.0])
R = 0.4
ALPHA = 0.01


def _data(n=20, seed=3):
    rng = np.random.default_rng(seed)
    th, ph = 0.25 * np.sqrt(rng.uniform(0, 1, n)), rng.uniform(0, 2 * np.pi, n)
    th[0] = R - 1e-6  # one record on the ball's edge: an outlier the median resists
    return np.stack([np.sin(th) * np.cos(ph), np.sin(th) * np.sin(ph), np.cos(th)], -1)


def _median_grad_norm(x, data):
    """|(1/n) sum_i unit(log_x(x_i))| on the unit sphere, x (m, 3), data (n, 3)."""
    c = np.clip(x @ data.T, -1.0, 1.0)  # (m, n)
    leg = data[None] - c[..., None] * x[:, None]  # y - cos(theta) x: along log_x(y)
    units = leg / np.linalg.norm(leg, axis=-1, keepdims=True)
    return np.linalg.norm(units.mean(axis=1), axis=-1)


def _quadrature_cdf(data, sigma, stat_of, nt=500, nphi=500):
    """CDF of stat_of(x) under KNG's median density on B_R(north), by a polar midpoint rule."""
    t = (np.arange(nt) + 0.5) * R / nt
    phi = 2 * np.pi * (np.arange(nphi) + 0.5) / nphi
    T, P = np.meshgrid(t, phi, indexing="ij")
    x = np.stack([np.sin(T) * np.cos(P), np.sin(T) * np.sin(P), np.cos(T)], -1).reshape(-1, 3)
    area = np.sin(T).ravel()  # the sphere's area element sin t dt dphi (constant steps)
    g = np.concatenate([_median_grad_norm(c, data) for c in np.array_split(x, 50)])
    w = area * np.exp(-g / sigma)
    s = stat_of(x)
    order = np.argsort(s)
    cum = np.cumsum(w[order]) / w.sum()
    return lambda v: np.interp(v, s[order], cum, left=0.0, right=1.0)


def _ks(draws, data, sigma, stat_of):
    return stats.kstest(stat_of(draws), _quadrature_cdf(data, sigma, stat_of)).pvalue


@pytest.mark.parametrize(("n", "epsilon"), [(20, 1.0), (100, 2.0)], ids=["broad", "refined"])
def test_exact_median_kng_matches_its_density_by_quadrature(n, epsilon):
    # broad: sigma = 0.2, the law spreads over the ball; refined: sigma = 0.02, the
    # envelope's cells are split many times around the mode
    data = _data(n)
    mech = pmd.KNGMechanism(S2, epsilon=epsilon, center=NORTH, radius=R, statistic="median")
    sigma = mech.sigma(len(data))
    med = pmd.frechet_median(S2, data).median

    def stat_of(x):
        return S2.dist(med, x)

    draws = mech.sample(data, 2000, random_seed=7)  # n = 2000 draws
    assert _ks(draws, data, sigma, stat_of) > ALPHA
    # the deliberately wrong law: sigma 20% larger is refuted by the same draws
    assert _ks(draws, data, 1.2 * sigma, stat_of) < ALPHA
    # and an angle the distance does not see: the direction around the median
    assert _ks(draws, data, sigma, lambda x: np.arctan2(x[:, 1], x[:, 0])) > ALPHA


@pytest.mark.slow
def test_nuts_median_kng_matches_its_density_by_quadrature():
    # the MCMC release's model (capped polar chart at the median): its draws, thinned
    # to about their effective size, against the same quadrature
    from pymc_manidp import mcmc

    data = _data()
    mech = pmd.KNGMechanism(S2, epsilon=1.0, center=NORTH, radius=R, statistic="median")
    sigma = mech.sigma(len(data))
    med = pmd.frechet_median(S2, data).median
    idata = mcmc.sample(mech.model(data), "nuts", draws=2000, tune=1000, chains=2, random_seed=5)
    x = np.asarray(idata.posterior["release"].values).reshape(-1, 3)
    x = x[::4]  # 1000 draws, about independent (bulk ESS > 1000 on this target)

    def stat_of(v):
        return S2.dist(med, v)

    assert _ks(x, data, sigma, stat_of) > ALPHA
    assert _ks(x, data, 1.2 * sigma, stat_of) < ALPHA
