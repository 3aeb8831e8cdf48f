"""Benchmark (issue 38 item 6): how long a KNG NUTS run must be for the release's gate.

For each space named on the command line (S2, SO3, SPD2), n = 10^4 records at normal
coordinates of scale 0.25 r about the public center (as ``profile_first_release.py``),
KNG with epsilon = 1: one release to compile (not timed), then five releases (seeds 1-5)
for each run length ``4 x (tune + draws)``, printing the release call's wall time and
the bulk / tail ESS of the monitored distance (the gate asks R-hat <= 1.01 and both ESS
>= 400), or the exception a release raised.

Run::

    PYTHONPATH=$PWD .venv/bin/python docs/benchmarks/run_length.py S2 SO3
"""

from __future__ import annotations

import sys
import time

import arviz as az
import numpy as np

import pymc_manidp as pmd
from pymc_manidp import mcmc

LENGTHS = [(1000, 1000), (500, 500), (300, 500), (300, 300)]


def _case(space):
    if space == "S2":
        return pmd.Sphere(dim=2), np.array([0.0, 0.0, 1.0]), 0.5
    if space == "SO3":
        return pmd.Rotations(), np.eye(3), 0.5
    if space == "SPD2":
        return pmd.SPD(2), np.eye(2), 1.0
    raise SystemExit(f"unknown space {space}: S2, SO3 or SPD2")


def main(spaces):
    for space in spaces:
        M, center, radius = _case(space)
        rng = np.random.default_rng(0)
        coords = rng.normal(size=(10000, M.dim)) * 0.25 * radius
        coords *= np.minimum(1.0, 0.9 * radius / np.linalg.norm(coords, axis=-1))[:, None]
        data = M.exp_coords(center, coords)
        mech = pmd.KNGMechanism(M, epsilon=1.0, center=center, radius=radius)
        mech.release(data, sampler="nuts", random_seed=0)  # compiles (or loads) the model
        for tune, draws in LENGTHS:
            settings = mcmc.MCMCSettings(tune=tune, draws=draws)
            out = []
            for seed in range(1, 6):
                t = time.perf_counter()
                try:
                    rel = mech.release(data, sampler="nuts", random_seed=seed, settings=settings)
                except Exception as err:  # a refused release is a result here
                    out.append(f"{time.perf_counter() - t:.2f}s {type(err).__name__}")
                    continue
                wall = time.perf_counter() - t
                ess = [
                    float(az.ess(rel.diagnostics, var_names=["distance"], method=m)["distance"])
                    for m in ("bulk", "tail")
                ]
                out.append(f"{wall:.2f}s ess {ess[0]:.0f}/{ess[1]:.0f}")
            print(space, tune, draws, "; ".join(out), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:] or ["S2", "SO3"])
