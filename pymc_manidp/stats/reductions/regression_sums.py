r"""Geodesic regression's pass: the energy and both gradients at one ``(p, v)``.

.. math:: E = \frac1{2n}\sum_i \rho^2(\hat y_i, y_i),\qquad
          \nabla_pE = -\frac1n\sum_i gp_i,\qquad \nabla_vE = -\frac1n\sum_i gv_i,

the per-record terms of ``pymc_manidp.geometry.jacobi.regression_terms``. A NumPy
array is summed in cache-sized blocks of rows; a Dask array of responses is reduced
chunk by chunk like the Fréchet passes (``passes._run_pass``: each chunk yields the
three sums, added up on the client in chunk order, never gathered). The covariates are
public and small (one float per record): over Dask they are chunked like the responses
and read with them, one column beside each chunk's records, so each task carries its
own slice of them and no more.
"""

from __future__ import annotations

import math

import numpy as np

from pymc_manidp.geometry.jacobi import regression_terms
from pymc_manidp.stats.reductions import passes
from pymc_manidp.stats.reductions.checked import _points, _unwrap, is_dask
from pymc_manidp.stats.reductions.passes import _PASSES, _point_chunks, _rows_per_block, n_rows

__all__ = ["regression_sums"]


def _sum_rows(M, p, v, x, y, validate=False):
    """``(sum rho^2, sum gp, sum gv)`` over the rows, in cache-sized blocks."""
    rows = _rows_per_block(M.point_shape, 4)
    e = 0.0
    gp = np.zeros(M.point_shape)
    gv = np.zeros(M.point_shape)
    for s in range(0, len(y), rows):
        b = M.validate(y[s : s + rows]) if validate else y[s : s + rows]
        rho2, tp, tv = regression_terms(M, p, v, x[s : s + rows], b)
        e += float(np.sum(rho2))
        gp += np.sum(tp, axis=0)
        gv += np.sum(tv, axis=0)
    return e, gp, gv


def _regression_chunk(block, index, offset, M, p, v, validate):
    block = np.asarray(block)
    y = block[:, 1:].reshape((len(block), *M.point_shape))
    return _sum_rows(M, p, v, block[:, 0], y, validate)


def regression_sums(M, p, v, x, y):
    r"""``(E, grad_p E, grad_v E)`` at ``(p, v)``: one pass over the responses.

    Parameters
    ----------
    M : Manifold
        A space ``pymc_manidp.geometry.jacobi.regression_terms`` knows.
    p, v : array, shape ``point_shape``
        The footpoint and the slope (a tangent vector at ``p``).
    x : ndarray, shape ``(n,)``
        The covariates (checked, in memory: they are public).
    y : ndarray, dask.array.Array or CheckedData, shape ``(n, *point_shape)``
        The responses, validated (or a Dask array validated lazily, or what
        ``DataDomain.check`` returned).

    Returns
    -------
    energy : float
        :math:`E(p, v) = \frac1{2n}\sum_i \rho^2(\hat y_i, y_i)`.
    grad_p, grad_v : ndarray, shape ``point_shape``
        The horizontal and vertical gradients, both in :math:`T_pM`
        (docs/regression.md, Theorem 1).

    Examples
    --------
    >>> import numpy as np
    >>> import pymc_manidp as pmd
    >>> E, gp, gv = regression_sums(pmd.Euclidean(dim=1), np.zeros(1), np.ones(1),
    ...                             np.array([0.0, 1.0]), np.array([[0.0], [2.0]]))
    >>> float(E), gp.tolist(), gv.tolist()
    (0.25, [-0.5], [-0.5])
    """
    p = np.asarray(p, float)
    v = np.asarray(v, float)
    x = np.asarray(x, float)
    if not is_dask(y) and not hasattr(y, "shape"):
        y = np.asarray(y, float)
    n = n_rows(y)
    _PASSES[0] += 1
    if is_dask(y):
        import dask.array as da

        data, raw = _unwrap(y)  # checked data: validate block by block inside the pass
        data = _point_chunks(data if raw is None else raw, M.point_shape)
        width = math.prod(M.point_shape)
        column = da.from_array(x, chunks=(data.chunks[0],))[:, None]
        packed = da.concatenate([column, data.reshape((n, width))], axis=1).rechunk({1: -1})
        parts = passes._run_pass(
            packed, _regression_chunk, "regression gradient", M, p, v, raw is not None
        )
        e = sum(q[0] for q in parts)
        gp = np.sum([q[1] for q in parts], axis=0)
        gv = np.sum([q[2] for q in parts], axis=0)
    else:
        e, gp, gv = _sum_rows(M, p, v, x, np.asarray(_points(y), float))
    return 0.5 * e / n, -gp / n, -gv / n
