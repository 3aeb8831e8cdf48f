r"""The PyMC model of a mechanism's law, sampled in a polar tangent chart.

:func:`polar_model` builds a mechanism's model from the same PyMC distributions a user
puts in a model (:class:`~pymc_manidp.laws.distributions.ManifoldLaplace`,
:class:`~pymc_manidp.laws.distributions.KNG`): one model path. The manifold-valued
variable is sampled in the :class:`~pymc_manidp.laws.charts.PolarChart` at the
density's mode, the transform that lets NUTS cross the density's cusp (see its
docstring: why polar, the tanh cap on compact manifolds, ``d = 1``).

Everything in the model that depends on the data is a ``pm.Data`` (sigma, the chart
at the mode, the density's inputs: :func:`polar_data`), so one compiled model serves
every data set of the same size (:class:`~pymc_manidp.mcmc.sampling.CompiledSampler`).
"""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytensor.tensor as pt

from pymc_manidp._options import options
from pymc_manidp.laws.charts import PolarChart, chart_coords, point_dims
from pymc_manidp.laws.distributions import KNG, ManifoldLaplace
from pymc_manidp.laws.fused import LAWS, fused_kernels, polar_coords_numpy, polar_log_density
from pymc_manidp.laws.regression import regression_chart_logp

__all__ = [
    "FUSED_SUFFIX",
    "expand_fused",
    "fused_data",
    "fused_law",
    "fused_model",
    "is_fused",
    "point_dims",
    "polar_data",
    "polar_model",
    "regression_data",
    "regression_model",
]


def polar_data(manifold, mode, sigma, inputs=None) -> dict:
    """The values of every ``pm.Data`` of :func:`polar_model` for these arguments.

    ``scale`` (σ, which is also the chart's scale), the chart (``chart_<key>`` for
    each array of ``manifold.chart_frame(mode)``) and each entry of ``inputs``:
    everything in the model that depends on the data. :meth:`CompiledSampler.sample`
    takes this dict.

    Parameters
    ----------
    manifold : Manifold
        The manifold of the law; it gives the chart (``chart_frame``).
    mode : array, shape ``point_shape``
        The density's mode (private: a footpoint or the data's Fréchet mean), the
        chart's origin.
    sigma : float
        The law's σ.
    inputs : dict of str to array, optional
        The density's data-dependent arrays (a footpoint, the data).

    Returns
    -------
    dict of str to ndarray
        One float array per ``pm.Data`` name: ``"scale"`` (a 0-d array),
        ``"chart_<key>"`` and the keys of ``inputs``.

    Raises
    ------
    ValueError
        ``mode`` off the manifold, or a key of ``inputs`` that the model uses itself
        (``"scale"``, ``"chart_..."``).
    """
    mode = manifold.validate(mode)
    values = {"scale": np.asarray(float(sigma))}
    values.update(
        {f"chart_{k}": np.asarray(v, float) for k, v in manifold.chart_frame(mode).items()}
    )
    for key, val in (inputs or {}).items():
        if key in values:
            raise ValueError(f"input name {key!r} is taken by the polar model")
        values[key] = np.asarray(val, float)
    return values


# The chains' start, as a fraction of sigma from the mode. The median's KNG density
# e^{-|grad F|/sigma} (|grad F| <= 1) is a needle at the median, of a width set by
# the records' spread (private), on a plateau e^{-1/sigma} that fills the ball. In the
# chart's log-radius s = log(t/sigma) the needle sits near s = log(d c) (c the spread;
# |grad F| ~ t/c inside it) and the plateau's density grows like e^{d s}: a chain
# started on the plateau climbs to the ball's edge and never finds the needle
# (Rotations, records within 5e-6 rad, n = 200: R-hat > 2 and divergences). Started
# far below every needle (a fixed fraction of sigma: public), a chain climbs up the
# e^{d s} slope into it, whatever its width, and the plateau beyond is e^{-1/sigma}
# lower. The laws whose density decays (Laplace, KNG on the mean) keep one sigma.
_START_RADIUS = {False: 1.0, True: 1e-12}


