"""The largest n ε the exact median's proved failure bound covers (docs/exact.md table).

For each shipped space at its largest radius the median supports, the largest ``n ε``
whose proved chance of giving up (``laws.median_floor.median_failure_bound``) is at
most 2^-64, with the default cap ``median_max_attempts(n)`` for n >= 10^4 (10^6),
n = 10^3 (10^7) and n <= 100 (10^8); beside it the n ε of the measured floor
(``laws.exact_range.median_sigma_floor``, the ``median_floor="measured"`` opt-in).
Public numbers only: no data, no sampling (a second on one core).

Run:  PYTHONPATH=<checkout> .venv/bin/python docs/benchmarks/median_floor_table.py
"""

from __future__ import annotations

import math

import numpy as np

import pymc_manidp as pmd
from pymc_manidp.laws.exact_range import median_sigma_floor
from pymc_manidp.laws.median_floor import median_largest_n_epsilon, median_max_attempts
from pymc_manidp.mechanisms.kng import MEDIAN_GROWTH_LIMIT


def _center(M):
    c = getattr(M, "origin", None)
    if c is not None:
        return c
    if isinstance(M, pmd.KendallShape):
        k = M.k_landmarks
        ring = [[np.cos(2 * np.pi * j / k), np.sin(2 * np.pi * j / k)] for j in range(k)]
        return M.validate(np.array(ring))
    if isinstance(M, (pmd.Rotations, pmd.SPD)):
        return np.eye(M.point_shape[-1])
    x = np.zeros(M.point_shape)
    x.flat[-1] = 1.0
    return M.validate(x)


def _largest_ball(M):
    """The public ball of the largest radius the exact median supports on ``M``."""
    c, rs = _center(M), float(M.max_radius)
    if np.isfinite(rs):
        try:
            return pmd.DataDomain(M, c, rs * (1 - 1e-9))
        except ValueError:  # SO(3): its cut locus comes first
            return pmd.DataDomain(M, c, 0.5 * M.injectivity_radius - float(M.log_cut_margin))
    g = float(M.log_volume_growth)
    return pmd.DataDomain(M, c, MEDIAN_GROWTH_LIMIT / g * (1 - 1e-12) if g > 0 else 1.0)


SPACES = [
    ("S²", pmd.Sphere(dim=2)),
    ("Kendall(3)", pmd.KendallShape(k_landmarks=3)),
    ("H²", pmd.Hyperbolic(dim=2)),
    ("R²", pmd.Euclidean(dim=2)),
    ("SO(3)", pmd.Rotations()),
    ("S³", pmd.Sphere(dim=3)),
    ("R³", pmd.Euclidean(dim=3)),
    ("H³", pmd.Hyperbolic(dim=3)),
    ("SPD(2)", pmd.SPD(k=2)),
    ("Kendall(4)", pmd.KendallShape(k_landmarks=4)),
    ("Kendall(5)", pmd.KendallShape(k_landmarks=5)),
    ("S⁵", pmd.Sphere(dim=5)),
    ("SPD(3)", pmd.SPD(k=3)),
    ("S⁷", pmd.Sphere(dim=7)),
]


def main():
    print("| space (radius) | measured: n ε <= | proved, n >= 10^4 | n = 10^3 | n <= 100 |")
    print("|---|---|---|---|---|")
    for label, M in SPACES:
        dom = _largest_ball(M)
        floor = median_sigma_floor(M)
        measured = "refused" if not math.isfinite(floor) else f"{4 / floor:,.0f}"
        row = [median_largest_n_epsilon(dom, median_max_attempts(n)) for n in (10**4, 10**3, 100)]
        cells = " | ".join(f"{x:.1f}" for x in row)
        print(f"| {label} ({dom.radius:.4g}) | {measured} | {cells} |")


if __name__ == "__main__":
    main()
