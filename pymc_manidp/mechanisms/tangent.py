r"""Tangent mechanisms at a public point (issue 39): Gaussian and K-norm noise on
the Fréchet mean's coordinates in ``T_pM``.

The release is

.. math:: u = E_p^\top \mathrm{Log}_p(\bar x) + Z \in \mathbb R^d,
          \qquad y = \mathrm{Exp}_p(E_p u),

``E_p = manifold.tangent_basis(p)`` an orthonormal frame at the public point ``p``
(the public center ``m0`` by default). ``u`` is an ordinary Euclidean release of a
statistic with ℓ2 sensitivity ``Delta_T <= L Delta`` (``Delta`` the Fréchet mean's
geodesic sensitivity widened by the solver's tolerance, ``L`` the Lipschitz constant of
``Log_p`` on ``B_R(p)``, ``R = r + rho(p, m0)``: ``pymc_manidp.stats.tangent``); ``y``
is post-processing. ``Z`` is

- ``N(0, sigma^2 I)`` with σ from the analytic Gaussian mechanism (Balle & Wang
  2018; ``pymc_manidp.stats.gaussian``): (ε, δ)-DP exactly, and μ-GDP with
  ``mu = Delta_T/sigma`` (:class:`TangentGaussianMechanism`);
- the K-norm law ``∝ exp(-|z|/sigma)``, ``sigma = Delta_T/eps``: pure ε-DP, drawn
  exactly as a ``Gamma(d, sigma)`` radius times a uniform direction
  (:class:`TangentLaplaceMechanism`).

The proofs and premises are in docs/tangent.md. The record keeps ``u`` and ``p``
(``Release.tangent``): on curved spaces ``Exp_p`` wraps, so ``y`` alone has a wrapped
likelihood.
"""

from __future__ import annotations

import numpy as np

from pymc_manidp._validation import check_nonnegative_real, check_real_data
from pymc_manidp.laws.exact import ExactDraws
from pymc_manidp.mechanisms.base import Mechanism, converged_mean
from pymc_manidp.privacy.composition import split_epsilon
from pymc_manidp.stats.gaussian import check_gaussian_delta, gaussian_mu, gaussian_sigma
from pymc_manidp.stats.tangent import log_lipschitz, tangent_reach, tangent_reach_limit

__all__ = [
    "GAUSSIAN_NOTE",
    "TWO_STAGE_NOTE",
    "TangentGaussianMechanism",
    "TangentLaplaceMechanism",
    "TwoStageTangentMechanism",
]

GAUSSIAN_NOTE = (
    "(epsilon, delta)-DP by the analytic Gaussian mechanism (Balle & Wang 2018, Thm 8) "
    "and mu-GDP with mu = sensitivity/sigma (Dong, Roth & Su 2022); Gaussian noise drawn "
    "exactly, without MCMC"
)


