"""Benchmark: one KNG log-density + gradient evaluation on SPD(k), per matrix-function route.

What NUTS pays per leapfrog step: the gradient of ``-|sum_i log_x(x_i)|_x`` at one
point ``x`` for n data matrices. Routes:

- ``eigh``: the general route before issue 12's kernels (``method="eigh"``: PyTensor's
  batched ``eigh`` in an OpFromGraph with a Daleckii–Krein pullback);
- ``closed, matmul``: the 2 x 2 closed-form ``logm`` with batched matrix products;
- ``twin``: what ``SPD(k).pt_log`` does (k = 2: closed forms and elementwise
  congruences; k >= 3: the ``SymMatrixFunction`` kernel Op, ``method="kernel"``).

Each compiled with PyTensor's C backend (mode ``CVM``: C thunks, C virtual machine;
note that in PyTensor 3 ``FAST_RUN`` with the default ``linker=auto`` is the NUMBA
backend) and the NUMBA backend (what nutpie and, by default, PyMC use). Median of 50
calls (wall clock and this process's CPU time), same process, same data.

Run:  PYTHONPATH=. .venv/bin/python docs/benchmarks/bench_spd_twins.py [k ...]
"""

from __future__ import annotations

import os
import sys
import time

# One BLAS thread: on a shared 2-core machine OpenBLAS's thread pool spins against the
# other processes and a 3 x 3 LAPACK call (scipy's solve_triangular, eigh) measured
# 16 ms instead of 12 us (2026-11-24). Set before NumPy loads OpenBLAS; override from
# the shell to measure the default.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np
import pytensor
import pytensor.tensor as pt

import pymc_manidp as pmd
from pymc_manidp.geometry._numba import pt_numerics as ptn


def kng_graph(k, route):
    P = pmd.SPD(k=k)
    x = pt.matrix("x")
    y = pt.tensor3("y")
    if route == "eigh":
        xs, xi = ptn.sqrtm(x, method="eigh"), ptn.invsqrtm(x, method="eigh")
        logs = ptn.sym(xs @ ptn.logm(xi @ y @ xi, method="eigh") @ xs)
    elif route == "closed, matmul":  # closed-form logm, batched matrix products
        xs, xi = ptn.sqrtm(x, k=k), ptn.invsqrtm(x, k=k)
        logs = ptn.sym(xs @ ptn.logm(xi @ y @ xi, k=k) @ xs)
    else:  # what SPD(k).pt_log does
        logs = P.pt_log(x, y)
    lp = -P.pt_norm(x, pt.sum(logs, axis=0))
    return x, y, lp, pt.grad(lp, x)


def time_call(f, *args, repeat=50):
    """Median wall-clock and median CPU seconds of this process per call.

    On a shared, oversubscribed machine a call of a few ms is often descheduled, so
    wall-clock medians grow with the load; the process's CPU time per call does not
    (numba and the C backend run these graphs on one thread).
    """
    f(*args)
    wall, cpu = [], []
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        f(*args)
        wall.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    return float(np.median(wall)), float(np.median(cpu))


def main(ns=(100, 1000), ks=(2, 3)):
    print(f"load average at start {os.getloadavg()}")
    print(f"OPENBLAS_NUM_THREADS={os.environ['OPENBLAS_NUM_THREADS']}")
    rng = np.random.default_rng(0)
    modes = ["CVM", "NUMBA"]
    print("| k | n | route | backend | compile s | grad eval ms (wall) | grad eval ms (CPU) |")
    print("|---|---|---|---|---|---|---|")
    for k in ks:
        P = pmd.SPD(k=k)
        x0 = P.exp(np.eye(k), 0.2 * P.tangent_basis(np.eye(k))[0])
        for n in ns:
            v = 0.3 * np.einsum("na,aij->nij", rng.normal(size=(n, P.dim)), P._frame)
            data = P.exp(np.broadcast_to(x0, (n, k, k)), v)
            routes = ["eigh", "closed, matmul", "twin"] if k == 2 else ["eigh", "twin"]
            for route in routes:
                for mode in modes:
                    x, y, lp, g = kng_graph(k, route)
                    t0 = time.perf_counter()
                    f = pytensor.function([x, y], [lp, g], mode=mode)
                    f(x0, data)
                    comp = time.perf_counter() - t0
                    wall, cpu = time_call(f, x0, data)
                    backend = "C" if mode == "CVM" else mode
                    row = f"| {k} | {n} | {route} | {backend} | {comp:.1f} "
                    print(row + f"| {1e3 * wall:.3f} | {1e3 * cpu:.3f} |", flush=True)
    print(f"load average at end {os.getloadavg()}")


if __name__ == "__main__":
    main(ks=tuple(int(a) for a in sys.argv[1:]) or (2, 3))
