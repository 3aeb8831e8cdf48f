"""``pmd.datasets.embed_tree``: Sarkar's embedding of a tree in H^2 (issue 38, item 4).

Oracles, all independent of the implementation's frame transport:

- exact tree distances (breadth-first search here): every edge has length ``edge``, no
  pair is farther apart than ``edge`` times its tree distance (each edge a geodesic), a
  path is a geodesic, and every pair two edges apart through a node ``v`` is at the
  distance the hyperbolic law of cosines gives for the angle Sarkar's construction puts
  between them at ``v`` (slots ``2 pi k / (m + 1)`` from the parent);
- the same construction in 60-digit arithmetic (mpmath, the quadratic script's route
  through the log map), for the numerical error;
- the packaged exception tree (written by scripts/derive_exception_tree.py);
- Sarkar's low distortion: the smallest ratio ``rho / (edge d_T)`` grows toward 1 with
  the edge.
"""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pymc_manidp.datasets import embed_tree, load_exception_tree
from pymc_manidp.datasets.trees import MAX_TREE_RADIUS
from pymc_manidp.geometry.hyperbolic import Hyperbolic

H2 = Hyperbolic(dim=2)


def _full(fans):
    parents, level = [-1], [0]
    for fan in fans:
        nxt = []
        for p in level:
            for _ in range(fan):
                parents.append(p)
                nxt.append(len(parents) - 1)
        level = nxt
    return parents


def _tree_distances(parents):
    n = len(parents)
    adj = [[] for _ in range(n)]
    for i, p in enumerate(parents):
        if p >= 0:
            adj[i].append(p)
            adj[p].append(i)
    d = np.zeros((n, n))
    for s in range(n):
        seen, queue = {s: 0}, [s]
        for v in queue:
            for w in adj[v]:
                if w not in seen:
                    seen[w] = seen[v] + 1
                    queue.append(w)
        for k, v in seen.items():
            d[s, k] = v
    return d


def _depth(parents):
    def depth(i):
        k = 0
        while parents[i] >= 0:
            i, k = parents[i], k + 1
        return k

    return max(depth(i) for i in range(len(parents)))


@st.composite
def trees(draw, max_n=25):
    """Random trees: node i's parent is an earlier node (a random recursive tree, shuffled
    labels so that the root is not always node 0)."""
    n = draw(st.integers(1, max_n))
    parents = [-1] + [draw(st.integers(0, i - 1)) for i in range(1, n)]
    perm = draw(st.permutations(range(n)))
    out = [0] * n
    for i, p in enumerate(parents):
        out[perm[i]] = -1 if p < 0 else perm[p]
    return out


def _slot_angles(parents):
    """``{(v, neighbour): angle at v}`` of Sarkar's construction, written from its spec."""
    n = len(parents)
    kids = {v: [i for i in range(n) if parents[i] == v] for v in range(n)}
    angle = {}
    for v in range(n):
        first = 0 if parents[v] < 0 else 1
        slots = len(kids[v]) + first
        if first:
            angle[v, parents[v]] = 0.0
        for k, c in enumerate(sorted(kids[v]), start=first):
            angle[v, c] = 2 * math.pi * k / slots
    return angle


@given(parents=trees(), edge=st.sampled_from([0.1, 1 / 3, 0.5, 1.0, 1.5]))
def test_edges_bounds_and_the_law_of_cosines_on_random_trees(parents, edge):
    x = embed_tree(parents, edge=edge)
    n = len(parents)
    assert x.shape == (n, 3)
    H2.validate(x, tol=1e-12)  # on the hyperboloid
    d = _tree_distances(parents)
    rho = H2.dist(x[:, None], x[None])
    tol = 1e-12 * math.exp(2 * _depth(parents) * edge)  # float64 on the hyperboloid
    for i, p in enumerate(parents):
        if p >= 0:
            assert rho[i, p] == pytest.approx(edge, abs=tol)
    assert np.all(rho <= edge * d + tol)
    # pairs two edges apart through v: cosh rho = cosh^2 t - sinh^2 t cos(angle at v)
    angle = _slot_angles(parents)
    for v in range(n):
        nbrs = [u for (w, u) in angle if w == v]
        for a in nbrs:
            for b in nbrs:
                if a < b:
                    theta = angle[v, a] - angle[v, b]
                    want = math.acosh(math.cosh(edge) ** 2 - math.sinh(edge) ** 2 * math.cos(theta))
                    assert rho[a, b] == pytest.approx(want, rel=1e-9, abs=tol)


