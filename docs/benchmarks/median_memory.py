"""Peak memory of a KNG release on S^2: the median against the mean (issue 43 item 13).

Run:  PYTHONPATH=. .venv/bin/python docs/benchmarks/median_memory.py [--n 1000000 3000000]
      [--reps 1] [--backends numpy dask] [--statistics mean median] [--tree PATH]

``--tree`` runs the children on another checkout of the package (e.g. the code before,
exported with ``git archive``).

Each measurement runs in a fresh process (``--child``): it imports the package, draws
``n`` points of ``sphere_cap`` (polar angle uniform on [0, pi/8] about the north pole),
wraps them as NumPy or as a Dask array of 10^5-row chunks, reads its peak resident
memory (``ru_maxrss``), releases ``KNGMechanism(Sphere(2), epsilon=1, center=north,
radius=pi/8, statistic=...)`` with the exact sampler (seed 0), and reads the peak
again. The table gives the process's peak (what ``/usr/bin/time -v`` calls maximum
resident set size) and the release's own part (peak after minus peak before: the
imports and the data are the same for both statistics).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import resource
import subprocess
import sys
import time

import numpy as np

NORTH = np.array([0.0, 0.0, 1.0])


def _peak_rss() -> int:
    """This process's peak resident memory in bytes (Linux: ru_maxrss in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def child(statistic: str, backend: str, n: int) -> dict:
    import pymc_manidp as pmd
    from pymc_manidp.datasets import generators

    x = generators.sphere_cap(n, radius=np.pi / 8, center=NORTH, random_seed=1)
    if backend == "dask":
        import dask.array as da

        x = da.from_array(x, chunks=(100_000, 3))
    mech = pmd.KNGMechanism(
        pmd.Sphere(dim=2), epsilon=1.0, center=NORTH, radius=np.pi / 8, statistic=statistic
    )
    before = _peak_rss()
    t = time.perf_counter()
    value = mech.release(x, random_seed=0)
    seconds = time.perf_counter() - t
    after = _peak_rss()
    return {
        "statistic": statistic,
        "backend": backend,
        "n": n,
        "peak": after,
        "release": after - before,
        "seconds": seconds,
        "value": np.asarray(value.value).tolist(),
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, nargs="+", default=[1_000_000, 3_000_000])
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--backends", nargs="+", default=["numpy", "dask"])
    ap.add_argument("--statistics", nargs="+", default=["mean", "median"])
    ap.add_argument("--tree", help="PYTHONPATH of the children (default: inherited)")
    ap.add_argument("--child", nargs=3, metavar=("STATISTIC", "BACKEND", "N"))
    args = ap.parse_args()
    if args.child:
        s, b, n = args.child
        print(json.dumps(child(s, b, int(n))))
        return
    print(f"# {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC, load {os.getloadavg()}")
    env = dict(os.environ)
    if args.tree:
        env["PYTHONPATH"] = args.tree
    print(f"# package from {env.get('PYTHONPATH', '(installed)')}")
    print("| n | input | statistic | peak RSS | release's part | s |")
    print("|---|---|---|---|---|---|")
    for n in args.n:
        for backend in args.backends:
            for statistic in args.statistics:
                for _ in range(args.reps):
                    out = subprocess.run(
                        [args.python, __file__, "--child", statistic, backend, str(n)],
                        capture_output=True,
                        text=True,
                        check=True,
                        env=env,
                    )
                    r = json.loads(out.stdout.strip().splitlines()[-1])
                    print(
                        f"| {n:.0e} | {backend} | {statistic} | {r['peak'] / 1e9:.2f} GB | "
                        f"{r['release'] / 1e9:.2f} GB | {r['seconds']:.1f} |",
                        flush=True,
                    )


if __name__ == "__main__":
    main()
