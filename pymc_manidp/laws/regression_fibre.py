r"""The slope's KNG law on one tangent space: the second stage of the sequential release.

With the footpoint :math:`\tilde p` fixed (released by the mean's KNG, public once
drawn), the slope's law on the fibre :math:`T_{\tilde p}M` is

.. math:: f(v \mid D) \propto \exp\{-\|\nabla_vE(\tilde p, v)\|/\sigma\}
          \quad\text{on } \{\|v\| \le V\},

with respect to Lebesgue measure on the fibre in any orthonormal frame
(docs/regression.md, "The sequential release"). Two exact samplers:

- flat spaces: :math:`\nabla_vE(\tilde p, v) = \overline{x^2}(v - v^*)`, so
  :math:`z = \overline{x^2}(v - v^*)` has density :math:`\propto e^{-\|z\|/\sigma}` on
  :math:`\mathbb R^d`: :math:`v = v^* + \sigma R U/\overline{x^2}`,
  :math:`R \sim \mathrm{Gamma}(d, 1)`, conditioned on the slope ball by rejection;
- any space: the density is at most 1, so rejection from the uniform law of the
  ``V``-ball of the fibre, accepting with probability :math:`e^{-g/\sigma}`, is exact.
  Its acceptance falls like :math:`(\sigma/V)^d` (the fibre's dimension ``d``), against
  :math:`\sim\sigma^{2d}` for the joint law on :math:`TM`.
"""

from __future__ import annotations

import numpy as np

from pymc_manidp.laws.exact import ExactDraws, ExactSamplingError

__all__ = ["sample_fibre_kng_flat", "sample_fibre_kng_uniform"]

_GAVE_UP = (
    "the sequential regression sampler evaluated {tries} slope proposals and accepted "
    "{got} of {size}: {why}"
)


def _ball(rng, m, d, radius):
    """``m`` points uniform in the ``d``-ball of ``radius`` ``(m, d)``."""
    u = rng.standard_normal((m, d))
    u /= np.sqrt(np.sum(u * u, axis=1, keepdims=True))
    return radius * rng.uniform(size=(m, 1)) ** (1.0 / d) * u


def sample_fibre_kng_flat(
    center_coords, curvature, sigma, slope_bound, size, rng, *, max_attempts=10_000
) -> ExactDraws:
    r"""Exact draws of :math:`\propto e^{-c\|v - v^*\|/\sigma}` on :math:`\|v\| \le V`.

    Parameters
    ----------
    center_coords : array, shape ``(d,)``
        :math:`v^*` in an orthonormal frame of the fibre.
    curvature : float
        :math:`c = \overline{x^2} > 0`.
    sigma, slope_bound : float
        The law's scale and the slope ball's radius ``V``.
    size : int
        Number of draws.
    rng : numpy.random.Generator
        The source of randomness.
    max_attempts : int
        Proposals per draw before giving up (``ExactSamplingError``).

    Returns
    -------
    ExactDraws
        ``points`` ``(size, d)``: slope coordinates.

    Examples
    --------
    >>> import numpy as np
    >>> out = sample_fibre_kng_flat(np.zeros(2), 1.0, 0.1, 5.0, 3, np.random.default_rng(0))
    >>> out.points.shape
    (3, 2)
    """
    c0 = np.asarray(center_coords, float)
    d = len(c0)
    out, tries = [], 0
    while sum(len(o) for o in out) < size:
        m = max(16, size)
        tries += m
        u = rng.standard_normal((m, d))
        u /= np.sqrt(np.sum(u * u, axis=1, keepdims=True))
        v = c0 + (sigma / curvature) * rng.gamma(d, 1.0, size=(m, 1)) * u
        out.append(v[np.sqrt(np.sum(v * v, axis=1)) <= slope_bound])
        got = sum(len(o) for o in out)
        if got < size and tries >= max_attempts * size:
            raise ExactSamplingError(
                _GAVE_UP.format(
                    tries=tries, got=got, size=size,
                    why="the least-squares slope lies far outside the slope ball (raise "
                    "slope_bound, or check the data)",
                )
            )  # fmt: skip
    return ExactDraws(np.concatenate(out)[:size], tries, {"acceptance_rate": size / tries})


def sample_fibre_kng_uniform(
    dim, grad_norm, sigma, slope_bound, size, rng, *, max_attempts=10_000
) -> ExactDraws:
    r"""Exact draws of :math:`\propto e^{-g(v)/\sigma}` on the ``V``-ball of a fibre.

    Parameters
    ----------
    dim : int
        The fibre's dimension ``d``.
    grad_norm : callable
        ``grad_norm(c) -> float`` for slope coordinates ``c`` ``(d,)`` in an orthonormal
        frame: :math:`\|\nabla_vE(\tilde p, v)\| \ge 0`.
    sigma, slope_bound : float
        The law's scale and the slope ball's radius ``V``.
    size : int
        Number of draws.
    rng : numpy.random.Generator
        The source of randomness.
    max_attempts : int
        Evaluations of ``grad_norm`` per draw before giving up (``ExactSamplingError``).

    Returns
    -------
    ExactDraws
        ``points`` ``(size, d)``: slope coordinates.

    Examples
    --------
    >>> import numpy as np
    >>> out = sample_fibre_kng_uniform(2, lambda c: 0.0, 1.0, 0.5, 4, np.random.default_rng(0))
    >>> out.points.shape, out.proposals  # a flat density accepts every proposal
    ((4, 2), 4)
    """
    out, tries = [], 0
    while len(out) < size:
        for c in _ball(rng, 64, dim, slope_bound):
            tries += 1
            if rng.uniform() < np.exp(-grad_norm(c) / sigma):
                out.append(c)
                if len(out) == size:
                    break
            if tries >= max_attempts * size:
                raise ExactSamplingError(
                    _GAVE_UP.format(
                        tries=tries, got=len(out), size=size,
                        why="the slope's law is too concentrated for its uniform envelope "
                        "(use a smaller epsilon or slope_bound)",
                    )
                )  # fmt: skip
    return ExactDraws(np.stack(out), tries, {"acceptance_rate": size / tries})
