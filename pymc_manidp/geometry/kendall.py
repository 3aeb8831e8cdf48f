r"""Kendall's shape space of planar configurations of ``k`` landmarks.

A raw configuration ``(..., k, 2)`` is centered and scaled to unit Frobenius norm
(a *pre-shape*); viewed as a complex vector ``z`` the shape space is
:math:`\mathbb{CP}^{k-2}` with

.. math:: \rho(z, w) = \arccos |\langle z, w\rangle|, \qquad
          \langle z, w\rangle = \textstyle\sum_j \bar z_j w_j .

Points are represented by pre-shapes ``(..., k, 2)``; tangent vectors are
*horizontal* pre-shape vectors (centered, orthogonal to ``z`` and ``i z``). Log and
distance rotate the second argument optimally onto the first (by the phase of
:math:`\langle z, w\rangle`), so rotating, translating or scaling either input
changes nothing. Dimension ``2k - 4``, injectivity radius ``pi/2``, sectional
curvature in ``[1, 4]`` (``4`` for ``k = 3``, where the space is a sphere of radius
1/2).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np
import pytensor.tensor as pt
from scipy import special

from pymc_manidp._validation import as_points, check_positive_int, first_bad_row
from pymc_manidp.geometry._numba import pt_numerics as ptn
from pymc_manidp.geometry._numba.numerics import angle_between, log_sinc, sinc, theta_over_sin
from pymc_manidp.geometry.base import ManifoldBase

__all__ = ["KendallShape", "helmert", "preshape"]

# Landmark spreads below this (relative to the coordinates' size) are degenerate.
_DEGENERATE_TOL = 1e-12
# |<z, w>| below this: the shapes are at distance pi/2, the cut locus of log.
_CUT_TOL = 1e-8


def helmert(k: int) -> np.ndarray:
    """Helmert sub-matrix ``(k-1, k)``: orthonormal rows orthogonal to ``ones(k)``."""
    h = np.zeros((k - 1, k))
    for j in range(1, k):
        h[j - 1, :j] = 1.0 / np.sqrt(j * (j + 1))
        h[j - 1, j] = -j / np.sqrt(j * (j + 1))
    return h


def _frob(a, b):
    return np.sum(a * b, axis=(-2, -1))


def _center_scale(x):
    xc = x - np.mean(x, axis=-2, keepdims=True)
    size = np.sqrt(_frob(xc, xc))
    return xc, size


def preshape(x):
    """Center and scale raw configurations ``(..., k, 2)`` to unit norm.

    Raises ``ValueError`` for degenerate configurations (all landmarks equal).
    """
    x = np.asarray(x, float)
    ref = np.max(np.abs(x), axis=(-2, -1))
    # a shape is scale-free: divide by the largest coordinate first, so that huge
    # configurations (1e200) do not overflow when squared
    unit = np.where(ref > 0, ref, 1.0)
    xc, size = _center_scale(x / unit[..., None, None])
    bad = size <= _DEGENERATE_TOL * np.maximum(ref, 1.0) / unit
    if np.any(bad):
        raise ValueError(
            "degenerate configurations (all landmarks at one place) have no shape: "
            f"{first_bad_row(bad)}"
        )
    return xc / size[..., None, None]


def _to_complex(x):
    return x[..., 0] + 1j * x[..., 1]


def _to_real(z):
    return np.stack([z.real, z.imag], axis=-1)


def _pt_rot90(x):
    """``J x``: multiplication by ``i`` of ``(..., k, 2)`` tensors read as complex vectors."""
    return pt.stack([-x[..., 1], x[..., 0]], axis=-1)


def _align(z, w):
    """Rotate pre-shapes ``w`` optimally onto ``z``; return them and ``|<z, w>|``."""
    zc, wc = _to_complex(z), _to_complex(w)
    a = np.sum(np.conj(zc) * wc, axis=-1)
    mod = np.abs(a)
    phase = np.where(mod > 0, np.conj(a) / np.where(mod > 0, mod, 1.0), 1.0)
    return _to_real(wc * phase[..., None]), mod


def kendall_dist(x, y):
    z, w = preshape(x), preshape(y)
    w_al, _ = _align(z, w)
    return angle_between(z, w_al, axes=(-2, -1))


def kendall_log(x, y):
    z, w = preshape(x), preshape(y)
    w_al, mod = _align(z, w)
    cut = mod < _CUT_TOL
    if np.any(cut):
        raise ValueError(
            "log is undefined between shapes at distance pi/2 (the cut locus): "
            f"{first_bad_row(cut)}. Keep data inside a ball of radius < pi/8."
        )
    theta = angle_between(z, w_al, axes=(-2, -1))[..., None, None]
    u = w_al - np.cos(theta) * z
    return theta_over_sin(theta) * u


def kendall_exp(x, v):
    z = preshape(x)
    t = np.sqrt(_frob(v, v))[..., None, None]
    return np.cos(t) * z + sinc(t) * v


def kendall_basis(x):
    """Orthonormal horizontal frame at ``x``: shape ``(..., 2k-4, k, 2)``.

    In Helmert coordinates the pre-shape is a unit complex vector ``zeta``; a
    complex Householder reflection sends the last axis to a multiple of ``zeta``,
    so its other columns ``b_j`` span ``zeta``'s complex orthogonal complement.
    The real frame is ``b_j`` followed by ``i b_j``.
    """
    z = preshape(x)
    k = z.shape[-2]
    h = helmert(k)
    zeta = np.einsum("ak,...k->...a", h, _to_complex(z))
    m = k - 2
    mod = np.abs(zeta[..., m])
    alpha = np.where(mod > 0, zeta[..., m] / np.where(mod > 0, mod, 1.0), 1.0)
    w = zeta.copy()
    w[..., m] += alpha
    ww = np.sum(np.abs(w) ** 2, axis=-1)
    q = np.eye(k - 1) - 2.0 * w[..., :, None] * np.conj(w[..., None, :]) / ww[..., None, None]
    cols = np.swapaxes(q[..., :, :m], -1, -2)  # (..., k-2, k-1): the complement
    cols = np.concatenate([cols, 1j * cols], axis=-2)  # (..., 2k-4, k-1)
    return _to_real(np.einsum("ak,...ja->...jk", h, cols))


@dataclass(frozen=True)
class KendallShape(ManifoldBase):
    r"""Kendall's shape space of planar configurations with ``k_landmarks`` points.

    Parameters
    ----------
    k_landmarks : int
        Number of landmarks ``k >= 3``; inputs are raw configurations
        ``(..., k, 2)``; ``dim = 2k - 4``.

    Notes
    -----
    Volume density of ``exp_z`` in normal coordinates, ``t = |v| < pi/2``:

    .. math:: \left(\frac{\sin t}{t}\right)^{2k-6} \frac{\sin 2t}{2t}.

    Examples
    --------
    >>> import numpy as np
    >>> K = KendallShape(k_landmarks=3)
    >>> tri = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    >>> moved = 3.0 * tri @ np.array([[0.0, -1.0], [1.0, 0.0]]) + 5.0
    >>> bool(np.isclose(K.dist(tri, moved), 0.0))
    True
    """

    k_landmarks: int
    dim: int = field(init=False, repr=False)
    point_shape: tuple[int, ...] = field(init=False, repr=False)

    # the volume density (sin t/t)^(2k-6) sin(2t)/(2t) <= 1 depends on t = |c| only
    exact_sampling = True
    homogeneous = True
    volume_is_radial = True

    name: ClassVar[str] = "kendall"
    fused_kernels: ClassVar[str | None] = "kendall"
    record_layout: ClassVar[str] = "(n, k, 2) or (n, 2k): landmarks x1, y1, x2, y2, ... (k >= 3)"

    @classmethod
    def from_record_shape(cls, shape: tuple[int, ...]) -> KendallShape:
        width = math.prod(shape)
        if width % 2 or (len(shape) == 2 and shape[1] != 2) or len(shape) > 2 or width < 6:
            raise ValueError(
                "kendall data must have shape (n, k, 2) or (n, 2k) (x1, y1, x2, y2, ...) "
                f"with k >= 3 landmarks, got records of shape {shape}"
            )
        return cls(k_landmarks=width // 2)

    @classmethod
    def audit_space(cls):
        # three landmarks: the shape space is a sphere of radius 1/2 (the audit's check)
        return cls(k_landmarks=3), np.array([[0.0, 0], [1, 0], [0, 1]]), np.pi / 16, 400

    @classmethod
    def examples(cls) -> tuple:
        """Small instances, one per kind of geometry the class covers."""
        return (cls(k_landmarks=3), cls(k_landmarks=5))

    def __post_init__(self):
        k = check_positive_int(self.k_landmarks, "k_landmarks", minimum=3)
        object.__setattr__(self, "k_landmarks", k)
        object.__setattr__(self, "dim", 2 * k - 4)
        object.__setattr__(self, "point_shape", (k, 2))
        # the uniform law's Gaussian lives in Helmert coordinates (centered configurations)
        object.__setattr__(self, "gaussian_shape", (k - 1, 2))
        object.__setattr__(self, "noise_shape", (k, 2))

    @property
    def injectivity_radius(self) -> float:
        return np.pi / 2.0

    @property
    def curvature_bounds(self) -> tuple[float, float]:
        return (4.0, 4.0) if self.k_landmarks == 3 else (1.0, 4.0)

    @property
    def log_volume(self) -> float:
        r""":math:`\log(\pi^{k-2}/(k-2)!)`, the volume of :math:`\mathbb{CP}^{k-2}` with the
        distance ``arccos|<z, w>|``."""
        m = self.k_landmarks - 2
        return float(m * np.log(np.pi) - special.gammaln(m + 1))

    @property
    def mcmc_seconds_per_point(self) -> float:
        """``5e-9 s`` per half dimension: KNG's norm on Kendall(8) measured 46 ns per
        point, 8 ns per half dimension (NUMBA backend, 2 cores, 2026-11-24,
        docs/benchmarks/bench_kng_norm.py)."""
        return 5e-9 * max(1.0, self.dim / 2)

    def sample_uniform(self, rng, size=()):
        r"""Uniform shapes ``(*size, k, 2)``: the shape of a Gaussian configuration.

        Its pre-shape is uniform on the pre-shape sphere, which projects to the uniform
        law on :math:`\mathbb{CP}^{k-2}`.
        """
        return self.validate(rng.standard_normal((*tuple(size), self.k_landmarks, 2)))

    @property
    def generic_point(self):
        """A squashed polygon with uneven angles: no symmetry."""
        t = np.linspace(0, 2 * np.pi, self.k_landmarks, endpoint=False) ** 1.1
        return self.validate(np.stack([np.cos(t), 0.8 * np.sin(t)], -1))

    def validate(self, points):
        """Check raw configurations and return their pre-shapes ``(..., k, 2)``."""
        return preshape(as_points(points, self.point_shape, name="configurations"))

    def to_tangent(self, x, v):
        """Project ``v`` onto the horizontal space at the pre-shape of ``x``."""
        z = preshape(x)
        v = np.asarray(v, float)
        v = v - np.mean(v, axis=-2, keepdims=True)
        iz = np.stack([-z[..., 1], z[..., 0]], axis=-1)
        v = v - _frob(z, v)[..., None, None] * z
        return v - _frob(iz, v)[..., None, None] * iz

    def exp(self, x, v):
        return kendall_exp(x, np.asarray(v, float))

    def log(self, x, y):
        return kendall_log(x, y)

    def dist(self, x, y):
        return kendall_dist(x, y)

    def inner(self, x, u, v):
        return _frob(np.asarray(u, float), np.asarray(v, float))

    def tangent_basis(self, x):
        return kendall_basis(x)

    def log_volume_density(self, coords):
        coords = np.asarray(coords, float)
        t = np.sqrt(np.sum(coords**2, axis=-1))
        return (2 * self.k_landmarks - 6) * log_sinc(t) + log_sinc(2.0 * t)

    # --- PyTensor twins (arguments are pre-shapes) -------------------------------------
    def chart_frame(self, origin):
        """The arrays fixing the exp chart at ``origin``: its pre-shape and frame."""
        origin = np.asarray(origin, float)
        if origin.shape != self.point_shape:
            raise ValueError(f"the chart origin must be one point of shape {self.point_shape}")
        z = preshape(origin)
        return {"origin": z, "basis": self.tangent_basis(z)}

    def pt_exp_frame(self, frame, coords):
        """``exp_origin`` of chart coordinates ``(..., dim)``, the chart given by
        :meth:`chart_frame` (arrays or tensors, e.g. ``pm.Data``)."""
        z, basis = pt.as_tensor_variable(frame["origin"]), frame["basis"]
        coords = pt.as_tensor_variable(coords)
        v = pt.tensordot(coords, pt.as_tensor_variable(basis), axes=[[-1], [0]])
        s = pt.sum(coords**2, axis=-1)[..., None, None]
        return ptn.cos_sqrt(s) * z + ptn.sinc_sqrt(s) * v

    def pt_exp_coords(self, origin, coords):
        """``exp_origin`` of chart coordinates ``coords`` ``(..., dim)`` (tensor)."""
        return self.pt_exp_frame(self.chart_frame(origin), coords)

    def pt_point_checks(self, x):
        """Centered (landmark sums below ``1e-6``) and of unit size (within ``1e-6``)."""
        centered = pt.lt(pt.abs(pt.sum(x, axis=-2)), 1e-6)
        unit = pt.lt(pt.abs(pt.sum(x**2, axis=(-2, -1)) - 1.0), 1e-6)
        return [centered, unit]

    def pt_ball_exit(self, frame, omega, ball_center, ball_radius):
        r"""``T(ω)``: the first ``t > 0`` with ``|<m0, γ(t)>|^2 = P + Q cos 2t + W sin 2t
        = cos^2 r`` (complex inner products), ``γ`` the geodesic from the frame's origin
        along ``ω``."""
        m0, r = ball_center, ball_radius
        basis = pt.as_tensor_variable(frame["basis"])
        origin = pt.as_tensor_variable(frame["origin"])
        w = pt.tensordot(omega, basis, axes=[[-1], [0]])  # unit tangent vectors at the origin

        def herm(x, y):  # <x, y> = sum conj(x) y, of (k, 2) arrays as complex vectors
            re = pt.sum(x[..., 0] * y[..., 0] + x[..., 1] * y[..., 1], axis=-1)
            im = pt.sum(x[..., 0] * y[..., 1] - x[..., 1] * y[..., 0], axis=-1)
            return re, im

        ar, ai = herm(m0, origin)
        br, bi = herm(m0, w)
        a2, b2 = ar**2 + ai**2, br**2 + bi**2
        p, q, ww = (a2 + b2) / 2, (a2 - b2) / 2, ar * br + ai * bi
        amp = pt.sqrt(q**2 + ww**2)
        cos_arg = pt.clip((np.cos(r) ** 2 - p) / amp, -1.0, 1.0)
        return (pt.arctan2(ww, q) + pt.arccos(cos_arg)) / 2

    # the moving chart (random footpoints): the horizontal projection of ambient noise
    def pt_exp_noise(self, x, w):
        """``exp_x(P_x w)``: ``P_x`` centers ``w`` ``(..., k, 2)`` and removes its
        components along ``x`` and ``i x`` (the horizontal space at the pre-shape
        ``x``), so a standard normal ``w`` gives a standard normal on ``T_x``."""
        x = pt.as_tensor_variable(x)
        v = self._pt_horizontal(x, w)
        s = pt.sum(v**2, axis=(-2, -1), keepdims=True)
        return ptn.cos_sqrt(s) * x + ptn.sinc_sqrt(s) * v

    def pt_noise_norm(self, x, w):
        """``|P_x w|``."""
        return pt.sqrt(pt.sum(self._pt_horizontal(x, w) ** 2, axis=(-2, -1)) + 1e-300)

    def pt_log_noise(self, x, y):
        """``log_x(y)``: horizontal vectors are their own least-norm noise."""
        return self.pt_log(x, y)

    @staticmethod
    def _pt_horizontal(x, w):
        x, w = pt.as_tensor_variable(x), pt.as_tensor_variable(w)
        w = w - pt.mean(w, axis=-2, keepdims=True)
        ix = pt.stack([-x[..., 1], x[..., 0]], axis=-1)  # the rotation's direction
        for e in (x, ix):  # orthonormal (x is a unit pre-shape): one pass each
            w = w - pt.sum(w * e, axis=(-2, -1), keepdims=True) * e
        return w

    def pt_from_gaussian(self, z):
        """``H^T z/|z|`` for ``z`` ``(..., k-1, 2)``, ``H`` the Helmert sub-matrix: the
        uniform law on the pre-shape sphere, whose shapes are uniform."""
        z = pt.as_tensor_variable(z)
        y = pt.tensordot(z, helmert(self.k_landmarks), axes=[[-2], [0]])  # (..., 2, k)
        y = pt.swapaxes(y, -1, -2)
        return y / pt.sqrt(pt.sum(y**2, axis=(-2, -1), keepdims=True))

    def pt_to_gaussian(self, x):
        """``H x``: the Helmert coordinates ``(..., k-1, 2)`` of a pre-shape."""
        x = pt.as_tensor_variable(x)
        return pt.tensordot(helmert(self.k_landmarks), x, axes=[[1], [-2]]).dimshuffle(
            *range(1, x.ndim - 1), 0, x.ndim - 1
        )

    @staticmethod
    def _pt_align(x, y):
        x, y = pt.as_tensor_variable(x), pt.as_tensor_variable(y)
        re = pt.sum(x[..., 0] * y[..., 0] + x[..., 1] * y[..., 1], axis=-1)
        im = pt.sum(x[..., 0] * y[..., 1] - x[..., 1] * y[..., 0], axis=-1)
        mod = pt.sqrt(re**2 + im**2)
        cr, ci = (re / mod)[..., None], (im / mod)[..., None]
        # multiply y by conj(a)/|a| = cr - i ci
        y_al = pt.stack([y[..., 0] * cr + y[..., 1] * ci, y[..., 1] * cr - y[..., 0] * ci], axis=-1)
        return x, y_al, mod[..., None, None]

    def pt_log(self, x, y):
        x, y_al, c = self._pt_align(x, y)
        u = y_al - c * x
        s = pt.sum(u * u, axis=(-2, -1), keepdims=True)
        return ptn.theta_over_sin(s, c) * u

    def pt_frechet_gradient_norm(self, x, data):
        r"""``||sum_i log_x(x_i)||_x`` (KNG's norm) from matrix-vector products.

        With ``J`` the rotation by 90 degrees (multiplication by ``i``),
        ``re_i = <x_i, x>``, ``im_i = <x_i, J x>``, ``c_i = |re_i + i im_i| = cos(theta_i)``
        and ``w_i = theta_i / sin(theta_i)``, the aligned datum is
        ``(re_i x_i - im_i J x_i) / c_i``, so

        .. math:: \sum_i \log_x(x_i) = X^\top \frac{w\, re}{c}
                  - J\Big(X^\top \frac{w\, im}{c}\Big) - \Big(\sum_i w_i c_i\Big) x,

        with ``X`` the ``(n, 2k)`` flattened data: four matrix-vector products with
        ``X`` (``re``, ``im`` and the two sums) and elementwise work on ``n`` scalars,
        instead of ``n`` aligned logarithms of ``(k, 2)`` arrays
        (the hot loop of NUTS: one value and gradient per leapfrog step). Assumes ``x``
        is a pre-shape (``sin^2 = 1 - c^2``), as the exp chart keeps it.
        """
        x, data = pt.as_tensor_variable(x), pt.as_tensor_variable(data)
        k2 = 2 * self.k_landmarks
        batch = [x.shape[i] for i in range(x.ndim - 2)]
        # flattening data is a view; contracting the (k, 2) axes in place would make
        # tensordot copy a transposed (n, 2k) array on every call
        flat = data.reshape((data.shape[0], k2))
        re = pt.tensordot(x.reshape((*batch, k2)), flat, axes=[[-1], [1]])  # (..., n)
        im = pt.tensordot(_pt_rot90(x).reshape((*batch, k2)), flat, axes=[[-1], [1]])
        q = re**2 + im**2  # c^2
        c = pt.sqrt(q)
        # sin^2 = 1 - q: exact given q near c = 1 (no rounding of a square root); at
        # c = 1 (a datum at x) theta_over_sin's series branch keeps the gradient
        # finite, also when rounding makes s slightly negative
        w = ptn.theta_over_sin(1.0 - q, c)
        wc = w / c
        a = pt.tensordot(wc * re, flat, axes=[[-1], [0]]).reshape(x.shape)
        b = pt.tensordot(wc * im, flat, axes=[[-1], [0]]).reshape(x.shape)
        total = a - _pt_rot90(b) - pt.sum(w * c, axis=-1)[..., None, None] * x
        return self.pt_norm(x, total)

    def pt_dist(self, x, y):
        x, y_al, _ = self._pt_align(x, y)
        d = pt.sqrt(pt.sum((x - y_al) ** 2, axis=(-2, -1)) + 1e-300)
        s = pt.sqrt(pt.sum((x + y_al) ** 2, axis=(-2, -1)))
        return 2.0 * pt.arctan2(d, s)

    def pt_inner(self, x, u, v):
        return pt.sum(pt.as_tensor_variable(u) * v, axis=(-2, -1))

    def pt_norm(self, x, v):
        return pt.sqrt(self.pt_inner(x, v, v) + 1e-300)

    def pt_log_volume_density(self, coords):
        s = pt.sum(pt.as_tensor_variable(coords) ** 2, axis=-1)
        return (2 * self.k_landmarks - 6) * ptn.log_sinc_sqrt(s) + ptn.log_sinc_sqrt(4.0 * s)

    # --- landmarks (the landmark-wise baseline) ----------------------------------------
    def align(self, reference, configurations) -> np.ndarray:
        """Pre-shapes of ``configurations`` ``(..., k, 2)`` rotated optimally onto the
        pre-shape of ``reference`` (the rotation minimizing their Euclidean distance).

        Examples
        --------
        >>> K = KendallShape(k_landmarks=3)
        >>> tri = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
        >>> turned = tri @ np.array([[0.0, -1.0], [1.0, 0.0]])
        >>> bool(np.allclose(K.align(tri, turned), K.validate(tri)))
        True
        """
        aligned, _ = _align(self.validate(reference), self.validate(configurations))
        return aligned
