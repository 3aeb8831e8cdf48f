r"""Sensitivity bounds, curvature factors, the scale σ and ambient radii.

Curvature factors (``H`` is ``h(r, kappa)`` of the 2021 paper and
``h_max(2r, kappa_max)`` of the 2022 paper: the same number):

.. math:: H = 2r\sqrt{\kappa_{\max}}\cot(2r\sqrt{\kappa_{\max}}) \ (\kappa_{\max} > 0),
          \qquad H_{\min} = 2r\sqrt{|\kappa_{\min}|}\coth(2r\sqrt{|\kappa_{\min}|})
          \ (\kappa_{\min} < 0),

and 1 otherwise. Sensitivities for data in ``B_r(m0)`` with ``r < r*``:

- Laplace on the Fréchet mean (2021, Thm 2): ``Delta = 2r(2 - H) / (n H)``;
- KNG gradient (2022, Thm 2): ``Delta = 2r(2 - H) / n``;
- KNG on the Fréchet median's gradient, a mean of unit vectors: ``Delta = 2/n``, with
  no curvature factor (:func:`median_gradient_sensitivity`).

The scale σ (2021, Thm 1; :func:`calibrated_sigma`): ``sigma = 2 Delta / eps`` in
general; ``sigma = Delta / eps`` only when the normalizing constant of the density
does not depend on the footpoint (Laplace on a homogeneous space, *not* restricted
to a ball). Restricting to the
ball (2021, Thm 3) and KNG always make it depend on the footpoint.
"""

from __future__ import annotations

import math
from fractions import Fraction
from functools import cache

import numpy as np

from pymc_manidp._validation import check_positive_int, check_positive_real