def test_a_path_is_a_geodesic_and_a_star_spreads_evenly():
    x = embed_tree(list(range(-1, 9)), edge=1.2)  # 0 <- 1 <- ... <- 9
    rho = H2.dist(x[:, None], x[None])
    i = np.arange(10)
    np.testing.assert_allclose(rho, 1.2 * np.abs(i[:, None] - i[None]), atol=1e-9)
    x = embed_tree([-1] + [0] * 6, edge=2.0)
    for k in range(1, 6):
        want = math.acosh(math.cosh(2) ** 2 - math.sinh(2) ** 2 * math.cos(2 * math.pi * k / 6))
        assert float(H2.dist(x[1], x[1 + k])) == pytest.approx(want, rel=1e-12)


def test_sarkar_low_distortion_grows_with_the_edge():
    parents = _full((2, 2, 2))
    d = _tree_distances(parents)
    off = d > 0
    ratios = []
    for edge in (1.0, 2.0, 3.0, 4.0):
        rho = H2.dist(*(lambda x: (x[:, None], x[None]))(embed_tree(parents, edge=edge)))
        ratios.append(float(np.min(rho[off] / (edge * d[off]))))
    assert np.all(np.diff(ratios) > 0) and ratios[-1] > 0.94, ratios
    assert ratios[0] > 0.6  # measured 0.6865: children of a node 120 degrees apart


def _reference(parents, tau):
    """Sarkar's construction in 60-digit arithmetic, through the log map (the script's)."""
    with mp.workdps(60):
        tau = mp.mpf(tau)
        n = len(parents)
        kids = {i: sorted(j for j in range(n) if parents[j] == i) for i in range(n)}
        root = parents.index(-1)
        sig = [mp.mpf(-1), mp.mpf(1), mp.mpf(1)]

        def mink(a, b):
            return sum(sig[k] * a[k] * b[k] for k in range(3))

        def cross(a, b):
            return [a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]]

        pts = {root: [mp.mpf(1), mp.mpf(0), mp.mpf(0)]}
        frame = {root: ([mp.mpf(0), mp.mpf(1), mp.mpf(0)], [mp.mpf(0), mp.mpf(0), mp.mpf(1)])}
        queue = [root]
        for v in queue:
            x, (e1, e2) = pts[v], frame[v]
            first = 0 if v == root else 1
            for k, c in enumerate(kids[v], start=first):
                a = 2 * mp.pi * k / (len(kids[v]) + first)
                u = [mp.cos(a) * e1[j] + mp.sin(a) * e2[j] for j in range(3)]
                y = [mp.cosh(tau) * x[j] + mp.sinh(tau) * u[j] for j in range(3)]
                b = [x[j] + mink(x, y) * y[j] for j in range(3)]
                b = [t / mp.sqrt(mink(b, b)) for t in b]
                s = [sig[j] * cross(y, b)[j] for j in range(3)]
                s = [t / mp.sqrt(mink(s, s)) for t in s]
                pts[c], frame[c] = y, (b, s)
                queue.append(c)
        return np.array([[float(t) for t in pts[i]] for i in range(n)])


@pytest.mark.parametrize("edge", [0.5, 1.5, 3.0])
def test_matches_sixty_digit_arithmetic_to_the_float64_limit(edge):
    parents = _full((3, 2, 2, 2))  # depth 4: radius up to 12
    x, ref = embed_tree(parents, edge=edge), _reference(parents, edge)
    scale = math.exp(4 * edge)
    assert np.max(np.abs(x - ref)) <= 1e-14 * scale**2, np.max(np.abs(x - ref))


