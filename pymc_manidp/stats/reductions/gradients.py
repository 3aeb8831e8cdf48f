r"""The Fréchet passes: the gradient and energy (:func:`frechet_gradient`), with the
Hessian for Newton steps (:func:`frechet_gradient_hessian`), KNG's gradient norms at a
batch of proposals (:func:`grad_norms`), the distance profile the KNG envelope needs
(:func:`distance_profile`, fused into the Fréchet passes over Dask by
:class:`DistanceProfile`) and the ambient sum (:func:`weighted_sum`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from pymc_manidp.stats.reductions import passes
from pymc_manidp.stats.reductions.checked import _points, _unwrap, is_dask
from pymc_manidp.stats.reductions.passes import _PASSES, _point_chunks, _rows_per_block, n_rows


def _gradient_block(M, xs, block, w):
    many = getattr(M, "frechet_gradients", None)  # all points in one call (the sphere)
    if many is not None and len(xs) > 1:
        return many(xs, block, w)
    g = np.zeros(xs.shape)
    e = np.zeros(len(xs))
    for j in range(len(xs)):
        g[j], e[j] = M.frechet_gradient(xs[j], block, w)
    return g, e


def _gradient_rows(M, xs, data, w, inv_n, validate=False, edges=None):
    """Sums over the rows of ``data`` (in cache blocks) for every point of ``xs``.

    ``validate``: the rows are raw records that a check pass accepted; each block
    is validated (projected onto the manifold) here, while it is in cache.
    ``edges`` (one point only): also count the distances from ``xs[0]`` to the rows
    in the bins of :func:`distance_profile`, from the log maps' norms the sum
    computed anyway; returns ``(g, e, counts)``.
    """
    rows = _rows_per_block(M.point_shape)
    g = np.zeros(xs.shape)
    e = np.zeros(len(xs))
    counts = None if edges is None else np.zeros(len(edges) - 1, dtype=np.int64)
    for s in range(0, len(data), rows):
        b = M.validate(data[s : s + rows]) if validate else data[s : s + rows]
        wb = np.full(len(b), inv_n) if w is None else w[s : s + rows]
        if counts is None:
            gb, eb = _gradient_block(M, xs, b, wb)
        else:
            gb, eb, rho = M.frechet_gradient_distances(xs[0], b, wb)
            counts += _bin_counts(rho, edges)
        g += gb
        e += eb
    return (g, e) if counts is None else (g, e, counts)


def _bin_counts(rho, edges):
    """Counts of ``min(rho, edges[-1])`` in the equal bins ``(edges[k], edges[k+1]]``.

    Every distance lands in a bin whose upper edge is at least the distance (the
    profile represents a bin by its upper edge: an upper bound of its distances).
    A ``bincount`` of the scaled distances, corrected by one bin where rounding put a
    distance below its bin: a sixth of ``np.histogram``'s time on 10^6 distances.
    """
    bins = len(edges) - 1
    d = np.minimum(rho, edges[-1])
    k = np.minimum((d * (bins / edges[-1])).astype(np.int64), bins - 1)
    k += d > edges[k + 1]
    k -= (k > 0) & (d <= edges[k])
    return np.bincount(np.minimum(k, bins - 1), minlength=bins)


def _gradient_chunk(block, index, offset, M, xs, inv_n, validate, edges=None):
    return _gradient_rows(M, xs, np.asarray(block), None, inv_n, validate, edges)


@dataclass(eq=False)
class DistanceProfile:
    """Distances binned by the Fréchet passes over one Dask array: the caller's accumulator.

    Made by the caller (the KNG envelope, :func:`pymc_manidp.laws.exact.sample_kng`)
    and handed to :func:`~pymc_manidp.stats.frechet.frechet_mean` (or to
    :func:`frechet_gradient`, :func:`frechet_gradient_hessian`, :func:`grad_norms` at
    one point): each Dask pass over ``data`` at one point ``x`` then also counts the
    distances from ``x`` in the bins of :func:`distance_profile` (``top``, ``bins``)
    and records them here. A later ``distance_profile(M, x, data, top, bins,
    profile=...)`` at one of those points returns them without a pass of its own.
    The counts are the ones the separate pass finds (same distances, same bins:
    tested), so the KNG envelope built from them is the same. Passes over another
    array (even an equal one: the profile holds ``data`` and compares identity), over
    NumPy data, or at several points at once leave it untouched, so the counts are
    only ever those of ``data`` itself. ``data`` is an array ``DataDomain.check``
    returned: ``frechet_mean`` reads unchecked Dask data through a validating copy,
    whose passes do not count.

    Parameters
    ----------
    data : ndarray or dask.array.Array, shape ``(n, *point_shape)``
        The (checked) records the passes will read; only passes over this very
        array count into the profile.
    top : float
        The profile's cap.
    bins : int
        Number of bins.

    Attributes
    ----------
    edges : ndarray, shape ``(bins + 1,)``
        The bins' edges, ``linspace(0, top, bins + 1)``.
    counts : dict
        Per point a pass was taken at (its bytes): the counts per bin, ``(bins,)``.
    """

    data: object
    top: float
    bins: int = 1024
    edges: np.ndarray = field(init=False)
    counts: dict = field(init=False, default_factory=dict)

    def __post_init__(self):
        self.edges = np.linspace(0.0, self.top, self.bins + 1)

    def _edges_for(self, data, xs):
        """The bins a pass over ``data`` at the points ``xs`` should count in, or None."""
        if len(xs) != 1 or data is not self.data or not is_dask(data):
            return None
        return self.edges

    def _counts_at(self, data, x, edges):
        """The counts a pass over ``data`` at ``x`` recorded in the bins ``edges``, or None."""
        if self._edges_for(data, x[None]) is None or not np.array_equal(self.edges, edges):
            return None
        return self.counts.get(x.tobytes())


def _profile_edges(profile, data, xs):
    return None if profile is None else profile._edges_for(data, xs)


def _gradients(M, xs, data, weights, label="Fréchet gradient", profile=None):
    """``(g, energy)`` at each point of ``xs`` ``(m, *shape)``: ``(m, *shape)``, ``(m,)``;
    ``profile``: a :class:`DistanceProfile` the pass also bins its distances into."""
    xs = np.asarray(xs, dtype=float)
    n = n_rows(data)
    _PASSES[0] += 1
    if is_dask(data):
        if weights is not None:
            raise ValueError(
                "weights are not supported with Dask data: Dask releases use equal weights"
            )
        edges = _profile_edges(profile, data, xs)
        data, raw = _unwrap(data)  # checked data: validate block by block inside the pass
        data = _point_chunks(data if raw is None else raw, M.point_shape)
        if edges is not None:
            label += " and distances"
        parts = passes._run_pass(
            data, _gradient_chunk, label, M, xs, 1.0 / n, raw is not None, edges
        )
        g = np.sum([p[0] for p in parts], axis=0)
        e = np.sum([p[1] for p in parts], axis=0)
        if edges is not None:
            profile.counts[xs[0].tobytes()] = np.sum([p[2] for p in parts], axis=0)
        return g, e
    return _gradient_rows(M, xs, _points(data), weights, 1.0 / n)


def frechet_gradient(M, x, data, weights=None, *, profile=None):
    r"""Mean log vector ``g = sum_i w_i log_x(x_i)`` and energy ``F(x)``: one pass.

    Parameters
    ----------
    M : Manifold
        The manifold of the data.
    x : array, shape ``point_shape``
        Where the gradient is taken.
    data : ndarray or dask.array.Array, shape ``(n, *point_shape)``
        Validated points (e.g. from ``DataDomain.check``).
    weights : array, shape ``(n,)``, optional
        Normalized weights (NumPy data only); default ``1/n`` each.
    profile : DistanceProfile, optional
        Over Dask, a pass over ``profile.data`` also bins the distances from ``x``
        into it (no extra read of the data).

    Returns
    -------
    g : ndarray, shape ``point_shape``
        The weighted mean of the log vectors, a tangent vector at ``x``.
    energy : float
        ``F(x) = (1/2) sum_i w_i rho^2(x, x_i)``.
    """
    g, e = _gradients(M, np.asarray(x, dtype=float)[None], data, weights, profile=profile)
    return g[0], float(e[0])


def _newton_rows(M, x, data, w, inv_n, validate=False, edges=None):
    """:func:`_gradient_rows` for one point, with the Hessian statistic ``h``;
    ``edges``: also count the distances from ``x`` in those bins (the fused profile),
    returning ``(g, e, h, counts)``."""
    rows = _rows_per_block(M.point_shape)
    g = e = h = None
    counts = None if edges is None else np.zeros(len(edges) - 1, dtype=np.int64)
    for s in range(0, len(data), rows):
        b = M.validate(data[s : s + rows]) if validate else data[s : s + rows]
        wb = np.full(len(b), inv_n) if w is None else w[s : s + rows]
        gb, eb, hb = M.frechet_gradient_hessian(x, b, wb)
        g, e, h = (gb, eb, hb) if g is None else (g + gb, e + eb, h + hb)
        if counts is not None:  # the block is in cache: its distances cost no read
            counts += _bin_counts(M.frechet_gradient_distances(x, b, wb)[2], edges)
    return (g, e, h) if counts is None else (g, e, h, counts)


def _newton_chunk(block, index, offset, M, x, inv_n, validate, edges=None):
    return _newton_rows(M, x, np.asarray(block), None, inv_n, validate, edges)


def frechet_gradient_hessian(M, x, data, weights=None, *, profile=None):
    r""":func:`frechet_gradient` and the manifold's Hessian statistic: one pass.

    For manifolds with ``frechet_newton``: ``h`` sums
    ``M.frechet_gradient_hessian`` over the blocks (NumPy) or chunks (Dask), and
    ``M.newton_direction(x, g, h)`` turns it into the Newton step.

    Parameters
    ----------
    M : Manifold
        The manifold of the data (``M.frechet_newton`` true).
    x : array, shape ``point_shape``
        Where the gradient is taken.
    data : ndarray or dask.array.Array, shape ``(n, *point_shape)``
        Validated points.
    weights : array, shape ``(n,)``, optional
        Normalized weights (NumPy data only); default ``1/n`` each.
    profile : DistanceProfile, optional
        Over Dask, a pass over ``profile.data`` also bins the distances from ``x``
        into it (no extra read of the data).

    Returns
    -------
    g : ndarray, shape ``point_shape``
        The weighted mean of the log vectors.
    energy : float
        ``F(x)``.
    h : ndarray
        The manifold's Hessian statistic at ``x``.
    """
    x = np.asarray(x, dtype=float)
    n = n_rows(data)
    _PASSES[0] += 1
    if is_dask(data):
        if weights is not None:
            raise ValueError(
                "weights are not supported with Dask data: Dask releases use equal weights"
            )
        edges = _profile_edges(profile, data, x[None])
        data, raw = _unwrap(data)
        data = _point_chunks(data if raw is None else raw, M.point_shape)
        label = "Fréchet gradient and Hessian" + ("" if edges is None else " and distances")
        parts = passes._run_pass(data, _newton_chunk, label, M, x, 1.0 / n, raw is not None, edges)
        g = np.sum([p[0] for p in parts], axis=0)
        e = float(np.sum([p[1] for p in parts]))
        h = np.sum([p[2] for p in parts], axis=0)
        if edges is not None:
            profile.counts[x.tobytes()] = np.sum([p[3] for p in parts], axis=0)
        return g, e, h
    g, e, h = _newton_rows(M, x, _points(data), weights, 1.0 / n)
    return g, float(e), h


def grad_norms(M, xs, data, *, profile=None):
    r"""``|grad F(x)| = |(1/n) sum_i log_x(x_i)|_x`` at each of ``m`` points: one pass.

    .. math:: \|\nabla F(x_j)\|_{x_j} = \Big\|\frac1n \sum_i \log_{x_j}(x_i)\Big\|_{x_j}

    The pass reads each block of data once and evaluates every point of ``xs`` on
    it, so a batch of KNG proposals costs one read of the data.

    Parameters
    ----------
    M : Manifold
        The manifold of the data.
    xs : array, shape ``(m, *point_shape)``
        The points (e.g. a batch of KNG proposals).
    data : ndarray or dask.array.Array, shape ``(n, *point_shape)``
        Validated records.
    profile : DistanceProfile, optional
        Over Dask with one point (``m = 1``), a pass over ``profile.data`` also bins
        the distances from it into the profile.

    Returns
    -------
    ndarray, shape ``(m,)``
        The gradient norm at each point of ``xs``.

    Examples
    --------
    >>> import numpy as np
    >>> import pymc_manidp as pmd
    >>> E = pmd.Euclidean(dim=2)
    >>> grad_norms(E, np.zeros((1, 2)), np.array([[1.0, 0.0], [3.0, 0.0]]))
    array([2.])
    """
    xs = np.asarray(xs, dtype=float)
    g, _ = _gradients(M, xs, data, None, f"gradients at {len(xs)} points", profile)
    return M.norm(xs, g)


def distance_profile(M, x, data, top, bins=1024, *, profile=None):
    """Compute the distances from ``x`` to the records, capped at ``top``, in one pass.

    In memory with at most ``4 bins`` records: the exact (capped) distances, each with
    weight ``1/n``. Otherwise (and always over Dask, where the data are never
    gathered): a histogram on ``[0, top]`` whose bins are represented by their upper
    edges; a function that decreases with the distance, averaged with
    these weights, is then a lower bound of its true average (what the KNG envelope's
    local slopes need, :func:`pymc_manidp.laws.exact.sample_kng`).

    Parameters
    ----------
    M : Manifold
        The manifold of the data.
    x : array, shape ``point_shape``
        The point the distances are measured from.
    data : ndarray or dask.array.Array, shape ``(n, *point_shape)``
        Validated records.
    top : float
        The cap (and the histogram's upper end over Dask).
    bins : int
        Number of histogram bins over Dask.
    profile : DistanceProfile, optional
        Over Dask: if a pass over ``profile.data`` (this very array) at ``x`` binned
        its distances into it with these bins, those counts, without a pass.

    Returns
    -------
    values : ndarray, shape ``(n,)`` in memory or ``(bins,)`` over Dask
        The capped distances, or the bins' upper edges.
    weights : ndarray, same shape as ``values``
        Their weights, summing to 1.
    """
    x = np.asarray(x, dtype=float)
    edges = np.linspace(0.0, top, bins + 1)
    if not is_dask(data):
        d = np.minimum(M.dist(x, _points(data)), top)
        if len(d) <= 4 * bins:
            return d, np.full(len(d), 1.0 / len(d))
        # many records: the envelope evaluates its slope on dozens of radii, each a
        # sum over the records; the histogram makes each one O(bins)
        counts = np.histogram(d, bins=edges)[0]
        return edges[1:], counts / counts.sum()
    counts = None if profile is None else profile._counts_at(data, x, edges)
    if counts is None:  # else binned by the Fréchet pass at x: no pass of its own
        data, raw = _unwrap(data)
        data = _point_chunks(data if raw is None else raw, M.point_shape)
        parts = passes._run_pass(
            data,
            _gradient_chunk,
            "distances",
            M,
            x[None],
            1.0 / n_rows(data),
            raw is not None,
            edges,
        )
        counts = np.sum([p[2] for p in parts], axis=0)
    return edges[1:], counts / counts.sum()


def _sum_chunk(block, index, offset):
    return np.asarray(block, dtype=float).sum(axis=0)


def weighted_sum(data, weights=None):
    """Compute ``sum_i w_i x_i`` in the ambient space (default ``w_i = 1/n``) in one pass.

    Parameters
    ----------
    data : ndarray or dask.array.Array, shape ``(n, *point_shape)``
        The records.
    weights : array, shape ``(n,)``, optional
        The weights (NumPy data only); default ``1/n`` each.

    Returns
    -------
    ndarray, shape ``point_shape``
        The weighted sum (the Euclidean mean by default).

    Raises
    ------
    ValueError
        Weights with Dask data.

    Examples
    --------
    >>> import numpy as np
    >>> weighted_sum(np.array([[1.0, 0.0], [3.0, 2.0]]))
    array([2., 1.])
    """
    data = _points(data)  # checked Dask data: the sum of the validated points
    n = n_rows(data)
    _PASSES[0] += 1
    if is_dask(data):
        if weights is not None:
            raise ValueError("weights are not supported with Dask data")
        # through _run_pass, not data.sum: each block's rows are checked against n
        return np.sum(passes._run_pass(data, _sum_chunk, "ambient sum"), axis=0) / n
    if weights is None:
        return np.asarray(data).sum(axis=0) / n
    return np.tensordot(weights, data, axes=(0, 0))