def polar_model(
    manifold, mode, sigma, law, *, inputs, law_kwargs=None, name="release", domain=None
):
    """Build the ``pm.Model`` of a law from its PyMC distribution.

    Parameters
    ----------
    manifold : Manifold
        The manifold of the law and of the chart.
    mode : array, shape ``point_shape``
        The density's mode (a footpoint or the data's Fréchet mean, computed once by
        the caller): the chart's origin and, one σ from it, the chains' start.
    sigma : float
        The law's σ: also the chart's typical distance from the mode.
    law : PyMC distribution class
        Called as ``law(name, manifold, *inputs, sigma, **law_kwargs)`` with the
        ``pm.Data`` tensors of ``inputs`` (in their order) and of ``sigma``, e.g.
        :class:`~pymc_manidp.laws.distributions.ManifoldLaplace` with
        ``inputs={"footpoint": eta}`` or :class:`~pymc_manidp.laws.distributions.KNG`
        with ``inputs={"data": data}``; built from ``pm.Data`` so that a compiled
        model follows new data (:class:`CompiledSampler`).
    inputs : dict of str to array
        The density's data-dependent arrays, each a ``pm.Data`` of that name.
    law_kwargs : dict, optional
        Further keyword arguments of ``law`` (e.g. ``normalized=False``).
    name : str
        Name of the manifold-valued variable.
    domain : DataDomain, optional
        Cap the chart's radius at the edge of this ball (``PolarChart``'s ``domain``;
        the mode must lie inside it): for a law that must stay on the ball because
        it is not normalizable beyond it (KNG on the median). Needs the manifold's
        ``pt_ball_exit``.

    Returns
    -------
    pm.Model
        With the variable ``name`` (dims ``point_dims(manifold)``), deterministics
        ``chart_coords`` (normal coordinates at the mode, dim ``coord``) and
        ``distance`` (to the mode). Its ``pm.Data`` are :func:`polar_data`'s.
        Parameter checks are left to the caller (``check_bounds=False``): a mechanism
        checks its data before any sampling.
    """
    values = polar_data(manifold, mode, sigma, inputs)
    dims = point_dims(manifold)
    coords = {"coord": np.arange(manifold.dim), **dims}
    with pm.Model(coords=coords, check_bounds=False) as model:
        v = {key: pm.Data(key, val) for key, val in values.items()}
        frame = {key[len("chart_") :]: t for key, t in v.items() if key.startswith("chart_")}
        chart = PolarChart(manifold, frame, scale=v["scale"], domain=domain)
        # PyMC rewrites the logp in a FunctionGraph whose inputs are the roots of the
        # variable's own graph; the chart's pm.Data must be among them, or replacing
        # the value by the transform fails (MissingInputError). A zero-weight term
        # puts them there without changing sigma.
        sigma_t = v["scale"] + 0.0 * sum(pt.sum(t) for t in frame.values())
        # the start: one sigma from the mode along the chart's diagonal (at the mode
        # the polar chart's log-radius is -inf). Given here, from the pm.Data, so that
        # no distribution recomputes the mode (KNG's support point would take the
        # data's Frechet mean again) and a compiled model starts near the new data's.
        u = np.full(manifold.dim, 1.0 / np.sqrt(manifold.dim))
        start = manifold.pt_exp_frame(frame, _START_RADIUS[domain is not None] * v["scale"] * u)
        x = law(
            name,
            manifold,
            *(v[key] for key in inputs),
            sigma_t,
            **(law_kwargs or {}),
            default_transform=chart,
            initval=start,
            dims=tuple(dims),
        )
        c = pm.Deterministic("chart_coords", chart_coords(manifold, frame, x), dims="coord")
        pm.Deterministic("distance", pt.sqrt(pt.sum(c**2, axis=-1)))
    return model


#: the fused model's free variable is ``name + FUSED_SUFFIX``: the sampler's ``u = (z, s)``
FUSED_SUFFIX = "_polar"


def fused_law(manifold, law, law_kwargs=None, *, domain=None) -> str | None:
    """Name the fused density (``"laplace"``, ``"kng"``) that samples this law, or None.

    The release's law is fused (one numba kernel for the log-density and its
    gradient, ``pymc_manidp.laws.fused``) when the manifold ships kernels in chart
    coordinates (``manifold.fused_kernels``), the law is the unnormalized Laplace or
    KNG on the Fréchet mean on the whole chart (no ``domain`` cap), and the option
    ``nuts_density`` (``PYMC_MANIDP_NUTS_DENSITY``) is not ``"graph"``; otherwise
    :func:`polar_model`'s PyTensor graph samples it (the same law).

    Parameters
    ----------
    manifold : Manifold
        The law's manifold.
    law : PyMC distribution class
        As :func:`polar_model`'s ``law``.
    law_kwargs : dict, optional
        As :func:`polar_model`'s ``law_kwargs``.
    domain : DataDomain, optional
        :func:`polar_model`'s chart cap; a capped chart has no fused density.

    Returns
    -------
    str or None
        ``"laplace"``, ``"kng"``, or None for the graph.
    """
    if options["nuts_density"] == "graph" or domain is not None:
        return None
    if fused_kernels(manifold) is None:
        return None
    kwargs = dict(law_kwargs or {})
    if law is ManifoldLaplace and kwargs == {"normalized": False}:
        return "laplace"
    if law is KNG and kwargs.get("domain") is None and kwargs.get("statistic", "mean") == "mean":
        return "kng"
    return None


