r"""The manifold Laplace, exactly: its radial law in normal coordinates
(:func:`laplace_coords`; rejection from a Gamma radius, or from the Euclidean K-norm
tilted by the volume growth where the volume density is not radial, SPD), and the law
on the whole space or restricted to the public ball (:func:`sample_laplace`); the
Euclidean K-norm noise of the baselines (:func:`knorm_noise`, :func:`euclidean_laplace`).
"""

from __future__ import annotations

import numpy as np

from pymc_manidp._validation import as_points, check_positive_real, check_sigma
from pymc_manidp.geometry.base import exp_chart_is_isometry
from pymc_manidp.geometry.spd import SPD
from pymc_manidp.laws.exact.rejection import (
    DEFAULT_MAX_ATTEMPTS,
    ExactDraws,
    _ball_cover,
    _check_domain,
    _check_exact_manifold,
    _check_max_attempts,
    _check_size,
    _directions,
    _gamma_truncated,
    _proposal_points,
    _rejection,
)
from pymc_manidp.rng import as_generator


def spd_edge_constant(k: int) -> float:
    r"""``C = sqrt(k(k²-1)/3)``: :attr:`SPD.volume_growth_constant` (the manifold owns it)."""
    return SPD(k=k).volume_growth_constant


def euclidean_laplace(footpoint, sigma, size, rng=None):
    r"""Euclidean K-norm (ℓ2) Laplace in ``R^d`` (2021 supplement §1.4).

    .. math:: f(y) \propto \exp(-|y - \bar x|_2 / \sigma),

    drawn as ``y = x_bar + t u`` with ``t ~ Gamma(d, sigma)`` and ``u`` uniform on
    the unit sphere.

    Parameters
    ----------
    footpoint : array, shape ``(d,)``
        The footpoint ``x_bar``.
    sigma : float
        The scale ``sigma > 0``.
    size : int
        Number of draws.
    rng : Generator, int or None
        Random source (a ``numpy.random.Generator`` or a seed).

    Returns
    -------
    ndarray, shape ``(size, d)``
        The draws ``y``.

    Examples
    --------
    >>> y = euclidean_laplace([0.0, 0.0, 0.0], 0.5, 4000, rng=1)
    >>> y.shape, bool(abs(np.linalg.norm(y, axis=1).mean() - 1.5) < 0.05)  # E t = d sigma
    ((4000, 3), True)
    """
    footpoint = as_points(footpoint, np.shape(footpoint)[-1:], name="footpoint")
    if footpoint.ndim != 1:
        raise ValueError(f"footpoint must be one point of shape (d,), got {footpoint.shape}")
    sigma = check_sigma(sigma)
    size = _check_size(size)
    rng = as_generator(rng)
    return footpoint + knorm_noise(rng, footpoint.shape[0], sigma, (size,))


def knorm_noise(rng, dim: int, sigma: float, size=()) -> np.ndarray:
    r"""Draw the ℓ2 K-norm (Euclidean Laplace) noise on :math:`\mathbb R^D`.

    .. math:: f(y) \propto \exp(-\|y\|_2/\sigma), \qquad
              \|Y\| \sim \mathrm{Gamma}(D, \sigma),\ Y/\|Y\| \text{ uniform on } S^{D-1}

    (2021 supplement §1.4: direction a normalized standard Gaussian).

    Parameters
    ----------
    rng : numpy.random.Generator
        The random source.
    dim : int
        ``D``.
    sigma : float
        The scale ``sigma > 0``.
    size : tuple of int
        Leading shape; the result has shape ``(*size, D)``.

    Returns
    -------
    ndarray, shape ``(*size, D)``
        The noise vectors ``Y``.

    Examples
    --------
    >>> y = knorm_noise(np.random.default_rng(0), 3, 0.5, (1000,))
    >>> y.shape, bool(abs(np.linalg.norm(y, axis=1).mean() - 1.5) < 0.1)  # E|Y| = D sigma
    ((1000, 3), True)
    """
    size = tuple(size)
    u = rng.standard_normal((*size, dim))
    norm = np.linalg.norm(u, axis=-1, keepdims=True)
    while np.any(norm == 0.0):  # a null event: redrawing it leaves the law unchanged
        u = np.where(norm == 0.0, rng.standard_normal(u.shape), u)
        norm = np.linalg.norm(u, axis=-1, keepdims=True)
    t = rng.gamma(shape=dim, scale=sigma, size=(*size, 1))
    return t * u / norm


