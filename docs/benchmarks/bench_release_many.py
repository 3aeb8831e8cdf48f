"""Benchmark: releases per second, one ``release_many`` call against a loop of ``release``.

Issue 26 item 1. For each case, the same stack of R = 1,000 data sets of n records (the
supplement's generators: ``sphere_cap`` on S², ball B_{π/8}(north pole);
``wishart_in_ball`` on SPD(2), ball B_{1.5}(I)), ε = 1, in this one process:

1. loop: ``[mech.release(data, random_seed=i) for i, data in enumerate(stack)]``;
2. many: ``mech.release_many(stack, random_seed=0)``;
3. many, a seed per data set: ``mech.release_many(stack, random_seed=list(range(R)))``
   (each row draws from its own generator: per-row calls of the random source).

Both produce R ``Release`` records of the same law (tests/mechanisms/
test_release_many.py). Each is run ``REPEATS`` times, alternating, and the best time
is kept (the machine is shared). Prints a Markdown table.

With ``--experiment``: one chunk of ``kng2022_fig1`` (its ``_chunk``, which releases
through ``release_many`` with a seed per replicate) against the per-replicate loop it
replaced (``_loop_chunk`` below, that loop as it was, with ``mech.sample`` and
``exact.sample_kng``), on the same replicates, at the full run's chunk sizes.

Run:  .venv/bin/python docs/benchmarks/bench_release_many.py [--experiment]
      (about 2 minutes, and 1 more with --experiment)
"""

from __future__ import annotations

import platform
import sys
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
    print(
        "| mechanism | space | n | loop of release (releases/s) | release_many (releases/s) ",
        end="",
    )
    print("| ratio | release_many, a seed per data set (releases/s) | ratio |")
    print("|---|---|---|---|---|---|---|---|")
    for kind, space, n in CASES:
        stack = _stack(space, n)
        mech = _mech(space, kind)
        mech.release(stack[0], random_seed=0)  # warm-up (imports, first calls)
        mech.release_many(stack[:2], random_seed=0)
        loop, many, per_set = [], [], []
        for _ in range(REPEATS):
            t = time.perf_counter()
            for i, data in enumerate(stack):
                mech.release(data, random_seed=i)
            loop.append(time.perf_counter() - t)
            t = time.perf_counter()
            mech.release_many(stack, random_seed=0)
            many.append(time.perf_counter() - t)
            t = time.perf_counter()
            mech.release_many(stack, random_seed=list(range(R)))
            per_set.append(time.perf_counter() - t)
        a, b, c = R / min(loop), R / min(many), R / min(per_set)
        print(
            f"| {kind} | {space} | {n} | {a:,.0f} | {b:,.0f} | {b / a:.1f}× | {c:,.0f} "
            f"| {c / a:.1f}× |",
            flush=True,
        )


def _loop_chunk(space, n, epsilon, jobs):
    """``kng2022_fig1._chunk`` before issue 26: one replicate, one mechanism at a time."""
    from pymc_manidp.experiments import _common as C
    from pymc_manidp.experiments import kng2022_fig1 as F
    from pymc_manidp.laws import exact
    from pymc_manidp.mechanisms.baselines import knorm_noise, vech

    M, gen, mechs = F._setup(space, epsilon)
    amb = vech if space == "SPD(2)" else np.asarray
    kng = mechs[F.KNG]
    rows = []
    for rng, x, fm, base in C.replicate_data(jobs, gen, M, n, space):
        for name, mech in mechs.items():
            summary = (
                fm if name in (F.KNG, F.LAPLACE) else mech.manifold.from_ambient(mech.summary(x))
            )
            if name == F.PROJECTED:
                summary = summary / np.linalg.norm(summary)
            rel = mech.sample(x, 1, random_seed=rng)[0]
            rows.append(
                {**base, "method": name, "dist": float(np.linalg.norm(amb(rel) - amb(summary)))}
            )
        sigma = F.paper_sigma(space, F.KNG_PAPER, n, epsilon)
        rel = exact.sample_kng(M, x, sigma, 1, rng, domain=kng.domain).points[0]
        rows.append(
            {**base, "method": F.KNG_PAPER, "dist": float(np.linalg.norm(amb(rel) - amb(fm)))}
        )
        if space == "S2":
            sigma = F.paper_sigma(space, F.LAPLACE_PAPER, n, epsilon)
            rel = exact.sample_laplace(M, fm, sigma, 1, rng)
            rows.append(
                {
                    **base,
                    "method": F.LAPLACE_PAPER,
                    "dist": float(np.linalg.norm(rel.points[0] - fm)),
                }
            )
            y = fm + knorm_noise(rng, 3, mechs[F.PROJECTED].sigma(n), ())
            d = float(np.linalg.norm(y / np.linalg.norm(y) - fm))
            rows.append({**base, "method": F.PROJECTED_PAPER, "dist": d})
    return rows


def experiment():
    from pymc_manidp.experiments import _common as C
    from pymc_manidp.experiments import kng2022_fig1 as F

    print("| space | n | replicates (one chunk) | loop (s) | release_many (s) | ratio |")
    print("|---|---|---|---|---|---|")
    for space, size in (("S2", 100), ("SPD(2)", 25)):  # the full run's chunk sizes
        for n in (10, 1000):
            seeds = C.child_seeds(1, 0, 0, count=size)
            job = (space, n, 1.0, [(j, seeds[j]) for j in range(size)])
            F._chunk(*job)  # warm-up
            _loop_chunk(*job)
            old, new = [], []
            for _ in range(REPEATS):
                t = time.perf_counter()
                _loop_chunk(*job)
                old.append(time.perf_counter() - t)
                t = time.perf_counter()
                F._chunk(*job)
                new.append(time.perf_counter() - t)
            a, b = min(old), min(new)
            print(f"| {space} | {n} | {size} | {a:.2f} | {b:.2f} | {a / b:.1f}× |", flush=True)


if __name__ == "__main__":
    if "--experiment" in sys.argv[1:]:
        experiment()
    else:
        main()
