r"""Sensitivity bounds, curvature factors, rates and ambient radii.

Curvature factors (``H`` is ``h(r, kappa)`` of the 2021 paper and
``h_max(2r, kappa_max)`` of the 2022 paper: the same number):

.. math:: H = 2r\sqrt{\kappa_{\max}}\cot(2r\sqrt{\kappa_{\max}}) \ (\kappa_{\max} > 0),
          \qquad H_{\min} = 2r\sqrt{|\kappa_{\min}|}\coth(2r\sqrt{|\kappa_{\min}|})
          \ (\kappa_{\min} < 0),

and 1 otherwise. Sensitivities for data in ``B_r(m0)`` with ``r < r*``:

- Laplace on the Fréchet mean (2021, Thm 2): ``Delta = 2r(2 - H) / (n H)``;
- KNG gradient (2022, Thm 2): ``Delta = 2r(2 - H) / n``.

Rates (2021, Thm 1): ``sigma = 2 Delta / eps`` in general; ``sigma = Delta / eps``
only when the normalizing constant of the density does not depend on the footpoint
(Laplace on a homogeneous space, *not* restricted to a ball). Restricting to the
ball (2021, Thm 3) and KNG always make it depend on the footpoint.
"""

from __future__ import annotations

from functools import cache

import numpy as np

from pymc_manidp.geometry.validation import check_positive_int, check_positive_real

__all__ = [
    "ambient_radius_spd",
    "ambient_radius_sphere",
    "curvature_factor",
    "curvature_factor_min",
    "empirical_sphere_log_spread",
    "kng_sensitivity",
    "laplace_sensitivity",
    "rate",
]


def _check_radius(manifold, r):
    r = check_positive_real(r, "radius")
    if r >= manifold.max_radius:
        raise ValueError(
            f"radius {r:.6g} must be below r* = {manifold.max_radius:.6g} of {manifold} "
            "(Assumption 1): the sensitivity bounds do not hold otherwise"
        )
    return r


def curvature_factor(r: float, kappa_max: float) -> float:
    """``H = h_max(2r, kappa_max)``; in ``(0, 1]`` for ``r < r*``."""
    if kappa_max <= 0:
        return 1.0
    s = 2.0 * r * np.sqrt(kappa_max)
    return float(s / np.tan(s))


def curvature_factor_min(r: float, kappa_min: float) -> float:
    """``H_min = h_min(2r, kappa_min)``; ``>= 1`` (2022, Lemma 1)."""
    if kappa_min >= 0:
        return 1.0
    s = 2.0 * r * np.sqrt(-kappa_min)
    return float(s / np.tanh(s))


def laplace_sensitivity(manifold, n: int, r: float) -> float:
    r"""Sensitivity of the Fréchet mean (2021, Theorem 2).

    .. math:: \Delta = \frac{2r(2 - H)}{nH}

    Examples
    --------
    >>> import pymc_manidp as pmd
    >>> laplace_sensitivity(pmd.SPD(k=2), n=10, r=1.5)  # flat or negative: 2r/n
    0.3
    """
    n = check_positive_int(n, "n")
    r = _check_radius(manifold, r)
    h = curvature_factor(r, manifold.curvature_bounds[1])
    return 2.0 * r * (2.0 - h) / (n * h)


def kng_sensitivity(manifold, n: int, r: float) -> float:
    r"""Sensitivity of the KNG gradient (2022, Theorem 2).

    .. math:: \Delta = \frac{2r(2 - H)}{n}
    """
    n = check_positive_int(n, "n")
    r = _check_radius(manifold, r)
    h = curvature_factor(r, manifold.curvature_bounds[1])
    return 2.0 * r * (2.0 - h) / n


def rate(delta: float, epsilon: float, *, footpoint_free_normalizer: bool = False) -> float:
    """Rate ``sigma`` of the mechanism's density from sensitivity and budget.

    ``2 Delta / eps`` unless ``footpoint_free_normalizer`` (then ``Delta / eps``),
    which the caller may claim only for an unrestricted Laplace on a homogeneous space.
    """
    delta = check_positive_real(delta, "sensitivity")
    epsilon = check_positive_real(epsilon, "epsilon")
    return (1.0 if footpoint_free_normalizer else 2.0) * delta / epsilon


def ambient_radius_spd(r: float) -> float:
    """Frobenius radius of the smallest ball around ``I`` containing ``B_r(I)``: ``e^r - 1``.

    2021 supplement, Proposition 1.
    """
    return float(np.expm1(check_positive_real(r, "radius")))


def ambient_radius_sphere(r: float, radius: float = 1.0) -> float:
    """Chord length ``2R sin(r / (2R))`` of a geodesic radius ``r`` (2021 supplement §1.3.2)."""
    r = check_positive_real(r, "radius")
    return float(2.0 * radius * np.sin(r / (2.0 * radius)))


@cache
def empirical_sphere_log_spread(r: float, grid: int = 720, footpoints: int = 41) -> float:
    r"""Empirical ``sup |log_x(y) - log_x(z)|`` over ``x, y, z`` in ``B_r`` on the unit ``S^2``.

    The 2021 supplement (§2.1) replaces the bound ``2r(2 - H)`` of
    :math:`\|\log_x y - \log_x z\|` by this computed value for the sphere
    simulations. Following the supplement, ``y`` and ``z`` range over a uniform grid of
    ``grid`` points on the boundary circle; unlike the supplement (which fixes ``x``
    on the boundary), the footpoint ``x`` also ranges over ``footpoints`` radii in
    ``[0, r]`` along one meridian (rotational symmetry covers the rest). The
    maximum is a grid search, so a tiny under-estimate is possible: the result is
    never used to claim privacy by default (see the mechanisms' ``bound`` option).
    Cached per arguments.
    """
    from pymc_manidp.geometry.sphere import Sphere

    r = check_positive_real(r, "radius")
    S = Sphere(dim=2)
    if r >= S.max_radius:
        raise ValueError(f"radius must be below r* = {S.max_radius:.6g}")
    phi = np.linspace(0.0, 2.0 * np.pi, grid, endpoint=False)
    ring = np.stack(
        [np.sin(r) * np.cos(phi), np.sin(r) * np.sin(phi), np.full_like(phi, np.cos(r))], -1
    )
    best = 0.0
    for s in np.linspace(0.0, r, footpoints):
        x = np.array([np.sin(s), 0.0, np.cos(s)])
        logs = S.log(x, ring)  # (grid, 3)
        diff = logs[:, None, :] - logs[None, :, :]
        best = max(best, float(np.sqrt(np.max(np.sum(diff**2, axis=-1)))))
    return best
