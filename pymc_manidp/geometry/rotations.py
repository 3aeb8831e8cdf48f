r"""The rotation group :math:`SO(3)` with its bi-invariant metric.

Points are rotation matrices ``(..., 3, 3)`` (orthogonal, determinant ``+1``);
tangent vectors at ``x`` are ambient matrices ``x \hat w`` with ``\hat w`` skew
(``hat``), measured by

.. math:: \langle U, V\rangle_x = \tfrac12 \operatorname{tr}(U^\top V),
          \qquad |x \hat w|_x = |w|,

so a tangent vector's length is the angle it rotates by. The exponential map is
Rodrigues' formula, :math:`\exp_x(x\hat w) = x \operatorname{expm}(\hat w)`, and the
distance is the rotation angle of :math:`x^\top y`, in ``[0, pi]``:

.. math:: \rho(x, y) = 2\,\operatorname{atan2}\big(|x - y|_F / (2\sqrt2),\ |q_0|\big),

``q_0`` the scalar part of the unit quaternion of :math:`x^\top y` (Shepperd's
construction, accurate to rounding near ``pi``); the numerator
:math:`|x - y|_F^2 = 8\sin^2(\rho/2)` keeps full relative accuracy near 0, where
``arccos((tr - 1)/2)`` would lose half the digits.

SO(3) is :math:`\mathbb{RP}^3` of radius 2: constant sectional curvature ``1/4``,
injectivity radius ``pi``, total volume :math:`8\pi^2`, so ``r* = pi/2`` and the
curvature factor of both papers is ``H = r cot r``. The volume density of the exp
chart in normal coordinates is :math:`(\sin(t/2)/(t/2))^2`, ``t = |c|``, and the
Laplace radius has density :math:`\propto e^{-t/\sigma}\sin^2(t/2)` on ``[0, pi]``.

Quaternions here are scalar-first ``(w, x, y, z)`` inside the module;
:meth:`~pymc_manidp.geometry.rotations.Rotations.from_quaternions` and
:meth:`~pymc_manidp.geometry.rotations.Rotations.to_quaternions` follow
``scipy.spatial.transform.Rotation`` (scalar-last by default, ``scalar_first=True``
for the other convention).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pytensor.tensor as pt

from pymc_manidp._validation import as_points, check_bool, check_tol, first_bad_row
from pymc_manidp.geometry._numba import pt_numerics as ptn
from pymc_manidp.geometry._numba.numerics import log_sinc, sinc
from pymc_manidp.geometry.base import ManifoldBase

__all__ = [
    "Rotations",
    "hat",
    "quaternions_of",
    "rotation_matrices_of",
    "rotations_laplace_log_normalizer",
    "vee",
]

# Angles closer than this to pi: the log map (the axis of a half turn) is undefined or
# too ill-conditioned.
_CUT_TOL = 1e-8
_LOG_VOLUME = float(np.log(8.0 * np.pi**2))
# the skew matrices hat(e_k): an orthonormal basis of so(3) for <A, B> = tr(A^T B)/2
_HAT_BASIS = np.array(
    [
        [[0.0, 0.0, 0.0], [0.0, 0.0, -1.0], [0.0, 1.0, 0.0]],
        [[0.0, 0.0, 1.0], [0.0, 0.0, 0.0], [-1.0, 0.0, 0.0]],
        [[0.0, -1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 0.0]],
    ]
)


# --- NumPy maths ------------------------------------------------------------------------
def _t(a):
    return np.swapaxes(a, -1, -2)


def hat(w):
    r"""Skew matrices of vectors: :math:`\hat w v = w \times v`.

    Parameters
    ----------
    w : array_like, shape ``(..., 3)``
        Vectors (axial vectors of so(3)).

    Returns
    -------
    ndarray, shape ``(..., 3, 3)``
        The skew matrices :math:`\hat w`.

    Examples
    --------
    >>> hat([1.0, 2.0, 3.0]) @ np.array([0.0, 0.0, 1.0])
    array([ 2., -1.,  0.])
    """
    w = np.asarray(w, float)
    return np.tensordot(w, _HAT_BASIS, axes=([-1], [0]))


def vee(a):
    """The axial vector of the skew part of a matrix (the inverse of ``hat``).

    Parameters
    ----------
    a : array_like, shape ``(..., 3, 3)``
        Matrices; only their skew part is used.

    Returns
    -------
    ndarray, shape ``(..., 3)``
        ``w`` with ``hat(w) = (a - a^T)/2``.

    Examples
    --------
    >>> vee(hat([1.0, 2.0, 3.0])).tolist()
    [1.0, 2.0, 3.0]
    """
    a = np.asarray(a, float)
    return 0.5 * np.stack(
        [a[..., 2, 1] - a[..., 1, 2], a[..., 0, 2] - a[..., 2, 0], a[..., 1, 0] - a[..., 0, 1]],
        axis=-1,
    )


def quaternions_of(r):
    """Unit quaternions of rotation matrices, scalar first with ``w >= 0``.

    Shepperd's construction: the symmetric matrix ``K = 4 q q^T`` is linear in ``r``;
    its row with the largest diagonal entry (``4 q_k^2 >= 1``) is ``4 q_k q``, whose
    normalization is accurate to rounding for every angle (near a half turn too).

    Parameters
    ----------
    r : array_like, shape ``(..., 3, 3)``
        Rotation matrices.

    Returns
    -------
    ndarray, shape ``(..., 4)``
        ``(w, x, y, z)`` with ``w >= 0``.

    Examples
    --------
    >>> quaternions_of(np.diag([1.0, -1.0, -1.0])).tolist()  # a half turn about x
    [0.0, 1.0, 0.0, 0.0]
    """
    r = np.asarray(r, float)
    k = _k_rows(r)  # (..., 4, 4), rows 4 q_k q
    diag = np.diagonal(k, axis1=-2, axis2=-1)
    pick = np.argmax(diag, axis=-1)
    row = np.take_along_axis(k, pick[..., None, None], axis=-2)[..., 0, :]
    q = row / np.linalg.norm(row, axis=-1, keepdims=True)
    return np.where(q[..., :1] < 0, -q, q)


def _k_rows(r):
    """``K = 4 q q^T`` ``(..., 4, 4)`` of rotation matrices (scalar first)."""
    tr = r[..., 0, 0] + r[..., 1, 1] + r[..., 2, 2]
    a = r[..., 2, 1] - r[..., 1, 2]
    b = r[..., 0, 2] - r[..., 2, 0]
    c = r[..., 1, 0] - r[..., 0, 1]
    xy = r[..., 0, 1] + r[..., 1, 0]
    xz = r[..., 0, 2] + r[..., 2, 0]
    yz = r[..., 1, 2] + r[..., 2, 1]
    rows = [
        [1.0 + tr, a, b, c],
        [a, 1.0 + 2.0 * r[..., 0, 0] - tr, xy, xz],
        [b, xy, 1.0 + 2.0 * r[..., 1, 1] - tr, yz],
        [c, xz, yz, 1.0 + 2.0 * r[..., 2, 2] - tr],
    ]
    return np.stack([np.stack(np.broadcast_arrays(*row), axis=-1) for row in rows], axis=-2)


def rotation_matrices_of(q):
    """Rotation matrices of quaternions, scalar first.

    Parameters
    ----------
    q : array_like, shape ``(..., 4)``
        Quaternions ``(w, x, y, z)``; they need not have norm 1 (the map is homogeneous
        of degree 0), but must not be 0.

    Returns
    -------
    ndarray, shape ``(..., 3, 3)``
        The rotations; ``q`` and ``-q`` give the same one.

    Examples
    --------
    >>> np.round(rotation_matrices_of([0.0, 0.0, 0.0, 2.0]), 12).tolist()  # about z
    [[-1.0, 0.0, 0.0], [0.0, -1.0, 0.0], [0.0, 0.0, 1.0]]
    """
    q = np.asarray(q, float)
    w, x, y, z = q[..., 0], q[..., 1], q[..., 2], q[..., 3]
    n2 = w * w + x * x + y * y + z * z
    rows = [
        [w * w + x * x - y * y - z * z, 2 * (x * y - w * z), 2 * (x * z + w * y)],
        [2 * (x * y + w * z), w * w - x * x + y * y - z * z, 2 * (y * z - w * x)],
        [2 * (x * z - w * y), 2 * (y * z + w * x), w * w - x * x - y * y + z * z],
    ]
    out = np.stack([np.stack(row, axis=-1) for row in rows], axis=-2)
    return out / n2[..., None, None]


def _rotvec_of_quaternion(q):
    """Rotation vectors ``(..., 3)`` (angle in ``[0, pi]`` times the axis) of unit
    quaternions with ``w >= 0``."""
    s = np.linalg.norm(q[..., 1:], axis=-1)
    safe = np.where(s > 0, s, 1.0)
    # 2 atan2(s, w)/s: atan2 of a tiny s is accurate; only s = 0 needs its limit 2/w
    fac = np.where(s > 0, 2.0 * np.arctan2(s, q[..., 0]) / safe, 2.0 / q[..., 0])
    return fac[..., None] * q[..., 1:]


def _rodrigues(w):
    """``expm(hat(w))`` ``(..., 3, 3)``: ``I + sinc(t) W + ½ sinc(t/2)^2 W^2``."""
    t = np.linalg.norm(w, axis=-1)[..., None, None]
    big_w = hat(w)
    return np.eye(3) + sinc(t) * big_w + 0.5 * sinc(0.5 * t) ** 2 * (big_w @ big_w)


def so3_exp(x, v):
    """``exp_x(v) = x expm(x^T v)`` for tangent vectors ``v`` at ``x`` ``(..., 3, 3)``."""
    return x @ _rodrigues(vee(_t(x) @ v))


def so3_log(x, y):
    """``log_x(y) = x logm(x^T y)``; ``ValueError`` at half turns (the cut locus)."""
    q = quaternions_of(_t(x) @ y)
    cut = np.pi - 2.0 * np.arctan2(np.linalg.norm(q[..., 1:], axis=-1), q[..., 0]) < _CUT_TOL
    if np.any(cut):
        raise ValueError(
            "log is undefined for rotations a half turn apart (the cut locus): "
            f"{first_bad_row(cut)}. Keep data inside a ball of radius < pi/2."
        )
    return x @ hat(_rotvec_of_quaternion(q))


def so3_dist(x, y):
    """The rotation angle of ``x^T y`` in ``[0, pi]``, shape ``(...)`` (module docstring)."""
    half_sin = np.sqrt(np.sum((x - y) ** 2, axis=(-2, -1))) / (2.0 * np.sqrt(2.0))
    half_cos = quaternions_of(_t(x) @ y)[..., 0]
    return 2.0 * np.arctan2(half_sin, half_cos)


def _orthonormalize(x):
    """The nearest rotations of near-rotations: two Newton–Schulz steps of the polar
    factor, ``x (3I - x^T x)/2`` (an orthogonality error ``e`` becomes about
    ``1.5 e^2``: from the accepted ``1e-6`` to rounding in two steps), matrix
    products only."""
    for _ in range(2):
        x = 0.5 * x @ (3.0 * np.eye(3) - _t(x) @ x)
    return x


def rotations_laplace_log_normalizer(sigma):
    r"""``log Z(sigma)`` of the unrestricted Laplace on SO(3), as a PyTensor graph.

    In normal coordinates (``vol(S^2) = 4 pi``, volume density
    :math:`(\sin(t/2)/(t/2))^2`):

    .. math:: Z(\sigma) = 16\pi \int_0^\pi e^{-t/\sigma}\sin^2(t/2)\,dt
              = \frac{8\pi\sigma\,\big(\sigma^2 (1 - e^{-\pi/\sigma})
                - 2 e^{-\pi/\sigma}\big)}{1 + \sigma^2},

    from :math:`2\sin^2(t/2) = 1 - \cos t` and
    :math:`\int_0^\pi e^{-t/\sigma}\cos t\,dt = \sigma(1 + e^{-\pi/\sigma})/(1 + \sigma^2)`.
    It tends to :math:`8\pi\sigma^3` (the Laplace on ``R^3``) as
    ``sigma -> 0`` and to the volume :math:`8\pi^2` as ``sigma -> inf``. Written
    without overflow or cancellation for every normal ``sigma`` and differentiable in
    it (a random ``sigma`` in noise-aware models).

    Parameters
    ----------
    sigma : float or tensor, shape ``(...)``
        The scale ``sigma > 0``.

    Returns
    -------
    TensorVariable, shape ``(...)``
        ``log Z(sigma)``.

    Examples
    --------
    >>> z = float(np.exp(rotations_laplace_log_normalizer(1e6).eval()))
    >>> round(z / (8 * np.pi**2), 5)  # sigma -> inf: the volume
    1.0
    """
    sigma = pt.as_tensor_variable(np.asarray(sigma, float) if not hasattr(sigma, "type") else sigma)
    log_s = pt.log(sigma)
    a = np.pi / sigma
    # sigma^2 (1 - e^{-a}) - 2 e^{-a} = sigma^2 (-expm1(-a) - 2 e^{-a - 2 log sigma})
    inner = -pt.expm1(-a) - 2.0 * pt.exp(-a - 2.0 * log_s)
    # log(1 + sigma^2) = softplus(2 log sigma), without overflow; not pt.logaddexp, whose op
    # has no __props__, so a graph holding it could not be keyed by the nutpie cache
    return np.log(8.0 * np.pi) + 3.0 * log_s + pt.log(inner) - pt.softplus(2.0 * log_s)


# --- PyTensor helpers ----------------------------------------------------------------------
def _pt_vee(a):
    return 0.5 * pt.stack(
        [a[..., 2, 1] - a[..., 1, 2], a[..., 0, 2] - a[..., 2, 0], a[..., 1, 0] - a[..., 0, 1]],
        axis=-1,
    )


def _pt_hat(w):
    zero = pt.zeros_like(w[..., 0])
    rows = [
        [zero, -w[..., 2], w[..., 1]],
        [w[..., 2], zero, -w[..., 0]],
        [-w[..., 1], w[..., 0], zero],
    ]
    return pt.stack([pt.stack(row, axis=-1) for row in rows], axis=-2)


def _pt_matmul(a, b):
    """``a @ b`` for ``(..., 3, 3)`` stacks, broadcast elementwise: no batched matmul,
    whose static batch length PyTensor takes from the first operand
    (``pt_numerics``'s module docstring)."""
    return pt.sum(pt.shape_padright(a) * pt.shape_padaxis(b, -3), axis=-2)


def _pt_t_matmul(a, b):
    """``a^T @ b`` for ``(..., 3, 3)`` stacks, broadcast elementwise."""
    return pt.sum(pt.shape_padright(a) * pt.shape_padaxis(b, -2), axis=-3)


# --- the manifold -----------------------------------------------------------------------------
@dataclass(frozen=True)
class Rotations(ManifoldBase):
    r"""The rotation group SO(3): rotation matrices ``(..., 3, 3)``, bi-invariant metric.

    The metric is :math:`\langle A, B\rangle = \tfrac12\operatorname{tr}(A^\top B)` on
    :math:`\mathfrak{so}(3)` (the dot product of the axial vectors), so the geodesic
    distance of two orientations is the angle of the rotation between them, in
    ``[0, pi]``. Orientation data (rigid bodies, crystal grains, head poses, wearable
    sensors) live here.

    Notes
    -----
    Constant sectional curvature ``1/4`` (SO(3) is :math:`\mathbb{RP}^3` of radius 2),
    injectivity radius ``pi``, ``r* = pi/2``, volume :math:`8\pi^2`. Volume density of
    ``exp_x`` in normal coordinates, ``t = |c|``:

    .. math:: \left(\frac{\sin(t/2)}{t/2}\right)^2, \qquad t \le \pi.

    The Haar (uniform) law's rotation angle has density :math:`(1 - \cos\theta)/\pi`.
    The chart's frame at ``x`` is ``x hat(e_k)``, ``k = 1, 2, 3``: chart coordinates
    are rotation vectors in the body frame of ``x``.

    Examples
    --------
    >>> import numpy as np
    >>> M = Rotations()
    >>> quarter = M.from_rotvecs([0.0, 0.0, np.pi / 2])  # a quarter turn about z
    >>> float(M.dist(np.eye(3), quarter))
    1.5707963267948966
    >>> M.to_quaternions(quarter).round(6).tolist()  # scalar last, as scipy
    [0.0, 0.0, 0.707107, 0.707107]
    """

    #: The name in files and ``--manifold``.
    name: ClassVar[str] = "rotations"
    fused_kernels: ClassVar[str | None] = "rotations"
    #: How a data file holds the records.
    record_layout: ClassVar[str] = "(n, 3, 3) or (n, 9): rotation matrices, row by row"
    #: Other layouts of a data file (``--layout``).
    layouts: ClassVar[dict[str, str]] = {
        "quaternion": "(n, 4): unit quaternions, scalar last (x, y, z, w) as SciPy, or scalar "
        "first (w, x, y, z) with --scalar-first",
    }

    dim = 3
    point_shape = (3, 3)
    injectivity_radius = np.pi
    curvature_bounds = (0.25, 0.25)

    # the volume density (sin(t/2)/(t/2))^2 <= 1 depends on t = |c| only, and the group
    # acts transitively by isometries (left translations)
    exact_sampling = True
    # log refuses angles within _CUT_TOL of a half turn, and r* = pi/2 lets two records
    # be 2r ~ pi apart: radii past pi/2 - 1e-8 are refused (DataDomain)
    log_cut_margin = _CUT_TOL
    homogeneous = True
    volume_is_radial = True
    gaussian_shape = (4,)
    noise_shape = (3,)

    # --- the registry's members ------------------------------------------------------
    @classmethod
    def from_record_shape(cls, shape: tuple[int, ...]) -> Rotations:
        """The manifold of data records of this shape: ``(3, 3)`` or ``(9,)``.

        Examples
        --------
        >>> Rotations.from_record_shape((9,))
        Rotations()
        """
        if tuple(shape) in ((3, 3), (9,)):
            return cls()
        hint = (
            ". 4 numbers per record are read as unit quaternions with --layout quaternion "
            "(scalar last, as SciPy; --scalar-first for w, x, y, z), or in Python with "
            "Rotations().from_quaternions"
            if tuple(shape) == (4,)
            else ""
        )
        raise ValueError(
            f"rotations data hold one rotation matrix per record, shape (3, 3) or 9 numbers "
            f"(row by row); got records of shape {tuple(shape)}{hint}"
        )

    @classmethod
    def from_layout(cls, layout: str, records, *, scalar_first: bool = False):
        """``(Rotations(), matrices (n, 3, 3))`` of records in another layout:
        ``"quaternion"``, ``(n, 4)`` unit quaternions (scalar last unless
        ``scalar_first``; :meth:`~pymc_manidp.geometry.rotations.Rotations.from_quaternions`).

        Examples
        --------
        >>> M, x = Rotations.from_layout("quaternion", [[0.0, 0.0, 0.0, 1.0]])
        >>> x.tolist() == [np.eye(3).tolist()]
        True
        """
        if layout != "quaternion":
            return super().from_layout(layout, records)
        q = np.asarray(records)
        if q.ndim != 2 or q.shape[1] != 4:
            raise ValueError(
                f"--layout quaternion reads 4 numbers per record (n, 4); got shape {q.shape}"
            )
        M = cls()
        return M, M.from_quaternions(q, scalar_first=check_bool(scalar_first, "scalar_first"))

    @classmethod
    def audit_space(cls) -> tuple:
        """``(manifold, public center, default radius, quadrature nodes per axis)`` for
        ``pymc-manidp audit --manifold rotations``: SO(3) at the identity, radius
        ``pi/8``, 60 nodes per axis (a three-dimensional grid, as for SPD(2))."""
        return cls(), np.eye(3), np.pi / 8, 60

    @classmethod
    def examples(cls) -> tuple:
        """Small instances, one per kind of geometry the class covers."""
        return (cls(),)

    # --- constants -----------------------------------------------------------------------
    @property
    def log_volume(self) -> float:
        r""":math:`\log 8\pi^2`."""
        return _LOG_VOLUME

    @property
    def origin(self):
        """The identity rotation."""
        return np.eye(3)

    @property
    def generic_point(self):
        """The rotation by the vector ``(0.3, -0.7, 1.1)``: no axis of symmetry."""
        return _rodrigues(np.array([0.3, -0.7, 1.1]))

    # --- points -------------------------------------------------------------------------
    def sample_uniform(self, rng, size=()):
        """Haar-uniform rotations ``(*size, 3, 3)``: the rotations of normalized standard
        Gaussian quaternions (uniform on ``S^3``, whose image is Haar)."""
        return rotation_matrices_of(rng.standard_normal((*tuple(size), 4)))

    def ambient_mean_start(self, m):
        """The rotation nearest the mean matrix ``m`` (its polar factor, the chordal
        mean), unless ``m`` is near singular (data spread over the group: None)."""
        m = np.asarray(m, float)
        u, s, vt = np.linalg.svd(m)
        if s[-1] < 1e-3 or np.linalg.det(m) <= 0:
            return None
        return u @ vt

    def coerce(self, points):
        """Rotation matrices ``(..., 3, 3)`` of a SciPy ``Rotation`` (one or a stack, or
        a list of them), by its public ``as_matrix()``; anything else unchanged.

        Examples
        --------
        >>> from scipy.spatial.transform import Rotation
        >>> Rotations().coerce(Rotation.from_rotvec([[0, 0, 1.0], [1.0, 0, 0]])).shape
        (2, 3, 3)
        """
        # only an object of an imported module can be a Rotation: nothing is imported here
        st = sys.modules.get("scipy.spatial.transform")
        if st is None:
            return points
        if isinstance(points, st.Rotation):
            return points.as_matrix()
        if (
            isinstance(points, (list, tuple))
            and points
            and all(isinstance(p, st.Rotation) for p in points)
        ):
            return st.Rotation.concatenate(points).as_matrix()
        return points

    def project(self, points):
        """The nearest rotations (Frobenius norm) of ``3 x 3`` matrices near SO(3).

        For records that are rotations up to rounding (frames written with 6
        decimals, a sensor's drift), which
        :meth:`~pymc_manidp.geometry.rotations.Rotations.validate` refuses beyond its
        tolerance. The nearest rotation of ``A = U S V^T`` (SVD) is
        ``U diag(1, 1, det(U V^T)) V^T``: the polar factor, with the sign of the
        last axis fixed so that the determinant is ``+1`` (a reflection maps to the
        nearest rotation, not to itself). Every record is projected on its own.

        Parameters
        ----------
        points : array_like, shape ``(..., 3, 3)``
            Finite real matrices, or a SciPy ``Rotation``.

        Returns
        -------
        ndarray, shape ``(..., 3, 3)``
            Rotation matrices.

        Raises
        ------
        ValueError
            NaN/inf, the wrong shape, or a zero matrix (every rotation is equally
            near it), naming the first bad row.

        Examples
        --------
        >>> M = Rotations()
        >>> rounded = np.round(M.from_rotvecs([0.1, -0.2, 0.3]), 3)
        >>> bool(np.allclose(M.project(rounded), M.from_rotvecs([0.1, -0.2, 0.3]), atol=1e-3))
        True
        """
        x = as_points(self.coerce(points), self.point_shape)
        # the polar factor does not change under a positive scale: scaled to entries <= 1,
        # so that huge entries (1e308) do not overflow the SVD
        scale = np.max(np.abs(x), axis=(-2, -1), keepdims=True)
        zero = scale[..., 0, 0] == 0
        if np.any(zero):
            raise ValueError(
                f"cannot project a zero matrix onto the rotations: {first_bad_row(zero)} "
                "(every rotation is equally near it); drop the record"
            )
        u, _, vt = np.linalg.svd(x / scale)
        d = np.sign(np.linalg.det(u @ vt))
        d = np.where(d == 0, 1.0, d)
        u = u * np.stack([np.ones_like(d), np.ones_like(d), d], axis=-1)[..., None, :]
        return u @ vt

    def validate(self, points, tol: float = 1e-6):
        """Check rotation matrices and return them orthonormalized to rounding.

        Accepted: real matrices ``(..., 3, 3)`` with ``|x^T x - I| <= tol`` entrywise
        and determinant ``+1``, or a SciPy ``Rotation``
        (:meth:`~pymc_manidp.geometry.rotations.Rotations.coerce`); each is
        replaced by the nearest rotation (its polar factor). Refused, naming the first
        bad row: NaN/inf, the wrong shape, matrices that are not orthogonal, and
        reflections (determinant ``-1``). Records rounded further than ``tol`` are
        projected only on request (:meth:`~pymc_manidp.geometry.rotations.Rotations.project`).
        """
        tol = check_tol(tol)
        x = as_points(self.coerce(points), self.point_shape)
        with np.errstate(over="ignore", invalid="ignore"):  # huge entries: gap inf, refused
            gap = np.max(np.abs(_t(x) @ x - np.eye(3)), axis=(-2, -1))
        off = ~(gap <= tol)  # NaN-safe: a NaN gap (inf - inf) is refused
        if np.any(off):
            raise ValueError(
                f"points are not rotation matrices: {first_bad_row(off)} not orthogonal "
                f"(largest |x^T x - I| = {float(np.max(gap)):.3g}, tolerance {tol:.3g}). "
                "Rotations hold 3 x 3 orthogonal matrices with determinant +1 (row by row "
                "in files); for quaternions or rotation vectors use Rotations()."
                "from_quaternions / from_rotvecs. Rotations rounded (e.g. to 6 decimals) "
                "can be moved to the nearest rotation, explicitly and recorded: "
                "Rotations().project(x), release(..., project=True) or --project"
            )
        reflection = np.linalg.det(x) < 0
        if np.any(reflection):
            raise ValueError(
                f"points include reflections: {first_bad_row(reflection)} has determinant "
                "-1 (orthogonal, but it flips handedness: a left-handed frame, or a "
                "mirrored axis), so it is not a rotation. Fix the frame's convention "
                "(negate one axis) or drop the record"
            )
        return _orthonormalize(x)

    def to_tangent(self, x, v):
        """Project ambient matrices ``v`` onto ``T_x``: ``x skew(x^T v)``."""
        x = np.asarray(x, float)
        a = _t(x) @ np.asarray(v, float)
        return x @ (0.5 * (a - _t(a)))

    # --- maps ----------------------------------------------------------------------------
    def exp(self, x, v):
        return so3_exp(np.asarray(x, float), np.asarray(v, float))

    def log(self, x, y):
        return so3_log(np.asarray(x, float), np.asarray(y, float))

    def dist(self, x, y):
        return so3_dist(np.asarray(x, float), np.asarray(y, float))

    def inner(self, x, u, v):
        return 0.5 * np.sum(np.asarray(u, float) * np.asarray(v, float), axis=(-2, -1))

    def tangent_basis(self, x):
        """Orthonormal frame ``x hat(e_k)`` at ``x``: shape ``(..., 3, 3, 3)``."""
        return np.asarray(x, float)[..., None, :, :] @ _HAT_BASIS

    def log_volume_density(self, coords):
        """``2 log(sin(t/2)/(t/2))`` for ``t = |c| <= pi``; ``-inf`` beyond (outside the
        injective chart: the ball of radius ``pi`` covers SO(3) once)."""
        coords = np.asarray(coords, float)
        t = np.sqrt(np.sum(coords**2, axis=-1))
        with np.errstate(divide="ignore"):
            return np.where(t <= np.pi, 2.0 * log_sinc(0.5 * np.minimum(t, np.pi)), -np.inf)

    # --- converters ----------------------------------------------------------------------
    def from_quaternions(self, quaternions, *, scalar_first: bool = False, tol: float = 1e-3):
        """Rotation matrices ``(..., 3, 3)`` of unit quaternions ``(..., 4)``.

        Parameters
        ----------
        quaternions : array_like, shape ``(..., 4)``
            ``(x, y, z, w)`` (scalar last, scipy's default) or, with
            ``scalar_first=True``, ``(w, x, y, z)``; ``q`` and ``-q`` are the same
            rotation.
        scalar_first : bool
            Where the scalar part ``w`` is.
        tol : float
            Norms may differ from 1 by this much (they are normalized); a larger gap
            usually means another layout (a timestamp column, Euler angles).

        Returns
        -------
        ndarray, shape ``(..., 3, 3)``
        """
        q = as_points(quaternions, (4,), name="quaternions")
        norm = np.linalg.norm(q, axis=-1)
        off = np.abs(norm - 1.0) > tol
        if np.any(off):
            raise ValueError(
                f"quaternions must have norm 1 (within {tol:g}): {first_bad_row(off)} "
                "differ. Normalize them (q / |q|) if they are quaternions, or check the "
                "layout (4 numbers per record)"
            )
        if not scalar_first:
            q = np.roll(q, 1, axis=-1)
        return rotation_matrices_of(q)

    def to_quaternions(self, points, *, scalar_first: bool = False):
        """Unit quaternions ``(..., 4)`` of rotations, scalar last (scipy's default) or
        first, with a nonnegative scalar part (of ``q`` and ``-q``)."""
        q = quaternions_of(self.validate(points))
        return q if scalar_first else np.roll(q, -1, axis=-1)

    def from_rotvecs(self, rotvecs):
        """Rotation matrices ``(..., 3, 3)`` of rotation vectors ``(..., 3)`` (axis
        times angle in radians; scipy's ``Rotation.from_rotvec``)."""
        w = as_points(rotvecs, (3,), name="rotation vectors")
        # a huge angle: the same rotation by the angle reduced to [-pi, pi] about the
        # same axis, as hat(w)^2 overflows past |w| ~ 1e154 (NaN from 0 * inf); sin and
        # cos reduce the angle exactly. Below 1e100 Rodrigues' products stay finite
        big = np.max(np.abs(w), axis=-1) > 1e100
        if np.any(big):
            wb = w[big]
            m = np.max(np.abs(wb), axis=-1, keepdims=True)
            u = wb / m
            u /= np.linalg.norm(u, axis=-1, keepdims=True)
            with np.errstate(over="ignore"):
                t = np.sum(wb * u, axis=-1, keepdims=True)  # |w|, without squaring it
            if not np.all(np.isfinite(t)):
                raise ValueError(
                    "rotation vectors must have a finite length (angle): "
                    f"{first_bad_row(~np.isfinite(t[..., 0]))} has |w| above the largest "
                    "float, 1.8e308 rad"
                )
            w[big] = u * np.arctan2(np.sin(t), np.cos(t))
        return _rodrigues(w)

    def to_rotvecs(self, points):
        """Rotation vectors ``(..., 3)`` of rotations, angle in ``[0, pi]``: the chart
        coordinates at the identity (scipy's ``Rotation.as_rotvec``)."""
        return _rotvec_of_quaternion(quaternions_of(self.validate(points)))

    # --- PyTensor twins ------------------------------------------------------------------
    def pt_exp_frame(self, frame, coords):
        """``origin expm(origin^T sum_k c_k E_k)`` by Rodrigues' formula, in elementwise
        ops (``hat(w)^2 = w w^T - |w|^2 I``), smooth at ``c = 0``."""
        origin = pt.as_tensor_variable(frame["origin"])
        basis = pt.as_tensor_variable(frame["basis"])
        v = pt.tensordot(pt.as_tensor_variable(coords), basis, axes=[[-1], [0]])
        return self.pt_exp_noise(origin, _pt_vee(_pt_t_matmul(origin, v)))

    # the moving chart (random footpoints): P_x w = x hat(w), the frame x hat(e_k)
    def pt_exp_noise(self, x, w):
        """``x expm(hat(w))`` by Rodrigues' formula: ``P_x w = x hat(w)`` has norm
        ``|w|`` in the metric ``1/2 tr``, so a standard normal ``w`` of
        ``R^3`` is standard normal on ``T_x``."""
        x, w = pt.as_tensor_variable(x), pt.as_tensor_variable(w)
        s = pt.sum(w**2, axis=-1)[..., None, None]
        ww = pt.shape_padright(w) * pt.shape_padaxis(w, -2)
        rot = (
            pt.eye(3) * (1.0 - 0.5 * ptn.sinc_sqrt(s / 4.0) ** 2 * s)
            + ptn.sinc_sqrt(s) * _pt_hat(w)
            + 0.5 * ptn.sinc_sqrt(s / 4.0) ** 2 * ww
        )
        return _pt_matmul(x, rot)

    def pt_noise_norm(self, x, w):
        """``|w|``."""
        return pt.sqrt(pt.sum(pt.as_tensor_variable(w) ** 2, axis=-1) + 1e-300)

    def pt_log_noise(self, x, y):
        """``vee(x^T log_x(y))``."""
        x = pt.as_tensor_variable(x)
        return _pt_vee(_pt_t_matmul(x, self.pt_log(x, y)))

    def pt_log(self, x, y):
        """``x hat(theta/sin(theta) v)``, ``v = vee(x^T y) = sin(theta) axis``: the
        series of ``theta/sin(theta)`` keeps the gradient finite at ``y = x``."""
        x, y = pt.as_tensor_variable(x), pt.as_tensor_variable(y)
        rel = _pt_t_matmul(x, y)
        v = _pt_vee(rel)
        c = 0.5 * (rel[..., 0, 0] + rel[..., 1, 1] + rel[..., 2, 2] - 1.0)
        w = ptn.theta_over_sin(pt.sum(v**2, axis=-1), c)[..., None] * v
        return _pt_matmul(x, _pt_hat(w))

    def pt_dist(self, x, y):
        """``2 atan2(|x - y|_F/(2 sqrt 2), sqrt((1 + tr x^T y)/4))``."""
        x, y = pt.as_tensor_variable(x), pt.as_tensor_variable(y)
        half_sin = pt.sqrt(pt.sum((x - y) ** 2, axis=(-2, -1)) / 8.0 + 1e-300)
        cos2 = (1.0 + pt.sum(x * y, axis=(-2, -1))) / 4.0
        return 2.0 * pt.arctan2(half_sin, pt.sqrt(pt.maximum(cos2, 0.0) + 1e-300))

    def pt_inner(self, x, u, v):
        return 0.5 * pt.sum(pt.as_tensor_variable(u) * v, axis=(-2, -1))

    def pt_norm(self, x, v):
        return pt.sqrt(self.pt_inner(x, v, v) + 1e-300)

    def pt_log_volume_density(self, coords):
        s = pt.sum(pt.as_tensor_variable(coords) ** 2, axis=-1)
        inside = s <= np.pi**2
        val = 2.0 * ptn.log_sinc_sqrt(pt.switch(inside, s, 0.0) / 4.0)
        return pt.switch(inside, val, -np.inf)

    def pt_frechet_gradient_norm(self, x, data):
        r"""``||sum_i log_x(x_i)||_x`` (KNG's norm) as the length of a sum of vectors.

        ``log_x(x_i) = x hat(w_i)`` with ``w_i = theta_i/sin(theta_i) v_i``,
        ``v_i = vee(x^T x_i)`` and ``cos(theta_i) = (tr(x^T x_i) - 1)/2``, so the norm
        is ``|sum_i w_i|``: one tensor product with the ``(n, 3, 3)`` data and
        elementwise work on ``n`` vectors, instead of ``n`` matrix logarithms.
        """
        x, data = pt.as_tensor_variable(x), pt.as_tensor_variable(data)
        rel = pt.tensordot(x, data, axes=[[-2], [-2]])  # (..., a, n, b) = (x^T x_i)_ab
        v = 0.5 * pt.stack(
            [
                rel[..., 2, :, 1] - rel[..., 1, :, 2],
                rel[..., 0, :, 2] - rel[..., 2, :, 0],
                rel[..., 1, :, 0] - rel[..., 0, :, 1],
            ],
            axis=-1,
        )  # (..., n, 3)
        c = 0.5 * (rel[..., 0, :, 0] + rel[..., 1, :, 1] + rel[..., 2, :, 2] - 1.0)
        w = ptn.theta_over_sin(pt.sum(v**2, axis=-1), c)
        total = pt.sum(w[..., None] * v, axis=-2)
        return pt.sqrt(pt.sum(total**2, axis=-1) + 1e-300)

    def pt_point_checks(self, x):
        """``|x^T x - I| < 1e-6`` entrywise and ``det x > 0``."""
        x = pt.as_tensor_variable(x)
        gram = _pt_t_matmul(x, x)
        det = (
            x[..., 0, 0] * (x[..., 1, 1] * x[..., 2, 2] - x[..., 1, 2] * x[..., 2, 1])
            - x[..., 0, 1] * (x[..., 1, 0] * x[..., 2, 2] - x[..., 1, 2] * x[..., 2, 0])
            + x[..., 0, 2] * (x[..., 1, 0] * x[..., 2, 1] - x[..., 1, 1] * x[..., 2, 0])
        )
        return [pt.lt(pt.abs(gram - pt.eye(3)), 1e-6), pt.gt(det, 0.0)]

    def pt_ball_exit(self, frame, omega, ball_center, ball_radius):
        r"""``T(ω)``: the first ``t > 0`` where the geodesic ``γ(t) = o expm(t hat(ω))``
        from the frame's origin ``o`` leaves ``B_r(m0)``.

        The scalar part of the quaternion of :math:`m_0^\top γ(t)` is
        ``a cos(t/2) + b sin(t/2)`` (it equals ``cos(ρ(m0, γ(t))/2)`` up to sign), with
        ``a = sqrt((1 + tr m0^T o)/4)`` and, from its derivative at 0,
        ``b = tr(m0^T γ'(0))/(4a)``; the edge is where it equals ``cos(r/2)``.
        """
        m0 = pt.as_tensor_variable(np.asarray(ball_center, float))
        basis = pt.as_tensor_variable(frame["basis"])
        origin = pt.as_tensor_variable(frame["origin"])
        w = pt.tensordot(omega, basis, axes=[[-1], [0]])  # unit tangent vectors at o
        a = pt.sqrt((1.0 + pt.sum(m0 * origin)) / 4.0)
        b = pt.sum(m0 * w, axis=(-2, -1)) / (4.0 * a)
        amp = pt.sqrt(a**2 + b**2)
        cos_arg = pt.minimum(np.cos(ball_radius / 2.0) / amp, 1.0)
        return 2.0 * (pt.arctan2(b, a) + pt.arccos(cos_arg))

    def pt_laplace_log_normalizer(self, sigma):
        """``log Z(sigma)`` in closed form
        (:func:`~pymc_manidp.geometry.rotations.rotations_laplace_log_normalizer`)."""
        return rotations_laplace_log_normalizer(sigma)

    def pt_from_gaussian(self, z):
        """The rotation of the quaternion ``z`` ``(..., 4)`` (scalar first, any norm):
        Haar-uniform for a standard normal ``z``."""
        z = pt.as_tensor_variable(z)
        w, x, y, u = z[..., 0], z[..., 1], z[..., 2], z[..., 3]
        n2 = pt.sum(z**2, axis=-1)
        rows = [
            [w * w + x * x - y * y - u * u, 2 * (x * y - w * u), 2 * (x * u + w * y)],
            [2 * (x * y + w * u), w * w - x * x + y * y - u * u, 2 * (y * u - w * x)],
            [2 * (x * u - w * y), 2 * (y * u + w * x), w * w - x * x - y * y + u * u],
        ]
        out = pt.stack([pt.stack(row, axis=-1) for row in rows], axis=-2)
        return out / n2[..., None, None]

    def pt_to_gaussian(self, x):
        """The unit quaternion (scalar first) of rotations ``x``: Shepperd's row of
        ``K = 4 q q^T`` with the largest diagonal entry, normalized."""
        r = pt.as_tensor_variable(x)
        tr = r[..., 0, 0] + r[..., 1, 1] + r[..., 2, 2]
        a = r[..., 2, 1] - r[..., 1, 2]
        b = r[..., 0, 2] - r[..., 2, 0]
        c = r[..., 1, 0] - r[..., 0, 1]
        xy = r[..., 0, 1] + r[..., 1, 0]
        xz = r[..., 0, 2] + r[..., 2, 0]
        yz = r[..., 1, 2] + r[..., 2, 1]
        d = [1.0 + tr, 1.0 + 2.0 * r[..., 0, 0] - tr, 1.0 + 2.0 * r[..., 1, 1] - tr]
        d.append(1.0 + 2.0 * r[..., 2, 2] - tr)
        rows = [
            pt.stack([d[0], a, b, c], axis=-1),
            pt.stack([a, d[1], xy, xz], axis=-1),
            pt.stack([b, xy, d[2], yz], axis=-1),
            pt.stack([c, xz, yz, d[3]], axis=-1),
        ]
        pick = pt.argmax(pt.stack(d, axis=-1), axis=-1)[..., None]
        row = rows[3]
        for k in (2, 1, 0):
            row = pt.switch(pt.eq(pick, k), rows[k], row)
        return row / pt.sqrt(pt.sum(row**2, axis=-1, keepdims=True))
