r"""Exact samplers: draws from the mechanisms' laws without MCMC (pure ε-DP releases).

Every sampler here is a composition of exact steps: Gamma variates, uniform
directions and rejection sampling, so the draws follow the target law up to
floating-point rounding (they are *not* hardened against least-significant-bit
attacks).

Manifold Laplace at a footpoint ``eta`` with scale ``sigma``: in normal coordinates
``c = t u`` at ``eta`` (``u`` uniform on the unit sphere of the tangent space,
``t = |c|``) the density w.r.t. Lebesgue measure is

.. math:: e^{-t/\sigma}\, J(c),

``J`` the volume density of the exponential chart (``M.log_volume_density``). What
the sampler needs of the manifold are its members (``M.exact_sampling`` says the class
vouches for them):

- a radial density with ``J <= 1`` (``M.volume_is_radial``, ``M.log_volume_growth ==
  0``): ``t`` has density ``∝ e^{-t/σ} t^{d-1} J(t)`` on ``[0, T]``, ``T`` the
  injectivity radius, drawn by rejection from ``Gamma(d, σ)`` (truncated to the
  support) accepting with ``J(t) <= 1``. Sphere ``S^d_R``: ``J = (sin(t/R)/(t/R))^{d-1}``
  on ``[0, πR]``; Kendall shapes (``d = 2k - 4``): ``(sin t / t)^{d-1} cos t`` on
  ``[0, π/2]``; Euclidean ``R^d``, where the exp chart is an isometry (``J = 1``, 2021
  supplement §1.4): ``t ~ Gamma(d, sigma)`` with no rejection;
- otherwise a growth bound ``log J(c) <= G|c|`` (``G = M.log_volume_growth``):
  rejection from the Euclidean K-norm with scale ``σ'``, ``1/σ' = 1/σ - β``, accepting
  with ``J(c) e^{-β t - (G-β) T}`` is exact for ``t <= T``; ``β = G`` (``T = ∞``) needs
  ``σ < 1/G`` (``M.check_laplace_normalizable``). SPD(k): ``J = ∏_{i<j}
  sinhc(|λ_i-λ_j|/2)`` (``λ`` the eigenvalues of the tangent matrix); since
  ``sinhc(y) <= e^y`` and ``Σ_{i<j}|λ_i-λ_j| <= C|λ|`` with ``C = sqrt(k(k²-1)/3)``,
  ``G = C/2`` and ``1/G = 2/C`` is the normalizability edge. An isotropic ``u`` makes
  the eigenvector frame Haar distributed, as it must be.

Restricted laws (``B_r(m0)``) are drawn from the law truncated to the geodesic ball
``B_T(eta)`` with ``T = rho(eta, m0) + r`` (which contains ``B_r(m0)``), keeping the
draws inside ``B_r(m0)``.

KNG, density ``∝ exp(-|grad F(x)|/σ)`` on ``B_r(m0)`` with
``F = (1/2n) Σ rho²(x, x_i)``: 2022 Lemma 1 gives ``|grad F(x)| >= H rho(x_bar, x)``
on the ball; a local form of it (the curvature of ``F`` along the geodesic from the
mean) gives a tighter piecewise-linear bound, whose exponential is the rejection
envelope: see :func:`sample_kng` and :func:`_kng_shells`.

Every rejection loop draws its proposals in batches and stops with
:class:`ExactSamplingError` after ``max_attempts`` proposals per requested draw.

One file per law, with the machinery they share:

- ``rejection.py``: the rejection loop and its cap, truncated Gamma draws, the checks,
  :class:`ExactDraws` and :class:`ExactSamplingError`;
- ``laplace.py``: the manifold Laplace (:func:`sample_laplace`, :func:`laplace_coords`)
  and the Euclidean K-norm (:func:`euclidean_laplace`, :func:`knorm_noise`);
- ``kng_mean.py``: KNG on the Fréchet mean (:func:`sample_kng`);
- ``kng_median.py``: KNG on the Fréchet median (:func:`sample_kng_median`), with its two
  envelopes in ``median_cells.py`` (boxes at ``m0``) and ``median_shells.py`` (shells
  around the computed median);
- ``stacks.py``: one draw for each of many data sets at once
  (:func:`sample_laplace_stack`, :func:`sample_kng_stack`).

A test that replaces a private name (``monkeypatch.setattr``) replaces it in the module
that reads it: this package re-exports only the public names and the default caps.
"""

from pymc_manidp.laws.exact.kng_mean import kng_envelope_slope, sample_kng
from pymc_manidp.laws.exact.kng_median import DEFAULT_MEDIAN_MAX_ATTEMPTS, sample_kng_median
from pymc_manidp.laws.exact.laplace import (
    euclidean_laplace,
    knorm_noise,
    laplace_coords,
    sample_laplace,
    spd_edge_constant,
)
from pymc_manidp.laws.exact.rejection import (
    DEFAULT_MAX_ATTEMPTS,
    ExactDraws,
    ExactSamplingError,
    has_exact_sampler,
)
from pymc_manidp.laws.exact.stacks import sample_kng_stack, sample_laplace_stack
from pymc_manidp.rng import as_generator

__all__ = [
    "DEFAULT_MAX_ATTEMPTS",
    "DEFAULT_MEDIAN_MAX_ATTEMPTS",
    "ExactDraws",
    "ExactSamplingError",
    "as_generator",
    "euclidean_laplace",
    "has_exact_sampler",
    "kng_envelope_slope",
    "knorm_noise",
    "laplace_coords",
    "sample_kng",
    "sample_kng_median",
    "sample_kng_stack",
    "sample_laplace",
    "sample_laplace_stack",
    "spd_edge_constant",
]
