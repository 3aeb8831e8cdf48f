r"""Sample Fréchet means: the footpoint of the Laplace mechanism.

The (weighted) sample Fréchet mean minimizes

.. math:: F(x) = \frac12 \sum_i w_i\, \rho^2(x, x_i), \qquad
          \nabla F(x) = -\sum_i w_i \log_x(x_i), \qquad \textstyle\sum_i w_i = 1.

Under Assumption 1 (data in ``B_r(m0)``, ``r < r*``) ``F`` is strongly geodesically
convex with modulus ``H = h(2r, kappa_max)`` on the ball, so (Lemma 1 of the 2022
paper) ``rho(x, x_bar) <= |grad F(x)| / H``: the reported gradient norm bounds the
distance to the exact mean. :mod:`pymc_manidp.stats.domain` uses this to widen the
sensitivity for the numerical error of the footpoint.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from pymc_manidp._validation import check_positive_int, check_positive_real
from pymc_manidp.geometry.capabilities import AmbientMeanStart
from pymc_manidp.stats import reductions

__all__ = ["ConvergenceWarning", "FrechetResult", "FrechetResults", "frechet_mean", "frechet_means"]


class ConvergenceWarning(RuntimeWarning):
    """An iterative algorithm stopped before meeting its tolerance."""


@dataclass(frozen=True)
class FrechetResult:
    """Outcome of :func:`frechet_mean`.

    Attributes
    ----------
    mean : ndarray, shape ``point_shape``
        The estimate (a pre-shape for Kendall shapes).
    iterations : int
        Gradient steps taken (0 for closed forms).
    grad_norm : float
        Riemannian norm of ``grad F`` at ``mean`` (weights summing to 1).
    converged : bool
        Whether the stopping rule of the chosen method was met.
    method : str
        ``"closed-form"``, ``"gradient"`` or ``"supplement"``.
    """

    mean: np.ndarray
    iterations: int
    grad_norm: float
    converged: bool
    method: str


def normalized_weights(weights, n):
    """Weights ``(n,)`` checked and normalized to sum to one; None (equal weights) stays None."""
    if weights is None:
        return None  # equal weights, 1/n each (never materialized: n may be 10^10)
    w = np.asarray(weights, dtype=float)
    if w.shape != (n,):
        raise ValueError(f"weights must have shape ({n},), one per point, got {w.shape}")
    if not np.all(np.isfinite(w)) or np.any(w < 0) or w.sum() <= 0:
        raise ValueError("weights must be finite, non-negative and not all zero")
    return w / w.sum()


def validated_data(manifold, data, what):
    """``(data, summary, n)``: records validated (NumPy), lazily validated (Dask) or
    already checked by ``DataDomain.check`` (then ``summary`` is its ``CheckSummary``).

    Trusted ``CheckedData`` on this manifold is not validated again: its NumPy points
    come back as they are, Dask ones as the ``CheckedData`` (whose passes read the raw
    records and validate block by block). Any other ``CheckedData`` is its points, a
    plain array. ``what`` names the statistic in the error for empty data.
    """
    summary = reductions.checked_summary(data, manifold=manifold)
    if summary is not None:  # validated by DataDomain.check
        if not reductions.is_dask(data):
            data = data.points
    elif isinstance(data, reductions.CheckedData):
        return validated_data(manifold, data.points, what)
    elif reductions.is_dask(data):
        # validated chunk by chunk inside each pass (DataDomain.check names bad rows)
        data = reductions.lazy_validate(manifold, data)
    else:
        data = manifold.validate(data)
    if data.ndim != len(manifold.point_shape) + 1:
        raise ValueError(
            f"data must have shape (n, {', '.join(map(str, manifold.point_shape))}), "
            f"got {data.shape}"
        )
    n = reductions.n_rows(data)
    if n == 0:
        raise ValueError(f"data is empty: {what} needs at least one point")
    return data, summary, n


def _grad(M, x, data, w, profile=None):
    """``-grad F(x)`` (the mean log vector), its norm and ``F(x)``: one pass (binning
    the distances from ``x`` into ``profile``, a ``reductions.DistanceProfile``)."""
    g, energy = reductions.frechet_gradient(M, x, data, w, profile=profile)
    return g, float(M.norm(x, g)), energy


def frechet_mean(
    manifold,
    data,
    *,
    weights=None,
    method: str = "gradient",
    tol: float = 1e-10,
    atol: float = 0.0,
    max_iter: int = 1000,
    init=None,
    profile=None,
) -> FrechetResult:
    r"""Weighted sample Fréchet mean of points on a manifold.

    Parameters
    ----------
    manifold : Manifold
        The manifold of the data.
    data : array or dask.array.Array, shape ``(n, *point_shape)``
        Points (validated: off-manifold, non-finite or wrongly shaped input raises).
        A Dask array chunked along ``n`` is never gathered: each gradient step is one
        pass (:mod:`pymc_manidp.stats.reductions`). Data returned by
        ``DataDomain.check`` are not validated again, and the descent starts at the
        domain's center with the gradient the check pass summed.
    weights : array, shape ``(n,)``, optional
        Non-negative weights; normalized to sum to one (NumPy data only).
    method : {"gradient", "supplement"}
        ``"gradient"`` (default): Riemannian gradient descent with unit step (the
        Karcher flow, exact for flat spaces), or Newton's step where the manifold
        writes the energy's Hessian (``frechet_newton``: spheres exactly, SPD to
        second order in the spread), each with Armijo backtracking, stopped when
        ``|grad F| <= max(tol * spread, atol)`` where ``spread`` is the root mean
        square distance from the iterate to the data (the same rule either way).
        ``"supplement"``: the 2021 supplement's algorithm, for faithful
        reproduction: start at the first point, step 0.5, stop when successive
        iterates move less than ``1e-5``, at most 500 iterations.
    tol, atol : float
        Relative and absolute gradient-norm tolerances of ``"gradient"``.
    max_iter : int
        Iteration cap of ``"gradient"``.
    init : array, optional
        Starting point. Default for ``"gradient"``: the arithmetic mean for SPD,
        the normalized Euclidean mean on spheres, else the first point; for
        ``"supplement"``: the first point, as in the paper.
    profile : pymc_manidp.stats.reductions.DistanceProfile, optional
        Over Dask: every pass over ``profile.data`` (``data`` as ``DataDomain.check``
        returned it; unchecked data are read through a validating copy, whose passes
        do not count) also bins the distances from its point into it, so a later
        ``reductions.distance_profile(..., profile=profile)`` at the mean reads them
        instead of the data (the KNG envelope's route). The mean is the same with or
        without it.

    Returns
    -------
    FrechetResult
        ``converged=False`` comes with a :class:`ConvergenceWarning`.

    Examples
    --------
    >>> import numpy as np
    >>> import pymc_manidp as pmd
    >>> P = pmd.SPD(k=2)
    >>> res = pmd.frechet_mean(P, np.stack([np.diag([np.e**2, 1.0]), np.eye(2)]))
    >>> bool(np.allclose(res.mean, np.diag([np.e, 1.0])))  # the geodesic midpoint
    True
    """
    if method not in ("gradient", "supplement"):
        raise ValueError(f"method must be 'gradient' or 'supplement', got {method!r}")
    data, summary, n = validated_data(manifold, data, "the Fréchet mean")
    w = normalized_weights(weights, n)
    max_iter = check_positive_int(max_iter, "max_iter")
    tol = check_positive_real(tol, "tol")
    if atol < 0 or not np.isfinite(atol):
        raise ValueError(f"atol must be a finite number >= 0, got {atol}")

    closed = _closed_form(manifold, data, w, summary)
    if closed is not None:
        # data near the float limit make the norm's squares overflow: that is reported
        # below as the ConvergenceWarning it is, not also as NumPy's RuntimeWarning
        with np.errstate(over="ignore", invalid="ignore"):
            _, gnorm, _ = _grad(manifold, closed, data, w, profile)
        if not np.isfinite(gnorm):  # e.g. |x| ~ 1e200: squares overflow
            warnings.warn(
                f"the Fréchet mean's gradient norm is {gnorm} at working precision: the "
                "data are too large for floating point; rescale them",
                ConvergenceWarning,
                stacklevel=2,
            )
            return FrechetResult(closed, 0, gnorm, False, "closed-form")
        return FrechetResult(closed, 0, gnorm, True, "closed-form")

    if method == "supplement":
        x = np.asarray(data[0]) if init is None else manifold.validate(init)
        return _supplement(manifold, data, w, x, profile)
    if init is None and w is None and summary is not None and summary.center_gradient is not None:
        # the check pass already summed the gradient at the public center: start there
        g0 = summary.center_gradient
        first = (g0, float(manifold.norm(summary.center, g0)), summary.center_energy)
        return _gradient_descent(
            manifold, data, w, summary.center, tol, atol, max_iter, first, profile
        )
    if init is None:
        x = extrinsic_start(manifold, data, w, summary)
    else:
        x = manifold.validate(init)
    return _gradient_descent(manifold, data, w, x, tol, atol, max_iter, profile=profile)


def _closed_form(M, data, w, summary=None):
    if M.ambient_mean_is_frechet:  # Euclidean: the arithmetic mean
        if w is None and summary is not None:
            return summary.mean_ambient
        return reductions.weighted_sum(data, w)
    if w is None:
        n = reductions.n_rows(data)
        positive, wj = (np.arange(n), 0.5) if n <= 2 else ((), None)
    else:
        positive = np.flatnonzero(w > 0)
        wj = w[positive[1]] if len(positive) == 2 else None
    if len(positive) == 1:
        return np.asarray(data[positive[0]])
    if len(positive) == 2:
        a, b = np.asarray(data[positive[0]]), np.asarray(data[positive[1]])
        # the weighted geodesic point: minimizes w_i d(x, a)^2 + w_j d(x, b)^2
        x = M.exp(a, wj * M.log(a, b))
        return M.validate(x)
    return None


def extrinsic_start(M, data, w, summary=None):
    """A cheap start close to the mean: saves a few Karcher steps (each an eigh per point).

    The manifold's ``ambient_mean_start`` of the weighted mean of the embedding
    coordinates (SPD: the arithmetic mean, SPD matrices form a convex cone; Sphere:
    the normalized Euclidean mean, when it is not near the origin). Otherwise the
    first point.
    """
    if not isinstance(M, AmbientMeanStart):
        return np.asarray(data[0])
    if w is None and summary is not None:
        m = summary.mean_ambient
    else:
        m = reductions.weighted_sum(data, w)
    x = M.ambient_mean_start(m)
    return np.asarray(data[0]) if x is None else x


def _evaluate(M, x, data, w, newton, profile=None):
    """``(g, |g|, F, h)`` at ``x``: one pass; ``h`` the Hessian statistic or None."""
    if not newton:
        return (*_grad(M, x, data, w, profile), None)
    g, energy, h = reductions.frechet_gradient_hessian(M, x, data, w, profile=profile)
    return g, float(M.norm(x, g)), energy, h


def _direction(M, x, g, gnorm, h):
    """The step and its slope ``<g, v>``: Newton's where the manifold gives its Hessian
    and the step descends, else the unit Karcher step ``g``."""
    if h is not None:
        v = M.newton_direction(x, g, h)
        slope = float(M.inner(x, g, v))
        if np.isfinite(slope) and slope > 0 and np.all(np.isfinite(v)):
            return v, slope
    return g, gnorm**2


def _gradient_descent(M, data, w, x, tol, atol, max_iter, first=None, profile=None):
    """Karcher flow, or Newton where the manifold writes its Hessian, with Armijo
    backtracking; ``first``: ``_grad`` at ``x`` if known (its step is Karcher's)."""
    newton = bool(getattr(M, "frechet_newton", False))
    if first is None:
        g, gnorm, energy, h = _evaluate(M, x, data, w, newton, profile)
    else:
        g, gnorm, energy, h = (*first, None)
    # the gradient of nearly identical points is rounding noise: do not ask for less
    floor = 64.0 * np.finfo(float).eps * getattr(M, "radius", 1.0)
    it = 0
    while True:
        spread = np.sqrt(2.0 * energy)
        if gnorm <= max(tol * spread, atol, floor) or gnorm == 0.0:
            return FrechetResult(x, it, gnorm, True, "gradient")
        if it >= max_iter:
            break
        v, slope = _direction(M, x, g, gnorm, h)
        step = 1.0
        while True:
            x_new = M.validate(M.exp(x, step * v))
            g_new, gnorm_new, e_new, h_new = _evaluate(M, x_new, data, w, newton, profile)
            # Armijo: F must drop by a fraction of step*<g, v>. Near the optimum that
            # drop (~|g|^2) is below the rounding of F itself, so a step that does not
            # raise F beyond rounding is accepted if the gradient shrinks: there the
            # unit step contracts where F's Hessian is below 2 (flat and positively
            # curved spaces), but on H^d data spread at distance ~2.8 have a Hessian
            # ~ rho coth rho > 2 and the unit step overshot, back and forth, with
            # |grad F| stuck at 4e-7 (issue 43: a Laplace release on H^2 refused its
            # own mean after reading the data); halving then contracts
            within_rounding = abs(e_new - energy) <= 1e-13 * energy
            if (e_new <= energy - 1e-4 * step * slope and not within_rounding) or (
                e_new <= energy * (1 + 1e-13) and gnorm_new < gnorm
            ):
                break
            if step < 1e-8:
                break
            step *= 0.5
        if e_new > energy * (1 + 1e-13):
            break  # no descent possible at working precision
        x, g, gnorm, energy, h = x_new, g_new, gnorm_new, e_new, h_new
        it += 1
    warnings.warn(
        f"Fréchet mean did not converge in {it} iterations: gradient norm {gnorm:.3g} "
        f"> tolerance {max(tol * np.sqrt(2 * energy), atol):.3g}. Check that the data "
        "lie in a ball of radius < r* (the mean may not be unique otherwise).",
        ConvergenceWarning,
        stacklevel=3,
    )
    return FrechetResult(x, it, gnorm, False, "gradient")


def _supplement(M, data, w, x, profile=None):
    """2021 supplement §1.1: step 0.5, stop when rho(mu_k, mu_{k-1}) < 1e-5, <= 500 steps."""
    for it in range(1, 501):
        g, _, _ = _grad(M, x, data, w, profile)
        x_new = M.validate(M.exp(x, 0.5 * g))
        moved = float(M.dist(x, x_new))
        x = x_new
        if moved < 1e-5:
            _, gnorm, _ = _grad(M, x, data, w, profile)
            return FrechetResult(x, it, gnorm, True, "supplement")
    _, gnorm, _ = _grad(M, x, data, w, profile)
    warnings.warn(
        "Fréchet mean (supplement algorithm) did not converge in 500 iterations",
        ConvergenceWarning,
        stacklevel=3,
    )
    return FrechetResult(x, 500, gnorm, False, "supplement")


@dataclass(frozen=True)
class FrechetResults:
    """Outcome of :func:`frechet_means`: one row per data set of the stack.

    Attributes
    ----------
    means : ndarray, shape ``(R, *point_shape)``
    iterations : ndarray of int, shape ``(R,)``
    grad_norms : ndarray, shape ``(R,)``
        Riemannian norm of ``grad F`` at each mean (equal weights).
    converged : ndarray of bool, shape ``(R,)``
    """

    means: np.ndarray
    iterations: np.ndarray
    grad_norms: np.ndarray
    converged: np.ndarray


def _stack_grad(M, x, data):
    """``-grad F`` (the mean log vector), its norm and ``F`` at each ``x[j]`` for the
    data set ``data[j]``: arrays ``(m, *shape)``, ``(m,)``, ``(m,)``, one broadcast pass."""
    g, energy = M.stack_frechet_gradient(x, data)
    return g, M.norm(x, g), energy


def frechet_means(
    manifold,
    stack,
    *,
    tol: float = 1e-10,
    atol: float = 0.0,
    max_iter: int = 1000,
    warn: bool = True,
) -> FrechetResults:
    r"""Fréchet means of a stack of data sets of the same size, all at once.

    For each data set ``D_j`` (a row of ``stack``) the minimizer of
    ``F_j(x) = (1/2n) Σ_i ρ²(x, x_{ji})``, by the Riemannian gradient descent of
    :func:`frechet_mean` (unit Karcher step, Armijo backtracking, stopped when
    ``|grad F_j| <= max(tol · spread_j, atol)``), run for every row in one array pass
    per step: the rows that have stopped leave the batch. Each row follows the rules
    of a single descent, from the manifold's extrinsic start (the normalized ambient
    mean on spheres, the arithmetic mean on SPD), so the means agree with
    :func:`frechet_mean`'s to the tolerance (not to the last digit: the single
    descent of checked data starts at the domain's center).

    Parameters
    ----------
    manifold : Manifold
        The manifold of the data.
    stack : array, shape ``(R, n, *point_shape)``
        ``R`` data sets of ``n`` points each, validated here.
    tol, atol : float
        Relative and absolute gradient-norm tolerances.
    max_iter : int
        Iteration cap per row.
    warn : bool
        Warn :class:`ConvergenceWarning` naming the rows that did not converge.

    Returns
    -------
    FrechetResults
        The means ``(R, *point_shape)``, their gradient norms, iterations and
        convergence flags.

    Examples
    --------
    >>> import numpy as np
    >>> import pymc_manidp as pmd
    >>> from pymc_manidp.stats.frechet import frechet_means
    >>> P = pmd.SPD(k=2)
    >>> stack = np.stack([[np.diag([np.e**2, 1.0]), np.eye(2), np.eye(2)]] * 3)
    >>> res = frechet_means(P, stack)
    >>> res.means.shape, bool(res.converged.all())
    ((3, 2, 2), True)
    >>> single = pmd.frechet_mean(P, stack[0]).mean
    >>> bool(np.allclose(res.means, single, atol=1e-9))
    True
    """
    M = manifold
    shape = tuple(M.point_shape)
    stack = np.asarray(stack, dtype=float)
    if stack.ndim != len(shape) + 2 or stack.shape[2:] != shape or 0 in stack.shape[:2]:
        raise ValueError(
            f"stack must have shape (R, n, {', '.join(map(str, shape))}) with R, n >= 1, "
            f"got {stack.shape}"
        )
    R, n = stack.shape[:2]
    stack = M.validate(stack.reshape((R * n, *shape))).reshape(stack.shape)
    max_iter = check_positive_int(max_iter, "max_iter")
    tol = check_positive_real(tol, "tol")
    if atol < 0 or not np.isfinite(atol):
        raise ValueError(f"atol must be a finite number >= 0, got {atol}")
    if n == 1:
        x = stack[:, 0].copy()
        return FrechetResults(x, np.zeros(R, int), np.zeros(R), np.ones(R, bool))
    if not isinstance(M, AmbientMeanStart):
        x = stack[:, 0].copy()
    else:
        ambient = stack.mean(axis=1)
        x = stack[:, 0].copy()
        for j in range(R):  # a cheap start, per row (the manifold's rule takes one mean)
            start = M.ambient_mean_start(ambient[j])
            if start is not None:
                x[j] = start
        x = M.validate(x)
    g, gnorm, energy = _stack_grad(M, x, stack)
    floor = 64.0 * np.finfo(float).eps * getattr(M, "radius", 1.0)
    its = np.zeros(R, int)
    converged = np.zeros(R, bool)
    stopped = np.zeros(R, bool)
    while True:
        done = (gnorm <= np.maximum(np.maximum(tol * np.sqrt(2.0 * energy), atol), floor)) | (
            gnorm == 0.0
        )
        converged |= done & ~stopped
        stopped |= done | (its >= max_iter)
        active = np.flatnonzero(~stopped)
        if not len(active):
            break
        # one Armijo line search per active row, all rows halving their steps together
        step = np.ones(len(active))
        pending = np.ones(len(active), bool)
        x_new, g_new = x[active].copy(), g[active].copy()
        gn_new, e_new = gnorm[active].copy(), energy[active].copy()
        while pending.any():
            rows = active[pending]
            s = step[pending].reshape((-1,) + (1,) * len(shape))
            xt = M.validate(M.exp(x[rows], s * g[rows]))
            gt, gnt, et = _stack_grad(M, xt, stack[rows])
            e0 = energy[rows]
            ok = (et <= e0 - 1e-4 * step[pending] * gnorm[rows] ** 2) | (et <= e0 * (1 + 1e-13))
            ok |= step[pending] < 1e-8
            where = np.flatnonzero(pending)
            x_new[where], g_new[where], gn_new[where], e_new[where] = xt, gt, gnt, et
            step[where[~ok]] *= 0.5
            pending[where[ok]] = False
        no_descent = e_new > energy[active] * (1 + 1e-13)
        stopped[active[no_descent]] = True
        moved = active[~no_descent]
        keep = ~no_descent
        x[moved], g[moved], gnorm[moved], energy[moved] = (
            x_new[keep], g_new[keep], gn_new[keep], e_new[keep]
        )  # fmt: skip
        its[moved] += 1
    if warn and not converged.all():
        bad = np.flatnonzero(~converged)
        warnings.warn(
            f"the Fréchet means of {len(bad)} of {R} data sets did not converge (first: row "
            f"{int(bad[0])}, gradient norm {float(gnorm[bad[0]]):.3g}). Check that the data "
            "lie in a ball of radius < r* (the mean may not be unique otherwise).",
            ConvergenceWarning,
            stacklevel=2,
        )
    return FrechetResults(x, its, gnorm, converged)
