r"""Neighbouring datasets for the privacy audits.

The guarantees use the replace-one relation with ``n`` public (docs/mechanisms.md):
``D`` and ``D'`` have the same size and differ in exactly one record, changed in
place. :func:`neighbour_pairs` builds candidate worst cases (data on the boundary
with one record moved to the opposite side, clusters with an outlier, random pairs);
:func:`check_neighbours` checks that a pair is one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from pymc_manidp._validation import check_positive_int, check_positive_real
from pymc_manidp.privacy.audit import _cost

__all__ = [
    "NeighbourPair",
    "as_pairs",
    "audited_epsilon",
    "boundary_pair",
    "check_neighbours",
    "neighbour_pairs",
]

# Records closer than this (geodesic distance) count as unchanged.
_SAME_TOL = 1e-9
# Boundary records sit this fraction inside the ball, so rounding keeps them in it.
_INSIDE = 1.0 - 1e-9


# --- neighbouring pairs ------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class NeighbourPair:
    """Two datasets ``data``, ``neighbour`` differing in record ``index`` only.

    Attributes
    ----------
    label : str
        How the pair was built (for reports).
    data : ndarray, shape ``(n, *point_shape)``
        The first dataset.
    neighbour : ndarray, shape ``(n, *point_shape)``
        The second dataset: ``data`` with record ``index`` replaced.
    index : int
        The record that differs.
    """

    label: str
    data: np.ndarray
    neighbour: np.ndarray
    index: int


def check_neighbours(manifold, data, neighbour) -> int:
    """Check that two datasets are neighbours; return the changed record's index.

    Neighbours have the same number of records and differ (geodesic distance above
    ``1e-9``) in exactly one position: the replace-one relation of both papers, with
    records compared in order.

    Raises
    ------
    ValueError
        Different ``n``, no record changed, or more than one record changed.

    Examples
    --------
    >>> import numpy as np
    >>> from pymc_manidp import Sphere
    >>> d = np.array([[0.0, 0, 1], [0, 1, 0]])
    >>> check_neighbours(Sphere(dim=2), d, np.array([[0.0, 0, 1], [1, 0, 0]]))
    1
    """
    a, b = manifold.validate(data), manifold.validate(neighbour)
    k = len(manifold.point_shape)
    if a.ndim != k + 1 or b.ndim != k + 1:
        raise ValueError(
            f"datasets must have shape (n, {', '.join(map(str, manifold.point_shape))}), "
            f"got {a.shape} and {b.shape}"
        )
    if len(a) != len(b):
        raise ValueError(
            f"neighbouring datasets have the same number of records (one is replaced); "
            f"got n = {len(a)} and n' = {len(b)}"
        )
    changed = np.flatnonzero(~(manifold.dist(a, b) <= _SAME_TOL))
    if len(changed) != 1:
        raise ValueError(
            "neighbouring datasets differ in exactly one record (compared in order); "
            f"these differ in {len(changed)}"
            + (f" (rows {changed[:5].tolist()}...)" if len(changed) else "")
        )
    return int(changed[0])


def pair_count(dim: int, n: int, directions: int | None = None, random_pairs: int = 8) -> int:
    """How many pairs :func:`neighbour_pairs` builds (without building them)."""
    per_direction = 6 if dim < 2 else 11 + (n >= 2)  # boundary, 5 clusters x (u, u_perp), ring
    return (dim if directions is None else directions) * per_direction + random_pairs


def pairs_bytes(manifold, n: int, count: int) -> float:
    """Estimated memory of ``count`` pairs of ``n`` records: both datasets of each
    pair, and one pair's chart coordinates and ``exp`` temporaries while it is built."""
    p, d = math.prod(manifold.point_shape), manifold.dim
    return _cost.nbytes_of(8, n, 2 * count * p + 8 * (p + d))


