"""Benchmark (issue 12): one NUTS release against one supplement-MH release, per manifold.

For each target (KNG and Laplace, epsilon = 1, on S^2, SPD(2), SPD(3), Kendall(8), SO(3)
and the hyperbolic plane H^2; n = 100 and 1,000 points uniform in radius in the public
ball), in one process, same data:

- **NUTS**: ``mech.release(data, sampler="nuts")`` with its defaults (4 chains, 1,000
  tuning steps, 2,000 draws, diagnostics gate). Release 1 compiles the model; release 2,
  with a *new* data set of the same n, reuses it (``mech.mcmc_cache``): its whole-call
  time is the "2nd release" column. ESS: minimum bulk ESS over the distance to the
  chart origin and the chart coordinates there; divergences: the run's count; backend:
  ``diagnostics.posterior.attrs["sampler_backend"]``.
- **supplement MH** (2021 supplement §1.5, ``mcmc.random_walk``): one release =
  one chain, step sigma, 10,000 burn-in steps from the chart origin, the next state
  released: one effective draw. Its log-density is the mechanism's with the data
  checks hoisted out of the loop (only helps the MH).

"÷ MH" columns: MH seconds / NUTS 2nd-release seconds (> 1: NUTS faster), and the
ESS/s ratio (NUTS ESS / NUTS seconds) / (1 / MH seconds).

Run:  PYTHONPATH=. .venv/bin/python docs/benchmarks/bench_releases.py [case ...]
      cases like "KNG:SPD2:1000" or "Laplace:SO3:100"; none: all 24. Set
      PYMC_MANIDP_NUTS_BACKEND=pymc to time PyMC's NUTS with nutpie installed.
"""

from __future__ import annotations

import os
import sys
import time
import warnings

import arviz as az
import numpy as np

import pymc_manidp as pmd
from pymc_manidp.datasets.generators import uniform_radius_ball
from pymc_manidp.mcmc.random_walk import random_walk_mh
from pymc_manidp.stats.frechet import frechet_mean


def _octagon():
    a = 2 * np.pi * np.arange(8) / 8
    return pmd.KendallShape(k_landmarks=8).validate(np.stack([np.cos(a), np.sin(a)], -1))


MANIFOLDS = {
    "S2": lambda: (pmd.Sphere(dim=2), np.array([0.0, 0.0, 1.0]), np.pi / 8),
    "SPD2": lambda: (pmd.SPD(k=2), np.eye(2), 1.5),
    "SPD3": lambda: (pmd.SPD(k=3), np.eye(3), 1.5),
    "Kendall8": lambda: (pmd.KendallShape(k_landmarks=8), _octagon(), np.pi / 16),
    # issue 23: the public balls of radius pi/8, as on S^2
    "SO3": lambda: (pmd.Rotations(), np.eye(3), np.pi / 8),
    "H2": lambda: (pmd.Hyperbolic(dim=2), pmd.Hyperbolic(dim=2).origin, np.pi / 8),
}
MECHS = {"KNG": pmd.KNGMechanism, "Laplace": pmd.LaplaceMechanism}


def hoisted_logp(mech, data):
    """The mechanism's NumPy log-density with the data checks done once."""
    M, n = mech.manifold, len(data)
    sigma = mech.sigma(n)
    if isinstance(mech, pmd.LaplaceMechanism):
        _, eta = mech.footpoint(data)
        return eta, lambda x: -M.dist(eta, x) / sigma
    center = frechet_mean(M, data).mean
    nshape = len(M.point_shape)
    dom = mech.domain

    def logp(x):
        g = np.sum(M.log(np.expand_dims(x, -nshape - 1), data), axis=-nshape - 1)
        lp = -M.norm(x, g) / (sigma * n)
        return np.where(M.dist(dom.center, x) <= dom.radius, lp, -np.inf)

    return center, logp


def min_ess(M, x, center):
    coords = M.log_coords(center, x)
    ess = [az.ess(M.dist(center, x))] + [az.ess(coords[..., a]) for a in range(M.dim)]
    return float(min(ess))


def run_case(mech_name, man_name, n):
    M, center0, radius = MANIFOLDS[man_name]()
    data = [
        uniform_radius_ball(M, n, center=center0, radius=0.9 * radius, random_seed=s)
        for s in (0, 1)
    ]
    mech = MECHS[mech_name](M, epsilon=1.0, center=center0, radius=radius)
    t0 = time.perf_counter()
    mech.release(data[0], sampler="nuts", random_seed=1)
    first = time.perf_counter() - t0
    t0 = time.perf_counter()
    rel = mech.release(data[1], sampler="nuts", random_seed=2)
    second = time.perf_counter() - t0
    idata = rel.diagnostics
    center, logp = hoisted_logp(mech, data[1])
    x = np.asarray(idata.posterior["release"].values)
    ess = min_ess(M, x, center)
    div = int(np.asarray(idata.sample_stats["diverging"]).sum())
    backend = idata.posterior.attrs.get("sampler_backend", "?")
    t0 = time.perf_counter()
    random_walk_mh(
        logp,
        center,
        manifold=M,
        step=min(mech.sigma(n), 0.5 * M.injectivity_radius),
        draws=1,
        burn_in=10_000,
        thin=1,
        chains=1,
        rng=3,
    )
    mh = time.perf_counter() - t0
    print(
        f"| {mech_name} | {man_name} | {n} | {backend} | {first:.1f} | {second:.2f} | "
        f"{ess:.0f} | {div} | {mh:.2f} | {mh / second:.1f} | {ess * mh / second:.0f} | "
        f"{os.getloadavg()[0]:.1f} |",
        flush=True,
    )


def main(cases):
    warnings.filterwarnings("ignore")
    print(f"{os.cpu_count()} cores, load average at start {os.getloadavg()[0]:.2f}")
    print(
        "| mechanism | manifold | n | NUTS backend | 1st release s (compiles) | "
        "2nd release s | min bulk ESS | divergences | one MH release s | "
        "time ÷ MH | ESS/s ÷ MH | load |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for case in cases:
        run_case(*case)


if __name__ == "__main__":
    if len(sys.argv) > 1:
        todo = [(a.split(":")[0], a.split(":")[1], int(a.split(":")[2])) for a in sys.argv[1:]]
    else:
        todo = [(m, g, n) for g in MANIFOLDS for m in MECHS for n in (100, 1000)]
    main(todo)
