"""Benchmark: one KNG log-density + gradient evaluation on SPD(k), per matrix-function route.

What NUTS pays per leapfrog step: the gradient of ``-|sum_i log_x(x_i)|_x`` at one
point ``x`` for n data matrices. Routes:

- ``eigh``: the general route (``pt_numerics._matrix_function_op``: PyTensor's batched
  ``eigh``, a Daleckii–Krein pullback), forced with ``k=None`` on dynamic shapes;
- ``closed, matmul``: the 2 x 2 closed-form ``logm`` with batched matrix products;
- ``twin``: what ``SPD(k).pt_log`` does (k = 2: closed forms and elementwise congruences).

Each compiled with PyTensor's default (C) backend and, when numba is importable, the
NUMBA backend (what nutpie uses). Median of repeated calls, same process, same data.

Run:  PYTHONPATH=. .venv/bin/python docs/benchmarks/bench_spd_twins.py
"""

from __future__ import annotations

import os
import sys
import time

import numpy as np
import pytensor
import pytensor.tensor as pt

import pymc_manidp as pmd
from pymc_manidp.geometry import pt_numerics as ptn


def kng_graph(k, route):
    P = pmd.SPD(k=k)
    x = pt.matrix("x")
    y = pt.tensor3("y")
    if route == "eigh":
        xs, xi = ptn.sqrtm(x), ptn.invsqrtm(x)
        logs = ptn.sym(xs @ ptn.logm(xi @ y @ xi) @ xs)
    elif route == "closed, matmul":  # closed-form logm, batched matrix products
        xs, xi = ptn.sqrtm(x, k=k), ptn.invsqrtm(x, k=k)
        logs = ptn.sym(xs @ ptn.logm(xi @ y @ xi, k=k) @ xs)
    else:  # what SPD(k).pt_log does
        logs = P.pt_log(x, y)
    lp = -P.pt_norm(x, pt.sum(logs, axis=0))
    return x, y, lp, pt.grad(lp, x)


def time_call(f, *args, repeat=50):
    f(*args)
    ts = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        f(*args)
        ts.append(time.perf_counter() - t0)
    return float(np.median(ts))


def main(ns=(100, 1000), ks=(2, 3)):
    print(f"load average at start {os.getloadavg()[0]:.2f}")
    rng = np.random.default_rng(0)
    modes = ["FAST_RUN"]
    try:
        import numba  # noqa: F401

        modes.append("NUMBA")
    except ImportError:
        pass
    print("| k | n | route | backend | compile s | grad eval ms |")
    print("|---|---|---|---|---|---|")
    for k in ks:
        P = pmd.SPD(k=k)
        x0 = P.exp(np.eye(k), 0.2 * P.tangent_basis(np.eye(k))[0])
        for n in ns:
            v = 0.3 * np.einsum("na,aij->nij", rng.normal(size=(n, P.dim)), P._frame)
            data = P.exp(np.broadcast_to(x0, (n, k, k)), v)
            routes = ["eigh", "closed, matmul", "twin"] if k == 2 else ["eigh"]
            for route in routes:
                for mode in modes:
                    x, y, lp, g = kng_graph(k, route)
                    t0 = time.perf_counter()
                    f = pytensor.function([x, y], [lp, g], mode=mode)
                    f(x0, data)
                    comp = time.perf_counter() - t0
                    ms = 1e3 * time_call(f, x0, data)
                    print(f"| {k} | {n} | {route} | {mode} | {comp:.1f} | {ms:.3f} |", flush=True)
    print(f"load average at end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main(ks=tuple(int(a) for a in sys.argv[1:]) or (2, 3))
