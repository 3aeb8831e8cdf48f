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

from typing import ClassVar

import numpy as np

from pymc_manidp._validation import check_bool, check_nonnegative_real
from pymc_manidp.geometry.spd import SPD
from pymc_manidp.laws import exact
from pymc_manidp.laws.distributions import ManifoldLaplace
from pymc_manidp.mechanisms.base import Mechanism, converged_mean
from pymc_manidp.stats.frechet import frechet_means

__all__ = ["LaplaceMechanism", "spd_laplace_max_sigma"]


def spd_laplace_max_sigma(k: int) -> float:
    r"""Largest rate for which the unrestricted Laplace on SPD(k) is normalizable.

    The manifold owns the constant: :attr:`SPD.laplace_max_sigma` (``2/C``). Not the
    range of SPD(3)'s tabulated normalizer (0.98 of it, for the normalized PyMC law):
    that is :func:`pymc_manidp.geometry.spd.spd_normalizer_max_sigma`.
    """
    return SPD(k=k).laplace_max_sigma


class LaplaceMechanism(Mechanism):
    """Release a private Fréchet mean with the manifold Laplace mechanism.

    Parameters
    ----------
    manifold : Manifold
        A manifold instance, e.g. ``pmd.SPD(k=2)``.
    epsilon : float
        Privacy budget ``> 0``.
    center : array_like, shape ``point_shape``
        The public ball's center ``m0``, chosen without looking at the data.
    radius : float
        The public ball's radius ``r`` (``0 < r < r*``); the data lie in ``B_r(m0)``.
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
    >>> round(mech.sensitivity(100), 6), round(mech.sigma(100), 6)
    (0.03, 0.03)
    """

    name = "manifold Laplace"
    # MCMC samples the unrestricted law (a restricted release keeps the draws inside
    # the ball: the restricted law is the unrestricted one conditioned on it); sigma
    # is fixed in a release, so the normalizer would only cost time, and SPD's edge
    # is the mechanism's to check (a restricted release may exceed it)
    mcmc_law = ManifoldLaplace
    mcmc_law_kwargs: ClassVar[dict] = {"normalized": False}

    def __init__(self, manifold, *, epsilon, center, radius, restrict=False, grad_tol=None):
        super().__init__(manifold, epsilon=epsilon, center=center, radius=radius)
        self.restrict = check_bool(restrict, "restrict")
        self.grad_tol = (
            1e-9 * self.domain.radius
            if grad_tol is None
            else check_nonnegative_real(grad_tol, "grad_tol")
        )

    @property
    def restricted(self) -> bool:
        return self.restrict

    @property
    def footpoint_free_normalizer(self) -> bool:
        # 2021 Thm 1: on a homogeneous space the whole-space normalizer is free of the
        # footpoint; restricting to the ball (Thm 3) breaks that, and so does a manifold
        # that does not vouch for homogeneity (Manifold.homogeneous)
        return not self.restrict and self.manifold.homogeneous

    def sensitivity(self, n: int) -> float:
        """The Fréchet mean's sensitivity for ``n`` records, widened by ``grad_tol``."""
        return self.domain.laplace_sensitivity(n, self.grad_tol)

    def check_law_exists(self, sigma: float) -> None:
        # the whole-space law needs sigma below the manifold's edge (SPD: 2/C); the
        # restricted one lives on a compact ball
        if not self.restrict:
            self.manifold.check_laplace_normalizable(sigma)

    def check_precision(self, sensitivity: float, sigma: float) -> None:
        """As the base, and the rounding of gradients in the ball must stay below
        ``grad_tol``: the Fréchet mean is refused unless its computed
        ``|grad F| <= grad_tol`` (on H^2 at the origin, the default ``1e-9 r``
        allows radii up to about 5.8)."""
        self.domain.check_precision(
            sensitivity,
            sigma,
            f"{self.name} on {self.manifold}",
            gradient_floor=("grad_tol (the Fréchet mean's tolerance)", self.grad_tol),
        )

    def footpoint(self, data):
        """Checked data and their Fréchet mean; refuses an unconverged or outside mean."""
        data = self.domain.check(data)
        return data, self._mean_of_checked(data)

    def _mean_of_checked(self, data):
        return converged_mean(self.manifold, self.domain, data, self.grad_tol)

    def logp(self, x, data):
        """Unnormalized log-density (NumPy) w.r.t. volume at points ``x``."""
        data, eta = self.footpoint(data)
        x = self.manifold.validate(x)
        lp = -self.manifold.dist(eta, x) / self.sigma(len(data))
        if self.restrict:
            lp = np.where(self.domain.distances(x) <= self.domain.radius, lp, -np.inf)
        return lp

    def mcmc_inputs(self, data):
        """The footpoint (the mode, the chart's origin) and the density's input, the
        footpoint, for checked data."""
        eta = self._mean_of_checked(data)
        return eta, {"footpoint": eta}

    def exact_draws(self, data, sigma, size, rng):
        """Exact draws for checked data (``ExactDraws``): used by ``release``."""
        eta = self._mean_of_checked(data)
        domain = self.domain if self.restrict else None
        return exact.sample_laplace(self.manifold, eta, sigma, size, rng, domain=domain)

    def exact_draws_stack(self, data, n, sigma, rng):
        """Every data set's footpoint at once (``pymc_manidp.stats.frechet.frechet_means``,
        the same tolerances and refusals as :meth:`exact_draws`), then
        ``pymc_manidp.laws.exact.sample_laplace_stack``."""
        M = self.manifold
        stack = np.asarray(data).reshape((-1, n, *M.point_shape))
        res = frechet_means(M, stack, tol=1e-10, atol=self.grad_tol, warn=False)
        bad = ~(res.converged & (res.grad_norms <= self.grad_tol))
        if bad.any():
            j = int(np.argmax(bad))
            raise ValueError(
                f"the Fréchet mean of {int(bad.sum())} data set(s) (first: row {j} of the "
                f"data sets of {n} records) did not converge to |grad F| <= "
                f"{self.grad_tol:.3g} (got {float(res.grad_norms[j]):.3g}): nothing is released"
            )
        if not np.all(self.domain.distances(res.means) <= self.domain.radius):
            raise ValueError("a computed Fréchet mean lies outside the public ball")
        domain = self.domain if self.restrict else None
        points, used = exact.sample_laplace_stack(M, res.means, sigma, rng, domain=domain)
        return points, [{"proposals": int(u), "acceptance_rate": 1.0 / u} for u in used]
