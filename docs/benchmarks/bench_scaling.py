"""Benchmark: one exact release at n = 10^6 on S^2 against one plain NumPy gradient pass.

Issue 13's in-memory goal: a KNG release at most 10x, a Laplace release at most 5x
the time of one gradient pass, measured in the same run. Data: ``sphere_cap``
(polar angle uniform on [0, pi/8] about the north pole), public ball B_{pi/8}(north),
epsilon = 1.

- "one pass": ``Sphere.frechet_gradient(x, data, w)`` on the whole array, the
  library's one-pass mean log vector and energy (a plain NumPy expression: one
  matrix-vector product, ``atan2`` per row, one weighted sum);
- "KNG" / "Laplace": ``mech.release(data, random_seed=i)``: data check, Fréchet
  mean, exact sampling, the Release record.

The three are interleaved, ``REPEATS`` rounds, each figure the median over rounds
(the machine is shared: the median of interleaved rounds is robust to load), and
the passes over the data per release are counted
(``pymc_manidp.stats.reductions.pass_count``).

A second table times passes over the same data as a Dask array (4 chunks of
250,000 rows, Dask's local threaded scheduler, 2 threads): the check pass, a Fréchet
gradient pass over checked data (each cache block validated inside the pass) and a
KNG release.

Run:  PYTHONPATH=. .venv/bin/python docs/benchmarks/bench_scaling.py   (about two minutes)
"""

from __future__ import annotations

import datetime
import os
import platform
import time

import numpy as np

import pymc_manidp as pmd
from pymc_manidp.datasets import generators
from pymc_manidp.stats import reductions

N = 1_000_000
REPEATS = 15


def main():
    S = pmd.Sphere(dim=2)
    north = np.array([0.0, 0.0, 1.0])
    data = generators.sphere_cap(N, radius=np.pi / 8, center=north, random_seed=0)
    w = np.full(N, 1.0 / N)
    m = data[:1000].mean(axis=0)
    x = m / np.linalg.norm(m)
    kng = pmd.KNGMechanism(S, epsilon=1.0, center=north, radius=np.pi / 8)
    lap = pmd.LaplaceMechanism(S, epsilon=1.0, center=north, radius=np.pi / 8)
    times = {"pass": [], "kng": [], "laplace": []}
    passes = {"kng": [], "laplace": []}
    proposals = []
    for i in range(REPEATS):
        t = time.perf_counter()
        S.frechet_gradient(x, data, w)
        times["pass"].append(time.perf_counter() - t)
        for name, mech in (("kng", kng), ("laplace", lap)):
            p0 = reductions.pass_count()
            t = time.perf_counter()
            rel = mech.release(data, random_seed=i)
            times[name].append(time.perf_counter() - t)
            passes[name].append(reductions.pass_count() - p0)
            if name == "kng":
                proposals.append(rel.sampler_info["proposals"])
    med = {k: float(np.median(v)) for k, v in times.items()}
    print(
        f"# {datetime.date.today()}, {platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}, n = {N:,}, "
        f"median of {REPEATS} interleaved rounds"
    )
    print("| | time | ÷ one pass | passes over the data (median) |")
    print("|---|---|---|---|")
    print(f"| one gradient pass (plain NumPy) | {1e3 * med['pass']:.0f} ms | 1 | 1 |")
    for name, label in (("kng", "KNG exact release"), ("laplace", "Laplace exact release")):
        print(
            f"| {label} | {1e3 * med[name]:.0f} ms | {med[name] / med['pass']:.1f} | "
            f"{int(np.median(passes[name]))} |"
        )
    print(f"KNG envelope proposals per release: mean {np.mean(proposals):.2f}")
    dask_table(S, kng, data, med["pass"])


def dask_table(S, kng, data, one_pass):
    import dask.array as da

    lazy = da.from_array(data, chunks=(N // 4, 3))
    x = np.array([0.0, 0.0, 1.0])

    def median_time(f, k=5):
        ts = []
        for _ in range(k):
            t = time.perf_counter()
            f()
            ts.append(time.perf_counter() - t)
        return float(np.median(ts))

    checked = kng.domain.check(lazy)
    rows = [
        ("check pass", median_time(lambda: reductions.scan_domain(kng.domain, lazy))),
        (
            "gradient pass (checked data)",
            median_time(lambda: reductions.frechet_gradient(S, x, checked)),
        ),
        ("KNG exact release", median_time(lambda: kng.release(lazy, random_seed=0))),
    ]
    print()
    print(f"Dask array, {N:,} rows in 4 chunks, local threaded scheduler (median of 5)")
    print("| | time | ÷ one NumPy pass | million points / s |")
    print("|---|---|---|---|")
    for label, t in rows:
        print(f"| {label} | {1e3 * t:.0f} ms | {t / one_pass:.1f} | {N / t / 1e6:.1f} |")


if __name__ == "__main__":
    main()
