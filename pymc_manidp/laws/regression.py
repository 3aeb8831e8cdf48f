r"""The KNG law of geodesic regression in flat space, sampled exactly.

In a flat chart (``Euclidean``; normal coordinates of any flat Hadamard space) with
:math:`\theta = (p, v) \in \mathbb R^{2d}` the gradient of
:math:`E = \frac1{2n}\sum_i \|y_i - p - x_i v\|^2` is
:math:`\nabla E(\theta) = (G \otimes I_d)(\theta - \hat\theta)`, :math:`G` the Gram
matrix of :math:`(1, x_i)` and :math:`\hat\theta` the least-squares fit. KNG's density
:math:`\propto \exp(-\|\nabla E(\theta)\|/\sigma)` is therefore a K-norm law around
:math:`\hat\theta`: :math:`z = (G\otimes I)(\theta - \hat\theta)` has density
:math:`\propto e^{-\|z\|/\sigma}` on :math:`\mathbb R^{2d}`, i.e. :math:`z = \sigma R U`
with :math:`R \sim \mathrm{Gamma}(2d, 1)` and :math:`U` uniform on the unit sphere
(docs/regression.md). Restricted to a public domain, the law is the unrestricted one
conditioned on it: rejection is exact.
"""

from __future__ import annotations

import math

import numpy as np
import pytensor.tensor as pt

from pymc_manidp.geometry.jacobi_twins import pt_regression_gradient, pt_tm_chart
from pymc_manidp.laws.exact import ExactDraws, ExactSamplingError

__all__ = [
    "capped_ball",
    "regression_chart_logp",
    "sample_flat_regression_kng",
    "sample_regression_kng_uniform",
]


def sample_flat_regression_kng(
    theta_hat, gram, sigma, size, rng, *, accept=None, max_attempts=10_000, fallback=None
) -> ExactDraws:
    r"""``size`` exact draws of :math:`\propto \exp(-\|(G\otimes I)(\theta - \hat\theta)\|/\sigma)`.

    Parameters
    ----------
    theta_hat : array, shape ``(2, d)``
        The least-squares fit in coordinates (row 0 the footpoint, row 1 the slope).
    gram : array, shape ``(2, 2)``
        :math:`G`, symmetric positive definite.
    sigma : float
    size : int
    rng : numpy.random.Generator
    accept : callable, optional
        ``accept(theta)`` for proposals ``(m, 2, d)`` returns a boolean mask ``(m,)``:
        the public domain the law is restricted to (default: all of
        :math:`\mathbb R^{2d}`).
    max_attempts : int
        K-norm proposals per draw: after ``max_attempts * size`` proposals with draws
        still missing, the sampler gives up (``ExactSamplingError``), or hands the
        missing draws to ``fallback``.
    fallback : callable, optional
        ``fallback(need, rng) -> (points (need, 2, d), proposals)``: another exact
        sampler of the same restricted law (the mechanism's: uniform proposals on a
        compact public domain, whose chance of giving up is proved from public facts).
        Exact as a whole: the switch depends only on a fixed count of proposals and on
        which of them were accepted, never on the accepted values, so the draws kept
        before it are i.i.d. from the law and the fallback's are too, independently
        (docs/regression.md, "The flat sampler's pilot-then-switch").

    Returns
    -------
    ExactDraws
        ``points`` ``(size, 2, d)``; ``info["switched"]``: draws made by ``fallback``.

    Examples
    --------
    >>> import numpy as np
    >>> out = sample_flat_regression_kng(np.zeros((2, 1)), np.eye(2), 1.0, 3,
    ...                                  np.random.default_rng(0))
    >>> out.points.shape, out.proposals
    ((3, 2, 1), 3)
    """
    theta_hat = np.asarray(theta_hat, float)
    d = theta_hat.shape[1]
    ginv = np.linalg.inv(np.asarray(gram, float))
    out, proposals = [], 0
    need = size
    while need > 0:
        batch = max(need, 16) if accept is not None else need
        proposals += batch
        radius = rng.gamma(2 * d, 1.0, size=batch)
        u = rng.standard_normal((batch, 2, d))
        u /= np.sqrt(np.sum(u * u, axis=(1, 2)))[:, None, None]
        theta = theta_hat + sigma * radius[:, None, None] * np.einsum("ab,mbd->mad", ginv, u)
        if accept is not None:
            theta = theta[np.asarray(accept(theta), bool)]
        take = theta[:need]
        out.append(take)
        need -= len(take)
        if need > 0 and proposals >= max_attempts * size:
            if fallback is not None:
                rest, extra = fallback(need, rng)
                out.append(np.asarray(rest, float).reshape(need, 2, d))
                points = np.concatenate(out)
                info = {"acceptance_rate": (size - need) / proposals, "switched": need}
                return ExactDraws(points, proposals + extra, info)
            raise ExactSamplingError(
                f"the regression KNG sampler drew {proposals} proposals and kept "
                f"{size - need} of {size} inside the public domain: the least-squares fit "
                "lies far outside it (raise slope_bound or footpoint_radius, or check the data)"
            )
    points = np.concatenate(out)
    return ExactDraws(points, proposals, {"acceptance_rate": size / proposals, "switched": 0})


