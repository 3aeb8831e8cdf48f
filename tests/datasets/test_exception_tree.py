"""The packaged exception tree: Python's hierarchy, embedded by Sarkar's construction.

Oracles written here: the interpreter's own class hierarchy; the hyperboloid's
``arccosh(-<x, y>_L)`` distance and Minkowski angles (Sarkar's construction puts every
edge at length 1 and spreads a node's edges at equal angles); re-running the derivation
script reproduces the file byte for byte on the same Python minor version.
"""

from __future__ import annotations

import builtins
import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

from pymc_manidp.datasets import EXCEPTION_TREE_EDGE, load_exception_tree
from pymc_manidp.geometry.hyperbolic import Hyperbolic, to_poincare

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "pymc_manidp" / "datasets" / "data" / "exception_tree.csv"


def _mink(u, v):
    return -u[..., 0] * v[..., 0] + np.sum(u[..., 1:] * v[..., 1:], axis=-1)


def _dist(x, y):
    return np.arccosh(np.maximum(-_mink(x, y), 1.0))


def _log(y, x):
    c = -_mink(y, x)[..., None]
    return np.arccosh(c) / np.sqrt(c * c - 1.0) * (x - c * y)


@pytest.fixture(scope="module")
def tree():
    return load_exception_tree()


def test_it_is_the_builtin_hierarchy(tree):
    n = len(tree.name)
    assert n == 67 and tree.points.shape == (n, 3) and len(set(tree.name)) == n
    assert tree.name[0] == "BaseException" and tree.parent[0] == "" and tree.depth[0] == 0
    np.testing.assert_allclose(Hyperbolic(dim=2).validate(tree.points), tree.points, rtol=1e-15)
    np.testing.assert_array_equal(tree.points[0], [1.0, 0.0, 0.0])
    index = {name: i for i, name in enumerate(tree.name)}
    for i in range(1, n):  # breadth first: parents come first, one level up
        j = index[tree.parent[i]]
        assert j < i and tree.depth[i] == tree.depth[j] + 1
    for name in ("OSError", "KeyError", "DeprecationWarning", "BrokenPipeError"):
        cls = getattr(builtins, name)
        assert tree.parent[index[name]] == cls.__mro__[1].__name__
    assert tree.parent[index["ConnectionResetError"]] == "ConnectionError"
    assert "IOError" not in index  # an alias of OSError


def test_edges_have_length_one_and_equal_angles(tree):
    index = {name: i for i, name in enumerate(tree.name)}
    x = tree.points
    parents = np.array([index[p] for p in tree.parent[1:]])
    np.testing.assert_allclose(_dist(x[1:], x[parents]), EXCEPTION_TREE_EDGE, rtol=1e-12)
    # a node of depth k lies within k edges of the root (triangle inequality)
    assert np.all(_dist(x[0], x) <= tree.depth * EXCEPTION_TREE_EDGE + 1e-12)
    # at every inner node, the m children and the parent are spread at angles 2 pi/(m+1)
    for i, name in enumerate(tree.name):
        kids = np.flatnonzero(tree.parent == name)
        if i == 0 or len(kids) == 0:
            continue
        m = len(kids)
        to_parent = _log(x[i], x[index[tree.parent[i]]])
        to_kids = _log(x[i][None], x[kids])
        cos = _mink(to_kids, to_parent) / np.sqrt(
            _mink(to_kids, to_kids) * _mink(to_parent, to_parent)
        )
        got = np.sort(np.arccos(np.clip(cos, -1, 1)))
        k = np.arange(1, m + 1)
        want = np.sort(np.minimum(2 * np.pi * k / (m + 1), 2 * np.pi - 2 * np.pi * k / (m + 1)))
        np.testing.assert_allclose(got, want, atol=1e-9)


def test_poincare_view_is_inside_the_disc(tree):
    p = to_poincare(tree.points)
    assert p.shape == (67, 2) and np.all(np.linalg.norm(p, axis=1) < np.tanh(4 / 2))


@pytest.mark.skipif(sys.version_info[:2] != (3, 12), reason="the file is Python 3.12's tree")
def test_the_script_reproduces_the_file(tmp_path):
    spec = importlib.util.spec_from_file_location(
        "derive_exception_tree", ROOT / "scripts" / "derive_exception_tree.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    out = tmp_path / "tree.csv"
    module.main([str(out)])
    assert out.read_bytes() == DATA.read_bytes()


def test_the_file_is_small_and_licensed():
    assert DATA.stat().st_size < 200_000
    lic = (DATA.parent / "LICENSES.md").read_text("utf-8")
    assert "## exception_tree.csv" in lic and "Python Software Foundation" in lic
