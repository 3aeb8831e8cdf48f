r"""Adjoint Jacobi fields in closed form: the gradients of geodesic regression.

Geodesic regression (Fletcher 2013) fits :math:`y \approx \operatorname{Exp}_p(x v)`,
:math:`(p, v) \in TM`, by least squares,
:math:`E(p, v) = \frac1{2n}\sum_i \rho^2(\operatorname{Exp}_p(x_i v), y_i)`. With the
residual :math:`\varepsilon_i = \log_{\hat y_i}(y_i)` at the prediction
:math:`\hat y_i = \operatorname{Exp}_p(x_i v)`,

.. math:: \nabla_p E = -\frac1n \sum_i d_p\mathrm{Exp}^\dagger \varepsilon_i,\qquad
          \nabla_v E = -\frac1n \sum_i x_i\, d_u\mathrm{Exp}^\dagger \varepsilon_i .

On a locally symmetric space (every shipped one) the adjoints are diagonal in the
eigenframe of the Jacobi operator :math:`K = R(\cdot, v)v` on :math:`T_pM`, transported
along the prediction geodesic: with :math:`e_i` the residual transported back to
:math:`p` and eigenvalues :math:`\lambda_j`, the :math:`j`-th component of
:math:`e_i` is multiplied by :math:`C(x_i^2\lambda_j)` (for :math:`\nabla_p`) and
:math:`x_i S(x_i^2\lambda_j)` (for :math:`\nabla_v`), :math:`C(\lambda) =
\cos\sqrt\lambda`, :math:`S(\lambda) = \sin\sqrt\lambda/\sqrt\lambda` (``cosh``,
``sinh`` for :math:`\lambda < 0`). docs/regression.md proves it; the tests check every
space against finite differences of :math:`E`.

This module is the one place that knows each space's Jacobi spectrum and parallel
transport (a space without them is refused by :func:`regression_terms`, naming the
spaces that have them).
"""

from __future__ import annotations

import numpy as np

from pymc_manidp.geometry.euclidean import Euclidean
from pymc_manidp.geometry.hyperbolic import Hyperbolic
from pymc_manidp.geometry.kendall import KendallShape
from pymc_manidp.geometry.rotations import Rotations
from pymc_manidp.geometry.spd import SPD
from pymc_manidp.geometry.sphere import Sphere

__all__ = ["REGRESSION_SPACES", "has_regression_terms", "regression_terms", "transport"]

#: the spaces whose Jacobi spectra and transports this module writes
REGRESSION_SPACES: tuple[type, ...] = (Euclidean, Sphere, Hyperbolic, SPD, Rotations, KendallShape)


def has_regression_terms(manifold) -> bool:
    """Whether :func:`regression_terms` knows ``manifold`` (its exact class: a subclass
    may change the geometry)."""
    return type(manifold) in REGRESSION_SPACES


def _check(manifold):
    if not has_regression_terms(manifold):
        names = ", ".join(c.__name__ for c in REGRESSION_SPACES)
        raise ValueError(
            f"geodesic regression needs the Jacobi spectrum and parallel transport of the "
            f"space in closed form; {manifold} has none (they are written for {names}): "
            "use one of those spaces"
        )


def _sinc(t):
    """``sin t / t`` (1 at 0)."""
    return np.sinc(np.asarray(t, float) / np.pi)


def _sinhc(t):
    """``sinh t / t`` (1 at 0), with a series near 0."""
    t = np.asarray(t, float)
    small = np.abs(t) < 1e-4
    safe = np.where(small, 1.0, t)
    return np.where(small, 1.0 + t * t / 6.0, np.sinh(safe) / safe)


def _unit(v, norm):
    """``v / norm`` where ``norm > 0``, else 0 (a zero slope has no direction; every
    factor is then 1, so the direction is never used)."""
    safe = np.where(norm > 0, norm, 1.0)
    return np.where(norm > 0, v / safe, 0.0)


def regression_terms(manifold, p, v, x, y):
    r"""The per-record pieces of the regression energy and its gradients.

    Parameters
    ----------
    manifold : Manifold
        One of :data:`REGRESSION_SPACES`.
    p : array, shape ``point_shape``
        The footpoint.
    v : array, shape ``point_shape``
        The slope, a tangent vector at ``p``.
    x : array, shape ``(n,)``
        The covariates.
    y : array, shape ``(n, *point_shape)``
        The responses, points of the manifold.

    Returns
    -------
    rho2 : array, shape ``(n,)``
        :math:`\rho^2(\hat y_i, y_i)`.
    gp : array, shape ``(n, *point_shape)``
        :math:`d_p\mathrm{Exp}^\dagger\varepsilon_i` in :math:`T_pM`
        (so :math:`\nabla_pE = -\mathrm{mean}(gp)`).
    gv : array, shape ``(n, *point_shape)``
        :math:`x_i\, d_u\mathrm{Exp}^\dagger\varepsilon_i` in :math:`T_pM`
        (so :math:`\nabla_vE = -\mathrm{mean}(gv)`).
    """
    _check(manifold)
    p = np.asarray(p, float)
    v = np.asarray(v, float)
    x = np.asarray(x, float)
    y = np.asarray(y, float)
    kind = type(manifold)
    if kind is Euclidean:
        eps = y - p - x[:, None] * v
        return np.sum(eps * eps, axis=-1), eps, x[:, None] * eps
    if kind is Sphere:
        return _sphere_terms(manifold, p, v, x, y)
    if kind is Hyperbolic:
        return _hyperbolic_terms(manifold, p, v, x, y)
    if kind is Rotations:
        return _rotation_terms(manifold, p, v, x, y)
    if kind is SPD:
        return _spd_terms(manifold, p, v, x, y)
    return _kendall_terms(manifold, p, v, x, y)