__all__ = [
    "ambient_radius_spd",
    "ambient_radius_sphere",
    "calibrated_sigma",
    "curvature_factor",
    "curvature_factor_min",
    "empirical_sphere_log_spread",
    "kng_sensitivity",
    "laplace_sensitivity",
    "median_gradient_sensitivity",
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
    r"""Curvature factor ``H = h_max(2r, kappa_max)`` of both papers' sensitivity bounds.

    .. math:: H = 2r\sqrt{\kappa_{\max}}\,\cot\bigl(2r\sqrt{\kappa_{\max}}\bigr)
              \quad (\kappa_{\max} > 0), \qquad H = 1 \quad (\kappa_{\max} \le 0).

    Parameters
    ----------
    r : float
        Radius of the public data ball ``B_r(m0)``, below ``r*``.
    kappa_max : float
        Upper bound of the sectional curvature.

    Returns
    -------
    float
        ``H``, in ``(0, 1]`` for ``r < r*``.

    Examples
    --------
    >>> curvature_factor(0.5, 0.0)
    1.0
    >>> round(curvature_factor(0.25, 1.0), 6)  # cot(1/2) / 2
    0.915244
    """
    if kappa_max <= 0:
        return 1.0
    s = 2.0 * r * np.sqrt(kappa_max)
    return float(s / np.tan(s))


def curvature_factor_min(r: float, kappa_min: float) -> float:
    r"""Curvature factor ``H_min = h_min(2r, kappa_min)`` of the 2022 paper's Lemma 1.

    .. math:: H_{\min} = 2r\sqrt{|\kappa_{\min}|}\,\coth\bigl(2r\sqrt{|\kappa_{\min}|}\bigr)
              \quad (\kappa_{\min} < 0), \qquad H_{\min} = 1 \quad (\kappa_{\min} \ge 0).

    Parameters
    ----------
    r : float
        Radius of the public data ball ``B_r(m0)``.
    kappa_min : float
        Lower bound of the sectional curvature.

    Returns
    -------
    float
        ``H_min >= 1``.

    Examples
    --------
    >>> curvature_factor_min(0.5, 1.0)
    1.0
    >>> round(curvature_factor_min(1.0, -0.5), 6)  # sqrt(2) coth(sqrt(2))
    1.591892
    """
    if kappa_min >= 0:
        return 1.0
    s = 2.0 * r * np.sqrt(-kappa_min)
    return float(s / np.tanh(s))


def laplace_sensitivity(manifold, n: int, r: float) -> float:
    r"""Sensitivity of the Fréchet mean (2021, Theorem 2).

    .. math:: \Delta = \frac{2r(2 - H)}{nH}

    with ``H`` from :func:`curvature_factor`; ``2r/n`` on flat and negatively curved spaces.

    Parameters
    ----------
    manifold : Manifold
        The space; its ``max_radius`` and ``curvature_bounds`` are used.
    n : int
        Number of records (public).
    r : float
        Radius of the public data ball ``B_r(m0)``; must be below ``manifold.max_radius``.

    Returns
    -------
    float
        ``Delta``, the largest distance between the Fréchet means of two neighbouring
        datasets in the ball.

    Raises
    ------
    ValueError
        If ``r >= r*`` or ``n < 1``.

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

    with ``H`` from :func:`curvature_factor`: the largest change of the gradient
    ``sum_i Log_x(x_i) / n`` when one record of a dataset in the ball is replaced.

    Parameters
    ----------
    manifold : Manifold
        The space; its ``max_radius`` and ``curvature_bounds`` are used.
    n : int
        Number of records (public).
    r : float
        Radius of the public data ball ``B_r(m0)``; must be below ``manifold.max_radius``.

    Returns
    -------
    float
        ``Delta``.

    Raises
    ------
    ValueError
        If ``r >= r*`` or ``n < 1``.

    Examples
    --------
    >>> import pymc_manidp as pmd
    >>> kng_sensitivity(pmd.Euclidean(dim=2), n=10, r=1.0)  # flat: 2r/n
    0.2
    """
    n = check_positive_int(n, "n")
    r = _check_radius(manifold, r)
    h = curvature_factor(r, manifold.curvature_bounds[1])
    return 2.0 * r * (2.0 - h) / n


def median_gradient_sensitivity(manifold, n: int, r: float) -> float:
    r"""Sensitivity of the Fréchet median's gradient (KNG on the median).

    .. math:: \nabla F(x) = -\frac1n \sum_{i=1}^n \frac{\log_x(x_i)}{\rho(x, x_i)},
              \qquad \Delta = \sup_x \|\nabla F_D(x) - \nabla F_{D'}(x)\|_x = \frac2n

    for datasets ``D, D'`` of ``n`` records that differ in one (replace-one, ``n``
    public): the two unit vectors that differ are at most 2 apart, at every ``x``, on
    every manifold (no curvature factor; a record at ``x`` contributes 0, so 1 apart).
    The radius still has to be below ``r*``: then every ``log_x(x_i)`` is defined on
    the ball and the median's objective is convex there (docs/mechanisms.md).

    Parameters
    ----------
    manifold : Manifold
        The space; its ``max_radius`` is checked.
    n : int
        Number of records (public).
    r : float
        Radius of the public data ball ``B_r(m0)``; must be below ``manifold.max_radius``.

    Returns
    -------
    float
        ``Delta = 2/n``.

    Raises
    ------
    ValueError
        If ``r >= r*`` or ``n < 1``.

    Examples
    --------
    >>> import pymc_manidp as pmd
    >>> median_gradient_sensitivity(pmd.Sphere(dim=2), n=10, r=0.5)
    0.2
    """
    n = check_positive_int(n, "n")
    _check_radius(manifold, r)
    return 2.0 / n


def calibrated_sigma(
    sensitivity: float, epsilon: float, *, footpoint_free_normalizer: bool = False
) -> float:
    r"""The scale ``sigma`` of a mechanism's density from its sensitivity and budget.

    .. math:: \sigma = 2\Delta/\varepsilon, \quad \text{or } \Delta/\varepsilon
              \text{ when the normalizing constant does not depend on the footpoint.}

    Parameters
    ----------
    sensitivity : float
        The sensitivity ``Delta > 0``.
    epsilon : float
        Privacy budget ``eps > 0``.
    footpoint_free_normalizer : bool, default False
        Claim that the density's normalizing constant does not depend on its footpoint;
        true only for an unrestricted Laplace on a homogeneous space (and the
        Euclidean K-norm mechanisms).

    Returns
    -------
    float
        ``sigma``: the formula in floating point, stepped up to the next double when
        ``factor * Delta / sigma`` would exceed ``epsilon`` read as the decimal it
        prints as (what a privacy budget charges, docs/privacy-budget.md).

    Examples
    --------
    >>> calibrated_sigma(0.1, 1.0)
    0.2
    >>> calibrated_sigma(0.1, 1.0, footpoint_free_normalizer=True)
    0.1
    """
    sensitivity = check_positive_real(sensitivity, "sensitivity")
    epsilon = check_positive_real(epsilon, "epsilon")
    factor = 1 if footpoint_free_normalizer else 2
    sigma = factor * sensitivity / epsilon
    # A budget charges epsilon as the decimal it prints as (privacy/budget.py), which
    # can be below the double (0.1 is 0.1000000000000000055...), and the division
    # rounds: step sigma up to the first double with factor*Delta/sigma <= that decimal,
    # so the noise never spends more than is charged (one or two ulps at most)
    if math.isfinite(sigma):
        target = Fraction(factor) * Fraction(sensitivity) / Fraction(repr(epsilon))
        while Fraction(sigma) < target:
            sigma = math.nextafter(sigma, math.inf)
    return sigma


def ambient_radius_spd(r: float) -> float:
    """Return the Frobenius radius of the smallest ball around ``I`` containing ``B_r(I)``.

    The radius is ``e^r - 1`` (2021 supplement, Proposition 1).

    Parameters
    ----------
    r : float
        Geodesic radius of the ball ``B_r(I)`` in SPD(k).

    Returns
    -------
    float
        ``e^r - 1``.

    Examples
    --------
    >>> ambient_radius_spd(1.0) == float(np.expm1(1.0))
    True
    """
    return float(np.expm1(check_positive_real(r, "radius")))


def ambient_radius_sphere(r: float, radius: float = 1.0) -> float:
    """Chord length ``2R sin(r / (2R))`` of a geodesic radius ``r`` (2021 supplement §1.3.2).

    Parameters
    ----------
    r : float
        Geodesic radius on the sphere.
    radius : float, default 1.0
        Radius ``R`` of the sphere.

    Returns
    -------
    float
        The ambient (Euclidean) radius of the cap ``B_r``.

    Examples
    --------
    >>> round(ambient_radius_sphere(np.pi / 2), 6)  # sqrt(2)
    1.414214
    """
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

    Parameters
    ----------
    r : float
        Radius of the ball, below ``pi / 4``.
    grid : int, default 720
        Points on the boundary circle.
    footpoints : int, default 41
        Radii of the footpoint ``x`` in ``[0, r]``.

    Returns
    -------
    float
        The largest ``|log_x(y) - log_x(z)|`` found; at most ``2r(2 - H)``.
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
