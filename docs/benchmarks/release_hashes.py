"""Hashes of seeded releases on every shipped manifold and mechanism (issue 37).

A refactor must leave every seeded value bit for bit unchanged: run this on the
checkout before and after and compare the two outputs line by line (``diff``). Each
line is ``<case>: <sha256 prefix>`` of the released values, the recorded σ, Δ and n and
the rejection statistics (or of the refusal's type and message); the cases cover the
exact samplers of the Laplace (unrestricted and restricted), KNG on the mean and on the
median and the Euclidean baselines on the six shipped manifolds, plus the paths a
refactor of the data check touches: NumPy data checked once and passed on, Dask data
read in passes, clipped data, ``sample``, ``release_many``, ``frechet_mean`` and
``frechet_median`` of checked data, and two short MCMC runs (Metropolis, PyMC).

Run:  PYTHONPATH=<checkout> .venv/bin/python docs/benchmarks/release_hashes.py [--no-mcmc]
      (about a minute without MCMC on one core)
"""

# ruff: noqa: B023 (each lambda is called at once by _try, inside its loop iteration)
from __future__ import annotations

import hashlib
import sys
import warnings

import numpy as np

import pymc_manidp as pmd
from pymc_manidp.mcmc import MCMCSettings


def _digest(obj) -> str:
    h = hashlib.sha256()

    def feed(x):
        if isinstance(x, dict):
            for k in sorted(x):
                h.update(str(k).encode())
                feed(x[k])
        elif isinstance(x, (list, tuple)):
            h.update(b"[")
            for v in x:
                feed(v)
            h.update(b"]")
        elif isinstance(x, np.ndarray) or isinstance(x, (float, np.floating)):
            a = np.ascontiguousarray(np.asarray(x, dtype=float))
            h.update(str(a.shape).encode())
            h.update(a.tobytes())
        else:
            h.update(repr(x).encode())

    feed(obj)
    return h.hexdigest()[:16]


def spaces():
    """(label, manifold, center, radius) of each shipped manifold."""
    return [
        ("Sphere2", pmd.Sphere(dim=2), np.array([0, 0, 1.0]), 0.6),
        ("SPD2", pmd.SPD(k=2), np.eye(2), 1.2),
        ("Kendall4", pmd.KendallShape(k_landmarks=4), None, 0.3),
        ("Euclidean2", pmd.Euclidean(dim=2), np.zeros(2), 1.0),
        ("Rotations", pmd.Rotations(), np.eye(3), 0.9),
        ("Hyperbolic2", pmd.Hyperbolic(dim=2), np.array([1.0, 0, 0]), 1.0),
    ]


def _data(M, center, radius, n, seed, spread=0.5):
    """``n`` points inside ``B_{spread * radius}(center)`` (seeded)."""
    rng = np.random.default_rng(seed)
    c = rng.normal(size=(n, M.dim))
    c *= (spread * radius * rng.uniform(size=(n, 1)) ** (1 / M.dim)) / np.linalg.norm(
        c, axis=1, keepdims=True
    )
    return M.exp_coords(center, c)


def _kendall_center(M):
    z = np.array([[1.0, 0], [0, 1.0], [-1.0, 0], [0, -1.0]])
    return M.validate(z)


def _record(rel):
    return {
        "value": np.asarray(rel.value),
        "sigma": rel.sigma,
        "sensitivity": rel.sensitivity,
        "n": rel.n,
        "info": {k: v for k, v in (rel.sampler_info or {}).items() if _stable(v)},
    }


def _stable(v):
    return isinstance(v, (int, float, np.integer, np.floating, np.ndarray, str, bool))