def sample_regression_kng_uniform(
    manifold,
    center,
    footpoint_radius,
    slope_bound,
    grad_norm,
    sigma,
    size,
    rng,
    *,
    max_attempts=10_000,
) -> ExactDraws:
    r"""Exact draws of KNG on ``TM`` restricted to a compact public domain, any space.

    The target is :math:`\propto e^{-g(p, v)/\sigma}` with respect to the Sasaki measure
    :math:`\mathrm{vol}_M(dp)\,dv` on :math:`\{\rho(m, p) \le R,\ \|v\|_p \le V\}`,
    ``g = grad_norm(p, v) >= 0``. The density is at most 1, so rejection from the
    uniform law of the domain, accepting with probability :math:`e^{-g/\sigma}`, is
    exact. The uniform law: the footpoint in normal coordinates ``a`` at ``m``,
    :math:`|a| \le R` (``R`` below the injectivity radius: the chart is a
    diffeomorphism onto the ball), with density :math:`\propto J(a)`, drawn by
    rejection from the uniform ball with the bound :math:`\log J(a) \le G R`
    (``G = manifold.log_volume_growth``); the slope uniform in the ``V``-ball of
    :math:`T_pM` in any orthonormal frame (Lebesgue measure on the fibre does not
    depend on the frame).

    Parameters
    ----------
    manifold : Manifold
    center : array, shape ``point_shape``
    footpoint_radius, slope_bound : float
        ``R`` and ``V``.
    grad_norm : callable
        ``grad_norm(p, v) -> float``.
    sigma : float
    size : int
    rng : numpy.random.Generator
    max_attempts : int
        Evaluations of ``grad_norm`` per draw before giving up (``ExactSamplingError``).

    Returns
    -------
    ExactDraws
        ``points`` ``(size, 2, *point_shape)``: footpoints and slopes.
    """
    d = manifold.dim
    growth = float(manifold.log_volume_growth)
    R, V = float(footpoint_radius), float(slope_bound)
    out, evaluations = [], 0
    while len(out) < size:
        a = _uniform_ball(rng, 64, d, R)
        keep = np.log(rng.uniform(size=64)) < manifold.log_volume_density(a) - growth * R
        for coords in a[keep]:
            p = manifold.validate(manifold.exp_coords(center, coords)[None])[0]
            v = manifold.from_coords(p, _uniform_ball(rng, 1, d, V)[0])
            evaluations += 1
            if rng.uniform() < np.exp(-grad_norm(p, v) / sigma):
                out.append(np.stack([p, v]))
                if len(out) == size:
                    break
            if evaluations >= max_attempts * size:
                raise ExactSamplingError(
                    f"the regression KNG sampler evaluated {evaluations} proposals and "
                    f"accepted {len(out)} of {size}: the law is too concentrated for its "
                    "uniform envelope on this domain (use a smaller epsilon, or smaller "
                    "footpoint_radius and slope_bound)"
                )
    return ExactDraws(np.stack(out), evaluations, {"acceptance_rate": size / evaluations})


