r"""Normalizing constants of the unrestricted manifold Laplace, as PyTensor graphs.

.. math:: Z(\sigma) = \int_{\mathcal M} e^{-\rho(\eta, x)/\sigma}\,dx

w.r.t. the Riemannian volume. On a homogeneous space it does not depend on the
footpoint ``eta``, which makes ``e^{-\rho/\sigma}/Z`` a proper likelihood of ``eta``
and lets ``sigma`` be a random variable. Every function here returns a graph that is
differentiable in ``sigma`` (NUTS needs ``d log Z / d sigma`` when ``sigma`` is random).

- A manifold with a normalizer of its own (``manifold.pt_laplace_log_normalizer``):
  ``SPD(k)``, ``k <= 3``, where the volume density depends on the eigenvalues of the
  tangent vector; Weyl's integration formula reduces ``Z`` to an integral over
  eigenvalues, in closed form for ``k = 2`` and by a fixed tensor-product quadrature
  for ``k = 3`` (:func:`~pymc_manidp.geometry.spd.spd_laplace_log_normalizer`).
  Finite only for ``sigma < SPD(k).laplace_max_sigma``.
- A radial volume density (``manifold.volume_is_radial``: spheres, Kendall shapes):
  ``Z`` is a 1-D integral along a ray (Gauss-Legendre); where the exp chart is an
  isometry (Euclidean ``R^d``) the closed form
  :math:`\mathrm{vol}(S^{d-1})\,\Gamma(d)\,\sigma^d`.
"""

from __future__ import annotations

import numpy as np
import pytensor.tensor as pt
from pytensor.graph.basic import Variable
from scipy import special

from pymc_manidp.geometry.base import exp_chart_is_isometry
from pymc_manidp.geometry.capabilities import LaplaceNormalizer

# SPD's normalizer lives with SPD (geometry/spd.py); these names stay importable here
from pymc_manidp.geometry.spd import (
    SPD3_MAX_FRACTION,
    SPD_NORMALIZED_K,
    log_weyl_constant,
    spd_laplace_log_normalizer,
    spd_normalizer_max_sigma,
)
from pymc_manidp.geometry.spd import ChebyshevSeries as ChebyshevSeries
from pymc_manidp.geometry.sphere import log_unit_sphere_volume

# laplace_log_normalizer is public from pymc_manidp.laws (documented there);
# ChebyshevSeries, importable here, is an implementation detail (a PyTensor Op) of
# the SPD(3) table: not listed
__all__ = [
    "SPD3_MAX_FRACTION",
    "SPD_NORMALIZED_K",
    "has_laplace_normalizer",
    "log_weyl_constant",
    "spd_laplace_log_normalizer",
    "spd_normalizer_max_sigma",
]

_N_NODES = 400  # Gauss-Legendre nodes of the radial quadrature (machine precision)


def _as_float_tensor(x):
    # a Python float becomes the narrowest exact dtype (1.0: float32): keep float64
    return pt.as_tensor_variable(x if isinstance(x, Variable) else np.asarray(x, float))


def has_laplace_normalizer(manifold) -> bool:
    """Whether :func:`~pymc_manidp.laws.laplace_log_normalizer` knows ``Z`` here.

    Parameters
    ----------
    manifold : Manifold
        Any manifold.

    Returns
    -------
    bool
        True where the manifold has a normalizer of its own
        (``pt_laplace_log_normalizer``: ``SPD(k)``, ``k <= 3``) or a radial volume
        density (``volume_is_radial``: ``Euclidean``, ``Sphere``, ``KendallShape``).

    Examples
    --------
    >>> import pymc_manidp as pmd
    >>> has_laplace_normalizer(pmd.SPD(k=3)), has_laplace_normalizer(pmd.SPD(k=4))
    (True, False)
    """
    return isinstance(manifold, LaplaceNormalizer) or bool(manifold.volume_is_radial)


def laplace_log_normalizer(manifold, sigma):
    r"""``log Z(sigma)`` of the unrestricted manifold Laplace (a PyTensor graph), or None.

    .. math:: Z(\sigma) = \int_{\mathcal M} e^{-\rho(\eta, x)/\sigma}\,dx
              = \mathrm{vol}(S^{d-1})\,\sigma^d \int_0^{U} e^{-u} u^{d-1}
                J(\sigma u)\,du,

    ``J`` the exp chart's volume density along a ray (``manifold.pt_log_volume_density``),
    ``U = T/\sigma`` with ``T`` the chart's radius. It does not depend on the footpoint
    (homogeneous spaces). A manifold's own normalizer comes first
    (``manifold.pt_laplace_log_normalizer``: ``SPD(k)``, ``k <= 3``, ``+inf`` at and
    beyond the normalizability edge ``sigma >= 2/C``). Else, for a radial volume
    density (``manifold.volume_is_radial``): where the exp chart is an isometry
    (Euclidean) the closed form :math:`\mathrm{vol}(S^{d-1})\Gamma(d)\sigma^d`;
    otherwise (spheres, Kendall shapes) Gauss-Legendre quadrature on
    ``[0, min(U, 2d + 100)]`` (400 nodes, beyond ``2d + 100`` the integrand is below
    ``e^{-50}`` of its peak), differentiable in ``sigma``. Else None (the Laplace stays
    unnormalized there and refuses a random ``sigma``: ``SPD(k)``, ``k >= 4``).

    Parameters
    ----------
    manifold : Manifold
        The manifold (its dimension and chart radius ``T`` set the integral).
    sigma : float or tensor, shape ``(...)``
        The scale ``sigma > 0``; a batch of rates gives a batch of normalizers.

    Returns
    -------
    TensorVariable or None
        ``log Z(sigma)``, shape ``(...)`` as ``sigma``; ``None`` where no normalizer is
        known.

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
    if isinstance(manifold, LaplaceNormalizer):
        return manifold.pt_laplace_log_normalizer(sigma)
    if not manifold.volume_is_radial:
        return None
    base = log_unit_sphere_volume(d) + d * pt.log(sigma)
    if exp_chart_is_isometry(manifold):
        return base + special.gammaln(d)
    big_t = manifold.injectivity_radius
    upper = pt.minimum(big_t / sigma, 2.0 * d + 100.0)
    x, w = np.polynomial.legendre.leggauss(_N_NODES)
    u = pt.shape_padright(upper) * (x + 1.0) / 2.0  # (..., nodes)
    e1 = np.eye(d)[0]
    coords = pt.shape_padright(pt.shape_padright(sigma) * u) * e1
    log_f = -u + (d - 1) * pt.log(u) + manifold.pt_log_volume_density(coords)
    log_int = pt.logsumexp(log_f + np.log(w), axis=-1) + pt.log(upper / 2.0)
    return base + log_int
