"""Divergences of the six-group hierarchical model on S^2 under different charts
(docs/mechanisms.md, "Hierarchical models"): which chart of the group means and which
auxiliary radius of the population mean's normalized-Gaussian chart.

    python docs/benchmarks/hierarchical_charts.py VARIANT SEEDS [--where]

VARIANT: ``polar`` (moving polar chart, standard-normal auxiliary for mu), ``polar-ln``
(log-normal auxiliary radii, s = 0.3, for both), ``polar-chi`` (chi with 8 extra degrees
of freedom for both), ``tangent`` (moving tangent chart, standard-normal auxiliary for
mu), ``default`` (the library's defaults: moving tangent chart, chi(3 + 8) for mu).
SEEDS: data sets, e.g. ``0,1,2,3``. ``--where`` prints where each divergent trajectory
was (PyMC's ``keep_warning_stat``): the auxiliary radii of mu and of each group.
PyMC's NUTS, 4 chains x (1,000 + 1,000), target_accept 0.8, strict floats, seed 3.
"""

from __future__ import annotations

import sys
import time

import arviz as az
import numpy as np
import pymc as pm
import pytensor.tensor as pt
from scipy.special import gammaln

import pymc_manidp as pmd
from pymc_manidp.laws import MovingPolarChart, NormalizedGaussian
from pymc_manidp.laws.charts import log_unit_sphere_volume
from pymc_manidp.mcmc.sampling import strict_floats

S = pmd.Sphere(dim=2)
GROUPS, TAU, SIGMA = 6, 0.1, 0.3


def chi_radial(r, dim, a):
    """Log density on R^dim prop. to r^a exp(-r^2/2), normalized."""
    log_norm = (
        log_unit_sphere_volume(dim) + ((dim + a) / 2 - 1) * np.log(2) + gammaln((dim + a) / 2)
    )
    return a * pt.log(r) - 0.5 * r**2 - log_norm


def lognormal_radial(r, dim, s=0.3):
    """Log density on R^dim whose radius is log-normal(0, s) and direction uniform."""
    return (
        -(pt.log(r) ** 2) / (2 * s * s)
        - dim * pt.log(r)
        - np.log(s * np.sqrt(2 * np.pi))
        - log_unit_sphere_volume(dim)
    )


class PolarWithRadius(MovingPolarChart):
    """The moving polar chart with another law of the tangent auxiliary |P_x w|."""

    def __init__(self, manifold, radial):
        super().__init__(manifold)
        self.radial = radial

    def _point(self, value, inputs):
        y, log_jac = super()._point(value, inputs)
        M, d, m = self.manifold, self.manifold.dim, self._m
        x, _, w = self._split(value, inputs)
        norm_w2 = pt.sum(w**2, axis=-1)
        r = M.pt_noise_norm(x, w)
        gauss = -0.5 * norm_w2 - 0.5 * m * np.log(2 * np.pi)
        other = self.radial(r, d) - 0.5 * (norm_w2 - r**2) - 0.5 * (m - d) * np.log(2 * np.pi)
        return y, log_jac - gauss + other


class GaussianLogNormal(NormalizedGaussian):
    """The normalized-Gaussian chart with a log-normal auxiliary radius."""

    def log_jac_det(self, value, *inputs):
        r = pt.sqrt(pt.sum(pt.as_tensor_variable(value) ** 2, axis=-1))
        return float(self.manifold.log_volume) + lognormal_radial(r, self._size)


def transforms(variant):
    """(transform of mu, transform of theta); None is the library's default."""
    if variant == "polar":
        return NormalizedGaussian(S, extra_dof=0.0), MovingPolarChart(S)
    if variant == "polar-ln":
        return GaussianLogNormal(S, extra_dof=0.0), PolarWithRadius(S, lognormal_radial)
    if variant == "polar-chi":
        return None, PolarWithRadius(S, lambda r, d: chi_radial(r, d, 8.0))
    if variant == "tangent":
        return NormalizedGaussian(S, extra_dof=0.0), None
    if variant == "default":
        return None, None
    raise SystemExit(f"unknown variant {variant!r}")


def six_groups(seed, variant):
    rng = np.random.default_rng(seed)
    population = S.sample_uniform(rng, ())
    means = pm.draw(pmd.ManifoldLaplace.dist(S, population, TAU, size=GROUPS), random_seed=seed)
    releases = pm.draw(pmd.ManifoldLaplace.dist(S, means, SIGMA), random_seed=seed + 1)
    t_mu, t_theta = transforms(variant)
    kw_mu = {"default_transform": t_mu} if t_mu is not None else {}
    kw_theta = {"default_transform": t_theta} if t_theta is not None else {}
    with pm.Model() as model:
        mu = pmd.ManifoldUniform("mu", S, **kw_mu)
        theta = pmd.ManifoldLaplace("theta", S, mu, TAU, size=GROUPS, **kw_theta)
        pmd.ManifoldLaplace("release", S, theta, SIGMA, observed=releases)
    return model


def where(idata):
    """The auxiliary radii at the start of each divergent trajectory's last step."""
    for warning in idata.sample_stats["warning"].values.ravel():
        src = getattr(warning, "divergence_point_source", None)
        if src is None:
            continue
        z = np.asarray(next(v for k, v in src.items() if k.startswith("mu")))
        w = np.asarray(next(v for k, v in src.items() if k.startswith("theta")))[..., :3]
        mu = z / np.linalg.norm(z)
        tangent = np.linalg.norm(w - (w @ mu)[:, None] * mu, axis=-1)
        print(f"  divergence: |z| = {np.linalg.norm(z):.3f}, |P_mu w| = {np.round(tangent, 3)}")


def main(variant, seeds, show_where=False):
    for seed in seeds:
        model = six_groups(seed, variant)
        start = time.perf_counter()
        with model, strict_floats():
            idata = pm.sample(
                1000,
                tune=1000,
                chains=4,
                nuts_sampler="pymc",
                random_seed=3,
                progressbar=False,
                compute_convergence_checks=False,
                keep_warning_stat=show_where,
            )
        summary = az.summary(idata, var_names=["mu", "theta"])
        print(
            f"{variant} data={seed}: divergences {int(idata.sample_stats['diverging'].sum())}, "
            f"R-hat {summary['r_hat'].max():.3f}, min bulk ESS {summary['ess_bulk'].min():.0f}, "
            f"step size {float(idata.sample_stats['step_size'].mean()):.3f}, "
            f"{time.perf_counter() - start:.0f} s",
            flush=True,
        )
        if show_where:
            where(idata)


if __name__ == "__main__":
    main(sys.argv[1], [int(s) for s in sys.argv[2].split(",")], "--where" in sys.argv[3:])
