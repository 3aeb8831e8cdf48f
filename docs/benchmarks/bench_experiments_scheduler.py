"""Benchmark: which Dask local scheduler runs the experiments' replicates fastest.

The experiments' replicates (``experiments._common.parallel_map``) are loops of NumPy
calls on small arrays (a dataset of n points in R^3 or 2x2 matrices, a Fréchet mean,
one exact draw per mechanism). Work: the jobs of ``kng2022_fig1 --quick`` with
``REPLICATES`` replicates per n (S^2 and SPD(2), 5 sample sizes), run

1. serially in this process (``workers=1``),
2. on Dask's ``threads`` scheduler, 2 workers,
3. on Dask's ``processes`` scheduler, 2 workers (worker start-up, ~5 s of imports
   per process, included: a run pays it once per ``parallel_map``).

Each result list is checked identical to the serial one (the seeds travel with the
jobs). Prints wall-clock seconds, the speed-up over serial, and the CPU time (this
process and the scheduler's worker processes) over wall time: for threads near 2 when
the GIL lets both run, near 1 when they take turns. Compare on an otherwise idle
machine: other load takes the second core.

Run:  PYTHONPATH=. .venv/bin/python docs/benchmarks/bench_experiments_scheduler.py [REPLICATES]
"""

from __future__ import annotations

import os
import sys
import time

from pymc_manidp.experiments import _common as C
from pymc_manidp.experiments import kng2022_fig1 as F


def jobs(replicates: int, seed: int = 1) -> list[tuple]:
    """The ``kng2022_fig1`` quick grid's jobs (as the experiment builds them)."""
    grid = F.SETTINGS["quick"]["n_grid"]
    out = []
    for s, space in enumerate(F.SPACES):
        size = max(1, min(100 if space == "S2" else 25, replicates // 4))
        for i, n in enumerate(grid):
            seeds = C.child_seeds(seed, s, i, count=replicates)
            out += [
                (space, n, 1.0, [(j, seeds[j]) for j in part])
                for part in C.chunks(replicates, size)
            ]
    return out


def main(replicates: int = 80) -> None:
    work = jobs(replicates)
    F._chunk(*jobs(4)[0])  # warm this process's caches (mechanisms, compiled graphs)
    # the processes scheduler's fixed cost: start 2 workers that import the package
    t0 = time.perf_counter()
    C.parallel_map(C.chunks, [(1, 1)] * 2, workers=2, progress=False, description="start")
    startup = time.perf_counter() - t0
    print(f"processes x2 start-up (no work): {startup:.1f} s")
    times, cpu, results = {}, {}, {}
    # serial last: the parallel runs must not profit from anything it leaves behind
    for name, workers, scheduler in (
        ("processes x2", 2, "processes"),
        ("threads x2", 2, "threads"),
        ("serial", 1, None),
    ):
        t0, c0 = time.perf_counter(), os.times()
        results[name] = C.parallel_map(
            F._chunk, work, workers=workers, progress=False, description=name, scheduler=scheduler
        )
        c1 = os.times()
        times[name] = time.perf_counter() - t0
        # this process and its finished children (the processes scheduler's workers)
        cpu[name] = sum(c1[:4]) - sum(c0[:4])
    for name, t in times.items():
        assert results[name] == results["serial"], f"{name} differs from the serial run"
        # CPU / wall near 2: both workers ran at once; near 1: they took turns (the GIL,
        # for threads) or the machine had no second core to give
        print(
            f"{name:>14}: {t:7.1f} s  speed-up {times['serial'] / t:.2f}  "
            f"CPU {cpu[name]:.1f} s  CPU / wall {cpu[name] / t:.2f}"
        )


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:]))
