"""Exact radial laws of the Laplace (docs/architecture.md, math facts), written independently.

The geodesic distance t of a Laplace draw from its footpoint has density
``p(t) ∝ e^{-t/σ} t^{d-1} A(t)`` on ``[0, T)``, where ``A`` is the exp chart's volume
density averaged over directions. Here ``A`` is written from the textbook formulas,
not taken from the library:

- sphere S^d of radius R: ``(sin(t/R) / (t/R))^{d-1}``;
- Kendall shapes, k landmarks: ``(sin t / t)^{2k-5} · cos t``  (so p ∝ e^{-t/σ} sin^{2k-5} t cos t);
- SPD(k): ``E_ω Π_{i<j} sinh(t|Δ_ij|/2) / (t|Δ_ij|/2)``, Δ the eigenvalue gaps of a
  uniformly random unit symmetric matrix ω (Monte Carlo over a fixed set of ω).
"""

from __future__ import annotations

import numpy as np
from scipy import integrate, interpolate

import pymc_manidp as pmd


def _spd_average(k, t, n_dirs=4000, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.normal(size=(n_dirs, k, k))
    w = np.linalg.eigvalsh((a + np.swapaxes(a, -1, -2)) / 2.0)  # isotropic in Frobenius
    w /= np.sqrt(np.sum(w**2, axis=-1, keepdims=True))
    gaps = np.abs(w[:, :, None] - w[:, None, :])[
        :, np.triu_indices(k, 1)[0], np.triu_indices(k, 1)[1]
    ]
    x = np.outer(t, gaps.ravel()).reshape(len(t), n_dirs, -1) / 2.0
    with np.errstate(invalid="ignore"):
        ratio = np.where(x > 1e-12, np.sinh(x) / np.where(x > 1e-12, x, 1.0), 1.0)
    return np.mean(np.prod(ratio, axis=-1), axis=-1)


def radial_density(M, sigma, t):
    """Unnormalized density of the distance to the footpoint at ``t``."""
    t = np.asarray(t, float)
    d = M.dim
    base = np.exp(-t / sigma) * t ** (d - 1)
    if isinstance(M, pmd.Sphere):
        R = M.radius
        return base * np.sinc(t / (np.pi * R)) ** (d - 1)
    if isinstance(M, pmd.KendallShape):
        return np.exp(-t / sigma) * np.sin(t) ** (2 * M.k_landmarks - 5) * np.cos(t)
    if isinstance(M, pmd.SPD):
        return base * _spd_average(M.k, t)
    return base


def radial_cdf(M, sigma, upper):
    """CDF of the distance on ``[0, upper]`` as a callable (cumulative quadrature)."""
    t = np.linspace(0.0, upper, 4001)
    p = radial_density(M, sigma, t)
    c = integrate.cumulative_trapezoid(p, t, initial=0.0)
    c /= c[-1]
    f = interpolate.interp1d(t, c, bounds_error=False, fill_value=(0.0, 1.0))
    return lambda x: f(np.asarray(x, float))


def mcmc_ks(draws, cdf):
    """KS test of MCMC draws ``(chain, draw)`` against ``cdf``, calibrated by ESS.

    The statistic uses every draw; its p-value uses the Kolmogorov distribution for
    ``n = min(ESS, draws)`` (bulk effective sample size) instead of the number of draws, since
    correlated draws carry less information than independent ones. Thinning instead
    leaves residual correlation and makes the test anti-conservative.

    Returns ``(statistic, pvalue, ess)``.
    """
    import arviz as az
    from scipy import stats

    draws = np.asarray(draws, float)
    ess = float(az.ess(draws))
    stat = stats.kstest(draws.ravel(), cdf).statistic
    # antithetic chains (ESS above the number of draws, common with the polar chart)
    # make the mean's ESS overstate what the empirical CDF knows: cap n at the draws
    n = min(ess, draws.size)
    return stat, float(stats.kstwo.sf(stat, max(1, round(n)))), ess