def mechanisms(M, center, radius):
    out = [
        ("Laplace", lambda: pmd.LaplaceMechanism(M, epsilon=1.0, center=center, radius=radius)),
        (
            "Laplace-restricted",
            lambda: pmd.LaplaceMechanism(
                M, epsilon=1.0, center=center, radius=radius, restrict=True
            ),
        ),
        ("KNG-mean", lambda: pmd.KNGMechanism(M, epsilon=1.0, center=center, radius=radius)),
        (
            "KNG-median",
            lambda: pmd.KNGMechanism(
                M, epsilon=1.0, center=center, radius=radius, statistic="median"
            ),
        ),
    ]
    from pymc_manidp.mechanisms import baselines

    for name in ("EuclideanLaplace", "ProjectedLaplace", "LandmarkLaplace"):
        cls = getattr(baselines, name)
        out.append((name, lambda cls=cls: cls(M, epsilon=1.0, center=center, radius=radius)))
    return out


def _try(fn):
    try:
        return fn()
    except Exception as err:  # a refusal is a behaviour too: hash its type and message
        return ("refused", type(err).__name__, str(err))


def cases(mcmc=True):
    import dask.array as da

    for label, M, center, radius in spaces():
        if center is None:
            center = _kendall_center(M)
        data = _data(M, center, radius, 40, seed=1)
        far = _data(M, center, radius, 30, seed=2, spread=1.6)  # some outside the ball
        for mname, make in mechanisms(M, center, radius):
            mech = _try(make)
            if isinstance(mech, tuple):
                yield f"{label} {mname} construct", mech
                continue
            yield (
                f"{label} {mname} release",
                _try(lambda: [_record(mech.release(data, random_seed=s)) for s in range(5)]),
            )
            yield (
                f"{label} {mname} release clip",
                _try(lambda: _record(mech.release(far, random_seed=7, clip=True))),
            )
            yield (
                f"{label} {mname} checked",
                _try(lambda: _record(mech.release(mech.domain.check(data), random_seed=8))),
            )
            yield (
                f"{label} {mname} sample",
                _try(lambda: mech.sample(data, 4, random_seed=9)),
            )
            yield (
                f"{label} {mname} release_many",
                _try(
                    lambda: [
                        _record(r)
                        for r in mech.release_many(np.stack([data, data[::-1]]), random_seed=10)
                    ]
                ),
            )
            if mname in ("KNG-mean", "Laplace", "KNG-median"):
                lazy = da.from_array(np.asarray(data), chunks=(15, *M.point_shape))
                yield (
                    f"{label} {mname} dask",
                    _try(lambda: _record(mech.release(lazy, random_seed=11))),
                )
        dom = pmd.DataDomain(M, center, radius)
        for what, fn in (
            ("frechet_mean", lambda: pmd.frechet_mean(M, data).mean),
            ("frechet_mean checked", lambda: pmd.frechet_mean(M, dom.check(data)).mean),
            ("frechet_mean clipped", lambda: pmd.frechet_mean(M, dom.check(far, clip=True)).mean),
            ("frechet_median checked", lambda: pmd.frechet_median(M, dom.check(data)).median),
            ("check clip", lambda: np.asarray(dom.check(far, clip=True))),
        ):
            yield f"{label} {what}", _try(fn)
    if mcmc:
        S, north = pmd.Sphere(dim=2), np.array([0, 0, 1.0])
        data = _data(S, north, 0.6, 30, seed=3)
        for mname, cls in (("Laplace", pmd.LaplaceMechanism), ("KNG-mean", pmd.KNGMechanism)):
            mech = cls(S, epsilon=1.0, center=north, radius=0.6)
            yield (
                f"Sphere2 {mname} metropolis",
                _try(
                    lambda: np.asarray(
                        mech.release(
                            data,
                            sampler="metropolis",
                            random_seed=12,
                            settings=MCMCSettings(draws=300, tune=300, chains=2),
                            skip_diagnostics=True,
                        ).value
                    )
                ),
            )


def main():
    warnings.filterwarnings("ignore")
    mcmc = "--no-mcmc" not in sys.argv
    for name, value in cases(mcmc):
        tag = " (refused)" if isinstance(value, tuple) and value[:1] == ("refused",) else ""
        print(f"{name}: {_digest(value)}{tag}", flush=True)


if __name__ == "__main__":
    main()