def _constant_curvature(a, u, w, x, cs, sn):
    """``a u + C w`` and ``x (a u + S w)`` from the split of the transported residual."""
    gp = a[:, None] * u + cs[:, None] * w
    gv = x[:, None] * (a[:, None] * u + sn[:, None] * w)
    return gp, gv


def _sphere_terms(M, p, v, x, y):
    # constant curvature 1/R^2: factor 1 along the geodesic, cos(s/R) and sinc(s/R) across;
    # the part of the residual across span{p, u} is unchanged by the transport
    R = M.radius
    nv = float(np.sqrt(v @ v))
    u = _unit(v, nv)
    t = x * nv / R
    yhat = np.cos(t)[:, None] * p + R * np.sin(t)[:, None] * u
    yhat = M.validate(yhat)
    eps = M.log(yhat, y)
    vel = -np.sin(t)[:, None] * p / R + np.cos(t)[:, None] * u  # unit velocity at yhat
    a = np.sum(eps * vel, axis=-1)
    w = eps - a[:, None] * vel
    gp, gv = _constant_curvature(a, u, w, x, np.cos(t), _sinc(t))
    return M.dist(yhat, y) ** 2, gp, gv


def _minkowski(a, b):
    return -a[..., 0] * b[..., 0] + np.sum(a[..., 1:] * b[..., 1:], axis=-1)


def _hyperbolic_terms(M, p, v, x, y):
    nv = float(np.sqrt(max(_minkowski(v, v), 0.0)))
    u = _unit(v, nv)
    s = x * nv
    yhat = M.exp(p, x[:, None] * v)
    eps = M.log(yhat, y)
    vel = np.sinh(s)[:, None] * p + np.cosh(s)[:, None] * u
    a = _minkowski(eps, vel)
    w = eps - a[:, None] * vel
    gp, gv = _constant_curvature(a, u, w, x, np.cosh(s), _sinhc(s))
    return M.dist(yhat, y) ** 2, gp, gv


def _hat(w):
    w = np.asarray(w, float)
    z = np.zeros(w.shape[:-1])
    return np.stack(
        [
            np.stack([z, -w[..., 2], w[..., 1]], -1),
            np.stack([w[..., 2], z, -w[..., 0]], -1),
            np.stack([-w[..., 1], w[..., 0], z], -1),
        ],
        -2,
    )


def _vee(a):
    a = 0.5 * (a - np.swapaxes(a, -1, -2))
    return np.stack([a[..., 2, 1], a[..., 0, 2], a[..., 1, 0]], -1)


def _rodrigues(w):
    """``expm(hat(w))`` ``(..., 3, 3)``."""
    w = np.asarray(w, float)
    t = np.sqrt(np.sum(w * w, axis=-1))[..., None, None]
    K = _hat(w)
    safe = np.where(t > 0, t, 1.0)
    b = np.where(t > 1e-6, (1 - np.cos(safe)) / safe**2, 0.5 - t**2 / 24)
    return np.eye(3) + _sinc(t) * K + b * (K @ K)


def _rotation_terms(M, p, v, x, y):
    # body coordinates: v = p hat(xi), |v| = |xi| in the metric tr/2; the transport from
    # yhat back to p acts on body coordinates as the rotation exp(x hat(xi)/2), which
    # fixes xi; constant curvature 1/4
    xi = _vee(p.T @ v)
    nv = float(np.sqrt(xi @ xi))
    u = _unit(xi, nv)
    yhat = M.exp(p, x[:, None, None] * v)
    eps = M.log(yhat, y)
    eta = _vee(np.swapaxes(yhat, -1, -2) @ eps)
    e = np.einsum("nij,nj->ni", _rodrigues(0.5 * x[:, None] * xi), eta)
    a = e @ u
    w = e - a[:, None] * u
    s = 0.5 * x * nv
    gp, gv = _constant_curvature(a, u, w, x, np.cos(s), _sinc(s))
    return M.dist(yhat, y) ** 2, p @ _hat(gp), p @ _hat(gv)


