r"""The Lipschitz constant of ``Log_p`` on a ball: the tangent mechanisms' sensitivity.

A tangent mechanism releases the mean's coordinates ``E_p^T Log_p(x_bar)`` at a public
point ``p``; their ℓ2 sensitivity is at most ``L * Delta``, ``Delta`` the geodesic
sensitivity of the mean and ``L`` a Lipschitz constant of ``Log_p`` on a ball
``B_R(p)`` holding the public ball ``B_r(m0)`` (``R = r + rho(p, m0)``):

.. math:: L = \frac{\sqrt{\kappa} R}{\sin(\sqrt{\kappa} R)}\ (\kappa > 0),\qquad
          L = 1\ (\kappa \le 0),

``kappa`` the manifold's upper curvature bound, valid for ``R < min(inj,
pi/(2 sqrt(kappa)))``. docs/tangent.md proves both (CAT(0) comparison and Rauch's
theorem) with their premises.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["REACH_SLACK", "log_lipschitz", "tangent_reach", "tangent_reach_limit"]

#: The absolute slack added to ``rho(p, m0)`` when ``p`` is not the center: distances
#: computed through ``arccos`` lose up to ~1e-8 near 0 (Kendall, the sphere), so the
#: ball that holds the means is taken a little larger than computed.
REACH_SLACK = 1e-7


def tangent_reach_limit(manifold) -> float:
    """The largest ``R`` (exclusive) Lemma 2 of docs/tangent.md admits:
    ``min(inj, pi/(2 sqrt(kappa_max)))``, infinite on Hadamard spaces."""
    kappa = float(manifold.curvature_bounds[1])
    limit = float(manifold.injectivity_radius)
    if kappa > 0:
        limit = min(limit, math.pi / (2.0 * math.sqrt(kappa)))
    return limit


def tangent_reach(manifold, center, radius, tangent_point) -> float:
    """``R = r + rho(p, m0)`` (public), widened by :data:`REACH_SLACK` when ``p``
    is not exactly the center."""
    center = np.asarray(center, dtype=float)
    p = np.asarray(tangent_point, dtype=float)
    if np.array_equal(p, center):
        return float(radius)
    return float(radius) + float(manifold.dist(p, center)) + REACH_SLACK


def log_lipschitz(manifold, reach: float) -> float:
    r"""A Lipschitz constant of ``Log_p`` on the geodesically convex sets in
    ``B_R(p)``, ``R = reach``, for every ``p``.

    Parameters
    ----------
    manifold : Manifold
        Its ``curvature_bounds[1]`` (κ) and ``injectivity_radius`` are the premises.
    reach : float
        ``R > 0``.

    Returns
    -------
    float
        ``sqrt(kappa) R / sin(sqrt(kappa) R)`` (rounded up) where κ > 0, else 1.

    Raises
    ------
    ValueError
        ``R`` at or beyond ``min(inj, pi/(2 sqrt(kappa)))``: the message says how far
        the tangent point may be from the center.

    Examples
    --------
    >>> import numpy as np
    >>> import pymc_manidp as pmd
    >>> round(log_lipschitz(pmd.Sphere(dim=2), np.pi / 4), 5)  # (pi/4)/sin(pi/4)
    1.11072
    >>> log_lipschitz(pmd.Hyperbolic(dim=2), 50.0)
    1.0
    """
    reach = float(reach)
    if not (math.isfinite(reach) and reach > 0):
        raise ValueError(f"the reach R must be a finite number > 0, got {reach!r}")
    limit = tangent_reach_limit(manifold)
    if not reach < limit:
        raise ValueError(
            f"on {manifold} the tangent point's ball B_R(p), R = radius + rho(p, center) = "
            f"{reach:.6g}, reaches {limit:.6g} = min(injectivity radius, pi/(2 sqrt(kappa_max))) "
            "or beyond: Log_p is not smooth (or not Lipschitz with a finite bound) on it "
            "(docs/tangent.md, Lemma 2). Use a tangent point closer to the center "
            f"(rho(p, center) < {limit:.6g} - radius), or the center itself (the default)"
        )
    kappa = float(manifold.curvature_bounds[1])
    if kappa <= 0:
        return 1.0
    x = math.sqrt(kappa) * reach
    # one ulp up per operation keeps the bound above the exact x/sin(x)
    return float(np.nextafter(x / math.sin(x), math.inf) * (1.0 + 4 * np.finfo(float).eps))
