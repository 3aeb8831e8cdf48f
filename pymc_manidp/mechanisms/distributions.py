r"""PyMC distributions of the two mechanisms, valued on the manifold.

Both are :class:`pymc.CustomDist` variables whose value is a point in embedding
coordinates (a unit vector, an SPD matrix, a pre-shape) and whose default transform is
the :class:`~pymc_manidp.mechanisms.transforms.ChartTransform` at the density's mode.
Their log-densities are with respect to the Riemannian volume; the transform adds the
exp chart's volume density, so the sampler's target on :math:`\mathbb R^d` is exact.
They work as building blocks inside any ``pm.Model``.
"""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytensor.tensor as pt

from pymc_manidp.geometry.validation import check_positive_real
from pymc_manidp.mechanisms.transforms import ChartTransform

__all__ = ["KNG", "ManifoldLaplace", "kng_logp", "laplace_logp"]


def _signature(manifold) -> str:
    """``(p0,p1),()->(p0,p1)``: a point-shaped parameter and a scalar rate."""
    core = ",".join(f"p{i}" for i in range(len(manifold.point_shape)))
    return f"({core}),()->({core})"


def _restrict(logp, manifold, value, domain):
    if domain is None:
        return logp
    inside = manifold.pt_dist(pt.as_tensor_variable(domain.center), value) <= domain.radius
    return pt.switch(inside, logp, -np.inf)


def laplace_logp(manifold, value, footpoint, sigma, domain=None):
    r"""Unnormalized log-density of the manifold Laplace w.r.t. the Riemannian volume.

    .. math:: \log f(x) = -\rho(\eta, x)/\sigma \quad (x \in B_r(m_0) \text{ if restricted})
    """
    logp = -manifold.pt_dist(footpoint, value) / sigma
    return _restrict(logp, manifold, value, domain)


def kng_logp(manifold, value, data, sigma, domain):
    r"""Unnormalized log-density of KNG w.r.t. the Riemannian volume, on ``B_r(m0)``.

    .. math:: \log f(x) = -\Big\|\sum_{i=1}^n \log_x(x_i)\Big\|_x \big/ (\sigma n)
    """
    n = data.shape[0]
    logs = manifold.pt_log(value, data)
    grad = pt.sum(logs, axis=0)
    logp = -manifold.pt_norm(value, grad) / (sigma * n)
    return _restrict(logp, manifold, value, domain)


class ManifoldLaplace:
    r"""Manifold Laplace distribution (2021, Definition 3), optionally on a ball.

    .. math:: f(x) \propto e^{-\rho(\eta, x)/\sigma}\ \text{w.r.t. Riemannian volume},
              \quad x \in B_r(m_0) \text{ when ``domain`` is given.}

    Parameters
    ----------
    name : str
    manifold : Manifold
    footpoint : array, shape ``point_shape``
        The centre ``eta`` (a constant).
    sigma : float
        The rate ``sigma > 0``.
    domain : DataDomain, optional
        Restrict the support to the closed ball ``B_r(m0)``.
    **kwargs
        Passed to :class:`pymc.CustomDist` (``dims``, ``observed`` ...).

    Returns
    -------
    TensorVariable
        The manifold-valued random variable.

    Examples
    --------
    >>> import numpy as np, pymc as pm
    >>> import pymc_manidp as pmd
    >>> S = pmd.Sphere(dim=2)
    >>> with pm.Model() as m:
    ...     x = ManifoldLaplace("x", S, footpoint=[0.0, 0.0, 1.0], sigma=0.1)
    >>> sorted(m.initial_point())
    ['x_chart__']
    """

    def __new__(cls, name, manifold, footpoint, sigma, domain=None, **kwargs):
        footpoint = manifold.validate(footpoint)
        sigma = check_positive_real(sigma, "sigma")
        transform = ChartTransform(manifold, footpoint, sigma)

        def logp(value, eta, s):
            return laplace_logp(manifold, value, eta, s, domain)

        kwargs.setdefault("initval", transform.initial_value())
        return pm.CustomDist(
            name,
            footpoint,
            sigma,
            logp=logp,
            signature=_signature(manifold),
            transform=transform,
            **kwargs,
        )


class KNG:
    r"""K-norm gradient mechanism's distribution (2022) on the public ball.

    .. math:: f(x) \propto \exp\Big(-\Big\|\sum_i \log_x(x_i)\Big\|_x / (\sigma n)\Big),
              \quad x \in B_r(m_0).

    Parameters
    ----------
    name : str
    manifold : Manifold
    data : array, shape ``(n, *point_shape)``
        The (private) data; constants of the graph.
    sigma : float
        The rate ``sigma > 0``.
    domain : DataDomain
        The public ball (KNG is always restricted to it).
    mode : array, optional
        Chart centre; default the Fréchet mean of ``data`` (the density's mode).
    **kwargs
        Passed to :class:`pymc.CustomDist`.
    """

    def __new__(cls, name, manifold, data, sigma, domain, mode=None, **kwargs):
        from pymc_manidp.stats.frechet import frechet_mean

        data = domain.check(data)
        sigma = check_positive_real(sigma, "sigma")
        if mode is None:
            mode = frechet_mean(manifold, data).mean
        transform = ChartTransform(manifold, mode, sigma)

        def logp(value, _mode, s):
            # the mode only fixes the value's shape and the chart; it is not in the density
            return kng_logp(manifold, value, data, s, domain)

        kwargs.setdefault("initval", transform.initial_value())
        return pm.CustomDist(
            name,
            transform.center,
            sigma,
            logp=logp,
            signature=_signature(manifold),
            transform=transform,
            **kwargs,
        )