def check_pairs_size(manifold, n: int, count: int, max_bytes=None) -> None:
    """Refuse (``ValueError``) before building pairs that would not fit in memory."""
    limit = _cost.memory_limit(max_bytes)
    nbytes = pairs_bytes(manifold, n, count)
    if nbytes > limit:
        top = _cost.largest(lambda k: pairs_bytes(manifold, k, count) <= limit, 1, n)
        _cost.refuse(
            f"{count} neighbouring pair(s) of n = {n} records",
            nbytes,
            None,
            limit,
            _cost.time_limit(),
            f"choose n <= {top}",
        )


def _frame(domain):
    M = domain.manifold
    return M, domain.center, domain.radius


def _point(domain, coords):
    """Points ``exp_{m0}`` of chart coordinates ``(..., dim)`` at the public center."""
    M, m0, _ = _frame(domain)
    return M.validate(M.exp_coords(m0, np.asarray(coords, float)))


def boundary_pair(domain, n: int, direction=None) -> NeighbourPair:
    """All ``n`` records on the boundary at ``direction``; one moved to the opposite side.

    ``direction`` is a vector of chart coordinates at the center (default: the first
    frame vector). This is the configuration behind both papers' sensitivity bounds.

    Parameters
    ----------
    domain : DataDomain
        The public ball ``B_r(m0)``; the records sit just inside its boundary.
    n : int
        Number of records.
    direction : array_like, shape ``(dim,)``, optional
        Chart coordinates of the direction ``u`` at the center.

    Returns
    -------
    NeighbourPair
        ``data`` and ``neighbour`` of shape ``(n, *point_shape)``, differing in record 0.

    Examples
    --------
    >>> import pymc_manidp as pmd
    >>> pair = boundary_pair(pmd.DataDomain(pmd.Sphere(dim=2), [0.0, 0.0, 1.0], 0.5), 4)
    >>> pair.data.shape, pair.index
    ((4, 3), 0)
    """
    n = check_positive_int(n, "n")
    M, _, r = _frame(domain)
    check_pairs_size(M, n, 1)
    u = np.zeros(M.dim) if direction is None else np.asarray(direction, float)
    if direction is None:
        u[0] = 1.0
    if u.shape != (M.dim,) or not np.linalg.norm(u) > 0:
        raise ValueError(f"direction must be a non-zero vector of {M.dim} chart coordinates")
    u = u / np.linalg.norm(u)
    b = r * _INSIDE * u
    data = np.repeat(_point(domain, b)[None], n, axis=0)
    neighbour = data.copy()
    neighbour[0] = _point(domain, -b)
    return NeighbourPair("boundary: all at u, one moved to -u", data, neighbour, 0)


