r"""Normalizing constants of the unrestricted manifold Laplace, as PyTensor graphs.

.. math:: Z(\sigma) = \int_{\mathcal M} e^{-\rho(\eta, x)/\sigma}\,dx

w.r.t. the Riemannian volume. On a homogeneous space it does not depend on the
footpoint ``eta``, which makes ``e^{-\rho/\sigma}/Z`` a proper likelihood of ``eta``
and lets ``sigma`` be a random variable. Every function here returns a graph that is
differentiable in ``sigma`` (NUTS needs ``d log Z / d sigma`` when ``sigma`` is random).

- Euclidean ``R^d``: :math:`\mathrm{vol}(S^{d-1})\,\Gamma(d)\,\sigma^d`.
- Sphere and Kendall shapes: the volume density depends on the distance only, so
  ``Z`` is a 1-D integral along a ray (Gauss-Legendre).
- ``SPD(k)``, ``k <= 3``: the volume density depends on the eigenvalues of the
  tangent vector; Weyl's integration formula reduces ``Z`` to an integral over
  eigenvalues, in closed form for ``k = 2`` and by a fixed tensor-product quadrature
  for ``k = 3`` (:func:`spd_laplace_log_normalizer`). Finite only for
  ``sigma < SPD(k).laplace_max_sigma``.
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

import numpy as np
import pytensor.tensor as pt
from pytensor.graph.basic import Apply, Variable
from pytensor.graph.op import Op
from pytensor.link.numba.dispatch import basic as numba_basic
from pytensor.link.numba.dispatch.basic import register_funcify_default_op_cache_key
from scipy import special

from pymc_manidp.geometry.euclidean import Euclidean
from pymc_manidp.geometry.kendall import KendallShape
from pymc_manidp.geometry.spd import SPD
from pymc_manidp.geometry.sphere import Sphere
from pymc_manidp.laws.charts import log_unit_sphere_volume

# laplace_log_normalizer is public from pymc_manidp.mechanisms (documented there);
# ChebyshevSeries is an implementation detail (a PyTensor Op) of the SPD(3) table
__all__ = [
    "SPD3_MAX_FRACTION",
    "SPD_NORMALIZED_K",
    "has_laplace_normalizer",
    "log_weyl_constant",
    "spd_laplace_log_normalizer",
    "spd_laplace_max_sigma",
]

_N_NODES = 400  # Gauss-Legendre nodes of the radial quadrature (machine precision)

#: Matrix sizes ``k`` for which the SPD Laplace normalizer is implemented.
SPD_NORMALIZED_K = (1, 2, 3)


def _as_float_tensor(x):
    # a Python float becomes the narrowest exact dtype (1.0: float32): keep float64
    return pt.as_tensor_variable(x if isinstance(x, Variable) else np.asarray(x, float))


def has_laplace_normalizer(manifold) -> bool:
    """Whether :func:`~pymc_manidp.laws.laplace_log_normalizer` knows ``Z`` here.

    Parameters
    ----------
    manifold : Manifold
        Any manifold of the library.

    Returns
    -------
    bool
        True on ``Euclidean``, ``Sphere``, ``KendallShape`` and ``SPD(k)``, ``k <= 3``.

    Examples
    --------
    >>> import pymc_manidp as pmd
    >>> has_laplace_normalizer(pmd.SPD(k=3)), has_laplace_normalizer(pmd.SPD(k=4))
    (True, False)
    """
    if isinstance(manifold, SPD):
        return manifold.k in SPD_NORMALIZED_K
    return isinstance(manifold, (Euclidean, Sphere, KendallShape))


def laplace_log_normalizer(manifold, sigma):
    r"""``log Z(sigma)`` of the unrestricted manifold Laplace (a PyTensor graph), or None.

    .. math:: Z(\sigma) = \int_{\mathcal M} e^{-\rho(\eta, x)/\sigma}\,dx
              = \mathrm{vol}(S^{d-1})\,\sigma^d \int_0^{U} e^{-u} u^{d-1}
                J(\sigma u)\,du,

    ``J`` the exp chart's volume density along a ray (``manifold.pt_log_volume_density``),
    ``U = T/\sigma`` with ``T`` the chart's radius. It does not depend on the footpoint
    (homogeneous spaces). Euclidean: closed form :math:`\mathrm{vol}(S^{d-1})\Gamma(d)\sigma^d`;
    Sphere and Kendall shapes: Gauss-Legendre quadrature on ``[0, min(U, 2d + 100)]``
    (400 nodes, beyond ``2d + 100`` the integrand is below ``e^{-50}`` of its peak),
    differentiable in ``sigma``. ``SPD(k)``, ``k <= 3``:
    :func:`~pymc_manidp.laws.normalizers.spd_laplace_log_normalizer` (``+inf`` at
    and beyond the normalizability edge ``sigma >= 2/C``); other ``k``: None (the
    Laplace stays unnormalized there and refuses a random ``sigma``).

    Parameters
    ----------
    manifold : Manifold
        The manifold (its dimension ``d`` and chart radius ``T`` set the integral).
    sigma : float or tensor, shape ``(...)``
        The rate ``sigma > 0``; a batch of rates gives a batch of normalizers.

    Returns
    -------
    TensorVariable or None
        ``log Z(sigma)``, shape ``(...)`` as ``sigma``; ``None`` on ``SPD(k)``, ``k >= 4``.

    Examples
    --------
    >>> import numpy as np
    >>> import pymc_manidp as pmd
    >>> z = np.exp(laplace_log_normalizer(pmd.Sphere(dim=2), 0.5).eval())
    >>> bool(np.isclose(z, 2 * np.pi * 0.25 * (1 + np.exp(-2 * np.pi)) / 1.25))
    True
    """
    sigma = _as_float_tensor(sigma)
    d = manifold.dim
    if isinstance(manifold, SPD):
        return spd_laplace_log_normalizer(manifold.k, sigma)
    base = log_unit_sphere_volume(d) + d * pt.log(sigma)
    if isinstance(manifold, Euclidean):
        return base + special.gammaln(d)
    if not isinstance(manifold, (Sphere, KendallShape)):
        return None
    big_t = manifold.injectivity_radius
    upper = pt.minimum(big_t / sigma, 2.0 * d + 100.0)
    x, w = np.polynomial.legendre.leggauss(_N_NODES)
    u = pt.shape_padright(upper) * (x + 1.0) / 2.0  # (..., nodes)
    e1 = np.eye(d)[0]
    coords = pt.shape_padright(pt.shape_padright(sigma) * u) * e1
    log_f = -u + (d - 1) * pt.log(u) + manifold.pt_log_volume_density(coords)
    log_int = pt.logsumexp(log_f + np.log(w), axis=-1) + pt.log(upper / 2.0)
    return base + log_int


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


class ChebyshevSeries(Op):
    """Elementwise ``sum_j c_j T_j(x)`` (NumPy's ``chebval``), differentiable in ``x``.

    Parameters
    ----------
    coef : sequence of float
        Chebyshev coefficients ``c_0, c_1, ...`` (a property of the ``Op``).

    Notes
    -----
    An ``Op`` rather than a graph of Clenshaw steps: 33 fused steps and their gradient
    took seconds to rewrite and compile, the ``Op`` milliseconds. Its gradient is the
    same ``Op`` with the derivative's coefficients (``chebder``).
    """

    __props__ = ("coef",)

    def __init__(self, coef):
        self.coef = tuple(float(c) for c in coef)

    def make_node(self, x):
        x = pt.as_tensor_variable(x, dtype="float64")
        return Apply(self, [x], [x.type()])

    def perform(self, node, inputs, outputs):
        (x,) = inputs
        outputs[0][0] = np.asarray(np.polynomial.chebyshev.chebval(x, self.coef), x.dtype)

    def infer_shape(self, node, shapes):
        return shapes

    def pullback(self, inputs, outputs, output_grads):
        (x,) = inputs
        der = np.polynomial.chebyshev.chebder(np.asarray(self.coef))
        return [output_grads[0] * ChebyshevSeries(der)(x)]


@register_funcify_default_op_cache_key(ChebyshevSeries)
def _numba_chebyshev(op, **kwargs):
    # nopython for the NUMBA backend (nutpie, PyTensor's default): Clenshaw's recurrence
    coef = np.asarray(op.coef)
    m = len(coef)

    @numba_basic.numba_njit
    def chebyshev(x):
        flat = np.ascontiguousarray(x).reshape(-1)
        out = np.empty(flat.shape[0])
        for i in range(flat.shape[0]):
            t = flat[i]
            b1 = 0.0
            b2 = 0.0
            for j in range(m - 1, 0, -1):
                b1, b2 = 2.0 * t * b1 - b2 + coef[j], b1
            out[i] = t * b1 - b2 + coef[0]
        return out.reshape(x.shape)

    # the source's hash salts PyTensor's cache key (its default key sees only the props)
    salt = int(hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:15], 16)
    return chebyshev, salt


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
      tests/mechanisms/test_spd_normalizer.py) for ``sigma <= 0.98`` of the edge
      (:func:`~pymc_manidp.laws.normalizers.spd_laplace_max_sigma`); the graph
      evaluates the table.

    Parameters
    ----------
    k : int
        Matrix size.
    sigma : float or tensor, shape ``(...)``
        The rate; ``+inf`` is returned where ``sigma >= 2/C``; ``k = 3`` clips
        ``sigma`` at :func:`~pymc_manidp.laws.normalizers.spd_laplace_max_sigma`
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
    # 0.98 of the edge (spd_laplace_max_sigma), +inf at and beyond the edge
    top = SPD3_MAX_FRACTION * edge
    inside = pt.lt(sigma, edge)
    s = pt.switch(inside, pt.minimum(sigma, top), 0.5 * edge)
    u = s / edge
    g = ChebyshevSeries(_spd3_chebyshev())(2 * u / SPD3_MAX_FRACTION - 1)
    log_z = 6 * pt.log(s) - 2 * pt.log1p(-u) + g
    return pt.switch(inside, log_z, np.inf)


def spd_laplace_max_sigma(k: int) -> float:
    """Supremum of the ``sigma`` for which the SPD normalizer here is right.

    The normalizability edge ``2/C`` for ``k <= 2``; ``0.98`` of it for ``k = 3``
    (the tabulated range). At and beyond it the normalized law is refused.

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
    >>> round(spd_laplace_max_sigma(3), 4)  # 0.98 / sqrt(2)
    0.693
    """
    edge = SPD(k=k).laplace_max_sigma
    return SPD3_MAX_FRACTION * edge if k == 3 else edge
