r"""The sphere :math:`S^d_R = \{x \in \mathbb R^{d+1} : |x| = R\}` with the round metric.

Curvature is :math:`\kappa = 1/R^2`. The papers print
:math:`\exp_p(v) = \cos(|v|) p + \sin(|v|) v/|v|`, which holds only for ``R = 1``;
we use the general form

.. math:: \exp_p(v) = \cos(|v|/R)\, p + R \sin(|v|/R)\, v/|v|,
          \qquad \rho(p, q) = R \arccos(\langle p, q\rangle / R^2),

with the angle computed as ``2 atan2(|p - q|, |p + q|)`` for accuracy.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np
import pytensor.tensor as pt
from scipy import special

from pymc_manidp._validation import (
    as_points,
    check_positive_int,
    check_positive_real,
    check_tol,
    first_bad_row,
)
from pymc_manidp.geometry._numba import pt_numerics as ptn
from pymc_manidp.geometry._numba.numerics import angle_between, log_sinc, sinc, theta_over_sin
from pymc_manidp.geometry.base import ManifoldBase

__all__ = ["Sphere", "is_round_sphere", "log_unit_sphere_volume"]

# Radii whose square (the points' squared norms) and inverse square (the curvature)
# are normal floats, with room for sums of squares of a few coordinates.
_RADIUS_RANGE = (1e-150, 1e150)

# Angles closer than this to pi: the log map is undefined or too ill-conditioned.
_CUT_TOL = 1e-8


def _dot(a, b):
    # einsum: about 3x faster than sum(a * b, axis=-1) over a short last axis
    return np.einsum("...i,...i->...", a, b)


def sphere_exp(x, v, radius):
    """Exponential map on the sphere of radius ``radius``; shapes ``(..., d+1)``."""
    t = np.sqrt(_dot(v, v))[..., None] / radius
    return np.cos(t) * x + sinc(t) * v


def sphere_log(x, y, radius):
    """Log map ``log_x(y)``; raises ``ValueError`` at antipodal pairs (cut locus)."""
    theta = angle_between(x / radius, y / radius)
    cut = np.pi - theta < _CUT_TOL
    if np.any(cut):
        raise ValueError(
            "log is undefined for antipodal points (the cut locus): "
            f"{first_bad_row(cut)}. Keep data inside a ball of radius < pi*R/2."
        )
    theta = theta[..., None]
    u = y - np.cos(theta) * x
    u = u - (_dot(u, x)[..., None] / radius**2) * x  # exact tangency despite cancellation
    return theta_over_sin(theta) * u


def is_round_sphere(M) -> bool:
    """Whether ``M`` is a round sphere of some radius in R^(d+1), asked by its geometry.

    Constant positive curvature (S^1 reports 0: it is flat), points of shape ``(d+1,)``
    and a numeric ``radius``: what code written for the sphere's embedding (closed-form
    gradients, quadratures) needs. Asked by geometry, not class, so a space written
    elsewhere is neither forced through such code nor refused for its class alone.

    >>> is_round_sphere(Sphere(dim=2, radius=2.0)), is_round_sphere(Sphere(dim=1))
    (True, True)
    """
    kmin, kmax = (float(k) for k in M.curvature_bounds)
    return (
        (kmin == kmax > 0 or int(M.dim) == 1)
        and tuple(M.point_shape) == (int(M.dim) + 1,)
        and isinstance(getattr(M, "radius", None), float | int)
    )


def log_unit_sphere_volume(m: int) -> float:
    """``log vol(S^{m-1})``, the unit sphere of ``R^m``: ``2 pi^{m/2} / Gamma(m/2)``.

    Examples
    --------
    >>> bool(np.isclose(np.exp(log_unit_sphere_volume(3)), 4 * np.pi))
    True
    """
    return float(np.log(2.0) + 0.5 * m * np.log(np.pi) - special.gammaln(0.5 * m))


def sphere_basis(x, radius):
    """Orthonormal frame of ``T_x S^d``, shape ``(..., d, d+1)``.

    The frame is the Householder reflection that sends the last axis to
    ``±x/R``, minus that column; the sign is chosen to avoid cancellation.
    """
    u = x / radius
    n = u.shape[-1]
    sgn = np.where(u[..., -1] >= 0, 1.0, -1.0)
    w = u.copy()
    w[..., -1] += sgn
    h = np.eye(n) - 2.0 * w[..., :, None] * w[..., None, :] / _dot(w, w)[..., None, None]
    return h[..., : n - 1, :]


@dataclass(frozen=True)
class Sphere(ManifoldBase):
    r"""The ``dim``-sphere of radius ``radius`` embedded in :math:`\mathbb R^{dim+1}`.

    Parameters
    ----------
    dim : int
        Intrinsic dimension ``d >= 1``; points have shape ``(..., d+1)``.
    radius : float
        Radius ``R > 0``; sectional curvature ``1/R^2`` (``S^1`` is flat).

    Notes
    -----
    Volume density of ``exp_p`` in normal coordinates, ``t = |v|``:

    .. math:: \left(\frac{\sin(t/R)}{t/R}\right)^{d-1}, \qquad t < \pi R.

    Examples
    --------
    >>> import numpy as np
    >>> S = Sphere(dim=2)
    >>> north, east = np.array([0.0, 0, 1]), np.array([1.0, 0, 0])
    >>> float(S.dist(north, east))  # a quarter of a great circle
    1.5707963267948966
    """

    dim: int
    radius: float = 1.0
    point_shape: tuple[int, ...] = field(init=False, repr=False)

    # the volume density (sin(t/R)/(t/R))^(d-1) <= 1 depends on t = |c| only
    exact_sampling = True
    homogeneous = True
    volume_is_radial = True

    name: ClassVar[str] = "sphere"
    fused_kernels: ClassVar[str | None] = "sphere"
    record_layout: ClassVar[str] = "(n, D): the D coordinates of a unit vector (S^(D-1))"

    @classmethod
    def from_record_shape(cls, shape: tuple[int, ...]) -> Sphere:
        if len(shape) != 1 or shape[0] < 2:
            raise ValueError(
                f"sphere data must have shape (n, D) with D >= 2, got records of shape {shape}"
            )
        return cls(dim=shape[0] - 1)

    @classmethod
    def audit_space(cls):
        return cls(dim=2), np.array([0.0, 0.0, 1.0]), np.pi / 8, 400

    @classmethod
    def examples(cls) -> tuple:
        """Small instances, one per kind of geometry the class covers."""
        return (cls(dim=2), cls(dim=1, radius=2.0), cls(dim=4, radius=0.5))

    def __post_init__(self):
        object.__setattr__(self, "dim", check_positive_int(self.dim, "dim"))
        radius = check_positive_real(self.radius, "radius")
        if not _RADIUS_RANGE[0] <= radius <= _RADIUS_RANGE[1]:
            # R^2 (points' squared norms) and 1/R^2 (the curvature) must be normal floats
            raise ValueError(
                f"radius must be in [{_RADIUS_RANGE[0]:g}, {_RADIUS_RANGE[1]:g}], got "
                f"{radius!r}: the squared norms of the points and the curvature 1/R^2 would "
                "overflow or underflow in floating point. Rescale the data (a sphere of "
                "radius R is the unit sphere with distances times R)"
            )
        object.__setattr__(self, "radius", radius)
        object.__setattr__(self, "point_shape", (self.dim + 1,))
        object.__setattr__(self, "gaussian_shape", (self.dim + 1,))
        object.__setattr__(self, "noise_shape", (self.dim + 1,))

    # --- constants ---------------------------------------------------------------
    @property
    def injectivity_radius(self) -> float:
        return np.pi * self.radius

    @property
    def curvature_bounds(self) -> tuple[float, float]:
        # S^1 has no 2-planes: it is locally isometric to the line.
        k = 0.0 if self.dim == 1 else 1.0 / self.radius**2
        return (k, k)

    @property
    def log_volume(self) -> float:
        r""":math:`\log(2\pi^{(d+1)/2} R^d/\Gamma((d+1)/2))`."""
        return log_unit_sphere_volume(self.dim + 1) + self.dim * np.log(self.radius)

    @property
    def mcmc_seconds_per_point(self) -> float:
        """``2e-8 s`` per half dimension: KNG's norm on S^2 measured 27 ns per point
        (NUMBA backend, 2 cores, 2026-11-24, docs/benchmarks/bench_kng_norm.py)."""
        return 2e-8 * max(1.0, self.dim / 2)

    # --- points -------------------------------------------------------------------
    def sample_uniform(self, rng, size=()):
        """Uniform points ``(*size, d+1)``: a normalized standard Gaussian vector."""
        z = rng.standard_normal((*tuple(size), self.dim + 1))
        return self.radius * z / np.linalg.norm(z, axis=-1, keepdims=True)

    @property
    def generic_point(self):
        """``R v/|v|`` with ``v = (1, 2, ..., d+1)``: no pole, no symmetry."""
        v = np.arange(1.0, self.dim + 2)
        return self.radius * v / np.linalg.norm(v)

    def ambient_mean_start(self, m):
        """The mean's projection onto the sphere, unless it is near the origin (None)."""
        norm = np.linalg.norm(m)
        if norm > 0.5 * self.radius:
            return m * (self.radius / norm)
        return None

    def project(self, points):
        """The nearest points of the sphere: each nonzero vector scaled to norm ``R``.

        For records that are directions up to rounding, which
        :meth:`~pymc_manidp.geometry.Sphere.validate` refuses beyond its tolerance. Every
        record is projected on its own.

        Parameters
        ----------
        points : array_like, shape ``(..., dim + 1)``
            Finite real vectors.

        Returns
        -------
        ndarray, shape ``(..., dim + 1)``
            ``R x / |x|``.

        Raises
        ------
        ValueError
            NaN/inf, the wrong shape, or a zero vector (it has no direction), naming
            the first bad row.

        Examples
        --------
        >>> Sphere(dim=1).project([[3.0, 4.0], [0.0, -1e-300]]).round(12).tolist()
        [[0.6, 0.8], [0.0, -1.0]]
        """
        x = as_points(points, self.point_shape)
        # scaled to entries <= 1 first: |x| neither overflows (1e308) nor underflows
        # (subnormals), so the result has norm R to rounding
        scale = np.max(np.abs(x), axis=-1, keepdims=True)
        zero = scale[..., 0] == 0
        if np.any(zero):
            raise ValueError(
                f"cannot project a zero vector onto the sphere: {first_bad_row(zero)} (it "
                "has no direction); drop the record"
            )
        u = x / scale
        return u * (self.radius / np.sqrt(_dot(u, u)))[..., None]

    def validate(self, points, tol: float = 1e-6):
        """Check points and return them projected exactly onto the sphere.

        Raises ``ValueError`` naming the rows whose norm differs from ``R`` by more
        than ``tol * R`` (relative), or that hold NaN/inf or have the wrong shape.
        """
        tol = check_tol(tol)
        x = as_points(points, self.point_shape)
        r = np.sqrt(_dot(x, x))
        off = np.abs(r - self.radius) > tol * self.radius
        if off.any():
            worst = float(np.max(np.abs(r - self.radius)))
            raise ValueError(
                f"points are not on the sphere of radius {self.radius}: {first_bad_row(off)} "
                f"(largest |norm - R| = {worst:.3g}, tolerance {tol * self.radius:.3g}). "
                "Directions rounded or not normalized can be scaled to the sphere, "
                "explicitly and recorded: Sphere.project(x), release(..., project=True) or "
                "--project"
            )
        return x * (self.radius / r)[..., None]

    def to_tangent(self, x, v):
        """Project ambient vectors ``v`` onto ``T_x S``."""
        return v - (_dot(x, v) / self.radius**2)[..., None] * x

    # --- maps ---------------------------------------------------------------------
    def exp(self, x, v):
        return sphere_exp(np.asarray(x, float), np.asarray(v, float), self.radius)

    def log(self, x, y):
        return sphere_log(np.asarray(x, float), np.asarray(y, float), self.radius)

    def dist(self, x, y):
        x, y = np.asarray(x, float), np.asarray(y, float)
        return self.radius * angle_between(x / self.radius, y / self.radius)

    def inner(self, x, u, v):
        return _dot(np.asarray(u, float), np.asarray(v, float))

    def frechet_gradient(self, x, data, weights):
        """Mean log and energy in one fused pass, ``theta = atan2(|u|, <x, y>)``.

        Here ``u = y - cos(theta) x`` is the tangent leg of each data point.

        ``atan2`` of the two legs keeps full accuracy at small angles (where
        ``arccos`` would not) and costs one dot product per datum; the loop is compiled
        (``geometry/_numba/sphere_kernels.py``), with no temporary of the data's size.
        """
        g, energy, _ = self._log_mean(x, data, weights, False)
        return g, energy

    def frechet_gradient_distances(self, x, data, weights):
        """:meth:`frechet_gradient` (the same compiled sum, bit for bit) and the
        distances ``R theta`` by the same ``atan2`` of the two legs."""
        g, energy = self.frechet_gradient(x, data, weights)
        return g, energy, self._distances_atan2(x, data)

    def _distances_atan2(self, x, data):
        x = np.asarray(x, float)
        c = (data @ x) / self.radius**2
        u = data - c[:, None] * x
        su = np.sqrt(np.sum(u * u, axis=-1)) / self.radius
        return self.radius * np.arctan2(su, c)

    frechet_newton = True

    def frechet_gradient_hessian(self, x, data, weights):
        """:meth:`frechet_gradient` and the Hessian of the energy at ``x`` ``(D, D)``
        (ambient coordinates, a map on ``T_x``), summed in the same pass."""
        return self._log_mean(x, data, weights, True)

    def newton_direction(self, x, g, h):
        """``H^{-1} g`` on ``T_x``: the system ``(H + x x^T/R^2) v = g`` keeps ``v`` tangent
        (its extra term is the identity along ``x`` and zero on ``T_x``)."""
        x = np.asarray(x, float)
        full = np.asarray(h, float) + np.outer(x, x) / self.radius**2
        return self.to_tangent(x, np.linalg.solve(0.5 * (full + full.T), np.asarray(g, float)))

    def _log_mean(self, x, data, weights, hessian):
        from pymc_manidp.geometry._numba.sphere_kernels import sphere_log_mean

        g, energy, hess, theta_max = sphere_log_mean(
            np.ascontiguousarray(x, dtype=float),
            np.ascontiguousarray(data, dtype=float),
            np.ascontiguousarray(weights, dtype=float),
            float(self.radius),
            hessian,
        )
        if np.pi - theta_max < _CUT_TOL or not np.isfinite(theta_max):
            raise ValueError("log is undefined for antipodal points (the cut locus)")
        return g, float(energy), hess

    def frechet_gradients(self, xs, data, weights):
        """:meth:`frechet_gradient` at each point of ``xs`` ``(m, D)``: ``(g (m, D),
        energy (m,))``, the same numbers, from one call of the compiled kernel."""
        from pymc_manidp.geometry._numba.sphere_kernels import sphere_log_means

        g, energy, theta_max = sphere_log_means(
            np.ascontiguousarray(xs, dtype=float),
            np.ascontiguousarray(data, dtype=float),
            np.ascontiguousarray(weights, dtype=float),
            float(self.radius),
        )
        if np.any(np.pi - theta_max < _CUT_TOL) or not np.all(np.isfinite(theta_max)):
            raise ValueError("log is undefined for antipodal points (the cut locus)")
        return g, energy

    def stack_frechet_gradient(self, x, data):
        """:meth:`frechet_gradient`'s route (``atan2`` of the two legs) for a stack."""
        x, data = np.asarray(x, float), np.asarray(data, float)
        c = np.einsum("mnj,mj->mn", data, x) / self.radius**2
        u = data - c[..., None] * x[:, None, :]
        su = np.sqrt(np.sum(u * u, axis=-1)) / self.radius
        theta = np.arctan2(su, c)
        if np.any(np.pi - theta < _CUT_TOL):
            raise ValueError("log is undefined for antipodal points (the cut locus)")
        fac = np.where(su > 0, theta / np.where(su > 0, su, 1.0), 1.0)
        g = np.einsum("mn,mnj->mj", fac, u) / data.shape[1]
        return g, 0.5 * np.mean((self.radius * theta) ** 2, axis=1)

    def tangent_basis(self, x):
        """Orthonormal frame at ``x``: shape ``(..., dim, dim+1)``."""
        return sphere_basis(np.asarray(x, float), self.radius)

    def log_volume_density(self, coords):
        coords = np.asarray(coords, float)
        t = np.sqrt(_dot(coords, coords)) / self.radius
        return (self.dim - 1) * log_sinc(t)

    # --- PyTensor twins -------------------------------------------------------------
    def chart_frame(self, origin):
        """The arrays fixing the exp chart at ``origin``: the origin and its frame."""
        origin = np.asarray(origin, float)
        if origin.shape != self.point_shape:
            raise ValueError(f"the chart origin must be one point of shape {self.point_shape}")
        return {"origin": origin, "basis": self.tangent_basis(origin)}

    def pt_exp_frame(self, frame, coords):
        """``exp_origin`` of chart coordinates ``(..., dim)``, the chart given by
        :meth:`chart_frame` (arrays or tensors, e.g. ``pm.Data``)."""
        origin, basis = pt.as_tensor_variable(frame["origin"]), frame["basis"]
        coords = pt.as_tensor_variable(coords)
        v = pt.tensordot(coords, pt.as_tensor_variable(basis), axes=[[-1], [0]])
        s = pt.sum(coords**2, axis=-1, keepdims=True) / self.radius**2
        return ptn.cos_sqrt(s) * origin + ptn.sinc_sqrt(s) * v

    def pt_exp_coords(self, origin, coords):
        """``exp_origin`` of chart coordinates ``coords`` ``(..., dim)`` (tensor)."""
        return self.pt_exp_frame(self.chart_frame(origin), coords)

    def pt_point_checks(self, x):
        """``| |x| - R | < 1e-6 R``."""
        r = self.radius
        return [pt.lt(pt.abs(pt.sqrt(pt.sum(x**2, axis=-1)) - r), 1e-6 * r)]

    def pt_ball_exit(self, frame, omega, ball_center, ball_radius):
        r"""``T(ω)``: the first ``t > 0`` with ``<m0, γ(t)>/R^2 = a cos(t/R) + b sin(t/R)
        = cos(r/R)``, ``γ`` the geodesic from the frame's origin along ``ω``."""
        m0, r = ball_center, ball_radius
        basis = pt.as_tensor_variable(frame["basis"])
        origin = pt.as_tensor_variable(frame["origin"])
        w = pt.tensordot(omega, basis, axes=[[-1], [0]])  # unit tangent vectors at the origin
        big_r = self.radius
        a = pt.sum(origin * m0) / big_r**2
        b = pt.sum(w * m0, axis=-1) / big_r
        amp = pt.sqrt(a**2 + b**2)
        cos_arg = pt.minimum(np.cos(r / big_r) / amp, 1.0)
        return big_r * (pt.arctan2(b, a) + pt.arccos(cos_arg))

    def pt_from_gaussian(self, z):
        """``R z/|z|``: uniform on the sphere for a standard normal ``z`` ``(..., d+1)``."""
        z = pt.as_tensor_variable(z)
        return self.radius * z / pt.sqrt(pt.sum(z**2, axis=-1, keepdims=True))

    def pt_to_gaussian(self, x):
        """``x/R``."""
        return pt.as_tensor_variable(x) / self.radius

    # the moving chart (random footpoints): the tangent projection of ambient noise
    def pt_exp_noise(self, x, w):
        """``exp_x(P_x w)``, ``P_x w = w - <w, x> x/R^2`` (a standard normal ``w`` of
        ``R^(d+1)`` projects to a standard normal on ``T_x``)."""
        x = pt.as_tensor_variable(x)
        v = self._pt_project(x, w)
        s = pt.sum(v**2, axis=-1, keepdims=True) / self.radius**2
        return ptn.cos_sqrt(s) * x + ptn.sinc_sqrt(s) * v

    def pt_noise_norm(self, x, w):
        """``|P_x w|``."""
        return pt.sqrt(pt.sum(self._pt_project(x, w) ** 2, axis=-1) + 1e-300)

    def pt_log_noise(self, x, y):
        """``log_x(y)``: tangent vectors are their own least-norm noise."""
        return self.pt_log(x, y)

    def _pt_project(self, x, w):
        x, w = pt.as_tensor_variable(x), pt.as_tensor_variable(w)
        return w - pt.sum(w * x, axis=-1, keepdims=True) * x / self.radius**2

    def pt_log(self, x, y):
        x, y = pt.as_tensor_variable(x), pt.as_tensor_variable(y)
        c = pt.sum(x * y, axis=-1, keepdims=True) / self.radius**2
        u = y - c * x
        s = pt.sum(u * u, axis=-1, keepdims=True) / self.radius**2
        return ptn.theta_over_sin(s, c) * u

    def pt_dist(self, x, y):
        x, y = pt.as_tensor_variable(x), pt.as_tensor_variable(y)
        d = pt.sqrt(pt.sum((x - y) ** 2, axis=-1) + 1e-300)
        s = pt.sqrt(pt.sum((x + y) ** 2, axis=-1))
        return 2.0 * self.radius * pt.arctan2(d, s)

    def pt_inner(self, x, u, v):
        return pt.sum(pt.as_tensor_variable(u) * v, axis=-1)

    def pt_norm(self, x, v):
        return pt.sqrt(self.pt_inner(x, v, v) + 1e-300)

    def pt_frechet_gradient_norm(self, x, data):
        r"""``||sum_i log_x(x_i)||_x`` (KNG's norm) from matrix-vector products.

        With ``c_i = <x_i, x>/R^2 = cos(theta_i)`` and ``w_i = theta_i / sin(theta_i)``,

        .. math:: \sum_i \log_x(x_i) = \sum_i w_i (x_i - c_i x)
                  = X^\top w - \Big(\sum_i w_i c_i\Big) x,

        so the graph is two matrix-vector products with the ``(n, d+1)`` data ``X``
        (for ``c`` and the sum) and elementwise work on ``n`` scalars, instead of
        ``n`` logarithms of ``(d+1)``-vectors (the hot loop of NUTS: one value and
        gradient per leapfrog step). Assumes ``x`` is on the sphere
        (``sin^2 = 1 - c^2``), as the exp chart keeps it.
        """
        x, data = pt.as_tensor_variable(x), pt.as_tensor_variable(data)
        c = pt.tensordot(x, data, axes=[[-1], [-1]]) / self.radius**2  # (..., n)
        # sin^2 as (1 - c)(1 + c): exact given c near c = 1, where 1 - c*c would add
        # its own rounding; the ~eps left from c moves theta/sin = 1 + s/6 + ... by
        # ~eps/6. At c = 1 (a datum at x) theta_over_sin's series branch keeps the
        # gradient finite, also when rounding makes s slightly negative.
        w = ptn.theta_over_sin((1.0 - c) * (1.0 + c), c)
        total = pt.tensordot(w, data, axes=[[-1], [0]]) - pt.sum(w * c, axis=-1)[..., None] * x
        return self.pt_norm(x, total)

    def pt_log_volume_density(self, coords):
        coords = pt.as_tensor_variable(coords)
        s = pt.sum(coords**2, axis=-1) / self.radius**2
        return (self.dim - 1) * ptn.log_sinc_sqrt(s)

    # --- ambient embedding in R^(dim+1) (the Euclidean baselines) -------------------
    @property
    def ambient_dim(self) -> int:
        """``D = dim + 1``: the points are vectors of :math:`\\mathbb R^D`."""
        return self.dim + 1

    def to_ambient(self, points) -> np.ndarray:
        """Ambient coordinates ``(..., D)`` of points: the vectors themselves."""
        return np.asarray(points, float)

    def from_ambient(self, y) -> np.ndarray:
        """Ambient vectors ``(..., D)`` as arrays of the points' shape (not projected:
        see :meth:`project_ambient`)."""
        return np.asarray(y, float)

    def ambient_radius(self, center, radius: float) -> float:
        """The radius of the smallest ambient ball around ``center`` that holds the
        geodesic ball ``B_radius(center)``: the chord ``2R sin(radius / 2R)`` (2021
        supplement §1.3.2), for ``radius <= pi R``.

        Examples
        --------
        >>> round(Sphere(dim=2).ambient_radius([0, 0, 1.0], np.pi / 2), 6)  # sqrt(2)
        1.414214
        """
        r = check_positive_real(radius, "radius")
        if r > np.pi * self.radius:
            raise ValueError(f"radius must be at most pi R = {np.pi * self.radius:.6g}, got {r}")
        return float(2.0 * self.radius * np.sin(r / (2.0 * self.radius)))

    def project_ambient(self, y) -> np.ndarray:
        """The nearest points ``R y / |y|`` on the sphere of ambient vectors ``y``
        ``(..., D)``; ``y = 0`` (no nearest point) is a ``FloatingPointError``."""
        y = np.asarray(y, float)
        norm = np.linalg.norm(y, axis=-1, keepdims=True)
        if np.any(norm == 0.0):
            raise FloatingPointError("the ambient vector is exactly 0: it has no nearest point")
        return self.radius * y / norm
