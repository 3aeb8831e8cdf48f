r"""The K-norm gradient mechanism, KNG (Soto, Bharath, Reimherr & Slavković, 2022).

.. math:: f(x \mid D) \propto \exp\Big\{-\Big\|\sum_{i=1}^n \log_x(x_i)\Big\|_x
          \big/ (\sigma n)\Big\},\quad x \in B_r(m_0),

with gradient sensitivity ``Delta = 2r(2 - H)/n`` (Thm 2) and ``sigma = 2 Delta/eps``:
the normalizing constant depends on the data, so the factor 2 of Thm 1 is needed.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from pymc_manidp.laws import exact
from pymc_manidp.laws.distributions import KNG
from pymc_manidp.mechanisms.base import Mechanism
from pymc_manidp.stats.frechet import frechet_mean

__all__ = ["KNGMechanism"]


class KNGMechanism(Mechanism):
    """Release a private mean with the K-norm gradient mechanism (restricted to the ball).

    Parameters
    ----------
    manifold : Manifold
        A manifold instance, e.g. ``pmd.Sphere(dim=2)``.
    epsilon : float
        Privacy budget ``> 0``.
    center : array_like, shape ``point_shape``
        The public ball's center ``m0``, chosen without looking at the data.
    radius : float
        The public ball's radius ``r`` (``0 < r < r*``); the data lie in ``B_r(m0)``.

    Examples
    --------
    >>> import numpy as np
    >>> import pymc_manidp as pmd
    >>> mech = pmd.KNGMechanism(pmd.Sphere(dim=2), epsilon=1.0, center=[0, 0, 1.0],
    ...                         radius=np.pi / 8)
    >>> round(mech.sigma(100), 6)  # 2 * (pi/4)(2 - pi/4)/100
    0.019079
    """

    name = "KNG"
    restricted = True  # KNG's density always lives on the public ball
    # MCMC samples KNG's density on the whole chart and keeps the draws inside the
    # ball (the law conditioned on it), which spares NUTS the wall at the ball's edge
    mcmc_law = KNG
    mcmc_law_kwargs: ClassVar[dict] = {"domain": None}

    def sensitivity(self, n: int) -> float:
        """KNG's sensitivity for ``n`` records (``DataDomain.kng_sensitivity``)."""
        return self.domain.kng_sensitivity(n)

    def logp(self, x, data):
        """Unnormalized log-density (NumPy) w.r.t. volume at points ``x`` ``(..., *shape)``."""
        data = self.domain.check(data)
        x = self.manifold.validate(x)
        n = len(data)
        nshape = len(self.manifold.point_shape)
        xb = np.expand_dims(x, -nshape - 1)
        g = np.sum(self.manifold.log(xb, data), axis=-nshape - 1)
        lp = -self.manifold.norm(x, g) / (self.sigma(n) * n)
        return np.where(self.domain.distances(x) <= self.domain.radius, lp, -np.inf)

    def mcmc_inputs(self, data):
        """The data's Fréchet mean (the mode, the chart's origin) and the density's
        input, the data, for checked data."""
        # the chart's origin is only a sampling device: its accuracy affects efficiency
        return frechet_mean(self.manifold, data).mean, {"data": data}

    def exact_draws(self, data, sigma, size, rng):
        """Exact draws for checked data (``ExactDraws``, with acceptance rates)."""
        return exact.sample_kng(self.manifold, data, sigma, size, rng, domain=self.domain)
