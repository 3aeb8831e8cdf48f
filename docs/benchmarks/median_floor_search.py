"""Adversarial search: worst placements of the records for the exact median sampler.

Measures the acceptance of ``sample_kng_median`` (10 draws, pilot included, cap
20,000 a draw: a run that fails accepted less than about 5e-5) for each space at its
largest supported radius, each placement of 40 records, each box budget (n <= 40,
n = 1,000, n >= 2e4: ``_CELL_LOG_MAPS`` set so that the budget is the one of that n;
the acceptance depends on n only through it) and each sigma. One JSON line per run.

The floors of ``laws.exact_range.median_sigma_floor`` (docs/exact.md, "The median's
supported sigma") were measured with, e.g.::

    PYTHONPATH=. python docs/benchmarks/median_floor_search.py out.jsonl 0.004 \
        "n<=40,n>=2e4" S2,K3,H2,R2
    PLACES="opposite;half;..." PYTHONPATH=. python docs/benchmarks/median_floor_search.py \
        out.jsonl 0.04,0.1 "n>=2e4,n=1000,n<=40" SO3,S3,R3,H3,SPD2,K4,S5,K5,S6,SPD3

usage: median_floor_search.py OUT SIGMAS BUDGETS [SPACES]; PLACES=name;name filters.
"""

import json
import os
import sys
import time
import warnings

import numpy as np

import pymc_manidp as pmd
from pymc_manidp.laws import exact
from pymc_manidp.laws.exact import median_cells
from pymc_manidp.mechanisms.kng import MEDIAN_GROWTH_LIMIT

NC = 40


def center_of(M):
    sp = type(M).audit_space()
    if sp is not None and type(sp[0]) is type(M) and sp[0].dim == M.dim:
        return np.asarray(sp[1], float)
    if isinstance(M, pmd.Sphere):
        e = np.zeros(M.dim + 1)
        e[-1] = 1.0
        return e
    if isinstance(M, pmd.KendallShape):
        return M.generic_point
    return M.origin


def radii(M, c):
    rs = float(M.max_radius)
    if np.isfinite(rs):
        try:
            pmd.DataDomain(M, c, rs * (1 - 1e-9))
            return [rs * (1 - 1e-9)]
        except ValueError:
            return [0.5 * M.injectivity_radius - float(M.log_cut_margin)]
    G = float(M.log_volume_growth)
    if G > 0:
        return [MEDIAN_GROWTH_LIMIT / G * (1 - 1e-12)]
    return [1.0, 1000.0]


def placements(d, r, rng):
    t = r * (1 - 1e-12)
    e1 = np.zeros(d)
    e1[0] = 1

    def sym_edge(k):
        u = rng.normal(size=((k + 1) // 2, d))
        u /= np.linalg.norm(u, axis=1, keepdims=True)
        return (t * np.concatenate([u, -u]))[:k]

    out = {}
    out["one point"] = np.repeat(t * e1[None], NC, 0)
    out["opposite"] = t * np.array([e1 if i % 2 else -e1 for i in range(NC)])
    out["half"] = np.concatenate([np.repeat(t * e1[None], NC // 2, 0), np.zeros((NC // 2, d))])
    out["edge"] = sym_edge(NC)
    out["center"] = np.zeros((NC, d))
    out["collinear"] = np.linspace(-t, t, NC)[:, None] * e1
    for w in (0.1, 0.3, 0.5, 0.8):
        m = round(w * NC)
        for s in (1e-9, 1e-5, 1e-2):
            out[f"cluster w={w} s={s:g}"] = np.concatenate(
                [s * rng.normal(size=(m, d)), sym_edge(NC - m)]
            )
    for s in (1e-9, 1e-4):
        out[f"two clusters s={s:g}"] = np.concatenate(
            [
                t * e1 + s * rng.normal(size=(NC // 2, d)),
                -t * e1 + s * rng.normal(size=(NC // 2, d)),
            ]
        )
        m = NC // 4
        out[f"edge cluster+opposite s={s:g}"] = np.concatenate(
            [
                t * e1 * (1 - 1e-6) + s * rng.normal(size=(m, d)),
                -t * e1 + 0 * rng.normal(size=(NC - m, d)),
            ]
        )
        out[f"cluster mid + edge s={s:g}"] = np.concatenate(
            [0.5 * t * e1 + s * rng.normal(size=(NC // 2, d)), sym_edge(NC // 2)]
        )
    return out


SPACES = {
    "S2": lambda: pmd.Sphere(dim=2),
    "S5": lambda: pmd.Sphere(dim=5),
    "K3": lambda: pmd.KendallShape(k_landmarks=3),
    "K4": lambda: pmd.KendallShape(k_landmarks=4),
    "SO3": lambda: pmd.Rotations(),
    "H2": lambda: pmd.Hyperbolic(dim=2),
    "H3": lambda: pmd.Hyperbolic(dim=3),
    "SPD2": lambda: pmd.SPD(k=2),
    "SPD3": lambda: pmd.SPD(k=3),
    "K5": lambda: pmd.KendallShape(k_landmarks=5),
    "S3": lambda: pmd.Sphere(dim=3),
    "S6": lambda: pmd.Sphere(dim=6),
    "R2": lambda: pmd.Euclidean(dim=2),
    "R3": lambda: pmd.Euclidean(dim=3),
}
BUDGETS = {"n<=40": None, "n=1000": 5000 * NC, "n>=2e4": 0}


def main():
    out = sys.argv[1]
    sigmas = [float(v) for v in sys.argv[2].split(",")]
    budgets = sys.argv[3].split(",")
    names = sys.argv[4].split(",") if len(sys.argv) > 4 else list(SPACES)
    base = median_cells._CELL_LOG_MAPS
    warnings.simplefilter("ignore")
    for name in names:
        M = SPACES[name]()
        c = center_of(M)
        for r in radii(M, c):
            dom = pmd.DataDomain(M, c, r)
            rng = np.random.default_rng(0)
            keep = os.environ.get("PLACES")
            for pname, coords in placements(M.dim, r, rng).items():
                if keep and pname not in keep.split(";"):
                    continue
                coords = (
                    coords
                    * np.minimum(
                        1.0, r * (1 - 1e-12) / np.maximum(np.linalg.norm(coords, axis=1), 1e-300)
                    )[:, None]
                )
                try:
                    x = dom.check(
                        M.validate(M.exp_coords(np.broadcast_to(c, (NC, *c.shape)), coords))
                    )
                except Exception as e:
                    print(name, pname, "DATA", e, flush=True)
                    continue
                for b in budgets:
                    median_cells._CELL_LOG_MAPS = base if BUDGETS[b] is None else BUDGETS[b]
                    for sigma in sigmas:
                        t0 = time.time()
                        try:
                            o = exact.sample_kng_median(
                                M, x, sigma, 10, rng=1, domain=dom, max_attempts=20_000
                            )
                            acc, env = o.acceptance_rate, o.info["envelope"]
                        except exact.ExactSamplingError as e:
                            acc, env = 0.0, "FAIL " + str(e)[:80]
                        rec = dict(
                            space=name,
                            r=r,
                            placement=pname,
                            budget=b,
                            sigma=sigma,
                            acc=acc,
                            env=env,
                            sec=round(time.time() - t0, 2),
                        )
                        print(json.dumps(rec), flush=True)
                        open(out, "a").write(json.dumps(rec) + "\n")
    median_cells._CELL_LOG_MAPS = base


if __name__ == "__main__":
    main()