def fused_data(manifold, mode, sigma, law, inputs) -> dict:
    """Give the values of every ``pm.Data`` of :func:`fused_model`.

    They are :func:`polar_data`'s, without the Laplace's footpoint, which must be the
    mode (the fused Laplace measures distances from the chart's origin).

    Parameters
    ----------
    manifold : Manifold
        The law's manifold.
    mode : array, shape ``point_shape``
        The chart's origin.
    sigma : float
        The law's σ.
    law : {"laplace", "kng"}
        The fused law (:func:`fused_law`).
    inputs : dict of str to array
        ``{"footpoint": mode}`` or ``{"data": records}``.

    Returns
    -------
    dict of str to ndarray
        ``"scale"``, ``"chart_<key>"`` and, for KNG, ``"data"``.

    Raises
    ------
    ValueError
        A Laplace footpoint other than ``mode``.
    """
    inputs = dict(inputs)
    if law == "laplace":
        footpoint = inputs.pop("footpoint", None)
        if footpoint is None or not np.array_equal(np.asarray(footpoint, float), mode):
            raise ValueError(
                "the fused Laplace density is centred at the chart's origin: its footpoint "
                "must be the mode"
            )
    return polar_data(manifold, mode, sigma, inputs)


def _fused_start(manifold, sigma):
    """The chains' start in ``u``: one σ from the mode along the chart's diagonal, as
    :func:`polar_model`'s (``|z| = 1``; ``s`` gives the radius σ)."""
    d = manifold.dim
    if d == 1:
        return np.ones(1)
    # polar_log_radius in NumPy: its PyTensor graph's eval compiled a function (0.5 s
    # of a cold first release)
    sigma, big_t = float(sigma), float(manifold.injectivity_radius)
    s = (
        0.0
        if np.isinf(big_t)
        else np.log(big_t * np.arctanh(min(sigma / big_t, 1 - 1e-16)) / sigma)
    )
    return np.append(np.full(d, 1.0 / np.sqrt(d)), s)


def fused_model(manifold, mode, sigma, law, *, inputs, name="release"):
    """Build :func:`polar_model`'s law as one fused node: the model a NUTS release compiles.

    The free variable ``name + FUSED_SUFFIX`` is the polar chart's ``u = (z, s)``
    (``(1,)`` when ``d = 1``), its log-density a ``pm.Potential`` of
    ``pymc_manidp.laws.fused.polar_log_density`` (named ``name + "_" + law``):
    the same function of ``u``, value and gradient, as :func:`polar_model`'s graph
    (``tests/laws/fused/``), compiled as
    a handful of numba functions instead of hundreds. The released point and the
    chart coordinates are computed from the draws after the run (:func:`expand_fused`).

    Parameters
    ----------
    manifold : Manifold
        A manifold with ``fused_kernels``.
    mode : array, shape ``point_shape``
        The chart's origin (the Laplace's footpoint, KNG's Fréchet mean).
    sigma : float
        The law's σ, also the chart's scale.
    law : {"laplace", "kng"}
        :func:`fused_law`'s answer.
    inputs : dict of str to array
        As :func:`polar_model`'s: ``{"footpoint": mode}`` or ``{"data": records}``.
    name : str
        The released variable's name (the free variable is ``name + FUSED_SUFFIX``).

    Returns
    -------
    pm.Model
        Its ``pm.Data`` are :func:`fused_data`'s.
    """
    values = fused_data(manifold, mode, sigma, law, inputs)
    d = manifold.dim
    # the chart's own coordinates get a named dim, as polar_model's traced variables
    # (ArviZ's plots index every dim by its coordinate values)
    coords = {"polar": np.arange(1 if d == 1 else d + 1)}
    with pm.Model(coords=coords, check_bounds=False) as model:
        v = {key: pm.Data(key, val) for key, val in values.items()}
        frame = [t for key, t in v.items() if key.startswith("chart_")]
        u = pm.Flat(name + FUSED_SUFFIX, dims="polar", initval=_fused_start(manifold, sigma))
        pm.Potential(
            f"{name}_{law}",
            polar_log_density(manifold, law, u, v["scale"], frame, v.get("data")),
        )
    return model


def is_fused(model, name="release") -> str | None:
    """Name the law of a :func:`fused_model`, or give None for any other model.

    Parameters
    ----------
    model : pm.Model
        A model.
    name : str
        The released variable's name.

    Returns
    -------
    str or None
        ``"laplace"`` or ``"kng"`` for a fused model (its draws need
        :func:`expand_fused`, its data are :func:`fused_data`'s), else None.
    """
    if name + FUSED_SUFFIX not in model.named_vars:
        return None
    return next(law for law in LAWS if f"{name}_{law}" in model.named_vars)


