"""Quadrature privacy audit of the mechanisms: the table in docs/audit.md.

For each manifold, mechanism and budget: the worst privacy loss sup|log f_D - log f_D'|
found over the candidate neighbouring pairs (n = 10), its ratio to eps, the grid error,
and the break factor f*: the smallest factor dividing sigma for which the audit's loss
exceeds eps (bisection on [1, 4] to +-0.02, grid at half resolution).

Run:  .venv/bin/python docs/benchmarks/audit_table.py  (about 15 minutes on 2 cores);
``--only Laplace`` (or ``"Laplace (ball)"``, ``KNG``) computes that mechanism's rows only.
The unrestricted Laplace on SPD(2) is normalized out to ``t_max = 3`` from each
density's mode (docs/audit.md: its loss does not depend on ``t_max``).

With ``--sample``: the histogram sample test instead (S^2, r = pi/8, n = 10, eps = 1,
boundary pair, the mechanisms' exact samplers, 2e5 draws, 20 bins, 99% confidence):
the certified lower bound eps_lb for the mechanism and for sigma divided by 1.5, 2, 3, 4.
"""

from __future__ import annotations

import sys
import time

import numpy as np

import pymc_manidp as pmd
from pymc_manidp.privacy.audit import boundary_pair, quadrature_audit, sample_test

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
# truncation of the unrestricted law on the non-compact SPD(2), around each mode
T_MAX = 3.0


def make(kind, M, c, r, eps, factor=1.0):
    base = pmd.KNGMechanism if kind == "KNG" else pmd.LaplaceMechanism
    kw = {"restrict": True} if kind == "Laplace (ball)" else {}

    class Mech(base):
        def sigma(self, n):
            return super().sigma(n) / factor

    return Mech(M, epsilon=eps, center=c, radius=r, **kw)


def t_max(kind, M):
    return T_MAX if kind == "Laplace" and isinstance(M, pmd.SPD) else None


def break_factor(kind, M, c, r, eps, res):
    def loss(factor):
        mech = make(kind, M, c, r, eps, factor)
        return quadrature_audit(mech, n=N, resolution=res, t_max=t_max(kind, M)).worst_log_ratio

    lo, hi = 1.0, 4.0
    if loss(hi) <= eps:
        return float("nan")
    while hi - lo > 0.02:
        mid = 0.5 * (lo + hi)
        lo, hi = (lo, mid) if loss(mid) > eps else (mid, hi)
    return hi


def main(only=None):
    print(
        "| manifold | mechanism | eps | sigma | worst loss | ratio to eps | grid error "
        "| worst pair | f* |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for name, M, c, r, res in SETTINGS:
        for kind in KINDS if only is None else [only]:
            for eps in (0.1, 1.0, 5.0):
                t0 = time.process_time()
                mech = make(kind, M, c, r, eps)
                try:
                    a = quadrature_audit(mech, n=N, resolution=res, t_max=t_max(kind, M))
                except ValueError as err:  # SPD: sigma >= 2/C, no whole-space law
                    if "not normalizable" not in str(err):
                        raise
                    print(
                        f"| {name} | {kind} | {eps:g} | {mech.sensitivity(N) / eps:.4g} | "
                        "no law: sigma >= 2/C | | | | |",
                        flush=True,
                    )
                    continue
                f = break_factor(kind, M, c, r, eps, res // 2)
                print(
                    f"| {name} | {kind} | {eps:g} | {mech.sensitivity(N) / eps:.4g} | "
                    f"{a.worst_log_ratio:.4g} | {a.ratio:.3f} | {a.grid_error:.1e} | "
                    f"{a.pair.label} | {f:.2f} |",
                    flush=True,
                )
                print(f"  ({time.process_time() - t0:.0f} s CPU)", file=sys.stderr, flush=True)


def sample_table():
    M, c, r = SETTINGS[0][1:4]
    factors = (1.0, 1.5, 2.0, 3.0, 4.0)
    print("| mechanism | " + " | ".join(f"sigma / {f:g}" for f in factors) + " |")
    print("|---|" + "---|" * len(factors))
    for kind in KINDS:
        row = []
        for f in factors:
            mech = make(kind, M, c, r, 1.0, f)
            p = boundary_pair(mech.domain, N)
            res = sample_test(mech, p.data, p.neighbour, size=200_000, random_seed=1)
            row.append(f"{res.epsilon_lb:.3f}{'' if res.passed else ' (FAIL)'}")
        print(f"| {kind} | " + " | ".join(row) + " |", flush=True)


if __name__ == "__main__":
    if "--sample" in sys.argv:
        sample_table()
    else:
        main(sys.argv[sys.argv.index("--only") + 1] if "--only" in sys.argv else None)
