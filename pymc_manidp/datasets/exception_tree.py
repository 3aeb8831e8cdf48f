r"""Python's built-in exception hierarchy, embedded in the hyperbolic plane.

A small real tree for demos of :class:`~pymc_manidp.geometry.hyperbolic.Hyperbolic`:
the 67 built-in exception classes of CPython 3.12 (``BaseException`` at the root), each
a point of :math:`\mathbb H^2` placed by Sarkar's combinatorial construction with edge
length 1 (every parent–child pair exactly 1 apart, the root at the origin). Derived by
``scripts/derive_exception_tree.py``; see ``data/LICENSES.md``.
"""

from __future__ import annotations

import csv
import io
from importlib import resources
from typing import NamedTuple

import numpy as np

__all__ = ["EXCEPTION_TREE_EDGE", "ExceptionTree", "load_exception_tree"]

#: The embedding's edge length ``tau``: a node of depth ``k`` lies within ``k tau`` of the
#: origin, so the tree (depth 4) lies in the public ball of radius 4 at the origin.
EXCEPTION_TREE_EDGE = 1.0


class ExceptionTree(NamedTuple):
    """The exception tree (``n = 67`` rows, breadth first from ``BaseException``).

    Attributes
    ----------
    points : ndarray, shape ``(n, 3)``
        Hyperboloid coordinates ``(x0, x1, x2)`` of the classes in :math:`\\mathbb H^2`
        (``pymc_manidp.geometry.hyperbolic.to_poincare`` gives Poincaré-disc points).
    name : ndarray of str, shape ``(n,)``
        Class names.
    parent : ndarray of str, shape ``(n,)``
        The parent class's name (``cls.__mro__[1]``); ``""`` for the root.
    depth : ndarray of int, shape ``(n,)``
        Edges from the root.
    """

    points: np.ndarray
    name: np.ndarray
    parent: np.ndarray
    depth: np.ndarray


def load_exception_tree() -> ExceptionTree:
    """Load the embedded exception tree.

    Returns
    -------
    ExceptionTree
        Points on the hyperboloid with names, parents and depths.

    Examples
    --------
    >>> from pymc_manidp.geometry.hyperbolic import Hyperbolic
    >>> tree = load_exception_tree()
    >>> tree.points.shape, str(tree.name[0]), int(tree.depth.max())
    ((67, 3), 'BaseException', 4)
    >>> H = Hyperbolic(dim=2)
    >>> bool(H.dist(H.origin, H.validate(tree.points)).max() <= 4 * EXCEPTION_TREE_EDGE)
    True
    """
    data = resources.files("pymc_manidp.datasets").joinpath("data/exception_tree.csv")
    rows = list(csv.DictReader(io.StringIO(data.read_text("utf-8"))))
    return ExceptionTree(
        points=np.array([[float(r[k]) for k in ("x0", "x1", "x2")] for r in rows]),
        name=np.array([r["name"] for r in rows]),
        parent=np.array([r["parent"] for r in rows]),
        depth=np.array([int(r["depth"]) for r in rows]),
    )
