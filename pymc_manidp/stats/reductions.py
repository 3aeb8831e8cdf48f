r"""Passes over the data: each one function, for a NumPy array or a Dask array.

Every statistic a release needs is a sum (or a maximum) over the records: the
domain check (finite, on the manifold, inside the public ball), the Fréchet
gradient and energy

.. math:: g(x) = \sum_i w_i \log_x(x_i), \qquad F(x) = \tfrac12 \sum_i w_i \rho^2(x, x_i),

and KNG's gradient norms at a batch of proposals. One call here is one *pass*:

- a NumPy array is walked in cache-sized blocks of rows (``BLOCK_ELEMENTS``
  floats), so the temporaries of the log maps stay in cache;
- a ``dask.array.Array`` of shape ``(n, *point_shape)`` chunked along ``n`` is
  reduced chunk by chunk: each chunk yields a few numbers (a ``d``-vector per
  proposal, counts, a maximum), added up on the client in chunk order. The data
  are read once per pass and never gathered. Without a ``distributed`` client
  Dask's local scheduler runs the pass; with one (``distributed.Client(...)``
  made current) the cluster does.

A check pass returns its result as a value, a :class:`CheckedData` (the records, the
domain and what the pass learnt), which every pass here, ``frechet_mean`` and
``frechet_median`` accept and trust: later steps of the same release (the sampler's
own check, the Fréchet mean's validation) do not repeat the pass, and the Fréchet
mean starts from the public center with the gradient the check already summed.

Examples
--------
>>> import numpy as np
>>> import pymc_manidp as pmd
>>> S = pmd.Sphere(dim=2)
>>> data = np.array([[0.0, 0.0, 1.0], [0.0, 0.6, 0.8]])
>>> g, energy = frechet_gradient(S, np.array([0.0, 0.0, 1.0]), data)
>>> bool(np.allclose(g, 0.5 * S.log([0.0, 0.0, 1.0], data[1])))
True
"""

from __future__ import annotations

import contextlib
import math
import sys
from dataclasses import dataclass, field

import numpy as np

from pymc_manidp._validation import check_real_data

__all__ = [
    "BLOCK_ELEMENTS",
    "CheckSummary",
    "CheckedData",
    "DistanceProfile",
    "checked_summary",
    "distance_profile",
    "frechet_gradient",
    "frechet_gradient_hessian",
    "grad_norms",
    "is_dask",
    "lazy_validate",
    "median_cell_bounds",
    "median_grad_norms",
    "median_terms",
    "n_rows",
    "pass_count",
    "progress",
    "rows_per_block",
    "scan_domain",
    "turn_rate",
    "weighted_sum",
    "zero_distance",
]


class DomainError(ValueError):
    """Data violate the public domain: nothing may be released from them as they are.

    Raised by ``DataDomain.check`` and by its passes over Dask data. Public as
    ``pymc_manidp.DomainError`` (and ``pymc_manidp.stats.DomainError``).
    """


#: floats per block of a NumPy pass (256 KiB): measured fastest on S^2 and SPD(2)
#: between 2^13 and 2^18 (docs/scaling.md)
BLOCK_ELEMENTS = 1 << 15


def is_dask(x) -> bool:
    """Whether ``x`` is a ``dask.array.Array`` (never imports Dask).

    Parameters
    ----------
    x : object
        Anything.

    Returns
    -------
    bool
        True for a Dask array (only possible once Dask is imported).

    Examples
    --------
    >>> import numpy as np
    >>> is_dask(np.zeros((2, 3)))
    False
    """
    if isinstance(x, CheckedData):  # checked records: Dask if their points are
        x = x.points
    da = sys.modules.get("dask.array")
    return da is not None and isinstance(x, da.Array)


def n_rows(data) -> int:
    """Number of records of a NumPy or Dask array (Dask chunks must be known).

    Parameters
    ----------
    data : ndarray or dask.array.Array, shape ``(n, *point_shape)``
        The records.

    Returns
    -------
    int
        ``n``.

    Raises
    ------
    ValueError
        If the Dask array's chunk sizes are unknown.

    Examples
    --------
    >>> import numpy as np
    >>> n_rows(np.zeros((5, 3)))
    5
    """
    n = data.shape[0]
    if isinstance(n, float) and math.isnan(n):
        raise ValueError(
            "the Dask array's chunk sizes are unknown: call data.compute_chunk_sizes() "
            "(or load it with pymc_manidp.io) so that n, and so the sensitivity, is known"
        )
    return int(n)


