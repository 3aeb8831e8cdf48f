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

__all__ = ["point_dims", "polar_data", "polar_model"]


def polar_data(manifold, center, scale, inputs=None) -> dict:
    """The values of every ``pm.Data`` of :func:`polar_model` for these arguments.

    ``scale``, the chart (``chart_<key>`` for each array of
    ``manifold.chart_frame(center)``) and each entry of ``inputs``: everything in the
    model that depends on the data. :meth:`CompiledSampler.sample` takes this dict.
    """
    center = manifold.validate(center)
    values = {"scale": np.asarray(float(scale))}
    values.update(
        {f"chart_{k}": np.asarray(v, float) for k, v in manifold.chart_frame(center).items()}
    )
    for key, val in (inputs or {}).items():
        if key in values:
            raise ValueError(f"input name {key!r} is taken by the polar model")
        values[key] = np.asarray(val, float)
    return values


def polar_model(manifold, center, scale, law, *, name="release", inputs=None):
    """Build the ``pm.Model`` of a mechanism's law from its PyMC distribution.

    Parameters
    ----------
    manifold : Manifold
    center : array, shape ``point_shape``
        Chart centre: the density's mode (footpoint or Fréchet mean).
    scale : float
        Typical distance from the centre (the rate ``sigma``).
    law : callable
        ``law(name, v, **kwargs)`` creates the distribution's variable (e.g.
        ``ManifoldLaplace(name, M, v["footpoint"], v["scale"], **kwargs)``), where ``v``
        maps ``"scale"`` and each name of ``inputs`` to its ``pm.Data`` tensor: build it
        from ``v`` (not from NumPy constants) so that a compiled model follows new data
        (:class:`CompiledSampler`). ``kwargs`` carry the chart (``default_transform``)
        and the point's ``dims``.
    name : str
        Name of the manifold-valued variable.
    inputs : dict of str to array, optional
        The density's data-dependent arrays (a footpoint, the data), each a
        ``pm.Data`` of that name.

    Returns
    -------
    pm.Model
        With the variable ``name`` (dims :func:`point_dims`), deterministics
        ``chart_coords`` (normal coordinates at the centre, dim ``coord``) and
        ``distance`` (to the centre). Its ``pm.Data`` are :func:`polar_data`'s.
        Parameter checks are left to the caller (``check_bounds=False``): a mechanism
        checks its data before any sampling.
    """
    values = polar_data(manifold, center, scale, inputs)
    dims = point_dims(manifold)
    coords = {"coord": np.arange(manifold.dim), **dims}
    with pm.Model(coords=coords, check_bounds=False) as model:
        v = {key: pm.Data(key, val) for key, val in values.items()}
        frame = {key[len("chart_") :]: t for key, t in v.items() if key.startswith("chart_")}
        chart = PolarChart(manifold, frame, scale=v["scale"])
        params = {k: t for k, t in v.items() if not k.startswith("chart_")}
        # PyMC rewrites the logp in a FunctionGraph whose inputs are the roots of the
        # variable's own graph; the chart's pm.Data must be among them, or replacing
        # the value by the transform fails (MissingInputError). A zero-weight term
        # puts them there without changing sigma.
        params["scale"] = v["scale"] + 0.0 * sum(pt.sum(t) for t in frame.values())
        x = law(name, params, default_transform=chart, dims=tuple(dims))
        c = pm.Deterministic("chart_coords", chart_coords(manifold, frame, x), dims="coord")
        pm.Deterministic("distance", pt.sqrt(pt.sum(c**2, axis=-1)))
    return model
