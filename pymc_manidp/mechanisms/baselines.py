r"""Euclidean baselines the papers compare against, each an honest pure ε-DP mechanism.

- :class:`EuclideanLaplace`: the K-norm (ℓ2) Laplace mechanism in the ambient space
  (:math:`\mathbb R^{d+1}` for the sphere, ``vech`` coordinates of symmetric matrices
  for SPD) applied to the *ambient mean* of the data; 2021 §5, 2022 §4.1–4.2, noise
  sampler of the 2021 supplement §1.4.
- :class:`ProjectedLaplace`: the same on the sphere, normalized back onto the sphere
  (2022 §4.1, "projected Euclidean Laplace"; post-processing).
- :class:`LandmarkLaplace`: planar shapes, a planar Laplace on each landmark of the
  mean configuration with the budget split equally across landmarks, with or without
  rotational alignment to the public reference shape (2022 §4.3).

Calibration (see ``docs/baselines.md``). The data lie in the public geodesic ball
``B_r(m0)``, hence in the ambient ball of radius ``r_E`` around ``m0`` (2021
supplement §1.2.2, §1.3.2), so replacing one record moves the ambient mean by at most
``Delta = 2 r_E / n`` in the ambient norm. The K-norm mechanism with density
:math:`\propto \exp(-\|y - \bar x\|/\sigma)` on :math:`\mathbb R^D` has a normalizing
constant that does not depend on the center, so ``sigma = Delta / epsilon`` gives
ε-DP (Hardt & Talwar 2010; the 2021 paper's Thm 1 with ``Delta/eps``).

The papers add the ambient noise to the *Fréchet* mean; ``2 r_E / n`` does not bound
the ambient movement of the Fréchet mean in general (on the sphere only the geodesic
bound ``2r(2-H)/(nH)``, which is larger, is known), so here the released summary is the
ambient mean, whose sensitivity ``2 r_E / n`` provably bounds.

Noise: radius ``Gamma(D, sigma)`` times a uniform direction (2021 supplement §1.4),
sampled exactly in floating point (not hardened against least-significant-bit
attacks).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from pymc_manidp._validation import check_positive_int
from pymc_manidp.geometry.spd import unvech, vech
from pymc_manidp.laws.exact import ExactDraws, knorm_noise
from pymc_manidp.mechanisms.base import Mechanism

__all__ = [
    "EuclideanLaplace",
    "LandmarkLaplace",
    "ProjectedLaplace",
    "knorm_noise",
    "unvech",
    "vech",
]


class _KNormMechanism(Mechanism):
    """A checked summary plus K-norm noise, then post-processing: exact draws only.

    The K-norm density's normalizer does not depend on its center, so
    ``sigma = Delta / epsilon_per_noise`` (Hardt & Talwar 2010).
    """

    restricted = False
    footpoint_free_normalizer = True

    #: The largest σ: the noise's ambient norm (up to ~50 σ) and its square stay
    #: finite floats, so the summary plus noise and its projection are numbers.
    max_sigma = 1e150

    def check_exact_sigma(self, sigma: float) -> None:
        """Refuse a σ whose noise would overflow (public: before any charge)."""
        if sigma > self.max_sigma:
            raise ValueError(
                f"sigma = {sigma:.6g} is above {self.max_sigma:g}: the K-norm noise's "
                "squared norm would overflow floating point. Use epsilon >= "
                f"{self.epsilon_per_noise * sigma / self.max_sigma:.6g} for this n"
            )

    def _summary(self, data):  # pragma: no cover - abstract
        raise NotImplementedError

    def _noise(self, rng, sigma, size):  # pragma: no cover - abstract
        raise NotImplementedError

    def _finish(self, noisy):
        return noisy

    def exact_draws(self, data, sigma, size, rng):
        """``size`` releases for checked data: the summary plus independent noises."""
        noisy = self._summary(data) + self._noise(rng, sigma, (size,))
        return ExactDraws(points=self._finish(noisy), proposals=size)

    def summary(self, data, *, clip: bool = False) -> np.ndarray:
        """The non-private summary the mechanism perturbs (for the curator)."""
        return self._summary(self.domain.check(data, clip=clip))


class EuclideanLaplace(_KNormMechanism):
    r"""K-norm Laplace on the ambient mean: sphere (:math:`\mathbb R^{d+1}`), SPD (``vech``).

    .. math:: \tilde y \sim f(y) \propto \exp\{-\|y - \bar y\|_2/\sigma\}
              \ \text{on } \mathbb R^D,\qquad
              \bar y = \tfrac1n \textstyle\sum_i \iota(x_i),\qquad
              \sigma = \frac{2 r_E}{n\,\epsilon},

    with ``iota`` the embedding (identity for the sphere and Euclidean space, plain
    ``vech`` for SPD, ``D = k(k+1)/2``) and ``r_E`` the ambient radius of the public
    ball: ``2R sin(r/(2R))`` on the sphere; ``lambda_max(m0) (e^r - 1)`` on SPD (the
    supplement's ``e^r - 1`` for ``m0 = I``; for other centers
    :math:`\|m_0^{1/2}(e^V - I)m_0^{1/2}\|_F \le \lambda_{\max}(m_0)(e^r-1)`).
    Plain ``vech`` has norm ``<=`` the Frobenius norm, so the Frobenius bound ``2 r_E/n``
    holds in ``vech`` coordinates too.

    The released value lives in the ambient space: a vector ``(d+1,)`` off the sphere,
    or a symmetric matrix ``(k, k)`` that may fail to be positive definite. The
    manifold supplies the embedding: ``to_ambient``/``from_ambient``,
    ``ambient_dim`` and ``ambient_radius(center, r)``.

    Parameters
    ----------
    manifold : Sphere, SPD or Euclidean
        The manifold of the data: one with an ambient embedding.
    epsilon : float
        Privacy budget ``> 0``.
    center : array_like, shape ``point_shape``
        The public ball's center ``m0``, chosen without looking at the data.
    radius : float
        The public ball's geodesic radius ``r``; the data lie in ``B_r(m0)``.

    Examples
    --------
    >>> import pymc_manidp as pmd
    >>> mech = EuclideanLaplace(pmd.SPD(k=2), epsilon=1.0, center=np.eye(2), radius=1.5)
    >>> round(mech.ambient_radius, 6), round(mech.sensitivity(100), 6)
    (3.481689, 0.069634)
    >>> from pymc_manidp.datasets import wishart_in_ball
    >>> x = wishart_in_ball(50, random_seed=0)
    >>> rel = mech.release(x, random_seed=1)
    >>> rel.value.shape, rel.delta, rel.sampler
    ((2, 2), 0.0, 'exact')
    """

    name = "Euclidean Laplace (ambient mean)"
    value_on_manifold = False
    release_notes = ("the released value lies in the ambient space, possibly off the manifold",)
    _EMBEDDING = ("to_ambient", "from_ambient", "ambient_dim", "ambient_radius")

    def __init__(self, manifold, *, epsilon, center, radius):
        missing = [m for m in self._EMBEDDING if not hasattr(manifold, m)]
        if missing:
            raise TypeError(
                f"{type(self).__name__} needs a manifold with an ambient embedding (a "
                f"Sphere, SPD or Euclidean): {type(manifold).__name__} has no "
                f"{', '.join(missing)} (for Kendall shapes use LandmarkLaplace)"
            )
        super().__init__(manifold, epsilon=epsilon, center=center, radius=radius)

    @property
    def ambient_dim(self) -> int:
        """``D``: ``d + 1`` (sphere), ``k(k+1)/2`` (SPD), ``d`` (Euclidean)."""
        return self.manifold.ambient_dim

    @property
    def ambient_radius(self) -> float:
        """``r_E``: an ambient-norm radius around ``m0`` containing the public ball."""
        return self.manifold.ambient_radius(self.domain.center, self.domain.radius)

    def sensitivity(self, n: int) -> float:
        """``Delta = 2 r_E / n``: ambient-norm sensitivity of the ambient mean."""
        n = check_positive_int(n, "n")
        return 2.0 * self.ambient_radius / n

    def _summary(self, data):
        return np.mean(self.manifold.to_ambient(data), axis=0)

    def _noise(self, rng, sigma, size):
        return knorm_noise(rng, self.ambient_dim, sigma, size)

    def _finish(self, noisy):
        return self.manifold.from_ambient(noisy)


class ProjectedLaplace(EuclideanLaplace):
    r"""Euclidean Laplace on the sphere, normalized back onto it (2022 §4.1).

    .. math:: \tilde x = R\,\tilde y/\|\tilde y\|, \qquad
              \tilde y \sim \propto \exp\{-\|y - \bar y\|/\sigma\},\quad
              \sigma = \frac{4R\sin(r/2R)}{n\,\epsilon},

    ``ybar`` the ambient mean of the data. Normalizing is post-processing, so the
    guarantee is that of :class:`EuclideanLaplace`. (``ybar / |ybar|`` is the extrinsic
    mean, the natural reference for this release's error. The 2022 paper centers the
    noise at the unit-norm Fréchet mean instead and measures against it: with
    ``|ybar| < R`` the same noise turns ``ybar`` by a larger angle, so errors measured
    against ``ybar/|ybar|`` are about ``R/|ybar|`` times the paper protocol's;
    ``docs/reproduction.md`` shows both.)

    Parameters
    ----------
    manifold : Sphere
        The sphere of the data (a manifold with an ambient embedding and
        ``project_ambient``, the nearest point of the manifold).
    epsilon : float
        Privacy budget ``> 0``.
    center : array_like, shape ``(d + 1,)``
        The public ball's center ``m0``, chosen without looking at the data.
    radius : float
        The public ball's geodesic radius ``r``; the data lie in ``B_r(m0)``.

    Examples
    --------
    >>> import pymc_manidp as pmd
    >>> mech = ProjectedLaplace(pmd.Sphere(dim=2), epsilon=1.0,
    ...                         center=[0.0, 0.0, 1.0], radius=np.pi / 8)
    >>> from pymc_manidp.datasets import sphere_cap
    >>> x = sphere_cap(100, random_seed=0)
    >>> y = mech.sample(x, 5, random_seed=1)
    >>> y.shape, bool(np.allclose(np.linalg.norm(y, axis=-1), 1.0))
    ((5, 3), True)
    """

    name = "projected Euclidean Laplace (ambient mean, normalized)"
    value_on_manifold = True
    release_notes = ("ambient-space release normalized onto the sphere (post-processing)",)
    _EMBEDDING = (*EuclideanLaplace._EMBEDDING, "project_ambient")

    def _finish(self, noisy):
        # y = 0 has probability zero: project_ambient fails loudly rather than give NaN
        return self.manifold.project_ambient(noisy)


class LandmarkLaplace(_KNormMechanism):
    r"""Landmark-wise planar Laplace on the mean configuration, budget split over landmarks.

    For planar shapes with ``k`` landmarks (2022 §4.3, baselines (ii) and (iii)):
    records are pre-shapes ``z_i`` (centered, unit size); with ``align=True`` each is
    first rotated optimally onto the public reference shape ``m0`` (the ball's center).
    The summary is the landmark-wise mean :math:`\bar z_j = \frac1n\sum_i z_{ij}`, and
    each landmark gets independent planar ℓ2 Laplace noise with budget ``epsilon/k``:

    .. math:: \tilde z_j \sim \propto \exp\{-\|y - \bar z_j\|_2/\sigma\}
              \ \text{on } \mathbb R^2, \qquad
              \sigma = \frac{k\,\Delta}{\epsilon},

    ε-DP by basic composition of ``k`` mechanisms each ``(epsilon/k)``-DP. Per-landmark
    sensitivity ``Delta`` (one record replaced, data in ``B_r(m0)``, ``r < pi/8``):

    - aligned: :math:`\|w - m_0\| = 2\sin(\rho/2) \le 2\sin(r/2)` for an aligned
      pre-shape ``w``, so :math:`\Delta = \min(4\sin(r/2), 2)/n`;
    - not aligned: rotations are arbitrary but
      :math:`|z_j| = |w_j| \le \min(1, |m_{0j}| + 2\sin(r/2))`, so
      :math:`\Delta = 2\min(1, \max_j|m_{0j}| + 2\sin(r/2))/n`.

    Planar ℓ2 noise (radius ``Gamma(2, sigma)``, uniform angle) is rotation invariant,
    so the law of the shape of the release does not depend on the frame. With
    ``project=True`` (default) the released value is the pre-shape of the noisy
    configuration (centring and scaling: post-processing); otherwise the noisy
    configuration itself.

    Parameters
    ----------
    manifold : KendallShape
        The shape space of the data (``k`` planar landmarks).
    epsilon : float
        Privacy budget ``> 0``.
    center : array_like, shape ``(k, 2)``
        Public reference shape ``m0`` (the ball's center).
    radius : float
        Geodesic radius ``r < pi/8`` of the ball holding the data.
    align : bool
        Rotate each record onto ``m0`` before averaging (default True).
    project : bool
        Release the pre-shape of the noisy configuration (default True).

    Examples
    --------
    >>> import pymc_manidp as pmd
    >>> K = pmd.KendallShape(k_landmarks=4)
    >>> m0 = K.validate(np.array([[1.0, 0], [0, 1], [-1, 0], [0, -1.2]]))
    >>> mech = LandmarkLaplace(K, epsilon=1.0, center=m0, radius=0.3)
    >>> round(mech.sensitivity(10), 6), round(mech.sigma(10), 6)  # 4 sin(0.15)/10, x k
    (0.059775, 0.239101)
    """

    def __init__(self, manifold, *, epsilon, center, radius, align=True, project=True):
        if not (hasattr(manifold, "k_landmarks") and hasattr(manifold, "align")):
            raise TypeError(
                "LandmarkLaplace needs planar landmark configurations (a KendallShape "
                f"manifold: k_landmarks, align), got {type(manifold).__name__}"
            )
        if not isinstance(align, bool) or not isinstance(project, bool):
            raise TypeError("align and project must be bools")
        super().__init__(manifold, epsilon=epsilon, center=center, radius=radius)
        self.align = align
        self.project = project
        # without projection the release is a noisy configuration, not a pre-shape
        self.value_on_manifold = project
        self.name = "landmark-wise Laplace " + ("(aligned)" if align else "(not aligned)")
        self.release_notes = (
            f"budget split equally over {manifold.k_landmarks} landmarks "
            f"(epsilon/k = {self.epsilon_per_noise:.6g} each)",
        )

    @property
    def epsilon_per_noise(self) -> float:
        """``epsilon / k``: one planar noise per landmark (basic composition).

        Rounded down so that k times its decimal is at most ``epsilon``'s (the decimal a
        budget charges, docs/privacy-budget.md): the k noises never spend more."""
        k = self.manifold.k_landmarks
        share = self.epsilon / k
        while k * Fraction(repr(share)) > Fraction(repr(self.epsilon)):
            share = math.nextafter(share, 0.0)
        return share

    def sensitivity(self, n: int) -> float:
        """Per-landmark ℓ2 sensitivity of the landmark-wise mean (see the class notes)."""
        n = check_positive_int(n, "n")
        chord = 2.0 * float(np.sin(self.domain.radius / 2.0))
        if self.align:
            return min(2.0 * chord, 2.0) / n
        top = float(np.max(np.linalg.norm(self.domain.center, axis=-1)))
        return 2.0 * min(1.0, top + chord) / n

    def _summary(self, data):
        z = self.manifold.validate(data)
        if self.align:
            z = self.manifold.align(self.domain.center, z)
        return np.mean(z, axis=0)

    def _noise(self, rng, sigma, size):
        return knorm_noise(rng, 2, sigma, (*size, self.manifold.k_landmarks))

    def _finish(self, noisy):
        return self.manifold.validate(noisy) if self.project else noisy