def neighbour_pairs(
    domain,
    n: int,
    *,
    directions: int | None = None,
    random_pairs: int = 8,
    random_seed=0,
    max_bytes=None,
) -> list[NeighbourPair]:
    """Candidate neighbouring pairs that try to maximize the privacy loss.

    For each of ``directions`` unit chart directions ``u`` at the center (the frame
    vectors first, then random ones; default: all ``dim`` frame vectors), with
    ``r`` the public radius:

    - all records on the boundary at ``r u``, one moved to ``-r u``;
    - ``n - 1`` records clustered (spread ``r/20``) at ``s r u`` for
      ``s in {-1, -1/2, 0, 1/2, 1}``, one outlier moved from ``r w`` to ``-r w``,
      ``w`` in ``{u, u_perp}``;
    - records on the boundary circle through ``u`` (evenly spread), one moved to the
      opposite side;

    then ``random_pairs`` pairs with records uniform in the normal-coordinate ball
    and a random record moved to a random point (half of them onto the boundary).
    Deterministic for a fixed ``random_seed``.

    Parameters
    ----------
    domain : DataDomain
        The public ball ``B_r(m0)`` holding every record.
    n : int
        Number of records per dataset.
    directions : int, optional
        Number of chart directions ``u`` (default: ``dim``, the frame vectors).
    random_pairs : int
        Number of random pairs added at the end.
    random_seed : int, Generator or None
        Source of the random directions and pairs (public: the audit is no release).
    max_bytes : float, optional
        Memory the pairs may take (default: half of this machine's memory).

    Returns
    -------
    list of NeighbourPair
        The pairs, each with datasets of shape ``(n, *point_shape)``.

    Raises
    ------
    ValueError
        A bad ``n``, ``directions`` or ``random_pairs``, or pairs that would not fit
        in ``max_bytes`` (checked before any is built).
    """
    n = check_positive_int(n, "n")
    M, _, r = _frame(domain)
    d = M.dim
    ndir = d if directions is None else check_positive_int(directions, "directions")
    random_pairs = check_positive_int(random_pairs, "random_pairs", minimum=0)
    check_pairs_size(M, n, pair_count(d, n, ndir, random_pairs), max_bytes)
    rng = np.random.default_rng(random_seed)
    dirs = [np.eye(d)[i] for i in range(min(ndir, d))]
    while len(dirs) < ndir:
        v = rng.normal(size=d)
        dirs.append(v / np.linalg.norm(v))
    rb = r * _INSIDE
    pairs: list[NeighbourPair] = []

    def add(label, coords, new_coords, index=0):
        data = _point(domain, coords)
        neighbour = data.copy()
        neighbour[index] = _point(domain, new_coords)
        pairs.append(NeighbourPair(label, data, neighbour, index))

    for j, u in enumerate(dirs):
        tag = f"u{j}"
        bp = boundary_pair(domain, n, u)
        pairs.append(replace(bp, label=f"boundary ({tag}): all at u, one moved to -u"))
        perp = _perpendicular(u, rng)
        for s in (-1.0, -0.5, 0.0, 0.5, 1.0):
            jitter = rng.normal(size=(n, d)) * (r / 20.0)
            cluster = s * rb * u + jitter
            # keep the cluster inside the ball (normal coordinates: radius = distance)
            norms = np.linalg.norm(cluster, axis=-1, keepdims=True)
            cluster = np.where(norms > rb, cluster * (rb / np.maximum(norms, 1e-300)), cluster)
            for wname, w in (("u", u), ("u_perp", perp)):
                if w is None:
                    continue
                coords = cluster.copy()
                coords[0] = rb * w
                add(
                    f"cluster at {s:+.1f} r ({tag}), outlier moved {wname} -> -{wname}",
                    coords,
                    -rb * w,
                )
        if d >= 2 and perp is not None and n >= 2:
            ang = 2.0 * np.pi * np.arange(n) / n
            ring = rb * (np.cos(ang)[:, None] * u + np.sin(ang)[:, None] * perp)
            add(f"boundary circle ({tag}), one moved across", ring, -ring[0])
    for k in range(random_pairs):
        c = rng.normal(size=(n, d))
        c *= (r * rng.uniform(size=(n, 1)) ** (1.0 / d)) / np.linalg.norm(c, axis=-1)[:, None]
        i = int(rng.integers(n))
        new = rng.normal(size=d)
        new *= (rb if k % 2 else r * rng.uniform()) / np.linalg.norm(new)
        add(f"random #{k}", c, new, index=i)
    return pairs


def _perpendicular(u, rng):
    if len(u) < 2:
        return None
    v = rng.normal(size=len(u))
    v -= (v @ u) * u
    return v / np.linalg.norm(v)


def as_pairs(manifold, pairs):
    if isinstance(pairs, NeighbourPair):
        pairs = [pairs]
    elif (
        isinstance(pairs, tuple)
        and len(pairs) == 2
        and not isinstance(pairs[0], tuple | NeighbourPair)
    ):
        pairs = [pairs]
    out = []
    for k, p in enumerate(pairs):
        if isinstance(p, NeighbourPair):
            data, neighbour, label = p.data, p.neighbour, p.label
        else:
            try:
                data, neighbour = p
            except (TypeError, ValueError):
                raise TypeError(
                    "pairs must be NeighbourPair objects or (data, neighbour) tuples"
                ) from None
            label = f"pair #{k}"
        index = check_neighbours(manifold, data, neighbour)
        out.append(NeighbourPair(label, np.asarray(data), np.asarray(neighbour), index))
    if not out:
        raise ValueError("no neighbouring pairs to audit")
    return out


def audited_epsilon(mech, epsilon):
    return check_positive_real(mech.epsilon if epsilon is None else epsilon, "epsilon")
