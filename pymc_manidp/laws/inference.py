r"""Noise-aware inference: the posterior of the quantity behind private releases.

Having received a release ``x~`` of the manifold Laplace mechanism with scale
``sigma``, the likelihood of the footpoint ``eta`` (the data's Fréchet mean) is

.. math:: p(\tilde x \mid \eta) = e^{-\rho(\eta, \tilde x)/\sigma} / Z(\sigma)

for the law on the whole space, a proper likelihood because ``Z`` does not depend on
``eta`` on a homogeneous space, and

.. math:: p(\tilde x \mid \eta) = e^{-\rho(\eta, \tilde x)/\sigma} / Z_B(\eta, \sigma),
          \qquad Z_B(\eta, \sigma) = \int_{B_r(m_0)} e^{-\rho(\eta, y)/\sigma}\,dV(y),

for the law restricted to the public ball ``B_r(m0)`` (``x~`` in the ball), whose
normalizer depends on ``eta``: it is computed in the graph by a fixed quadrature over the
ball (``pymc_manidp.laws.restricted``; docs/architecture.md, math facts). Several
releases of the same data are independent given ``eta`` (each mechanism draws its own
noise), so their likelihood is the product.

:func:`noise_aware_model` writes this as a PyMC model with a prior on ``eta``: the
privacy noise is accounted for exactly (the Euclidean analogues are Bernstein &
Sheldon 2018; Ju, Awan, Gong & Rao 2022). With the uniform prior on a compact manifold
and one unrestricted release the posterior of ``eta`` is the Laplace itself, centered at
the release (tested). The released values (and the chart of the default prior) are
``pm.Data``: :func:`noise_aware_data` gives their values for new releases of the same
kind, so ``pm.set_data`` (or one compiled sampler) serves a whole study.

A tangent release (``pmd.TangentGaussianMechanism``, ``pmd.TangentLaplaceMechanism``;
issue 39) publishes the coordinates ``u = E_p^T Log_p(x_bar) + Z`` at a public point
``p``; given ``x_bar = eta`` (``rho(p, eta) < inj(p)``) their likelihood is exactly

.. math:: p(u \mid \eta) = (2\pi\sigma^2)^{-d/2}
          e^{-\|u - E_p^\top \mathrm{Log}_p\eta\|^2/(2\sigma^2)}
          \quad\text{or}\quad
          \frac{e^{-\|u - E_p^\top \mathrm{Log}_p\eta\|/\sigma}}
               {\sigma^d\,\Gamma(d)\,|S^{d-1}|},

Gaussian or K-norm, with no Jacobian (the law is on ``R^d``, not on the manifold): the
model observes ``u`` (``Release.tangent["coords"]``), not the point ``Exp_p(u)``, whose
law wraps on curved spaces. Tangent and Laplace releases of the same data mix freely
(independent noise: the product). A two-stage release is refused: its point ``p`` was
itself drawn from the data (stage 1), so ``u`` alone gives a partial likelihood.

KNG is refused: the likelihood of a KNG release ``x~`` given the data ``D`` is

.. math:: p(\tilde x \mid D) = e^{-\|\nabla F(\tilde x; D)\|/\sigma} / Z(D),
          \qquad Z(D) = \int_{B_r(m_0)} e^{-\|\nabla F(y; D)\|/\sigma}\,dV(y),

``nabla F(x; D) = -(1/n) sum_i log_x(x_i)``: it depends on the whole data set through
the gradient field of its Fréchet function, not on its mean alone (two data sets with
the same mean give different laws), so it is no likelihood of ``eta``. It is one only
in a model whose variables are the records themselves, which this function does not
build.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import pymc as pm

from pymc_manidp.geometry.capabilities import BallExit, UniformLaw
from pymc_manidp.laws.charts import PolarChart, point_dims
from pymc_manidp.laws.distributions import ManifoldLaplace, exact_batch_draw
from pymc_manidp.laws.restricted import ball_quadrature, restricted_laplace_log_normalizer

__all__ = ["noise_aware_data", "noise_aware_model"]

_LAPLACE = "manifold Laplace"
#: the tangent mechanisms' names (``Release.mechanism``) and their noise
_TANGENT = {"tangent Gaussian": "gaussian", "tangent Laplace": "k-norm"}
_TWO_STAGE = "two-stage tangent Gaussian"
_SIGMA_RANGE = (1e-150, 1e150)
_KNG_REASON = (
    "the likelihood of a KNG release is exp(-|grad F(x~; D)|/sigma)/Z(D), with Z(D) the "
    "integral of the numerator over the public ball: it depends on the whole data set D "
    "(the gradient field of its Fréchet function), not on its mean alone, so it is no "
    "likelihood of the mean; use a manifold Laplace release for noise-aware inference"
)


@dataclass(frozen=True)
class _Published:
    """One published release as the likelihood needs it (all public)."""

    value: np.ndarray
    sigma: float
    restricted: bool
    center: np.ndarray | None
    radius: float | None
    #: a tangent release: ``(p, u, noise)`` (``value`` is then ``Exp_p(u)``)
    tangent: tuple | None = None


@dataclass(frozen=True)
class _Structure:
    """What a noise-aware model was built from, apart from the released values."""

    manifold: object
    releases: tuple  # of _Published, as built
    single: bool
    chart: bool  # whether the default prior's chart is pm.Data


def _get(record, key, default=None):
    if isinstance(record, dict):
        return record.get(key, default)
    return getattr(record, key, default)


def _read(record, manifold, restricted) -> _Published:
    """Check one published record and read what its likelihood needs."""
    if isinstance(record, dict) and isinstance(record.get("release"), dict):
        # the CLI's JSON document: the public record plus the ball and the options
        doc, record = record, dict(record["release"])
        record.setdefault("public_ball", doc.get("public_ball"))
        if record.get("restricted") is None and "restrict" in doc.get("options", {}):
            record["restricted"] = bool(doc["options"]["restrict"])
    mechanism = _get(record, "mechanism")
    if mechanism == _TWO_STAGE:
        raise ValueError(
            "noise-aware inference refuses a two-stage tangent release: its tangent point "
            "was drawn from the data (stage 1, whose law the record does not carry), so "
            "the tangent coordinates alone give a partial likelihood; use "
            "pmd.TangentGaussianMechanism at a public point"
        )
    if mechanism in _TANGENT:
        return _read_tangent(record, manifold, mechanism)
    if mechanism == "KNG":
        raise ValueError(f"noise-aware inference refuses a KNG release: {_KNG_REASON}")
    if mechanism == "KNG-regression":
        raise ValueError(
            "a geodesic regression release (KNG-regression) is modelled by "
            "pmd.noise_aware_regression_model(release, manifold, covariates, ...): its "
            "parameter is a pair (p, v) and its likelihood needs the public covariates "
            "and bounds, which the record does not carry"
        )
    if mechanism != _LAPLACE:
        raise ValueError(
            f"noise-aware inference needs a {_LAPLACE!r} or a tangent release "
            f"({', '.join(map(repr, _TANGENT))}), got {mechanism!r}: its likelihood is "
            "known only for these"
        )
    spec = _get(record, "manifold")
    if spec is not None and spec != repr(manifold):
        raise ValueError(f"the release was made on {spec}, not on {manifold!r}")
    said = _get(record, "restricted")
    if said is not None and restricted is not None and bool(said) != bool(restricted):
        raise ValueError(
            f"the record says restricted={bool(said)}, the call restricted={restricted}"
        )
    if said is None and restricted is None:
        raise ValueError(
            "the record does not say whether the Laplace was restricted to the public ball "
            "(the likelihoods differ): publish Release.public(), which says so, or pass "
            "restricted=True/False"
        )
    is_restricted = bool(said if said is not None else restricted)
    center = radius = None
    if is_restricted:
        ball = _get(record, "public_ball")
        if ball is None and _get(record, "center") is not None:
            ball = {"center": _get(record, "center"), "radius": _get(record, "radius")}
        if ball is None or ball.get("center") is None or ball.get("radius") is None:
            raise ValueError(
                "a restricted release's likelihood needs its public ball (center and "
                "radius), which the record does not carry: publish Release.public()"
            )
        center = manifold.validate(np.asarray(ball["center"], float))
        radius = float(ball["radius"])
    value = manifold.validate(np.asarray(_get(record, "value"), float))
    if is_restricted and not manifold.dist(center, value) <= radius * (1 + 1e-9):
        raise ValueError(
            "the restricted release lies outside its public ball: it cannot come from the "
            "restricted Laplace on that ball"
        )
    return _Published(value, float(_get(record, "sigma")), is_restricted, center, radius)


def _read_tangent(record, manifold, mechanism) -> _Published:
    """A tangent release: its point ``p``, coordinates ``u``, σ and public ball."""
    spec = _get(record, "manifold")
    if spec is not None and spec != repr(manifold):
        raise ValueError(f"the release was made on {spec}, not on {manifold!r}")
    t = _get(record, "tangent")
    if not isinstance(t, dict) or t.get("point") is None or t.get("coords") is None:
        raise ValueError(
            f"a {mechanism!r} release's likelihood needs its tangent coordinates and "
            "point ('tangent': {'point': ..., 'coords': ...}), which the record does not "
            "carry: publish Release.public()"
        )
    noise = _TANGENT[mechanism]
    if t.get("noise", noise) != noise:
        raise ValueError(f"the record's tangent noise {t.get('noise')!r} is not {mechanism}'s")
    point = manifold.validate(np.asarray(t["point"], float))
    if point.shape != tuple(manifold.point_shape):
        raise ValueError(f"tangent.point must be one point of shape {manifold.point_shape}")
    coords = _tangent_coords(manifold, t["coords"])
    sigma = _get(record, "sigma")
    if isinstance(sigma, bool) or not isinstance(sigma, int | float | np.integer | np.floating):
        raise TypeError(f"sigma must be a number, got {type(sigma).__name__}")
    sigma = float(sigma)
    # 1/sigma^2 and sigma^d must be normal floats for the log-density (a mechanism's
    # sigma is far inside; a subnormal one made PyTensor's constant folding overflow)
    if not _SIGMA_RANGE[0] <= sigma <= _SIGMA_RANGE[1]:
        raise ValueError(
            f"sigma must be in [{_SIGMA_RANGE[0]:g}, {_SIGMA_RANGE[1]:g}] for a tangent "
            f"release's likelihood, got {sigma!r}: pass the release's own sigma"
        )
    ball = _get(record, "public_ball")
    center = radius = None
    if isinstance(ball, dict) and ball.get("center") is not None:
        center = manifold.validate(np.asarray(ball["center"], float))
        radius = float(ball["radius"])
    return _Published(
        _released_point(manifold, point, coords), sigma, False, center, radius,
        (point, coords, noise),
    )  # fmt: skip


def _released_point(manifold, point, coords):
    """``Exp_p(u)``, only to place the default prior's chart: ``p`` itself where ``u``
    is too long for the manifold's floats (the chart then goes to the ball's center)."""
    try:
        with np.errstate(all="ignore"):
            value = manifold.validate(np.asarray(manifold.exp_coords(point, coords), float))
    except (ValueError, FloatingPointError, OverflowError):
        return point
    return value if np.all(np.isfinite(value)) else point


def _tangent_coords(manifold, coords) -> np.ndarray:
    """Checked tangent coordinates ``u``: ``dim`` finite numbers."""
    u = np.asarray(coords, dtype=float)
    if u.shape != (manifold.dim,) or not np.all(np.isfinite(u)):
        raise ValueError(
            f"tangent coordinates must be {manifold.dim} finite numbers (the release's "
            f"Release.tangent['coords']), got shape {u.shape}"
        )
    return u


def tangent_noise(noise, dim, sigma, size, rng):
    """``size`` draws ``(size, dim)`` of a tangent mechanism's noise Z: ``N(0, sigma^2 I)``
    or the K-norm law (a ``Gamma(dim, sigma)`` radius, a uniform direction)."""
    if noise == "gaussian":
        return sigma * rng.standard_normal((size, dim))
    g = rng.standard_normal((size, dim))
    return rng.gamma(dim, sigma, size=(size, 1)) * g / np.linalg.norm(g, axis=1, keepdims=True)


def _tangent_likelihood(obs, manifold, eta, rec, observed):
    """The observed tangent coordinates: ``u ~ f(u - E_p^T Log_p eta)`` on ``R^d``."""
    import pytensor.tensor as pt
    from scipy import special

    point, _, noise = rec.tangent
    frame = {k: pt.as_tensor_variable(v) for k, v in manifold.chart_frame(point).items()}
    loc = manifold.pt_log_frame(frame, eta)
    sigma, d = rec.sigma, int(manifold.dim)
    if noise == "gaussian":
        log_z = 0.5 * d * np.log(2 * np.pi * sigma**2)
    else:  # sigma^d Gamma(d) |S^{d-1}|, |S^{d-1}| = 2 pi^{d/2}/Gamma(d/2)
        log_z = (
            d * np.log(sigma) + special.gammaln(d) + np.log(2.0) + 0.5 * d * np.log(np.pi)
            - special.gammaln(0.5 * d)
        )  # fmt: skip

    def logp(value, mean):
        r2 = pt.sum((value - mean) ** 2, axis=-1)
        if noise == "gaussian":
            return -0.5 * r2 / sigma**2 - log_z
        # sqrt has no gradient at 0: the norm's kink is a set of measure zero
        return -pt.sqrt(r2 + 1e-300) / sigma - log_z

    def random(mean, rng=None, size=None):
        m = int(np.prod(size)) if size else 1
        z = tangent_noise(noise, d, sigma, m, rng)
        shape = tuple(size) if size else ()
        return (np.asarray(mean) + z.reshape((*shape, d))).reshape((*shape, d))

    return pm.CustomDist(
        obs, loc, logp=logp, random=random, signature="(d)->(d)", observed=observed
    )


def _chart_origin(manifold, published):
    """Origin and scale of the default prior's polar chart, given the releases.

    At the release with the smallest sigma (its cusp is the sharpest the posterior
    has; at the origin the polar chart smooths it away), with restricted releases the
    sharpest restricted one, and the scale its sigma (at most r/2 in a ball). A
    restricted release closer than its sigma to the ball's edge moves the origin to the
    ball's center: the chart, capped at the edge, would be squeezed into the thin side
    (NUTS diverged there: 7 of 2,000 transitions at sigma = 0.3, r = 0.5, 0.1 from the
    edge; none with the center's chart) while the cusp is mild at such a sigma.
    """
    candidates = [i for i, p in enumerate(published) if p.center is not None] or range(
        len(published)
    )
    rel = published[min(candidates, key=lambda i: published[i].sigma)]
    if rel.center is None:
        return rel.value, rel.sigma
    scale = min(rel.sigma, rel.radius / 2)
    # a tangent release's point Exp_p(u) may lie outside the ball (the noise is not
    # restricted): then too the center
    if rel.radius - manifold.dist(rel.center, rel.value) < rel.sigma:
        return rel.center, scale
    return rel.value, scale


def _ball_of(published):
    """The public ball of the restricted and tangent releases (one ball for all: the
    data's Fréchet mean lies in it), or None."""
    balls = [(p.center, p.radius) for p in published if p.center is not None]
    if not balls:
        return None
    c0, r0 = balls[0]
    if any(not (np.allclose(c, c0) and np.isclose(r, r0)) for c, r in balls[1:]):
        return "several"
    return c0, r0


def _restricted_likelihood(obs, manifold, eta, rec, observed, dims):
    """The observed restricted Laplace: e^{-rho/sigma}/Z_B(eta) on the ball."""
    import pytensor.tensor as pt

    from pymc_manidp.laws.exact import sample_laplace
    from pymc_manidp.stats.domain import DataDomain

    domain = DataDomain(manifold, rec.center, rec.radius)
    quad = ball_quadrature(manifold, rec.center, rec.radius, rec.sigma)
    sigma = rec.sigma

    def logp(value, footpoint):
        inside = manifold.pt_dist(pt.as_tensor_variable(rec.center), value) <= rec.radius * (
            1 + 1e-9
        )
        lp = -manifold.pt_dist(footpoint, value) / sigma
        lp = lp - restricted_laplace_log_normalizer(manifold, quad, footpoint, sigma)
        return pt.switch(inside, lp, -np.inf)

    @exact_batch_draw
    def random(footpoint, rng=None, size=None):
        m = int(np.prod(size)) if size else 1
        pts = sample_laplace(manifold, np.asarray(footpoint), sigma, m, rng, domain=domain).points
        shape = tuple(size) if size else ()
        return np.asarray(pts).reshape((*shape, *manifold.point_shape))

    core = ",".join(f"p{i}" for i in range(len(manifold.point_shape)))
    return pm.CustomDist(
        obs,
        eta,
        logp=logp,
        random=random,
        signature=f"({core})->({core})",
        observed=observed,
        dims=dims,
    )


def _uniform_prior(name, manifold, ball, chart, dims):
    """The uniform law on the compact manifold (``ball`` None) or on the public ball
    ``(center, radius)``, sampled in ``chart`` (at a release; capped at the ball's edge)."""
    import pytensor.tensor as pt

    from pymc_manidp.laws.charts import log_volume

    if ball is None:
        log_vol = float(log_volume(manifold))
    else:
        center, radius = ball
        quad = ball_quadrature(manifold, center, radius, radius)
        log_vol = float(np.logaddexp.reduce(quad.log_weights))
    sample_uniform = manifold.sample_uniform
    nshape = len(manifold.point_shape)

    def logp(value, _anchor):
        return pt.zeros(value.shape[: value.ndim - nshape]) - log_vol

    @exact_batch_draw
    def random(_anchor, rng=None, size=None):
        m = int(np.prod(size)) if size else 1
        if ball is None:
            pts = sample_uniform(rng, (m,))
        else:  # rejection from the uniform law on the manifold
            out, got = [], 0
            while got < m:
                x = sample_uniform(rng, (max(64, 4 * m),))
                out.append(x[manifold.dist(center, x) <= radius])
                got += len(out[-1])
            pts = np.concatenate(out)[:m]
        return pts.reshape((*(tuple(size) if size else ()), *manifold.point_shape))

    # PyMC rewrites the logp in a FunctionGraph whose inputs are the roots of the
    # variable's own graph: the chart's pm.Data must be among them (as in
    # mcmc.polar_model), so the law's one (unused) parameter, a point that also gives
    # PyMC the support's shape, carries them with weight zero
    frame = chart.frame
    anchor = pt.as_tensor_variable(frame["origin"]) + 0.0 * sum(
        pt.sum(pt.as_tensor_variable(t)) for t in frame.values()
    )
    # the start: one chart scale from the release along the chart's diagonal (at the
    # release itself the polar chart's log-radius is -inf)
    u = np.full(manifold.dim, 1.0 / np.sqrt(manifold.dim))
    start = manifold.pt_exp_frame(frame, pt.as_tensor_variable(chart.scale) * u)
    core = ",".join(f"p{i}" for i in range(nshape))
    return pm.CustomDist(
        name,
        anchor,
        logp=logp,
        random=random,
        signature=f"({core})->({core})",
        default_transform=chart,
        initval=start,
        dims=dims,
    )


def noise_aware_model(releases, manifold, prior=None, *, name="mean", restricted=None):
    r"""PyMC model of the footpoint behind published manifold Laplace or tangent release(s).

    .. math:: \eta \sim \pi, \qquad \tilde x_j \mid \eta \sim
              \mathrm{ManifoldLaplace}(\eta, \sigma_j)\ \text{(observed, independent)},

    each restricted release with its footpoint-dependent normalizer ``Z_B(eta, sigma_j)``
    (module docstring).

    Parameters
    ----------
    releases : Release, dict or list of them
        What was published: ``Release.public()`` (or the :class:`~pymc_manidp.privacy.Release`,
        or the CLI's JSON document), with ``value``, ``mechanism`` (``"manifold
        Laplace"``, ``"tangent Gaussian"`` or ``"tangent Laplace"``), ``sigma``,
        ``restricted`` and, when restricted, ``public_ball``; a tangent release needs
        ``tangent`` (its point and coordinates, observed in place of ``value``) and
        gives the default prior its ``public_ball``; ``manifold`` is checked when
        present. A list: several releases of the same data, mechanisms mixed (product
        likelihood).
    manifold : Manifold
        The manifold the releases live on.
    prior : callable, optional
        ``prior(name, **kwargs)`` creates the prior variable of the footpoint inside
        the model (e.g. ``lambda n, **kw: pmd.ManifoldLaplace(n, M, m0, 0.5, **kw)``);
        ``kwargs`` carry the point's ``dims``. On a sphere, a von Mises–Fisher prior
        for the true mean direction: ``lambda n, **kw: pmd.VonMisesFisher(n, mu0,
        kappa, **kw)``, with ``mu0`` and ``kappa`` numbers or random variables made
        in the callable (it runs inside the model; example below). Then the model has
        those variables too: name the footpoint (``var=name``) in
        :func:`~pymc_manidp.calibration_study`. Default: the uniform law, on the whole
        compact manifold (as :class:`ManifoldUniform`) or, when a release is restricted,
        on its public ball (the data's Fréchet mean lies in it), sampled in the polar
        chart at the release with the smallest ``sigma`` (capped at the ball's edge).
    name : str
        Name of the footpoint variable.
    restricted : bool, optional
        For records that do not say whether the law was restricted to the public ball
        (``Release.public()`` does); must agree with the record otherwise.

    Returns
    -------
    pm.Model
        With the footpoint ``name`` and the observed ``release`` (``release_0``,
        ``release_1``, ... for a list), whose values are the ``pm.Data`` ``released``
        (``released_0``, ...); the default prior's chart is ``pm.Data`` too
        (``chart_origin``, ``chart_basis``). :func:`noise_aware_data` gives their
        values for new releases.

    Raises
    ------
    ValueError
        A KNG or a two-stage tangent release (module docstring), a geodesic regression
        release (:func:`~pymc_manidp.laws.noise_aware_regression_model` models it),
        another mechanism, a
        tangent release without its coordinates or with ``sigma`` outside
        ``[1e-150, 1e150]``, a manifold other than the record's, a record
        that does not say whether it was restricted, a restricted record without its
        ball or outside it, the default prior on a non-compact manifold, or restricted
        releases on different balls with the default prior.

    Examples
    --------
    >>> import numpy as np
    >>> import pymc_manidp as pmd
    >>> S = pmd.Sphere(dim=2)
    >>> published = {"value": np.array([0.0, 0.0, 1.0]), "mechanism": "manifold Laplace",
    ...              "sigma": 0.1, "restricted": False}
    >>> m = noise_aware_model(published, S)
    >>> [v.name for v in m.free_RVs], [v.name for v in m.observed_RVs]
    (['mean'], ['release'])
    >>> m2 = noise_aware_model([published, {**published, "sigma": 0.2}], S)
    >>> [v.name for v in m2.observed_RVs]
    ['release_0', 'release_1']

    A von Mises–Fisher prior on the true mean direction, with a random concentration:

    >>> import pymc as pm
    >>> def vmf_prior(name, **kw):
    ...     kappa = pm.Gamma("kappa", 2.0, 0.5)
    ...     return pmd.VonMisesFisher(name, [1.0, 0.0, 0.0], kappa, **kw)
    >>> m3 = noise_aware_model(published, S, prior=vmf_prior)
    >>> [v.name for v in m3.free_RVs]
    ['kappa', 'mean']
    """
    if prior is not None and not callable(prior):
        # a law made with .dist() has no name and no dims in this model: refused before
        # anything is built, with the form that works
        raise TypeError(
            f"prior must be a callable prior(name, **kwargs) that creates the footpoint's "
            f"variable in the model, got {type(prior).__name__}: e.g. "
            "prior=lambda n, **kw: pmd.VonMisesFisher(n, mu0, kappa, **kw)"
        )
    single = not isinstance(releases, (list, tuple))
    records = [releases] if single else list(releases)
    if not records:
        raise ValueError("no release given")
    published = tuple(_read(r, manifold, restricted) for r in records)
    suffixes = [""] if single else [f"_{i}" for i in range(len(published))]
    dims = point_dims(manifold)
    pdims = tuple(dims)
    with pm.Model(coords=dims) as model:
        observed = [
            pm.Data(f"released{s}", p.tangent[1])
            if p.tangent is not None
            else pm.Data(f"released{s}", p.value, dims=pdims)
            for p, s in zip(published, suffixes, strict=True)
        ]
        if prior is None:
            eta = _default_prior(name, manifold, published, pdims)
        else:
            eta = prior(name, dims=pdims)
        for p, s, x in zip(published, suffixes, observed, strict=True):
            if p.tangent is not None:
                _tangent_likelihood(f"release{s}", manifold, eta, p, x)
            elif p.restricted:
                _restricted_likelihood(f"release{s}", manifold, eta, p, x, pdims)
            else:
                ManifoldLaplace(f"release{s}", manifold, eta, p.sigma, observed=x, dims=pdims)
    model.noise_aware = _Structure(manifold, published, single, prior is None)
    return model


def _default_prior(name, manifold, published, pdims):
    """Uniform on the compact manifold, or on the restricted releases' public ball."""
    ball = _ball_of(published)
    if ball == "several":
        raise ValueError(
            "the restricted releases declare different public balls: the default prior "
            "(uniform on the ball) is ambiguous; pass prior="
        )
    origin, scale = _chart_origin(manifold, published)
    frame = {k: pm.Data(f"chart_{k}", v) for k, v in manifold.chart_frame(origin).items()}
    if not isinstance(manifold, UniformLaw) or not np.isfinite(manifold.log_volume):
        raise ValueError(
            f"the default prior is uniform, which needs a compact manifold: {manifold} "
            "has infinite volume; pass prior= (e.g. a ManifoldLaplace around a public point)"
        )
    if ball is None:
        chart = PolarChart(manifold, frame, scale=float(scale))
        return _uniform_prior(name, manifold, None, chart, pdims)
    if not isinstance(manifold, BallExit):
        raise ValueError(
            f"the default prior (uniform on the public ball) is not available on "
            f"{manifold}: pass prior="
        )
    from pymc_manidp.stats.domain import DataDomain

    center, radius = ball
    chart = PolarChart(
        manifold,
        frame,
        scale=float(scale),
        domain=DataDomain(manifold, center, radius),
    )
    return _uniform_prior(name, manifold, ball, chart, pdims)


def noise_aware_data(model, releases) -> dict:
    """The values of every ``pm.Data`` of a :func:`noise_aware_model` for new releases.

    The model's structure (the mechanism of each release, its σ, whether restricted,
    the ball, the manifold) is fixed when it is built; only the released values
    change. ``pm.set_data(noise_aware_data(model, new), model=model)`` then samples the
    posterior given ``new`` without building (or compiling) another model.

    Parameters
    ----------
    model : pm.Model
        Built by :func:`noise_aware_model`.
    releases : Release, dict, array or a list of them
        As many as the model was built with: records (checked to be of the same kind:
        σ, restricted, ball) or bare values (points of the manifold).

    Returns
    -------
    dict of str to ndarray
        ``released`` (or ``released_0``, ...) and, with the default prior, the chart
        ``chart_origin`` and ``chart_basis``.

    Examples
    --------
    >>> import numpy as np, pymc as pm
    >>> import pymc_manidp as pmd
    >>> S = pmd.Sphere(dim=2)
    >>> rec = {"value": [0.0, 0.0, 1.0], "mechanism": "manifold Laplace", "sigma": 0.1,
    ...        "restricted": False}
    >>> m = noise_aware_model(rec, S)
    >>> values = noise_aware_data(m, np.array([0.0, 1.0, 0.0]))
    >>> sorted(values)
    ['chart_basis', 'chart_origin', 'released']
    >>> pm.set_data(values, model=m)
    """
    structure = getattr(model, "noise_aware", None)
    if not isinstance(structure, _Structure):
        raise ValueError("the model was not built by noise_aware_model")
    M = structure.manifold
    items = [releases] if structure.single else list(releases)
    if len(items) != len(structure.releases):
        raise ValueError(
            f"the model was built for {len(structure.releases)} releases, got {len(items)}"
        )
    new = []
    for item, old in zip(items, structure.releases, strict=True):
        if isinstance(item, dict) or hasattr(item, "mechanism"):
            p = _read(item, M, old.restricted)
            same = np.isclose(p.sigma, old.sigma) and p.restricted == old.restricted
            same = same and (p.tangent is None) == (old.tangent is None)
            if same and p.tangent is not None:
                same = p.tangent[2] == old.tangent[2] and np.allclose(p.tangent[0], old.tangent[0])
            if same and p.restricted:
                same = np.allclose(p.center, old.center) and np.isclose(p.radius, old.radius)
            if not same:
                raise ValueError(
                    "a new release must be of the kind the model was built for (same sigma, "
                    "restricted or not, same ball, same tangent point and noise): build a "
                    "new model for it"
                )
            new.append(p)
        elif old.tangent is not None:  # bare tangent coordinates u at the model's point
            u = _tangent_coords(M, item)
            value = _released_point(M, old.tangent[0], u)
            new.append(
                dataclasses.replace(old, value=value, tangent=(*old.tangent[:1], u, old.tangent[2]))
            )
        else:
            new.append(dataclasses.replace(old, value=M.validate(np.asarray(item, float))))
    suffixes = [""] if structure.single else [f"_{i}" for i in range(len(new))]
    values = {
        f"released{s}": p.value if p.tangent is None else p.tangent[1]
        for s, p in zip(suffixes, new, strict=True)
    }
    if structure.chart:
        origin, _ = _chart_origin(M, new)
        values.update({f"chart_{k}": v for k, v in M.chart_frame(origin).items()})
    return values
