"""Benchmark (issue 23): exact releases on SO(3) and H^2 in one-pass units, beside S^2.

For each space (S^2, the reference; SO(3); the hyperbolic plane H^2), each with the
public ball of radius pi/8 at its usual center (north pole, I, the origin), and
n = 1,000 and 10^6 records uniform in radius in 0.9 of the ball
(``datasets.generators.uniform_radius_ball``), epsilon = 1, in one process:

- "one pass": ``M.frechet_gradient(x, data, w)`` on the whole array at a point near
  the mean: the space's one-pass mean log vector and energy (what one step of the
  Fréchet mean costs);
- "KNG" / "Laplace": ``mech.release(data, random_seed=i)`` with the exact sampler
  (the default): data check, Fréchet mean, exact sampling, the Release record.

The three are interleaved, ``REPEATS`` rounds (fewer at 10^6), each figure the median
over rounds: the machine is shared, and the ratio of interleaved medians is what
survives the load. Passes over the data per release are counted
(``pymc_manidp.stats.reductions.pass_count``).

Run:  PYTHONPATH=. .venv/bin/python docs/benchmarks/bench_new_spaces.py [n ...]
      (default n = 1000 1000000; a few minutes on 2 cores)
"""

from __future__ import annotations

import datetime
import os
import platform
import sys
import time

import numpy as np

import pymc_manidp as pmd
from pymc_manidp.datasets.generators import uniform_radius_ball
from pymc_manidp.stats import reductions

RADIUS = np.pi / 8
SPACES = {
    "S²": lambda: (pmd.Sphere(dim=2), np.array([0.0, 0.0, 1.0])),
    "SO(3)": lambda: (pmd.Rotations(), np.eye(3)),
    "H²": lambda: (pmd.Hyperbolic(dim=2), pmd.Hyperbolic(dim=2).origin),
}


def run(n, repeats):
    rows = []
    for label, make in SPACES.items():
        M, center = make()
        data = uniform_radius_ball(M, n, center=center, radius=0.9 * RADIUS, random_seed=0)
        w = np.full(n, 1.0 / n)
        x = M.exp_coords(center, np.full(M.dim, 0.01))  # near the mean, on no record
        kng = pmd.KNGMechanism(M, epsilon=1.0, center=center, radius=RADIUS)
        lap = pmd.LaplaceMechanism(M, epsilon=1.0, center=center, radius=RADIUS)
        kng.release(data, random_seed=0)  # warm-up: first-call imports and caches
        times = {"pass": [], "kng": [], "laplace": []}
        passes = {"kng": [], "laplace": []}
        for i in range(repeats):
            t = time.perf_counter()
            M.frechet_gradient(x, data, w)
            times["pass"].append(time.perf_counter() - t)
            for name, mech in (("kng", kng), ("laplace", lap)):
                p0 = reductions.pass_count()
                t = time.perf_counter()
                mech.release(data, random_seed=i)
                times[name].append(time.perf_counter() - t)
                passes[name].append(reductions.pass_count() - p0)
        med = {k: float(np.median(v)) for k, v in times.items()}
        rows.append((label, med, {k: int(np.median(v)) for k, v in passes.items()}))
    return rows


def main(ns):
    print(
        f"# {datetime.date.today()}, {platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} cores, load average at start {os.getloadavg()[0]:.1f}"
    )
    print(
        "| space | n | one pass | KNG release | KNG ÷ one pass | KNG passes | "
        "Laplace release | Laplace ÷ one pass | Laplace passes | load |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for n in ns:
        repeats = 15 if n <= 10_000 else 5
        for label, med, passes in run(n, repeats):
            p = med["pass"]
            print(
                f"| {label} | {n:,} | {_ms(p)} | {_ms(med['kng'])} | {med['kng'] / p:.1f} | "
                f"{passes['kng']} | {_ms(med['laplace'])} | {med['laplace'] / p:.1f} | "
                f"{passes['laplace']} | {os.getloadavg()[0]:.1f} |",
                flush=True,
            )


def _ms(t):
    return f"{1e3 * t:.3g} ms"


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [1000, 1_000_000])
