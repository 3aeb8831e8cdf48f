r"""The 2021 supplement's random-walk Metropolis–Hastings on a manifold (§1.5).

A baseline for benchmarks, not a release path: the supplement samples the manifold
Laplace on :math:`S^d` with it. At each step, from the current point :math:`x_n`:

1. draw :math:`g \sim N(0, I_{d+1})`, rescale it to length ``step``
   (:math:`g \leftarrow \text{step}\cdot g/|g|`) and project it onto the tangent
   space at :math:`x_n`, giving :math:`v` with :math:`|v| \le \text{step}`;
2. propose :math:`x' = \exp_{x_n}(v)`;
3. accept with probability :math:`\min\{1, f(x')/f(x_n)\}`, else stay at :math:`x_n`.

The proposal law depends only on :math:`|v| = \rho(x_n, x')` (step < injectivity
radius), and so does the volume density of :math:`\exp_{x_n}`, which is symmetric in
its two points: the proposal density w.r.t. volume is symmetric and the plain
Metropolis ratio is exact. The supplement keeps every 100th state after a burn-in of
10,000 steps and uses ``step = sigma``, the Laplace scale σ.

Only the proposal (:func:`propose`) is the supplement's: the accept step and the chain
loop are those of every chain of the library
(:func:`~pymc_manidp.mcmc.kernels.metropolis_step`,
:func:`~pymc_manidp.mcmc.kernels.run_chain`).

On :math:`S^d \subset \mathbb R^{d+1}` the projection of a vector uniform on the
sphere of radius ``step`` onto a tangent space has the same law as its first ``d``
coordinates (rotation invariance), so the tangent vector is built from those
coordinates in an orthonormal frame of :math:`T_{x_n}` (``manifold.tangent_basis``).
That is the supplement's proposal on spheres, and the same isotropic proposal on any
manifold with an orthonormal frame (SPD, Kendall), where an ambient projection would
not be isotropic in the Riemannian metric.

The supplement's step 4 reads "otherwise, reject x' and generate another candidate";
read literally (recording only accepted moves) the chain would not have the target as
its law. We follow the "standard Metropolis–Hastings schematic" it cites: a rejection
repeats :math:`x_n`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pymc_manidp._validation import check_positive_int, check_positive_real
from pymc_manidp.mcmc.kernels import metropolis_step, run_chain

__all__ = ["RandomWalkResult", "propose", "random_walk_mh"]


@dataclass(frozen=True)
class RandomWalkResult:
    """Thinned draws of :func:`random_walk_mh`.

    Attributes
    ----------
    draws : ndarray, shape ``(chains, n_draws, *point_shape)``
    log_density : ndarray, shape ``(chains, n_draws)``
        The target's log-density at the draws.
    acceptance_rate : float
        Accepted fraction of all proposals after burn-in (all chains).
    steps : int
        Steps per chain, burn-in included.
    """

    draws: np.ndarray
    log_density: np.ndarray
    acceptance_rate: float
    steps: int


def propose(manifold, x, step, rng):
    r"""The supplement's proposal: ``exp_x(v)``, ``v`` a projected uniform vector, ``|v| <= step``.

    Parameters
    ----------
    manifold : Manifold
    x : array, shape ``(chains, *point_shape)``
    step : float
        Radius of the proposal; ``|v| <= step``.
    rng : numpy.random.Generator

    Returns
    -------
    ndarray, shape ``(chains, *point_shape)``
    """
    d = manifold.dim
    g = rng.standard_normal((x.shape[0], d + 1))
    coords = step * g[:, :d] / np.linalg.norm(g, axis=-1, keepdims=True)
    return manifold.exp_coords(x, coords)


def random_walk_mh(
    log_density,
    start,
    *,
    manifold,
    step,
    draws,
    burn_in=10_000,
    thin=100,
    chains=4,
    rng=None,
):
    r"""Random-walk Metropolis–Hastings of the 2021 supplement (§1.5), vectorized over chains.

    Samples the law with density :math:`\propto e^{\ell(x)}` w.r.t. the Riemannian
    volume, :math:`\ell` = ``log_density``.

    Parameters
    ----------
    log_density : callable
        ``(chains, *point_shape) -> (chains,)`` unnormalized log-density (``-inf``
        outside a restricted support).
    start : array, shape ``point_shape`` or ``(chains, *point_shape)``
        Starting point(s); the supplement starts at the footpoint.
    manifold : Manifold
    step : float
        Proposal radius, ``0 < step < injectivity radius`` (the supplement: ``sigma``).
    draws : int
        Thinned draws kept per chain.
    burn_in, thin : int
        Steps discarded first (10,000 in the supplement), then one state kept every
        ``thin`` steps (100 in the supplement).
    chains : int
    rng : numpy.random.Generator or int, optional

    Returns
    -------
    RandomWalkResult

    Examples
    --------
    >>> import numpy as np
    >>> import pymc_manidp as pmd
    >>> S = pmd.Sphere(dim=2)
    >>> north = np.array([0.0, 0.0, 1.0])
    >>> res = random_walk_mh(lambda x: -S.dist(north, x) / 0.2, north, manifold=S, step=0.2,
    ...                      draws=50, burn_in=100, thin=10, chains=2, rng=0)
    >>> res.draws.shape, 0.3 < res.acceptance_rate < 0.9
    ((2, 50, 3), True)
    """
    if not callable(log_density):
        raise TypeError("log_density must be a callable of points")
    step = check_positive_real(step, "step")
    if not step < manifold.injectivity_radius:
        raise ValueError(
            f"step must lie in (0, {manifold.injectivity_radius:.6g}) (the injectivity "
            f"radius), got {step}"
        )
    draws = check_positive_int(draws, "draws")
    burn_in = check_positive_int(burn_in, "burn_in", minimum=0)
    thin = check_positive_int(thin, "thin")
    chains = check_positive_int(chains, "chains")
    rng = np.random.default_rng(rng)
    x, lp = _start(log_density, start, manifold, chains)

    def supplement_proposal(x, rng):
        return propose(manifold, x, step, rng)

    def mh_step(x, lp, rng):
        return metropolis_step(log_density, x, lp, supplement_proposal, rng)

    total = burn_in + draws * thin
    run = run_chain(mh_step, x, lp, total, rng, keep=burn_in + thin * np.arange(1, draws + 1))
    rate = int(run.accepted[burn_in:].sum()) / (chains * draws * thin)
    draws_by_chain = np.ascontiguousarray(np.swapaxes(run.states, 0, 1))
    return RandomWalkResult(draws_by_chain, np.ascontiguousarray(run.log_density.T), rate, total)


def _start(log_density, start, manifold, chains):
    """The start of every chain ``(chains, *point_shape)`` and its log-density ``(chains,)``."""
    pshape = tuple(manifold.point_shape)
    x = np.array(manifold.validate(start), float)
    if x.shape == pshape:
        x = np.broadcast_to(x, (chains, *pshape)).copy()
    if x.shape != (chains, *pshape):
        raise ValueError(f"start must have shape {pshape} or {(chains, *pshape)}, got {x.shape}")
    lp = np.asarray(log_density(x), float)
    if not np.all(np.isfinite(lp)):
        raise ValueError("log_density is not finite at the start point(s)")
    return x, lp
