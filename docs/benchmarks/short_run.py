"""Benchmark (issue 38 item 6): how often a release's short run passes the gate.

A NUTS release at the default settings first samples 4 x (300 + 500) and releases from
it when it passes the diagnostics gate (R-hat <= 1.01, bulk and tail ESS >= 400, no
divergence); otherwise the full 4 x (1,000 + 1,000) samples (``MCMCSettings.short_run``).
For each space (``profile_first_release.py``'s cases: records at normal coordinates of
scale 0.25 r about the public center), each mechanism (Laplace, KNG, epsilon = 1) and
each n given, one release compiles the model (not counted), then ``--seeds`` releases
(seeds 1, 2, ...) at the defaults. Printed per case: how many short runs passed, the
lowest bulk / tail ESS of the monitored quantities over the short runs (min over the
gate's quantities: the distance and each moving coordinate), and the median wall time
of a release call.

Run::

    PYTHONPATH=$PWD .venv/bin/python docs/benchmarks/short_run.py --seeds 10 \\
        --n 100,10000 R3 S2 H2 SO3 SPD2 K4
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from profile_first_release import _data

import pymc_manidp as pmd
from pymc_manidp.privacy.diagnostics import check_run


def _lowest_ess(idata):
    report = check_run(idata)
    return min(report.ess_bulk.values()), min(report.ess_tail.values())


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("spaces", nargs="+")
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--n", default="100,10000")
    parser.add_argument("--laws", default="Laplace,KNG")
    args = parser.parse_args(argv)
    print("space law n | short runs passed | lowest ESS bulk / tail (short) | median s")
    for space in args.spaces:
        for n in map(int, args.n.split(",")):
            M, center, radius, data = _data(space, n)
            for law in args.laws.split(","):
                cls = {"Laplace": pmd.LaplaceMechanism, "KNG": pmd.KNGMechanism}[law]
                mech = cls(M, epsilon=1.0, center=center, radius=radius)
                mech.release(data, sampler="nuts", random_seed=0, progressbar=False)
                passed, bulk, tail, walls = 0, [], [], []
                for seed in range(1, args.seeds + 1):
                    t = time.perf_counter()
                    rel = mech.release(data, sampler="nuts", random_seed=seed, progressbar=False)
                    walls.append(time.perf_counter() - t)
                    first = rel.sampler_info["runs"][0]
                    if not first["failed_checks"]:
                        passed += 1
                        b, tl = _lowest_ess(rel.diagnostics)
                        bulk.append(b)
                        tail.append(tl)
                    else:
                        print("   short run failed:", first["failed_checks"], flush=True)
                lowest = f"{min(bulk):.0f} / {min(tail):.0f}" if bulk else "-"
                print(
                    f"{space} {law} {n} | {passed}/{args.seeds} | {lowest} | "
                    f"{statistics.median(walls):.2f}",
                    flush=True,
                )
    return 0


if __name__ == "__main__":
    np.seterr(all="ignore")
    raise SystemExit(main())
