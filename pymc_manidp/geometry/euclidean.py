r"""Euclidean space :math:`\mathbb R^d`: flat, the baseline every manifold reduces to."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np
import pytensor.tensor as pt

from pymc_manidp._validation import as_points, check_positive_int
from pymc_manidp.geometry.base import ManifoldBase

__all__ = ["Euclidean"]


@dataclass(frozen=True)
class Euclidean(ManifoldBase):
    r"""Euclidean space of dimension ``dim``; points ``(..., dim)``.

    ``exp_x(v) = x + v``, ``log_x(y) = y - x``; the chart frame is the standard
    basis and the volume density is 1.

    Parameters
    ----------
    dim : int
        Dimension, at least 1.

    Examples
    --------
    >>> E = Euclidean(dim=2)
    >>> float(E.dist([0.0, 0.0], [3.0, 4.0]))
    5.0
    """

    dim: int
    point_shape: tuple[int, ...] = field(init=False, repr=False)

    # exp is an isometry: the volume density is 1, the Fréchet mean the arithmetic mean
    exact_sampling = True
    homogeneous = True
    volume_is_radial = True
    ambient_mean_is_frechet = True

    name: ClassVar[str] = "euclidean"
    fused_kernels: ClassVar[str | None] = "euclidean"
    record_layout: ClassVar[str] = "(n, d): d coordinates"

    @classmethod
    def from_record_shape(cls, shape: tuple[int, ...]) -> Euclidean:
        if len(shape) != 1:
            raise ValueError(f"euclidean data must have shape (n, d), got records of shape {shape}")
        return cls(dim=shape[0])

    @classmethod
    def examples(cls) -> tuple:
        """Small instances, one per kind of geometry the class covers."""
        return (cls(dim=1), cls(dim=3))

    def __post_init__(self):
        object.__setattr__(self, "dim", check_positive_int(self.dim, "dim"))
        object.__setattr__(self, "point_shape", (self.dim,))
        object.__setattr__(self, "noise_shape", (self.dim,))

    @property
    def injectivity_radius(self) -> float:
        return np.inf

    @property
    def curvature_bounds(self) -> tuple[float, float]:
        return (0.0, 0.0)

    @property
    def origin(self):
        """The origin ``0``."""
        return np.zeros(self.dim)

    @property
    def mcmc_seconds_per_point(self) -> float:
        """``5e-9 s`` per half dimension, as Kendall shapes (a sum of differences)."""
        return 5e-9 * max(1.0, self.dim / 2)

    def validate(self, points):
        return as_points(points, self.point_shape)

    def to_tangent(self, x, v):
        return np.asarray(v, float)

    def exp(self, x, v):
        return np.asarray(x, float) + np.asarray(v, float)

    def log(self, x, y):
        return np.asarray(y, float) - np.asarray(x, float)

    def dist(self, x, y):
        return np.sqrt(np.sum((np.asarray(y, float) - np.asarray(x, float)) ** 2, axis=-1))

    def inner(self, x, u, v):
        return np.sum(np.asarray(u, float) * np.asarray(v, float), axis=-1)

    def tangent_basis(self, x):
        x = np.asarray(x, float)
        return np.broadcast_to(np.eye(self.dim), (*x.shape[:-1], self.dim, self.dim)).copy()

    def log_volume_density(self, coords):
        return np.zeros(np.shape(coords)[:-1])

    # --- PyTensor twins -------------------------------------------------------------
    def chart_frame(self, origin):
        """The arrays fixing the exp chart at ``origin``: the origin itself."""
        return {"origin": np.asarray(origin, float)}

    def pt_exp_frame(self, frame, coords):
        """``origin + coords``, the origin given by :meth:`chart_frame` (array or tensor)."""
        return pt.as_tensor_variable(frame["origin"]) + coords

    def pt_exp_coords(self, origin, coords):
        return self.pt_exp_frame(self.chart_frame(origin), coords)

    def pt_log_frame(self, frame, x):
        """``x - origin``."""
        return pt.as_tensor_variable(x) - pt.as_tensor_variable(frame["origin"])

    def pt_ball_exit(self, frame, omega, ball_center, ball_radius):
        """``T(ω)``: the positive root of ``|c + tω - m0| = r``."""
        off = pt.as_tensor_variable(frame["origin"]) - ball_center
        proj = pt.sum(omega * off, axis=-1)
        r = ball_radius
        return -proj + pt.sqrt(pt.maximum(proj**2 - pt.sum(off**2) + r * r, 0.0))

    def pt_log(self, x, y):
        return pt.as_tensor_variable(y) - x

    # the moving chart (random footpoints): the noise is the tangent vector
    def pt_exp_noise(self, x, w):
        """``x + w``."""
        return pt.as_tensor_variable(x) + w

    def pt_noise_norm(self, x, w):
        """``|w|``."""
        return pt.sqrt(pt.sum(pt.as_tensor_variable(w) ** 2, axis=-1) + 1e-300)

    def pt_log_noise(self, x, y):
        """``y - x``."""
        return self.pt_log(x, y)

    def pt_dist(self, x, y):
        return pt.sqrt(pt.sum((pt.as_tensor_variable(y) - x) ** 2, axis=-1) + 1e-300)

    def pt_inner(self, x, u, v):
        return pt.sum(pt.as_tensor_variable(u) * v, axis=-1)

    def pt_norm(self, x, v):
        return pt.sqrt(self.pt_inner(x, v, v) + 1e-300)

    def pt_log_volume_density(self, coords):
        return pt.zeros_like(pt.as_tensor_variable(coords)[..., 0])

    # --- ambient embedding: the space itself (the Euclidean baselines) --------------
    @property
    def ambient_dim(self) -> int:
        """``D = dim``."""
        return self.dim

    def to_ambient(self, points) -> np.ndarray:
        """Ambient coordinates ``(..., D)`` of points: the points themselves."""
        return np.asarray(points, float)

    def from_ambient(self, y) -> np.ndarray:
        """Points from ambient coordinates: the identity."""
        return np.asarray(y, float)

    def ambient_radius(self, center, radius: float) -> float:
        """The ambient ball holding ``B_radius(center)`` is that ball: ``radius``."""
        return float(radius)
