r"""Trees in the hyperbolic plane: Sarkar's combinatorial embedding, in linear time.

A hierarchy (a taxonomy, a classification such as ICD-10, a class hierarchy) becomes
data on :class:`~pymc_manidp.geometry.hyperbolic.Hyperbolic` ``(dim=2)`` with
:func:`~pymc_manidp.datasets.embed_tree`; a private mean or median of its nodes is
then a release like any other.
"""

from __future__ import annotations

import numbers
import operator

import numpy as np

from pymc_manidp._validation import check_positive_real
from pymc_manidp.geometry.hyperbolic import Hyperbolic

__all__ = ["MAX_TREE_RADIUS", "embed_tree"]

#: The largest ``depth * edge`` :func:`~pymc_manidp.datasets.embed_tree` accepts. A
#: point at distance ``R`` from the origin has hyperboloid coordinates near ``e^R / 2``,
#: so float64 rounding
#: moves it by about ``1e-16 e^R`` and the distances between nearby nodes out there by
#: about ``1e-16 e^{2R}`` (a limit of the representation, not of the construction;
#: checked against 60-digit arithmetic in tests/datasets/test_embed_tree.py): ``3e-6``
#: at ``R = 12``, ``0.02`` at ``R = 20``.
MAX_TREE_RADIUS = 12.0


def _check_parents(parents) -> np.ndarray:
    """``parents`` as an int64 array ``(n,)`` with one root ``-1``, every other entry a
    node ``0..n-1``; ``TypeError`` / ``ValueError`` naming what is wrong otherwise."""
    if parents is None or isinstance(parents, (str, bytes, dict, set, frozenset)):
        raise TypeError(
            "parents must be a sequence of integers (parents[i] the index of node i's "
            f"parent, -1 for the root), got {type(parents).__name__}"
        )
    if not isinstance(parents, np.ndarray):
        # NumPy would turn True into 1 and a list of ints and floats into floats: the
        # elements are judged one by one (O(n)) before any conversion
        try:
            items = list(parents)
        except TypeError:
            raise TypeError(
                f"parents must be a sequence of integers, got {type(parents).__name__}"
            ) from None
        bad = [
            p
            for p in items
            if isinstance(p, (bool, np.bool_)) or not isinstance(p, numbers.Integral)
        ]
        if bad:
            raise TypeError(
                "parents must hold integers (node indices, -1 for the root), got "
                f"{type(bad[0]).__name__} {bad[0]!r:.40}"
            )
        big = [p for p in items if not -(2**62) < operator.index(p) < 2**62]
        if big:
            raise ValueError(
                f"parents must be node indices in 0..{len(items) - 1} or -1 for the root, "
                f"got {big[0]!r:.40}"
            )
        parents = np.array([operator.index(p) for p in items], dtype=np.int64)
    arr = parents
    if arr.dtype.kind not in "iu":
        raise TypeError(
            "parents must hold integers (node indices, -1 for the root), got dtype "
            f"{arr.dtype} (bools, floats and strings are not node indices)"
        )
    if arr.ndim != 1:
        raise ValueError(
            f"parents must be one-dimensional (one entry per node), got shape {arr.shape}"
        )
    n = arr.size
    if n == 0:
        raise ValueError("parents is empty: a tree has at least one node (the root, -1)")
    # compared before any cast: a uint64 past int64 must not wrap around to -1
    out = (arr >= n) if arr.dtype.kind == "u" else (arr < -1) | (arr >= n)
    if np.any(out):
        i = int(np.argmax(out))
        raise ValueError(
            f"parents must be node indices in 0..{n - 1} or -1 for the root: node {i} has "
            f"parent {int(arr[i])} ({int(np.count_nonzero(out))} such nodes)"
        )
    arr = arr.astype(np.int64)
    roots = np.flatnonzero(arr == -1)
    if len(roots) != 1:
        if len(roots) == 0:
            raise ValueError(
                "parents has no root (no entry -1): every node has a parent, so they form a "
                "cycle; mark the root's parent -1"
            )
        raise ValueError(
            f"parents has {len(roots)} roots (entries -1, at nodes {roots[:5].tolist()}"
            f"{', ...' if len(roots) > 5 else ''}): a tree has one. Join them under a new "
            "root (append -1 and point the old roots to it) or embed each tree on its own"
        )
    return arr


