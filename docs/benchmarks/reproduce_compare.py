"""``pymc-manidp reproduce`` before and after issue 26, side by side in one run.

The package at ``--base`` (exported with ``git archive <commit> pymc_manidp``) and the
working tree each run the full setting of every experiment named (default: the five
paper experiments), one experiment at a time and alternating (base, new, base, new,
...), each run in its own process (its own Dask local cluster of 2 worker processes,
as the command line has by default), the same seed. Prints each run's wall time and CPU
time (user + system of the run and its worker processes, from ``getrusage``: less
sensitive to other jobs on the machine than the wall time), the per-experiment ratios
and the totals, and whether the two tables have the same shape.
The outputs go to a temporary folder, deleted at the end.

Run:  .venv/bin/python docs/benchmarks/reproduce_compare.py --base 2f0f948
      .venv/bin/python docs/benchmarks/reproduce_compare.py --base 2f0f948 --quick theorems
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PAPERS = (
    "laplace2021_sensitivity",
    "laplace2021_fig1",
    "kng2022_fig1",
    "kng2022_shapes",
    "theorems",
)


def export(commit: str) -> Path:
    """The package at ``commit`` in a temporary folder (``<folder>/pymc_manidp``)."""
    folder = Path(tempfile.mkdtemp(prefix=f"pmd-{commit}-"))
    archive = subprocess.run(
        ["git", "archive", commit, "pymc_manidp"], cwd=REPO, check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive, check=True)
    return folder


def _children_cpu() -> float:
    use = resource.getrusage(resource.RUSAGE_CHILDREN)
    return use.ru_utime + use.ru_stime


def run(tree: Path, name: str, out: Path, quick: bool) -> tuple[float, float]:
    """Wall and CPU seconds of ``pymc-manidp reproduce name`` with the package in
    ``tree`` (the CPU of every process it started and reaped, Dask's workers included)."""
    # the working directory holds no package, so PYTHONPATH decides which one is imported
    # (in the worker processes too)
    env = dict(os.environ, PYTHONPATH=str(tree), PYTHONDONTWRITEBYTECODE="1")
    code = (
        "import sys, pymc_manidp; assert pymc_manidp.__file__.startswith(sys.argv[1]), "
        "pymc_manidp.__file__; from pymc_manidp.cli import main; "
        "sys.exit(main(sys.argv[2:]))"
    )
    argv = ["reproduce", name, "--out", str(out)] + (["--quick"] if quick else [])
    t, c = time.perf_counter(), _children_cpu()
    subprocess.run(
        [sys.executable, "-c", code, str(tree), *argv],
        env=env,
        cwd=out,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return time.perf_counter() - t, _children_cpu() - c


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("names", nargs="*", default=list(PAPERS))
    ap.add_argument("--base", required=True, help="commit of the baseline")
    ap.add_argument("--quick", action="store_true", help="the --quick settings (a dry run)")
    args = ap.parse_args()
    base = export(args.base)
    scratch = Path(tempfile.mkdtemp(prefix="pmd-repro-"))
    totals = {"base": [0.0, 0.0], "new": [0.0, 0.0]}
    rows = []
    try:
        for name in args.names:
            secs, cpus = {}, {}
            for arm, tree in (("base", base), ("new", REPO)):
                out = scratch / arm
                out.mkdir(exist_ok=True)
                load = os.getloadavg()[0]
                secs[arm], cpus[arm] = run(tree, name, out, args.quick)
                totals[arm][0] += secs[arm]
                totals[arm][1] += cpus[arm]
                print(
                    f"{name} {arm}: {secs[arm]:.1f} s wall, {cpus[arm]:.1f} s CPU "
                    f"(load before {load:.1f})",
                    flush=True,
                )
            import pandas as pd

            shapes = [pd.read_csv(scratch / a / name / "table.csv").shape for a in secs]
            rows.append(
                (name, secs["base"], secs["new"], cpus["base"], cpus["new"], shapes[0] == shapes[1])
            )
        print(
            "\n| experiment | base wall (s) | new wall (s) | ratio | base CPU (s) | new CPU (s) "
            "| ratio | same table shape |"
        )
        print("|---|---|---|---|---|---|---|---|")
        for name, b, n, bc, nc, same in rows:
            print(
                f"| `{name}` | {b:.0f} | {n:.0f} | {b / n:.1f}× | {bc:.0f} | {nc:.0f} | "
                f"{bc / nc:.1f}× | {'yes' if same else 'NO'} |"
            )
        (b, bc), (n, nc) = totals["base"], totals["new"]
        print(
            f"| **all** | **{b:.0f}** | **{n:.0f}** | **{b / n:.1f}×** | **{bc:.0f}** | "
            f"**{nc:.0f}** | **{bc / nc:.1f}×** | |"
        )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
