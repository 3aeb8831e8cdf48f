"""The manifold interface shared by every space in the library.

A manifold object holds configuration (dimension, radius, landmarks); the maths is
in pure module-level functions of each manifold's module. :class:`Manifold` lists
what upper layers may rely on. :class:`ManifoldBase` adds the few members derived
the same way for every space (``max_radius``, chart coordinates); it is the only
base class, one level deep.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np

__all__ = ["Manifold", "ManifoldBase", "max_radius_from"]


def max_radius_from(injectivity_radius: float, kappa_max: float) -> float:
    r"""Return the radius ``r*`` of Assumption 1 (both papers).

    .. math:: r^* = \tfrac12 \min\{\mathrm{inj}\,\mathcal M,\ \pi / (2\sqrt{\kappa_{\max}})\},

    with ``pi / (2 sqrt(kappa))`` read as ``+inf`` when ``kappa_max <= 0``.

    Parameters
    ----------
    injectivity_radius : float
        Injectivity radius of the manifold (``inf`` allowed).
    kappa_max : float
        Upper bound of the sectional curvature.

    Returns
    -------
    float
        ``r*``: data balls must have a radius below it.

    Examples
    --------
    >>> import numpy as np
    >>> float(max_radius_from(np.pi, 1.0))  # the unit sphere: pi/4
    0.7853981633974483
    >>> float(max_radius_from(np.inf, 0.0))
    inf
    """
    curv = np.pi / (2.0 * np.sqrt(kappa_max)) if kappa_max > 0 else np.inf
    return 0.5 * min(injectivity_radius, curv)


@runtime_checkable
class Manifold(Protocol):
    """What the statistics, mechanisms and samplers use of a manifold.

    Points and tangent vectors are NumPy arrays batched over leading axes:
    points ``(..., *point_shape)``, tangent vectors ``(..., *point_shape)``
    (embedding coordinates), chart coordinates ``(..., dim)``.
    """

    dim: int
    point_shape: tuple[int, ...]

    @property
    def injectivity_radius(self) -> float:
        """Injectivity radius: ``exp_x`` is a diffeomorphism on tangent balls this small."""

    @property
    def curvature_bounds(self) -> tuple[float, float]:
        """``(kappa_min, kappa_max)``: bounds of the sectional curvature."""

    @property
    def max_radius(self) -> float:
        """``r*`` of Assumption 1: data radii must stay strictly below it."""

    def validate(self, points):
        """Check points and return them standardized, shape ``(..., *point_shape)``.

        Raises ``ValueError`` naming the first bad row (non-finite, off the manifold, ...).
        """

    def exp(self, x, v):
        """Exponential map ``exp_x(v)``: points ``(..., *point_shape)``."""

    def log(self, x, y):
        """Logarithm ``log_x(y)``, the inverse of ``exp_x``: tangent vectors at ``x``."""

    def dist(self, x, y):
        """Geodesic distance ``rho(x, y)``, shape ``(...)``."""

    def inner(self, x, u, v):
        """Riemannian inner product of tangent vectors ``u, v`` at ``x``, shape ``(...)``."""

    def norm(self, x, v):
        """Riemannian norm of tangent vectors ``v`` at ``x``, shape ``(...)``."""

    def to_tangent(self, x, v):
        """Project ambient vectors ``v`` onto the tangent space at ``x``."""

    def tangent_basis(self, x):
        """Orthonormal frame at ``x``, shape ``(dim, *point_shape)``: the chart's axes."""

    def log_volume_density(self, coords):
        """Log density of the exp chart in normal coordinates ``(..., dim)``, shape ``(...)``."""


class PyTensorTwins(Protocol):
    """The PyTensor versions of the maps, for log-density graphs (same shapes as NumPy).

    Each takes arrays or tensors and returns a tensor; gradients are defined everywhere
    the mechanisms evaluate them (series branches near 0).
    """

    def pt_exp_coords(self, center, coords):
        """``exp_center`` of chart coordinates ``coords`` ``(..., dim)`` (tensor)."""

    def pt_log(self, x, y):
        """``log_x(y)`` as a tensor."""

    def pt_dist(self, x, y):
        """Geodesic distance ``rho(x, y)`` as a tensor, shape ``(...)``."""

    def pt_inner(self, x, u, v):
        """Riemannian inner product at ``x`` as a tensor, shape ``(...)``."""

    def pt_norm(self, x, v):
        """Riemannian norm at ``x`` as a tensor, shape ``(...)``."""

    def pt_log_volume_density(self, coords):
        """Log volume density of the exp chart at coordinates ``(..., dim)``, a tensor."""

    def pt_frechet_gradient_norm(self, x, data):
        """``||sum_i log_x(x_i)||_x`` for points ``x`` ``(..., *point_shape)`` and
        ``data`` ``(n, *point_shape)``, a tensor of shape ``(...)`` (KNG's norm)."""


