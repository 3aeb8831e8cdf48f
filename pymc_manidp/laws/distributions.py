r"""PyMC distributions of the two mechanisms and the uniform law, valued on the manifold.

Each is written the way PyMC writes its own: a :class:`~pytensor.tensor.random.op.RandomVariable`
whose ``rng_fn`` is the library's exact sampler (:mod:`pymc_manidp.laws.exact`),
and a :class:`pymc.Distribution` with ``rv_op``, ``dist``, ``logp`` and
``support_point``. So ``pm.draw``, prior and posterior predictive sampling,
``pm.model_to_graphviz``, ``pm.compute_log_likelihood``, ``pm.observe`` and ``pm.do``
work, and ``size=``/``shape=`` give batches of independent draws with the usual
broadcasting of the parameters.

The manifold (and the public ball) is part of the ``Op``: one ``Op`` per manifold,
as ``MvNormal``'s ``ndim_supp`` belongs to its ``Op``. Values are points in embedding
coordinates (a unit vector, an SPD matrix, a pre-shape), so ``ndim_supp`` is 1 on
spheres and Euclidean spaces, 2 on SPD and Kendall shapes.

Log-densities are w.r.t. the Riemannian volume. Where the normalizer does not depend
on the footpoint (the unrestricted Laplace on a homogeneous space) it is included
(:func:`laplace_log_normalizer`), so a random ``sigma`` and model comparison are
right. The ball-restricted Laplace and KNG stay unnormalized (their normalizer
depends on the footpoint or the data): their ``sigma``, footpoint and data must not
depend on random variables (constants and ``pm.Data`` are fine).

Latent (unobserved) variables are sampled in the
:class:`~pymc_manidp.laws.charts.PolarChart` at the footpoint (KNG:
at the Fréchet mean of the data), which NUTS crosses without
meeting the density's cusp; observed values get no transform (``default_transform``).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytensor.tensor as pt
from pymc.distributions.dist_math import check_parameters
from pymc.distributions.distribution import Continuous, _support_point
from pymc.distributions.transforms import _default_transform
from pymc.logprob.abstract import _logprob
from pymc.pytensorf import normalize_rng_param
from pytensor.compile.sharedvalue import SharedVariable
from pytensor.graph.basic import Constant, Variable
from pytensor.graph.traversal import ancestors
from pytensor.tensor.elemwise import DimShuffle
from pytensor.tensor.random.op import RandomVariable

from pymc_manidp._validation import check_positive_real
from pymc_manidp.geometry.capabilities import (
    BallExit,
    GaussianChart,
    GenericPoint,
    NoiseMap,
    Origin,
    UniformLaw,
)
from pymc_manidp.laws.charts import (
    ChartTransform,
    MovingTangentChart,
    NormalizedGaussian,
    PolarChart,
    generic_noise,
    log_volume,
)
from pymc_manidp.laws.normalizers import has_laplace_normalizer, laplace_log_normalizer
from pymc_manidp.stats.reductions import CheckedData

__all__ = [
    "KNG",
    "KNGRV",
    "STATISTICS",
    "ManifoldLaplace",
    "ManifoldLaplaceRV",
    "ManifoldUniform",
    "ManifoldUniformRV",
    "kng_logp",
    "laplace_log_normalizer",
    "laplace_logp",
    "pt_median_gradient_norm",
]

#: the statistics KNG releases: the Fréchet mean's gradient or the Fréchet median's
STATISTICS: tuple[str, ...] = ("mean", "median")


# --- helpers --------------------------------------------------------------------------
def _value_of(x):
    """NumPy value of a constant or a ``pm.Data`` (its current value); None for graphs.

    Leading broadcast axes that an ``Op`` adds to its parameters (``size``) are peeled.
    """
    while isinstance(x, Variable) and x.owner is not None and isinstance(x.owner.op, DimShuffle):
        if not x.owner.op.is_left_expand_dims:  # a transpose or drop: another array
            return None
        x = x.owner.inputs[0]
    if isinstance(x, Constant):
        return np.asarray(x.data, float)
    if isinstance(x, SharedVariable):
        return np.asarray(x.get_value(), float)
    if isinstance(x, Variable):
        return None
    return np.asarray(x, float)


def _is_constant(x) -> bool:
    return not isinstance(x, Variable) or isinstance(x, Constant)


def _depends_on_random(x) -> bool:
    """Whether ``x`` is (a function of) a random variable: then it is not a constant."""
    if not isinstance(x, Variable):
        return False
    return any(
        v.owner is not None and isinstance(v.owner.op, RandomVariable) for v in ancestors([x])
    ) or any(
        v.owner is not None and type(v.owner.op).__name__.endswith("RV") for v in ancestors([x])
    )


def _core(manifold) -> str:
    return ",".join(f"p{i}" for i in range(len(manifold.point_shape)))


def _check_sigma(sigma):
    if _is_constant(sigma):
        sig = np.asarray(sigma.data if isinstance(sigma, Constant) else sigma, float)
        if np.ndim(sig) == 0:
            check_positive_real(float(sig), "sigma")
        elif not (np.all(np.isfinite(sig)) and np.all(sig > 0)):
            raise ValueError("sigma must be finite and > 0 everywhere")
    return pt.as_tensor_variable(sigma, dtype="floatX")


def _check_point(manifold, x, name):
    """Validate a constant point eagerly (returns its standard form); tensors pass."""
    x = manifold.coerce(x)  # e.g. a SciPy Rotation: its matrices
    if _is_constant(x):
        val = manifold.validate(np.asarray(x.data if isinstance(x, Constant) else x, float))
        return pt.as_tensor_variable(val)
    return pt.as_tensor_variable(x)


def _sigma_conditions(sigma):
    return [pt.gt(sigma, 0), pt.isfinite(sigma)]


def _point_conditions(manifold, x):
    """In-graph checks of a point that may be a tensor (the manifold's cheap ones)."""
    return manifold.pt_point_checks(x)


def _restrict(logp, manifold, value, domain):
    if domain is None:
        return logp
    inside = manifold.pt_dist(pt.as_tensor_variable(domain.center), value) <= domain.radius
    return pt.switch(inside, logp, -np.inf)


def _broadcast_size(point, size, manifold):
    if size is None or (isinstance(size, Variable) and _is_none(size)):
        return point
    return pt.broadcast_to(point, (*tuple(size), *manifold.point_shape))


def _is_none(size):
    from pymc.distributions.shape_utils import rv_size_is_none

    return rv_size_is_none(size)


def _off_center(manifold, center, scale):
    """A point one ``scale`` from ``center`` (numeric center): off the cusp, for NUTS."""
    d = manifold.dim
    u = np.full(d, 1.0 / np.sqrt(d))
    return manifold.pt_exp_frame(manifold.chart_frame(center), pt.as_tensor_variable(scale) * u)


def _batched(params, nds, size, point_shape):
    """Broadcast parameters with core dims ``nds`` to a common batch; flat copies."""
    batch = np.broadcast_shapes(
        *(np.shape(p)[: np.ndim(p) - nd] for p, nd in zip(params, nds, strict=True))
    )
    if size is not None:
        batch = tuple(size)
    flat = [
        np.broadcast_to(p, batch + np.shape(p)[np.ndim(p) - nd :]).reshape(
            (-1, *np.shape(p)[np.ndim(p) - nd :])
        )
        for p, nd in zip(params, nds, strict=True)
    ]
    return batch, flat


def _draw_batched(params, nds, size, point_shape, draw):
    """Call ``draw(*core_params, m)`` once per distinct parameter set of the batch."""
    batch, flat = _batched(params, nds, size, point_shape)
    m = int(np.prod(batch, dtype=int))
    out = np.empty((m, *point_shape))
    if m == 0:
        return out.reshape(batch + tuple(point_shape))
    same = all(np.all(f == f[:1]) for f in flat)
    if same:
        out[:] = draw(*(f[0] for f in flat), m)
    else:
        for i in range(m):
            out[i] = draw(*(f[i] for f in flat), 1)[0]
    return out.reshape(batch + tuple(point_shape))


# --- log-densities ---------------------------------------------------------------------
def laplace_logp(manifold, value, footpoint, sigma, domain=None, normalized=True):
    r"""Log-density of the manifold Laplace w.r.t. the Riemannian volume.

    .. math:: \log f(x) = -\rho(\eta, x)/\sigma - \log Z(\sigma)
              \quad (x \in B_r(m_0) \text{ and no } Z \text{ if restricted})

    ``Z`` is :func:`laplace_log_normalizer` where it exists (``normalized=True``,
    no ``domain``), else left out.

    Parameters
    ----------
    manifold : Manifold
        The manifold of the points.
    value : tensor, shape ``(..., *point_shape)``
        Where the density is evaluated.
    footpoint : tensor, shape ``(..., *point_shape)``
        The footpoint ``eta``.
    sigma : float or tensor, shape ``(...)``
        The scale ``sigma > 0``.
    domain : DataDomain, optional
        Restrict the support to the closed ball ``B_r(m0)`` (``-inf`` outside).
    normalized : bool, default True
        Subtract ``log Z(sigma)`` where it is known (unrestricted law only).

    Returns
    -------
    TensorVariable
        The log-density, shape ``(...)`` (the batch shape of ``value``, ``footpoint``
        and ``sigma`` broadcast).

    Examples
    --------
    >>> import numpy as np
    >>> import pymc_manidp as pmd
    >>> E = pmd.Euclidean(dim=1)
    >>> lp = laplace_logp(E, np.array([1.0]), np.array([0.0]), 0.5).eval()
    >>> bool(np.isclose(lp, -2.0 - np.log(2 * 0.5)))
    True
    """
    logp = -manifold.pt_dist(footpoint, value) / sigma
    if normalized and domain is None:
        log_z = laplace_log_normalizer(manifold, sigma)
        if log_z is not None:
            logp = logp - log_z
    return _restrict(logp, manifold, value, domain)


def _check_statistic(statistic) -> str:
    if statistic not in STATISTICS:
        raise ValueError(
            f"statistic must be one of {', '.join(map(repr, STATISTICS))}, got {statistic!r}"
        )
    return statistic


#: records closer than this to the point (in the manifold's length unit) have their
#: unit vector shrunk smoothly to 0: a finite gradient for NUTS (see pt_median_gradient_norm)
MEDIAN_SMOOTHING = 1e-10


def pt_median_gradient_norm(manifold, x, data):
    r"""``|grad F(x)|`` of the Fréchet median's objective, as a tensor (KNG's median norm).

    .. math:: \Big\|\frac1n \sum_{i=1}^n
              \frac{\log_x(x_i)}{\sqrt{\|\log_x(x_i)\|_x^2 + s^2}}\Big\|_x,
              \qquad s = 10^{-10} R,

    by the manifold's ``pt_log`` and ``pt_inner`` (``n`` logarithms at ``x``). The
    exact unit vector ``log/|log|`` has no value at a record and a gradient ``~1/ρ``
    near one; with ``s`` it is smooth, equal to the exact one to ``s²/2ρ²`` relative
    for ``ρ >> s``, and 0 at the record (as in the NumPy density). The density then
    changes only within ``~s`` of the records, a set of negligible volume, and its
    gradient stays finite, though it is steep (``~1/(nσρ)``) close to each record:
    NUTS may take small steps or diverge there (the diagnostics gate sees it).

    Parameters
    ----------
    manifold : Manifold
        The manifold of the points.
    x : tensor, shape ``(..., *point_shape)``
        Where the norm is evaluated.
    data : tensor, shape ``(n, *point_shape)``
        The records.

    Returns
    -------
    TensorVariable
        Shape ``(...)``, values in ``[0, 1]``.

    Examples
    --------
    >>> import numpy as np
    >>> import pymc_manidp as pmd
    >>> E = pmd.Euclidean(dim=2)
    >>> data = np.array([[1.0, 0.0], [3.0, 0.0], [0.0, 2.0]])
    >>> round(float(pt_median_gradient_norm(E, np.zeros(2), data).eval()), 6)  # |(2, 1)|/3
    0.745356
    """
    x = pt.as_tensor_variable(x)
    data = pt.as_tensor_variable(data)
    nd = len(manifold.point_shape)
    n = data.shape[0]
    xb = pt.expand_dims(x, -nd - 1)
    xb = pt.broadcast_to(xb, (*[x.shape[i] for i in range(x.ndim - nd)], n, *manifold.point_shape))
    logs = manifold.pt_log(xb, data)
    scale = float(getattr(manifold, "radius", 1.0)) * MEDIAN_SMOOTHING
    norms = pt.sqrt(manifold.pt_inner(xb, logs, logs) + scale**2)  # (..., n)
    units = logs / pt.shape_padright(norms, nd)
    return manifold.pt_norm(x, pt.sum(units, axis=-nd - 1)) / n


def kng_logp(manifold, value, data, sigma, domain, statistic="mean"):
    r"""Unnormalized log-density of KNG w.r.t. the Riemannian volume, on ``B_r(m0)``.

    .. math:: \log f(x) = -\Big\|\sum_{i=1}^n \log_x(x_i)\Big\|_x \big/ (\sigma n)
              \quad\text{(mean)}, \qquad
              \log f(x) = -\Big\|\frac1n\sum_{i=1}^n
              \frac{\log_x(x_i)}{\rho(x, x_i)}\Big\|_x \big/ \sigma \quad\text{(median)}.

    Parameters
    ----------
    manifold : Manifold
        The manifold of the points.
    value : tensor, shape ``(..., *point_shape)``
        Where the density is evaluated (batch dimensions allowed).
    data : tensor, shape ``(n, *point_shape)``
        The records ``x_1, ..., x_n``.
    sigma : float or tensor, shape ``()``
        The scale ``sigma > 0``.
    domain : DataDomain or None
        The public ball ``B_r(m0)`` (``-inf`` outside); ``None``: the whole chart.
    statistic : {"mean", "median"}
        The gradient whose norm the density penalizes: the Fréchet mean's or the
        Fréchet median's (:func:`pt_median_gradient_norm`).

    Returns
    -------
    TensorVariable
        The unnormalized log-density, shape ``(...)`` (the batch shape of ``value``).

    Examples
    --------
    >>> import numpy as np
    >>> import pymc_manidp as pmd
    >>> E = pmd.Euclidean(dim=2)
    >>> data = np.array([[1.0, 0.0], [3.0, 0.0]])
    >>> float(kng_logp(E, np.zeros(2), data, 0.5, None).eval())
    -4.0
    >>> float(kng_logp(E, np.zeros(2), data, 0.5, None, statistic="median").eval())
    -2.0
    """
    value = pt.as_tensor_variable(value)
    if _check_statistic(statistic) == "median":
        logp = -pt_median_gradient_norm(manifold, value, data) / sigma
    else:
        n = pt.as_tensor_variable(data).shape[0]
        logp = -manifold.pt_frechet_gradient_norm(value, data) / (sigma * n)
    return _restrict(logp, manifold, value, domain)


# --- random variable ops ----------------------------------------------------------------
class _ManifoldRV(RandomVariable):
    """A random variable whose law lives on ``manifold`` (part of the Op, like ``ndim_supp``)."""

    __props__ = ("name", "signature", "dtype", "inplace", "manifold", "domain")
    dtype = "floatX"
    _law = "law"

    def __init__(self, manifold, domain=None, **kwargs):
        self.manifold = manifold
        self.domain = domain
        kwargs.setdefault("signature", self._signature(manifold))
        kwargs.setdefault("name", self._law)
        super().__init__(**kwargs)

    def __str__(self):
        return f"{self._law}({self.manifold})"

    def _supp_shape_from_params(self, dist_params, param_shapes=None):
        return tuple(self.manifold.point_shape)  # a point's shape, whatever the parameters

    @property
    def _print_name(self):
        return (f"{self._law}", rf"\operatorname{{{self._law}}}")


class ManifoldLaplaceRV(_ManifoldRV):
    """``footpoint, sigma -> point``; draws: :func:`pymc_manidp.laws.exact.sample_laplace`."""

    __props__ = (*_ManifoldRV.__props__, "normalized")
    _law = "ManifoldLaplace"

    def __init__(self, manifold, domain=None, normalized=True, **kwargs):
        self.normalized = bool(normalized)
        super().__init__(manifold, domain, **kwargs)

    @staticmethod
    def _signature(manifold):
        core = _core(manifold)
        return f"({core}),()->({core})"

    def rng_fn(self, rng, footpoint, sigma, size):
        from pymc_manidp.laws.exact import sample_laplace

        M = self.manifold
        nd = len(M.point_shape)

        def draw(eta, s, m):
            return sample_laplace(M, eta, float(s), m, rng, domain=self.domain).points

        return _draw_batched([footpoint, sigma], [nd, 0], size, M.point_shape, draw)


class KNGRV(_ManifoldRV):
    """``data, sigma -> point``; draws: :func:`pymc_manidp.laws.exact.sample_kng` (mean)
    or :func:`pymc_manidp.laws.exact.sample_kng_median` (median)."""

    __props__ = (*_ManifoldRV.__props__, "statistic")
    _law = "KNG"

    def __init__(self, manifold, domain=None, statistic="mean", **kwargs):
        self.statistic = _check_statistic(statistic)
        super().__init__(manifold, domain, **kwargs)

    @staticmethod
    def _signature(manifold):
        core = _core(manifold)
        return f"(n,{core}),()->({core})"

    def rng_fn(self, rng, data, sigma, size):
        from pymc_manidp.laws.exact import sample_kng, sample_kng_median

        M = self.manifold
        nd = len(M.point_shape)
        sampler = sample_kng_median if self.statistic == "median" else sample_kng

        def draw(x, s, m):
            return sampler(M, x, float(s), m, rng, domain=self.domain).points

        return _draw_batched([data, sigma], [nd + 1, 0], size, M.point_shape, draw)


class ManifoldUniformRV(_ManifoldRV):
    """``-> point``: the normalized volume of a compact manifold (a normalized Gaussian)."""

    _law = "ManifoldUniform"

    @staticmethod
    def _signature(manifold):
        return f"->({_core(manifold)})"

    def rng_fn(self, rng, size):
        size = () if size is None else tuple(size)
        return self.manifold.sample_uniform(rng, size)


def _call(op, *params, size, rng):
    """The variable of ``op`` on an explicit rng, as PyMC 6's own distributions build theirs.

    PyTensor 3 deprecates both an implicit rng and an Op call that hides its next-rng
    output; PyMC reads the next rng off the variable's node, so only the draw is returned.
    """
    _, rv = op(*params, size=size, rng=normalize_rng_param(rng), return_next_rng=True)
    return rv


# --- distributions ---------------------------------------------------------------------
class ManifoldLaplace(Continuous):
    r"""Manifold Laplace distribution (2021, Definition 3), optionally on a ball.

    .. math:: f(x) = \frac{e^{-\rho(\eta, x)/\sigma}}{Z(\sigma)}\ \text{w.r.t. volume},
              \qquad Z(\sigma) = \int_{\mathcal M} e^{-\rho(\eta, y)/\sigma}\,dy,

    normalized on ``Sphere``, ``KendallShape``, ``Euclidean`` and ``SPD(k)``, ``k <= 3``
    (:func:`laplace_log_normalizer`); unnormalized on ``SPD(k)``, ``k >= 4`` (then
    ``sigma`` must be a constant or ``pm.Data``) and when restricted to a ball
    ``B_r(m0)`` (then ``sigma`` and ``footpoint`` must be constants or ``pm.Data``: the
    normalizer depends on them). The unrestricted law needs ``sigma`` below
    ``manifold.laplace_sigma_limit``: on ``SPD`` ``SPD.laplace_max_sigma`` (it is
    improper beyond), on ``SPD(3)`` 0.98 of that (the normalizer's tabulated range).

    Parameters
    ----------
    name : str
        The variable's name in the model (not an argument of ``.dist``).
    manifold : Manifold
        The manifold of the release.
    footpoint : array or tensor, shape ``(..., *point_shape)``
        The footpoint ``eta``: a constant (validated now), ``pm.Data`` or a random
        variable (checked in the graph).
    sigma : float or tensor, shape ``(...)``
        The scale ``sigma > 0``.
    domain : DataDomain, optional
        Restrict the support to the closed ball ``B_r(m0)``.
    normalized : bool, default True
        ``False`` leaves ``log Z(sigma)`` out (and with it SPD's check of the edge):
        for models where ``sigma`` is fixed and only the shape of the density matters
        (the mechanisms' MCMC releases); ``sigma`` must then not be random.
    **kwargs
        ``size``, ``shape``, ``dims``, ``observed`` ... as for any PyMC distribution.

    Examples
    --------
    >>> import numpy as np, pymc as pm
    >>> import pymc_manidp as pmd
    >>> S = pmd.Sphere(dim=2)
    >>> pm.draw(ManifoldLaplace.dist(S, [0.0, 0.0, 1.0], 0.1, size=4), random_seed=1).shape
    (4, 3)
    >>> with pm.Model() as m:
    ...     x = ManifoldLaplace("x", S, footpoint=[0.0, 0.0, 1.0], sigma=0.1)
    >>> sorted(m.initial_point())
    ['x_polar__']
    """

    rv_type = ManifoldLaplaceRV

    @classmethod
    def rv_op(
        cls, footpoint, sigma, *, manifold, domain=None, normalized=True, size=None, rng=None
    ):
        op = ManifoldLaplaceRV(manifold, domain, normalized=normalized)
        return _call(op, footpoint, sigma, size=size, rng=rng)

    def __new__(cls, name, manifold, footpoint, sigma, *, domain=None, normalized=True, **kwargs):
        return super().__new__(
            cls, name, manifold, footpoint, sigma, domain=domain, normalized=normalized, **kwargs
        )

    @classmethod
    def dist(cls, manifold, footpoint, sigma, *, domain=None, normalized=True, **kwargs):
        footpoint = _check_point(manifold, footpoint, "footpoint")
        sigma = _check_sigma(sigma)
        if not normalized and _depends_on_random(sigma):
            raise ValueError(
                "normalized=False leaves out the normalizer, which depends on sigma: sigma "
                "must be a constant or pm.Data, not a random variable"
            )
        if domain is not None:
            if domain.manifold != manifold:
                raise ValueError("domain is defined on a different manifold")
            for what, x in (("footpoint", footpoint), ("sigma", sigma)):
                if _depends_on_random(x):
                    raise ValueError(
                        f"the ball-restricted Laplace is unnormalized (its normalizer depends "
                        f"on the footpoint and sigma), so its {what} must be a constant or "
                        "pm.Data, not a random variable; drop domain= for a normalized law"
                    )
        elif not has_laplace_normalizer(manifold) and _depends_on_random(sigma):
            raise ValueError(
                f"the Laplace on {manifold} is unnormalized here (no normalizer is known "
                "for it), so sigma must be a constant or pm.Data, not a random variable"
            )
        if normalized and domain is None:
            _check_laplace_sigma(manifold, sigma)
        return super().dist(
            [footpoint, sigma], manifold=manifold, domain=domain, normalized=normalized, **kwargs
        )


def _check_laplace_sigma(manifold, sigma):
    """Refuse a constant sigma at which the unrestricted, normalized Laplace is not
    available (``manifold.laplace_sigma_limit``: SPD's edge, SPD(3)'s table)."""
    top, why = manifold.laplace_sigma_limit
    if not _is_constant(sigma) or not np.isfinite(top):
        return
    sig = np.asarray(sigma.data if isinstance(sigma, Constant) else sigma, float)
    if not np.all(sig < top):
        raise ValueError(
            f"the unrestricted Laplace on {manifold} needs sigma below {top:.6g}, {why}; got "
            f"sigma = {np.max(sig):.6g}. Restrict it to a public ball (domain=...), or use a "
            "smaller sigma (more data or a larger epsilon)"
        )


def _edge_applies(op) -> bool:
    """Whether the normalized, unrestricted law has a sigma limit to check (SPD)."""
    return op.normalized and op.domain is None and np.isfinite(op.manifold.laplace_sigma_limit[0])


def _laplace_sigma_conditions(op, sigma):
    conds = _sigma_conditions(sigma)
    if _edge_applies(op):
        top, _ = op.manifold.laplace_sigma_limit
        conds.append(pt.lt(sigma, top))
    return conds


@_logprob.register(ManifoldLaplaceRV)
def _laplace_logprob(op, values, rng, size, footpoint, sigma, **kwargs):
    (value,) = values
    logp = laplace_logp(op.manifold, value, footpoint, sigma, op.domain, op.normalized)
    msg = f"sigma > 0 and footpoint a point of {op.manifold}"
    if _edge_applies(op):
        top, why = op.manifold.laplace_sigma_limit
        msg += f"; sigma below {top:.6g} ({why})"
    return check_parameters(
        logp,
        *_laplace_sigma_conditions(op, sigma),
        *_point_conditions(op.manifold, footpoint),
        msg=msg,
    )


@_support_point.register(ManifoldLaplaceRV)
def _laplace_support_point(op, rv, rng, size, footpoint, sigma):
    # the mode is the footpoint, but the polar chart puts it at log-radius -inf:
    # a point one sigma away is a start NUTS can use
    center = _value_of(footpoint)
    if center is not None and center.shape == tuple(op.manifold.point_shape):
        point = _off_center(op.manifold, center, sigma)
    elif isinstance(op.manifold, NoiseMap):  # the moving chart's footpoint is no start
        noise = pt.as_tensor_variable(generic_noise(op.manifold))
        n = len(op.manifold.noise_shape)
        scale = pt.shape_padright(pt.as_tensor_variable(sigma), n) / pt.shape_padright(
            op.manifold.pt_noise_norm(footpoint, noise), n
        )
        point = op.manifold.pt_exp_noise(footpoint, scale * noise)
    else:
        point = footpoint
    return pt.broadcast_to(point, rv.shape)


def _polar(manifold, center, domain):
    """The polar chart at ``center``; with a ball, capped at its edge (no wall for NUTS)
    where a closed form of the edge exists (``manifold.pt_ball_exit``), the center
    moved into the ball if needed."""
    if domain is None or not isinstance(manifold, BallExit):
        return PolarChart(manifold, manifold.chart_frame(center), scale_input=3)
    if not domain.distances(center) < domain.radius:
        center = domain.center
    return PolarChart(manifold, manifold.chart_frame(center), scale_input=3, domain=domain)


def _global_chart(manifold):
    """A chart of the whole manifold that needs no center (random footpoints): the
    normalized Gaussian of a compact manifold, else the exp chart at its origin."""
    if isinstance(manifold, GaussianChart):
        return NormalizedGaussian(manifold)
    if not isinstance(manifold, Origin):
        raise ValueError(
            f"no chart of the whole of {manifold} is known (it has neither a "
            "normalized-Gaussian map nor an origin): give the footpoint a value"
        )
    return ChartTransform(manifold, manifold.origin, 1.0)


@_default_transform.register(ManifoldLaplaceRV)
def _laplace_transform(op, rv):
    footpoint = rv.owner.inputs[2]
    center = _value_of(footpoint)
    if center is not None and center.shape == tuple(op.manifold.point_shape):
        return _polar(op.manifold, center, op.domain)
    if op.domain is None and isinstance(op.manifold, NoiseMap):
        # a footpoint that moves (a random variable, or one per batch member): the chart
        # moves with it, the non-centred form (docs/mechanisms.md, hierarchical models)
        return MovingTangentChart(op.manifold, footpoint_input=2, scale_input=3)
    return _global_chart(op.manifold)


class KNG(Continuous):
    r"""K-norm gradient mechanism's distribution (2022) on the public ball.

    .. math:: f(x) \propto \exp\Big(-\Big\|\sum_{i=1}^n \log_x(x_i)\Big\|_x / (\sigma n)\Big),
              \quad x \in B_r(m_0),

    for the Fréchet mean (``statistic="mean"``); for the Fréchet median
    (``statistic="median"``) the gradient of ``F(x) = (1/n) sum_i rho(x, x_i)``:

    .. math:: f(x) \propto \exp\Big(-\Big\|\frac1n\sum_{i=1}^n
              \frac{\log_x(x_i)}{\rho(x, x_i)}\Big\|_x \Big/ \sigma\Big),
              \quad x \in B_r(m_0).

    Unnormalized (the normalizer depends on the data): ``data`` and ``sigma`` must be
    constants or ``pm.Data`` (new data without rebuilding the model), not random
    variables. Draws are exact (:func:`~pymc_manidp.laws.exact.sample_kng`,
    :func:`~pymc_manidp.laws.exact.sample_kng_median`).

    Parameters
    ----------
    name : str
        The variable's name in the model (not an argument of ``.dist``).
    manifold : Manifold
        The manifold of the data and the release.
    data : array or pm.Data, shape ``(n, *point_shape)``
        The (private) data; constant data are checked against the ball now, ``pm.Data``
        in the graph.
    sigma : float or pm.Data
        The scale ``sigma > 0``.
    domain : DataDomain or None
        The public ball (KNG's law is restricted to it). ``None`` leaves KNG's density
        on the whole chart, with no exact draws: the mechanisms sample it so and keep
        the draws inside the ball (the law conditioned on it), which spares NUTS the
        density's wall at the ball's edge.
    statistic : {"mean", "median"}, default "mean"
        Whose gradient the density penalizes (:func:`kng_logp`).
    **kwargs
        As for any PyMC distribution.

    Examples
    --------
    >>> import numpy as np, pymc as pm
    >>> import pymc_manidp as pmd
    >>> S = pmd.Sphere(dim=2)
    >>> dom = pmd.DataDomain(S, [0.0, 0.0, 1.0], 0.4)
    >>> data = S.exp_coords([0.0, 0.0, 1.0], np.full((5, 2), 0.1))
    >>> pm.draw(KNG.dist(S, data, 0.1, dom, size=2), random_seed=0).shape
    (2, 3)
    >>> pm.draw(KNG.dist(S, data, 0.5, dom, statistic="median"), random_seed=0).shape
    (3,)
    """

    rv_type = KNGRV

    @classmethod
    def rv_op(cls, data, sigma, *, manifold, domain, statistic="mean", size=None, rng=None):
        return _call(KNGRV(manifold, domain, statistic), data, sigma, size=size, rng=rng)

    def __new__(cls, name, manifold, data, sigma, domain, *, statistic="mean", **kwargs):
        return super().__new__(
            cls, name, manifold, data, sigma, domain, statistic=statistic, **kwargs
        )

    @classmethod
    def dist(cls, manifold, data, sigma, domain, *, statistic="mean", **kwargs):
        if isinstance(data, CheckedData):  # DataDomain.check's record: its points
            data = data.points
        if _check_statistic(statistic) == "median" and domain is None:
            if not np.isfinite(manifold.log_volume):
                raise ValueError(
                    "KNG on the median has a density >= e^{-1/sigma} everywhere (its "
                    f"gradient norm is at most 1), so without the public ball it is improper "
                    f"on {manifold}, which has infinite volume: pass domain=DataDomain(...)"
                )
        if domain is not None and domain.manifold != manifold:
            raise ValueError("domain is defined on a different manifold")
        if domain is not None and _is_constant(data):
            data = pt.as_tensor_variable(
                domain.check(np.asarray(data.data if isinstance(data, Constant) else data)).points
            )
        sigma = _check_sigma(sigma)
        for what, x in (("data", data), ("sigma", sigma)):
            if _depends_on_random(x):
                raise ValueError(
                    f"KNG is unnormalized (its normalizer depends on the data and sigma), so "
                    f"its {what} must be a constant or pm.Data, not a random variable"
                )
        return super().dist(
            [data, sigma], manifold=manifold, domain=domain, statistic=statistic, **kwargs
        )


@_logprob.register(KNGRV)
def _kng_logprob(op, values, rng, size, data, sigma, **kwargs):
    (value,) = values
    data = _core_data(op.manifold, data)
    logp = kng_logp(op.manifold, value, data, sigma, op.domain, op.statistic)
    if _is_constant(data) or op.domain is None:
        return check_parameters(logp, *_sigma_conditions(sigma), msg="sigma > 0")
    dom = op.domain
    inside = op.manifold.pt_dist(pt.as_tensor_variable(dom.center), data) <= dom.radius
    return check_parameters(
        logp,
        *_sigma_conditions(sigma),
        inside,
        msg=f"sigma > 0 and every datum inside the public ball B_r(m0), r = {dom.radius:.6g}",
    )


def _core_data(manifold, data):
    """The records ``(n, *point_shape)`` of a KNG variable with a batch shape.

    PyMC broadcasts every parameter to the variable's batch shape (an observed batch
    of releases), so the records arrive as ``(1, ..., n, *point_shape)``: one data set,
    which the density uses once for every value. A batch of different data sets is
    refused (each would be its own KNG variable).
    """
    data = pt.as_tensor_variable(data)
    extra = data.ndim - 1 - len(manifold.point_shape)
    if extra <= 0:
        return data
    if not all(data.type.broadcastable[:extra]):
        raise NotImplementedError(
            "KNG with a batch of different data sets: give each data set its own KNG "
            "variable (the records must have shape (n, *point_shape))"
        )
    return data.reshape(tuple(data.shape[extra:]), ndim=data.ndim - extra)


def _kng_center(op, data):
    """The density's mode for constant data: the Fréchet mean or median (the chart's origin)."""
    from pymc_manidp.stats.frechet import frechet_mean
    from pymc_manidp.stats.median import frechet_median

    values = _value_of(data)
    if values is None or values.ndim != len(op.manifold.point_shape) + 1:
        return None
    if op.statistic == "median":
        return frechet_median(op.manifold, values).median
    return frechet_mean(op.manifold, values).mean


@_support_point.register(KNGRV)
def _kng_support_point(op, rv, rng, size, data, sigma):
    center = _kng_center(op, data)
    if center is None:
        center = _value_of(data)[0] if op.domain is None else op.domain.center
    return pt.broadcast_to(_off_center(op.manifold, center, sigma), rv.shape)


@_default_transform.register(KNGRV)
def _kng_transform(op, rv):
    center = _kng_center(op, rv.owner.inputs[2])
    if center is None:
        if op.domain is None:
            return _global_chart(op.manifold)
        center = op.domain.center
    return _polar(op.manifold, center, op.domain)


class ManifoldUniform(Continuous):
    r"""The uniform law (normalized Riemannian volume) on a compact manifold.

    .. math:: f(x) = 1/\mathrm{vol}(\mathcal M)

    on a compact manifold (``manifold.log_volume`` finite): ``Sphere``
    (:math:`2\pi^{(d+1)/2}R^d/\Gamma((d+1)/2)`) and ``KendallShape``
    (:math:`\pi^{k-2}/(k-2)!`); ``SPD`` and ``Euclidean`` have infinite volume
    (``ValueError``). A prior for noise-aware inference. Drawn by
    ``manifold.sample_uniform``, sampled through a normalized Gaussian
    (:class:`~pymc_manidp.laws.charts.NormalizedGaussian`).

    Parameters
    ----------
    name : str
        The variable's name in the model (not an argument of ``.dist``).
    manifold : Manifold
        A compact manifold with a uniform law (``sample_uniform``, ``log_volume``: the
        sphere, Kendall's shape space, SO(3)); a draw has shape
        ``(*size, *manifold.point_shape)``.
    **kwargs
        ``size``, ``shape``, ``dims``, ``observed`` ... as for any PyMC distribution.

    Raises
    ------
    ValueError
        If ``manifold`` has infinite volume (``SPD``, ``Euclidean``).

    Examples
    --------
    >>> import pymc as pm
    >>> import pymc_manidp as pmd
    >>> pm.draw(ManifoldUniform.dist(pmd.Sphere(dim=2), size=3), random_seed=0).shape
    (3, 3)
    """

    rv_type = ManifoldUniformRV

    @classmethod
    def rv_op(cls, *, manifold, size=None, rng=None):
        return _call(ManifoldUniformRV(manifold), size=size, rng=rng)

    def __new__(cls, name, manifold, **kwargs):
        return super().__new__(cls, name, manifold, **kwargs)

    @classmethod
    def dist(cls, manifold, **kwargs):
        if not np.isfinite(manifold.log_volume) or not isinstance(manifold, UniformLaw):
            raise ValueError(
                f"ManifoldUniform needs a compact manifold with a uniform law (a sphere, Kendall "
                f"shapes, rotations): "
                f"{manifold} has infinite volume, so no uniform law exists on it"
            )
        return super().dist([], manifold=manifold, **kwargs)


@_logprob.register(ManifoldUniformRV)
def _uniform_logprob(op, values, rng, size, **kwargs):
    (value,) = values
    shape = value.shape[: value.ndim - len(op.manifold.point_shape)]
    return pt.full(shape, -log_volume(op.manifold))


@_support_point.register(ManifoldUniformRV)
def _uniform_support_point(op, rv, rng, size):
    # the law has no mode: any point will do; a generic one (not a pole, not a regular
    # polygon) is unlikely to be the center of a polar chart a model puts on it
    if isinstance(op.manifold, GenericPoint):
        point = op.manifold.generic_point
    else:  # a uniform draw (fixed seed) is generic almost surely
        point = op.manifold.sample_uniform(np.random.default_rng(0), ())
    return pt.broadcast_to(pt.as_tensor_variable(point), rv.shape)


@_default_transform.register(ManifoldUniformRV)
def _uniform_transform(op, rv):
    return NormalizedGaussian(op.manifold)


# --- the NUMBA backend ------------------------------------------------------------------
def exact_batch_draw(random):
    """Mark a ``pm.CustomDist``'s ``random`` as one of the package's exact samplers.

    NumPy and SciPy code that numba cannot compile, drawn a whole batch per call: the
    NUMBA backend runs it in object mode as it runs the laws' own Ops, without the
    warning (:func:`_register_numba_draws`).
    """
    random._exact_batch_draw = True
    return random


def _register_numba_draws():
    """Draw the manifold laws in PyTensor's NUMBA backend without a warning per compile.

    The draws are the exact samplers of :mod:`pymc_manidp.laws.exact` (NumPy and SciPy:
    rejection sampling, special functions), which numba cannot compile, so the NUMBA
    backend runs the Ops' ``perform`` in object mode, a whole batch per call: PyTensor's
    generic fallback, which warns "Numba will use object mode" at every compilation
    (each ``pm.draw``, each predictive sampling: dozens in a calibration study). We keep
    the fallback and silence that one warning for these Ops only: running Python here
    is by design, and no sampler's log-density graph holds a random variable, so MCMC
    never runs it. (A numba core function per point, the other route PyTensor offers,
    drew 2,000 SPD(3) points 12 times slower than the batch, and cannot serve
    ``ManifoldUniform``, which has no parameter to vectorize over.) The same holds for
    the ``pm.CustomDist`` draws of the noise-aware model (:mod:`pymc_manidp.laws.inference`),
    whose ``random`` functions are marked with :func:`exact_batch_draw`; sampling its
    posterior runs no object mode either (``tests/laws/test_noise_aware.py``).
    """
    from pytensor.link.numba.dispatch.basic import (
        numba_funcify_and_cache_key,
        register_funcify_and_cache_key,
    )
    from pytensor.tensor.random.op import RandomVariableWithCoreShape

    generic = numba_funcify_and_cache_key.dispatch(RandomVariableWithCoreShape)

    @register_funcify_and_cache_key(RandomVariableWithCoreShape)
    def _random_variable(op, node, **kwargs):
        [rv_node] = op.fgraph.apply_nodes
        # the manifold laws, and any law whose draws run Python by design (the
        # noise-aware model's exact batch draws, an Op that sets python_draws)
        drawn_in_python = (
            isinstance(rv_node.op, _ManifoldRV)
            or getattr(rv_node.op, "python_draws", False)
            or getattr(getattr(rv_node.op, "_random_fn", None), "_exact_batch_draw", False)
        )
        if not drawn_in_python:
            return generic(op, node, **kwargs)  # every other law: PyTensor's own
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Numba will use object mode to run")
            return generic(op, node, **kwargs)


_register_numba_draws()
