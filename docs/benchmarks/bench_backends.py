"""Benchmark (issue 12): the NUTS backends side by side, 2nd release (model cached).

For KNG and Laplace on S^2 at n = 1,000 (epsilon = 1, data uniform in radius in the
ball of radius 0.9 pi/8 about the north pole), in one process and with the same data:
``mech.release(data, sampler="nuts")`` with its defaults (4 chains, 1,000 tuning steps,
2,000 draws, diagnostics gate) through

- ``pymc (cores=1)``: PyMC's NUTS as PyMC runs it here by default (it takes half of
  ``cpu_count()`` as its cores: 1 on this 2-core machine, chains one after the other);
- ``pymc (cores=2)``: PyMC's NUTS with two chains at a time in worker processes;
- ``nutpie``: nutpie (chains in threads on all cores).

Release 1 of each mechanism object compiles; the row is release 2 with new data of the
same n (the compiled model reused), whole call; the rounds alternate the backends so
that a change of the machine's load hits them alike.

Run:  PYTHONPATH=.:/path/to/nutpie python docs/benchmarks/bench_backends.py [rounds]
"""

from __future__ import annotations

import os
import sys
import time
import warnings

import numpy as np
import pymc as pm

import pymc_manidp as pmd
from pymc_manidp.datasets.generators import uniform_radius_ball

S2 = pmd.Sphere(dim=2)
NORTH = np.array([0.0, 0.0, 1.0])
MECHS = {"KNG": pmd.KNGMechanism, "Laplace": pmd.LaplaceMechanism}
_SAMPLE = pm.sample


def with_cores(cores):
    """Make PyMC's NUTS use ``cores`` worker processes (None: PyMC's default)."""

    def sample(*args, **kwargs):
        if cores is not None:
            kwargs.setdefault("cores", cores)
        return _SAMPLE(*args, **kwargs)

    pm.sample = sample


def main(rounds):
    warnings.filterwarnings("ignore")
    data = [
        uniform_radius_ball(S2, 1000, center=NORTH, radius=0.9 * np.pi / 8, random_seed=s)
        for s in range(2 + rounds)
    ]
    configs = {
        "pymc (cores=1)": ("pymc", 1),
        "pymc (cores=2)": ("pymc", 2),
        "nutpie": ("nutpie", None),
    }
    print(f"{os.cpu_count()} cores, load average at start {os.getloadavg()[0]:.2f}")
    print("| mechanism | backend | round | 1st release s | 2nd release s | divergences | load |")
    print("|---|---|---|---|---|---|---|")
    for mech_name, cls in MECHS.items():
        mechs, first = {}, {}
        for label, (backend, cores) in configs.items():
            os.environ["PYMC_MANIDP_NUTS_BACKEND"] = backend
            with_cores(cores)
            mechs[label] = cls(S2, epsilon=1.0, center=NORTH, radius=np.pi / 8)
            t0 = time.perf_counter()
            mechs[label].release(data[0], sampler="nuts", random_seed=1)
            first[label] = time.perf_counter() - t0
        for r in range(rounds):
            for label, (backend, cores) in configs.items():
                os.environ["PYMC_MANIDP_NUTS_BACKEND"] = backend
                with_cores(cores)
                t0 = time.perf_counter()
                rel = mechs[label].release(data[1 + r], sampler="nuts", random_seed=2 + r)
                second = time.perf_counter() - t0
                div = int(np.asarray(rel.diagnostics.sample_stats["diverging"]).sum())
                print(
                    f"| {mech_name} | {label} ({rel.sampler_info['backend']}) | {r + 1} | "
                    f"{first[label]:.1f} | {second:.2f} | {div} | {os.getloadavg()[0]:.1f} |",
                    flush=True,
                )


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 2)
