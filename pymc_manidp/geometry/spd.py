r"""Symmetric positive definite matrices with the affine-invariant metric.

.. math:: \langle u, v\rangle_p = \operatorname{tr}(p^{-1} u\, p^{-1} v), \quad
          \exp_p(v) = p^{1/2} \operatorname{expm}(p^{-1/2} v p^{-1/2}) p^{1/2}, \quad
          \rho(p, q) = \| \operatorname{logm}(p^{-1/2} q p^{-1/2}) \|_F .

Dimension ``k(k+1)/2``, sectional curvature in ``[-1/2, 0]``, injectivity radius
``inf``. The chart frame at ``p`` is ``p^{1/2} E p^{1/2}`` for the orthonormal frame
``E`` at the identity: ``E_ii`` and ``(E_ij + E_ji)/sqrt(2)``, diagonal first.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pytensor.tensor as pt

from pymc_manidp.geometry._kernels import pt_numerics as ptn
from pymc_manidp.geometry._kernels.numerics import log_sinhc, sym, sym_eigh, sym_eigvalsh, sym_funm
from pymc_manidp.geometry.base import ManifoldBase
from pymc_manidp.geometry.validation import as_points, check_positive_int, first_bad_row

__all__ = ["SPD", "identity_frame"]


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

    def __post_init__(self):
        k = check_positive_int(self.k, "k")
        object.__setattr__(self, "k", k)
        object.__setattr__(self, "dim", k * (k + 1) // 2)
        object.__setattr__(self, "point_shape", (k, k))
        object.__setattr__(self, "_frame", identity_frame(k))

    @property
    def injectivity_radius(self) -> float:
        return np.inf

    @property
    def curvature_bounds(self) -> tuple[float, float]:
        return (-0.5, 0.0) if self.k >= 2 else (0.0, 0.0)

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

    def check_laplace_normalizable(self, sigma: float) -> None:
        """Raise ``ValueError`` unless ``sigma < 2/C`` (:attr:`laplace_max_sigma`)."""
        top = self.laplace_max_sigma
        if not sigma < top:
            raise ValueError(
                f"the unrestricted Laplace on SPD({self.k}) is not normalizable for "
                f"sigma = {sigma:.6g} >= 2/C = {top:.6g} (C = sqrt(k(k^2-1)/3)): restrict "
                "it to the public ball (restrict=True), or use more data or a larger epsilon"
            )

    def validate(self, points, tol: float = 1e-8):
        """Check symmetric positive definite matrices; return their symmetric part.

        Raises ``ValueError`` naming the rows that are not symmetric (relative
        asymmetry above ``tol``) or not positive definite (smallest eigenvalue
        ``<= 1e-14`` times the largest), or hold NaN/inf.
        """
        x = as_points(points, self.point_shape)
        scale = np.maximum(np.max(np.abs(x), axis=(-2, -1)), np.finfo(float).tiny)
        asym = np.max(np.abs(x - np.swapaxes(x, -1, -2)), axis=(-2, -1)) / scale
        bad = asym > tol
        if np.any(bad):
            raise ValueError(
                f"matrices are not symmetric: {first_bad_row(bad)} "
                f"(largest relative asymmetry {float(np.max(asym)):.3g}, tolerance {tol:.3g})"
            )
        x = sym(x)
        w = sym_eigvalsh(x)
        bad = w[..., 0] <= 1e-14 * np.abs(w[..., -1])
        if np.any(bad):
            raise ValueError(
                f"matrices are not positive definite: {first_bad_row(bad)} "
                f"(smallest eigenvalue {float(np.min(w[..., 0])):.3g})"
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

    def frechet_gradient(self, x, data, weights):
        """Mean log and energy from one eigendecomposition per data point.

        The weighted sum is taken in whitened coordinates, ``sum_i w_i
        logm(x^{-1/2} x_i x^{-1/2})``, before the single congruence back to
        ``T_x``; squared distances are the squared log-eigenvalues.
        """
        s, si = _sqrt_invsqrt(np.asarray(x, float))
        w, u = sym_eigh(si @ np.asarray(data, float) @ si)
        lw = np.log(w)
        white = (u * (weights[:, None] * lw)[..., None, :]) @ np.swapaxes(u, -1, -2)
        g = sym(s @ sym(white.sum(axis=0)) @ s)
        energy = 0.5 * float(np.sum(weights * np.sum(lw**2, axis=-1)))
        return g, energy

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
    def chart_frame(self, center):
        """The arrays fixing the exp chart at ``center``: its square root ``p^{1/2}``."""
        center = np.asarray(center, float)
        if center.shape != self.point_shape:
            raise ValueError(f"the chart centre must be one point of shape {self.point_shape}")
        return {"sqrt": _sqrt_invsqrt(center)[0]}

    def pt_exp_frame(self, frame, coords):
        """``exp_center`` of chart coordinates ``(..., dim)``, the chart given by
        :meth:`chart_frame` (arrays or tensors, e.g. ``pm.Data``)."""
        s = pt.as_tensor_variable(frame["sqrt"])
        w_mat = pt.tensordot(pt.as_tensor_variable(coords), self._frame, axes=[[-1], [0]])
        return ptn.sym(s @ ptn.expm(w_mat, k=self.k) @ s)

    def pt_exp_coords(self, center, coords):
        """``exp_center`` of chart coordinates ``coords`` ``(..., dim)`` (tensor)."""
        return self.pt_exp_frame(self.chart_frame(center), coords)

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
        """``D = k(k+1)/2``: :func:`vech` coordinates of symmetric matrices."""
        return self.dim

    def to_ambient(self, points) -> np.ndarray:
        """Ambient coordinates ``(..., D)`` of points: their plain :func:`vech`."""
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
