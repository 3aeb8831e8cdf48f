"""Benchmark (issue 12): the first NUTS release in a fresh process, phase by phase.

KNG on S^2, n = 1,000 (``uniform_radius_ball`` in the ball of radius pi/8 about the
north pole, epsilon = 1), ``mech.release(data, sampler="nuts")`` with its defaults.
Each run is a new Python process (``python -c``-like: this file run as a script with
``--child``) that times

- ``import``: ``import pymc_manidp``;
- ``data``: generating the data set;
- ``model``: building the ``pm.Model`` (``mcmc.polar_model``, from the mode the
  release computed once);
- ``compile``: preparing the sampler (``CompiledSampler(...)``: nutpie's numba
  compile; nothing for PyMC's NUTS, which compiles inside ``pm.sample``);
- ``sample``: ``CompiledSampler.sample`` (PyMC: compile + sampling);
- ``gate``: the ArviZ diagnostics gate (``check_run``);
- ``release``: the whole ``mech.release`` call; ``total``: the process's wall time
  from its start (``python`` start-up and imports included); ``wall`` and ``CPU``
  (user + sys seconds of the child, all its threads) measured by the parent.

Run (the parent runs the children one after the other and prints one row each)::

    PYTHONPATH=. .venv/bin/python docs/benchmarks/bench_first_release.py [backend] [runs]

``backend``: ``pymc`` or ``nutpie`` (``PYMC_MANIDP_NUTS_BACKEND``); the first child
gets a new, empty cache directory (``PYMC_MANIDP_CACHE_DIR``: cold), the others reuse
it (warm). "cache hits": nutpie's entry points loaded from it (2 = both). PyTensor's
own caches (``base_compiledir``: C modules and numba functions) stay where they are:
add ``PYTENSOR_FLAGS=base_compiledir=/new/dir`` for a completely cold first run.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import tempfile
import time

T_START = time.perf_counter()
PHASES = ("import", "data", "model", "compile", "sample", "gate", "release", "total")


def child():
    import numpy as np

    timings = {}
    t0 = time.perf_counter()
    import pymc_manidp as pmd
    from pymc_manidp import mcmc
    from pymc_manidp.mechanisms import base

    timings["import"] = time.perf_counter() - t0

    def timed(label, fn):
        def wrapper(*args, **kwargs):
            t = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                timings[label] = timings.get(label, 0.0) + time.perf_counter() - t

        return wrapper

    from pymc_manidp.datasets.generators import uniform_radius_ball

    t0 = time.perf_counter()
    S2 = pmd.Sphere(dim=2)
    north = np.array([0.0, 0.0, 1.0])
    data = uniform_radius_ball(S2, 1000, center=north, radius=0.9 * np.pi / 8, random_seed=0)
    timings["data"] = time.perf_counter() - t0

    mech = pmd.KNGMechanism(S2, epsilon=1.0, center=north, radius=np.pi / 8)
    mcmc.polar_model = timed("model", mcmc.polar_model)
    init = mcmc.CompiledSampler.__init__
    mcmc.CompiledSampler.__init__ = timed("compile", init)
    mcmc.CompiledSampler.sample = timed("sample", mcmc.CompiledSampler.sample)
    base.check_run = timed("gate", base.check_run)
    t0 = time.perf_counter()
    rel = mech.release(data, sampler="nuts", random_seed=1)
    timings["release"] = time.perf_counter() - t0
    timings["total"] = time.perf_counter() - T_START
    info = rel.sampler_info
    hits = mech.mcmc_cache.find(len(data), "nuts", info["backend"]).cache_hits
    print(
        "ROW",
        info["backend"],
        hits,
        " ".join(f"{timings.get(p, float('nan')):.2f}" for p in PHASES),
        flush=True,
    )


def main(backend, runs):
    print(f"{os.cpu_count()} cores, load average at start {os.getloadavg()[0]:.2f}")
    print(f"| run | backend | cache hits | {' | '.join(PHASES)} | wall | CPU | load |")
    print("|---" * (len(PHASES) + 6) + "|")
    cache = tempfile.mkdtemp(prefix="manidp-cache-")
    env = dict(os.environ, PYMC_MANIDP_NUTS_BACKEND=backend, PYMC_MANIDP_CACHE_DIR=cache)
    for run in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        out = subprocess.run(
            [sys.executable, __file__, "--child"],
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        wall = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        rows = [line for line in out.stdout.splitlines() if line.startswith("ROW")]
        if not rows:
            print(out.stdout[-2000:], out.stderr[-4000:])
            raise SystemExit("child failed")
        _, used, hits, *numbers = rows[0].split()
        label = "cold" if run == 0 else "warm"
        print(
            f"| {run + 1} ({label}) | {used} | {hits} | {' | '.join(numbers)} | "
            f"{wall:.2f} | {cpu:.2f} | {os.getloadavg()[0]:.1f} |",
            flush=True,
        )


if __name__ == "__main__":
    if "--child" in sys.argv:
        child()
    else:
        args = sys.argv[1:]
        main(args[0] if args else "auto", int(args[1]) if len(args) > 1 else 3)