def _radial_log_ratio(M, t):
    """log(target radial density / Gamma(d, σ) density) ``= log J(t e_1)``, ``<= 0``.

    For the isotropic charts (sphere, Kendall, Euclidean) the volume density depends
    on ``|c|`` only, so the manifold's own ``log_volume_density`` along one axis is
    the radial ratio: one source for the formula.
    """
    c = np.zeros((*np.shape(t), M.dim))
    c[..., 0] = t
    return M.log_volume_density(c)


def _tilt(growth, sigma):
    """Envelope tilt ``β``: the K-norm proposal has rate ``1/σ - β``.

    ``β = G`` (``M.log_volume_growth``) makes the bound free of ``T`` (needed when
    ``T = ∞``). For a finite ``T`` any ``β`` in ``[0, G]`` with ``β < 1/σ`` gives a
    valid bound; measured on SPD(k) (``G = C/2``) over k = 2, 3, 5, σ in [0.02, 3] and
    T in {1, 3, 6} the largest allowed ``β`` always accepted most (docs/exact.md). The
    choice only affects speed, never the law.
    """
    return min(growth, 0.9 / sigma)


def _tilted_coords(M, sigma, size, rng, t_max, max_attempts, stats, what):
    """Normal coordinates of the Laplace law from the K-norm envelope tilted by
    ``G = M.log_volume_growth`` (a volume density that is not radial: SPD)."""
    d = M.dim
    growth = M.log_volume_growth
    if not np.isfinite(t_max):
        M.check_laplace_normalizable(sigma)
        # only beta = G bounds J e^{-beta t} on an unbounded chart: a smaller tilt
        # (sigma within 10% of the edge) would leave slack (G - beta) * inf, accepting nothing
        beta = growth
    else:
        beta = _tilt(growth, sigma)
    # 1/sigma - beta must itself be a normal float (sigma itself was checked)
    scale = check_sigma(1.0 / (1.0 / sigma - beta), "the SPD envelope's sigma 1/(1/sigma - beta)")
    slack = (growth - beta) * t_max if beta < growth else 0.0

    def propose(m):
        t = _gamma_truncated(d, scale, t_max, m, rng)
        c = t[:, None] * _directions(rng, m, d)
        # log J(c) <= G t (SPD: log prod sinhc(x_ij/2) <= sum x_ij/2 <= C t/2), so <= 0
        log_ratio = M.log_volume_density(c) - beta * t - slack
        return c, rng.random(m) < np.exp(log_ratio)

    c, proposed = _rejection(propose, size, max_attempts, what)
    stats["radial_proposals"] = stats.get("radial_proposals", 0) + proposed
    stats["radial_accepted"] = stats.get("radial_accepted", 0) + size
    return c


def laplace_coords(M, sigma, size, rng=None, *, t_max=None, max_attempts=DEFAULT_MAX_ATTEMPTS):
    r"""Normal coordinates ``(size, dim)`` of the manifold Laplace at any footpoint.

    .. math:: p(c) \propto e^{-|c|/\sigma} J(c), \qquad |c| \le T,

    ``J`` the exp chart's volume density (``M.log_volume_density``) and ``T`` the
    smaller of ``t_max`` and the chart's radius (``πR`` on spheres, ``π/2`` for
    Kendall shapes). Isotropic, so valid in the orthonormal frame of any footpoint.

    Parameters
    ----------
    M : Manifold
        The manifold (its dimension and volume density ``J``), with an exact sampler
        (``M.exact_sampling``: every shipped space says so in its class).
    sigma : float
        The scale ``sigma > 0``.
    size : int
        Number of draws.
    rng : Generator, int or None
        Random source (a ``numpy.random.Generator`` or a seed).
    t_max : float, optional
        Truncation radius (default: none).
    max_attempts : int
        Cap on proposals per draw.

    Returns
    -------
    ndarray, shape ``(size, dim)``
        The coordinates ``c`` in an orthonormal frame of the tangent space.

    Examples
    --------
    >>> import pymc_manidp as pmd
    >>> c = laplace_coords(pmd.Sphere(dim=2), 0.1, 5, rng=0)
    >>> c.shape
    (5, 2)
    """
    c, _ = _laplace_coords(M, sigma, size, rng, t_max, max_attempts)
    return c


