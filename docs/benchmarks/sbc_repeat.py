"""Run the S² SBC test 5 times alone and 5 times under xdist, each in a fresh process.

Issue 28, item 6: a seeded test must give the same ranks in every process. Each run is
a new ``pytest`` process on ``tests/laws/test_inference.py::test_simulation_based_calibration``
(its 200 + 100 replicates, on nutpie since the suite was cut to 15 minutes), the first
5 alone (``-p no:xdist``), the next 5 under
``-n 2 --dist worksteal`` together with two other tests of the file (so the SBC test
shares its worker with whatever xdist hands it); the test appends its ranks to
``$MANIDP_SBC_RANKS`` and this script prints the SHA-256 of each run's ranks (int64,
little-endian; the calibrated study's 200 ranks, then the wrong likelihood's 100) and
fails unless all 10 agree. All runs share the PyTensor compile directory of the
machine (warm after the first). Run from the repository's root::

    PYTHONPATH=$PWD .venv/bin/python docs/benchmarks/sbc_repeat.py

About 1-2 minutes per run on 2 cores when the test ran PyMC's NUTS (20 in all on a
loaded machine); on nutpie 14-26 s a run, 3 minutes in all on the idle machine.
"""

import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
TEST = "tests/laws/test_inference.py"
SBC = f"{TEST}::test_simulation_based_calibration"
OTHERS = [f"{TEST}::test_sbc_ranks_are_deterministic", f"{TEST}::test_user_prior_and_dims"]
MODES = {"alone": ["-p", "no:xdist", SBC], "-n 2": ["-n", "2", "--dist", "worksteal", SBC, *OTHERS]}


def main(runs=5):
    digests = []
    with tempfile.TemporaryDirectory() as tmp:
        for mode, args in MODES.items():
            for run in range(runs):
                dump = Path(tmp) / f"{mode}-{run}.jsonl".replace(" ", "")
                env = {**os.environ, "MANIDP_SBC_RANKS": str(dump)}
                env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
                t0 = time.perf_counter()
                subprocess.run(
                    [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
                    cwd=ROOT,
                    env=env,
                    check=True,
                    capture_output=True,
                )
                (line,) = dump.read_text().splitlines()
                studies = json.loads(line)
                ranks = np.array(studies["ranks"] + studies["wrong"], dtype="<i8")
                digest = hashlib.sha256(ranks.tobytes()).hexdigest()
                digests.append(digest)
                print(
                    f"{mode:6s} run {run + 1}: {digest[:16]}  first ranks {studies['ranks'][:8]}"
                    f"  ({time.perf_counter() - t0:.0f} s)",
                    flush=True,
                )
    print(f"{len(set(digests))} distinct hash(es) over {len(digests)} runs: {sorted(set(digests))}")
    return 0 if len(set(digests)) == 1 else 1


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]) if len(sys.argv) > 1 else 5))
