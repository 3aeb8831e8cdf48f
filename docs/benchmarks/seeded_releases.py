"""Seeded exact KNG releases of two checkouts compared bit for bit (issue 26).

Releases ``mech.release(data, random_seed=s)`` for 150 seeds (40 at n = 5,000) in 13
configurations: S² at n = 50, 1,000, 5,000 and ε = 0.1, 1, 20 (ball B_{π/8}(north)); S⁴
(ball of radius 0.6, n = 300); S² with a ball of radius 0.75 (n = 200, ε = 0.5); SPD(2)
(B_{1.5}(I), n = 300); R² (n = 100). ``save`` writes the values and the proposal counts;
``compare`` recomputes them and says which configurations differ.

Run:  PYTHONPATH=<checkout before> .venv/bin/python docs/benchmarks/seeded_releases.py save FILE.npz
      PYTHONPATH=$PWD .venv/bin/python docs/benchmarks/seeded_releases.py compare FILE.npz
      (about 30 s each)
"""

from __future__ import annotations

import sys
import warnings

import numpy as np

import pymc_manidp as pmd
from pymc_manidp.datasets import sphere_cap, wishart_in_ball


def configurations():
    """(name, mechanism, data) of every configuration."""
    S = pmd.Sphere(dim=2)
    north = [0, 0, 1.0]
    out = []
    for n in (1000, 50, 5000):
        for eps in (1.0, 0.1, 20.0):
            mech = pmd.KNGMechanism(S, epsilon=eps, center=north, radius=np.pi / 8)
            out.append(
                (f"S2 n={n} eps={eps}", mech, sphere_cap(n, radius=np.pi / 8, random_seed=n))
            )
    S4, c4 = pmd.Sphere(dim=4), np.array([0, 0, 0, 0, 1.0])
    out.append(
        (
            "S4 n=300",
            pmd.KNGMechanism(S4, epsilon=1.0, center=c4, radius=0.6),
            sphere_cap(300, radius=0.6, center=c4, sphere=S4, random_seed=3),
        )
    )
    out.append(
        (
            "S2 r=0.75 n=200",
            pmd.KNGMechanism(S, epsilon=0.5, center=north, radius=0.75),
            sphere_cap(200, radius=0.75, random_seed=4),
        )
    )
    P = pmd.SPD(k=2)
    out.append(
        (
            "SPD2",
            pmd.KNGMechanism(P, epsilon=1.0, center=np.eye(2), radius=1.5),
            wishart_in_ball(300, k=2, df=2.0, radius=1.5, random_seed=0),
        )
    )
    E = pmd.Euclidean(dim=2)
    out.append(
        (
            "E2",
            pmd.KNGMechanism(E, epsilon=1.0, center=[0, 0.0], radius=1.0),
            np.random.default_rng(0).uniform(-0.5, 0.5, (100, 2)),
        )
    )
    return out


def releases():
    """``{name + " v": values, name + " p": proposal counts}`` of every configuration."""
    out = {}
    for name, mech, data in configurations():
        seeds = range(40 if "n=5000" in name else 150)
        rels = [mech.release(data, random_seed=s) for s in seeds]
        out[name + " v"] = np.array([np.asarray(r.value) for r in rels])
        out[name + " p"] = np.array([r.sampler_info["proposals"] for r in rels])
    return out


def main():
    warnings.filterwarnings("ignore")
    mode, path = sys.argv[1], sys.argv[2]
    got = releases()
    if mode == "save":
        np.savez(path, **got)
        print(f"saved {sum(len(v) for k, v in got.items() if k.endswith(' p'))} releases")
        return
    ref = np.load(path)
    differ = [k for k in got if not np.array_equal(ref[k], got[k])]
    total = sum(len(v) for k, v in got.items() if k.endswith(" p"))
    print(f"{total} releases; " + (f"differ: {differ}" if differ else "all bit for bit equal"))


if __name__ == "__main__":
    main()
