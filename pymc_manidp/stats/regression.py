r"""Geodesic regression (Fletcher 2013): the least-squares geodesic through the data.

Records :math:`(x_i, y_i)`, a real covariate and a point of the manifold; parameters
:math:`(p, v) \in TM`, the footpoint and the slope. The fit minimizes

.. math:: E(p, v) = \frac1{2n}\sum_{i=1}^n \rho^2\big(\operatorname{Exp}_p(x_i v), y_i\big)

by Riemannian descent on :math:`TM` with the closed-form adjoint-Jacobi gradients
(:mod:`pymc_manidp.geometry.jacobi`), preconditioned by the covariates' Gram matrix
:math:`G = [[1, \bar x], [\bar x, \overline{x^2}]]` (the Hessian of :math:`E` on
:math:`\mathbb R^d` is :math:`G \otimes I`, so in flat space one step is exact), with
Armijo backtracking. The sensitivity of the gradient for KNG is
:func:`regression_sensitivity` (proofs in docs/regression.md).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np

from pymc_manidp._validation import (
    as_points,
    check_nonnegative_real,
    check_positive_int,
    check_positive_real,
    check_real_data,
    check_tol,
)
from pymc_manidp.geometry.base import check_manifold
from pymc_manidp.geometry.jacobi import has_regression_terms, regression_terms, transport
from pymc_manidp.stats import reductions
from pymc_manidp.stats.frechet import ConvergenceWarning, frechet_mean, validated_data

#: the largest covariate magnitude (its square and the Gram matrix stay finite)
MAX_COVARIATE = 1e100
#: the smallest relative determinant of the Gram matrix of (1, x) the fit accepts
GRAM_RTOL = 1e-12

__all__ = [
    "RegressionResult",
    "check_covariates",
    "covariate_gram",
    "geodesic_regression",
    "regression_energy",
    "regression_gradient",
    "regression_sensitivity",
]


@dataclass(frozen=True)
class RegressionResult:
    """Outcome of :func:`geodesic_regression`.

    Attributes
    ----------
    footpoint : ndarray, shape ``point_shape``
        The fitted footpoint :math:`\\hat p` (the prediction at ``x = 0``).
    slope : ndarray, shape ``point_shape``
        The fitted slope :math:`\\hat v \\in T_{\\hat p}M`.
    energy : float
        :math:`E(\\hat p, \\hat v)`.
    grad_norm : float
        :math:`\\|(\\nabla_pE, \\nabla_vE)\\|` at the fit.
    iterations : int
    converged : bool
        Whether the stopping rule was met.
    """

    footpoint: np.ndarray
    slope: np.ndarray
    energy: float
    grad_norm: float
    iterations: int
    converged: bool


def check_covariates(x, n: int | None = None, bound: float | None = None) -> np.ndarray:
    """The covariates as a float array ``(n,)``, checked.

    ``TypeError`` for non-real input; ``ValueError`` for a wrong shape, non-finite
    values, fewer than two records, a single distinct value (the slope would not be
    identifiable), a length other than ``n``, or a value beyond ``bound``.
    """
    check_real_data(x, "covariates")
    arr = np.asarray(x)
    if arr.ndim != 1:
        raise ValueError(
            f"covariates must be a 1-d array (one real per record), got shape {arr.shape}"
        )
    arr = arr.astype(float)
    if not np.isfinite(arr).all():
        bad = int(np.flatnonzero(~np.isfinite(arr))[0])
        raise ValueError(f"covariates contain NaN or infinite values (first at row {bad})")
    if n is not None and len(arr) != n:
        raise ValueError(
            f"covariates and responses must have one row per record: {len(arr)} covariates, "
            f"{n} responses"
        )
    if len(arr) < 2:
        raise ValueError(f"geodesic regression needs at least 2 records, got {len(arr)}")
    if np.max(np.abs(arr)) > MAX_COVARIATE:
        raise ValueError(
            f"covariates must have |x| <= {MAX_COVARIATE:g}, got {float(np.max(np.abs(arr))):.6g}: "
            "their squares would overflow; rescale them by a public constant"
        )
    if arr.min() == arr.max():  # not np.ptp: no subtraction to overflow
        raise ValueError(
            "the covariates take a single value: the slope is not identifiable (the Gram "
            "matrix of (1, x) is singular); use records with at least two distinct covariates"
        )
    G = covariate_gram(arr)
    # the relative determinant is the squared spread over the scale: below it the slope
    # is fixed by rounding, not by the data
    scale = 1.0 + G[1, 1]  # divided twice, not squared: (1 + G11)^2 overflows at |x| ~ 1e77
    if np.linalg.det(G) / scale / scale <= GRAM_RTOL:
        raise ValueError(
            "the covariates barely vary (their spread is below 1e-6 of their size): the "
            "slope is not identifiable in floating point; center or rescale them by public "
            "constants, or use records with distinct covariates"
        )
    if bound is not None and np.max(np.abs(arr)) > bound:
        bad = int(np.argmax(np.abs(arr) > bound))
        raise ValueError(
            f"covariate {float(arr[bad])!r} (row {bad}) exceeds the public covariate bound "
            f"{bound!r} (|x_i| <= covariate_bound): raise covariate_bound (it enters the "
            "sensitivity) or rescale the covariates by a public constant"
        )
    return arr


def covariate_gram(x) -> np.ndarray:
    """``G = [[1, mean x], [mean x, mean x^2]]`` ``(2, 2)``: the Hessian of ``E`` in flat
    space is ``G (x) I``."""
    x = np.asarray(x, float)
    m1, m2 = float(np.mean(x)), float(np.mean(x * x))
    return np.array([[1.0, m1], [m1, m2]])


def regression_gradient(manifold, p, v, x, y):
    r"""``(E, grad_p E, grad_v E)`` at ``(p, v)``.

    Parameters
    ----------
    manifold : Manifold
    p, v : array, shape ``point_shape``
        Footpoint and slope (a tangent vector at ``p``).
    x : array, shape ``(n,)``
    y : array or dask.array.Array, shape ``(n, *point_shape)``
        Validated responses; a Dask array is read in one pass
        (:func:`pymc_manidp.stats.reductions.regression_sums`), never gathered.

    Returns
    -------
    energy : float
    grad_p, grad_v : ndarray, shape ``point_shape``
        The horizontal (``v`` parallel-transported as ``p`` moves) and vertical
        gradients, both in :math:`T_pM`.

    Examples
    --------
    >>> import numpy as np
    >>> import pymc_manidp as pmd
    >>> from pymc_manidp.stats.regression import regression_gradient
    >>> M = pmd.Euclidean(dim=1)
    >>> E, gp, gv = regression_gradient(M, [0.0], [1.0], np.array([0.0, 1.0]), [[0.0], [2.0]])
    >>> float(E), gp.tolist(), gv.tolist()  # residuals 0 and 1
    (0.25, [-0.5], [-0.5])
    """
    E, gp, gv = reductions.regression_sums(manifold, p, v, x, y)
    return float(E), gp, gv


def regression_energy(manifold, p, v, x, y) -> float:
    """``E(p, v) = (1/2n) sum_i rho^2(Exp_p(x_i v), y_i)``."""
    return regression_gradient(manifold, p, v, x, y)[0]


def _joint_norm(M, p, gp, gv) -> float:
    return float(math.sqrt(max(float(M.inner(p, gp, gp)) + float(M.inner(p, gv, gv)), 0.0)))


def _check_init(M, init):
    """``init = (p0, v0)``: one point and one ambient vector of the point's shape, real
    and finite (TypeError/ValueError naming ``init``, not an OverflowError from a
    float conversion of 10**400 or an unpacking error)."""
    if isinstance(init, str | bytes | dict) or not hasattr(init, "__len__") or len(init) != 2:
        raise TypeError(f"init must be a pair (p0, v0) of a footpoint and a slope, got {init!r}")
    shape = tuple(M.point_shape)
    p = M.validate(as_points(M.coerce(init[0]), shape, "init's footpoint p0"))
    v = as_points(init[1], shape, "init's slope v0")
    if p.shape != shape or v.shape != shape:
        raise ValueError(
            f"init must be (p0, v0), each of shape {shape}: got {p.shape} and {v.shape}"
        )
    return p, M.to_tangent(p, v)


def geodesic_regression(
    manifold,
    x,
    y,
    *,
    tol: float = 1e-10,
    atol: float = 1e-12,
    max_iter: int = 500,
    init=None,
) -> RegressionResult:
    r"""The least-squares geodesic :math:`y \approx \operatorname{Exp}_p(x v)` through the data.

    Parameters
    ----------
    manifold : Manifold
        Any shipped space (``Euclidean``, ``Sphere``, ``Hyperbolic``, ``SPD``,
        ``Rotations``, ``KendallShape``).
    x : array_like, shape ``(n,)``
        Real covariates, at least two distinct values.
    y : array_like or dask.array.Array, shape ``(n, *point_shape)``
        Responses, points of the manifold. A Dask array chunked along ``n`` is never
        gathered: each evaluation of the energy and gradients is one pass
        (:mod:`pymc_manidp.stats.reductions`), as in :func:`~pymc_manidp.frechet_mean`;
        what ``DataDomain.check`` returned is not validated again.
    tol, atol : float
        Stop when :math:`\|(\nabla_pE, \nabla_vE)\| \le \max(\mathrm{tol}\cdot s,
        \mathrm{atol})`, :math:`s = \sqrt{2E}` the root mean square residual (the
        Fréchet mean's rule); ``atol`` is the floor that noise-free data reach.
    max_iter : int
        Iteration cap; not converging within it returns ``converged=False`` with a
        :class:`~pymc_manidp.stats.ConvergenceWarning`.
    init : tuple of arrays, optional
        ``(p0, v0)``; default: the Fréchet mean of the responses and a zero slope.

    Returns
    -------
    RegressionResult
        The fitted footpoint and slope, the energy and gradient norm there, and
        whether the stopping rule was met.

    Examples
    --------
    >>> import numpy as np
    >>> import pymc_manidp as pmd
    >>> S = pmd.Sphere(dim=2)
    >>> p, v = np.array([1.0, 0, 0]), np.array([0, np.pi / 4, 0])
    >>> x = np.linspace(-1, 1, 11)
    >>> y = S.exp(p, x[:, None] * v)
    >>> fit = pmd.geodesic_regression(S, x, y)
    >>> fit.converged, np.allclose(fit.footpoint, p), np.allclose(fit.slope, v)
    (True, True, True)
    """
    M = check_manifold(manifold)
    if not has_regression_terms(M):
        regression_terms(M, None, None, None, None)  # raises, naming the spaces
    if not reductions.is_dask(y) and not isinstance(y, reductions.CheckedData):
        y = M.coerce(y)
    y, _, n = validated_data(M, y, "geodesic regression")
    x = check_covariates(np.asarray(x) if reductions.is_dask(x) else x, n=n)
    tol = check_tol(tol)
    atol = check_nonnegative_real(atol, "atol")
    max_iter = check_positive_int(max_iter, "max_iter")
    if init is None:
        p = frechet_mean(M, y).mean
        v = np.zeros_like(p)
    else:
        p, v = _check_init(M, init)
    Ginv = np.linalg.inv(covariate_gram(x))
    E, gp, gv = regression_gradient(M, p, v, x, y)
    gnorm = _joint_norm(M, p, gp, gv)
    it = 0
    converged = gnorm <= max(tol * math.sqrt(2 * E), atol)
    while not converged and it < max_iter:
        it += 1
        # Gauss-Newton direction in flat space: -(G^-1 (x) I) grad
        dp = -(Ginv[0, 0] * gp + Ginv[0, 1] * gv)
        dv = -(Ginv[1, 0] * gp + Ginv[1, 1] * gv)
        slope = float(M.inner(p, gp, dp) + M.inner(p, gv, dv))  # < 0: G^-1 is positive
        step, moved = 1.0, False
        while step > 1e-12:
            try:
                q = M.validate(M.exp(p, step * dp)[None])[0]
                w = M.to_tangent(q, transport(M, p, step * dp, v + step * dv))
                E_new, gp_new, gv_new = regression_gradient(M, q, w, x, y)
            except ValueError:  # a trial step reached a cut locus: shorter
                step *= 0.5
                continue
            if E_new <= E + 1e-4 * step * slope:
                moved = True
                break
            # near the minimum the predicted decrease falls below the rounding of E:
            # there a step that shrinks the gradient is progress (E cannot tell)
            if -step * slope < 64 * np.finfo(float).eps * E:
                if _joint_norm(M, q, gp_new, gv_new) < gnorm:
                    moved = True
                    break
            step *= 0.5
        if not moved:
            break
        p, v, E, gp, gv = q, w, E_new, gp_new, gv_new
        gnorm = _joint_norm(M, p, gp, gv)
        converged = gnorm <= max(tol * math.sqrt(2 * E), atol)
    if not converged:
        warnings.warn(
            f"geodesic regression did not converge in {it} iterations: gradient norm "
            f"{gnorm:.3g} > tolerance {max(tol * math.sqrt(2 * E), atol):.3g}. Raise "
            "max_iter, start nearer (init=), or check that the responses lie in a ball "
            "well inside the injectivity radius (the least-squares geodesic may not be "
            "unique otherwise)",
            ConvergenceWarning,
            stacklevel=2,
        )
    return RegressionResult(
        footpoint=p, slope=v, energy=float(E), grad_norm=gnorm, iterations=it, converged=converged
    )


def regression_sensitivity(
    manifold,
    n: int,
    *,
    radius: float,
    covariate_bound: float,
    slope_bound: float,
    footpoint_radius: float | None = None,
) -> tuple[float, float]:
    r"""``(Delta_p, Delta_v)``: the replace-one sensitivities of ``grad_p E`` and ``grad_v E``.

    For covariates public and fixed, responses in the public ball ``B_r(m)``, slopes
    ``|v| <= V``, footpoints in ``B_R(m)``, ``L = X V`` (docs/regression.md, Theorem 1):

    - on a Hadamard space (``kappa_max <= 0``, infinite injectivity radius: ``Euclidean``,
      ``Hyperbolic``, ``SPD``) the residual of the replaced record moves by at most
      ``2r`` (the log map at any point is 1-Lipschitz there), so
      ``Delta_p = 2 r A/n`` and ``Delta_v = 2 r X B/n``;
    - otherwise the residuals are at most ``tau = r + R + L`` (below the injectivity
      radius, checked by the mechanism) and ``log_q`` is ``f``-Lipschitz on the ball,
      ``f = sqrt(k) tau/sin(sqrt(k) tau)``, ``k = kappa_max`` (Rauch), so the residual
      moves by at most ``s = 2 min(tau, r f)``: ``Delta_p = s A/n``, ``Delta_v = s X B/n``;

    with ``A = cosh(c L)``, ``B = sinh(c L)/(c L)``, ``c = sqrt(-kappa_min)`` when
    ``kappa_min < 0`` and ``A = B = 1`` otherwise (the Jacobi factors' largest values).

    Parameters
    ----------
    manifold : Manifold
        A locally symmetric space (its ``curvature_bounds`` and
        ``injectivity_radius`` are read).
    n : int
        The number of records.
    radius : float
        ``r``: the responses lie in the public ball ``B_r(m)``.
    covariate_bound : float
        ``X >= |x_i|``.
    slope_bound : float
        ``V >= |v|`` on the law's domain.
    footpoint_radius : float, optional
        ``R``: footpoints in ``B_R(m)``; required unless the space is Hadamard.

    Returns
    -------
    tuple of float
        ``(Delta_p, Delta_v)``; the joint sensitivity is their Euclidean norm.

    Examples
    --------
    >>> import pymc_manidp as pmd
    >>> from pymc_manidp.stats.regression import regression_sensitivity
    >>> regression_sensitivity(pmd.Euclidean(dim=2), 10, radius=1.0, covariate_bound=2.0,
    ...                        slope_bound=1.0)
    (0.2, 0.4)
    """
    n = check_positive_int(n, "n")
    r = check_positive_real(radius, "radius")
    X = check_positive_real(covariate_bound, "covariate_bound")
    V = check_positive_real(slope_bound, "slope_bound")
    L = X * V
    kmin, kmax = (float(k) for k in manifold.curvature_bounds)
    if kmax <= 0 and math.isinf(float(manifold.injectivity_radius)):
        spread = 2.0 * r
    else:
        if footpoint_radius is None:
            raise ValueError(
                f"on {manifold} the residuals are bounded through the footpoint ball: pass "
                "footpoint_radius"
            )
        tau = r + check_positive_real(footpoint_radius, "footpoint_radius") + L
        # |log_q y - log_q y'| <= rho(y, y') sup |d log_q| on the ball, and by Rauch
        # |d log_q| <= sqrt(k) t/sin(sqrt(k) t) at distance t <= tau from q
        a = math.sqrt(kmax) * tau if kmax > 0 else 0.0
        if a >= math.pi:  # beyond the conjugate radius Rauch bounds nothing: 2 tau only
            spread = 2.0 * tau
        else:
            spread = 2.0 * min(tau, r * (a / math.sin(a) if a > 0 else 1.0))
    c = math.sqrt(-kmin) if kmin < 0 else 0.0
    A = math.cosh(c * L)
    B = math.sinh(c * L) / (c * L) if c * L > 0 else 1.0
    return spread * A / n, spread * X * B / n
