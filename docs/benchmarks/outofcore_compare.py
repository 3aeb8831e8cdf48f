"""Out-of-core KNG release, before and after, side by side in one run (issue 26 item 5).

Writes ``--n`` points of ``sphere_cap`` as shards of ``--shard`` rows once, then runs
``outofcore_kng.py --reuse`` on them ``--rounds`` times for each package tree,
alternating (base, new, base, new, ...), each run in its own process with its own
``distributed.LocalCluster`` (2 workers, 1 thread, 1 GB each). The base tree is the
package at another commit, exported with
``git archive <commit> pymc_manidp | tar -x -C <dir>``. Prints each run's release time
and passes and the workers' CPU time (their sum: less sensitive to a loaded machine
than the wall time), then the medians; deletes the shards unless ``--keep``.

Run:  PYTHONPATH=. .venv/bin/python docs/benchmarks/outofcore_compare.py \\
          --base /tmp/base --n 10000000 --shard 1000000 --rounds 3
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--base", required=True, help="folder holding the base pymc_manidp/")
    ap.add_argument("--n", type=int, default=10_000_000)
    ap.add_argument("--shard", type=int, default=1_000_000)
    ap.add_argument("--dir", default="/tmp/pmd-shards-compare")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    sys.path.insert(0, str(HERE))
    from outofcore_kng import write_shards

    folder = Path(args.dir)
    if not any(folder.glob("*.npy")):
        print(f"writing shards: {write_shards(folder, args.n, args.shard):.0f} s", flush=True)
    times = {"base": [], "new": []}
    cpus = {"base": [], "new": []}
    try:
        for r in range(args.rounds):
            for name, tree in (("base", args.base), ("new", str(REPO))):
                env = dict(os.environ, PYTHONPATH=tree, PYTHONDONTWRITEBYTECODE="1")
                out = subprocess.run(
                    [sys.executable, str(HERE / "outofcore_kng.py"), "--reuse", "--dir", args.dir],
                    env=env,
                    capture_output=True,
                    text=True,
                    check=True,
                ).stdout
                sec = float(re.search(r"KNG release: ([\d.]+) s", out).group(1))
                cpu = float(re.search(r"workers' CPU time: ([\d.]+) s", out).group(1))
                times[name].append(sec)
                cpus[name].append(cpu)
                passes = re.search(r"^passes: (.*)$", out, re.M).group(1)
                load = re.search(r"load average before: ([\d.]+)", out).group(1)
                print(
                    f"round {r + 1} {name}: {sec:.1f} s, workers' CPU {cpu:.1f} s "
                    f"(load {load}); {passes}",
                    flush=True,
                )
        for what, d in (("wall", times), ("workers' CPU", cpus)):
            med = {k: sorted(v)[len(v) // 2] for k, v in d.items()}
            print(
                f"median {what}: base {med['base']:.1f} s, new {med['new']:.1f} s, "
                f"ratio {med['base'] / med['new']:.2f}x"
            )
    finally:
        if not args.keep:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