class _TangentMechanism(Mechanism):
    """What both tangent mechanisms share: the point, the frame, Δ_T and the draw."""

    restricted = False  # the law lives on T_pM; y = Exp_p(u) may leave the ball
    noise = ""

    def __init__(self, manifold, *, epsilon, center, radius, tangent_point=None, grad_tol=None):
        super().__init__(manifold, epsilon=epsilon, center=center, radius=radius)
        M = self.manifold
        self.grad_tol = (
            1e-9 * self.domain.radius
            if grad_tol is None
            else check_nonnegative_real(grad_tol, "grad_tol")
        )
        if tangent_point is None:
            p = self.domain.center
        else:
            # its dtype first: a float conversion would take bools as 0/1 and raise
            # OverflowError on an int past 1.8e308
            raw = np.asarray(check_real_data(M.coerce(tangent_point), "tangent_point"), dtype=float)
            if raw.shape != tuple(M.point_shape):
                raise ValueError(
                    f"tangent_point must be one point of shape {tuple(M.point_shape)}, got "
                    f"an array of shape {raw.shape}: pass a public point (e.g. an earlier "
                    "release's value) or None for the center"
                )
            p = M.validate(raw)
        p = np.array(p, dtype=float, copy=True)
        p.flags.writeable = False
        self.tangent_point = p
        #: ``R = r + rho(p, m0)``: the ball around ``p`` that holds every admissible mean
        self.reach = tangent_reach(M, self.domain.center, self.domain.radius, p)
        limit = tangent_reach_limit(M)
        if not self.reach < limit:  # public: refused here, before any charge
            r = self.domain.radius
            raise ValueError(
                f"tangent_point is {self.reach - r:.6g} from the center: with radius {r:.6g} "
                f"the ball B_R(p) that holds the means reaches R = {self.reach:.6g}, at or "
                f"beyond {limit:.6g} = min(injectivity radius, pi/(2 sqrt(kappa_max))) of "
                f"{M}, where Log_p has no Lipschitz bound (docs/tangent.md, Lemma 2). Use a "
                f"tangent point closer to the center (rho(p, center) < {limit - r:.6g}), or "
                "the center itself (tangent_point=None)"
            )
        #: ``L``: the Lipschitz constant of ``Log_p`` on ``B_R(p)`` (refused if none)
        self.lipschitz = log_lipschitz(M, self.reach)
        self.frame = M.tangent_basis(p)

    def sensitivity(self, n: int) -> float:
        """``Delta_T = L (Delta + 2 grad_tol/H)``: the tangent coordinates' ℓ2
        sensitivity for ``n`` records (docs/tangent.md)."""
        return self.lipschitz * self.domain.laplace_sensitivity(n, self.grad_tol)

    def check_precision(self, sensitivity: float, sigma: float) -> None:
        """As the Laplace: the rounding of gradients in the ball below ``grad_tol``."""
        self.domain.check_precision(
            sensitivity,
            sigma,
            f"{self.name} on {self.manifold}",
            gradient_floor=("grad_tol (the Fréchet mean's tolerance)", self.grad_tol),
        )

    def noise_bound(self, sigma: float) -> float:  # pragma: no cover - abstract
        """A length that ``|Z|`` exceeds with probability below ``e^-70``."""
        raise NotImplementedError

    def check_exact_sigma(self, sigma: float) -> None:
        """Refuse, before any charge, a σ at which ``y = Exp_p(u)`` would not be
        representable (the hyperboloid and SPD overflow near distance 710).

        ``|u| <= R + |Z|`` and :meth:`noise_bound` bounds ``|Z|`` but with probability
        below ``e^-70``; ``Exp_p`` at that length along each axis of the frame, both
        ways, must give points the manifold validates. On compact spaces it always
        does.
        """
        M, p = self.manifold, self.tangent_point
        length = self.exp_reach(sigma)
        axes = np.concatenate([np.eye(M.dim), -np.eye(M.dim)]) * length
        try:
            with np.errstate(over="ignore", invalid="ignore"):
                points = M.exp_coords(p, axes)
            M.validate(points)
        except (ValueError, FloatingPointError, OverflowError):
            raise ValueError(
                f"sigma = {sigma:.6g} is too large for {M} in floating point: the "
                f"released point Exp_p(u) reaches {length:.6g} from the tangent point "
                "(the ball and the noise's e^-70 tail), where its coordinates overflow. "
                "Use a larger epsilon or more records (sigma is proportional to "
                "1/(n epsilon))"
            ) from None

    def exp_reach(self, sigma: float) -> float:
        """How far from the tangent point a released point may be, but with
        probability below ``e^-70``: ``R + noise_bound(sigma)``."""
        return self.reach + self.noise_bound(sigma)

    def mean_coords(self, data):
        """``E_p^T Log_p(x_bar)`` of checked data (private: the released statistic)."""
        mean = converged_mean(self.manifold, self.domain, data, self.grad_tol)
        return np.asarray(self.manifold.log_coords(self.tangent_point, mean), dtype=float)

    def noise_draws(self, sigma: float, size: int, rng) -> np.ndarray:  # pragma: no cover
        """``size`` draws of Z, shape ``(size, dim)``."""
        raise NotImplementedError

    def exact_draws(self, data, sigma, size, rng):
        """``size`` exact draws for checked data; ``info["tangent_coords"]`` holds u
        ``(size, dim)`` (public, moved into the Release by :meth:`_record`)."""
        u = self.mean_coords(data) + self.noise_draws(sigma, size, rng)
        points = self.manifold.exp_coords(self.tangent_point, u)
        return ExactDraws(points=np.asarray(points), proposals=size, info={"tangent_coords": u})

    def exact_draws_stack(self, data, n, sigma, rng):
        points, infos = super().exact_draws_stack(data, n, sigma, rng)
        for info in infos:  # one u per data set, not the (1, dim) stack of one draw
            info["tangent_coords"] = info["tangent_coords"][0]
        return points, infos

    def mu(self, n: int) -> float | None:
        """μ-GDP of a release of ``n`` records (Gaussian only; None for K-norm)."""
        return None

    def _record(self, value, cal, sampler, notes=(), validated=False, **fields):
        info = dict(fields.pop("sampler_info", None) or {})
        coords = np.asarray(info.pop("tangent_coords")).reshape(-1)
        tangent = {
            "point": self.tangent_point,
            "coords": coords,
            "noise": self.noise,
            "mu": self.mu(cal.n),
        }
        return super()._record(
            value, cal, sampler, notes, validated, sampler_info=info, tangent=tangent,
            **self._record_privacy(), **fields,
        )  # fmt: skip

    def _record_privacy(self) -> dict:
        """Fields of the record that say which guarantee the draw has (pure ε: none)."""
        return {}


