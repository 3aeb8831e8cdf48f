r"""Sequential KNG for geodesic regression: the footpoint first, then the slope on its fibre.

Stage 1 spends ``epsilon_1 = split * epsilon`` on the mean's KNG
(:class:`~pymc_manidp.KNGMechanism`) of the responses: a footpoint :math:`\tilde p` in
the public ball :math:`B_r(m)`, public once drawn. Stage 2 spends
``epsilon_2 = epsilon - epsilon_1`` on KNG of the slope alone on the fibre
:math:`T_{\tilde p}M`,

.. math:: f(v \mid D, \tilde p) \propto \exp\{-\|\nabla_vE(\tilde p, v)\|/\sigma_2\}
          \quad\text{on } \{\|v\| \le V\},\qquad \sigma_2 = 2\Delta_v/\varepsilon_2,

with :math:`\Delta_v` the slope gradient's sensitivity at footpoints in :math:`B_r(m)`
(docs/regression.md, "The sequential release": Theorem 2 with :math:`R = r`). One call,
one record, one charge of ``epsilon`` (basic composition, which holds for the second
stage chosen after the first). The split is a constructor argument, fixed before any
data are seen.

The footpoint stage estimates the Fréchet mean of the responses, which is the
regression's footpoint when the covariates are centred (their mean is 0) and the design
is symmetric; centre the (public) covariates by their mean before releasing, or the
footpoint is that of the mean covariate.
"""

from __future__ import annotations

import math

import numpy as np

from pymc_manidp.laws.regression_fibre import sample_fibre_kng_flat, sample_fibre_kng_uniform
from pymc_manidp.laws.regression_floor import (
    fibre_flat_log_acceptance,
    regression_gradient_bounds,
)
from pymc_manidp.mechanisms.kng import KNGMechanism
from pymc_manidp.mechanisms.regression import RegressionKNGMechanism
from pymc_manidp.privacy.composition import split_epsilon
from pymc_manidp.stats.regression import regression_gradient, regression_sensitivity

__all__ = ["DEFAULT_SPLIT", "SequentialRegressionKNGMechanism"]

#: the share of epsilon spent on the footpoint, chosen before any data (docs/regression.md)
DEFAULT_SPLIT = 0.5


