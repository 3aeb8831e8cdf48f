r"""Numba kernel of the sphere's Fréchet mean: one fused pass over the data.

For each datum ``y`` at ``x`` on the sphere of radius ``R``, with ``c = <x, y>/R^2``,
the tangent leg ``u = y - c x`` and ``theta = atan2(|u|/R, c)``:

.. math:: \log_x(y) = \frac{\theta}{|u|/R}\, u, \qquad
          \operatorname{Hess}\tfrac12\rho^2(\cdot, y)(x)
          = \hat u \hat u^\top + \theta\cot\theta\,(P_x - \hat u \hat u^\top),

``P_x = I - x x^T/R^2`` and ``\hat u = u/|u|`` (the radial direction has Hessian 1, the
others the Jacobi field's ``theta cot theta``, constant curvature ``1/R^2``). The
NumPy route made one temporary of the data's size per operation; this loop makes
none, and sums the Hessian in the same pass.
"""

from __future__ import annotations

import numpy as np

# numba's njit, but cache=True caches in the package's checked cache folder only
from pymc_manidp.geometry._numba.cache import njit

__all__ = ["sphere_log_mean", "sphere_log_means"]

_SERIES = 1e-3  # theta below it: 1 - theta cot theta by its series (error < 1e-19)


@njit(cache=True, error_model="numpy", inline="always")
def _add_log(x, data, i, wi, radius, u, g):
    """Add ``wi log_x(y_i)`` to ``g``; leave the leg ``u`` of ``y_i`` in ``u``.

    Returns ``(c, su2, su, theta)`` of ``y_i`` at ``x`` (module docstring). Both kernels
    call it, so a point's sums are the same numbers, term by term, in either. Inlined:
    called once per record, as a function call it made both kernels 15-20% slower
    (2026-11-27, n = 1,000 on S^2); inlining changes no number (no fastmath here).
    """
    dd = x.shape[0]
    c = 0.0
    for j in range(dd):
        c += data[i, j] * x[j]
    c /= radius * radius
    su2 = 0.0
    for j in range(dd):
        u[j] = data[i, j] - c * x[j]
        su2 += u[j] * u[j]
    su = np.sqrt(su2) / radius
    theta = np.arctan2(su, c)
    fac = theta / su if su > 0.0 else 1.0
    for j in range(dd):
        g[j] += wi * fac * u[j]
    return c, su2, su, theta


@njit(cache=True, error_model="numpy")
def sphere_log_mean(x, data, wts, radius, hessian):
    """Weighted mean log, energy, Hessian and largest angle at ``x``.

    Parameters
    ----------
    x : ndarray, shape ``(D,)``
        On the sphere of radius ``radius``.
    data : ndarray, shape ``(n, D)``
        On the sphere.
    wts : ndarray, shape ``(n,)``
        Weights.
    radius : float
    hessian : bool
        Whether to sum the Hessian (else it is returned as zeros).

    Returns
    -------
    g : ndarray, shape ``(D,)``
        ``sum_i w_i log_x(y_i)``.
    energy : float
        ``(1/2) sum_i w_i rho(x, y_i)^2``.
    hess : ndarray, shape ``(D, D)``
        ``sum_i w_i Hess (1/2) rho^2(., y_i)`` at ``x``, as a map on ``T_x`` (ambient
        coordinates, zero along ``x``).
    theta_max : float
        The largest angle ``rho/R`` (the caller refuses the cut locus).

    Examples
    --------
    >>> x = np.array([0.0, 0.0, 1.0])
    >>> y = np.array([[np.sin(0.5), 0.0, np.cos(0.5)]])  # at angle 0.5 from x
    >>> g, energy, hess, theta_max = sphere_log_mean(x, y, np.ones(1), 1.0, True)
    >>> np.round(g, 12).tolist(), round(energy, 12)  # log_x(y) = 0.5 e_1, F = 0.5^2/2
    ([0.5, 0.0, 0.0], 0.125)
    >>> bool(np.isclose(hess[1, 1], 0.5 / np.tan(0.5)))  # theta cot theta across
    True
    """
    n, dd = data.shape
    r2 = radius * radius
    g = np.zeros(dd)
    hess = np.zeros((dd, dd))
    u = np.empty(dd)
    energy = 0.0
    tc_sum = 0.0
    theta_max = 0.0
    for i in range(n):
        wi = wts[i]
        c, su2, su, theta = _add_log(x, data, i, wi, radius, u, g)
        theta_max = max(theta_max, theta)
        energy += wi * theta * theta
        if hessian and su > 0.0:
            if theta < _SERIES:  # 1 - theta cot theta = theta^2/3 + theta^4/45 + ...
                t2 = theta * theta
                one_minus = t2 / 3.0 + t2 * t2 / 45.0
            else:
                one_minus = 1.0 - theta * c / su
            tc_sum += wi * (1.0 - one_minus)
            b = wi * one_minus / su2
            for j in range(dd):
                for m in range(dd):
                    hess[j, m] += b * u[j] * u[m]
        elif hessian:
            tc_sum += wi  # theta = 0: the Hessian is the identity on T_x
    if hessian:
        for j in range(dd):
            for m in range(dd):
                hess[j, m] += tc_sum * ((1.0 if j == m else 0.0) - x[j] * x[m] / r2)
    return g, 0.5 * r2 * energy, hess, theta_max


@njit(cache=True, error_model="numpy")
def sphere_log_means(xs, data, wts, radius):
    """:func:`sphere_log_mean` (without the Hessian) at each of ``m`` points, in one call.

    Each point's sums are the single kernel's, term by term in the same order (the
    same numbers); one call saves the per-call work of ``m`` calls (an exact sampler's
    round of proposals).

    Parameters
    ----------
    xs : ndarray, shape ``(m, D)``
        On the sphere of radius ``radius``.
    data : ndarray, shape ``(n, D)``
    wts : ndarray, shape ``(n,)``
    radius : float

    Returns
    -------
    g : ndarray, shape ``(m, D)``
    energy : ndarray, shape ``(m,)``
    theta_max : ndarray, shape ``(m,)``

    Examples
    --------
    >>> x = np.array([[0.0, 0.0, 1.0], [0.0, 1.0, 0.0]])
    >>> y = np.array([[np.sin(0.5), 0.0, np.cos(0.5)]])
    >>> g, energy, theta_max = sphere_log_means(x, y, np.ones(1), 1.0)
    >>> bool(np.array_equal(g[0], sphere_log_mean(x[0], y, np.ones(1), 1.0, False)[0]))
    True
    """
    m = xs.shape[0]
    n, dd = data.shape
    r2 = radius * radius
    g = np.zeros((m, dd))
    energies = np.zeros(m)
    theta_maxes = np.zeros(m)
    u = np.empty(dd)
    for k in range(m):
        energy = 0.0
        theta_max = 0.0
        xk, gk = xs[k], g[k]
        for i in range(n):
            wi = wts[i]
            theta = _add_log(xk, data, i, wi, radius, u, gk)[3]
            theta_max = max(theta_max, theta)
            energy += wi * theta * theta
        energies[k] = 0.5 * r2 * energy
        theta_maxes[k] = theta_max
    return g, energies, theta_maxes