class TangentLaplaceMechanism(_TangentMechanism):
    r"""Release a private Fréchet mean with K-norm noise in ``T_pM`` (pure ε-DP).

    ``u = E_p^T Log_p(x_bar) + Z`` with density of Z ``∝ exp(-|z|/sigma)`` on
    ``R^d``, ``sigma = Delta_T/eps`` (Hardt & Talwar 2010: the density ratio of
    neighbours is at most ``exp(|g - g'|/sigma) <= e^eps``), drawn exactly:
    ``|Z| ~ Gamma(d, sigma)``, direction uniform. Published as ``u``
    (``Release.tangent``) and ``y = Exp_p(u)`` (``Release.value``).

    Parameters
    ----------
    manifold : Manifold
        A manifold instance, e.g. ``pmd.Sphere(dim=2)``.
    epsilon : float
        Privacy budget ``> 0``.
    center : array_like, shape ``point_shape``
        The public ball's center ``m0``.
    radius : float
        The public ball's radius ``r`` (``0 < r < r*``).
    tangent_point : array_like, optional
        The public point ``p`` (default ``center``): fixed without the data, or an
        earlier release. ``R = r + rho(p, m0)`` must be below ``min(inj,
        pi/(2 sqrt(kappa_max)))``, refused otherwise (before any charge).
    grad_tol : float, optional
        The Fréchet mean's tolerance on ``|grad F|`` (default ``1e-9 r``); Δ is widened
        by ``2 grad_tol/H``.

    Examples
    --------
    >>> import numpy as np
    >>> import pymc_manidp as pmd
    >>> mech = pmd.TangentLaplaceMechanism(pmd.Hyperbolic(dim=2), epsilon=1.0,
    ...                                    center=[1.0, 0, 0], radius=1.5)
    >>> mech.lipschitz, round(mech.sigma(100), 6)  # L = 1, sigma = 2r/(n eps)
    (1.0, 0.03)
    """

    name = "tangent Laplace"
    noise = "k-norm"
    # the K-norm law is a translate of one density on R^d: its normalizer is free of
    # the statistic, so sigma = Delta_T/eps
    footpoint_free_normalizer = True

    def noise_bound(self, sigma):
        # Chernoff: P(Gamma(d, 1) > x) <= e^-x (e x/d)^d, below e^-70 at x = 3d + 80
        return sigma * (3 * self.manifold.dim + 80)

    def noise_draws(self, sigma, size, rng):
        d = self.manifold.dim
        g = rng.standard_normal((size, d))
        norms = np.linalg.norm(g, axis=1, keepdims=True)
        return rng.gamma(d, sigma, size=(size, 1)) * g / norms