def _rows_per_block(point_shape, m: int = 1) -> int:
    return max(1, BLOCK_ELEMENTS // (math.prod(point_shape) * max(m, 1)))


def rows_per_block(point_shape, m: int = 1) -> int:
    """Return the rows of a NumPy block when each row is worked on at ``m`` points at once.

    The passes' rule (``BLOCK_ELEMENTS`` floats of records times ``m``), for sums over
    the records computed outside this module (the median's shells): their
    temporaries, ``m`` numbers per record, then stay cache-sized however large ``n``.

    Parameters
    ----------
    point_shape : tuple of int
        Shape of one record.
    m : int
        Points (or shells) each row is combined with.

    Returns
    -------
    int
        At least 1.

    Examples
    --------
    >>> rows_per_block((3,), 4)
    2730
    """
    return _rows_per_block(point_shape, m)


def _point_chunks(data, point_shape):
    """A Dask array chunked along ``n`` only (one chunk over each point axis)."""
    if data.ndim != len(point_shape) + 1 or tuple(data.shape[1:]) != tuple(point_shape):
        raise ValueError(
            f"data must have shape (n, {', '.join(map(str, point_shape))}), got {data.shape}"
        )
    if any(len(c) > 1 for c in data.chunks[1:]):
        data = data.rechunk({i: -1 for i in range(1, data.ndim)})
    return data


def lazy_validate(M, data):
    """A Dask array of points validated chunk by chunk when a pass reads them (lazy).

    For Dask data that no check pass saw: an invalid record then raises inside the
    pass (``DataDomain.check`` names the chunk and row instead).

    Parameters
    ----------
    M : Manifold
        The manifold of the data.
    data : dask.array.Array, shape ``(n, *point_shape)``
        The records (rechunked to one chunk over each point axis if needed).

    Returns
    -------
    dask.array.Array, shape ``(n, *point_shape)``
        The same records, each chunk passed through ``M.validate`` when computed.
    """
    check_real_data(data, "data")  # a Dask masked array: refused before any read
    return _point_chunks(data, M.point_shape).map_blocks(M.validate, dtype=float)


# --- running a pass ----------------------------------------------------------------------
_PROGRESS = {"on": False, "count": 0}
_PASSES = [0]  # every pass of this process, NumPy or Dask (for benchmarks and docs)


def pass_count() -> int:
    """Count the passes over data run so far in this process (each function here counts one).

    Returns
    -------
    int
        The number of passes, NumPy or Dask (for benchmarks and docs).
    """
    return _PASSES[0]


@contextlib.contextmanager
def progress(enabled: bool = True):
    """Show a progress bar (on stderr) for every Dask pass run inside the block.

    With a current ``distributed`` client the bar is ``distributed.progress``;
    otherwise Dask's local ``ProgressBar``. NumPy passes show nothing.

    Parameters
    ----------
    enabled : bool
        Show the bars (False: a block that hides them, inside an enabled one).

    Yields
    ------
    None
        Inside the block, passes are numbered from 1.
    """
    old = dict(_PROGRESS)
    _PROGRESS.update(on=bool(enabled), count=0)  # passes numbered from 1 in each block
    try:
        yield
    finally:
        _PROGRESS.update(old)


def _client():
    if "distributed" not in sys.modules:
        return None
    from distributed import get_client

    try:
        return get_client()
    except ValueError:
        return None


def _rows_checked(block, index, offset, rows, chunk_fn, *args):
    """``chunk_fn`` on a block that has the ``rows`` its chunk declared (n counted them)."""
    got = np.shape(block)[:1]
    if got != (rows,):
        raise ValueError(
            f"chunk {index} (rows {offset}:{offset + rows}) was declared with {rows} rows but "
            f"{got[0] if got else 'no'} were read: n, and with it the sensitivity, counted "
            "the declared rows, so nothing is released (the data changed after they were "
            "opened, or a loader returns other rows than it declares); a charge already "
            "made to a privacy budget stands (the release had started)"
        )
    return chunk_fn(block, index, offset, *args)


def _run_pass(data, chunk_fn, label: str, *args):
    """``[chunk_fn(block, chunk_index, row_offset, *args) for each chunk]`` computed by Dask."""
    import dask

    blocks = data.to_delayed().ravel()
    offsets = np.concatenate([[0], np.cumsum(data.chunks[0])[:-1]]).astype(int)
    fn = dask.delayed(_rows_checked, pure=True)  # each block's rows checked where it is read
    parts = [
        fn(b, i, int(off), int(rows), chunk_fn, *args)
        for i, (b, off, rows) in enumerate(zip(blocks, offsets, data.chunks[0], strict=True))
    ]
    _PROGRESS["count"] += 1
    client = _client()
    if not _PROGRESS["on"]:
        return list(dask.compute(*parts))
    print(f"pass {_PROGRESS['count']}: {label} over {len(parts)} chunks", file=sys.stderr)
    if client is not None:
        from distributed import progress as dist_progress

        futures = client.compute(parts)
        with contextlib.redirect_stdout(sys.stderr):  # stdout may carry the release
            dist_progress(futures)
            print()
        return client.gather(futures)
    from dask.diagnostics import ProgressBar

    with ProgressBar(out=sys.stderr):
        return list(dask.compute(*parts))


# --- Fréchet gradient and KNG gradient norms ---------------------------------------------
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


# --- the distance profile fused into the Fréchet passes -----------------------------------
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
        parts = _run_pass(data, _gradient_chunk, label, M, xs, 1.0 / n, raw is not None, edges)
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
        parts = _run_pass(data, _newton_chunk, label, M, x, 1.0 / n, raw is not None, edges)
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


# --- the Fréchet median's sums ------------------------------------------------------------
def zero_distance(M) -> float:
    """Distance below which a record counts as sitting at the point (the median's kink).

    A few hundred ulps of the manifold's length scale (its ``radius`` attribute where
    it has one, else 1): closer records have no well-defined direction at working
    precision, and the Weiszfeld step and the median's gradient treat them as
    coincident.

    Parameters
    ----------
    M : Manifold
        The manifold (its ``radius`` attribute, if any, sets the length scale).

    Returns
    -------
    float
        The distance, ``256 eps`` times the length scale.
    """
    return 256.0 * np.finfo(float).eps * float(getattr(M, "radius", 1.0))


def _median_block(M, xs, block, w):
    """Per point of ``xs``: the sums of :func:`median_terms` over one block of rows.

    All points at once: the log maps of the block broadcast over ``xs`` (the block
    holds at most ``BLOCK_ELEMENTS / m`` floats per point, :func:`_median_rows`).
    """
    nd = len(M.point_shape)
    zero = zero_distance(M)
    xb = xs.reshape((len(xs), 1, *M.point_shape))
    logs = M.log(xb, block[None])  # (m, b, *shape)
    rho = M.norm(xb, logs)  # (m, b)
    far = rho > zero
    wf = np.where(far, w / np.where(far, rho, 1.0), 0.0)
    units = np.einsum("mb,mb...->m...", wf, logs) if nd else wf @ logs
    inv = wf.sum(axis=1)
    at = np.where(far, 0.0, w).sum(axis=1)
    energy = (w * rho).sum(axis=1)
    # the nearest record off x with positive weight: the candidate median at a record
    cand = np.where(far & (w > 0), rho, np.inf)
    k = np.argmin(cand, axis=1)
    near_d = cand[np.arange(len(xs)), k]
    return units, inv, at, energy, near_d, block[k]


def _median_rows(M, xs, data, w, inv_n, validate=False):
    rows = _rows_per_block(M.point_shape, len(xs))
    total = None
    for s in range(0, len(data), rows):
        b = M.validate(data[s : s + rows]) if validate else data[s : s + rows]
        wb = np.full(len(b), inv_n) if w is None else w[s : s + rows]
        part = _median_block(M, xs, b, wb)
        total = part if total is None else _median_combine(total, part)
    return total


def _median_combine(a, b):
    """Add the sums of two parts, keep the nearer record."""
    closer = b[4] < a[4]
    shape = (-1,) + (1,) * (a[5].ndim - 1)
    return (
        a[0] + b[0],
        a[1] + b[1],
        a[2] + b[2],
        a[3] + b[3],
        np.where(closer, b[4], a[4]),
        np.where(closer.reshape(shape), b[5], a[5]),
    )


def _median_chunk(block, index, offset, M, xs, inv_n, validate):
    return _median_rows(M, xs, np.asarray(block), None, inv_n, validate)


def median_terms(M, xs, data, weights=None):
    r"""The sums of the Fréchet median's Weiszfeld step at each of ``m`` points: one pass.

    With ``rho_i = rho(x, x_i)`` and ``Z`` the records at ``x`` (``rho_i`` below
    :func:`zero_distance`, whose direction is undefined):

    .. math:: u(x) = \sum_{i \notin Z} w_i \frac{\log_x(x_i)}{\rho_i}, \quad
              s(x) = \sum_{i \notin Z} \frac{w_i}{\rho_i}, \quad
              \eta(x) = \sum_{i \in Z} w_i, \quad
              F(x) = \sum_i w_i \rho_i.

    ``u`` is minus the gradient of ``F`` away from the records (a mean of unit
    vectors); ``u/s`` is the Weiszfeld step.

    Parameters
    ----------
    M : Manifold
        The manifold of the data.
    xs : array, shape ``(m, *point_shape)``
        The points.
    data : ndarray or dask.array.Array, shape ``(n, *point_shape)``
        Validated records.
    weights : array, shape ``(n,)``, optional
        Normalized weights (NumPy data only); default ``1/n`` each.

    Returns
    -------
    u : ndarray, shape ``(m, *point_shape)``
        Tangent vectors at each point of ``xs``.
    s, eta, energy : ndarray, shape ``(m,)``
        As above.
    nearest_distance : ndarray, shape ``(m,)``
        The distance to the nearest record not at the point (``inf`` if none).
    nearest : ndarray, shape ``(m, *point_shape)``
        That record (where a Weiszfeld iteration may be heading: a median can sit at
        a record).

    Examples
    --------
    >>> import numpy as np
    >>> import pymc_manidp as pmd
    >>> E = pmd.Euclidean(dim=1)
    >>> data = np.array([[0.0], [2.0], [-4.0]])
    >>> u, s, eta, F, _, _ = median_terms(E, np.zeros((1, 1)), data)
    >>> u.ravel().round(6).tolist(), float(eta[0]), float(F[0])
    ([0.0], 0.3333333333333333, 2.0)
    """
    xs = np.asarray(xs, dtype=float)
    n = n_rows(data)
    _PASSES[0] += 1
    if is_dask(data):
        if weights is not None:
            raise ValueError(
                "weights are not supported with Dask data: Dask releases use equal weights"
            )
        data, raw = _unwrap(data)
        data = _point_chunks(data if raw is None else raw, M.point_shape)
        label = "median sums" if len(xs) == 1 else f"median gradients at {len(xs)} proposals"
        parts = _run_pass(data, _median_chunk, label, M, xs, 1.0 / n, raw is not None)
        total = parts[0]
        for part in parts[1:]:  # in chunk order
            total = _median_combine(total, part)
        return total
    return _median_rows(M, xs, _points(data), weights, 1.0 / n)


def median_grad_norms(M, xs, data):
    r"""``|grad F(x)|`` of the Fréchet median's objective at each of ``m`` points: one pass.

    .. math:: \|\nabla F(x_j)\|_{x_j} = \Big\|\frac1n \sum_{i:\ x_i \ne x_j}
              \frac{\log_{x_j}(x_i)}{\rho(x_j, x_i)}\Big\|_{x_j},
              \qquad F(x) = \frac1n \sum_i \rho(x, x_i).

    A record at ``x_j`` itself (a null set of ``x_j``) contributes nothing: the
    gradient is then that of the other records' sum.

    Parameters
    ----------
    M : Manifold
        The manifold of the data.
    xs : array, shape ``(m, *point_shape)``
        The points (e.g. a batch of KNG proposals).
    data : ndarray or dask.array.Array, shape ``(n, *point_shape)``
        Validated records.

    Returns
    -------
    ndarray, shape ``(m,)``
        The gradient norm at each point of ``xs``, in ``[0, 1]``.

    Examples
    --------
    >>> import numpy as np
    >>> import pymc_manidp as pmd
    >>> E = pmd.Euclidean(dim=2)
    >>> median_grad_norms(E, np.zeros((1, 2)), np.array([[1.0, 0.0], [3.0, 0.0]]))
    array([1.])
    """
    xs = np.asarray(xs, dtype=float)
    u = median_terms(M, xs, data)[0]
    return M.norm(xs, u)


def turn_rate(rho_lo, rho_hi, kappa_min, kappa_max):
    r"""An upper bound of ``|Hess rho(., x_i)|`` where ``rho_lo <= rho <= rho_hi``.

    Hessian comparison: ``ct(kappa_max, rho) P <= Hess rho <= ct(kappa_min, rho) P``
    (``P`` the projection orthogonal to the geodesic, ``ct(k, rho) = sqrt(k) cot(sqrt(k)
    rho)``, ``1/rho`` at ``k = 0``, ``sqrt|k| coth(sqrt|k| rho)`` for ``k < 0``). The
    upper side is at most ``1/rho`` for ``kappa_min >= 0``; the lower side is negative
    only beyond ``pi/(2 sqrt(kappa_max))``, and at the conjugate radius ``pi/sqrt(kappa_max)``
    no bound exists (``inf``). It is the rate at which the unit direction to a record
    turns as the point moves (the median envelopes' turn budgets, docs/exact.md).

    Parameters
    ----------
    rho_lo, rho_hi : array
        Bounds of the distance to the record (broadcast together), ``rho_lo > 0``.
    kappa_min, kappa_max : float
        The manifold's sectional curvature bounds.

    Returns
    -------
    ndarray
        The bound, broadcast shape of the inputs.

    Examples
    --------
    >>> float(turn_rate(np.array(0.5), np.array(0.7), 0.0, 0.0))  # flat: 1/rho_lo
    2.0
    """
    if kappa_min >= 0:
        upper = 1.0 / rho_lo
    else:
        k = np.sqrt(-kappa_min)
        upper = k / np.tanh(k * rho_lo)
    if kappa_max <= 0:
        return upper
    k = np.sqrt(kappa_max)
    a = np.minimum(k * rho_hi, np.pi)
    with np.errstate(divide="ignore"):
        lower = np.where(a < np.pi, -k / np.tan(np.where(a < np.pi, a, 1.0)), np.inf)
    return np.maximum(upper, np.where(k * rho_hi > 0.5 * np.pi, lower, 0.0))


def _cell_block(M, xs, block, w, delta, kappas):
    """Per point: the unit sum ``u`` and the turn budget of :func:`median_cell_bounds`."""
    xb = xs.reshape((len(xs), 1, *M.point_shape))
    logs = M.log(xb, block[None])
    rho = M.norm(xb, logs)
    d = delta[:, None]
    far = rho > d
    safe = np.where(far, rho, 1.0)
    nz = rho > zero_distance(M)  # as in median_terms: a record at x_j counts 0
    units = np.einsum("mb,mb...->m...", np.where(nz, w / np.where(nz, rho, 1.0), 0.0), logs)
    # a far record's unit vector turns at most delta * c(rho - delta); a near one by 2
    rate = turn_rate(np.where(far, safe - d, 1.0), np.where(far, safe + d, 1.0), *kappas)
    turn = np.where(far, w * np.minimum(2.0, d * rate), 2.0 * w)
    return units, turn.sum(axis=1)


def _cell_rows(M, xs, data, inv_n, delta, kappas, validate=False):
    rows = _rows_per_block(M.point_shape, len(xs))
    u, t = np.zeros(xs.shape), np.zeros(len(xs))
    for s in range(0, len(data), rows):
        b = M.validate(data[s : s + rows]) if validate else data[s : s + rows]
        ub, tb = _cell_block(M, xs, b, np.full(len(b), inv_n), delta, kappas)
        u += ub
        t += tb
    return u, t


def _cell_chunk(block, index, offset, M, xs, inv_n, delta, kappas, validate):
    return _cell_rows(M, xs, np.asarray(block), inv_n, delta, kappas, validate)


def median_cell_bounds(M, xs, data, delta):
    r"""Lower bounds of the median's gradient norm on geodesic balls ``B_delta(x_j)``: one pass.

    For ``y`` with ``rho(x_j, y) <= delta_j``, with ``u_i = log(x_i)/rho_i`` and
    ``c`` a bound of the Hessian of ``rho(., x_i)`` in operator norm at distances
    ``rho(x_j, x_i) ± delta_j`` (Hessian comparison with both curvature bounds:
    ``1/rho`` when the curvature is ``>= 0`` and ``rho < pi/(2 sqrt(kappa_max))``,
    ``sqrt|k| coth(sqrt|k| rho)`` for a lower bound ``k < 0``):

    .. math:: \|\nabla F(y)\| \ge \|\nabla F(x_j)\| - \frac1n \sum_i
              \min\big(2,\ \delta_j\, c_{ij}\big),

    with 2 for records within ``delta_j``. Why: along the geodesic from ``x_j`` to
    ``y`` the norm of ``U = (1/n) sum_i u_i`` falls no faster than
    ``|nabla U| <= (1/n) sum_i |Hess rho_i|``, and ``rho_i`` stays above
    ``rho(x_j, x_i) - delta_j``; a record's unit vector can change by 2 at most.

    Parameters
    ----------
    M : Manifold
        The manifold of the data (its ``curvature_bounds[0]`` is used).
    xs : array, shape ``(m, *point_shape)``
        The balls' centers.
    data : ndarray or dask.array.Array, shape ``(n, *point_shape)``
        Validated records, all within the injectivity radius of every center, and no
        geodesic from a center into its ball crossing a record's cut locus short of
        the conjugate radius (the median envelope anchors its boxes in the ball where
        the cut locus comes first, docs/exact.md).
    delta : array, shape ``(m,)``
        The balls' radii.

    Returns
    -------
    bounds : ndarray, shape ``(m,)``
        The lower bounds (may be negative).
    slack : ndarray, shape ``(m,)``
        ``|grad F(x_j)| - bounds``: how loose each bound is.

    Examples
    --------
    >>> import numpy as np
    >>> import pymc_manidp as pmd
    >>> E = pmd.Euclidean(dim=1)
    >>> data = np.array([[2.0], [4.0]])
    >>> median_cell_bounds(E, np.zeros((1, 1)), data, np.array([0.5]))[0]  # 1 - (1/3 + 1/7)/2
    array([0.76190476])
    """
    xs = np.asarray(xs, dtype=float)
    delta = np.asarray(delta, dtype=float)
    n = n_rows(data)
    kappas = tuple(float(k) for k in M.curvature_bounds)
    _PASSES[0] += 1
    if is_dask(data):
        data, raw = _unwrap(data)
        data = _point_chunks(data if raw is None else raw, M.point_shape)
        parts = _run_pass(
            data, _cell_chunk, "median envelope", M, xs, 1.0 / n, delta, kappas, raw is not None
        )
        u = np.sum([p[0] for p in parts], axis=0)
        t = np.sum([p[1] for p in parts], axis=0)
    else:
        u, t = _cell_rows(M, xs, _points(data), 1.0 / n, delta, kappas)
    return M.norm(xs, u) - t, t


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
        parts = _run_pass(
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
        return np.sum(_run_pass(data, _sum_chunk, "ambient sum"), axis=0) / n
    if weights is None:
        return np.asarray(data).sum(axis=0) / n
    return np.tensordot(weights, data, axes=(0, 0))


# --- the domain check ----------------------------------------------------------------------
@dataclass(frozen=True)
class CheckSummary:
    """What one check pass learnt about data it accepted.

    Attributes
    ----------
    n : int
        Number of records.
    max_distance : float
        Largest distance of a record from the public center.
    center : ndarray
        The public center ``m0``.
    center_gradient : ndarray or None
        ``(1/n) sum_i log_{m0}(x_i)``: the first step of the Fréchet mean from ``m0``
        (None when the data were clipped).
    center_energy : float or None
        ``F(m0)``.
    mean_ambient : ndarray
        ``(1/n) sum_i x_i`` in the embedding (the Euclidean mean, a start point).
    """

    n: int
    max_distance: float
    center: np.ndarray
    center_gradient: np.ndarray | None
    center_energy: float | None
    mean_ambient: np.ndarray


@dataclass
class _ChunkScan:
    rows: int = 0
    problem: str | None = None  # "invalid", "distance", or None
    problem_row: int = -1
    problem_message: str = ""
    outside: int = 0
    first_outside: int = -1
    max_distance: float = 0.0
    g: np.ndarray | None = None
    e: float = 0.0
    ambient: np.ndarray | None = None


def _first_invalid(M, b):
    """Row (in ``b``) and message of the first record ``M.validate`` refuses."""
    trailing = tuple(range(1, b.ndim))
    finite = np.isfinite(b).all(axis=trailing)
    if not finite.all():
        i = int(np.argmin(finite))
        return i, "it holds NaN or infinite values"
    for i in range(len(b)):
        try:
            M.validate(b[i])
        except (ValueError, TypeError) as err:
            return i, str(err)
    return 0, "the block failed validation"  # pragma: no cover - validate is per row


def _scan_rows(domain, data, out, offset=0):
    """Scan ``data`` block by block; write validated points into ``out`` (if given)."""
    M = domain.manifold
    rows = _rows_per_block(M.point_shape)
    scan = _ChunkScan(rows=len(data), max_distance=-np.inf)
    g = np.zeros(M.point_shape)
    ambient = np.zeros(M.point_shape)
    fused = True
    for s in range(0, len(data), rows):
        raw = np.asarray(data[s : s + rows])
        try:
            b = M.validate(raw)
        except (ValueError, TypeError):
            i, msg = _first_invalid(M, raw)
            scan.problem, scan.problem_row, scan.problem_message = "invalid", s + i, msg
            return scan
        d = domain.distances(b)
        finite = np.isfinite(d)
        if not finite.all():
            scan.problem, scan.problem_row = "distance", s + int(np.argmin(finite))
            return scan
        outside = domain.outside(d)
        if outside.any():
            if scan.outside == 0:
                scan.first_outside = s + int(np.argmax(outside))
            scan.outside += int(outside.sum())
            fused = False
        scan.max_distance = max(scan.max_distance, float(d.max()))
        ambient += b.sum(axis=0)
        if fused:
            # fused with the first Fréchet iteration: the gradient at the public center
            try:
                gb, eb = M.frechet_gradient(domain.center, b, np.ones(len(b)))
            except ValueError:  # e.g. a cut locus: the Fréchet mean starts elsewhere
                fused = False
            else:
                g += gb
                scan.e += eb
        if out is not None:
            out[s : s + rows] = b
    scan.g = g if fused else None
    scan.ambient = ambient
    return scan


def _scan_chunk(block, index, offset, domain):
    return _scan_rows(domain, np.asarray(block), None)


def _validate_chunk(block, domain):
    return domain.manifold.validate(block)


def _clip_chunk(block, domain):
    return domain.check(np.asarray(block), clip=True).points


def scan_domain(domain, data, *, clip: bool = False):
    """One pass: validate the records and place them in ``domain``'s ball.

    Parameters
    ----------
    domain : DataDomain
        The public ball ``B_r(m0)``.
    data : ndarray or dask.array.Array, shape ``(n, *point_shape)``
        The records.
    clip : bool
        Dask only: return the data with outside records moved onto the boundary
        (lazily, chunk by chunk) instead of raising.

    Returns
    -------
    CheckedData or None
        The validated data (NumPy: a new read-only array; Dask: a lazy array) with
        the :class:`CheckSummary`, or None for NumPy data that fail (the caller's own
        check then raises its usual error).

    Raises
    ------
    ValueError, DomainError
        Dask data that fail: the message names the chunk and the row.
    """
    M = domain.manifold
    n = n_rows(data)
    if n == 0:
        raise ValueError("data is empty: nothing to summarize")
    _PASSES[0] += 1
    if not is_dask(data):
        out = np.empty(data.shape)
        scan = _scan_rows(domain, data, out)
        if scan.problem or scan.outside:
            return None
        out.flags.writeable = False  # what was checked cannot change behind our back
        return CheckedData(out, domain, _summary(domain, n, [scan]))

    data = _point_chunks(data, M.point_shape)
    scans = _run_pass(data, _scan_chunk, "data check", domain)
    offsets = np.concatenate([[0], np.cumsum(data.chunks[0])[:-1]]).astype(int)
    for i, sc in enumerate(scans):
        if sc.problem is None:
            continue
        where = (
            f"chunk {i}, row {sc.problem_row} of the chunk (row {offsets[i] + sc.problem_row} "
            "overall)"
        )
        if sc.problem == "invalid":
            raise ValueError(f"invalid record at {where}: {sc.problem_message}")
        raise DomainError(
            f"the distance to the center could not be computed at {where}: the point is "
            "too ill-conditioned to place in or out of the ball"
        )
    outside = sum(sc.outside for sc in scans)
    if outside and not clip:
        i = next(i for i, sc in enumerate(scans) if sc.outside)
        r = scans[i].first_outside
        far = max(sc.max_distance for sc in scans)
        raise DomainError(
            f"{outside} of {n} points lie outside the public ball of radius "
            f"{domain.radius:.6g} (farthest at distance {far:.6g}, first at chunk {i}, row "
            f"{r} of the chunk, row {offsets[i] + r} overall). Pass clip=True to move them "
            "onto the boundary (a per-record map that keeps the guarantee), or choose a "
            "larger public radius (below r*) without looking at the data."
        )
    if outside:
        points = data.map_blocks(_clip_chunk, domain, dtype=float)
        return CheckedData(points, domain, _summary(domain, n, scans, clipped=True))
    points = data.map_blocks(_validate_chunk, domain, dtype=float)
    return CheckedData(points, domain, _summary(domain, n, scans), raw=data)


def _summary(domain, n, scans, clipped=False):
    fused = not clipped and all(sc.g is not None for sc in scans)
    return CheckSummary(
        n=n,
        max_distance=min(max(sc.max_distance for sc in scans), domain.radius)
        if clipped
        else max(sc.max_distance for sc in scans),
        center=domain.center,
        center_gradient=np.sum([sc.g for sc in scans], axis=0) / n if fused else None,
        center_energy=float(sum(sc.e for sc in scans)) / n if fused else None,
        mean_ambient=np.sum([sc.ambient for sc in scans], axis=0) / n,
    )


# --- what was checked ----------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class CheckedData:
    """Records a :class:`~pymc_manidp.stats.DataDomain` accepted: what its ``check`` returns.

    A value, not a note kept elsewhere: the passes of this module,
    :func:`~pymc_manidp.stats.frechet_mean` and :func:`~pymc_manidp.stats.frechet_median`
    trust it (no second validation; the Fréchet mean starts from the public center
    with the gradient the check summed), and ``DataDomain.check`` returns it unchanged
    when asked again with an equal domain, as ``scipy.spatial.transform.Rotation``
    validates its quaternions once and trusts them after. It stands in for its points
    where an array is expected (``len``, ``shape``, indexing, ``np.asarray``).

    Parameters
    ----------
    points : ndarray or dask.array.Array, shape ``(n, *point_shape)``
        The records to use: a read-only NumPy array, or a lazy Dask array that
        validates (or clips) chunk by chunk when read.
    domain : DataDomain
        The domain they were checked against.
    summary : CheckSummary or None
        What the check pass learnt; None when the data took the slow path (some record
        failed the fast scan and was clipped): such data are then used as the plain
        array ``points`` (validated again where used), as before the check.
    raw : dask.array.Array or None
        Dask only: the records ``points`` validates lazily; the passes read them and
        validate block by block.
    """

    points: object
    domain: object
    summary: CheckSummary | None = None
    raw: object = None

    @property
    def trusted(self) -> bool:
        """Whether the passes may skip validating ``points`` (a check pass summarized them)."""
        return self.summary is not None

    @property
    def shape(self) -> tuple:
        """Shape of ``points``."""
        return self.points.shape

    @property
    def ndim(self) -> int:
        """Number of axes of ``points``."""
        return self.points.ndim

    @property
    def dtype(self):
        """Data type of ``points``."""
        return self.points.dtype

    def __len__(self) -> int:
        return len(self.points)

    def __getitem__(self, key):
        return self.points[key]

    def __iter__(self):
        return iter(self.points)

    def __array__(self, dtype=None, copy=None):
        return np.asarray(self.points, dtype=dtype)

    def __repr__(self) -> str:
        kind = "Dask" if is_dask(self.points) else "NumPy"
        return f"CheckedData({kind} records of shape {self.shape}, {self.domain!r})"


def _points(data):
    """The records of ``data``: its points if it is :class:`CheckedData`, else itself."""
    return data.points if isinstance(data, CheckedData) else data


def _unwrap(data):
    """``(records, raw)``: ``raw`` the Dask records a trusted check validates lazily
    (the pass then reads them and validates block by block), else None."""
    if isinstance(data, CheckedData):
        return data.points, (data.raw if data.trusted else None)
    return data, None


def _same_domain(a, b) -> bool:
    return a is b or (
        a.manifold == b.manifold
        and a.radius == b.radius
        and np.array_equal(a.center, b.center)
        and type(a) is type(b)
    )


def checked_summary(data, domain=None, manifold=None):
    """The :class:`CheckSummary` of ``data`` if it is trusted :class:`CheckedData`.

    With ``domain``: only if it was checked against an equal domain; with
    ``manifold``: only if it was validated on an equal manifold. None otherwise
    (a plain array, or checked data that took the slow path).

    Parameters
    ----------
    data : CheckedData, ndarray or dask.array.Array, shape ``(n, *point_shape)``
        What ``DataDomain.check`` may have returned.
    domain : DataDomain, optional
        The domain it must have been checked against.
    manifold : Manifold, optional
        The manifold it must have been validated on.

    Returns
    -------
    CheckSummary or None
        Its summary, or None.
    """
    if not isinstance(data, CheckedData) or not data.trusted:
        return None
    if domain is not None and not _same_domain(data.domain, domain):
        return None
    if manifold is not None and data.domain.manifold != manifold:
        return None
    return data.summary