def _levels(parents: np.ndarray):
    """Breadth-first order, depths, sibling rank and child count per node, in O(n).

    Children are taken in increasing index order. Nodes the breadth-first walk from the
    root never reaches lie on a cycle (every node has one parent), which is refused.
    """
    n = len(parents)
    counts = np.bincount(parents[parents >= 0], minlength=n)
    # children of each node, in index order: a counting sort (linear), as CSR arrays
    start = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(counts, out=start[1:])
    first_child = start.tolist()
    fill = first_child[:-1]
    children = [0] * max(n - 1, 0)
    rank = [0] * n  # rank of each child among its siblings
    for i, p in enumerate(parents.tolist()):  # one pass over Python ints, O(n)
        if p >= 0:
            j = fill[p]
            rank[i] = j - first_child[p]
            children[j] = i
            fill[p] = j + 1
    children = np.array(children, dtype=np.int64)
    rank = np.array(rank, dtype=np.int64)
    root = int(np.flatnonzero(parents == -1)[0])
    order = [np.array([root])]
    depth = np.zeros(n, dtype=np.int64)
    seen = 1
    while True:
        level = order[-1]
        # the children of a whole level at once: its nodes' CSR slices, end to end
        m = counts[level]
        total = int(m.sum())
        if total == 0:
            break
        offsets = np.arange(total) - np.repeat(np.cumsum(m) - m, m)
        nxt = children[np.repeat(start[level], m) + offsets]
        depth[nxt] = len(order)
        seen += total
        order.append(nxt)
    if seen != n:
        reached = np.zeros(n, dtype=bool)
        reached[np.concatenate(order)] = True
        lost = np.flatnonzero(~reached)
        raise ValueError(
            f"parents has a cycle: {len(lost)} node(s), first {int(lost[0])}, cannot be "
            f"reached from the root {root} (following their parents goes round in a loop, "
            f"e.g. node {int(lost[0])} -> {int(parents[lost[0]])})"
        )
    return order, depth, rank, counts, root