def test_reproduces_the_packaged_exception_tree():
    tree = load_exception_tree()
    index = {name: i for i, name in enumerate(tree.name)}
    parents = [index[p] if p else -1 for p in tree.parent]
    np.testing.assert_allclose(embed_tree(parents), tree.points, rtol=0, atol=1e-12)


def test_children_in_index_order_and_any_root_label():
    a = embed_tree([1, -1, 1, 0])  # root is node 1
    assert np.allclose(a[1], H2.origin)
    b = embed_tree(np.array([1, -1, 1, 0], dtype=np.int32))
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize(
    ("parents", "err", "match"),
    [
        (None, TypeError, "sequence of integers"),
        ("0,1", TypeError, "sequence of integers"),
        ({0: -1}, TypeError, "sequence of integers"),
        (3, TypeError, "sequence of integers"),
        ([-1, 0.0], TypeError, "integers.*float"),
        ([-1, True], TypeError, "integers.*bool"),
        ([-1, "0"], TypeError, "integers.*str"),
        ([-1, None], TypeError, "integers.*NoneType"),
        ([[-1], [0]], TypeError, "integers.*list"),
        (np.array([-1.0, 0.0]), TypeError, "dtype float64"),
        (np.array([True, False]), TypeError, "dtype bool"),
        (np.array([[-1, 0]]), ValueError, "one-dimensional"),
        ([], ValueError, "empty"),
        ([-1, 10**400], ValueError, "node indices"),
        ([-1, 2], ValueError, "node indices in 0..1.*node 1 has parent 2"),
        ([-1, -2], ValueError, "node indices"),
        ([-1, 0, -1], ValueError, "2 roots"),
        ([1, 0], ValueError, "no root"),
        ([-1, 1], ValueError, "cycle.*node 1"),
        ([-1, 2, 3, 1], ValueError, "cycle: 3 node"),
        (np.array([1, 0], dtype=np.uint64), ValueError, "no root"),
        (np.array([2**64 - 1, 0], dtype=np.uint64), ValueError, "node indices"),
    ],
)
def test_parents_are_validated_with_clear_errors(parents, err, match):
    with pytest.raises(err, match=match):
        embed_tree(parents)


@given(
    edge=st.one_of(
        st.sampled_from([0.0, -1.0, 5e-324 * 0, float("nan"), float("inf"), 1e308, 10**400]),
        st.sampled_from([None, "1", True, [1.0]]),
    )
)
def test_edge_is_checked(edge):
    with pytest.raises((TypeError, ValueError)) as info:
        embed_tree([-1, 0, 1], edge=edge)
    assert any(w in str(info.value) for w in ("edge", "too large")), info.value


def test_depth_times_edge_is_capped_where_float64_stops_resolving_distances():
    embed_tree(list(range(-1, 12)), edge=1.0)  # depth 12: at the cap
    with pytest.raises(ValueError, match=r"above 12.*edge of at most 0\.923077"):
        embed_tree(list(range(-1, 13)), edge=1.0)  # depth 13
    assert MAX_TREE_RADIUS == 12.0
    x = embed_tree([-1, 0], edge=5e-324)  # subnormal edge: the child sits on the root
    assert np.all(np.isfinite(x))


@given(
    bad=st.sampled_from(
        [None, True, 1.0, 1 / 3, 5e-324, float("nan"), float("inf"), 10**400, "1", b"1", [0]]
    ),
    n=st.integers(1, 6),
    at=st.integers(0, 6),
)
def test_one_bad_entry_anywhere_is_refused(bad, n, at):
    parents = [-1, *range(n - 1)]
    parents[min(at, n - 1)] = bad
    with pytest.raises((TypeError, ValueError)) as info:
        embed_tree(parents)
    assert "parents" in str(info.value)
