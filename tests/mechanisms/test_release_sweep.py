"""No record inside the public ball can make a release fail (issue 43 item 5).

Every shipped manifold (``geometry.MANIFOLD_CLASSES``, each at its ``audit_space()``
instance and center) x mechanism (Laplace, KNG on the mean, KNG on the median) x the
exact sampler, at radii ``r*(1 - 1e-9)``, ``r* - 1 ulp`` and ``r* - 2 ulp`` (compact
spaces: ``r*`` finite; SO(3), whose cut locus refuses those balls, its largest supported
radius) or 1 and the largest supported radius (non-compact: found by bisection on the
constructor and ``calibrate(n)``, which refuse from public facts), ε from 1e-6 to 1e6, and
the worst-placed records inside the ball: on its edge in random directions, at opposite
edges, all at one edge point, all at the center. The contract (docs/architecture.md,
privacy rules): each release either succeeds, finite and inside the ball, or is refused
before its charge (the budget unchanged). One release of n = 6 records per cell; the
default run takes ε in {1e-6, 1, 1e6}, the ``slow`` one adds 1e-3 and 1e3.

A failing cell is listed by the assertion (manifold, mechanism, radius, ε, placement,
the error): nothing is skipped or marked expected to fail.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

import pymc_manidp as pmd
from pymc_manidp.geometry import MANIFOLD_CLASSES

N = 6
PLACEMENTS = ("edge", "opposite", "one point", "center")
MECHANISMS = {
    "laplace": lambda M, c, r, e: pmd.LaplaceMechanism(M, epsilon=e, center=c, radius=r),
    "kng-mean": lambda M, c, r, e: pmd.KNGMechanism(M, epsilon=e, center=c, radius=r),
    "kng-median": lambda M, c, r, e: pmd.KNGMechanism(
        M, epsilon=e, center=c, radius=r, statistic="median"
    ),
}


def _largest_supported(make, M, center, eps, lo=1.0, hi=1e3):
    """The largest radius in ``[lo, hi]`` that the constructor and ``calibrate(N)``
    accept (bisection; ``lo`` if none is)."""
    for _ in range(40):
        mid = math.sqrt(lo * hi)
        try:
            make(M, center, mid, eps).calibrate(N)
            lo = mid
        except ValueError:
            hi = mid
    return lo


def _radii(M, center):
    rs = M.max_radius
    if np.isfinite(rs):
        try:
            pmd.DataDomain(M, center, rs * (1 - 1e-9))
        except ValueError:
            # the ball is refused before r* (SO(3): its cut locus at pi comes before
            # its r* = pi/2 allows 2r): the largest radius the space supports instead
            return {"largest supported": None}
        below = math.nextafter(rs, 0.0)
        return {
            "r*(1-1e-9)": rs * (1 - 1e-9),
            "r*-1ulp": below,
            "r*-2ulp": math.nextafter(below, 0.0),
        }
    return {"r=1": 1.0, "largest supported": None}


def _records(M, center, r, placement, rng):
    """``N`` records inside ``B_r(center)``: a hair inside the edge (the data check
    must accept them; a record refused as outside is the user's, not a failure)."""
    u = rng.normal(size=(N, M.dim))
    u /= np.linalg.norm(u, axis=1, keepdims=True)
    t = r * (1 - 1e-12)
    if placement == "edge":
        coords = t * u
    elif placement == "opposite":
        coords = t * np.array([u[0] if i % 2 else -u[0] for i in range(N)])
    elif placement == "one point":
        coords = t * np.repeat(u[:1], N, axis=0)
    else:
        coords = np.zeros((N, M.dim))
    return M.validate(M.exp_coords(center, coords))


def _sweep(cls, mechanism, epsilons):
    space = cls.audit_space()
    if space is None:  # a space without an audit instance (Euclidean): its origin
        M = cls.from_record_shape((2,))
        M, center = M, M.origin
    else:
        M, center = space[0], space[1]
    make = MECHANISMS[mechanism]
    failures, tried = [], 0
    rs = M.max_radius
    span = (1e-3 * rs, rs) if np.isfinite(rs) else (1.0, 1e3)
    for rname, radius in _radii(M, center).items():
        for eps in epsilons:
            r = _largest_supported(make, M, center, eps, *span) if radius is None else radius
            try:
                mech = make(M, center, r, eps)
            except ValueError:
                continue  # refused by the constructor: before anything
            for placement in PLACEMENTS:
                try:
                    x = _records(M, center, r, placement, np.random.default_rng(0))
                    mech.domain.check(x)
                except ValueError:
                    continue  # unrepresentable or outside at working precision: no data
                tried += 1
                budget = pmd.PrivacyBudget(1e7)
                cell = (str(M), mechanism, rname, eps, placement)
                try:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        rel = mech.release(x, random_seed=1, budget=budget)
                except Exception as err:  # every failure is a finding
                    if budget.spent.epsilon != 0:
                        failures.append((*cell, f"{type(err).__name__}: {str(err)[:160]}"))
                    continue
                value = np.asarray(rel.value, float)
                inside = not mech.restricted or mech.domain.distances(value[None])[0] <= r * (
                    1 + 1e-9
                )
                if not (np.all(np.isfinite(value)) and inside):
                    failures.append((*cell, "released value not finite or outside the ball"))
    return failures, tried


CELLS = [(cls, m) for cls in sorted(MANIFOLD_CLASSES.values(), key=lambda c: c.__name__)
         for m in MECHANISMS]  # fmt: skip


@pytest.mark.parametrize(("cls", "mechanism"), CELLS, ids=[f"{c.__name__}-{m}" for c, m in CELLS])
def test_release_succeeds_or_is_refused_before_the_charge(cls, mechanism):
    failures, tried = _sweep(cls, mechanism, (1e-6, 1.0, 1e6))
    assert tried > 0
    assert not failures, "\n".join(map(str, failures))


@pytest.mark.slow
@pytest.mark.parametrize(("cls", "mechanism"), CELLS, ids=[f"{c.__name__}-{m}" for c, m in CELLS])
def test_release_sweep_more_epsilons(cls, mechanism):
    failures, _ = _sweep(cls, mechanism, (1e-3, 1e3))
    assert not failures, "\n".join(map(str, failures))
