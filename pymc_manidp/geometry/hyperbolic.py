r"""Hyperbolic space :math:`\mathbb H^d` in the hyperboloid model, curvature ``-1``.

Points are the upper sheet :math:`\{x \in \mathbb R^{d+1} : \langle x, x\rangle_L = -1,
x_0 > 0\}` of the Minkowski product

.. math:: \langle u, v\rangle_L = -u_0 v_0 + \sum_{i=1}^d u_i v_i,

tangent vectors at ``x`` are the ``v`` with :math:`\langle x, v\rangle_L = 0` (spacelike,
so :math:`|v| = \sqrt{\langle v, v\rangle_L}`), and

.. math:: \exp_x(v) = \cosh|v|\, x + \frac{\sinh|v|}{|v|}\, v, \qquad
          \rho(x, y) = \operatorname{arccosh}(-\langle x, y\rangle_L)
          = 2 \operatorname{asinh}\big(\tfrac12 |y - x|_L\big).

The second form of ``rho`` is the one computed: the difference ``y - x`` is spacelike
with :math:`q = |y - x|_L^2 = 2(\cosh\rho - 1) = 4\sinh^2(\rho/2)`, which keeps full
relative accuracy for nearby points where ``arccosh`` of a number near 1 loses half the
digits; for distant points ``q`` is read off :math:`-2(\langle x, y\rangle_L + 1)`
instead, which cancels less there (the private ``_gap``). Coordinates grow like
:math:`e^\rho`: points farther than a few hundred from the origin overflow, and
accuracy degrades with ``x_0``, as in any hyperboloid implementation.
The log map is :math:`\log_x(y) = \frac{\rho}{\sinh\rho}\,(w + \langle x, w\rangle_L\,x)`
with ``w = y - x`` (the projection of the difference onto :math:`T_x`).

Sectional curvature ``-1`` (``H^1`` is the line: flat), injectivity radius ``inf``, so
``kappa_max <= 0`` gives ``H = 1`` and ``r* = inf``: any public radius. Volume density of
the exp chart :math:`(\sinh t / t)^{d-1}`; the Laplace law's radius has density
:math:`\propto e^{-t/\sigma}\sinh^{d-1} t`, finite iff ``sigma < 1/(d - 1)``.

Embeddings of trees are usually stored in the Poincaré ball: :func:`from_poincare` and
:func:`to_poincare` convert.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np
import pytensor.tensor as pt
from pytensor.graph.basic import Variable
from scipy import special

from pymc_manidp._validation import as_points, check_positive_int, check_tol, first_bad_row
from pymc_manidp.geometry._numba import pt_numerics as ptn
from pymc_manidp.geometry._numba.numerics import log_sinhc, sinhc
from pymc_manidp.geometry.base import ManifoldBase

__all__ = [
    "Hyperbolic",
    "from_poincare",
    "hyperbolic_laplace_log_normalizer",
    "minkowski_inner",
    "poincare_dist",
    "to_poincare",
]

# asinh(r)/r as a series in s = r^2 below this |s| (next term 35 s^4/1152 < 4e-18)
_ASINHC_SERIES = 1e-4

# rounding_error = _ROUNDING_ULPS * eps * cosh(R)^2: the largest error of a computed KNG
# gradient norm against an 80-digit oracle (mpmath, the same float inputs), over 320
# adversarial placements per R in 2..25 (records near the origin with a far point,
# at opposite edges, all at one far point with a point 1e-6..1 from it, uniform), was
# 50 eps cosh^2 R; 1024 leaves a factor 20 (tests/geometry/test_hyperbolic.py)
_ROUNDING_ULPS = 1024.0

# The unrestricted Laplace's radius t has tail P(t > T) <= e^{-2Tb}/(b B(b, d)),
# b = (1/sigma - d + 1)/2 (U = e^{-2t} ~ Beta(b, d), (1 - u)^{d-1} <= 1): a draw past
# _LAPLACE_REACH overflows (cosh 710 = inf); sigma is refused where that has
# probability above 2^-64 (the cap on proposals fails about as rarely)
_LAPLACE_REACH = 600.0
_LAPLACE_TAIL = -64.0 * np.log(2.0)


def minkowski_inner(u, v):
    r"""The Minkowski product :math:`\langle u, v\rangle_L = -u_0 v_0 + \sum_{i \ge 1} u_i v_i`.

    Parameters
    ----------
    u, v : array_like, shape ``(..., d+1)``
        Vectors of ``R^(d+1)`` (broadcast).

    Returns
    -------
    ndarray, shape ``(...)``
        The products (``-1`` for a point of the hyperboloid with itself).

    Examples
    --------
    >>> float(minkowski_inner([1.0, 0.0], [1.0, 0.0]))  # the origin of H^1
    -1.0
    """
    u, v = np.asarray(u, float), np.asarray(v, float)
    return np.einsum("...i,...i->...", u, v) - 2.0 * u[..., 0] * v[..., 0]


def _lorentz_sq(w):
    """``<w, w>_L`` clipped at 0: the squared length of a spacelike vector (rounding
    can make a tiny one slightly negative)."""
    return np.maximum(minkowski_inner(w, w), 0.0)


def _gap(x, y):
    r"""``q = <y - x, y - x>_L = 2(cosh rho - 1) = 4 sinh^2(rho/2)`` by the route that
    rounds less, and ``w = y - x``.

    From the difference, ``-w_0^2 + |w_{1:}|^2`` cancels terms of size ``|w|^2``
    (Euclidean): exact for nearby points. From the product,
    ``2(-<x, y>_L - 1)`` cancels terms of size ``x_0 y_0``: exact for distant ones
    (one point near the origin, the other far out, where ``|w|^2`` is ``~ y_0^2``). The
    smaller of the two sizes picks the route.
    """
    w = y - x
    by_difference = np.einsum("...i,...i->...", w, w) <= 4.0 * x[..., 0] * y[..., 0]
    q_diff = minkowski_inner(w, w)
    q_prod = -2.0 * (minkowski_inner(x, y) + 1.0)
    return np.maximum(np.where(by_difference, q_diff, q_prod), 0.0), w


def hyperbolic_dist(x, y):
    """``2 asinh(sqrt(q) / 2)``, ``q = <y - x, y - x>_L`` (``_gap``), shape ``(...)``."""
    q, _ = _gap(np.asarray(x, float), np.asarray(y, float))
    return 2.0 * np.arcsinh(0.5 * np.sqrt(q))


def hyperbolic_exp(x, v):
    """``cosh|v| x + sinh|v|/|v| v`` for tangent vectors ``v`` at ``x``."""
    x, v = np.asarray(x, float), np.asarray(v, float)
    t = np.sqrt(_lorentz_sq(v))[..., None]
    return np.cosh(t) * x + sinhc(t) * v


def hyperbolic_log(x, y):
    """``rho/sinh(rho) (w + <x, w>_L x)``, ``w = y - x``, with ``<x, w>_L = -q/2``."""
    x, y = np.broadcast_arrays(np.asarray(x, float), np.asarray(y, float))
    q, w = _gap(x, y)
    u = w - 0.5 * q[..., None] * x
    rho = 2.0 * np.arcsinh(0.5 * np.sqrt(q))
    return u / sinhc(rho)[..., None]


def hyperbolic_basis(x):
    r"""Orthonormal frame of :math:`T_x\mathbb H^d`, shape ``(..., d, d+1)``.

    The columns ``1..d`` of the Lorentz boost that sends the origin ``e_0`` to ``x``:
    :math:`E_a = (x_a,\ e_a + x_a\,\bar x/(1 + x_0))`, ``x = (x_0, x̄)``, which is the
    standard frame at the origin moved to ``x`` by parallel transport along the
    geodesic (smooth in ``x``, no branch).
    """
    x = np.asarray(x, float)
    d = x.shape[-1] - 1
    xs = x[..., 1:]
    spatial = np.eye(d) + xs[..., :, None] * xs[..., None, :] / (1.0 + x[..., 0])[..., None, None]
    return np.concatenate([xs[..., :, None], spatial], axis=-1)


def from_poincare(ball_points):
    r"""Hyperboloid points of Poincaré-ball points :math:`p`, :math:`|p| < 1`.

    .. math:: x = \frac{(1 + |p|^2,\ 2p)}{1 - |p|^2}.

    Parameters
    ----------
    ball_points : array_like, shape ``(..., d)``
        Points of the open unit ball (the Poincaré model of curvature -1).

    Returns
    -------
    ndarray, shape ``(..., d+1)``
        The same points on the hyperboloid.

    Raises
    ------
    ValueError
        A point is not finite or not inside the open unit ball (naming the row).

    Examples
    --------
    >>> from_poincare([0.0, 0.0]).tolist()  # the center of the disc is the origin
    [1.0, 0.0, 0.0]
    >>> from_poincare([0.5, 0.0]).round(6).tolist()
    [1.666667, 1.333333, 0.0]
    """
    p = np.asarray(ball_points, float)
    if p.ndim < 1:
        raise ValueError("ball points must have shape (..., d), one point per row")
    p = as_points(p, p.shape[-1:], name="ball points")
    with np.errstate(over="ignore"):  # huge coordinates: sq = inf, refused below
        sq = np.einsum("...i,...i->...", p, p)
    bad = ~(sq < 1.0)
    if np.any(bad):
        raise ValueError(
            f"ball points must have norm < 1 (the open Poincaré ball): {first_bad_row(bad)} "
            f"(largest norm {float(np.sqrt(np.max(sq))):.6g}). Points on or beyond the unit "
            "sphere are at infinite distance: rescale or clip the embedding"
        )
    den = 1.0 - sq
    return np.concatenate([((1.0 + sq) / den)[..., None], 2.0 * p / den[..., None]], axis=-1)


def to_poincare(points):
    r"""Poincaré-ball points of hyperboloid points: :math:`p = \bar x/(1 + x_0)`.

    Parameters
    ----------
    points : array_like, shape ``(..., d+1)``
        Points on the hyperboloid (checked by ``Hyperbolic.validate``).

    Returns
    -------
    ndarray, shape ``(..., d)``
        The same points in the open unit ball.

    Examples
    --------
    >>> to_poincare(from_poincare([0.3, -0.4])).round(12).tolist()
    [0.3, -0.4]
    """
    x = np.asarray(points, float)
    if x.ndim < 1 or x.shape[-1] < 2:
        raise ValueError(f"points must have shape (..., d+1) with d >= 1, got {x.shape}")
    x = Hyperbolic(dim=x.shape[-1] - 1).validate(x)
    return x[..., 1:] / (1.0 + x[..., :1])


def poincare_dist(p, q):
    r"""Geodesic distance in the Poincaré ball (curvature -1), the textbook formula.

    .. math:: \rho(p, q) = \operatorname{arccosh}\Big(1 + \frac{2|p - q|^2}
              {(1 - |p|^2)(1 - |q|^2)}\Big).

    Accurate away from the unit sphere; for far-out points convert with
    :func:`from_poincare` and use ``Hyperbolic.dist``.

    Parameters
    ----------
    p, q : array_like, shape ``(..., d)``
        Points of the open unit ball (broadcast).

    Returns
    -------
    ndarray, shape ``(...)``
        The geodesic distances.

    Examples
    --------
    >>> round(float(poincare_dist([0.0, 0.0], [0.5, 0.0])), 12)  # 2 atanh(1/2) = log 3
    1.098612288668
    """
    p, q = np.asarray(p, float), np.asarray(q, float)
    num = 2.0 * np.sum((p - q) ** 2, axis=-1)
    den = (1.0 - np.sum(p * p, axis=-1)) * (1.0 - np.sum(q * q, axis=-1))
    return np.arccosh(1.0 + num / den)


# --- the Laplace normalizer ---------------------------------------------------------------
def _as_float_tensor(x):
    # a Python float becomes the narrowest exact dtype (1.0: float32): keep float64
    return pt.as_tensor_variable(x if isinstance(x, Variable) else np.asarray(x, float))


def _log_unit_sphere_volume(m: int) -> float:
    """``log vol(S^{m-1})`` of the unit sphere of ``R^m``: ``2 pi^{m/2} / Gamma(m/2)``."""
    return float(np.log(2.0) + 0.5 * m * np.log(np.pi) - special.gammaln(0.5 * m))


def hyperbolic_laplace_log_normalizer(dim: int, sigma):
    r"""``log Z(sigma)`` of the unrestricted Laplace on :math:`\mathbb H^d`, in closed form.

    .. math:: Z(\sigma) = \mathrm{vol}(S^{d-1}) \int_0^\infty e^{-t/\sigma}\sinh^{d-1}t\,dt
              = \mathrm{vol}(S^{d-1})\,\frac{\Gamma(d)\,\sigma^d}
                {\prod_{j=0}^{d-1} (1 - (d - 1 - 2j)\,\sigma)}, \qquad \sigma < \frac1{d-1}.

    Why: ``u = e^{-2t}`` turns :math:`e^{-t/\sigma}\sinh^{d-1}t\,dt` into
    :math:`2^{-d} u^{b-1}(1-u)^{d-1}\,du` with :math:`b = (1/\sigma - d + 1)/2`, so the
    integral is :math:`2^{-d} B(b, d) = 2^{-d}\Gamma(d)/\prod_{j<d}(b + j)`, the product
    above (so the radius is ``-log(U)/2`` with ``U ~ Beta(b, d)``). ``d = 1`` gives
    ``2 sigma`` (the line); ``d = 2`` gives :math:`2\pi\sigma^2/(1 - \sigma^2)`.

    Parameters
    ----------
    dim : int
        The dimension ``d``.
    sigma : float or tensor, shape ``(...)``
        The scale; ``+inf`` is returned at and beyond the edge ``1/(d - 1)``.

    Returns
    -------
    TensorVariable
        ``log Z(sigma)``, shape ``(...)``, differentiable in ``sigma``.

    Examples
    --------
    >>> import numpy as np
    >>> z = np.exp(hyperbolic_laplace_log_normalizer(2, 0.5).eval())
    >>> bool(np.isclose(z, 2 * np.pi * 0.25 / 0.75))
    True
    """
    d = check_positive_int(dim, "dim")
    sigma = _as_float_tensor(sigma)
    edge = np.inf if d == 1 else 1.0 / (d - 1)
    inside = pt.lt(sigma, edge)
    s = pt.switch(inside, sigma, 0.5 * min(edge, 1.0))  # a safe value where Z is infinite
    ks = [d - 1 - 2 * j for j in range(d)]
    log_den = sum(pt.log1p(-k * s) for k in ks if k != 0)
    log_z = _log_unit_sphere_volume(d) + special.gammaln(d) + d * pt.log(s) - log_den
    return pt.switch(inside, log_z, np.inf)


# --- PyTensor helpers ------------------------------------------------------------------------
def _pt_minkowski(u, v):
    u, v = pt.as_tensor_variable(u), pt.as_tensor_variable(v)
    return pt.sum(u * v, axis=-1) - 2.0 * u[..., 0] * v[..., 0]


def _pt_gap(x, y):
    """``_gap`` as tensors: ``(q, w)``, the route picked per point (both are
    smooth, so the switch keeps the gradient finite)."""
    w = y - x
    by_difference = pt.le(pt.sum(w * w, axis=-1), 4.0 * x[..., 0] * y[..., 0])
    q = pt.switch(by_difference, _pt_minkowski(w, w), -2.0 * (_pt_minkowski(x, y) + 1.0))
    return pt.maximum(q, 0.0), w


def _pt_asinhc_sq(s):
    """``asinh(sqrt(s))/sqrt(s)`` as a smooth function of ``s`` (series near 0, where
    rounding may also make ``s`` slightly negative)."""
    small = s < _ASINHC_SERIES
    ss = pt.switch(small, 1.0, s)
    r = pt.sqrt(ss)
    series = 1.0 + s * (-1 / 6 + s * (3 / 40 + s * (-5 / 112)))
    return pt.switch(small, series, pt.arcsinh(r) / r)


def _signature_flip(d):
    """``diag(-1, 1, ..., 1)``: the Minkowski metric of ``R^{d+1}``."""
    return np.concatenate([[-1.0], np.ones(d)])


_POINCARE_HINT = (
    "Points of the Poincaré ball (d coordinates of norm < 1, as most tree embeddings are "
    "stored) are read with Hyperbolic(dim=d).from_poincare or --layout poincare"
)


@dataclass(frozen=True)
class Hyperbolic(ManifoldBase):
    r"""Hyperbolic space of dimension ``dim`` (curvature ``-1``) on the hyperboloid.

    Parameters
    ----------
    dim : int
        Intrinsic dimension ``d >= 1``; points have shape ``(..., d+1)``, the first
        coordinate the time-like one (``x_0 = sqrt(1 + |x_{1:}|^2)``).

    Notes
    -----
    Volume density of ``exp_x`` in normal coordinates, ``t = |v|``:

    .. math:: \left(\frac{\sinh t}{t}\right)^{d-1},

    so the Laplace :math:`e^{-\rho/\sigma}` is normalizable iff ``sigma < 1/(d-1)``
    (:func:`~pymc_manidp.geometry.hyperbolic.hyperbolic_laplace_log_normalizer`).
    ``H^1`` is the line (flat).

    Examples
    --------
    >>> import numpy as np
    >>> H = Hyperbolic(dim=2)
    >>> o = H.origin
    >>> x = H.exp(o, np.array([0.0, 1.0, 0.0]))  # one unit along the first axis
    >>> float(H.dist(o, x)), x.round(6).tolist()
    (1.0, [1.543081, 1.175201, 0.0])
    """

    dim: int
    point_shape: tuple[int, ...] = field(init=False, repr=False)

    #: The name in files and ``--manifold``.
    name: ClassVar[str] = "hyperbolic"
    fused_kernels: ClassVar[str | None] = "hyperbolic"
    #: The layout of one record in a data file.
    record_layout: ClassVar[str] = (
        "(n, d+1): hyperboloid coordinates x0, x1, ..., xd with x0 = sqrt(1 + x1^2 + ... + xd^2)"
    )
    #: Other layouts of a data file (``--layout``).
    layouts: ClassVar[dict[str, str]] = {
        "poincare": "(n, d): points of the open Poincaré ball, norm < 1 (read as H^d)",
    }

    # homogeneous (the Lorentz group acts transitively), the volume density depends on
    # |c| only, and log J(c) = (d-1) log sinhc|c| <= (d-1)|c| (log_volume_growth): the
    # exact Laplace sampler tilts its K-norm envelope by d-1 (laws/exact/laplace.py); kappa_max
    # <= 0, so KNG's envelope is the Laplace at the mean with slope H = 1
    exact_sampling = True
    homogeneous = True
    volume_is_radial = True

    def __post_init__(self):
        object.__setattr__(self, "dim", check_positive_int(self.dim, "dim"))
        object.__setattr__(self, "point_shape", (self.dim + 1,))
        object.__setattr__(self, "noise_shape", (self.dim,))

    # --- the registry's members ---------------------------------------------------------
    @classmethod
    def from_record_shape(cls, shape: tuple[int, ...]) -> Hyperbolic:
        """``Hyperbolic(dim=D - 1)`` for records of shape ``(D,)``, ``D >= 2``.

        Examples
        --------
        >>> Hyperbolic.from_record_shape((3,))
        Hyperbolic(dim=2)
        """
        shape = tuple(int(s) for s in shape)
        if len(shape) != 1 or shape[0] < 2:
            raise ValueError(
                f"hyperbolic records have shape {cls.record_layout}; got records of shape {shape}"
            )
        return cls(dim=shape[0] - 1)

    @classmethod
    def from_layout(cls, layout: str, records, *, scalar_first: bool = False):
        """``(Hyperbolic(dim=d), points (n, d+1))`` of records in another layout:
        ``"poincare"``, ``(n, d)`` points of the open Poincaré ball
        (:meth:`~pymc_manidp.geometry.hyperbolic.Hyperbolic.from_poincare`).

        Examples
        --------
        >>> H, x = Hyperbolic.from_layout("poincare", [[0.0, 0.0], [0.5, 0.0]])
        >>> H, x.round(6).tolist()
        (Hyperbolic(dim=2), [[1.0, 0.0, 0.0], [1.666667, 1.333333, 0.0]])
        """
        if layout != "poincare":
            return super().from_layout(layout, records)
        p = np.asarray(records)
        if p.ndim != 2 or p.shape[1] < 1:
            raise ValueError(
                f"--layout poincare reads d >= 1 coordinates per record (n, d); got shape {p.shape}"
            )
        H = cls(dim=p.shape[1])
        return H, H.from_poincare(p)

    def from_poincare(self, ball_points):
        r"""Points of this space from Poincaré-ball coordinates ``(..., dim)``.

        :math:`x = (1 + |p|^2,\ 2p)/(1 - |p|^2)`, the inverse of
        :meth:`~pymc_manidp.geometry.hyperbolic.Hyperbolic.to_poincare` (module function
        :func:`~pymc_manidp.geometry.hyperbolic.from_poincare`); embeddings of trees and
        graphs are usually stored in the ball.

        Parameters
        ----------
        ball_points : array_like, shape ``(..., dim)``
            Points of the open unit ball, ``|p| < 1``.

        Returns
        -------
        ndarray, shape ``(..., dim + 1)``
            Hyperboloid points.

        Raises
        ------
        ValueError
            A point with norm ``>= 1`` (on or beyond the ball's boundary, at infinite
            distance), NaN/inf, or ``dim`` coordinates missing, naming the first bad row.

        Examples
        --------
        >>> H = Hyperbolic(dim=2)
        >>> H.from_poincare([0.5, 0.0]).round(6).tolist()
        [1.666667, 1.333333, 0.0]
        """
        p = as_points(ball_points, (self.dim,), name="ball points")
        return self.validate(from_poincare(p))

    def to_poincare(self, points):
        r"""Poincaré-ball coordinates ``(..., dim)`` of points of this space:
        :math:`p = \bar x/(1 + x_0)`, norm ``< 1`` (rounds to 1 beyond a distance of
        about 37 from the origin).

        Examples
        --------
        >>> H = Hyperbolic(dim=2)
        >>> H.to_poincare(H.from_poincare([0.3, -0.4])).round(12).tolist()
        [0.3, -0.4]
        """
        x = self.validate(points)
        return x[..., 1:] / (1.0 + x[..., :1])

    @classmethod
    def audit_space(cls) -> tuple:
        """``(Hyperbolic(2), origin, 0.5, 200)``: the plane, a ball of radius 1/2 at the
        origin, 200 quadrature nodes per axis."""
        H = cls(dim=2)
        return H, H.origin, 0.5, 200

    @classmethod
    def examples(cls) -> tuple:
        """Small instances, one per kind of geometry the class covers."""
        return (cls(dim=1), cls(dim=2), cls(dim=3))

    # --- constants ---------------------------------------------------------------------
    @property
    def injectivity_radius(self) -> float:
        return np.inf

    @property
    def curvature_bounds(self) -> tuple[float, float]:
        # H^1 has no 2-planes: it is the line
        return (0.0, 0.0) if self.dim == 1 else (-1.0, -1.0)

    @property
    def log_volume_growth(self) -> float:
        """``d - 1``: ``log J(c) = (d-1) log(sinh t/t) <= (d-1) t``, and the ratio tends to
        1 as ``t`` grows (``sinh t/t <= e^t``)."""
        return float(self.dim - 1)

    @property
    def laplace_max_sigma(self) -> float:
        r"""The normalizability edge ``1/(d-1)`` (``inf`` for ``d = 1``):
        :math:`\int_0^\infty e^{-t/\sigma}\sinh^{d-1}t\,dt` is finite iff
        ``sigma < 1/(d-1)``.

        Examples
        --------
        >>> Hyperbolic(dim=3).laplace_max_sigma
        0.5
        """
        return np.inf if self.dim == 1 else 1.0 / (self.dim - 1)

    @property
    def laplace_sigma_limit(self) -> tuple[float, str]:
        """The edge ``1/(d-1)``: the normalizer is a closed form all the way to it."""
        return self.laplace_max_sigma, "the normalizability edge 1/(dim - 1)"

    def check_laplace_normalizable(self, sigma: float) -> None:
        """Raise ``ValueError`` unless ``sigma < 1/(d-1)`` (:attr:`laplace_max_sigma`)
        and a draw stays representable (``sigma <=`` :attr:`laplace_supported_sigma`)."""
        top = self.laplace_max_sigma
        if not sigma < top:
            raise ValueError(
                f"the unrestricted Laplace on {self} is not normalizable for sigma = "
                f"{sigma:.6g} >= 1/(dim - 1) = {top:.6g} (its radius has density "
                "e^{-t/sigma} sinh^(dim-1)(t)): restrict it to the public ball "
                "(restrict=True), or use more data or a larger epsilon"
            )
        supported = self.laplace_supported_sigma
        if not sigma <= supported:
            raise ValueError(
                f"the unrestricted Laplace on {self} with sigma = {sigma:.6g} is "
                f"normalizable but too heavy-tailed for floating point: its distance from "
                f"the footpoint exceeds {_LAPLACE_REACH:g}, where hyperboloid coordinates "
                f"(~e^t) overflow, with probability above 2^-64. The largest supported "
                f"sigma is {supported:.6g} (the edge is 1/(dim - 1) = {top:.6g}): restrict "
                "it to the public ball (restrict=True), or use more data or a larger epsilon"
            )

    @property
    def laplace_supported_sigma(self) -> float:
        r"""The largest ``sigma`` whose unrestricted Laplace draws stay representable.

        The radius is ``t = -log(U)/2``, ``U ~ Beta(b, d)``, ``b = (1/σ - d + 1)/2``,
        so :math:`P(t > T) \le e^{-2Tb}/(b B(b, d))`. Beyond ``T = 600`` the
        hyperboloid coordinates (``~ e^t``) overflow; ``sigma`` is supported while that
        bound is at most ``2^-64``: about ``0.93`` of the edge for ``d = 2``, ``0.96``
        for ``d = 3``; on the line (``d = 1``, no edge; the law is a Laplace of scale
        ``sigma``) about ``13.5``.

        Examples
        --------
        >>> round(Hyperbolic(dim=2).laplace_supported_sigma, 3)
        0.931
        """
        d = self.dim

        def log_tail(b):
            return -2.0 * _LAPLACE_REACH * b - np.log(b) - special.betaln(b, d)

        # log_tail decreases in b: bisect for log_tail(b) = 2^-64 on a log scale
        lo, hi = 1e-12, 1.0
        while log_tail(hi) > _LAPLACE_TAIL:
            hi *= 2.0
        for _ in range(200):
            mid = np.sqrt(lo * hi)
            lo, hi = (mid, hi) if log_tail(mid) > _LAPLACE_TAIL else (lo, mid)
        return float(1.0 / (2.0 * hi + d - 1))

    def rounding_error(self, center, radius: float, *, proposals: bool = True) -> float:
        r"""``1024 eps cosh(R) cosh(R + 2r)``, ``R = rho(origin, center) + r``: the
        rounding of distances, KNG gradient norms and samplers' proposals in the ball
        (``1024 eps cosh^2 R`` with ``proposals=False``: points of the ball only).

        Hyperboloid coordinates of a point at distance ``R`` from the origin are
        ``~ cosh R``; the Minkowski products that give distances and logs cancel terms
        of size ``cosh^2 R`` (nearby far-out points, tangent vectors there), so their
        absolute error grows like ``eps cosh^2 R`` (measured: at most 50 ulps of it
        against an 80-digit oracle, ``R`` from 2 to 25). A sampler's proposal
        ``exp_x(c)`` from a footpoint ``x`` of the ball, ``|c| <= 2r``, cancels terms
        of size ``cosh R cosh(R + 2r)`` when it lands back in the ball: the larger
        factor. ``inf`` where it overflows.

        Examples
        --------
        >>> H = Hyperbolic(dim=2)
        >>> f"{H.rounding_error(H.origin, 1.0):.2g}", f"{H.rounding_error(H.origin, 5.0):.2g}"
        ('3.5e-12', '2.8e-05')
        """
        reach = float(self.dist(self.origin, self.validate(center))) + float(radius)
        with np.errstate(over="ignore"):
            far = reach + 2.0 * float(radius) if proposals else reach
            grow = np.cosh(reach) * np.cosh(far)
            return float(_ROUNDING_ULPS * np.finfo(float).eps * grow)

    @property
    def pt_laplace_log_normalizer(self):
        """The closed form up to the edge, a function of ``sigma`` for this ``dim``
        (:func:`~pymc_manidp.geometry.hyperbolic.hyperbolic_laplace_log_normalizer`)."""
        return lambda sigma: hyperbolic_laplace_log_normalizer(self.dim, sigma)

    @property
    def origin(self):
        """The origin ``e_0 = (1, 0, ..., 0)`` (the center of the Poincaré ball)."""
        return np.eye(self.dim + 1)[0]

    @property
    def generic_point(self):
        """``exp`` at the origin of ``(1, 2, ..., d)/|(1, ..., d)| * 0.7``: no symmetry."""
        c = np.arange(1.0, self.dim + 1)
        return self.exp_coords(self.origin, 0.7 * c / np.linalg.norm(c))

    def ambient_mean_start(self, m):
        """The Lorentzian centroid ``m / sqrt(-<m, m>_L)``: a weighted mean of points of
        the upper sheet is future time-like, so its projection always exists."""
        m = np.asarray(m, float)
        q = -minkowski_inner(m, m)
        if not (q > 0 and m[0] > 0):
            return None
        return self.validate(m / np.sqrt(q))

    # --- points -----------------------------------------------------------------------------
    def validate(self, points, tol: float = 1e-6):
        """Check points and return them exactly on the upper sheet.

        ``x_0`` is recomputed as ``sqrt(1 + |x_{1:}|^2)``; rows whose ``x_0`` differs
        from it by more than ``tol`` (relative), with ``x_0 <= 0`` (the lower sheet),
        or holding NaN/inf are refused, naming the first bad row.
        """
        tol = check_tol(tol)
        x = as_points(points, self.point_shape)
        xs = x[..., 1:]
        sq = np.einsum("...i,...i->...", xs, xs)
        if not np.all(np.isfinite(sq)):
            # |x_1:|^2 overflows (coordinates past ~1e154, distance ~355 from the
            # origin): x0 would be inf and every Minkowski product of the point inf
            far = ~np.isfinite(sq)
            raise ValueError(
                f"points are too far from the origin for floating point: {first_bad_row(far)} "
                "(|x_1:|^2 overflows, i.e. a distance of about 355 or more from the origin, "
                "where the Minkowski products of the hyperboloid overflow). Recentre the "
                "data (move them near the origin by an isometry) before releasing"
            )
        x0 = np.sqrt(1.0 + sq)
        lower = x[..., 0] <= 0
        if np.any(lower):
            raise ValueError(
                f"points must lie on the upper sheet of the hyperboloid (x0 > 0): "
                f"{first_bad_row(lower)}. Negate a point of the lower sheet to get its "
                f"mirror image. {_POINCARE_HINT}"
            )
        off = np.abs(x[..., 0] - x0) > tol * x0
        if np.any(off):
            worst = float(np.max(np.abs(x[..., 0] - x0) / x0))
            raise ValueError(
                f"points are not on the hyperboloid <x, x>_L = -1: {first_bad_row(off)} "
                f"(largest relative |x0 - sqrt(1 + |x_1:|^2)| = {worst:.3g}, tolerance "
                f"{tol:.3g}). The first coordinate is the time-like one. {_POINCARE_HINT}"
            )
        return np.concatenate([x0[..., None], xs], axis=-1)

    def to_tangent(self, x, v):
        """Project ambient vectors ``v`` onto ``T_x``: ``v + <x, v>_L x``."""
        x, v = np.asarray(x, float), np.asarray(v, float)
        return v + minkowski_inner(x, v)[..., None] * x

    # --- maps ---------------------------------------------------------------------------
    def exp(self, x, v):
        return hyperbolic_exp(x, v)

    def log(self, x, y):
        return hyperbolic_log(x, y)

    def dist(self, x, y):
        return hyperbolic_dist(x, y)

    def inner(self, x, u, v):
        return minkowski_inner(u, v)

    def frechet_gradient(self, x, data, weights):
        """Mean log and energy in one pass: ``rho`` and the log map share
        ``q = <w, w>_L`` and ``w = x_i - x`` (as ``log`` does)."""
        x = np.asarray(x, float)
        q, w = _gap(x, np.asarray(data, float))
        rho = 2.0 * np.arcsinh(0.5 * np.sqrt(q))
        fac = weights / sinhc(rho)
        # not fac @ q: a 1-D product of a block's ~10^4 rows is OpenBLAS's threaded ddot,
        # which cost 12 ms instead of 0.02 ms per call on 2 loaded cores (12x the pass)
        g = fac @ w - 0.5 * float(np.sum(fac * q)) * x
        energy = 0.5 * float(np.sum(weights * rho**2))
        return g, energy

    def tangent_basis(self, x):
        """Orthonormal frame at ``x`` (the boost of the origin's): ``(..., dim, dim+1)``."""
        return hyperbolic_basis(x)

    def log_volume_density(self, coords):
        coords = np.asarray(coords, float)
        t = np.sqrt(np.einsum("...i,...i->...", coords, coords))
        return (self.dim - 1) * log_sinhc(t)

    # --- PyTensor twins ------------------------------------------------------------------
    def chart_frame(self, origin):
        """The arrays fixing the exp chart at ``origin``: the origin and its frame."""
        origin = np.asarray(origin, float)
        if origin.shape != self.point_shape:
            raise ValueError(f"the chart origin must be one point of shape {self.point_shape}")
        origin = self.validate(origin)
        return {"origin": origin, "basis": self.tangent_basis(origin)}

    def pt_exp_frame(self, frame, coords):
        """``exp_origin`` of chart coordinates ``(..., dim)``, the chart given by
        :meth:`chart_frame` (arrays or tensors, e.g. ``pm.Data``)."""
        origin = pt.as_tensor_variable(frame["origin"])
        coords = pt.as_tensor_variable(coords)
        v = pt.tensordot(coords, pt.as_tensor_variable(frame["basis"]), axes=[[-1], [0]])
        s = pt.sum(coords**2, axis=-1, keepdims=True)  # |v|_L^2: the frame is orthonormal
        return ptn.cosh_sqrt(s) * origin + ptn.sinhc_sqrt(s) * v

    def pt_exp_coords(self, origin, coords):
        """``exp_origin`` of chart coordinates ``coords`` ``(..., dim)`` (tensor)."""
        return self.pt_exp_frame(self.chart_frame(origin), coords)

    def pt_log_frame(self, frame, x):
        """Chart coordinates ``<log_origin(x), E_a>_L`` (the Minkowski product: the
        Euclidean one of the generic route would read the frame wrongly)."""
        origin = pt.as_tensor_variable(frame["origin"])
        basis = pt.as_tensor_variable(frame["basis"]) * _signature_flip(self.dim)
        v = self.pt_log(origin, x)
        return pt.tensordot(v, basis, axes=[[-1], [1]])

    def pt_point_checks(self, x):
        """``x_0 > 0`` and ``|<x, x>_L + 1| < 1e-6 (1 + x_0^2)``."""
        x = pt.as_tensor_variable(x)
        return [
            pt.gt(x[..., 0], 0.0),
            pt.lt(pt.abs(_pt_minkowski(x, x) + 1.0), 1e-6 * (1.0 + x[..., 0] ** 2)),
        ]

    def pt_ball_exit(self, frame, omega, ball_center, ball_radius):
        r"""``T(ω)``: the ``t > 0`` with ``cosh ρ(m0, γ(t)) = a cosh t + b sinh t = cosh r``.

        ``γ(t) = cosh t o + sinh t w`` is the geodesic from the frame's origin ``o``
        along the unit vector ``w`` of ``ω``; ``a = -<m0, o>_L``, ``b = -<m0, w>_L``.
        As ``a^2 - b^2 >= 1``, ``a cosh t + b sinh t = A cosh(t + φ)`` with
        ``A = sqrt(a^2 - b^2)``, ``tanh φ = b/a``: ``T = arccosh(cosh r / A) - φ``.
        """
        basis = pt.as_tensor_variable(frame["basis"])
        origin = pt.as_tensor_variable(frame["origin"])
        m0 = pt.as_tensor_variable(np.asarray(ball_center, float))
        w = pt.tensordot(omega, basis, axes=[[-1], [0]])
        a = -_pt_minkowski(origin, m0)
        b = -_pt_minkowski(w, m0)
        big_a = pt.sqrt(pt.maximum((a - b) * (a + b), 1.0))
        phi = pt.arctanh(b / a)
        return pt.arccosh(pt.maximum(np.cosh(ball_radius) / big_a, 1.0)) - phi

    def pt_log(self, x, y):
        x, y = pt.as_tensor_variable(x), pt.as_tensor_variable(y)
        q, w = _pt_gap(x, y)
        u = w - pt.shape_padright(0.5 * q) * x
        # rho/sinh(rho) = asinh(a)/(a sqrt(1 + a^2)), a = sinh(rho/2): smooth in a^2
        a2 = 0.25 * q
        fac = _pt_asinhc_sq(a2) / pt.sqrt(1.0 + a2)
        return pt.shape_padright(fac) * u

    # the moving chart (random footpoints): transport from the origin, the frame of
    # hyperbolic_basis
    def pt_exp_noise(self, x, w):
        """``exp_x(P_x w)``, ``P_x w = sum_a w_a E_a`` in the boosted frame
        ``E_a = (x_a, e_a + x_a xbar/(1 + x_0))`` (``hyperbolic_basis``):
        orthonormal, so a standard normal ``w`` of ``R^d`` is standard
        normal on ``T_x``."""
        x = pt.as_tensor_variable(x)
        v = self._pt_transport(x, w)
        s = pt.sum(pt.as_tensor_variable(w) ** 2, axis=-1, keepdims=True)
        return ptn.cosh_sqrt(s) * x + ptn.sinhc_sqrt(s) * v

    def pt_noise_norm(self, x, w):
        """``|w|`` (the frame is orthonormal)."""
        return pt.sqrt(pt.sum(pt.as_tensor_variable(w) ** 2, axis=-1) + 1e-300)

    def pt_log_noise(self, x, y):
        """``<log_x(y), E_a>_L = vbar - xbar v_0/(1 + x_0)`` (``v`` tangent at ``x``)."""
        x = pt.as_tensor_variable(x)
        v = self.pt_log(x, y)
        return v[..., 1:] - x[..., 1:] * pt.shape_padright(v[..., 0] / (1.0 + x[..., 0]))

    @staticmethod
    def _pt_transport(x, w):
        w = pt.as_tensor_variable(w)
        xw = pt.shape_padright(pt.sum(x[..., 1:] * w, axis=-1))
        rest = w + xw * x[..., 1:] / pt.shape_padright(1.0 + x[..., 0])
        return pt.concatenate([xw, rest], axis=-1)

    def pt_dist(self, x, y):
        q, _ = _pt_gap(pt.as_tensor_variable(x), pt.as_tensor_variable(y))
        return 2.0 * pt.arcsinh(0.5 * pt.sqrt(q + 1e-300))

    def pt_inner(self, x, u, v):
        return _pt_minkowski(u, v)

    def pt_norm(self, x, v):
        return pt.sqrt(pt.maximum(self.pt_inner(x, v, v), 0.0) + 1e-300)

    def pt_frechet_gradient_norm(self, x, data):
        r"""``||sum_i log_x(x_i)||_x`` (KNG's norm) from matrix-vector products.

        With ``c_i = -<x, x_i>_L = cosh ρ_i`` and ``f_i = ρ_i/sinh ρ_i
        = asinh(sqrt(s_i))/sqrt(s_i)``, ``s_i = c_i^2 - 1 = sinh^2 ρ_i``,

        .. math:: \sum_i \log_x(x_i) = \sum_i f_i (x_i - c_i x)
                  = X^\top f - \Big(\sum_i f_i c_i\Big) x,

        two matrix-vector products with the ``(n, d+1)`` data instead of ``n`` log maps
        (the hot loop of NUTS). ``s_i`` is computed as ``(c_i - 1)(c_i + 1)``; at a datum
        equal to ``x`` the series branch keeps the gradient finite.
        """
        x, data = pt.as_tensor_variable(x), pt.as_tensor_variable(data)
        flip = _signature_flip(self.dim)
        c = -pt.tensordot(x * flip, data, axes=[[-1], [-1]])  # (..., n)
        f = _pt_asinhc_sq((c - 1.0) * (c + 1.0))
        total = pt.tensordot(f, data, axes=[[-1], [0]]) - pt.sum(f * c, axis=-1)[..., None] * x
        return self.pt_norm(x, total)

    def pt_log_volume_density(self, coords):
        coords = pt.as_tensor_variable(coords)
        s = pt.sum(coords**2, axis=-1)
        return (self.dim - 1) * ptn.log_sinhc_sqrt(s)
