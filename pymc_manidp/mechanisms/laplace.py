r"""The manifold Laplace mechanism for the Fréchet mean (Reimherr, Bharath & Soto, 2021).

.. math:: f(x \mid D) \propto \exp\{-\rho(\bar x(D), x)/\sigma\}
          \ \text{w.r.t. Riemannian volume},

with footpoint the sample Fréchet mean, sensitivity ``Delta = 2r(2-H)/(nH)`` (Thm 2)
widened by the footpoint's numerical error, and

- ``sigma = Delta/eps`` on the whole space (Thm 1: on a homogeneous space the
  normalizing constant does not depend on the footpoint);
- ``sigma = 2 Delta/eps`` when restricted to the public ball (Thm 3).
"""

from __future__ import annotations

import numpy as np

from pymc_manidp.geometry.spd import SPD
from pymc_manidp.geometry.validation import check_positive_real
from pymc_manidp.mechanisms.common import release
from pymc_manidp.mechanisms.distributions import laplace_logp
from pymc_manidp.samplers import exact
from pymc_manidp.samplers.mcmc import SamplerCache, polar_model
from pymc_manidp.stats.domain import DataDomain
from pymc_manidp.stats.frechet import frechet_mean
from pymc_manidp.stats.sensitivity import rate

__all__ = ["LaplaceMechanism", "spd_laplace_max_sigma"]


def spd_laplace_max_sigma(k: int) -> float:
    r"""Largest rate for which the unrestricted Laplace on SPD(k) is normalizable.

    The volume density grows like :math:`\exp(\tfrac12\sum_{i<j}|\lambda_i-\lambda_j|)`;
    over unit ``lambda`` the exponent's slope is at most
    :math:`\tfrac12\sqrt{k(k^2-1)/3}`, so :math:`e^{-t/\sigma}` wins iff
    :math:`\sigma < 2/\sqrt{k(k^2-1)/3}`.
    """
    return np.inf if k < 2 else 2.0 / np.sqrt(k * (k * k - 1) / 3.0)


class LaplaceMechanism:
    """Release a private Fréchet mean with the manifold Laplace mechanism.

    Parameters
    ----------
    manifold : Manifold
    epsilon : float
        Privacy budget ``> 0``.
    center, radius :
        The public ball ``B_r(m0)`` holding the data (``r < r*``).
    restrict : bool
        Restrict the density to the ball (Thm 3, ``sigma = 2 Delta/eps``). Default
        False: the whole space with ``sigma = Delta/eps``.
    grad_tol : float, optional
        Public bound on the footpoint's gradient norm (default ``1e-9 * radius``);
        the sensitivity is widened by ``2 grad_tol / H``.

    Examples
    --------
    >>> import numpy as np
    >>> import pymc_manidp as pmd
    >>> mech = pmd.LaplaceMechanism(pmd.SPD(k=2), epsilon=1.0, center=np.eye(2), radius=1.5)
    >>> round(mech.sensitivity(100), 6), round(mech.scale(100), 6)
    (0.03, 0.03)
    """

    name = "manifold Laplace"

    def __init__(self, manifold, *, epsilon, center, radius, restrict=False, grad_tol=None):
        self.manifold = manifold
        self.epsilon = check_positive_real(epsilon, "epsilon")
        self.domain = DataDomain(manifold, center, radius)
        self.restrict = bool(restrict)
        self.grad_tol = 1e-9 * self.domain.radius if grad_tol is None else float(grad_tol)
        self.mcmc_cache = SamplerCache()  # compiled MCMC models, per (n, sampler)

    @property
    def restricted(self) -> bool:
        return self.restrict

    def sensitivity(self, n: int) -> float:
        return self.domain.laplace_sensitivity(n, self.grad_tol)

    def scale(self, n: int) -> float:
        sigma = rate(self.sensitivity(n), self.epsilon, footpoint_free_normalizer=not self.restrict)
        if isinstance(self.manifold, SPD) and not self.restrict:
            top = spd_laplace_max_sigma(self.manifold.k)
            if not sigma < top:
                raise ValueError(
                    f"the unrestricted Laplace on SPD({self.manifold.k}) does not exist for "
                    f"sigma = {sigma:.4g} >= {top:.4g}: use restrict=True, more data or a "
                    "larger epsilon"
                )
        return sigma

    def footpoint(self, data):
        """Checked data and their Fréchet mean; refuses an unconverged or outside mean."""
        data = self.domain.check(data)
        return data, self._mean_of_checked(data)

    def _mean_of_checked(self, data):
        res = frechet_mean(self.manifold, data, tol=1e-10, atol=self.grad_tol)
        if not (res.converged and res.grad_norm <= self.grad_tol):
            raise ValueError(
                f"the Fréchet mean did not converge to |grad F| <= {self.grad_tol:.3g} "
                f"(got {res.grad_norm:.3g}): nothing is released"
            )
        if not self.domain.distances(res.mean) <= self.domain.radius:
            raise ValueError("the computed Fréchet mean lies outside the public ball")
        return res.mean

    def logp(self, x, data):
        """Unnormalized log-density (NumPy) w.r.t. volume at points ``x``."""
        data, eta = self.footpoint(data)
        x = self.manifold.validate(x)
        lp = -self.manifold.dist(eta, x) / self.scale(len(data))
        if self.restrict:
            lp = np.where(self.domain.distances(x) <= self.domain.radius, lp, -np.inf)
        return lp

    def model(self, data, *, clip=False):
        """The ``pm.Model`` whose deterministic ``release`` follows the mechanism's law.

        The footpoint, the rate and the chart are ``pm.Data`` (``mcmc.polar_model``).
        """
        data = self.domain.check(data, clip=clip)
        center, sigma, inputs = self._polar_args(data)
        return polar_model(
            self.manifold, center, sigma, self._polar_logp, domain=self.domain, inputs=inputs
        )

    def _polar_args(self, data):
        """Chart centre, rate and the density's inputs for checked data."""
        eta = self._mean_of_checked(data)
        return eta, self.scale(len(data)), {"footpoint": eta}

    def _polar_logp(self, x, v):
        return laplace_logp(self.manifold, x, v["footpoint"], v["scale"])

    def _exact_draws(self, data, size, rng):
        """Exact draws for checked data (``ExactDraws``): used by ``release``."""
        eta = self._mean_of_checked(data)
        return exact.sample_laplace(
            self.manifold,
            eta,
            self.scale(len(data)),
            size,
            rng,
            domain=self.domain if self.restrict else None,
        )

    def sample(self, data, size, *, random_seed=None, clip=False):
        """``size`` i.i.d. draws ``(size, *point_shape)`` of the mechanism's exact law.

        For audits and tests: each draw alone is an ε-DP release of ``data``; all
        of them together are not (their privacy losses add up).

        Examples
        --------
        >>> import numpy as np
        >>> import pymc_manidp as pmd
        >>> S = pmd.Sphere(dim=2)
        >>> mech = pmd.LaplaceMechanism(S, epsilon=1.0, center=[0, 0, 1.0], radius=0.7)
        >>> mech.sample(np.array([[0, 0, 1.0], [0, 0.6, 0.8]]), 5, random_seed=0).shape
        (5, 3)
        """
        size = exact._check_size(size)
        rng = exact.as_generator(random_seed)
        data = self.domain.check(data, clip=clip)
        return self._exact_draws(data, size, rng).points

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
        """Release a private Fréchet mean (``mechanisms.common.release``): a Release.

        ``sampler="exact"`` (default): pure ε-DP, ``delta = 0``; ``"nuts"`` or
        ``"metropolis"``: MCMC, approximately DP (``delta=None``, see its notes).
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