def expand_fused(manifold, mode, sigma, idata, name="release"):
    """Add :func:`polar_model`'s deterministics to a fused run's posterior, in place.

    From the draws of ``u`` (``name + FUSED_SUFFIX``): ``chart_coords`` (normal
    coordinates at ``mode``, dim ``coord``), ``distance`` (their norm) and ``name``
    (the points, ``exp`` at ``mode``), as :func:`polar_model` traces them.

    Parameters
    ----------
    manifold : Manifold
        The law's manifold.
    mode : array, shape ``point_shape``
        The chart's origin the run sampled at.
    sigma : float
        The law's σ (the chart's scale).
    idata : DataTree
        The run (:meth:`CompiledSampler.sample`).
    name : str
        The released variable's name.

    Returns
    -------
    DataTree
        ``idata``, its posterior extended.
    """
    import xarray as xr

    post = idata.posterior
    u = np.asarray(post[name + FUSED_SUFFIX].values, float)
    c = polar_coords_numpy(u, float(sigma), float(manifold.injectivity_radius))
    x = manifold.exp_coords(np.asarray(mode, float), c)
    dims = point_dims(manifold)
    chain_draw = {k: post[k].values for k in ("chain", "draw")}
    post[name] = xr.DataArray(x, dims=("chain", "draw", *dims), coords={**chain_draw, **dims})
    post["chart_coords"] = xr.DataArray(
        c,
        dims=("chain", "draw", "coord"),
        coords={**chain_draw, "coord": np.arange(manifold.dim)},
    )
    post["distance"] = xr.DataArray(
        np.sqrt(np.sum(c**2, axis=-1)), dims=("chain", "draw"), coords=chain_draw
    )
    return idata


def regression_data(x, y, sigma) -> dict:
    """The values of every ``pm.Data`` of :func:`regression_model`.

    Parameters
    ----------
    x : array_like, shape ``(n,)``
        The covariates.
    y : array_like, shape ``(n, *point_shape)``
        The responses.
    sigma : float
        The law's σ.

    Returns
    -------
    dict of str to ndarray
        ``"scale"`` (σ, a 0-d array), ``"covariates"`` and ``"responses"``:
        :meth:`CompiledSampler.sample` takes this dict.
    """
    return {
        "scale": np.asarray(float(sigma)),
        "covariates": np.asarray(x, float),
        "responses": np.asarray(y, float),
    }


def regression_model(
    manifold, center, footpoint_radius, slope_bound, x, y, sigma, *, name="release"
):
    """The ``pm.Model`` of geodesic regression's KNG law on ``TM`` (issue 41).

    The free variable ``tm`` ``(2 dim,)`` is the unconstrained chart of
    ``pymc_manidp.laws.regression.regression_chart_logp`` (normal coordinates at
    the public ``center`` for the footpoint, the transported frame for the slope,
    each capped at its public radius), its density a ``pm.Potential``. Everything
    that depends on the data is a ``pm.Data`` (:func:`regression_data`), so one
    compiled model serves every data set of the same size.

    Parameters
    ----------
    manifold : Manifold
        ``Euclidean``, ``Sphere`` or ``Hyperbolic`` (the spaces whose regression
        gradient has a PyTensor twin).
    center : array, shape ``point_shape``
        The public center ``m``: the chart's origin.
    footpoint_radius : float or None
        ``R``: footpoints in ``B_R(m)``; ``None`` on flat spaces (no cap).
    slope_bound : float
        ``V``: slopes ``|v| <= V``.
    x : array, shape ``(n,)``
        The covariates (checked by the caller).
    y : array, shape ``(n, *point_shape)``
        The responses (checked by the caller).
    sigma : float
        The law's σ.
    name : str
        Name of the released deterministic.

    Returns
    -------
    pm.Model
        With the deterministics ``name`` ``(2, *point_shape)`` (footpoint, slope),
        ``chart_coords`` ``(2 dim,)`` and ``distance`` (their norm), which the
        diagnostics gate monitors.
    """
    d = manifold.dim
    dims = point_dims(manifold)
    coords = {"tm_coord": np.arange(2 * d), "tm_part": np.arange(2), **dims}
    values = regression_data(x, y, sigma)
    with pm.Model(coords=coords, check_bounds=False) as model:
        v = {key: pm.Data(key, val) for key, val in values.items()}
        z = pm.Flat("tm", dims="tm_coord")
        logp, p, slope, c = regression_chart_logp(
            manifold, center, footpoint_radius, slope_bound, z,
            v["covariates"], v["responses"], v["scale"],
        )  # fmt: skip
        pm.Potential("kng", logp)
        pm.Deterministic(name, pt.stack([p, slope]), dims=("tm_part", *dims))
        c = pm.Deterministic("chart_coords", c, dims="tm_coord")
        pm.Deterministic("distance", pt.sqrt(pt.sum(c**2)))
    return model
