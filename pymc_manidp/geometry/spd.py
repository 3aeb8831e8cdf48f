r"""Symmetric positive definite matrices with the affine-invariant metric.

.. math:: \langle u, v\rangle_p = \operatorname{tr}(p^{-1} u\, p^{-1} v), \quad
          \exp_p(v) = p^{1/2} \operatorname{expm}(p^{-1/2} v p^{-1/2}) p^{1/2}, \quad
          \rho(p, q) = \| \operatorname{logm}(p^{-1/2} q p^{-1/2}) \|_F .

Dimension ``k(k+1)/2``, sectional curvature in ``[-1/2, 0]``, injectivity radius
``inf``. The chart frame at ``p`` is ``p^{1/2} E p^{1/2}`` for the orthonormal frame
``E`` at the identity: ``E_ii`` and ``(E_ij + E_ji)/sqrt(2)``, diagonal first.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np
import pytensor.tensor as pt
from pytensor.graph.basic import Variable
from scipy import special

from pymc_manidp._validation import as_points, check_positive_int, check_tol, first_bad_row
from pymc_manidp.geometry._numba import pt_numerics as ptn
from pymc_manidp.geometry._numba.chebyshev import ChebyshevSeries
from pymc_manidp.geometry._numba.numerics import log_sinhc, sym, sym_eigh, sym_eigvalsh, sym_funm
from pymc_manidp.geometry.base import ManifoldBase

__all__ = [
    "SPD",
    "SPD3_MAX_FRACTION",
    "SPD_NORMALIZED_K",
    "identity_frame",
    "log_weyl_constant",
    "spd_laplace_log_normalizer",
    "spd_normalizer_max_sigma",
]

#: Matrix sizes ``k`` for which the SPD Laplace normalizer is implemented.
SPD_NORMALIZED_K = (1, 2, 3)


def identity_frame(k: int) -> np.ndarray:
    """Orthonormal frame of symmetric matrices at the identity, shape ``(d, k, k)``."""
    d = k * (k + 1) // 2
    e = np.zeros((d, k, k))
    for i in range(k):
        e[i, i, i] = 1.0
    a = k
    for i in range(k):
        for j in range(i + 1, k):
            e[a, i, j] = e[a, j, i] = 1.0 / np.sqrt(2.0)
            a += 1
    return e


def _sqrt_invsqrt(p):
    w, u = sym_eigh(p)
    ut = np.swapaxes(u, -1, -2)
    s = sym((u * np.sqrt(w)[..., None, :]) @ ut)
    si = sym((u / np.sqrt(w)[..., None, :]) @ ut)
    return s, si


def spd_exp(p, v):
    s, si = _sqrt_invsqrt(p)
    return sym(s @ sym_funm(si @ v @ si, np.exp) @ s)


def spd_log(p, q):
    s, si = _sqrt_invsqrt(p)
    return sym(s @ sym_funm(si @ q @ si, np.log) @ s)


def spd_dist(p, q):
    _, si = _sqrt_invsqrt(p)
    w = sym_eigvalsh(si @ q @ si)
    if np.any(w <= 0):
        raise ValueError(
            "distance undefined at working precision: the matrices are too ill-conditioned "
            f"relative to each other ({first_bad_row(np.any(w <= 0, axis=-1))})"
        )
    return np.sqrt(np.sum(np.log(w) ** 2, axis=-1))


def spd_inner(p, u, v):
    a = np.linalg.solve(p, u)
    b = np.linalg.solve(p, v)
    return np.einsum("...ij,...ji->...", a, b)


_PROJECT_HINT = (
    "Matrices rounded or slightly indefinite can be moved to the nearest SPD matrix "
    "(symmetrized, eigenvalues floored), explicitly and recorded: SPD.project(x), "
    "release(..., project=True) or --project"
)


def _clearly_positive_definite(x) -> bool:
    """Whether every symmetric matrix of ``x`` ``(..., k, k)`` passes :meth:`SPD.validate`'s
    test ``lambda_min > 1e-14 lambda_max``, by a sufficient condition: one batched Cholesky.

    ``x - delta I`` with ``delta = 2e-14 tr(x)`` positive definite gives ``lambda_min >
    delta >= 2e-14 lambda_max``; a Cholesky that succeeds in floating point proves it up
    to its backward error, at most about ``(k + 1) k eps lambda_max`` (``8e-15
    lambda_max`` for ``k <= 8``), which leaves ``lambda_min > 1.2e-14 lambda_max``.
    False when any matrix fails: the caller then decides every matrix by its eigenvalues,
    as before, so the set of accepted matrices is the same. On 10^4 SPD(8) matrices the
    Cholesky costs a fifteenth of the batched ``eigvalsh`` (2026-11-27), which was as
    much as one pass of the Fréchet mean.
    """
    k = x.shape[-1]
    if k > 8:  # the backward-error margin above is for k <= 8
        return False
    delta = 2e-14 * np.trace(x, axis1=-2, axis2=-1)
    if not np.all(delta > 0):
        return False
    try:
        np.linalg.cholesky(x - delta[..., None, None] * np.eye(k))
    except np.linalg.LinAlgError:
        return False
    return True


def _pair_log_sinhc(w):
    """``sum_{i<j} log sinhc((w_i - w_j)/2)`` for eigenvalues ``w`` ``(..., k)``."""
    diff = w[..., :, None] - w[..., None, :]
    return 0.5 * np.sum(log_sinhc(diff / 2.0), axis=(-2, -1))


def _pt_pair_log_sinhc(w):
    diff = w[..., :, None] - w[..., None, :]
    return 0.5 * pt.sum(ptn.log_sinhc(diff / 2.0), axis=(-2, -1))


@dataclass(frozen=True)
class SPD(ManifoldBase):
    r"""Symmetric positive definite ``k x k`` matrices, affine-invariant metric.

    Parameters
    ----------
    k : int
        Matrix size; points have shape ``(..., k, k)`` and ``dim = k(k+1)/2``.

    Notes
    -----
    Volume density of ``exp_p`` in normal coordinates, ``lambda`` the eigenvalues
    of ``p^{-1/2} V p^{-1/2}``:

    .. math:: \prod_{i<j} \frac{\sinh(|\lambda_i - \lambda_j|/2)}{|\lambda_i - \lambda_j|/2}.

    Examples
    --------
    >>> import numpy as np
    >>> P = SPD(k=2)
    >>> A, B = np.diag([np.e**2, 1.0]), np.eye(2)
    >>> float(P.dist(A, B))
    2.0
    """

    k: int
    dim: int = field(init=False, repr=False)
    point_shape: tuple[int, ...] = field(init=False, repr=False)

    # the volume density is not radial: the exact Laplace sampler tilts its envelope by
    # log_volume_growth = C/2 (laws/exact/laplace.py)
    exact_sampling = True
    homogeneous = True

    name: ClassVar[str] = "spd"

    @property
    def fused_kernels(self) -> str:
        """``"spd:<k>"``: the kernels of ``geometry/_numba/fused/spd.py`` compiled for this
        ``k`` only (``kernels(variant)``; those of every size cost 13 CPU s cold)."""
        return f"spd:{self.k}"

    record_layout: ClassVar[str] = "(n, k, k) or (n, k*k): the matrix's entries row by row"

    @classmethod
    def from_record_shape(cls, shape: tuple[int, ...]) -> SPD:
        width = math.prod(shape)
        k = math.isqrt(width)
        if k * k != width or len(shape) not in (1, 2) or (len(shape) == 2 and shape[0] != k):
            raise ValueError(
                "spd data must have shape (n, k, k) or (n, k*k) (entries row by row), "
                f"got records of shape {shape}"
            )
        return cls(k=k)

    @classmethod
    def audit_space(cls):
        return cls(k=2), np.eye(2), 1.0, 60

    @classmethod
    def examples(cls) -> tuple:
        """Small instances, one per kind of geometry the class covers."""
        return (cls(k=1), cls(k=2), cls(k=3))

    def __post_init__(self):
        k = check_positive_int(self.k, "k")
        object.__setattr__(self, "k", k)
        object.__setattr__(self, "dim", k * (k + 1) // 2)
        object.__setattr__(self, "point_shape", (k, k))
        object.__setattr__(self, "_frame", identity_frame(k))
        object.__setattr__(self, "noise_shape", (k, k))
        if k in SPD_NORMALIZED_K:
            # capabilities.LaplaceNormalizer for k <= 3 only (k >= 4: none is implemented),
            # so the member exists on those instances alone: isinstance answers per instance
            object.__setattr__(
                self, "pt_laplace_log_normalizer", functools.partial(spd_laplace_log_normalizer, k)
            )

    @property
    def injectivity_radius(self) -> float:
        return np.inf

    @property
    def curvature_bounds(self) -> tuple[float, float]:
        return (-0.5, 0.0) if self.k >= 2 else (0.0, 0.0)

    def rounding_error(self, center, radius: float, *, proposals: bool = True) -> float:
        r"""``128 eps e^R e^{R'}``, ``R = rho(I, center) + r``, ``R' = R + 2r`` (``R`` with
        ``proposals=False``: points of the ball only).

        A matrix at distance ``R`` from the identity has eigenvalues up to ``e^R``;
        logs and distances are computed through ``p^{-1/2} q p^{-1/2}``, whose
        eigen-decomposition loses ``eps`` times the condition numbers, ``~ e^R e^{R'}``
        (measured: the KNG gradient's error at ``R = 10``, all records at the
        centre, is ``~92 eps e^{2R}``, ``1e-5``). Past a few units of radius this
        decides what the samplers can resolve, and the mechanisms refuse the radius up
        front (``DataDomain.check_precision``, ``KNGMechanism.check_precision``).

        Examples
        --------
        >>> P = SPD(k=2)
        >>> f"{P.rounding_error(P.origin, 1.0):.2g}", f"{P.rounding_error(P.origin, 5.0):.2g}"
        ('1.6e-12', '1.4e-05')
        """
        reach = float(self.dist(self.origin, self.validate(center))) + float(radius)
        far = reach + 2.0 * float(radius) if proposals else reach
        with np.errstate(over="ignore"):
            return float(128.0 * np.finfo(float).eps * np.exp(reach) * np.exp(far))

    @property
    def volume_growth_constant(self) -> float:
        r"""``C = max_{|λ|=1} Σ_{i<j} |λ_i - λ_j| = sqrt(k(k²-1)/3)``.

        The log volume density is at most ``C|c|/2`` (``log sinhc(y) <= y``), and
        along the maximizing direction it grows at that rate. For sorted ``λ`` the sum
        is ``Σ_j (2j - k - 1) λ_j``, a linear form whose norm is ``C``.
        """
        k = self.k
        return float(np.sqrt(k * (k * k - 1) / 3.0))

    @property
    def laplace_max_sigma(self) -> float:
        r"""The normalizability edge: ``e^{-|c|/σ}`` times the volume density is
        integrable over the whole space iff ``σ < 2/C`` (``inf`` for ``k = 1``).

        Examples
        --------
        >>> round(SPD(k=2).laplace_max_sigma, 6)  # sqrt(2)
        1.414214
        """
        c = self.volume_growth_constant
        return np.inf if c == 0 else 2.0 / c

    @property
    def log_volume_growth(self) -> float:
        """``C/2``: ``log J(c) <= C|c|/2`` (:attr:`volume_growth_constant`), attained
        along the maximizing direction."""
        return self.volume_growth_constant / 2.0

    @property
    def laplace_sigma_limit(self) -> tuple[float, str]:
        """The edge ``2/C``; on ``SPD(3)`` 0.98 of it, the normalizer's tabulated range
        (:func:`~pymc_manidp.geometry.spd.spd_normalizer_max_sigma`)."""
        if self.k not in SPD_NORMALIZED_K or self.k < 3:
            return self.laplace_max_sigma, "the normalizability edge 2/C"
        return (
            spd_normalizer_max_sigma(self.k),
            "0.98 of the normalizability edge (the tabulated range)",
        )

    @property
    def origin(self):
        """The identity matrix."""
        return np.eye(self.k)

    def ambient_mean_start(self, m):
        """The arithmetic mean itself: SPD matrices form a convex cone."""
        return self.validate(m)

    @property
    def mcmc_seconds_per_point(self) -> float:
        """KNG's norm per point (NUMBA backend, 2 cores, 2026-11-24,
        docs/benchmarks/bench_kng_norm.py): ``k = 2`` closed forms, 177 ns measured
        (``1e-7`` s); ``k = 3`` the vectorized congruence-sum kernel, 0.17 us; ``k >= 4``
        its loops, 2.6 us at 4 (``1e-6 (k/4)^3`` s)."""
        k = self.k
        if k == 2:
            return 1e-7
        return 1.5e-7 if k == 3 else 1e-6 * (k / 4) ** 3

    def check_laplace_normalizable(self, sigma: float) -> None:
        """Raise ``ValueError`` unless ``sigma < 2/C`` (:attr:`laplace_max_sigma`) and
        the exact sampler accepts enough (``sigma <=`` :attr:`laplace_supported_sigma`)."""
        top = self.laplace_max_sigma
        if not sigma < top:
            raise ValueError(
                f"the unrestricted Laplace on SPD({self.k}) is not normalizable for "
                f"sigma = {sigma:.6g} >= 2/C = {top:.6g} (C = sqrt(k(k^2-1)/3)): restrict "
                "it to the public ball (restrict=True), or use more data or a larger epsilon"
            )
        supported = self.laplace_supported_sigma
        if not sigma <= supported:
            raise ValueError(
                f"the unrestricted Laplace on SPD({self.k}) with sigma = {sigma:.6g} is "
                "normalizable but too close to its edge for the exact sampler: its envelope "
                f"(tilted by e^(-C t/2)) would accept less than {_LAPLACE_ACCEPT_MIN:.3g} of "
                "its proposals, so a release could stop at the proposal cap after reading "
                f"the data. The largest supported sigma is {supported:.6g} (the edge is 2/C "
                f"= {top:.6g}): restrict it to the public ball (restrict=True), or use more "
                "data or a larger epsilon"
            )

    @property
    def laplace_supported_sigma(self) -> float:
        r"""The largest ``sigma`` the exact sampler of the unrestricted Laplace supports.

        The sampler proposes ``t ~ Gamma(d, 1/(1/σ - G))``, ``G = C/2``, a uniform
        direction, and accepts with ``J(c) e^{-G t}``: its acceptance is ``Z(σ)`` over
        the envelope's mass ``|S^{d-1}| Γ(d) (1/σ - G)^{-d}``, which tends to 0 at the
        edge (SPD(2): 1% at 0.9 of it, 8e-4 at 0.98). ``sigma`` is supported while the
        acceptance is at least ``64 log 2 / 10,000`` (the default cap then fails with
        probability at most ``2^-64``): 0.94 of the edge for ``k = 2`` (``Z`` in closed
        form), 0.67 for ``k = 3`` (its quadrature), for ``k >= 4`` from a fixed-seed
        Monte Carlo estimate of the acceptance (2^13 proposals, halved; 0.41 of the edge
        for k = 4); ``inf`` for
        ``k = 1`` (no edge: the Laplace of the line).

        Examples
        --------
        >>> round(SPD(k=2).laplace_supported_sigma / SPD(k=2).laplace_max_sigma, 2)
        0.94
        """
        return _laplace_supported_sigma(self.k)

    def project(self, points, floor: float = 1e-8):
        r"""The nearest SPD matrices of matrices near SPD(k): symmetrize, then raise
        small eigenvalues.

        ``A`` becomes :math:`S = (A + A^\top)/2 = U \operatorname{diag}(\lambda) U^\top`,
        then :math:`U \operatorname{diag}(\max(\lambda_i, f\,\lambda_{\max}))
        U^\top` with ``f = floor``: the eigenvalue floor is **relative**, ``floor``
        times the matrix's largest eigenvalue (default ``1e-8``), so it does not depend
        on the data's units and keeps the condition number at most ``1/floor``. For
        symmetric ``A`` with eigenvalues above the floor this is the identity; it is
        the Frobenius-nearest matrix whose eigenvalues are at least the floor. Every
        record is projected on its own.

        A raised eigenvalue puts the record far from any public center (the
        affine-invariant distance grows like ``|log(floor)|``): expect it to be
        refused or clipped by the public ball.

        Parameters
        ----------
        points : array_like, shape ``(..., k, k)``
            Finite real matrices.
        floor : float
            The relative eigenvalue floor, in ``(0, 0.1)``.

        Returns
        -------
        ndarray, shape ``(..., k, k)``
            Symmetric positive definite matrices.

        Raises
        ------
        ValueError
            NaN/inf, the wrong shape, or a matrix whose symmetric part has no positive
            eigenvalue (nothing to keep), naming the first bad row.

        Examples
        --------
        >>> SPD(k=2).project([[2.0, 1e-7], [0.0, 1.0]]).round(9).tolist()
        [[2.0, 5e-08], [5e-08, 1.0]]
        """
        floor = check_tol(floor, "floor")
        x = as_points(points, self.point_shape)
        # scaled to entries <= 1 (the result scales back): huge entries do not overflow
        scale = np.maximum(np.max(np.abs(x), axis=(-2, -1), keepdims=True), np.finfo(float).tiny)
        w, u = sym_eigh(x / scale)
        top = w[..., -1]
        bad = ~(top > 0)
        if np.any(bad):
            raise ValueError(
                f"cannot project onto SPD({self.k}): {first_bad_row(bad)} has no positive "
                "eigenvalue (its symmetric part is negative semidefinite); drop the record"
            )
        w = np.maximum(w, floor * top[..., None])
        out = (u * w[..., None, :]) @ np.swapaxes(u, -1, -2)
        return sym(out) * scale

    def validate(self, points, tol: float = 1e-8):
        """Check symmetric positive definite matrices; return their symmetric part.

        Raises ``ValueError`` naming the rows that are not symmetric (relative
        asymmetry above ``tol``) or not positive definite (smallest eigenvalue
        ``<= 1e-14`` times the largest), or hold NaN/inf.
        """
        tol = check_tol(tol)
        x = as_points(points, self.point_shape)
        scale = np.maximum(np.max(np.abs(x), axis=(-2, -1)), np.finfo(float).tiny)
        asym = np.max(np.abs(x - np.swapaxes(x, -1, -2)), axis=(-2, -1)) / scale
        bad = asym > tol
        if np.any(bad):
            raise ValueError(
                f"matrices are not symmetric: {first_bad_row(bad)} "
                f"(largest relative asymmetry {float(np.max(asym)):.3g}, tolerance {tol:.3g}). "
                f"{_PROJECT_HINT}"
            )
        x = sym(x)
        if _clearly_positive_definite(x):
            return x
        w = sym_eigvalsh(x)
        bad = w[..., 0] <= 1e-14 * np.abs(w[..., -1])
        if np.any(bad):
            raise ValueError(
                f"matrices are not positive definite: {first_bad_row(bad)} "
                f"(smallest eigenvalue {float(np.min(w[..., 0])):.3g}). {_PROJECT_HINT}"
            )
        return x

    def to_tangent(self, x, v):
        """Tangent vectors are symmetric matrices: return the symmetric part."""
        return sym(np.asarray(v, float))

    def exp(self, x, v):
        return spd_exp(np.asarray(x, float), np.asarray(v, float))

    def log(self, x, y):
        return spd_log(np.asarray(x, float), np.asarray(y, float))

    def dist(self, x, y):
        return spd_dist(np.asarray(x, float), np.asarray(y, float))

    def inner(self, x, u, v):
        return spd_inner(np.asarray(x, float), np.asarray(u, float), np.asarray(v, float))

    def norm(self, x, v):
        """``|x^{-1/2} v x^{-1/2}|_F``: two products with the inverse square root (one
        eigendecomposition per footpoint, shared by a batch of vectors at it) instead
        of the two solves per vector of ``sqrt(inner(x, v, v))``."""
        _, si = _sqrt_invsqrt(np.asarray(x, float))
        w = si @ np.asarray(v, float) @ si
        return np.sqrt(np.sum(w * w, axis=(-2, -1)))

    def frechet_gradient(self, x, data, weights):
        """Mean log and energy from one eigendecomposition per data point.

        The weighted sum is taken in whitened coordinates, ``sum_i w_i
        logm(x^{-1/2} x_i x^{-1/2})``, before the single congruence back to
        ``T_x``; squared distances are the squared log-eigenvalues.
        """
        from pymc_manidp.geometry._numba.sym_sums import log_congruence_mean

        s, si = _sqrt_invsqrt(np.asarray(x, float))
        white, energy, _ = log_congruence_mean(
            si, np.ascontiguousarray(data, dtype=float), np.ascontiguousarray(weights, float), False
        )
        return sym(s @ white @ s), float(energy)

    frechet_newton = True

    def frechet_gradient_hessian(self, x, data, weights):
        """:meth:`frechet_gradient` and the second moments of the whitened logs.

        Returns ``(g, energy, h)``, ``h`` ``(dim, dim)`` the weighted sum of ``c_i
        c_i^T``, ``c_i`` the orthonormal coordinates of ``log(x^{-1/2} x_i x^{-1/2})``
        (a sum over the data: the blocks of a pass add up), for :meth:`newton_direction`.
        """
        from pymc_manidp.geometry._numba.sym_sums import log_congruence_mean

        s, si = _sqrt_invsqrt(np.asarray(x, float))
        white, energy, moments = log_congruence_mean(
            si, np.ascontiguousarray(data, dtype=float), np.ascontiguousarray(weights, float), True
        )
        return sym(s @ white @ s), float(energy), moments

    def newton_direction(self, x, g, h):
        r"""The Newton step ``v = H^{-1} g`` of the Fréchet energy, ``H`` to second order.

        In whitened coordinates (``x = I``) the Hessian of ``F`` is ``sum_i w_i
        phi(ad_{L_i}/2)``, ``phi(z) = z coth z`` (``L_i`` the whitened logs, ``w``
        summing to one), and ``phi(z) = 1 + z^2/3 + O(z^4)``, so

        .. math:: H[V] \approx V + \tfrac{1}{12} \sum_i w_i\, [L_i, [L_i, V]]
                  = V + \tfrac{1}{12}\big(V S + S V - 2 \textstyle\sum_i w_i L_i V L_i\big),

        ``S = sum_i w_i L_i^2``, both from the moments ``h`` of
        :meth:`frechet_gradient_hessian`. The neglected term is below ``z^4/45`` per
        eigenvalue pair: the step contracts the error by that much where the unit
        Karcher step (``H ~ I``) contracts it only by ``z^2/3``. ``H >= I``, so ``v`` is
        a descent direction, shorter than ``g``.
        """
        k, d = self.k, self.dim
        s, si = _sqrt_invsqrt(np.asarray(x, float))
        frame = self._frame  # (d, k, k), orthonormal at I
        flat = frame.reshape(d, k * k)
        second = (flat.T @ np.asarray(h, float) @ flat).reshape(k, k, k, k)  # sum w L (x) L
        sq = np.einsum("pqqs->ps", second)
        lvl = np.einsum("pqrs,bqr->bps", second, frame)
        image = frame + (frame @ sq + sq @ frame - 2.0 * lvl) / 12.0
        hess = np.einsum("aij,bij->ab", frame, image)
        gw = si @ np.asarray(g, float) @ si
        coef = np.linalg.solve(0.5 * (hess + hess.T), np.einsum("aij,ij->a", frame, gw))
        return sym(s @ np.einsum("a,aij->ij", coef, frame) @ s)

    def stack_frechet_gradient(self, x, data):
        """:meth:`frechet_gradient`'s route (one eigendecomposition per record, the sum
        in whitened coordinates) for a stack."""
        from pymc_manidp.geometry._numba.sym_sums import log_congruence_mean

        s, si = _sqrt_invsqrt(np.asarray(x, float))
        data = np.ascontiguousarray(data, dtype=float)
        wts = np.full(data.shape[1], 1.0 / data.shape[1])
        white = np.empty_like(si)
        energy = np.empty(len(si))
        for j in range(len(si)):  # one fused kernel call per data set
            white[j], energy[j], _ = log_congruence_mean(si[j], data[j], wts, False)
        return sym(s @ white @ s), energy

    def tangent_basis(self, x):
        """Frame ``p^{1/2} E p^{1/2}`` at ``x``: shape ``(..., dim, k, k)``."""
        s, _ = _sqrt_invsqrt(np.asarray(x, float))
        s = s[..., None, :, :]
        return s @ self._frame @ s

    def log_volume_density(self, coords):
        coords = np.asarray(coords, float)
        w_mat = np.tensordot(coords, self._frame, axes=[[-1], [0]])
        return _pair_log_sinhc(sym_eigvalsh(w_mat))

    # --- PyTensor twins -------------------------------------------------------------
    def chart_frame(self, origin):
        """The arrays fixing the exp chart at ``origin``: its square root ``p^{1/2}``."""
        origin = np.asarray(origin, float)
        if origin.shape != self.point_shape:
            raise ValueError(f"the chart origin must be one point of shape {self.point_shape}")
        return {"sqrt": _sqrt_invsqrt(origin)[0]}

    def pt_exp_frame(self, frame, coords):
        """``exp_origin`` of chart coordinates ``(..., dim)``, the chart given by
        :meth:`chart_frame` (arrays or tensors, e.g. ``pm.Data``)."""
        s = pt.as_tensor_variable(frame["sqrt"])
        w_mat = pt.tensordot(pt.as_tensor_variable(coords), self._frame, axes=[[-1], [0]])
        return ptn.sym(s @ ptn.expm(w_mat, k=self.k) @ s)

    def pt_exp_coords(self, origin, coords):
        """``exp_origin`` of chart coordinates ``coords`` ``(..., dim)`` (tensor)."""
        return self.pt_exp_frame(self.chart_frame(origin), coords)

    def pt_log_frame(self, frame, x):
        """Normal coordinates at the frame's origin: ``logm(s^{-1} x s^{-1})`` in the
        identity's frame, ``s`` the origin's square root."""
        s = pt.as_tensor_variable(frame["sqrt"])
        s_inv = pt.linalg.inv(s)
        w = ptn.logm(ptn.sym(s_inv @ x @ s_inv))
        return pt.tensordot(w, self._frame, axes=[[-2, -1], [1, 2]])

    # the moving chart (random footpoints): the congruence by x^{1/2}, smooth in x
    def pt_exp_noise(self, x, w):
        """``x^{1/2} expm(sym(w)) x^{1/2}``: ``P_x w = x^{1/2} sym(w) x^{1/2}`` has norm
        ``|sym(w)|_F`` at ``x``, and the symmetric part of a standard normal ``w``
        ``(..., k, k)`` is standard normal on ``Sym(k)`` (off-diagonal entries of
        variance 1/2, i.e. 1 along ``(E_ij + E_ji)/sqrt 2``)."""
        s = ptn.sqrtm(pt.as_tensor_variable(x), k=self.k)
        return ptn.sym(s @ ptn.expm(ptn.sym(pt.as_tensor_variable(w)), k=self.k) @ s)

    def pt_noise_norm(self, x, w):
        """``|sym(w)|_F``."""
        return pt.sqrt(pt.sum(ptn.sym(pt.as_tensor_variable(w)) ** 2, axis=(-2, -1)) + 1e-300)

    def pt_log_noise(self, x, y):
        """``logm(x^{-1/2} y x^{-1/2})``."""
        xi = ptn.invsqrtm(pt.as_tensor_variable(x), k=self.k)
        return ptn.logm(ptn.sym(xi @ pt.as_tensor_variable(y) @ xi), k=self.k)

    def pt_log_volume_density_noise(self, x, w):
        """The eigenvalue-pair product of the volume density, at ``sym(w)``."""
        w_mat = ptn.sym(pt.as_tensor_variable(w))
        if self.k == 2:
            return ptn.log_sinhc_sqrt(ptn.sym2_parts(w_mat)[-1])
        return ptn.spectral_sum(_pt_pair_log_sinhc, w_mat)

    def pt_point_checks(self, x):
        """Symmetric to ``1e-8`` relative (positivity is checked where the
        log-density takes logarithms)."""
        return [pt.lt(pt.abs(x - pt.swapaxes(x, -1, -2)), 1e-8 * (1.0 + pt.abs(x)))]

    def pt_log(self, x, y):
        x = pt.as_tensor_variable(x)
        xs, xi = ptn.sqrtm(x, k=self.k), ptn.invsqrtm(x, k=self.k)
        if self.k == 2:  # elementwise congruences: no batched matmuls over the data
            y = pt.as_tensor_variable(y)
            return ptn.sym2_congruence(xs, ptn.logm(ptn.sym2_congruence(xi, y), k=2))
        return ptn.sym(xs @ ptn.logm(xi @ y @ xi, k=self.k) @ xs)

    def pt_frechet_gradient_norm(self, x, data):
        r"""``||sum_i log_x(x_i)||_x`` for ``x`` ``(..., k, k)``, ``data`` ``(n, k, k)``.

        .. math:: \Big\|\sum_i \log_x(x_i)\Big\|_x
                  = \Big\|\sum_i \operatorname{logm}(x^{-1/2} x_i x^{-1/2})\Big\|_F,

        since ``log_x(y) = x^{1/2} logm(x^{-1/2} y x^{-1/2}) x^{1/2}`` and the norm at
        ``x`` undoes the outer congruence. One inverse square root of ``x`` and ``n``
        logarithms in one kernel (``pt_numerics.logm_congruence_sum``), instead of a
        square root, an inverse square root and a logarithm per datum (the generic
        route broadcasts ``x`` over the data).
        """
        xi = ptn.invsqrtm(pt.as_tensor_variable(x), k=self.k)
        total = ptn.logm_congruence_sum(xi, data, k=self.k)
        return pt.sqrt(pt.sum(total**2, axis=(-2, -1)) + 1e-300)

    def pt_dist(self, x, y):
        xi = ptn.invsqrtm(pt.as_tensor_variable(x), k=self.k)
        ell = ptn.logm(xi @ y @ xi, k=self.k)
        return pt.sqrt(pt.sum(ell**2, axis=(-2, -1)) + 1e-300)

    def pt_inner(self, x, u, v):
        x = pt.as_tensor_variable(x)
        a = pt.linalg.solve(x, u, b_ndim=2)
        b = pt.linalg.solve(x, v, b_ndim=2)
        return pt.sum(a * pt.swapaxes(b, -1, -2), axis=(-2, -1))

    def pt_norm(self, x, v):
        return pt.sqrt(self.pt_inner(x, v, v) + 1e-300)

    def pt_log_volume_density(self, coords):
        w_mat = pt.tensordot(pt.as_tensor_variable(coords), self._frame, axes=[[-1], [0]])
        if self.k == 2:  # one pair: log sinhc of the half-gap, a smooth function of s
            return ptn.log_sinhc_sqrt(ptn.sym2_parts(w_mat)[-1])
        return ptn.spectral_sum(_pt_pair_log_sinhc, w_mat)

    # --- ambient embedding: symmetric matrices in vech coordinates (the baselines) ---
    @property
    def ambient_dim(self) -> int:
        """``D = k(k+1)/2``: ``vech`` coordinates of symmetric matrices."""
        return self.dim

    def to_ambient(self, points) -> np.ndarray:
        """Ambient coordinates ``(..., D)`` of points: their plain ``vech``."""
        return vech(points)

    def from_ambient(self, y) -> np.ndarray:
        """Symmetric matrices ``(..., k, k)`` from ``vech`` vectors (not projected onto
        SPD: they may fail to be positive definite)."""
        return unvech(y, self.k)

    def ambient_radius(self, center, radius: float) -> float:
        r"""A Frobenius radius around ``center`` that holds ``B_radius(center)``:
        ``lambda_max(center) (e^radius - 1)`` (the 2021 supplement's ``e^r - 1`` at
        ``I``, Prop. 1; elsewhere
        :math:`\|c^{1/2}(e^V - I)c^{1/2}\|_F \le \lambda_{\max}(c)(e^r - 1)`). Plain
        ``vech`` has norm ``<=`` Frobenius, so it holds in ``vech`` coordinates too.

        Examples
        --------
        >>> round(SPD(k=2).ambient_radius(2 * np.eye(2), 1.0), 6)  # 2 (e - 1)
        3.436564
        """
        top = float(np.linalg.eigvalsh(self.validate(center))[-1])
        return top * float(np.expm1(radius))


#: The least acceptance the unrestricted Laplace's exact sampler is run at: the default
#: cap of 10,000 proposals (``laws.exact.DEFAULT_MAX_ATTEMPTS``) then fails with
#: probability at most ``2^-64``.
_LAPLACE_ACCEPT_MIN = 64.0 * np.log(2.0) / 10_000


def _laplace_log_acceptance(k: int, sigma: float) -> float:
    """``log`` of the unrestricted Laplace sampler's acceptance on ``SPD(k)`` at ``sigma``
    (:attr:`SPD.laplace_supported_sigma`)."""
    P = SPD(k=k)
    d, growth = P.dim, P.log_volume_growth
    log_scale = -np.log(1.0 / sigma - growth)
    log_area = np.log(2.0) + 0.5 * d * np.log(np.pi) - special.gammaln(0.5 * d)
    log_env = log_area + special.gammaln(d) + d * log_scale
    if k == 2:
        q = np.sqrt(2.0 - sigma**2)
        log_z = (
            np.log(16 * np.pi)
            + 2 * np.log(sigma)
            + np.log(sigma / (2 * q**2) + np.arctan2(sigma, q) / q**3)
        )
        return float(log_z - log_env)
    if k == 3:
        return float(_spd3_log_z(sigma) - log_env)
    # no normalizer: the mean ratio J e^{-G t} over a fixed-seed sample of proposals
    rng = np.random.default_rng(0)
    m = 2**13
    t = rng.gamma(d, np.exp(log_scale), size=m)
    u = rng.normal(size=(m, d))
    c = t[:, None] * u / np.linalg.norm(u, axis=1, keepdims=True)
    ratio = np.exp(P.log_volume_density(c) - growth * t)
    return float(np.log(0.5 * np.mean(ratio)))


@functools.cache
def _laplace_supported_sigma(k: int) -> float:
    """:attr:`SPD.laplace_supported_sigma` (bisection on the acceptance, cached per k)."""
    P = SPD(k=k)
    edge = P.laplace_max_sigma
    if not np.isfinite(edge):
        return float("inf")
    top = min(edge, P.laplace_sigma_limit[0]) if k == 3 else edge
    floor = np.log(_LAPLACE_ACCEPT_MIN)
    lo, hi = 0.0, 1.0  # fractions of top; the acceptance decreases towards the edge
    if _laplace_log_acceptance(k, 1e-3 * top) < floor:
        return 0.0
    lo = 1e-3
    for _ in range(20 if k >= 4 else 40):  # 1e-6 of the edge; the Monte Carlo is slower
        mid = 0.5 * (lo + hi)
        if mid < 1.0 and _laplace_log_acceptance(k, mid * top) >= floor:
            lo = mid
        else:
            hi = mid
    return float(lo * top)


def vech(x) -> np.ndarray:
    """Half-vectorization ``(..., k, k) -> (..., k(k+1)/2)``: lower triangle by columns.

    Plain ``vech`` (no ``sqrt 2`` on off-diagonals), as the papers write it.

    Parameters
    ----------
    x : array_like, shape ``(..., k, k)``
        Symmetric matrices.

    Returns
    -------
    ndarray, shape ``(..., k(k+1)/2)``
        Their lower triangles, column by column.

    Examples
    --------
    >>> vech(np.array([[1.0, 2.0], [2.0, 3.0]])).tolist()
    [1.0, 2.0, 3.0]
    """
    x = np.asarray(x, float)
    i, j = np.triu_indices(x.shape[-1])
    # the upper triangle by rows is the lower triangle by columns of a symmetric matrix
    return x[..., j, i]


def unvech(v, k: int) -> np.ndarray:
    """Symmetric matrices ``(..., k, k)`` from ``vech`` vectors ``(..., k(k+1)/2)``.

    Parameters
    ----------
    v : array_like, shape ``(..., k(k+1)/2)``
        Half-vectorizations (the inverse of :func:`vech`).
    k : int
        The matrices' size.

    Returns
    -------
    ndarray, shape ``(..., k, k)``
        The symmetric matrices.

    Examples
    --------
    >>> unvech([1.0, 2.0, 3.0], 2).tolist()
    [[1.0, 2.0], [2.0, 3.0]]
    """
    v = np.asarray(v, float)
    i, j = np.triu_indices(k)
    out = np.zeros((*v.shape[:-1], k, k))
    out[..., j, i] = v
    out[..., i, j] = v
    return out


# --- the Laplace normalizer (SPD.pt_laplace_log_normalizer) ----------------------------
def _as_float_tensor(x):
    # a Python float becomes the narrowest exact dtype (1.0: float32): keep float64
    return pt.as_tensor_variable(x if isinstance(x, Variable) else np.asarray(x, float))


def log_weyl_constant(k: int) -> float:
    r"""``log c_k`` of Weyl's integration formula on symmetric ``k x k`` matrices.

    .. math:: \int_{\mathrm{Sym}(k)} f(V)\,dV = c_k \int_{\mathbb R^k} f(\lambda)
              \prod_{i<j} |\lambda_i - \lambda_j|\,d\lambda

    for ``f`` depending on the (unordered) eigenvalues only, ``dV`` Lebesgue measure in
    the orthonormal frame ``E_ii, (E_ij + E_ji)/sqrt 2`` (the tangent space of
    ``SPD(k)`` at the identity). ``c_k`` follows from the Gaussian case and Mehta's
    integral (``beta = 1``):
    :math:`c_k = (2\pi)^{(d-k)/2} / \prod_{j=1}^k \Gamma(1 + j/2)/\Gamma(3/2)`,
    ``d = k(k+1)/2``.

    Parameters
    ----------
    k : int
        Matrix size.

    Returns
    -------
    float
        ``log c_k``.

    Examples
    --------
    >>> import numpy as np
    >>> bool(np.isclose(np.exp(log_weyl_constant(2)), np.pi / np.sqrt(2)))
    True
    """
    d = k * (k + 1) // 2
    mehta = sum(special.gammaln(1 + j / 2) - special.gammaln(1.5) for j in range(1, k + 1))
    return float(0.5 * (d - k) * np.log(2 * np.pi) - mehta)


def _spd3_log_z(sigma, n_phi=48, n_psi=24, n_y=48):
    """``log Z(sigma)`` on ``SPD(3)`` by the tensor-product quadrature (NumPy, scalar).

    See :func:`spd_laplace_log_normalizer` for the integral; the nodes: Gauss-Legendre
    in ``phi`` on ``[0, pi/2]`` and ``psi`` on ``[0, pi/6]``, Gauss-Laguerre in ``y``.
    """
    xp, wp = np.polynomial.legendre.leggauss(n_phi)
    phi, w_phi = (xp + 1) * np.pi / 4, wp * np.pi / 4
    xs, ws = np.polynomial.legendre.leggauss(n_psi)
    psi, w_psi = (xs + 1) * np.pi / 12, ws * np.pi / 12
    # eigenvalue directions w = cos(phi) 1/sqrt3 + sin(phi) (cos psi e1 + sin psi e2),
    # e1, e2 an orthonormal basis of the trace-free plane: the gaps are
    # sin(phi) sqrt2 |cos(psi - m pi/3)|, m = 0, 1, 2; b holds half of them
    shift = np.arange(3) * np.pi / 3
    b = np.sin(phi)[:, None, None] * np.abs(np.cos(psi[None, :, None] - shift)) / np.sqrt(2)
    y, wy = np.polynomial.laguerre.laggauss(n_y)
    beta = 1.0 / sigma - b.sum(-1)  # (phi, psi)
    kappa = 2.0 * y[:, None] * b[:, :, None, :] / beta[:, :, None, None]
    log_f = np.sum(np.log(-np.expm1(-kappa)), axis=-1) + 2 * np.log(y) + np.log(wy)
    log_r = special.logsumexp(log_f, axis=-1) - 3 * np.log(beta) - 3 * np.log(2.0)
    log_w = np.log(np.sin(phi) * w_phi)[:, None] + np.log(w_psi)[None, :]
    # c_3 * 2^3 (the sinh product) * 2 (z -> -z) * 12 (psi's twelve copies)
    return log_weyl_constant(3) + np.log(8 * 2 * 12) + special.logsumexp(log_r + log_w)


#: ``SPD(3)``'s normalizer is tabulated for ``sigma < 0.98 * SPD(3).laplace_max_sigma``.
SPD3_MAX_FRACTION = 0.98


@functools.cache
def _spd3_chebyshev(degree=32):
    """Chebyshev coefficients of the smooth part of ``log Z`` on ``SPD(3)``.

    ``log Z(sigma) = 6 log sigma - 2 log(1 - u) + g(u)``, ``u = sigma / edge``: ``Z``
    grows like ``sigma^6`` (``R^6``'s Laplace) as ``sigma -> 0`` and like
    ``(1 - u)^{-2}`` at the edge (measured: the log-slope tends to 2), so ``g`` is
    smooth on ``[0, 0.98]`` and 33 Chebyshev nodes fit it to ``1e-8`` (about 0.5 s,
    once per process). A table, not the quadrature, goes into the graph: the quadrature
    has 10^5 nodes, too many to evaluate at every NUTS step.
    """
    edge = SPD(k=3).laplace_max_sigma
    x = np.cos(np.pi * (np.arange(degree + 1) + 0.5) / (degree + 1))
    u = (x + 1) / 2 * SPD3_MAX_FRACTION
    g = [_spd3_log_z(v * edge) - 6 * np.log(v * edge) + 2 * np.log1p(-v) for v in u]
    return np.polynomial.chebyshev.chebfit(x, g, degree)


def spd_laplace_log_normalizer(k: int, sigma):
    r"""``log Z(sigma)`` of the unrestricted Laplace on ``SPD(k)``, ``k <= 3``; else None.

    In normal coordinates at the footpoint, ``Z`` integrates
    :math:`e^{-|V|/\sigma} \prod_{i<j} \mathrm{sinhc}(|\lambda_i-\lambda_j|/2)` over
    symmetric ``V`` (``lambda`` its eigenvalues, ``|V|`` the Frobenius norm). Weyl's
    formula (:func:`log_weyl_constant`) and polar coordinates ``lambda = t w``
    (``w`` on the unit sphere of ``R^k``) give

    .. math:: Z(\sigma) = c_k\,2^{k(k-1)/2} \int_{S^{k-1}} \int_0^\infty
              t^{k-1} e^{-t/\sigma} \prod_{i<j} \sinh(t\,b_{ij}(w))\,dt\,dw,
              \qquad b_{ij} = |w_i - w_j|/2,

    finite iff ``1/sigma > max_w sum b_ij = C/2`` (``SPD.laplace_max_sigma``).

    - ``k = 1``: ``Z = 2 sigma``.
    - ``k = 2``: the inner integral is :math:`2ab/(a^2-b^2)^2` (``a = 1/sigma``) and the
      circle integral is elementary:
      :math:`Z = 16\pi\,[\sigma^3/(2q^2) + \sigma^2 \arctan(\sigma/q)/q^3]`,
      ``q = sqrt(2 - sigma^2)``.
    - ``k = 3``: by symmetry (eigenvalue permutations, ``w -> -w``) the direction
      integral runs over ``phi`` in ``[0, pi/2]`` (angle to the trace axis) and ``psi``
      in ``[0, pi/6]`` (angle in the trace-free plane), where the integrand is smooth
      (Gauss-Legendre, 48 x 24 nodes); the radial integral, after ``t = y/beta`` with
      ``beta = a - sum b``, is :math:`\beta^{-3} 2^{-3} \int y^2 e^{-y}
      \prod (1 - e^{-2 y b/\beta})\,dy` (Gauss-Laguerre, 48 nodes). That quadrature
      is tabulated once per process (a Chebyshev series in ``sigma``, absolute error of
      ``log Z`` below ``1e-6`` against adaptive quadrature and Monte Carlo:
      tests/laws/test_spd_normalizer.py) for ``sigma <= 0.98`` of the edge
      (:func:`spd_normalizer_max_sigma`); the graph evaluates the table.

    Parameters
    ----------
    k : int
        Matrix size.
    sigma : float or tensor, shape ``(...)``
        The sigma limit; ``+inf`` is returned where ``sigma >= 2/C``; ``k = 3`` clips
        ``sigma`` at :func:`spd_normalizer_max_sigma`
        (callers refuse larger values).

    Returns
    -------
    TensorVariable or None
        ``log Z(sigma)``, shape ``(...)``; ``None`` for ``k >= 4``.

    Examples
    --------
    >>> import numpy as np
    >>> z = np.exp(spd_laplace_log_normalizer(2, 1e-3).eval())
    >>> bool(np.isclose(z, 8 * np.pi * 1e-9, rtol=1e-5))  # small sigma: R^3's Laplace
    True
    """
    if k not in SPD_NORMALIZED_K:
        return None
    sigma = _as_float_tensor(sigma)
    edge = SPD(k=k).laplace_max_sigma
    if k == 1:
        return np.log(2.0) + pt.log(sigma)
    if k == 2:
        inside = pt.lt(sigma, edge)
        s = pt.switch(inside, sigma, 1.0)  # a safe value where Z is infinite
        q = pt.sqrt(2.0 - s**2)
        log_z = (
            np.log(16 * np.pi) + 2 * pt.log(s) + pt.log(s / (2 * q**2) + pt.arctan2(s, q) / q**3)
        )
        return pt.switch(inside, log_z, np.inf)
    # k = 3: the tabulated smooth part (_spd3_chebyshev); refused in the graph beyond
    # 0.98 of the edge (spd_normalizer_max_sigma), +inf at and beyond the edge
    top = SPD3_MAX_FRACTION * edge
    inside = pt.lt(sigma, edge)
    s = pt.switch(inside, pt.minimum(sigma, top), 0.5 * edge)
    u = s / edge
    g = ChebyshevSeries(_spd3_chebyshev())(2 * u / SPD3_MAX_FRACTION - 1)
    log_z = 6 * pt.log(s) - 2 * pt.log1p(-u) + g
    return pt.switch(inside, log_z, np.inf)


def spd_normalizer_max_sigma(k: int) -> float:
    """Supremum of the ``sigma`` for which :func:`spd_laplace_log_normalizer` is right.

    The normalizability edge ``2/C``
    (:attr:`~pymc_manidp.geometry.SPD.laplace_max_sigma`) for ``k <= 2``; ``0.98`` of
    it for ``k = 3`` (the tabulated range). At and beyond it the normalized law is
    refused (:attr:`~pymc_manidp.geometry.SPD.laplace_sigma_limit`).

    Parameters
    ----------
    k : int
        Matrix size (1, 2 or 3).

    Returns
    -------
    float
        The bound (``inf`` for ``k = 1``).

    Examples
    --------
    >>> round(spd_normalizer_max_sigma(3), 4)  # 0.98 / sqrt(2)
    0.693
    """
    edge = SPD(k=k).laplace_max_sigma
    return SPD3_MAX_FRACTION * edge if k == 3 else edge
