"""Benchmark: effective samples per second, NUTS path against the 2021 supplement's MH.

Targets (issue 4): the manifold Laplace and KNG on S^2, n = 1,000 points from the
supplement's generator (polar angle uniform on [0, pi/8] around the north pole,
uniform azimuth), epsilon = 1, public ball B_{pi/8}(north pole). Both samplers target
the mechanism's log-density:

- NUTS (nutpie, numba-compiled) and PyMC's own NUTS on the polar model
  (``mechanism.model(data)``), the release's settings: 4 chains, 1,000 tuning steps,
  2,000 draws. Timed: one ``mcmc.sample`` call (compilation and tuning included).
- PyMC's Metropolis on the same model, same settings (the ``sampler="metropolis"`` path).
- Releases (``mech.release(data, sampler="nuts")``, default settings) on a new
  mechanism object: the first ("cold": compiles the model) and a second one with a
  new data set of the same n (``sphere_data(N, seed=1)``), which reuses the compiled
  model from the mechanism's cache ("warm"). Timed: the whole call (Fréchet mean,
  sampling, diagnostics gate). With nutpie, and with PyMC's NUTS (nutpie hidden).
- The supplement's random-walk MH (§1.5, ``mcmc.random_walk``): step = sigma,
  start at the footpoint, burn-in 10,000, thinning 100, 1,000 thinned draws per chain,
  4 chains vectorized in NumPy (one core). Timed: the whole run, burn-in included. Its
  log-density is the mechanism's ``logp`` with the footpoint/data checks hoisted out
  of the loop (checked equal to ``mech.logp`` below).

ESS: bulk ESS (ArviZ) of the geodesic distance to the chart origin (Laplace: the
footpoint; KNG: the data's Fréchet mean, KNG's mode) and of each chart coordinate
(normal coordinates at that center), all computed the same way from the draws of the
point; the table reports the minimum. ESS/s = min ESS / wall seconds of the call;
"sampling only" divides by the sampler's own ``sampling_time`` (PyMC and nutpie record
it; it leaves out compilation), for the MH the wall time again.

Then the time to the first release in a fresh process (import, data, Fréchet mean,
model, compilation, sampling, gate), with a cold PyTensor compile cache (a new
``compiledir``) and warm (the same directory, second process), and in the same
process the time of a second release with new data.

Run:  .venv/bin/python docs/benchmarks/bench_mcmc.py        (about 15 minutes on 2 cores)
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import tempfile
import time
import warnings

import arviz as az
import numpy as np
import pymc as pm

import pymc_manidp as pmd
from pymc_manidp import mcmc
from pymc_manidp.mcmc.random_walk import random_walk_mh
from pymc_manidp.stats.frechet import frechet_mean

N = 1000
EPSILON = 1.0
NORTH = np.array([0.0, 0.0, 1.0])
RADIUS = np.pi / 8
S2 = pmd.Sphere(dim=2)
DRAWS, TUNE, CHAINS = 2000, 1000, 4
MH = dict(burn_in=10_000, thin=100, draws=1000, chains=4)


def sphere_data(n, seed=0):
    rng = np.random.default_rng(seed)
    th = rng.uniform(0, np.pi / 8, n)
    ph = rng.uniform(0, 2 * np.pi, n)
    return np.stack([np.sin(th) * np.cos(ph), np.sin(th) * np.sin(ph), np.cos(th)], -1)


def targets(data):
    """(name, mechanism, chart origin, NumPy log-density) for both mechanisms."""
    lap = pmd.LaplaceMechanism(S2, epsilon=EPSILON, center=NORTH, radius=RADIUS)
    _, eta = lap.footpoint(data)
    s_lap = lap.sigma(N)

    def lap_logp(x):
        return -S2.dist(eta, x) / s_lap

    kng = pmd.KNGMechanism(S2, epsilon=EPSILON, center=NORTH, radius=RADIUS)
    s_kng = kng.sigma(N)
    mode = frechet_mean(S2, data).mean

    def kng_logp(x):
        g = np.sum(S2.log(x[..., None, :], data), axis=-2)
        lp = -S2.norm(x, g) / (s_kng * N)
        return np.where(S2.dist(NORTH, x) <= RADIUS, lp, -np.inf)

    out = [("Laplace", lap, eta, s_lap, lap_logp), ("KNG", kng, mode, s_kng, kng_logp)]
    rng = np.random.default_rng(5)
    for _, mech, center, sigma, logp in out:
        pts = S2.exp_coords(center, 3 * sigma * rng.normal(size=(5, 2)))
        np.testing.assert_allclose(logp(pts), mech.logp(pts, data), rtol=1e-12, atol=1e-12)
    return out


def min_ess(x, center):
    """Minimum bulk ESS over the distance to ``center`` and the chart coordinates."""
    coords = S2.log_coords(center, x)
    ess = [az.ess(S2.dist(center, x))] + [az.ess(coords[..., a]) for a in range(S2.dim)]
    return float(min(ess))


def timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def pymc_sampler(model, label):
    kwargs = dict(draws=DRAWS, tune=TUNE, chains=CHAINS, random_seed=1, progressbar=False)
    if label == "nutpie":
        return lambda: mcmc.sample(model, "nuts", **kwargs)
    if label == "pymc-nuts":
        return lambda: pm.sample(
            model=model,
            nuts_sampler="pymc",
            target_accept=0.9,
            compute_convergence_checks=False,
            **kwargs,
        )
    return lambda: mcmc.sample(model, "metropolis", **kwargs)


def row(name, label, secs, idata, center):
    x = np.asarray(idata.posterior["release"].values)
    run = float(idata.posterior.attrs.get("sampling_time", np.nan))
    return (name, label, secs, run, x.shape[0] * x.shape[1], min_ess(x, center))


def bench_releases(name, mech_cls, data, data2):
    """Cold (first) and warm (second data set, cached model) releases, nutpie and PyMC."""
    rows = []
    hidden = mcmc.has_nutpie
    for backend in ("nutpie", "pymc-nuts"):
        if backend == "pymc-nuts":
            mcmc.has_nutpie = lambda: False  # PyMC's NUTS, as without nutpie installed
        try:
            mech = mech_cls(S2, epsilon=EPSILON, center=NORTH, radius=RADIUS)
            for label, d, seed in (("cold, 1st data set", data, 1), ("warm, 2nd", data2, 2)):
                secs, rel = timed(
                    lambda d=d, seed=seed, mech=mech: mech.release(
                        d, sampler="nuts", random_seed=seed
                    )
                )
                center = mech.footpoint(d)[1] if name == "Laplace" else frechet_mean(S2, d).mean
                rows.append(row(name, f"{backend} release, {label}", secs, rel.diagnostics, center))
            assert [key[:2] for key in mech.mcmc_cache.keys()] == [(N, "nuts")]
        finally:
            mcmc.has_nutpie = hidden
        print(f"  {name}: {backend} releases done, load {os.getloadavg()[0]:.2f}", flush=True)
    return rows


def bench_samplers(data, data2):
    rows = []
    for name, mech, center, sigma, logp in targets(data):
        model = mech.model(data)
        for label in ("nutpie", "pymc-nuts", "metropolis"):
            secs, idata = timed(pymc_sampler(model, label))
            rows.append(row(name, label, secs, idata, center))
        rows.extend(bench_releases(name, type(mech), data, data2))
        secs, res = timed(
            lambda logp=logp, center=center, sigma=sigma: random_walk_mh(
                logp, center, manifold=S2, step=sigma, rng=1, **MH
            )
        )
        n_draws = res.draws.shape[0] * res.draws.shape[1]
        rows.append((name, "supplement MH", secs, secs, n_draws, min_ess(res.draws, center)))
        print(
            f"  {name}: done (MH acceptance {res.acceptance_rate:.2f}), "
            f"load {os.getloadavg()[0]:.2f}",
            flush=True,
        )
    return rows


FIRST_RELEASE = """
import time; t = time.perf_counter()
import numpy as np, pymc_manidp as pmd
rng = np.random.default_rng(0)
th, ph = rng.uniform(0, np.pi / 8, {n}), rng.uniform(0, 2 * np.pi, {n})
data = np.stack([np.sin(th) * np.cos(ph), np.sin(th) * np.sin(ph), np.cos(th)], -1)
mech = pmd.{cls}(pmd.Sphere(dim=2), epsilon=1.0, center=[0, 0, 1.0], radius=np.pi / 8)
rel = mech.release(data, sampler="nuts", random_seed=0)
first = time.perf_counter() - t
th, ph = rng.uniform(0, np.pi / 8, {n}), rng.uniform(0, 2 * np.pi, {n})
data = np.stack([np.sin(th) * np.cos(ph), np.sin(th) * np.sin(ph), np.cos(th)], -1)
t = time.perf_counter()
rel = mech.release(data, sampler="nuts", random_seed=1)
print(first, time.perf_counter() - t)
"""


def first_release(cls, compiledir):
    env = dict(os.environ, PYTENSOR_FLAGS=f"compiledir={compiledir}")
    code = FIRST_RELEASE.format(n=N, cls=cls)
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=False
    )
    if out.returncode:
        return f"failed: {out.stderr.strip().splitlines()[-1]}", ""
    return tuple(float(v) for v in out.stdout.strip().splitlines()[-1].split())


def main():
    warnings.filterwarnings("ignore")
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores, Python "
        f"{platform.python_version()}, load average at start {os.getloadavg()[0]:.2f}",
        flush=True,
    )
    data = sphere_data(N)
    rows = bench_samplers(data, sphere_data(N, seed=1))
    print(
        "\n| target | sampler | wall s | sampling s | draws | min bulk ESS | ESS/s (wall) "
        "| ÷ MH | ESS/s (sampling only) | ÷ MH |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name in ("Laplace", "KNG"):
        mine = [r for r in rows if r[0] == name]
        base = next(r[5] / r[2] for r in mine if r[1] == "supplement MH")
        for _, label, secs, run, n, ess in mine:
            rate, rate_run = ess / secs, ess / run
            print(
                f"| {name} S², n={N} | {label} | {secs:.1f} | {run:.1f} | {n} | {ess:.0f} | "
                f"{rate:.1f} | {rate / base:.2f} | {rate_run:.0f} | {rate_run / base:.1f} |"
            )
    print("\nTime to the first release in a fresh process (sampler='nuts', default settings):")
    print(
        "| mechanism | cold compile cache: 1st release (s) | then 2nd, new data (s) "
        "| warm cache: 1st release (s) | then 2nd (s) | load |"
    )
    print("|---|---|---|---|---|---|")
    for cls in ("LaplaceMechanism", "KNGMechanism"):
        with tempfile.TemporaryDirectory() as tmp:
            cold = first_release(cls, tmp)
            warm = first_release(cls, tmp)
        fmt = [f"{v:.1f}" if isinstance(v, float) else v for v in (*cold, *warm)]
        print(f"| {cls} | {' | '.join(fmt)} | {os.getloadavg()[0]:.2f} |", flush=True)
    print(f"\nload average at end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
