"""Benchmark (issue 42): object mode and BLAS on the paths a user runs, and their cost.

In one process, on S^2 (KNG and Laplace, epsilon = 1, public ball of radius 0.5 about
the north pole, n = 200 points drawn 0.1 about it):

- ``NUTS release``: the 2nd ``mech.release(data, sampler="nuts")`` (model compiled);
- ``noise-aware pm.sample``: ``pm.sample`` (nutpie, 1 chain, 500 + 500) of
  ``noise_aware_model`` of one restricted Laplace release (its uniform prior on the
  ball and its restricted likelihood are ``pm.CustomDist`` with Python draws);
- ``noise-aware pm.draw``: 500 prior and likelihood draws of that model, compiled by
  PyTensor's default NUMBA backend (the draws in object mode) and with
  ``mode="FAST_COMPILE"`` (what ``calibration_study`` uses).

Each row is CPU seconds of this process (all threads), the median of ``rounds``, with
the warnings each path raised: how many "Numba will use object mode", how many times
PyTensor's C backend looked for BLAS ("could not link to a BLAS installation").

Run:  PYTHONPATH=. python docs/benchmarks/bench_warnings.py [rounds]
"""

from __future__ import annotations

import statistics
import sys
import time
import warnings

import numpy as np
import pymc as pm

import pymc_manidp as pmd

S2 = pmd.Sphere(dim=2)
NORTH = np.array([0.0, 0.0, 1.0])


def timed(fn):
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        t = time.process_time()
        fn()
        cpu = time.process_time() - t
    text = [str(w.message) for w in seen]
    obj = sum("object mode" in m for m in text)
    blas = sum("BLAS" in m for m in text)
    return cpu, obj, blas


def main(rounds):
    rng = np.random.default_rng(0)
    data = S2.exp_coords(NORTH, rng.normal(scale=0.1, size=(200, 2)))
    kng = pmd.KNGMechanism(S2, epsilon=1.0, center=NORTH, radius=0.5)
    lap = pmd.LaplaceMechanism(S2, epsilon=1.0, center=NORTH, radius=0.5)
    kng.release(data, sampler="nuts", random_seed=0)  # compile
    rel = lap.release(data, random_seed=1)
    model = pmd.noise_aware_model(rel.public(), S2)
    draw_vars = [model["mean"], model["release"]]

    def sample():
        with model:
            pm.sample(
                draws=500,
                tune=500,
                chains=1,
                random_seed=0,
                progressbar=False,
                compute_convergence_checks=False,
            )

    rows = {
        "NUTS release (KNG)": lambda: kng.release(data, sampler="nuts", random_seed=1),
        "noise-aware pm.sample": sample,
        "noise-aware pm.draw, NUMBA": lambda: pm.draw(draw_vars, draws=500, random_seed=3),
        "noise-aware pm.draw, FAST_COMPILE": lambda: pm.draw(
            draw_vars, draws=500, random_seed=3, mode="FAST_COMPILE"
        ),
    }
    results = {k: [] for k in rows}
    for _ in range(rounds):
        for name, fn in rows.items():
            results[name].append(timed(fn))
    print(f"{'path':38s} {'CPU s (median)':>15s} {'object mode':>12s} {'BLAS':>5s}")
    for name, res in results.items():
        cpu = statistics.median(r[0] for r in res)
        print(f"{name:38s} {cpu:15.2f} {res[-1][1]:12d} {res[-1][2]:5d}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 3)
