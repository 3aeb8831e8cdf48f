r"""PyTensor twins of geodesic regression's gradient and of a chart of ``TM``, where
the space has constant curvature and lives in a linear ambient space.

On ``Euclidean`` (κ = 0), ``Sphere`` of radius ``R`` (κ = 1/R²) and ``Hyperbolic``
(κ = −1, the hyperboloid with the Minkowski product ⟨·,·⟩), with
:math:`\langle p, p\rangle = 1/\kappa`, every quantity of Theorem 1
(docs/regression.md) is a smooth function of :math:`\lambda = \kappa x^2|v|^2`:
with :math:`C(\lambda) = \cos\sqrt\lambda`, :math:`S(\lambda) = \sin\sqrt\lambda/\sqrt\lambda`
(cosh, sinh for λ < 0),

.. math:: \hat y = C p + S\,x v,\qquad g = -\lambda S\,p + C\,x v

(``g`` the velocity at :math:`\hat y`),

and, :math:`\varepsilon = \log_{\hat y} y` split into its part along ``g`` (transported
back to ``x v``) and the part across (unchanged by the transport),

.. math:: d_p\mathrm{Exp}^\dagger\varepsilon = C\varepsilon
          + \kappa\langle\varepsilon, g\rangle S\,(S\,x v + C p),\qquad
          x\,d_u\mathrm{Exp}^\dagger\varepsilon = x S\varepsilon
          + x\kappa\langle\varepsilon, g\rangle (D\,x v + S^2 p),

:math:`D(\lambda) = (1 - SC)/\lambda`. No unit vector ``v/|v|`` appears, so the graph
and its gradient are finite at ``v = 0`` (the NumPy route, :mod:`.jacobi`, divides by
``|v|``; the tests check that both agree). The algebra: with ``β = ⟨ε, g⟩/|g|²`` the
transported part is ``β x v``, and ``x v − C g = λS(Sxv + Cp)``,
``x v − S g = λ(Dxv + S²p)`` with ``βλ = κ⟨ε, g⟩`` (using ``C² + λS² = 1``).

The chart of ``TM`` (:func:`pt_tm_chart`): footpoints in normal coordinates ``a`` at
a fixed center ``m``, slopes by their coordinates ``b`` in the frame at ``m``
parallel-transported to ``p`` along the geodesic from ``m``:

.. math:: A = \textstyle\sum_k a_kE_k,\ p = C(\lambda_A)m + S(\lambda_A)A,\quad
          v = B + \kappa\langle B, A\rangle\big(F(\lambda_A)A - S(\lambda_A)m\big),

:math:`\lambda_A = \kappa|a|^2`, :math:`F = (C - 1)/\lambda`. Its Jacobian with
respect to the Sasaki volume is the exp chart's volume density ``J(a)`` alone
(docs/regression.md, "NUTS"; checked by finite differences in the tests).
"""

from __future__ import annotations

import numpy as np
import pytensor.tensor as pt

from pymc_manidp.geometry._numba import pt_numerics as ptn
from pymc_manidp.geometry.euclidean import Euclidean
from pymc_manidp.geometry.hyperbolic import Hyperbolic
from pymc_manidp.geometry.sphere import Sphere

__all__ = [
    "TWIN_SPACES",
    "curvature_of",
    "has_regression_twin",
    "pt_regression_gradient",
    "pt_tm_chart",
]

#: the spaces whose regression gradient has a PyTensor twin here
TWIN_SPACES: tuple[type, ...] = (Euclidean, Sphere, Hyperbolic)

_SERIES = 1e-2  # |lambda| below it: the series of F and D (truncation < 1e-15)


def has_regression_twin(manifold) -> bool:
    """Whether this module writes the regression gradient of ``manifold`` in PyTensor
    (its exact class: a subclass may change the geometry)."""
    return type(manifold) in TWIN_SPACES


def curvature_of(manifold) -> float:
    """κ: 0 on ``Euclidean``, ``1/R^2`` on ``Sphere``, −1 on ``Hyperbolic``."""
    if not has_regression_twin(manifold):
        names = ", ".join(c.__name__ for c in TWIN_SPACES)
        raise ValueError(
            f"the PyTensor twin of the regression gradient is written for {names}, not {manifold}"
        )
    if type(manifold) is Sphere:
        return 1.0 / float(manifold.radius) ** 2
    if type(manifold) is Hyperbolic:
        return -1.0
    return 0.0


