r"""Sample Fréchet medians: the robust statistic KNG can release (issue 24).

The (weighted) sample Fréchet median minimizes

.. math:: F(x) = \sum_i w_i\, \rho(x, x_i), \qquad
          \nabla F(x) = -\sum_i w_i \frac{\log_x(x_i)}{\rho(x, x_i)}
          \quad (x \ne x_i), \qquad \textstyle\sum_i w_i = 1,

a mean of unit vectors: replacing one record moves it by at most ``2/n`` at every
``x`` (docs/architecture.md, math facts). ``F`` is not differentiable at the records;
there its subdifferential at ``x_k`` is ``-R_k(x_k) + B(0, w_k)``, ``R_k`` the sum over
the other records, so ``x_k`` is a median if and only if ``|R_k(x_k)| <= w_k``.

On a ball of radius ``r < r*`` every ``rho(., x_i)`` is geodesically convex (its
Hessian is ``sqrt(kappa) cot(sqrt(kappa) rho)`` times the projection orthogonal to the
geodesic, ``>= 0`` for ``rho <= 2r < pi/(2 sqrt(kappa_max))``), so ``F`` is convex
there; it is strictly convex, and the median unique, unless the records lie on one
geodesic (Yang 2010; e.g. two records: every point between them is a median).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from pymc_manidp._validation import check_positive_int, check_positive_real
from pymc_manidp.stats import reductions
from pymc_manidp.stats.frechet import (
    ConvergenceWarning,
    extrinsic_start,
    normalized_weights,
    validated_data,
)

__all__ = ["MedianResult", "frechet_median"]


@dataclass(frozen=True)
class MedianResult:
    """Outcome of :func:`frechet_median`.

    Attributes
    ----------
    median : ndarray, shape ``point_shape``
        The estimate (a pre-shape for Kendall shapes).
    iterations : int
        Weiszfeld steps taken (0 for a single record).
    grad_norm : float
        Norm of the smallest subgradient of ``F`` at ``median`` (weights summing to
        one): ``|grad F|`` away from the records, ``max(|R_k| - w_k, 0)`` at a record
        ``x_k``. In ``[0, 1]``; 0 at an exact median.
    converged : bool
        Whether ``grad_norm <= tol`` was met.
    method : str
        ``"single-point"`` or ``"weiszfeld"``.
    """

    median: np.ndarray
    iterations: int
    grad_norm: float
    converged: bool
    method: str


def _terms(M, x, data, w):
    """Weiszfeld sums at ``x`` (one pass): u, s, eta, F, nearest distance, nearest."""
    u, s, eta, energy, near_d, near = reductions.median_terms(M, x[None], data, w)
    return u[0], float(s[0]), float(eta[0]), float(energy[0]), float(near_d[0]), near[0]


def _subgradient_norm(M, x, u, eta):
    """``|grad F|`` off the records; ``max(|R| - eta, 0)`` at records of weight ``eta``."""
    r = float(M.norm(x, u))
    return max(r - eta, 0.0) if eta > 0 else r


def _radial_search(M, data, w, x, terms, passes=40):
    """Minimize ``F`` on the geodesic ray from the nearest record through ``x``.

    Used when that record's share of the Weiszfeld denominator exceeds one half:
    ``F`` is then stiff across the ray (the kink of ``w_k rho(., x_k)``, which the
    step's denominator matches) and soft along it (which the step undershoots by the
    same factor). On the ray ``phi(t) = F(gamma(t))``, ``t = rho(x_k, gamma(t))``, is
    convex with ``phi'(t) = <u(y), log_y(x_k)>/t`` at ``y = gamma(t)``; its root is
    bracketed by doubling and found by regula falsi (Illinois). Returns the better of
    ``x`` and the ray's minimizer: ``F`` never rises.
    """
    _, s, eta, energy, near_d, near = terms
    if eta > 0 or not np.isfinite(near_d):
        return x, terms
    wk = _record_weight(M, data, w, near)
    if not wk / near_d > 0.5 * s:
        return x, terms
    direction = M.log(near, x) / near_d  # unit, at the record

    def at(t):
        y = M.validate(M.exp(near, t * direction))
        tt = _terms(M, y, data, w)
        slope = float(M.inner(y, tt[0], M.log(y, near))) / t
        return y, tt, slope

    lo, hi = 0.0, near_d
    y_hi, t_hi, d_hi = at(hi)
    f_lo, d_lo = None, -np.inf  # phi'(0+) is not needed: bracket with t > 0 only
    while d_hi < 0 and passes > 0:  # still descending: look farther
        lo, d_lo, f_lo = hi, d_hi, (y_hi, t_hi)
        hi *= 2.0
        y_hi, t_hi, d_hi = at(hi)
        passes -= 1
    best = (y_hi, t_hi) if t_hi[3] < energy else (x, terms)
    if f_lo is not None and f_lo[1][3] < best[1][3]:
        best = f_lo
    if d_hi < 0:
        return best
    if f_lo is None:  # phi' > 0 at near_d: the root lies in (0, near_d); bisect first
        lo, d_lo = 0.5 * hi, None
        while passes > 0:
            y_lo, t_lo, d_lo = at(lo)
            passes -= 1
            if t_lo[3] < best[1][3]:
                best = (y_lo, t_lo)
            if d_lo < 0 or lo < 1e-12 * near_d:
                break
            hi, d_hi = lo, d_lo
            lo *= 0.5
        if d_lo is None or d_lo >= 0:
            return best
    side = 0
    while passes > 0 and hi - lo > 1e-12 * hi:
        t = hi - d_hi * (hi - lo) / (d_hi - d_lo)
        y_t, t_t, d_t = at(t)
        passes -= 1
        if t_t[3] < best[1][3]:
            best = (y_t, t_t)
        if d_t > 0:
            hi, d_hi = t, d_t
            if side == 1:
                d_lo *= 0.5
            side = 1
        elif d_t < 0:
            lo, d_lo = t, d_t
            if side == -1:
                d_hi *= 0.5
            side = -1
        else:
            break
    return best


def _record_weight(M, data, w, record):
    """Total weight of the records at ``record`` (equal to it within the zero distance)."""
    n = reductions.n_rows(data)
    if w is None:
        eta = float(reductions.median_terms(M, record[None], data)[2][0])
    else:
        eta = float(reductions.median_terms(M, record[None], data, w)[2][0])
    return eta if eta > 0 else 1.0 / n


def frechet_median(
    manifold,
    data,
    *,
    weights=None,
    tol: float = 1e-10,
    max_iter: int = 1000,
    init=None,
) -> MedianResult:
    r"""Weighted sample Fréchet median of points on a manifold (Weiszfeld iteration).

    The Weiszfeld step on the manifold (Fletcher, Venkatasubramanian & Joshi 2009),
    with the Vardi–Zhang (2000) modification at the records:

    .. math:: x \leftarrow \exp_x\Big(t\,\big(1 - \eta/\|u\|\big)^+\, u/s\Big), \quad
              u = \sum_{i \notin Z} w_i \frac{\log_x(x_i)}{\rho_i}, \quad
              s = \sum_{i \notin Z} \frac{w_i}{\rho_i},\quad \eta = \sum_{i\in Z} w_i,

    ``Z`` the records at the iterate (the weight ``eta`` of a record pulls the
    iterate to itself; ``|u| <= eta`` proves the iterate a median). ``t = 1``
    (Euclidean Weiszfeld), halved while ``F`` would rise (on curved spaces the unit
    step is not always a descent). When the iterate heads for a record, the record
    itself is tested with the exact optimality condition, so medians at records
    are found in finitely many steps; when one record dominates the step's
    denominator (a median close to, not at, a record: there the step is far too
    short along the ray from the record, and the plain iteration crawls), ``F`` is
    also minimized along that ray (``_radial_search``).

    Parameters
    ----------
    manifold : Manifold
        The manifold of the data.
    data : array or dask.array.Array, shape ``(n, *point_shape)``
        Points (validated as by :func:`~pymc_manidp.stats.frechet_mean`). A Dask
        array is never gathered: each step is one pass
        (:func:`~pymc_manidp.stats.reductions.median_terms`).
    weights : array, shape ``(n,)``, optional
        Non-negative weights; normalized to sum to one (NumPy data only).
    tol : float
        Stop when the smallest subgradient's norm (dimensionless, in ``[0, 1]``) is
        at most ``tol``; near the median the distance to it is about ``tol`` times
        the data's spread.
    max_iter : int
        Iteration cap.
    init : array, optional
        Starting point; default the start of :func:`~pymc_manidp.stats.frechet_mean`
        (the normalized Euclidean mean on spheres, the arithmetic mean on SPD, else
        the first record).

    Returns
    -------
    MedianResult
        ``converged=False`` comes with a :class:`~pymc_manidp.stats.ConvergenceWarning`.
        When the minimizers form a set (records on one geodesic), one of them.

    Examples
    --------
    >>> import numpy as np
    >>> import pymc_manidp as pmd
    >>> E = pmd.Euclidean(dim=2)
    >>> data = np.array([[0.0, 0], [0, 0], [1, 0], [-1, 0], [0, 1], [0, -1], [30, 40]])
    >>> res = pmd.frechet_median(E, data, init=[0.3, 0.2])  # the outlier cannot move it
    >>> bool(res.converged), bool(np.abs(res.median).max() < 1e-12), data.mean(axis=0).tolist()
    (True, True, [4.285714285714286, 5.714285714285714])
    """
    data, summary, n = validated_data(manifold, data, "the Fréchet median")
    w = normalized_weights(weights, n)
    max_iter = check_positive_int(max_iter, "max_iter")
    tol = check_positive_real(tol, "tol")
    M = manifold
    if n == 1 or (w is not None and np.count_nonzero(w) == 1):
        x = np.asarray(data[0] if w is None else data[int(np.flatnonzero(w)[0])])
        return MedianResult(x, 0, 0.0, True, "single-point")
    x = extrinsic_start(M, data, w, summary) if init is None else M.validate(init)
    # rounding floor: the unit vectors carry ~eps/rho relative error each
    floor = 64.0 * np.finfo(float).eps
    u, s, eta, energy, near_d, near = _terms(M, x, data, w)
    gnorm = _subgradient_norm(M, x, u, eta)
    it = 0
    while gnorm > max(tol, floor):
        if it >= max_iter:
            break
        r = float(M.norm(x, u))
        v = max(1.0 - eta / r, 0.0) * u / s  # Vardi–Zhang: 0 when the record wins
        length = float(M.norm(x, v))
        if near_d <= 4.0 * length:
            # heading for a record: test it exactly (a median at a record is reached
            # only in the limit by the steps)
            cand = _terms(M, near, data, w)
            cand_g = _subgradient_norm(M, near, cand[0], cand[2])
            if cand_g == 0.0 or (cand_g <= max(tol, floor) and cand[3] <= energy):
                x, (u, s, eta, energy, near_d, near), gnorm = near, cand, cand_g
                it += 1
                break
        step = 1.0
        while True:
            x_new = M.validate(M.exp(x, step * v))
            new = _terms(M, x_new, data, w)
            if new[3] <= energy * (1 + 1e-13) or step < 1e-8:
                break
            step *= 0.5
        if new[3] > energy * (1 + 1e-13):
            break  # no descent at working precision
        x_new, new = _radial_search(M, data, w, x_new, new)
        x, (u, s, eta, energy, near_d, near) = x_new, new
        gnorm = _subgradient_norm(M, x, u, eta)
        it += 1
    converged = gnorm <= max(tol, floor)
    if not converged:
        warnings.warn(
            f"Fréchet median did not converge in {it} iterations: subgradient norm "
            f"{gnorm:.3g} > tolerance {tol:.3g}. Raise max_iter, or check that the data lie "
            "in a ball of radius < r* (the median may not be unique otherwise).",
            ConvergenceWarning,
            stacklevel=2,
        )
    return MedianResult(x, it, gnorm, converged, "weiszfeld")