class TangentGaussianMechanism(_TangentMechanism):
    r"""Release a private Fréchet mean with Gaussian noise in ``T_pM`` ((ε, δ)-DP).

    ``u = E_p^T Log_p(x_bar) + Z``, ``Z ~ N(0, sigma^2 I_d)``, σ the smallest for
    which the analytic Gaussian mechanism (Balle & Wang 2018, Thm 8) is (ε, δ)-DP at
    sensitivity ``Delta_T``; the release is also μ-GDP with ``mu = Delta_T/sigma``
    (``Release.tangent["mu"]``, for exact composition). Published as ``u`` and
    ``y = Exp_p(u)``.

    Parameters
    ----------
    manifold : Manifold
        A manifold instance.
    epsilon : float
        ``eps > 0``.
    delta : float
        ``1e-300 <= delta < 1``.
    center : array_like, shape ``point_shape``
        The public ball's center ``m0``.
    radius : float
        The public ball's radius ``r`` (``0 < r < r*``).
    tangent_point : array_like, optional
        The public point ``p`` (default ``center``), as in
        :class:`TangentLaplaceMechanism`.
    grad_tol : float, optional
        The Fréchet mean's tolerance on ``|grad F|`` (default ``1e-9 r``).

    Examples
    --------
    >>> import numpy as np
    >>> import pymc_manidp as pmd
    >>> mech = pmd.TangentGaussianMechanism(pmd.Sphere(dim=2), epsilon=1.0, delta=1e-6,
    ...                                     center=[0, 0, 1.0], radius=np.pi / 8)
    >>> round(mech.lipschitz, 5), round(mech.mu(100), 4)  # (pi/8)/sin(pi/8); mu(1, 1e-6)
    (1.02617, 0.2367)
    """

    name = "tangent Gaussian"
    noise = "gaussian"

    def __init__(
        self,
        manifold,
        *,
        epsilon,
        delta,
        center,
        radius,
        tangent_point=None,
        grad_tol=None,
    ):
        self.delta = check_gaussian_delta(delta)
        super().__init__(
            manifold,
            epsilon=epsilon,
            center=center,
            radius=radius,
            tangent_point=tangent_point,
            grad_tol=grad_tol,
        )

    def _gaussian(self, n):
        return gaussian_sigma(self.sensitivity(n), self.epsilon, self.delta)

    def sigma(self, n: int) -> float:
        """The analytic Gaussian's σ for ``n`` records (``Delta_T/mu(eps, delta)``)."""
        return self._checked_sigma(self._gaussian(n)[0])

    def mu(self, n: int) -> float:
        """μ-GDP of a release of ``n`` records: ``Delta_T/sigma``."""
        return self._gaussian(n)[1]

    def noise_bound(self, sigma):
        # Gaussian concentration of the norm (1-Lipschitz): P(|Z| > sigma(sqrt d + t))
        # <= e^{-t^2/2}, below e^-70 at t = 12
        return sigma * (np.sqrt(self.manifold.dim) + 12)

    def noise_draws(self, sigma, size, rng):
        return sigma * rng.standard_normal((size, self.manifold.dim))

    def _record_privacy(self) -> dict:
        return {"proved_delta": self.delta, "privacy_note": GAUSSIAN_NOTE}

    @property
    def planned_charge(self) -> tuple[float, float, float]:
        """``(epsilon, delta, mu)``: the Gaussian charge of one release, as a plan
        declares it (``PrivacyBudget(..., plan=[mech.planned_charge] * k)``).

        ``mu = gaussian_mu(epsilon, delta)`` does not depend on ``n``: σ is calibrated
        as ``Delta_T/mu`` (rounded up), so every release is μ-GDP at this μ or below.
        """
        return (self.epsilon, self.delta, gaussian_mu(self.epsilon, self.delta))

    def _charge_terms(self, budget, delta, is_mcmc, estimate_delta, sampler):
        # the release's own delta is proved (Balle & Wang's condition holds exactly):
        # charged under the budget's rule as (epsilon, delta), with its mu
        budget, _basis, _charged = super()._charge_terms(
            budget, delta, is_mcmc, estimate_delta, sampler
        )
        if budget is None:
            return None, None, None
        return budget, "proved", self.delta


