"""The two-stage tangent release against the one-stage at the center, on H^2 (issue 39).

Data: n records within 0.05 r of a point at distance 0.8 r from the center m0 (the
mean far off-centre, where curvature amplifies the tangent noise), epsilon = 1,
delta = 1e-6. Prints the mean geodesic error rho(y, x_bar) over `reps` releases for
the one-stage TangentGaussianMechanism at m0 and the two-stage one at several splits.
Public synthetic data only; run: python docs/benchmarks/two_stage_split.py
"""

from __future__ import annotations

import sys

import numpy as np

import pymc_manidp as pmd
from pymc_manidp.mechanisms.base import converged_mean


def main(reps: int = 200) -> None:
    H = pmd.Hyperbolic(dim=2)
    m0 = np.array([1.0, 0.0, 0.0])
    print("r    n     one-stage  " + "  ".join(f"split={f:<4}" for f in SPLITS))
    for r in (0.5, 1.5, 3.0):
        for n in (100, 1000, 10000):
            rng = np.random.default_rng(0)
            target = H.exp_coords(m0, np.array([0.8 * r, 0.0]))
            local = rng.uniform(-0.05 * r, 0.05 * r, size=(n, 2))
            data = H.exp_coords(target, local)
            kw = dict(epsilon=1.0, delta=1e-6, center=m0, radius=r)
            one = pmd.TangentGaussianMechanism(H, **kw)
            mean = converged_mean(H, one.domain, one.domain.check(data), one.grad_tol)
            row = [_error(one, data, mean, reps)]
            for f in SPLITS:
                row.append(_error(pmd.TwoStageTangentMechanism(H, split=f, **kw), data, mean, reps))
            print(f"{r:<4} {n:<5} " + "  ".join(f"{e:10.4g}" for e in row))


SPLITS = (0.05, 0.1, 0.2, 0.3, 0.5)


def _error(mech, data, mean, reps):
    H = mech.manifold
    vals = mech.release_many([data] * reps, random_seed=list(range(reps))).values
    return float(np.mean([H.dist(v, mean) for v in vals]))


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 200)
