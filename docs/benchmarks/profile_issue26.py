"""Profiles for issue 26 item 3: where the time of a release and of an experiment goes.

cProfile over

- (a) one exact KNG release on S², n = 1,000 (``KNGMechanism.release(data,
  random_seed=i)``, ε = 1, ball B_{π/8}(north pole), data from ``sphere_cap``),
  repeated ``RELEASES`` times after a warm-up;
- (b) one exact Laplace release on S² and on SPD(2) (ball B_{1.5}(I), data from
  ``wishart_in_ball``), n = 1,000, likewise;
- (c) the quick run of each experiment (``experiments.run(name, quick=True,
  workers=1, scheduler="sync")``: one process, so that the profile sees the
  replicates), only with ``--experiments``.

For each, the total and the top functions by cumulative time and by own time
(``pstats`` sorted by ``cumulative`` and ``tottime``), as shares of the total, in
Markdown. Wrappers every call passes through (the top-level call itself, the
experiments' task runner) are left out of the cumulative lists.

Run:  .venv/bin/python docs/benchmarks/profile_issue26.py               (the releases, seconds)
      .venv/bin/python docs/benchmarks/profile_issue26.py --experiments [NAME ...]
      (the experiments' quick runs, about 6 minutes on 2 idle cores; or only NAMEs)
"""

from __future__ import annotations

import cProfile
import pstats
import sys
import time

import numpy as np

import pymc_manidp as pmd
from pymc_manidp.datasets import sphere_cap, wishart_in_ball

RELEASES = 300
TOP_CUMULATIVE = 16
TOP_OWN = 8
# frames every profiled call passes through: no information in their share
_SKIP = ("<built-in method builtins.exec>", "<string>", "(run)", "(parallel_map)", "(_dispatch)")


def _name(func):
    path, line, name = func
    if path == "~":
        return name
    if "pymc_manidp/" in path:
        return f"{path.split('pymc_manidp/')[-1]}:{line}({name})"
    # another package's module, by its dotted name (not a file of this repository)
    module = path.split("site-packages/")[-1].removesuffix(".py").replace("/", ".")
    return f"{module}:{line}({name})"


def _report(title, prof, total):
    st = pstats.Stats(prof)
    rows = [(k, v) for k, v in st.stats.items()]  # (file, line, name) -> (cc, nc, tt, ct, callers)
    print(f"### {title}: {total:.3g} s in all\n")
    print("| by cumulative time | share | by own time | share |")
    print("|---|---|---|---|")
    cum = sorted(rows, key=lambda kv: -kv[1][3])
    cum = [kv for kv in cum if not any(s in _name(kv[0]) for s in _SKIP)][:TOP_CUMULATIVE]
    own = sorted(rows, key=lambda kv: -kv[1][2])[:TOP_OWN]
    ref = max(kv[1][3] for kv in rows)
    for i in range(max(len(cum), len(own))):
        a = f"`{_name(cum[i][0])}` | {cum[i][1][3] / ref:.0%}" if i < len(cum) else " | "
        b = f"`{_name(own[i][0])}` | {own[i][1][2] / ref:.0%}" if i < len(own) else " | "
        print(f"| {a} | {b} |")
    print(flush=True)


def _releases():
    S, P = pmd.Sphere(dim=2), pmd.SPD(k=2)
    s_data = sphere_cap(1000, radius=np.pi / 8, random_seed=0)
    p_data = wishart_in_ball(1000, k=2, df=2.0, radius=1.5, random_seed=0)
    s_kw = {"epsilon": 1.0, "center": [0.0, 0.0, 1.0], "radius": np.pi / 8}
    p_kw = {"epsilon": 1.0, "center": np.eye(2), "radius": 1.5}
    cases = [
        ("(a) exact KNG release, S², n = 1,000", pmd.KNGMechanism(S, **s_kw), s_data),
        ("(b) exact Laplace release, S², n = 1,000", pmd.LaplaceMechanism(S, **s_kw), s_data),
        ("(b) exact Laplace release, SPD(2), n = 1,000", pmd.LaplaceMechanism(P, **p_kw), p_data),
    ]
    for title, mech, data in cases:
        for i in range(20):  # warm-up
            mech.release(data, random_seed=i)
        prof = cProfile.Profile()
        t = time.perf_counter()
        prof.enable()
        for i in range(RELEASES):
            mech.release(data, random_seed=i)
        prof.disable()
        total = time.perf_counter() - t
        _report(f"{title}, {RELEASES} releases, {1e3 * total / RELEASES:.2f} ms each", prof, total)


def _experiments(names):
    from pymc_manidp import experiments

    for name in names or experiments.EXPERIMENTS:
        prof = cProfile.Profile()
        t = time.perf_counter()
        prof.enable()
        experiments.run(name, quick=True, out=None, progress=False, workers=1, scheduler="sync")
        prof.disable()
        _report(f"(c) `{name}` quick run", prof, time.perf_counter() - t)


if __name__ == "__main__":
    args = sys.argv[1:]
    if "--experiments" in args:  # optionally followed by names: only those
        _experiments(args[args.index("--experiments") + 1 :])
    else:
        _releases()
