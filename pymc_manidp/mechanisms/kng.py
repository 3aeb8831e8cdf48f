r"""The K-norm gradient mechanism, KNG (Soto, Bharath, Reimherr & Slavković, 2022).

.. math:: f(x \mid D) \propto \exp\Big\{-\Big\|\sum_{i=1}^n \log_x(x_i)\Big\|_x
          \big/ (\sigma n)\Big\},\quad x \in B_r(m_0),

with gradient sensitivity ``Delta = 2r(2 - H)/n`` (Thm 2) and ``sigma = 2 Delta/eps``:
the normalizing constant depends on the data, so the factor 2 of Thm 1 is needed.
"""

from __future__ import annotations

import numpy as np

from pymc_manidp.geometry.validation import check_positive_real
from pymc_manidp.mechanisms.common import release
from pymc_manidp.mechanisms.distributions import kng_logp
from pymc_manidp.samplers import exact
from pymc_manidp.samplers.mcmc import SamplerCache, polar_model
from pymc_manidp.stats.domain import DataDomain
from pymc_manidp.stats.frechet import frechet_mean
from pymc_manidp.stats.sensitivity import rate

__all__ = ["KNGMechanism"]


class KNGMechanism:
    """Release a private mean with the K-norm gradient mechanism (restricted to the ball).

    Parameters
    ----------
    manifold : Manifold
    epsilon : float
    center, radius :
        The public ball ``B_r(m0)`` (``r < r*``).

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
    last_sampler_info: dict | None = None  # rejection statistics of the last sample()

    def __init__(self, manifold, *, epsilon, center, radius):
        self.manifold = manifold
        self.epsilon = check_positive_real(epsilon, "epsilon")
        self.domain = DataDomain(manifold, center, radius)
        self.mcmc_cache = SamplerCache()  # compiled MCMC models, per (n, sampler)

    def sensitivity(self, n: int) -> float:
        return self.domain.kng_sensitivity(n)

    def scale(self, n: int) -> float:
        return rate(self.sensitivity(n), self.epsilon)

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

        The density is sampled on the manifold and conditioned on the ball through
        the ``in_domain`` flag (a release keeps only draws inside). The data, the rate
        and the chart are ``pm.Data`` (``mcmc.polar_model``).
        """
        data = self.domain.check(data, clip=clip)
        center, sigma, inputs = self._polar_args(data)
        return polar_model(
            self.manifold, center, sigma, self._polar_logp, domain=self.domain, inputs=inputs
        )

    def _polar_args(self, data):
        """Chart centre, rate and the density's inputs (the data) for checked data."""
        # the chart centre is only a sampling device: its accuracy affects efficiency
        mode = frechet_mean(self.manifold, data).mean
        return mode, self.scale(len(data)), {"data": data}

    def _polar_logp(self, x, v):
        return kng_logp(self.manifold, x, v["data"], v["scale"], None)

    def _exact_draws(self, data, size, rng):
        """Exact draws for checked data (``ExactDraws``, with acceptance rates)."""
        return exact.sample_kng(
            self.manifold, data, self.scale(len(data)), size, rng, domain=self.domain
        )

    def sample(self, data, size, *, random_seed=None, clip=False):
        """``size`` i.i.d. draws ``(size, *point_shape)`` of KNG's exact law.

        For audits and tests: each draw alone is an ε-DP release of ``data``; all
        of them together are not. The rejection statistics of the last call (e.g.
        ``acceptance_rate``) are kept in :attr:`last_sampler_info`.

        Examples
        --------
        >>> import numpy as np
        >>> import pymc_manidp as pmd
        >>> S = pmd.Sphere(dim=2)
        >>> mech = pmd.KNGMechanism(S, epsilon=1.0, center=[0, 0, 1.0], radius=0.7)
        >>> mech.sample(np.array([[0, 0, 1.0], [0, 0.6, 0.8]]), 5, random_seed=0).shape
        (5, 3)
        >>> 0 < mech.last_sampler_info["acceptance_rate"] <= 1
        True
        """
        size = exact._check_size(size)
        rng = exact.as_generator(random_seed)
        data = self.domain.check(data, clip=clip)
        out = self._exact_draws(data, size, rng)
        self.last_sampler_info = {"proposals": out.proposals, **out.info}
        return out.points

    def release(
        self,
        data,
        *,
        sampler="exact",
        random_seed=None,
        draws=2000,
        tune=1000,
        chains=4,
        clip=False,
        skip_diagnostics=False,
        estimate_delta=False,
    ):
        """Release a private mean (``mechanisms.common.release``); returns a Release.

        ``sampler="exact"`` (default): pure ε-DP, ``delta = 0``, the acceptance rate in
        ``Release.sampler_info``; ``"nuts"``/``"metropolis"``: MCMC, approximately DP.
        """
        return release(
            self,
            data,
            sampler=sampler,
            random_seed=random_seed,
            draws=draws,
            tune=tune,
            chains=chains,
            clip=clip,
            skip_diagnostics=skip_diagnostics,
            estimate_delta=estimate_delta,  # issue 17
        )