def _member_docs() -> dict[str, str]:
    docs = {}
    for proto in (Manifold, PyTensorTwins):
        for name, member in vars(proto).items():
            if not name.startswith("_") and getattr(member, "__doc__", None):
                docs[name] = member.__doc__
    return docs


class ManifoldBase:
    """Members derived identically for every manifold.

    Subclasses define ``dim``, ``point_shape``, ``injectivity_radius``,
    ``curvature_bounds``, ``inner`` and ``tangent_basis``.
    """

    dim: int
    point_shape: tuple[int, ...]

    def __init_subclass__(cls, **kwargs):
        # One description per member: a space's exp, log, pt_dist... that has no docstring
        # of its own gets the protocol's (help(), the API reference).
        super().__init_subclass__(**kwargs)
        docs = _member_docs()
        for name, member in vars(cls).items():
            if name in docs and not getattr(member, "__doc__", None):
                if isinstance(member, property):
                    setattr(cls, name, property(member.fget, member.fset, member.fdel, docs[name]))
                elif callable(member):
                    member.__doc__ = docs[name]

    @property
    def max_radius(self) -> float:
        """``r*`` of Assumption 1: data radii must stay strictly below it."""
        return max_radius_from(self.injectivity_radius, self.curvature_bounds[1])

    def norm(self, x, v):
        """Riemannian norm of tangent vectors ``v`` at ``x``, shape ``(...)``."""
        return np.sqrt(np.maximum(self.inner(x, v, v), 0.0))

    def from_coords(self, x, coords):
        """Tangent vector at ``x`` with chart coordinates ``coords`` ``(..., dim)``."""
        basis = self.tangent_basis(x)
        coords = np.asarray(coords, dtype=float)
        n = len(self.point_shape)
        c = coords.reshape(coords.shape + (1,) * n)
        return np.sum(c * basis, axis=-(n + 1))

    def to_coords(self, x, v):
        """Chart coordinates ``(..., dim)`` of the tangent vector ``v`` at ``x``."""
        basis = self.tangent_basis(x)
        n = len(self.point_shape)
        xb = np.expand_dims(x, -(n + 1))
        vb = np.expand_dims(v, -(n + 1))
        return self.inner(xb, basis, vb)

    def exp_coords(self, x, coords):
        """``exp_x`` of the tangent vector with chart coordinates ``coords``."""
        return self.exp(x, self.from_coords(x, coords))

    def frechet_gradient(self, x, data, weights):
        r"""Weighted mean log vector and Fréchet energy at ``x``.

        Returns ``(g, energy)`` with ``g = sum_i w_i log_x(x_i)`` (minus the
        gradient of ``F``) and ``energy = F(x) = 1/2 sum_i w_i rho(x, x_i)^2``;
        ``data`` is ``(n, *point_shape)``, ``weights`` ``(n,)``. Manifolds may
        override this with a cheaper route (SPD does).
        """
        logs = self.log(x, data)
        g = np.tensordot(weights, logs, axes=(0, 0))
        energy = 0.5 * float(np.sum(weights * self.norm(x, logs) ** 2))
        return g, energy

    def log_coords(self, x, y):
        """Chart coordinates at ``x`` of ``log_x(y)``: the inverse of :meth:`exp_coords`."""
        return self.to_coords(x, self.log(x, y))

    def pt_frechet_gradient_norm(self, x, data):
        """``||sum_i log_x(x_i)||_x`` for points ``x`` ``(..., *point_shape)`` and
        ``data`` ``(n, *point_shape)``, a tensor of shape ``(...)`` (KNG's norm).

        This generic route evaluates ``n`` logarithms at ``x``; manifolds override it
        with a cheaper one where the sum has structure (SPD, Kendall, the sphere).
        """
        import pytensor.tensor as pt  # NumPy users of the manifolds need no PyTensor

        x = pt.as_tensor_variable(x)
        nd = len(self.point_shape)
        n = pt.as_tensor_variable(data).shape[0]
        # broadcast explicitly: batched matrix functions infer their output's static
        # shape from the first operand, so a length-1 axis there would drop data rows
        xb = pt.expand_dims(x, -nd - 1)
        xb = pt.broadcast_to(xb, (*[x.shape[i] for i in range(x.ndim - nd)], n, *self.point_shape))
        return self.pt_norm(x, pt.sum(self.pt_log(xb, data), axis=-nd - 1))
