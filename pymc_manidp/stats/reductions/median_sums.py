r"""The Fréchet median's passes: its gradient, objective and the records at the point
(:func:`median_terms`, :func:`median_grad_norms`), and the bounds of ``|grad F|`` on the
median envelope's cells (:func:`median_cell_bounds`, with :func:`turn_rate`).
"""

from __future__ import annotations

import numpy as np

from pymc_manidp.stats.reductions import passes
from pymc_manidp.stats.reductions.checked import _points, _unwrap, is_dask
from pymc_manidp.stats.reductions.passes import _PASSES, _point_chunks, _rows_per_block, n_rows


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
        parts = passes._run_pass(data, _median_chunk, label, M, xs, 1.0 / n, raw is not None)
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
        parts = passes._run_pass(
            data, _cell_chunk, "median envelope", M, xs, 1.0 / n, delta, kappas, raw is not None
        )
        u = np.sum([p[0] for p in parts], axis=0)
        t = np.sum([p[1] for p in parts], axis=0)
    else:
        u, t = _cell_rows(M, xs, _points(data), 1.0 / n, delta, kappas)
    return M.norm(xs, u) - t, t
