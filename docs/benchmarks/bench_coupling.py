"""Benchmark: meeting times and cost of L-lag coupled pairs (``mcmc.meeting_times``, the
input of ``privacy.coupling``'s delta estimate).

Targets (epsilon = 1, seeds fixed below): KNG on S^2 (n = 50 directions within 0.1 rad
of the north pole, ball B_{pi/8}); unrestricted Laplace on SPD(2) (n = 50, symmetric
Gaussian tangent noise of scale 0.2 at I, ball B_{1.5}(I)); unrestricted Laplace on
Kendall(8) (n = 200 noisy copies of an ellipse, ball of radius 0.2 around it). For each
target and kernel (``tune_kernel``: "rwmh", "hmc"), R = 100 pairs with L = 100 from
PyMC's jittered initial point; printed: tuning time (includes compilation), time of
the meeting-time run, and quantiles 50/90/99/100% of tau - L.

Run from the repository root::

    PYTHONPATH=$PWD .venv/bin/python docs/benchmarks/bench_coupling.py
"""

from __future__ import annotations

import time

import numpy as np

import pymc_manidp as pmd
from pymc_manidp import mcmc


def cases():
    rng = np.random.default_rng(0)
    S = pmd.Sphere(dim=2)
    north = np.array([0.0, 0.0, 1.0])
    data = S.exp(north, np.concatenate([rng.normal(size=(50, 2)) * 0.1, np.zeros((50, 1))], 1))
    yield "KNG S2, n=50", pmd.KNGMechanism(S, epsilon=1.0, center=north, radius=np.pi / 8), data
    rng = np.random.default_rng(0)  # each target its own stream
    P = pmd.SPD(k=2)
    a = rng.normal(size=(50, 2, 2)) * 0.2
    data = P.exp(np.eye(2), a + np.swapaxes(a, 1, 2))
    yield (
        "Laplace SPD(2), n=50",
        pmd.LaplaceMechanism(P, epsilon=1.0, center=np.eye(2), radius=1.5),
        data,
    )
    rng = np.random.default_rng(0)
    K = pmd.KendallShape(k_landmarks=8)
    angles = np.arange(8) * 2 * np.pi / 8
    base = np.stack([np.cos(angles), 0.6 * np.sin(angles)], axis=1)
    data = base + rng.normal(size=(200, 8, 2)) * 0.01
    mech = pmd.LaplaceMechanism(K, epsilon=1.0, center=K.validate(base), radius=0.2)
    yield "Laplace Kendall(8), n=200", mech, data


def main():
    for label, mech, data in cases():
        target = mcmc.BatchTarget(mech.model(data))
        for kind in ("rwmh", "hmc"):
            t0 = time.perf_counter()
            kernel = mcmc.tune_kernel(target, kind, random_seed=1)
            t_tune = time.perf_counter() - t0
            t0 = time.perf_counter()
            tau = mcmc.meeting_times(target, kernel, lag=100, reps=100, random_seed=2)
            t_meet = time.perf_counter() - t0
            q = np.percentile(tau - 100, [50, 90, 99, 100])
            print(
                f"{label:<27} dim {target.dim:>2} {kind:<4} tune {t_tune:6.1f} s  "
                f"meet {t_meet:5.2f} s  tau-L 50/90/99/100%: {q.round(1).tolist()}"
            )


if __name__ == "__main__":
    main()