def _cs(kappa, lam):
    """``C(lambda)``, ``S(lambda)`` (λ has the sign of κ)."""
    if kappa > 0:
        return ptn.cos_sqrt(lam), ptn.sinc_sqrt(lam)
    return ptn.cosh_sqrt(-lam), ptn.sinhc_sqrt(-lam)


def _safe(kappa, lam):
    small = pt.abs(lam) < _SERIES
    return small, pt.switch(small, np.sign(kappa) * 1.0, lam)


def _f(kappa, lam):
    """``F = (C - 1)/lambda``, smooth through 0."""
    small, ls = _safe(kappa, lam)
    c, _ = _cs(kappa, ls)
    series = -0.5 + lam / 24.0 - lam**2 / 720.0 + lam**3 / 40320.0
    return pt.switch(small, series, (c - 1.0) / ls)


def _d(kappa, lam):
    """``D = (1 - S C)/lambda``, ``S C = S(4 lambda)``, smooth through 0."""
    small, ls = _safe(kappa, lam)
    _, s4 = _cs(kappa, 4.0 * ls)
    series = (
        2.0 / 3.0 - 2.0 * lam / 15.0 + 4.0 * lam**2 / 315.0 - 2.0 * lam**3 / 2835.0
    ) + 1024.0 * lam**4 / 39916800.0
    return pt.switch(small, series, (1.0 - s4) / ls)


def pt_regression_gradient(manifold, p, v, x, y):
    r"""``(grad_p E, grad_v E)`` at one ``(p, v)`` (tensors ``point_shape``), the
    covariates ``x`` ``(n,)`` and responses ``y`` ``(n, *point_shape)``: the twin of
    :func:`pymc_manidp.stats.regression.regression_gradient` (without ``E``).

    Smooth in ``(p, v)`` wherever no residual reaches the cut locus, ``v = 0``
    included. Raises ``ValueError`` on a space without a twin (:data:`TWIN_SPACES`).
    """
    kappa = curvature_of(manifold)
    M = manifold
    p, v = pt.as_tensor_variable(p), pt.as_tensor_variable(v)
    x, y = pt.as_tensor_variable(x), pt.as_tensor_variable(y)
    xc = x[:, None]
    xv = xc * v[None, :]  # (n, D)
    if kappa == 0.0:
        eps = M.pt_log(p[None, :] + xv, y)
        return -pt.mean(eps, axis=0), -pt.mean(xc * eps, axis=0)
    lam = kappa * x**2 * M.pt_inner(p, v, v)  # (n,)
    c, s = _cs(kappa, lam)
    c, s, d = c[:, None], s[:, None], _d(kappa, lam)[:, None]
    lam_c = lam[:, None]
    yhat = c * p[None, :] + s * xv
    eps = M.pt_log(yhat, y)
    g = -lam_c * s * p[None, :] + c * xv
    k_eg = kappa * M.pt_inner(yhat, eps, g)[:, None]
    gp = c * eps + k_eg * s * (s * xv + c * p[None, :])
    gv = xc * (s * eps + k_eg * (d * xv + s**2 * p[None, :]))
    return -pt.mean(gp, axis=0), -pt.mean(gv, axis=0)


def pt_tm_chart(manifold, center, basis, a, b):
    r"""The chart of ``TM`` at ``center``: ``(p, v)`` of coordinates ``a``, ``b`` ``(dim,)``.

    ``p = Exp_m(sum_k a_k E_k)`` and ``v`` the vector with coordinates ``b`` in the frame
    ``E_k`` (``basis``, ``(dim, *point_shape)``, orthonormal at ``m``) parallel-transported
    from ``m`` to ``p`` along that geodesic (module docstring). ``|v|_p = |b|`` and
    ``rho(m, p) = |a|`` (below the injectivity radius).
    """
    kappa = curvature_of(manifold)
    m = pt.as_tensor_variable(np.asarray(center, float))
    E = pt.as_tensor_variable(np.asarray(basis, float))
    a, b = pt.as_tensor_variable(a), pt.as_tensor_variable(b)
    A, B = pt.dot(a, E), pt.dot(b, E)
    if kappa == 0.0:
        return m + A, B
    lam = kappa * pt.sum(a**2)  # <A, A> = |a|^2: the frame is orthonormal
    c, s = _cs(kappa, lam)
    p = c * m + s * A
    v = B + kappa * manifold.pt_inner(m, B, A) * (_f(kappa, lam) * A - s * m)
    return p, v
