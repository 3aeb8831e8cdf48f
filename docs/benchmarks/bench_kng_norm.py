"""Benchmark (issue 12): KNG's log-density and gradient, generic route against each override.

KNG's log-density is ``-||sum_i log_x(x_i)||_x / (sigma n)``, evaluated with its
gradient at every leapfrog step. ``ManifoldBase.pt_frechet_gradient_norm`` (the
generic route: ``x`` broadcast over the data, ``n`` logarithms, the norm at ``x``)
against the manifold's own ``pt_frechet_gradient_norm``:

- Sphere and KendallShape: matrix-vector products with the data;
- SPD: ``||sum_i logm(x^{-1/2} x_i x^{-1/2})||_F``, k = 2 in closed forms, k >= 3 in
  the ``SymCongruenceSum`` kernel (vectorized over the data at k = 3).

Both compiled with PyTensor's NUMBA backend (what nutpie runs), same data
(``uniform_radius_ball``, 0.9 of the benchmark balls' radii), same point ``x`` off the
data's mean; timed alternately in one process, median of 5 rounds of >= 0.3 s each,
milliseconds per call (value and gradient).

Run:  PYTHONPATH=. .venv/bin/python docs/benchmarks/bench_kng_norm.py
"""

from __future__ import annotations

import os
import time
import warnings

import numpy as np
import pytensor
import pytensor.tensor as pt

import pymc_manidp as pmd
from pymc_manidp.datasets.generators import uniform_radius_ball
from pymc_manidp.geometry.base import ManifoldBase


def _octagon():
    a = 2 * np.pi * np.arange(8) / 8
    return pmd.KendallShape(k_landmarks=8).validate(np.stack([np.cos(a), np.sin(a)], -1))


CASES = {
    "S2": lambda: (pmd.Sphere(dim=2), np.array([0.0, 0.0, 1.0]), np.pi / 8),
    "Kendall(8)": lambda: (pmd.KendallShape(k_landmarks=8), _octagon(), np.pi / 16),
    "SPD(2)": lambda: (pmd.SPD(k=2), np.eye(2), 1.5),
    "SPD(3)": lambda: (pmd.SPD(k=3), np.eye(3), 1.5),
    "SPD(4)": lambda: (pmd.SPD(k=4), np.eye(4), 1.5),
}


def _compiled(route, M, x0, data):
    x = pt.tensor("x", shape=x0.shape)
    d = pt.tensor("d", shape=(None, *data.shape[1:]))
    lp = route(M, x, d)
    return pytensor.function([x, d], [lp, pytensor.grad(lp, x)], mode="NUMBA")


def _ms_per_call(fn, x0, data):
    fn(x0, data)
    k, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < 0.3:
        fn(x0, data)
        k += 1
    return 1e3 * (time.perf_counter() - t0) / k


def main():
    warnings.filterwarnings("ignore")
    print(f"{os.cpu_count()} cores, load average at start {os.getloadavg()[0]:.2f}")
    print("| manifold | n | generic ms | override ms | generic ÷ override | agree |")
    print("|---|---|---|---|---|---|")
    routes = {
        "generic": lambda M, x, d: ManifoldBase.pt_frechet_gradient_norm(M, x, d),
        "override": lambda M, x, d: M.pt_frechet_gradient_norm(x, d),
    }
    for label, make in CASES.items():
        M, center, radius = make()
        x0 = M.exp_coords(center, np.full(M.dim, 0.1 / np.sqrt(M.dim)))
        for n in (100, 1000):
            data = uniform_radius_ball(M, n, center=center, radius=0.9 * radius, random_seed=0)
            fns = {name: _compiled(r, M, x0, data) for name, r in routes.items()}
            vals = {name: fn(x0, data)[0] for name, fn in fns.items()}
            times = {name: [] for name in fns}
            for _ in range(5):  # alternate: both routes see the same machine state
                for name, fn in fns.items():
                    times[name].append(_ms_per_call(fn, x0, data))
            g, o = (float(np.median(times[name])) for name in ("generic", "override"))
            agree = abs(float(vals["generic"] - vals["override"])) / abs(float(vals["generic"]))
            print(f"| {label} | {n} | {g:.3f} | {o:.3f} | **{g / o:.1f}** | {agree:.0e} |")
    print(f"load average at the end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