def _sym_funcs(p):
    mu, U = np.linalg.eigh(p)
    root = (U * np.sqrt(mu)) @ U.T
    iroot = (U / np.sqrt(mu)) @ U.T
    return root, iroot


def _spd_terms(M, p, v, x, y):
    # whitened at p: V = p^-1/2 v p^-1/2 = Q diag(lam) Q^T; the Jacobi operator has
    # eigenvalue 0 on Q E_jj Q^T and -(lam_j - lam_l)^2/4 on Q (E_jl + E_lj) Q^T/sqrt 2,
    # the transport back from yhat is the congruence by expm(-x V/2)
    root, iroot = _sym_funcs(p)
    lam, Q = np.linalg.eigh(iroot @ v @ iroot)
    yhat = root @ (Q * np.exp(x[:, None, None] * lam)) @ Q.T @ root
    yhat = 0.5 * (yhat + np.swapaxes(yhat, -1, -2))
    eps = M.log(yhat, y)
    D = np.exp(-0.5 * x[:, None] * lam)  # (n, k)
    B = Q.T @ (iroot @ eps @ iroot) @ Q
    B = D[:, :, None] * B * D[:, None, :]
    gap = 0.5 * np.abs(x)[:, None, None] * np.abs(lam[:, None] - lam[None, :])
    back = root @ Q
    gp = back @ (np.cosh(gap) * B) @ back.T
    gv = x[:, None, None] * (back @ (_sinhc(gap) * B) @ back.T)
    return M.dist(yhat, y) ** 2, gp, gv


def _times_i(z):
    """Multiplication by ``i`` of configurations ``(..., k, 2)`` read as complex."""
    return np.stack([-z[..., 1], z[..., 0]], axis=-1)


def _frob(a, b):
    return np.sum(a * b, axis=(-2, -1))


def _kendall_terms(M, p, v, x, y):
    # CP^{k-2}: with e1 = v/|v|, eigenvalue 0 on e1, 4|v|^2 on i e1, |v|^2 on the
    # complex-orthogonal complement of {z, e1}; the transport is the sphere's on the
    # real plane {z, e1}, i g -> i e1 (J is parallel), and the identity on the rest
    z = M.validate(p)
    nv = float(np.sqrt(_frob(v, v)))
    e1 = _unit(v, nv)
    s = (x * nv)[:, None, None]
    yhat = np.cos(s) * z + np.sin(s) * e1
    eps = M.log(yhat, y)
    g = -np.sin(s) * z + np.cos(s) * e1
    ig = _times_i(g)
    a = _frob(g, eps)[:, None, None]
    b = _frob(ig, eps)[:, None, None]
    w = eps - a * g - b * ig
    ie1 = _times_i(e1)
    xs = x[:, None, None]
    gp = a * e1 + np.cos(2 * s) * b * ie1 + np.cos(s) * w
    gv = xs * (a * e1 + _sinc(2 * s) * b * ie1 + _sinc(s) * w)
    return M.dist(yhat, y) ** 2, gp, gv


def transport(manifold, p, w, v):
    """Parallel transport of ``v`` ``(*point_shape)`` from ``p`` to ``Exp_p(w)`` along
    the geodesic ``t -> Exp_p(t w)``."""
    _check(manifold)
    p, w, v = (np.asarray(a, float) for a in (p, w, v))
    kind = type(manifold)
    if kind is Euclidean:
        return v
    if kind is Sphere:
        R = manifold.radius
        nw = float(np.sqrt(w @ w))
        u = _unit(w, nw)
        t = nw / R
        return v + (v @ u) * ((np.cos(t) - 1.0) * u - np.sin(t) * p / R)
    if kind is Hyperbolic:
        nw = float(np.sqrt(max(_minkowski(w, w), 0.0)))
        u = _unit(w, nw)
        return v + _minkowski(v, u) * ((np.cosh(nw) - 1.0) * u + np.sinh(nw) * p)
    if kind is Rotations:
        omega, xi = _vee(p.T @ w), _vee(p.T @ v)
        q = manifold.exp(p, w)
        return q @ _hat(_rodrigues(-0.5 * omega) @ xi)
    if kind is SPD:
        root, iroot = _sym_funcs(p)
        lam, Q = np.linalg.eigh(iroot @ w @ iroot)
        E = root @ (Q * np.exp(0.5 * lam)) @ Q.T @ iroot
        out = E @ v @ E.T
        return 0.5 * (out + out.T)
    z = manifold.validate(p)
    nw = float(np.sqrt(_frob(w, w)))
    u = _unit(w, nw)
    alpha, beta = _frob(u, v), _frob(_times_i(u), v)
    rest = v - alpha * u - beta * _times_i(u)
    vel = -np.sin(nw) * z + np.cos(nw) * u
    return alpha * vel + beta * _times_i(vel) + rest
