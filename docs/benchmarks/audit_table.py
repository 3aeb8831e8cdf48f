"""Quadrature privacy audit of the mechanisms: the table in docs/audit.md.

For each manifold, mechanism and budget: the worst privacy loss sup|log f_D - log f_D'|
found over the candidate neighbouring pairs (n = 10), its ratio to eps, the grid error,
and the break factor f*: the smallest factor dividing sigma for which the audit's loss
exceeds eps (bisection on [1, 4] to +-0.02, grid at half resolution).

Run:  .venv/bin/python docs/benchmarks/audit_table.py  (about 10 minutes on 2 cores)
"""

from __future__ import annotations

import sys
import time

import numpy as np

import pymc_manidp as pmd
from pymc_manidp.privacy.audit import quadrature_audit

N = 10
SETTINGS = [
    ("S^2, r = pi/8", pmd.Sphere(dim=2), np.array([0.0, 0, 1]), np.pi / 8, 400),
    (
        "Kendall(3), r = pi/16",
        pmd.KendallShape(k_landmarks=3),
        np.array([[0.0, 0], [1, 0], [0, 1]]),
        np.pi / 16,
        400,
    ),
    ("SPD(2), r = 1", pmd.SPD(k=2), np.eye(2), 1.0, 60),
]
KINDS = ["Laplace", "Laplace (ball)", "KNG"]


def make(kind, M, c, r, eps, factor=1.0):
    base = pmd.KNGMechanism if kind == "KNG" else pmd.LaplaceMechanism
    kw = {"restrict": True} if kind == "Laplace (ball)" else {}

    class Mech(base):
        def scale(self, n):
            return super().scale(n) / factor

    return Mech(M, epsilon=eps, center=c, radius=r, **kw)


def break_factor(kind, M, c, r, eps, res):
    lo, hi = 1.0, 4.0
    if quadrature_audit(make(kind, M, c, r, eps, hi), n=N, resolution=res).worst_log_ratio <= eps:
        return float("nan")
    while hi - lo > 0.02:
        mid = 0.5 * (lo + hi)
        loss = quadrature_audit(make(kind, M, c, r, eps, mid), n=N, resolution=res).worst_log_ratio
        lo, hi = (lo, mid) if loss > eps else (mid, hi)
    return hi


def main():
    print(
        "| manifold | mechanism | eps | sigma | worst loss | ratio to eps | grid error "
        "| worst pair | f* |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for name, M, c, r, res in SETTINGS:
        for kind in KINDS:
            if kind == "Laplace" and isinstance(M, pmd.SPD):
                continue  # non-compact: the unrestricted law needs a truncated grid
            for eps in (0.1, 1.0, 5.0):
                t0 = time.process_time()
                mech = make(kind, M, c, r, eps)
                a = quadrature_audit(mech, n=N, resolution=res)
                f = break_factor(kind, M, c, r, eps, res // 2)
                print(
                    f"| {name} | {kind} | {eps:g} | {mech.scale(N):.4g} | "
                    f"{a.worst_log_ratio:.4g} | {a.ratio:.3f} | {a.grid_error:.1e} | "
                    f"{a.pair.label} | {f:.2f} |",
                    flush=True,
                )
                print(f"  ({time.process_time() - t0:.0f} s CPU)", file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
