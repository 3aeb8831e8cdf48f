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

from pymc_manidp.laws.charts import PolarChart, chart_coords, point_dims
from pymc_manidp.laws.regression import regression_chart_logp

__all__ = ["point_dims", "polar_data", "polar_model", "regression_data", "regression_model"]


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
