r"""Noise-aware inference: the posterior of the quantity behind a private release.

Having received a release ``x~`` of the manifold Laplace mechanism (unrestricted, rate
``sigma``), the likelihood of the footpoint ``eta`` (the data's Fréchet mean) is

.. math:: p(\tilde x \mid \eta) = e^{-\rho(\eta, \tilde x)/\sigma} / Z(\sigma),

a proper likelihood because ``Z`` does not depend on ``eta`` on a homogeneous space
(docs/architecture.md). :func:`noise_aware_model` writes it as a PyMC model with a prior on
``eta``: the privacy noise is accounted for exactly (the Euclidean analogues are
Bernstein & Sheldon 2018; Ju, Awan, Gong & Rao 2022). With the uniform prior on a
compact manifold the posterior of ``eta`` is the Laplace itself, centered at the
release (tested).

KNG and the ball-restricted Laplace are refused: their normalizer depends on the
data, so the density of the release is not a likelihood in ``eta`` alone.
"""

from __future__ import annotations

import numpy as np
import pymc as pm

from pymc_manidp.laws.charts import PolarChart, point_dims
from pymc_manidp.laws.distributions import ManifoldLaplace, ManifoldUniform

__all__ = ["noise_aware_model"]

_LAPLACE = "manifold Laplace"


def noise_aware_model(release, manifold, prior=None, *, name="mean", restricted=False):
    r"""PyMC model of the footpoint behind a published manifold Laplace release.

    .. math:: \eta \sim \pi, \qquad \tilde x \mid \eta \sim
              \mathrm{ManifoldLaplace}(\eta, \sigma)\ \text{(observed)}

    Parameters
    ----------
    release : Release or dict
        What was published: ``value``, ``mechanism`` (must be ``"manifold Laplace"``)
        and ``sigma`` (``Release.public()`` has them).
    manifold : Manifold
        The manifold the release lives on.
    prior : callable, optional
        ``prior(name, **kwargs)`` creates the prior variable of the footpoint inside
        the model (e.g. ``lambda n, **kw: pmd.ManifoldLaplace(n, M, m0, 0.5, **kw)``);
        ``kwargs`` carry the point's ``dims``. Default: :class:`ManifoldUniform`
        (compact manifolds), sampled in the polar chart at the release with scale
        ``sigma``, where the posterior's cusp sits.
    name : str
        Name of the footpoint variable.
    restricted : bool
        Whether the release came from the ball-restricted Laplace: refused (its
        normalizer depends on the footpoint).

    Returns
    -------
    pm.Model
        With the footpoint ``name`` and the observed ``release``.

    Examples
    --------
    >>> import numpy as np
    >>> import pymc_manidp as pmd
    >>> S = pmd.Sphere(dim=2)
    >>> published = {"value": np.array([0.0, 0.0, 1.0]), "mechanism": "manifold Laplace",
    ...              "sigma": 0.1}
    >>> m = noise_aware_model(published, S)
    >>> [v.name for v in m.free_RVs], [v.name for v in m.observed_RVs]
    (['mean'], ['release'])
    """
    get = release.get if isinstance(release, dict) else lambda k: getattr(release, k)
    mechanism, sigma = get("mechanism"), float(get("sigma"))
    if mechanism != _LAPLACE:
        raise ValueError(
            f"noise-aware inference needs a {_LAPLACE!r} release, got {mechanism!r}: KNG's "
            "normalizer depends on the data, so its density is no likelihood of the mean"
        )
    if restricted:
        raise ValueError(
            "the ball-restricted Laplace's normalizer depends on the footpoint: its density "
            "is no proper likelihood here; only unrestricted Laplace releases are supported"
        )
    value = manifold.validate(np.asarray(get("value"), float))
    dims = point_dims(manifold)
    with pm.Model(coords=dims) as model:
        if prior is None:
            chart = PolarChart(manifold, manifold.chart_frame(value), scale=sigma)
            eta = ManifoldUniform(name, manifold, default_transform=chart, dims=tuple(dims))
        else:
            eta = prior(name, dims=tuple(dims))
        ManifoldLaplace("release", manifold, eta, sigma, observed=value, dims=tuple(dims))
    return model