def _laplace_coords(M, sigma, size, rng, t_max, max_attempts, what=None):
    """Normal coordinates of the Laplace law; ``what`` names the caller in errors."""
    _check_exact_manifold(M)
    what = what or f"the {M} Laplace radial law"
    sigma = check_sigma(sigma)
    size = _check_size(size)
    max_attempts = _check_max_attempts(max_attempts)
    rng = as_generator(rng)
    t_max = np.inf if t_max is None else check_positive_real(t_max, "t_max")
    stats: dict = {}
    if not (M.volume_is_radial and M.log_volume_growth == 0):
        return _tilted_coords(M, sigma, size, rng, t_max, max_attempts, stats, what), stats
    d = M.dim
    top = min(t_max, M.injectivity_radius)  # the exp chart's radius (inf if not compact)

    def propose(m):
        t = _gamma_truncated(d, sigma, top, m, rng)
        return t, rng.random(m) < np.exp(_radial_log_ratio(M, t))

    if exp_chart_is_isometry(M):  # J = 1: nothing to reject
        t, proposed = _gamma_truncated(d, sigma, top, size, rng), size
    else:
        t, proposed = _rejection(propose, size, max_attempts, what)
    stats["radial_proposals"] = proposed
    stats["radial_accepted"] = size
    return t[:, None] * _directions(rng, size, d), stats


def sample_laplace(
    M,
    footpoint,
    sigma,
    size,
    rng=None,
    *,
    domain=None,
    max_attempts=DEFAULT_MAX_ATTEMPTS,
) -> ExactDraws:
    r"""Exact draws of the manifold Laplace, whole space or restricted to a ball.

    .. math:: f(x) \propto \exp\{-\rho(\eta, x)/\sigma\}\ \text{w.r.t. volume},
              \quad x \in \mathcal M \ \text{or}\ x \in B_r(m_0).

    Parameters
    ----------
    M : Manifold
        The manifold of the release, with an exact sampler (``M.exact_sampling``).
    footpoint : array, shape ``point_shape``
        The footpoint ``eta``.
    sigma : float
        The scale ``sigma > 0``.
    size : int
        Number of draws.
    rng : Generator, int or None
        Random source (a ``numpy.random.Generator`` or a seed).
    domain : DataDomain, optional
        Restrict the law to ``B_r(m0)``: drawn from the law truncated to
        ``B_T(eta)``, ``T = rho(eta, m0) + r``, keeping the draws inside.
    max_attempts : int
        Cap on proposals per draw at each rejection stage.

    Returns
    -------
    ExactDraws
        ``points`` of shape ``(size, *point_shape)``, validated.

    Raises
    ------
    ValueError
        No exact sampler for ``M``; ``sigma`` outside the range where the law
        exists (unrestricted SPD).
    ExactSamplingError
        The cap on proposals was hit.

    Examples
    --------
    >>> import pymc_manidp as pmd
    >>> S = pmd.Sphere(dim=2)
    >>> draws = sample_laplace(S, [0.0, 0.0, 1.0], 0.05, 3, rng=0)
    >>> draws.points.shape
    (3, 3)
    """
    _check_exact_manifold(M)
    foot = M.validate(footpoint)
    if foot.shape != tuple(M.point_shape):
        raise ValueError(f"footpoint must be one point of shape {tuple(M.point_shape)}")
    sigma = check_sigma(sigma)
    size = _check_size(size)
    max_attempts = _check_max_attempts(max_attempts)
    domain = _check_domain(M, domain)
    rng = as_generator(rng)
    if domain is None:
        c, stats = _laplace_coords(M, sigma, size, rng, None, max_attempts)
        pts = _proposal_points(M, foot, c, "the Laplace sampler")
        return ExactDraws(pts, size, {"acceptance_rate": 1.0, **stats})
    t_max = _ball_cover(M, foot, domain)
    stats: dict = {}
    what = f"the restricted Laplace on {M} (ball of radius {domain.radius:.6g})"

    def propose(m):
        c, st = _laplace_coords(M, sigma, m, rng, t_max, max_attempts, what)
        for key, v in st.items():
            stats[key] = stats.get(key, 0) + v
        x = _proposal_points(M, foot, c, what)
        return x, domain.distances(x) <= domain.radius

    pts, proposed = _rejection(propose, size, max_attempts, what)
    info = {"acceptance_rate": size / proposed, "ball_proposals": proposed, **stats}
    return ExactDraws(pts, proposed, info)
