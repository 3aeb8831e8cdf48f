r"""Noise-aware inference of the geodesic regression behind a KNG-regression release.

A ``pmd.RegressionKNGMechanism`` release :math:`\tilde\theta = (\tilde p, \tilde v)` has,
given the data :math:`D` (public covariates :math:`x_i`, private responses :math:`y_i`),
the density

.. math:: f(\tilde\theta \mid D) = e^{-\|\nabla E(\tilde\theta; D)\|/\sigma} / Z(D),
          \qquad Z(D) = \int_\Theta e^{-\|\nabla E(\theta; D)\|/\sigma}\,d\theta

on the public domain :math:`\Theta = \{\rho(m, p) \le R,\ \|v\| \le V\}` (Sasaki
measure). Like the mean's KNG (which :func:`~pymc_manidp.noise_aware_model` refuses), it
depends on the whole data set, not on one parameter. This model makes one modelling
choice and one numerical approximation (docs/regression.md, "Noise-aware inference"):

1. **The responses on the geodesic of the parameter** (the modelling choice). The
   parameter is :math:`\theta = (p, v)` and the responses are written as
   :math:`y_i = \operatorname{Exp}_p(x_i v)`, so :math:`\theta` is the data's
   least-squares fit. Exact when the responses lie on a geodesic (the model the
   calibration studies simulate); with residuals it is the regression analogue of
   putting the mean in place of the data, and on curved spaces the release's law then
   depends on the residuals too (not modelled). Given it, the likelihood
   :math:`f(\tilde\theta \mid D_\theta)` is exact: the numerator by the closed-form
   gradients (docs/regression.md, Theorem 1) in PyTensor, and
2. **the normalizer by a fixed quadrature** (the numerical approximation): a product rule
   over :math:`\Theta` (Gauss–Legendre in each ball's radius, midpoints in its angle,
   the volume density of the footpoint's chart), whose nodes and geodesics are computed
   once; only the responses :math:`y(\theta)` change in the graph. Its error against a
   finer rule is below 1e-4 relative in the tested regimes
   (tests/laws/test_regression_inference.py). Written for ``Sphere(dim=1 or 2)``
   (:math:`\Theta` of dimension 2 or 4).

The model's simulator (``pm.draw`` of the observed release, which
:func:`~pymc_manidp.calibration_study` uses) is the mechanism's own exact sampler
(``laws.regression.sample_regression_kng_uniform`` with the library's gradient) on the
responses of the drawn fit: a study checks the density, its normalizer and the sampler
against the law itself.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
from pymc.logprob.transforms import Transform

from pymc_manidp._validation import check_positive_real
from pymc_manidp.geometry._numba.pt_numerics import cos_sqrt, sinc_sqrt
from pymc_manidp.geometry.jacobi import transport
from pymc_manidp.geometry.sphere import is_round_sphere
from pymc_manidp.laws.distributions import exact_batch_draw
from pymc_manidp.laws.regression import sample_regression_kng_uniform
from pymc_manidp.stats.regression import (
    check_covariates,
    regression_gradient,
    regression_sensitivity,
)

__all__ = ["noise_aware_regression_model"]

MECHANISM = "KNG-regression"
#: the quadrature of the normalizer over the public domain: Gauss-Legendre nodes in the
#: radius and midpoint nodes in the angle of each ball (5 x 10 on S^2: 2,500 nodes on TS^2;
#: 5 on S^1); relative error below 1e-4 against a 16 x 32 rule at n epsilon = 20 and 50
#: (tests/laws/test_regression_inference.py)
QUADRATURE_NODES = (5, 10)
_SIGMA_RANGE = (1e-150, 1e150)


@dataclass(frozen=True)
class _RegressionRelease:
    """A checked regression release with the public values its likelihood needs."""

    value: np.ndarray  # (2, *point_shape)
    sigma: float
    center: np.ndarray
    radius: float
    footpoint_radius: float
    slope_bound: float
    x: np.ndarray


def _get(record, key, default=None):
    if isinstance(record, dict):
        return record.get(key, default)
    return getattr(record, key, default)


def _number(value, name):
    if isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating):
        raise TypeError(f"{name} must be a number, got {type(value).__name__}")
    return float(value)


def _read(record, manifold, x, covariate_bound, slope_bound, footpoint_radius):
    """Check a published regression release against the public bounds given."""
    if isinstance(record, list | tuple):
        raise TypeError(
            "noise_aware_regression_model takes one release (a Release or its public "
            "dict), not a list"
        )
    if not isinstance(record, dict) and not callable(getattr(record, "public", None)):
        raise TypeError(
            f"the release must be a Release or Release.public(), got {type(record).__name__}"
        )
    if not isinstance(record, dict):
        record = record.public()  # a Release: what it publishes (with its public ball)
    if isinstance(record.get("release"), dict):
        doc, record = record, dict(record["release"])  # the CLI's JSON document
        record.setdefault("public_ball", doc.get("public_ball"))
    mechanism = _get(record, "mechanism")
    if mechanism != MECHANISM:
        raise ValueError(
            f"noise_aware_regression_model needs a {MECHANISM!r} release "
            f"(pmd.RegressionKNGMechanism), got {mechanism!r}: for a manifold Laplace or "
            "tangent release use pmd.noise_aware_model"
        )
    if not is_round_sphere(manifold) or manifold.dim > 2:
        raise ValueError(
            "noise-aware regression is written for the sphere of dimension 1 or 2 "
            "(pmd.Sphere(dim=1 or 2), any radius: the responses and the gradient in "
            "PyTensor, the normalizer by a quadrature over the 2- or 4-dimensional "
            f"domain in TM); {manifold!r} is not one of them"
        )
    spec = _get(record, "manifold")
    if spec is not None and spec != repr(manifold):
        raise ValueError(f"the release was made on {spec}, not on {manifold!r}")
    sigma = _number(_get(record, "sigma"), "sigma")
    if not _SIGMA_RANGE[0] <= sigma <= _SIGMA_RANGE[1]:
        raise ValueError(
            f"sigma must be in [{_SIGMA_RANGE[0]:g}, {_SIGMA_RANGE[1]:g}], got {sigma!r}: "
            "pass the release's own sigma"
        )
    x = check_covariates(x, bound=check_positive_real(covariate_bound, "covariate_bound"))
    n = _get(record, "n")
    if n is not None and int(n) != len(x):
        raise ValueError(
            f"the release was made from n = {n} records, but {len(x)} covariates were given: "
            "pass the covariates the release was made with"
        )
    V = check_positive_real(slope_bound, "slope_bound")
    R = check_positive_real(footpoint_radius, "footpoint_radius")
    ball = _get(record, "public_ball")
    if not isinstance(ball, dict) or ball.get("center") is None or ball.get("radius") is None:
        raise ValueError(
            "a regression release's likelihood needs its public ball (center and radius), "
            "which the record does not carry: publish Release.public()"
        )
    center = manifold.validate(np.asarray(ball["center"], float))
    if center.shape != tuple(manifold.point_shape):
        raise ValueError(f"public_ball.center must be one point of shape {manifold.point_shape}")
    radius = check_positive_real(_number(ball["radius"], "public_ball.radius"), "radius")
    said = _get(record, "sensitivity")
    if said is not None:
        # sigma = 2 Delta / epsilon: the bounds given must be the mechanism's
        delta = math.hypot(
            *regression_sensitivity(
                manifold, len(x), radius=radius, covariate_bound=covariate_bound,
                slope_bound=V, footpoint_radius=R,
            )
        )  # fmt: skip
        if not math.isclose(delta, float(said), rel_tol=1e-9):
            raise ValueError(
                f"the record's sensitivity {float(said):.6g} is not the one of these bounds "
                f"({delta:.6g}): pass the covariates, covariate_bound, slope_bound and "
                "footpoint_radius the mechanism was built with"
            )
    value = np.asarray(_get(record, "value"), dtype=float)
    shape = (2, *manifold.point_shape)
    if value.shape != shape or not np.all(np.isfinite(value)):
        raise ValueError(
            f"a regression release's value is {shape} finite numbers (footpoint, slope), "
            f"got shape {value.shape}"
        )
    p = manifold.validate(value[0])
    v = value[1]
    if not np.allclose(manifold.to_tangent(p, v), v, atol=1e-9 * (1 + np.abs(v).max())):
        raise ValueError("the released slope is not a tangent vector at the released footpoint")
    inside = float(np.sqrt(manifold.inner(p, v, v))) <= V * (1 + 1e-9)
    if not (inside and float(manifold.dist(center, p)) <= R * (1 + 1e-9)):
        raise ValueError(
            "the release lies outside the public domain {rho(m, p) <= footpoint_radius, "
            "|v| <= slope_bound} given: it cannot come from the mechanism with these bounds"
        )
    return _RegressionRelease(np.stack([p, v]), sigma, center, radius, R, V, x)


class _BallPair(Transform):
    """``(2, d)`` coordinates in the product of two balls ``|a| <= r0``, ``|b| <= r1``
    from ``R^(2 d)``: each row ``r z / sqrt(1 + |z|^2)``."""

    name = "balls"

    def __init__(self, radii, dim):
        self.radii = np.asarray(radii, float).reshape(2, 1)
        self.dim = int(dim)

    def backward(self, value, *inputs):
        z = pt.as_tensor_variable(value)
        return self.radii * z / pt.sqrt(1.0 + pt.sum(z * z, axis=-1, keepdims=True))

    def forward(self, value, *inputs):
        c = pt.as_tensor_variable(value) / self.radii
        return c / pt.sqrt(pt.maximum(1.0 - pt.sum(c * c, axis=-1, keepdims=True), 1e-300))

    def log_jac_det(self, value, *inputs):
        # radial map g(t) = t/sqrt(1 + t^2): det = (g/t)^(d-1) g' = (1 + t^2)^(-(d+2)/2)
        z = pt.as_tensor_variable(value)
        t2 = pt.sum(z * z, axis=-1)
        log_det = -0.5 * (self.dim + 2) * pt.log1p(t2) + self.dim * np.log(self.radii[:, 0])
        return pt.sum(log_det, axis=-1)


def _pt_fit(M, m, basis, coords):
    """The footpoint ``Exp_m(a)`` and the slope ``b`` carried from ``m`` along that
    geodesic (``coords = (a, b)`` in the frame ``basis`` at ``m``), as tensors."""
    a, b = coords[..., 0, :], coords[..., 1, :]
    aE, bE = pt.dot(a, basis), pt.dot(b, basis)
    R2 = M.radius**2
    s = pt.sum(a * a, axis=-1) / R2  # t^2, t = |a|/R
    p = cos_sqrt(s)[..., None] * m + sinc_sqrt(s)[..., None] * aE
    # the transport v + <v, u>((cos t - 1) u - sin t m/R), written smooth at a = 0
    ba = pt.sum(a * b, axis=-1)[..., None]
    v = bE + ba * (
        -0.5 * sinc_sqrt(s / 4.0)[..., None] ** 2 / R2 * aE - sinc_sqrt(s)[..., None] / R2 * m
    )
    return p, v


def _pt_responses(M, p, v, slope_sq, x):
    """``Exp_p(x_i v)`` ``(n, *point_shape)``; ``slope_sq = |v|^2``."""
    q = x**2 * slope_sq / M.radius**2
    return cos_sqrt(q)[:, None] * p + (x * sinc_sqrt(q))[:, None] * v


def _geodesic_terms(M, p, v, x):
    """What the gradient at fits ``(p, v)`` (NumPy, a leading node axis) needs besides
    the responses: the unit slope ``u``, the factors ``cos t_i`` and ``sinc t_i``, the
    predictions and their unit velocities (as ``jacobi._sphere_terms``)."""
    R = M.radius
    nv = np.sqrt(np.sum(v * v, axis=-1, keepdims=True))
    u = np.where(nv > 0, v / np.where(nv > 0, nv, 1.0), 0.0)[..., None, :]
    t = (x * nv / R)[..., None]  # (..., n, 1)
    c, sn, sin_t = np.cos(t), np.sinc(t / np.pi), np.sin(t)
    p = p[..., None, :]
    return u, c, sn, c * p + R * sin_t * u, -sin_t * p / R + c * u


def _pt_geodesic_terms(M, p, v, x):
    """:func:`_geodesic_terms` at one fit given as tensors (the released value)."""
    R = M.radius
    nv = pt.sqrt(pt.sum(v * v))
    u = pt.switch(nv > 0, v / pt.switch(nv > 0, nv, 1.0), 0.0 * v)[None, :]
    t2 = ((x / R) ** 2 * nv**2)[:, None]
    c, sn = cos_sqrt(t2), sinc_sqrt(t2)
    sin_t = (x / R)[:, None] * nv * sn
    return u, c, sn, c * p + R * sin_t * u, -sin_t * p / R + c * u


def _gradient_norm(M, terms, y, x):
    """``|grad E|`` at the fits of ``terms`` (a leading node axis or none) for
    responses ``y`` ``(n, *point_shape)`` (Theorem 1 of docs/regression.md)."""
    u, c, sn, yhat, vel = terms
    eps = M.pt_log(yhat, y)
    a = pt.sum(eps * vel, axis=-1, keepdims=True)
    w = eps - a * vel
    gp = pt.mean(a * u + c * w, axis=-2)
    gv = pt.mean(x[:, None] * (a * u + sn * w), axis=-2)
    return pt.sqrt(pt.sum(gp * gp, axis=-1) + pt.sum(gv * gv, axis=-1) + 1e-300)


def _polar_rule(dim, radius, k_radius, k_angle):
    """Nodes ``(k, dim)`` and weights of a product rule over the ``dim``-ball
    (``dim`` 1: Gauss-Legendre on ``[-r, r]``; 2: Gauss-Legendre in the radius with
    its weight ``rho``, the periodic midpoint rule in the angle)."""
    g, w = np.polynomial.legendre.leggauss(k_radius)
    if dim == 1:
        return (radius * g)[:, None], radius * w
    rho, w_rho = 0.5 * radius * (g + 1), 0.5 * radius * w * 0.5 * radius * (g + 1)
    phi = (np.arange(k_angle) + 0.5) * 2 * np.pi / k_angle
    pts = np.stack([np.outer(rho, np.cos(phi)).ravel(), np.outer(rho, np.sin(phi)).ravel()], 1)
    return pts, np.repeat(w_rho, k_angle) * 2 * np.pi / k_angle


def _domain_rule(M, m, R, V, x, nodes):
    """The fixed quadrature of ``Z`` over the public domain: the geodesic terms at each
    node ``(N, ...)`` and the log weights ``(N,)`` of the Sasaki measure (the polar
    rules of the two balls times the volume density ``J(a)``)."""
    k_radius, k_angle = nodes
    A, wa = _polar_rule(M.dim, R, k_radius, k_angle)
    B, wb = _polar_rule(M.dim, V, k_radius, k_angle)
    ia, ib = np.meshgrid(np.arange(len(A)), np.arange(len(B)), indexing="ij")
    ia, ib = ia.ravel(), ib.ravel()
    fits = [_np_fit(M, m, np.stack([A[i], B[j]])) for i, j in zip(ia, ib, strict=True)]
    p = np.stack([f[0] for f in fits])
    v = np.stack([f[1] for f in fits])
    log_w = np.log(wa[ia] * wb[ib]) + M.log_volume_density(A[ia])
    return _geodesic_terms(M, p, v, x), log_w


def _np_fit(M, m, coords):
    """NumPy twin of :func:`_pt_fit` (through the manifold's own maps and the transport
    of ``geometry.jacobi``): ``(p, v)``."""
    a, b = coords
    w = M.from_coords(m, a)
    p = M.validate(M.exp(m, w)[None])[0]
    return p, M.to_tangent(p, transport(M, m, w, M.from_coords(m, b)))


def _simulator(M, rel):
    """The observed release's ``random``: the mechanism's exact law for the responses on
    the geodesic of the fit ``(p, v)`` given by its coordinates."""
    m, x, sigma = rel.center, rel.x, rel.sigma
    R, V = rel.footpoint_radius, rel.slope_bound

    def one(coords, rng):
        p, v = _np_fit(M, m, coords)
        y = M.exp(p, x[:, None] * v)

        def grad_norm(q, w):
            _, gp, gv = regression_gradient(M, q, w, x, y)
            return math.sqrt(max(float(M.inner(q, gp, gp) + M.inner(q, gv, gv)), 0.0))

        return sample_regression_kng_uniform(M, m, R, V, grad_norm, sigma, 1, rng).points[0]

    @exact_batch_draw
    def random(coords, _shape, rng=None, size=None):
        coords = np.asarray(coords, float)
        shape = tuple(size) if size else coords.shape[:-2]
        flat = np.broadcast_to(coords, (*shape, 2, M.dim)).reshape(-1, 2, M.dim)
        out = np.stack([one(c, rng) for c in flat])
        return out.reshape((*shape, 2, *M.point_shape))

    return random


def _prior(name, M, m, radii, x):
    """The uniform law (Sasaki measure) on ``{rho(m, p) <= r0, |v| <= r1}`` in the
    coordinates ``(a, b)``: density ``J(a)``, the volume density of the chart at ``m``."""
    d = M.dim
    r0, r1 = radii
    growth = float(M.log_volume_growth)

    def logp(value, _anchor):
        return M.pt_log_volume_density(value[..., 0, :])

    def ball(rng, k, radius):
        u = rng.standard_normal((k, d))
        u /= np.sqrt(np.sum(u * u, axis=1, keepdims=True))
        return radius * rng.uniform(size=(k, 1)) ** (1.0 / d) * u

    @exact_batch_draw
    def random(_anchor, rng=None, size=None):
        k = int(np.prod(size)) if size else 1
        out = []
        while len(out) < k:  # J(a) <= e^{G r0} (Bishop), as the mechanism's sampler
            a = ball(rng, 64, r0)
            keep = np.log(rng.uniform(size=64)) < M.log_volume_density(a) - growth * r0
            out.extend(a[keep])
        a = np.asarray(out[:k])
        coords = np.stack([a, ball(rng, k, r1)], axis=1)
        return coords.reshape((*(tuple(size) if size else ()), 2, d))

    start = np.full((2, d), 0.3 / np.sqrt(d)) * np.asarray(radii, float)[:, None]
    return pm.CustomDist(
        name,
        pt.zeros((2, d)),
        logp=logp,
        random=random,
        signature="(r,k)->(r,k)",
        default_transform=_BallPair(radii, d),
        initval=start,
    )


def noise_aware_regression_model(
    release,
    manifold,
    covariates,
    *,
    covariate_bound,
    slope_bound,
    footpoint_radius,
    prior_radius=None,
    prior_slope_bound=None,
    prior_logp=None,
    name="fit",
):
    r"""PyMC model of the geodesic regression ``(p, v)`` behind a KNG-regression release.

    .. math:: (p, v) \sim \pi, \qquad y_i = \operatorname{Exp}_p(x_i v), \qquad
              \tilde\theta \mid (p, v) \sim
              \frac{e^{-\|\nabla E(\tilde\theta; y)\|/\sigma}}
                   {\int_\Theta e^{-\|\nabla E(\theta; y)\|/\sigma}\,d\theta},

    the numerator exact, the normalizer by a fixed quadrature over the public domain
    :math:`\Theta` (module docstring; docs/regression.md, "Noise-aware inference", says
    what is exact and what is not).

    Parameters
    ----------
    release : Release or dict
        One ``pmd.RegressionKNGMechanism`` release (``Release.public()``, the
        ``Release``, or the CLI's JSON document): ``mechanism`` ``"KNG-regression"``,
        ``value`` ``(2, *point_shape)``, ``sigma``, ``n``, ``sensitivity`` (checked
        against the bounds given) and ``public_ball``.
    manifold : Sphere
        The space of the responses: ``pmd.Sphere`` of dimension 1 or 2, any radius.
    covariates : array_like, shape ``(n,)``
        The public covariates the release was made with.
    covariate_bound, slope_bound, footpoint_radius : float
        The mechanism's public bounds ``X``, ``V``, ``R`` (the record does not carry
        them; the record's sensitivity is recomputed from them and must match).
    prior_radius, prior_slope_bound : float, optional
        The prior is uniform (Sasaki measure) on
        :math:`\{\rho(m, p) \le r_0,\ \|v\| \le V_0\}`; default ``R`` and ``V``,
        the release's domain. Every prior ``(p, v)`` must put its responses in the
        public data ball, :math:`r_0 + \max_i|x_i|\,V_0 \le r` (refused otherwise:
        the mechanism would not release from such data).
    prior_logp : callable, optional
        ``prior_logp(footpoint, slope)``, a PyTensor scalar added to the log prior (a
        ``pm.Potential``), e.g. a von Mises–Fisher weight on the footpoint or a
        Gaussian one on the slope (example below). ``pm.draw`` of the prior (and so a
        calibration study) does not see it.
    name : str
        Name of the free variable: the coordinates ``(2, dim)``, row 0 the footpoint's
        normal coordinates at the ball's center ``m``, row 1 the slope's coordinates in
        the frame at ``m`` carried to ``p`` along the geodesic. The points are the
        deterministics ``footpoint`` and ``slope``.

    Returns
    -------
    pm.Model
        With the free ``name``, the deterministics ``footpoint`` and ``slope`` and the
        observed ``release`` (its value the ``pm.Data`` ``released``: ``pm.set_data``
        serves new releases of the same mechanism and covariates, as
        :func:`~pymc_manidp.calibration_study` does).

    Raises
    ------
    TypeError
        A release that is not a record (or a list of them), non-numeric bounds or
        sigma, a prior_logp that is not callable.
    ValueError
        Another mechanism (``noise_aware_model`` takes those), a space other than
        ``Sphere(dim=1 or 2)``, another manifold than the record's, covariates or bounds
        that do not match the record (n, sensitivity), a value outside the domain or
        not ``(footpoint, tangent slope)``, a prior whose responses would leave the
        data ball.

    Examples
    --------
    >>> import numpy as np
    >>> import pymc_manidp as pmd
    >>> S = pmd.Sphere(dim=2)
    >>> m = np.array([1.0, 0.0, 0.0])
    >>> bounds = dict(covariate_bound=1.0, slope_bound=0.3, footpoint_radius=0.2)
    >>> mech = pmd.RegressionKNGMechanism(S, epsilon=1.0, center=m, radius=0.6, **bounds)
    >>> x = np.linspace(-1, 1, 10)
    >>> y = S.exp(m, x[:, None] * np.array([0.0, 0.2, 0.0]))
    >>> rel = mech.release(x, y, random_seed=0)
    >>> model = pmd.noise_aware_regression_model(rel.public(), S, x, **bounds)
    >>> [v.name for v in model.free_RVs], [v.name for v in model.observed_RVs]
    (['fit'], ['release'])

    A prior that favours slow change (a Gaussian weight on the slope, scale 0.1):

    >>> import pytensor.tensor as pt
    >>> model = pmd.noise_aware_regression_model(
    ...     rel.public(), S, x, **bounds,
    ...     prior_logp=lambda p, v: -0.5 * pt.sum(v**2) / 0.1**2)
    >>> [v.name for v in model.potentials]
    ['prior_logp']
    """
    if prior_logp is not None and not callable(prior_logp):
        raise TypeError(
            f"prior_logp must be a callable prior_logp(footpoint, slope) returning a "
            f"PyTensor scalar, got {type(prior_logp).__name__}"
        )
    reserved = ("footpoint", "slope", "release", "released", "prior_logp")
    if not isinstance(name, str) or not name or name in reserved:
        raise ValueError(f"name must be a non-empty string other than {reserved}; got {name!r}")
    M = manifold
    rel = _read(release, M, covariates, covariate_bound, slope_bound, footpoint_radius)
    r0 = check_positive_real(
        rel.footpoint_radius if prior_radius is None else prior_radius, "prior_radius"
    )
    v0 = check_positive_real(
        rel.slope_bound if prior_slope_bound is None else prior_slope_bound, "prior_slope_bound"
    )
    reach = r0 + float(np.max(np.abs(rel.x))) * v0
    if reach > rel.radius * (1 + 1e-12):
        raise ValueError(
            f"prior_radius + max|x| * prior_slope_bound = {reach:.6g} exceeds the public "
            f"radius {rel.radius:.6g}: some prior (p, v) would put responses Exp_p(x v) "
            "outside the data ball, where the mechanism refuses to release; pass a "
            "smaller prior_radius or prior_slope_bound"
        )
    x, m, sigma = rel.x, rel.center, rel.sigma
    basis = np.asarray(M.tangent_basis(m), float)
    nodes, log_w = _domain_rule(M, m, rel.footpoint_radius, rel.slope_bound, x, QUADRATURE_NODES)
    # shared, not constants: numba cannot cache a compiled function that holds large
    # arrays as globals (a NumbaWarning at every compile)
    nodes = tuple(pytensor.shared(np.asarray(t, float), shape=np.shape(t)) for t in nodes)
    log_w = pytensor.shared(log_w, shape=log_w.shape)

    def logp(value, coords, _shape):
        p, v = _pt_fit(M, pt.as_tensor_variable(m), basis, coords)
        y = _pt_responses(M, p, v, pt.sum(coords[1] ** 2), x)
        numerator = _gradient_norm(M, _pt_geodesic_terms(M, value[0], value[1], x), y, x)
        log_z = pt.logsumexp(log_w - _gradient_norm(M, nodes, y, x) / sigma)
        return -numerator / sigma - log_z

    with pm.Model() as model:
        released = pm.Data("released", rel.value)
        coords = _prior(name, M, m, (r0, v0), x)
        p, v = _pt_fit(M, pt.as_tensor_variable(m), basis, coords)
        pm.Deterministic("footpoint", p)
        pm.Deterministic("slope", v)
        if prior_logp is not None:
            pm.Potential("prior_logp", prior_logp(p, v))
        pm.CustomDist(
            "release",
            coords,
            # carries the value's shape (2, *point_shape), which the signature cannot infer
            pt.zeros((2, *M.point_shape)),
            logp=logp,
            random=_simulator(M, rel),
            signature="(r,k),(r,m)->(r,m)",
            observed=released,
        )
    return model
