"""Try (issue 38 item 6): does the LLVM work on numba's intermediate libraries make the
cold first release slow? A measurement, not a setting of the package.

A NUTS release compiles, with empty caches, some 500 numba libraries (PyTensor's node
functions, their helpers, the two graph functions and the two entry points of
:mod:`pymc_manidp.mcmc.nutpie_cache`). numba optimizes each, then links it into its
callers and optimizes the linked module again. ``lazy`` skips the optimization of every
library but the two entry points (whose optimization, after linking, covers all the
code that runs); ``names`` optimizes all, as numba does, and counts the libraries.
Each run is a new process in new empty cache folders, then a second (warm) process on
them; it prints the release call's CPU seconds and a hash of the draws, to compare::

    PYTHONPATH=$PWD .venv/bin/python docs/benchmarks/try_cold_compile.py names SO3:Laplace:1000
    PYTHONPATH=$PWD .venv/bin/python docs/benchmarks/try_cold_compile.py lazy SO3:Laplace:1000
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
import time


def child(mode, case):
    import numba.core.codegen as cg

    names = []
    optimize_final = cg.CPUCodeLibrary._optimize_final_module
    optimize_functions = cg.CPUCodeLibrary._optimize_functions

    def entry_point(lib):  # nutpie_cache's two cfuncs: logp_wrapper, expand_wrapper
        return "_wrapper" in lib.name

    def final(self):
        names.append(self.name)
        if mode == "names" or entry_point(self):
            optimize_final(self)

    def functions(self, module):
        if mode == "names" or entry_point(self):
            optimize_functions(self, module)

    cg.CPUCodeLibrary._optimize_final_module = final
    cg.CPUCodeLibrary._optimize_functions = functions

    import numpy as np

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from profile_first_release import _data

    import pymc_manidp as pmd

    space, mechanism, n = case.split(":")
    M, center, radius, data = _data(space, int(n))
    cls = {"KNG": pmd.KNGMechanism, "Laplace": pmd.LaplaceMechanism}[mechanism]
    mech = cls(M, epsilon=1.0, center=center, radius=radius)
    cpu = time.process_time()
    rel = mech.release(data, sampler="nuts", random_seed=1)
    cpu = time.process_time() - cpu
    draws = np.ascontiguousarray(rel.diagnostics.posterior["chart_coords"].values)
    digest = hashlib.sha256(draws.tobytes()).hexdigest()[:16]
    print(
        f"{mode} {case}: release CPU {cpu:.2f} s, libraries finalized {len(names)}, draws {digest}"
    )


def main(mode, case):
    root = tempfile.mkdtemp(prefix="manidp-try-cold-")
    env = dict(
        os.environ,
        HOME=root,
        XDG_CACHE_HOME=os.path.join(root, "cache"),
        NUMBA_CACHE_DIR=os.path.join(root, "numba"),
        PYTENSOR_FLAGS=f"base_compiledir={os.path.join(root, 'pytensor')}",
        PYMC_MANIDP_NUTS_BACKEND="nutpie",
    )
    env.pop("PYMC_MANIDP_CACHE_DIR", None)
    for label in ("cold", "warm"):
        out = subprocess.run(
            [sys.executable, __file__, "--child", mode, case],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        print(label, out.stdout.strip().splitlines()[-1], flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "--child":
        child(sys.argv[2], sys.argv[3])
    else:
        main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "SO3:Laplace:1000")