def _uniform_ball(rng, m, d, radius):
    """``m`` points uniform in the ``d``-ball of ``radius`` ``(m, d)``."""
    u = rng.standard_normal((m, d))
    u /= np.sqrt(np.sum(u * u, axis=1, keepdims=True))
    return radius * rng.uniform(size=(m, 1)) ** (1.0 / d) * u


# --- the law in a chart of TM, for NUTS -------------------------------------------------
def capped_ball(z, cap):
    r"""The open ``cap``-ball of :math:`\mathbb R^d` from all of it: ``(c, log|dc/dz|)``.

    ``c = h(|z|) z/|z|`` with ``h(s) = cap tanh(s/cap)``: the identity to first order
    near 0, so a law well inside the ball sees almost a linear chart; the radial map
    has Jacobian ``h'(s) (h(s)/s)^(d-1)``. Written in ``q = |z|^2/cap^2`` with series
    near 0, so value and gradient are finite at ``z = 0``. ``cap = inf``: ``c = z``.
    """
    z = pt.as_tensor_variable(z)
    if math.isinf(cap):
        return z, pt.constant(0.0)
    d = z.shape[-1]
    q = pt.sum(z**2, axis=-1) / cap**2
    small = q < 1e-4
    qs = pt.switch(small, 1.0, q)
    y = pt.sqrt(qs)
    # tanh(y)/y and log sech^2(y), even in y: series in q near 0
    ratio = pt.switch(small, 1.0 - q / 3.0 + 2.0 * q**2 / 15.0, pt.tanh(y) / y)
    log_dh = pt.switch(
        small,
        -q + q**2 / 6.0,
        2.0 * (np.log(2.0) - y - pt.log1p(pt.exp(-2.0 * y))),
    )
    return ratio * z, log_dh + (d - 1) * pt.log(ratio)


def regression_chart_logp(manifold, center, footpoint_radius, slope_bound, z, x, y, sigma):
    r"""The regression KNG law as a log-density of ``z`` in :math:`\mathbb R^{2d}`.

    ``z = (z_a, z_b)``: the footpoint's normal coordinates at ``center``
    ``a = capped_ball(z_a, R)`` (``R = footpoint_radius``; ``None``: uncapped, flat
    spaces only) and the slope's coordinates ``b = capped_ball(z_b, V)`` in the frame
    transported from ``center`` (:func:`~pymc_manidp.geometry.jacobi_twins.pt_tm_chart`),
    so ``z`` covers exactly the open public domain. The density with respect to
    Lebesgue measure in ``z`` is

    .. math:: e^{-\|(\nabla_pE, \nabla_vE)\|/\sigma}\,J(a)\,
              \Big|\frac{\partial a}{\partial z_a}\Big|\Big|\frac{\partial b}{\partial z_b}\Big|,

    ``J`` the exp chart's volume density: the chart's Jacobian with respect to the
    Sasaki volume (docs/regression.md, "NUTS on TM").

    Returns
    -------
    logp : scalar tensor
    p, v : tensors ``point_shape``
        The footpoint and slope of ``z``.
    coords : tensor ``(2 d,)``
        ``(a, b)``.
    """
    M = manifold
    d = M.dim
    cap_a = math.inf if footpoint_radius is None else float(footpoint_radius)
    a, log_ja = capped_ball(z[:d], cap_a)
    b, log_jb = capped_ball(z[d:], float(slope_bound))
    basis = M.tangent_basis(np.asarray(center, float))
    p, v = pt_tm_chart(M, center, basis, a, b)
    gp, gv = pt_regression_gradient(M, p, v, x, y)
    # the Minkowski products of tangent vectors are >= 0 up to rounding
    norm = pt.sqrt(pt.maximum(M.pt_inner(p, gp, gp) + M.pt_inner(p, gv, gv), 0.0))
    logp = -norm / sigma + M.pt_log_volume_density(a) + log_ja + log_jb
    return logp, p, v, pt.concatenate([a, b])