def embed_tree(parents, *, edge: float = 1.0) -> np.ndarray:
    r"""Embed a tree in the hyperbolic plane :math:`\mathbb H^2` by Sarkar's construction.

    Sarkar's combinatorial construction (Sarkar 2011, "Low distortion Delaunay
    embedding of trees in hyperbolic plane"), on the hyperboloid: the root at the
    origin, its :math:`m` children at distance :math:`\tau` (``edge``) in the
    directions at angles :math:`2\pi k/m`; a node with :math:`m` children and a
    parent sends its children at distance :math:`\tau` in the directions at angles
    :math:`2\pi k/(m + 1)`, :math:`k = 1, \dots, m`, measured from the direction
    toward its parent (so the angles at every node are spread evenly, the parent's
    included). Every edge is a geodesic of length :math:`\tau` exactly, and so the
    embedding never stretches a tree distance :math:`d_T` (in edges):

    .. math:: \rho(x_i, x_j) \le \tau\, d_T(i, j),

    with equality along paths that do not branch; the larger :math:`\tau`, the closer
    :math:`\rho/(\tau d_T)` is to 1 for every pair (Sarkar's low distortion), but a node
    of depth :math:`k` lies at distance up to :math:`k\tau` from the origin, so a
    public ball that holds the tree needs radius ``depth * edge`` and a release more
    noise; and float64 limits ``depth * edge`` to ``MAX_TREE_RADIUS``.

    Linear time: one counting sort of the nodes by parent, then the children of a
    whole level are placed at once. A node's frame (the unit tangent toward its parent
    and the one orthogonal to it) is carried along each edge in closed form, by the
    geodesic's velocity, with no logarithm of nearby points: an ICD-10-sized tree of
    12,542 nodes takes 3–12 ms on two shared cores, against 11 s for the quadratic loop
    it replaces (docs/benchmarks.md).

    Parameters
    ----------
    parents : sequence of int, shape ``(n,)``
        ``parents[i]`` is the index of node ``i``'s parent, ``-1`` for the one root.
        Children are placed in increasing index order.
    edge : float
        The length :math:`\tau > 0` of every edge; ``depth * edge`` must be at most
        ``MAX_TREE_RADIUS`` (12), beyond which float64 hyperboloid coordinates
        cannot resolve the distances between nearby nodes to ``3e-6``.

    Returns
    -------
    ndarray, shape ``(n, 3)``
        Points of ``Hyperbolic(dim=2)`` (hyperboloid coordinates), row ``i`` node ``i``.

    Raises
    ------
    TypeError
        ``parents`` not a sequence of integers (floats, bools, strings, ``None``), or
        ``edge`` not a real number.
    ValueError
        Not one root, an index out of range, a cycle (naming a node on it), or
        ``edge`` not positive and finite, or ``depth * edge`` above 12.

    See Also
    --------
    pymc_manidp.geometry.hyperbolic.Hyperbolic.to_poincare : The points in the disc.

    Examples
    --------
    A root with two children, one of which has a child: every edge has length 1 and the
    two leaves are 1 + 1 + 1 = 3 edges apart, less than 3 apart in the plane:

    >>> import numpy as np
    >>> from pymc_manidp.geometry.hyperbolic import Hyperbolic
    >>> H = Hyperbolic(dim=2)
    >>> x = embed_tree([-1, 0, 0, 1])
    >>> H.dist(x[[1, 2, 3]], x[[0, 0, 1]]).round(12).tolist()
    [1.0, 1.0, 1.0]
    >>> bool(H.dist(x[3], x[2]) <= 3.0)
    True

    A path (no branching) is embedded as a geodesic: distances are exactly ``edge``
    times the number of edges.

    >>> x = embed_tree([-1, 0, 1, 2], edge=0.5)
    >>> round(float(H.dist(x[0], x[3])), 12)
    1.5
    """
    parents = _check_parents(parents)
    tau = check_positive_real(edge, "edge")
    order, _, rank, counts, root = _levels(parents)
    height = len(order) - 1
    if height * tau > MAX_TREE_RADIUS:
        raise ValueError(
            f"the tree's depth {height} times edge {tau!r} is {height * tau:.6g}, above "
            f"{MAX_TREE_RADIUS:g}: out there float64 coordinates on the hyperboloid (about "
            "e^R / 2) cannot resolve the distances between nearby nodes (rounding of about "
            "1e-16 e^(2R)). Use an edge of at most "
            f"{MAX_TREE_RADIUS / max(height, 1):.6g}"
        )
    n = len(parents)
    H = Hyperbolic(dim=2)
    x = np.zeros((n, 3))
    e1 = np.zeros((n, 3))  # unit tangent toward the parent (the root: any direction)
    e2 = np.zeros((n, 3))  # the unit tangent orthogonal to it, orientation kept
    x[root] = H.origin
    e1[root] = (0.0, 1.0, 0.0)
    e2[root] = (0.0, 0.0, 1.0)
    ch, sh = np.cosh(tau), np.sinh(tau)
    for level in order[1:]:
        p = parents[level]
        first = (p != root).astype(float)  # angle 0 points to the parent (not at the root)
        angle = 2.0 * np.pi * (rank[level] + first) / (counts[p] + first)
        c, s = np.cos(angle)[:, None], np.sin(angle)[:, None]
        u = c * e1[p] + s * e2[p]  # unit tangent at the parent, toward the child
        w = -s * e1[p] + c * e2[p]  # u turned by +90 degrees
        x[level] = ch * x[p] + sh * u  # exp_p(tau u)
        # the geodesic's velocity at the child is sh x_p + ch u: its reverse points back
        # to the parent; w is parallel along the geodesic, and -w keeps e2 = J(x x e1)
        e1[level] = -(sh * x[p] + ch * u)
        e2[level] = -w
    return H.validate(x)
