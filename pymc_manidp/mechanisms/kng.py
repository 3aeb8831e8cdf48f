r"""The K-norm gradient mechanism, KNG (Soto, Bharath, Reimherr & Slavković, 2022).

.. math:: f(x \mid D) \propto \exp\Big\{-\Big\|\sum_{i=1}^n \log_x(x_i)\Big\|_x
          \big/ (\sigma n)\Big\},\quad x \in B_r(m_0),

with gradient sensitivity ``Delta = 2r(2 - H)/n`` (Thm 2) and ``sigma = 2 Delta/eps``:
the normalizing constant depends on the data, so the factor 2 of Thm 1 is needed.
"""

from __future__ import annotations

import numpy as np

from pymc_manidp.laws import exact
from pymc_manidp.laws.distributions import KNG
from pymc_manidp.mcmc import polar_model
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
        The public ball's centre ``m0``, chosen without looking at the data.
    radius : float
        The public ball's radius ``r`` (``0 < r < r*``); the data lie in ``B_r(m0)``.

    Examples
    --------
    >>> import numpy as np
    >>> import pymc_manidp as pmd
    >>> mech = pmd.KNGMechanism(pmd.Sphere(dim=2), epsilon=1.0, center=[0, 0, 1.0],
    ...                         radius=np.pi / 8)
    >>> round(mech.scale(100), 6)  # 2 * (pi/4)(2 - pi/4)/100
    0.019079
    """

    name = "KNG"
    restricted = True  # KNG's density always lives on the public ball

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
        lp = -self.manifold.norm(x, g) / (self.scale(n) * n)
        return np.where(self.domain.distances(x) <= self.domain.radius, lp, -np.inf)

    def model(self, data, *, clip=False):
        """The ``pm.Model`` whose deterministic ``release`` follows KNG's law.

        The density is sampled on the manifold and conditioned on the ball (a
        release keeps only draws inside). The data, the rate
        and the chart are ``pm.Data`` (``mcmc.polar_model``).
        """
        data = self.domain.check(data, clip=clip)
        center, sigma, inputs = self.mcmc_inputs(data)
        return polar_model(self.manifold, center, sigma, self.mcmc_law, inputs=inputs)

    def mcmc_inputs(self, data):
        """Chart centre, rate and the density's inputs (the data) for checked data."""
        # the chart centre is only a sampling device: its accuracy affects efficiency
        mode = frechet_mean(self.manifold, data).mean
        return mode, self.scale(len(data)), {"data": data}

    def mcmc_law(self, name, v, **kwargs):
        # KNG's density on the whole chart: a release keeps the draws inside the ball
        return KNG(name, self.manifold, v["data"], v["scale"], None, **kwargs)

    def exact_draws(self, data, size, rng):
        """Exact draws for checked data (``ExactDraws``, with acceptance rates)."""
        return exact.sample_kng(
            self.manifold, data, self.scale(len(data)), size, rng, domain=self.domain
        )