#: the default share of ε spent on the coarse point: docs/tangent.md ("Two-stage
#: release") chose it before any data, from the error bounds and a simulation on H^2
DEFAULT_SPLIT = 0.2

TWO_STAGE_NOTE = (
    "two stages, composed by basic composition (Dwork & Roth 2014, Thm 3.16; valid for "
    "the adaptive second stage): a pure epsilon_1-DP K-norm tangent release at the "
    "center gives the public point p; then the (epsilon_2, delta)-DP analytic Gaussian "
    "(Balle & Wang 2018, Thm 8) in T_pM; epsilon_1 + epsilon_2 <= epsilon; both drawn "
    "exactly, without MCMC"
)


class TwoStageTangentMechanism(TangentGaussianMechanism):
    r"""Release a private Fréchet mean in two stages, a coarse point then a tangent Gaussian.

    (ε, δ)-DP; docs/tangent.md, "Two-stage release".

    Stage 1 spends ``epsilon_1 = split * epsilon`` on a :class:`TangentLaplaceMechanism`
    release at the center ``m0``: a pure ε₁-DP point ``p``, public once drawn. Stage
    2 spends the rest, ``epsilon_2``, with δ, on the tangent Gaussian at ``p``:
    ``u = E_p^T Log_p(x_bar) + Z``, ``y = Exp_p(E_p u)``. One call, one record (``p``
    is ``Release.tangent["point"]``, ``u`` its ``"coords"``), one charge of
    ``(epsilon, delta)`` (basic composition of the two stages, which holds for the
    second chosen after the first).

    Only where the sectional curvature is ``<= 0`` (Hadamard spaces: hyperbolic,
    SPD, Euclidean): there ``Log_p`` is 1-Lipschitz for every ``p`` (Lemma 1), so σ₂
    is public before the data, and the released point's error is at most
    ``S(sqrt(K) rho(p, x_bar)) |Z|`` with ``S(t) = sinh t/t``, so a ``p`` nearer
    ``x_bar`` than ``m0`` pays less curvature. Where the curvature is positive the
    error is already at most ``|Z|`` at ``m0`` and any other ``p`` raises the
    Lipschitz constant: refused, use :class:`TangentGaussianMechanism`.

    Parameters
    ----------
    manifold : Manifold
        A manifold of sectional curvature ``<= 0``.
    epsilon : float
        The total ``eps > 0`` (charged).
    delta : float
        ``1e-300 <= delta < 1`` (stage 2's δ).
    center : array_like, shape ``point_shape``
        The public ball's center ``m0``.
    radius : float
        The public ball's radius ``r`` (``0 < r < r*``).
    split : float, default 0.2
        The share of ε spent on stage 1, in ``(0, 1)``, chosen before seeing the data
        (docs/tangent.md says how 0.2 was chosen).
    grad_tol : float, optional
        The Fréchet mean's tolerance on ``|grad F|`` (default ``1e-9 r``).

    Examples
    --------
    >>> import numpy as np
    >>> import pymc_manidp as pmd
    >>> mech = pmd.TwoStageTangentMechanism(pmd.Hyperbolic(dim=2), epsilon=1.0,
    ...                                     delta=1e-6, center=[1.0, 0, 0], radius=1.5)
    >>> mech.epsilon_1, mech.epsilon_2
    (0.2, 0.8)
    """

    name = "two-stage tangent Gaussian"

    def __init__(
        self, manifold, *, epsilon, delta, center, radius, split=DEFAULT_SPLIT, grad_tol=None
    ):
        super().__init__(
            manifold, epsilon=epsilon, delta=delta, center=center, radius=radius, grad_tol=grad_tol
        )
        M = self.manifold
        kappa = float(M.curvature_bounds[1])
        if kappa > 0:
            raise ValueError(
                f"{M} has positive curvature (up to {kappa:g}): there the tangent "
                "Gaussian at the center already has error at most |Z| (docs/tangent.md, "
                "(E3)) and a tangent point off the center only raises its Lipschitz "
                "constant, so two stages cannot help. Use pmd.TangentGaussianMechanism "
                "(tangent point: the center)"
            )
        self.split, eps_1, eps_2 = split_epsilon(
            self.epsilon,
            split,
            first_stage="the coarse point",
            hint="split=0.2 (docs/tangent.md, 'Two-stage release')",
        )
        self.epsilon_1, self.epsilon_2 = eps_1, eps_2
        self._mu_2 = gaussian_mu(eps_2, self.delta)
        self.coarse = TangentLaplaceMechanism(
            M, epsilon=eps_1, center=self.domain.center, radius=self.domain.radius,
            grad_tol=self.grad_tol,
        )  # fmt: skip

    def _gaussian(self, n):
        return gaussian_sigma(self.sensitivity(n), self.epsilon_2, self.delta)

    def public_calibration(self, data, sampler="exact"):
        cal = super().public_calibration(data, sampler)
        self.coarse.public_calibration(data, sampler)  # stage 1's sigma: refused here too
        return cal

    def exp_reach(self, sigma):
        # on a Hadamard space |Log_m0 p| <= r + |Z_1| and |u| <= rho(p, x_bar) + |Z_2|
        # <= 2r + |Z_1| + |Z_2|, so the point is within 3r + 2|Z_1| + |Z_2| of m0; stage
        # 1's sigma is Delta_T/eps_1 = sigma mu_2/eps_1 (rounded up here)
        sigma_1 = sigma * self._mu_2 / self.epsilon_1 * (1 + 1e-12)
        return (
            3 * self.domain.radius + 2 * self.coarse.noise_bound(sigma_1) + self.noise_bound(sigma)
        )

    @property
    def planned_charge(self) -> tuple[float, float]:
        """``(epsilon, delta)``: one (ε, δ) charge (stage 1 is pure ε, so the whole is
        not μ-GDP)."""
        return (self.epsilon, self.delta)

    def mu(self, n: int) -> None:
        """None: the release as a whole is (ε, δ)-DP, not μ-GDP (stage 1 is pure ε)."""
        return None

    def _record_privacy(self) -> dict:
        return {"proved_delta": self.delta, "privacy_note": TWO_STAGE_NOTE}

    def exact_draws(self, data, sigma, size, rng):
        """``size`` exact two-stage draws; ``info["tangent_coords"]`` holds u and
        ``info["tangent_point"]`` the stage-1 point p of each (public)."""
        M, m0 = self.manifold, self.domain.center
        mean = converged_mean(M, self.domain, data, self.grad_tol)
        sigma_1 = self.coarse.sigma(len(data))
        u1 = np.asarray(M.log_coords(m0, mean), dtype=float) + self.coarse.noise_draws(
            sigma_1, size, rng
        )
        ps = np.asarray(M.exp_coords(m0, u1))
        points, us = [], []
        for p in ps:
            u = np.asarray(M.log_coords(p, mean), dtype=float) + self.noise_draws(sigma, 1, rng)[0]
            points.append(M.exp_coords(p, u))
            us.append(u)
        return ExactDraws(
            points=np.asarray(points),
            proposals=size,
            info={"tangent_coords": np.asarray(us), "tangent_point": ps},
        )

    def exact_draws_stack(self, data, n, sigma, rng):
        points, infos = super().exact_draws_stack(data, n, sigma, rng)
        for info in infos:
            info["tangent_point"] = info["tangent_point"][0]
        return points, infos

    def _record(self, value, cal, sampler, notes=(), validated=False, **fields):
        info = dict(fields.pop("sampler_info", None) or {})
        p = np.asarray(info.pop("tangent_point")).reshape(self.manifold.point_shape)
        coords = np.asarray(info.pop("tangent_coords")).reshape(-1)
        tangent = {"point": p, "coords": coords, "noise": self.noise, "mu": None}
        return Mechanism._record(
            self, value, cal, sampler, notes, validated, sampler_info=info, tangent=tangent,
            **self._record_privacy(), **fields,
        )  # fmt: skip
