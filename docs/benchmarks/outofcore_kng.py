"""Out-of-core run: a KNG release of n = 10^8 points of S^2 stored as .npy shards.

Issue 13's goal: data that do not fit the workers' memory (2.4 GB of float64 points,
workers limited to 1 GB each) released exactly by KNG, every pass a Dask reduction
that returns a 3-vector per proposal and chunk: nothing is gathered, nothing spills.

Steps: (1) write ``N`` points of ``sphere_cap`` (polar angle uniform on [0, pi/8]
about the north pole) as shards of ``SHARD`` rows under ``--dir`` (default
/tmp/pmd-shards), or with ``--reuse`` use the shards already there; (2) start a
``distributed.LocalCluster`` of 2 worker processes, 1 thread and ``--memory-limit``
each; (3) ``open_points`` + ``KNGMechanism.release``, timing each Dask pass; (4) print
the time, each pass's time, the workers' CPU time, the passes and the workers' peak
memory; (5) delete the shards (unless ``--keep`` or ``--reuse``).

Run:  PYTHONPATH=. .venv/bin/python docs/benchmarks/outofcore_kng.py     (a few minutes)
      ... --n 10000000 for a quick check
"""

from __future__ import annotations

import argparse
import datetime
import os
import shutil
import time
from pathlib import Path

import numpy as np

import pymc_manidp as pmd
from pymc_manidp.datasets import generators
from pymc_manidp.io import open_points
from pymc_manidp.stats import reductions

NORTH = np.array([0.0, 0.0, 1.0])


def _peak_rss() -> int:
    """The calling process's peak resident memory in bytes (Linux: ru_maxrss in KiB)."""
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def write_shards(folder: Path, n: int, shard: int) -> float:
    folder.mkdir(parents=True, exist_ok=True)
    t = time.perf_counter()
    for i, start in enumerate(range(0, n, shard)):
        rows = min(shard, n - start)
        pts = generators.sphere_cap(rows, radius=np.pi / 8, center=NORTH, random_seed=i)
        np.save(folder / f"part-{i:05d}.npy", pts)
    return time.perf_counter() - t


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=100_000_000)
    ap.add_argument("--shard", type=int, default=1_000_000)
    ap.add_argument("--dir", default="/tmp/pmd-shards")
    ap.add_argument("--memory-limit", default="1GB")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument(
        "--reuse", action="store_true", help="use the shards already in --dir (kept after)"
    )
    args = ap.parse_args()
    from distributed import Client, LocalCluster

    folder = Path(args.dir)
    print(
        f"# {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC, {os.cpu_count()} "
        f"cores, load average before: {os.getloadavg()[0]:.1f}"
    )
    if args.reuse:
        args.keep = True
        args.n = sum(np.load(f, mmap_mode="r").shape[0] for f in folder.glob("*.npy"))
        t_write = 0.0
    else:
        t_write = write_shards(folder, args.n, args.shard)
    size = sum(f.stat().st_size for f in folder.glob("*.npy"))
    print(
        f"wrote {args.n:,} points in {len(list(folder.glob('*.npy')))} shards, "
        f"{size / 1e9:.2f} GB, in {t_write:.0f} s"
    )
    try:
        with (
            LocalCluster(
                n_workers=2,
                threads_per_worker=1,
                processes=True,
                memory_limit=args.memory_limit,
                dashboard_address=None,
            ) as cluster,
            Client(cluster) as client,
        ):
            data = open_points(folder)
            S = pmd.Sphere(dim=2)
            mech = pmd.KNGMechanism(S, epsilon=1.0, center=NORTH, radius=np.pi / 8)
            timed = []  # (label, seconds) of every Dask pass: each reads all the shards
            run_pass = reductions.passes._run_pass

            def timed_pass(data, chunk_fn, label, *a):
                t0 = time.perf_counter()
                out = run_pass(data, chunk_fn, label, *a)
                timed.append((label, time.perf_counter() - t0))
                return out

            reductions.passes._run_pass = timed_pass
            cpu0 = client.run(time.process_time)
            t = time.perf_counter()
            try:
                rel = mech.release(data, random_seed=args.seed)
            finally:
                reductions.passes._run_pass = run_pass
            elapsed = time.perf_counter() - t
            cpu = sum(client.run(time.process_time).values()) - sum(cpu0.values())
            passes = len(timed)
            # the workers' CPU time: what the passes cost, less sensitive to the load
            print(f"workers' CPU time: {cpu:.1f} s")
            print("passes: " + "; ".join(f"{lab} {sec:.2f} s" for lab, sec in timed))
            peak = client.run(_peak_rss)
            print(
                f"released {np.array2string(rel.value, precision=8)} (n = {rel.n:,}, "
                f"eps = {rel.epsilon}, delta = {rel.delta})"
            )
            print(
                f"KNG release: {elapsed:.1f} s, {passes} passes, "
                f"{elapsed / passes:.1f} s per pass, "
                f"{args.n * passes / elapsed / 1e6:.1f} million points per second"
            )
            print(
                f"proposals: {rel.sampler_info['proposals']}; workers' peak memory "
                f"(max RSS): {', '.join(f'{v / 1e6:.0f} MB' for v in peak.values())} "
                f"(limit {args.memory_limit}); workers alive: {len(peak)} of 2"
            )
        print(f"load average after: {os.getloadavg()[0]:.1f}")
    finally:
        if not args.keep:
            shutil.rmtree(folder, ignore_errors=True)
            print(f"deleted {folder}")


if __name__ == "__main__":
    main()
