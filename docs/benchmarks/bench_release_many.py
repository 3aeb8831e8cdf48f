"""Benchmark: releases per second, one ``release_many`` call against a loop of ``release``.

Issue 26 item 1. For each case, the same stack of R = 1,000 data sets of n records (the
supplement's generators: ``sphere_cap`` on S², ball B_{π/8}(north pole);
``wishart_in_ball`` on SPD(2), ball B_{1.5}(I)), ε = 1, in this one process:

1. loop: ``[mech.release(data, random_seed=i) for i, data in enumerate(stack)]``;
2. many: ``mech.release_many(stack, random_seed=0)``.

Both produce R ``Release`` records of the same law (tests/mechanisms/
test_release_many.py). Each is run ``REPEATS`` times, alternating, and the best time
is kept (the machine is shared). Prints a Markdown table.

Run:  .venv/bin/python docs/benchmarks/bench_release_many.py      (about 2 minutes)
"""

from __future__ import annotations

import platform
import time

import numpy as np

import pymc_manidp as pmd
from pymc_manidp.datasets import sphere_cap, wishart_in_ball

R = 1_000
REPEATS = 2


def _stack(space, n, seed=0):
    rng = np.random.default_rng(seed)
    if space == "S2":
        return np.stack([sphere_cap(n, radius=np.pi / 8, random_seed=rng) for _ in range(R)])
    return np.stack(
        [wishart_in_ball(n, k=2, df=2.0, radius=1.5, random_seed=rng) for _ in range(R)]
    )


def _mech(space, kind):
    if space == "S2":
        M, kw = pmd.Sphere(dim=2), {"center": [0.0, 0.0, 1.0], "radius": np.pi / 8}
    else:
        M, kw = pmd.SPD(k=2), {"center": np.eye(2), "radius": 1.5}
    if kind == "KNG":
        return pmd.KNGMechanism(M, epsilon=1.0, **kw)
    if kind == "KNG median":
        return pmd.KNGMechanism(M, epsilon=1.0, statistic="median", **kw)
    return pmd.LaplaceMechanism(M, epsilon=1.0, restrict=kind.endswith("restricted"), **kw)


CASES = [
    ("KNG", "S2", 100),
    ("KNG", "S2", 1000),
    ("KNG", "SPD(2)", 100),
    ("KNG", "SPD(2)", 1000),
    ("Laplace", "S2", 100),
    ("Laplace", "S2", 1000),
    ("Laplace", "SPD(2)", 1000),
    ("Laplace restricted", "SPD(2)", 1000),
]


def main():
    print(f"# R = {R} data sets per case; {platform.processor() or platform.machine()}")
    print()
    print("| mechanism | space | n | loop of release (releases/s) | release_many (releases/s) | ratio |")
    print("|---|---|---|---|---|---|")
    for kind, space, n in CASES:
        stack = _stack(space, n)
        mech = _mech(space, kind)
        mech.release(stack[0], random_seed=0)  # warm-up (imports, first calls)
        mech.release_many(stack[:2], random_seed=0)
        loop, many = [], []
        for _ in range(REPEATS):
            t = time.perf_counter()
            for i, data in enumerate(stack):
                mech.release(data, random_seed=i)
            loop.append(time.perf_counter() - t)
            t = time.perf_counter()
            mech.release_many(stack, random_seed=0)
            many.append(time.perf_counter() - t)
        a, b = R / min(loop), R / min(many)
        print(f"| {kind} | {space} | {n} | {a:,.0f} | {b:,.0f} | {b / a:.1f}× |", flush=True)


if __name__ == "__main__":
    main()