class SequentialRegressionKNGMechanism(RegressionKNGMechanism):
    r"""Release a private geodesic regression ``(p, v)`` in two KNG stages.

    ε-DP (basic composition of ``epsilon_1`` and ``epsilon_2``); docs/regression.md,
    "The sequential release".

    Parameters
    ----------
    manifold : Manifold
        One of the shipped spaces (``Euclidean``, ``Sphere``, ``Hyperbolic``, ``SPD``,
        ``Rotations``, ``KendallShape``).
    epsilon : float
        The total ``eps > 0`` (charged once).
    center : array_like, shape ``point_shape``
        The public ball's center ``m``.
    radius : float
        The public ball's radius ``r`` (``0 < r < r*``); the responses lie in
        ``B_r(m)``, and so does the stage-1 footpoint.
    covariate_bound : float
        ``X >= |x_i|`` (public; checked before any charge).
    slope_bound : float
        ``V``: the slope's law lives on ``|v| <= V``.
    split : float, default 0.5
        The share of ε spent on the footpoint, in ``(0, 1)``, chosen before seeing the
        data.
    max_attempts : int
        Proposals per draw of each stage's exact sampler before it gives up.

    Notes
    -----
    The released value is ``(2, *point_shape)``, as for
    :class:`~pymc_manidp.RegressionKNGMechanism`. The record's Δ and σ are stage 2's
    (``Delta_v``, ``sigma_2``); a published note gives stage 1's.

    Examples
    --------
    >>> import numpy as np
    >>> import pymc_manidp as pmd
    >>> mech = pmd.SequentialRegressionKNGMechanism(pmd.Sphere(dim=2), epsilon=2.0,
    ...     center=[1.0, 0, 0], radius=0.5, covariate_bound=1.0, slope_bound=0.5)
    >>> mech.epsilon_1, mech.epsilon_2
    (1.0, 1.0)
    >>> mech.largest_n_epsilon() > 20  # the proved failure bound's reach: n = 10 here
    True
    >>> x = np.linspace(-1, 1, 10)
    >>> y = pmd.Sphere(dim=2).exp(np.array([1.0, 0, 0]), x[:, None] * [0, 0.3, 0])
    >>> rel = mech.release(x, y, random_seed=0)
    >>> rel.value.shape, rel.epsilon, rel.delta
    ((2, 3), 2.0, 0.0)
    """

    name = "sequential KNG-regression"
    _failure_what = "exact slope sampler (stage 2)"
    # its flat fibre sampler has no uniform stage: the K-norm alone, under the acceptance
    # floor proved from the covariates (_flat_log_acceptance)
    _flat_switch = False

    def __init__(
        self,
        manifold,
        *,
        epsilon,
        center,
        radius,
        covariate_bound,
        slope_bound,
        split=DEFAULT_SPLIT,
        max_attempts=10_000,
    ):
        # the split is checked before anything else (a public argument)
        split = split_epsilon(
            1.0,
            split,
            first_stage="the footpoint",
            hint="split=0.5 (docs/regression.md, 'The sequential release')",
        )[0]
        # the stage-1 footpoint lies in B_r(m): the footpoint ball of Theorem 2 is the
        # data ball (none on flat spaces, where no bound needs it)
        probe = super().__init__
        try:
            probe(
                manifold, epsilon=epsilon, center=center, radius=radius,
                covariate_bound=covariate_bound, slope_bound=slope_bound,
                footpoint_radius=None, max_attempts=max_attempts,
            )  # fmt: skip
        except ValueError as err:
            if "footpoint_radius is required" not in str(err):
                raise
            probe(
                manifold, epsilon=epsilon, center=center, radius=radius,
                covariate_bound=covariate_bound, slope_bound=slope_bound,
                footpoint_radius=radius, max_attempts=max_attempts,
            )  # fmt: skip
        self.split, eps_1, eps_2 = split_epsilon(
            self.epsilon,
            split,
            first_stage="the footpoint",
            hint="split=0.5 (docs/regression.md, 'The sequential release')",
        )
        self.epsilon_1, self.epsilon_2 = eps_1, eps_2
        self.footpoint_mechanism = KNGMechanism(
            self.manifold, epsilon=eps_1, center=self.domain.center, radius=self.domain.radius
        )
        if "exact" not in self.footpoint_mechanism.samplers:
            raise ValueError(
                f"the mean's KNG has no exact sampler on {self.manifold}: the sequential "
                "release needs one; use pmd.RegressionKNGMechanism"
            )

    # --- the privacy map ----------------------------------------------------------------
    @property
    def epsilon_per_noise(self) -> float:
        """``epsilon_2``: σ (the recorded one) is stage 2's."""
        return self.epsilon_2

    def sensitivities(self, n: int) -> tuple[float, float]:
        """``(Delta_1, Delta_v)``: the mean KNG's gradient sensitivity (stage 1) and the
        slope gradient's at footpoints in ``B_r(m)`` (stage 2)."""
        _, dv = regression_sensitivity(
            self.manifold,
            n,
            radius=self.domain.radius,
            covariate_bound=self.covariate_bound,
            slope_bound=self.slope_bound,
            footpoint_radius=self.footpoint_radius,
        )
        return self.footpoint_mechanism.sensitivity(n), dv

    def sensitivity(self, n: int) -> float:
        """Stage 2's ``Delta_v`` (the record's Δ)."""
        return self.sensitivities(n)[1]

    def gradient_bound(self) -> float:
        """``G_v = T X B`` (``T = 2 r + X V``: the footpoint lies in ``B_r(m)``): a
        public bound of ``|grad_v E|`` on the slope ball of every fibre over the ball,
        for every data set in it. Stage 2's sampler accepts by it
        (docs/regression.md, "The exact samplers' proved failure bound")."""
        return regression_gradient_bounds(
            self.manifold, radius=self.domain.radius, covariate_bound=self.covariate_bound,
            slope_bound=self.slope_bound, footpoint_radius=self.footpoint_radius,
        )[1]  # fmt: skip

    def _flat_log_acceptance(self, x, sigma) -> float:
        """``log`` of the proved least acceptance of the flat fibre sampler (stage 2 on
        ``Euclidean``), public from the covariates
        (:func:`~pymc_manidp.laws.regression_floor.fibre_flat_log_acceptance`)."""
        return fibre_flat_log_acceptance(
            x, radius=self.domain.radius, slope_bound=self.slope_bound, sigma=sigma,
            dim=self.manifold.dim,
        )  # fmt: skip

    def logp(self, theta, x, y) -> float:
        """Not offered: the law is a product of two KNG laws, the second normalized on
        the fibre of the first's draw (a normalizer that depends on the data)."""
        raise NotImplementedError(
            f"{self.name} has no joint density in closed form: its law is stage 1's KNG "
            "times stage 2's normalized conditional (docs/regression.md)"
        )

    # --- the draw -----------------------------------------------------------------------
    def _public(self, x, y):
        x, cal = super()._public(x, y)
        cal_1 = self.footpoint_mechanism.calibrate(cal.n)
        self.footpoint_mechanism.check_exact_sigma(cal_1.sigma)
        return x, cal

    def exact_draws_xy(self, x, y, sigma, size, rng):
        """``size`` exact draws ``(size, 2, *point_shape)`` for checked ``x``, ``y``:
        stage 1's footpoint, then stage 2's slope on its fibre."""
        M, V = self.manifold, self.slope_bound
        n = len(x)
        sigma_1 = self.footpoint_mechanism.calibrate(n).sigma
        first = self.footpoint_mechanism.exact_draws(y, sigma_1, size, rng)
        x2 = float(np.mean(x * x))
        points, proposals = [], [first.proposals, 0]
        for p in np.asarray(first.points).reshape(size, *M.point_shape):
            p = M.validate(p[None])[0]
            if self.flat:
                # grad_v E(p, v) = mean(x^2) (v - v*): v* from the gradient at v = 0
                g0 = regression_gradient(M, p, np.zeros_like(p), x, y)[2]
                star = M.to_coords(p, -g0 / x2)
                out = sample_fibre_kng_flat(
                    star, x2, sigma, V, 1, rng, max_attempts=self.max_attempts
                )
            else:

                def norm(c, p=p):
                    v = M.from_coords(p, c)
                    gv = regression_gradient(M, p, v, x, y)[2]
                    return math.sqrt(max(float(M.inner(p, gv, gv)), 0.0))

                out = sample_fibre_kng_uniform(
                    M.dim, norm, sigma, V, 1, rng, max_attempts=self.max_attempts
                )
            proposals[1] += out.proposals
            points.append(np.stack([p, M.to_tangent(p, M.from_coords(p, out.points[0]))]))
        info = {
            "proposals": sum(proposals),
            "footpoint_proposals": proposals[0],
            "slope_proposals": proposals[1],
        }
        return np.stack(points), info

    def _record(self, value, cal, sampler, notes=(), validated=False, **fields):
        d1, _ = self.sensitivities(cal.n)
        sigma_1 = self.footpoint_mechanism.calibrate(cal.n).sigma
        note = (
            f"sequential release: footpoint by the mean's KNG with epsilon_1 = "
            f"{self.epsilon_1!r} (Delta_1 = {d1!r}, sigma_1 = {sigma_1!r}), then the slope "
            f"by KNG on its tangent space with epsilon_2 = {self.epsilon_2!r} (the recorded "
            "Delta and sigma); charged epsilon_1 + epsilon_2 (basic composition)"
        )
        return super()._record(value, cal, sampler, (*notes, note), validated, **fields)
