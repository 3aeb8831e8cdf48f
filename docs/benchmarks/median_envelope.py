"""Median KNG's exact sampler on median_robustness's grid: envelope, acceptance, time.

Run: PYTHONPATH=. .venv/bin/python docs/benchmarks/median_envelope.py [--reps K]
     [--before TREE]
For each space and n of ``pymc-manidp reproduce median_robustness`` (eps = 1), clean
data and 10% at the ball's edge (the experiment's generators): the envelope the
sampler uses for 20 draws (``MedianShells`` around the computed median, then
``MedianCells`` where the boxes take over), its size and acceptance rate (data seed
1), and the mean seconds of K single releases (data seeds 1..K; envelope built once
per release, as the experiment does). The sum over the grid times 500 replicates
estimates the median's share of a full run on one core.

With ``--before TREE`` (a checkout of another commit, e.g. from ``git archive``) the
single releases are timed in two worker processes, one per tree, row by row in
turn, so that both see the same load: the table gains a column for the other tree.
"""

import argparse
import json
import os
import subprocess
import sys
import time
import warnings

import numpy as np


def _row_time(space, n, p, seed, setup):
    from pymc_manidp.laws.exact import sample_kng_median

    M, gen, mech, outlier = setup(space)
    rng = np.random.default_rng(seed)
    x = gen(n, rng)
    x[: round(p * n)] = outlier
    t0 = time.perf_counter()
    sample_kng_median(M, x, mech.sigma(n), 1, rng=rng, domain=mech.domain)
    return time.perf_counter() - t0


def _setup_cache():
    from pymc_manidp.experiments import median_robustness as mr

    cache = {}

    def setup(space):
        if space not in cache:
            M, gen, mechs, outlier = mr._setup(space, 1.0)
            cache[space] = (M, gen, mechs[mr.KNG_MEDIAN], outlier)
        return cache[space]

    return setup


def _worker():
    """Read ``[space, n, p, seeds]`` lines, print the mean seconds of the releases."""
    warnings.simplefilter("ignore")
    setup = _setup_cache()
    for line in sys.stdin:
        space, n, p, seeds = json.loads(line)
        t = [_row_time(space, n, p, s, setup) for s in seeds]
        print(json.dumps(float(np.mean(t))), flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--before", default=None)
    ap.add_argument("--worker", action="store_true")
    args = ap.parse_args()
    if args.worker:
        return _worker()
    warnings.simplefilter("ignore")
    from pymc_manidp.experiments import median_robustness as mr
    from pymc_manidp.laws.exact import ExactSamplingError, sample_kng_median

    workers = {}
    if args.before:
        for name, tree in (("before", args.before), ("after", os.getcwd())):
            env = dict(os.environ, PYTHONPATH=tree)
            workers[name] = subprocess.Popen(
                [sys.executable, os.path.abspath(__file__), "--worker"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
                env=env,
                cwd=tree,
            )
    setup = _setup_cache()
    cols = "| space | n | at the edge | envelope | boxes/shells | acceptance | s per release |"
    print(cols + (" s before |" if workers else ""))
    print("|---|---|---|---|---|---|---|" + ("---|" if workers else ""))
    total = {"after": 0.0, "before": 0.0}
    seeds = list(range(1, args.reps + 1))
    for space in mr.SPACES:
        M, gen, mech, outlier = setup(space)
        for n in mr.SETTINGS["full"]["n_grid"]:
            for p in (0.0, 0.1):
                if workers:
                    one = {}
                    for name in ("before", "after"):  # in turn: the same load
                        w = workers[name]
                        w.stdin.write(json.dumps([space, n, p, seeds]) + "\n")
                        w.stdin.flush()
                        one[name] = json.loads(w.stdout.readline())
                else:
                    one = {"after": np.mean([_row_time(space, n, p, s, setup) for s in seeds])}
                for name, t in one.items():
                    total[name] += t * 2  # the 1% and 5% columns cost about as much
                rng = np.random.default_rng(1)
                x = gen(n, rng)
                x[: round(p * n)] = outlier
                try:
                    out = sample_kng_median(M, x, mech.sigma(n), 20, rng=rng, domain=mech.domain)
                    info = out.info
                    size = f"{info['envelope_shells']}/{info['envelope_cells']}"
                    acc = f"{out.acceptance_rate:.3g}"
                    env = info["envelope"]
                except ExactSamplingError:
                    env, size, acc = "(cap hit)", "", "< 5e-3"
                row = f"| {space} | {n} | {100 * p:g}% | {env} | {size} | {acc} "
                row += f"| {one['after']:.3g} |"
                print(row + (f" {one['before']:.3g} |" if workers else ""), flush=True)
    for name in ("after", "before") if workers else ("after",):
        print(
            f"\n{name}: median releases of a full run (500 replicates a cell): "
            f"~{total[name] * 500 / 3600:.2f} h of one core"
        )
    for w in workers.values():
        w.stdin.close()
        w.wait()


if __name__ == "__main__":
    main()
