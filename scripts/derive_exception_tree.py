"""Derive the packaged exception-tree embedding: Python's built-in exception hierarchy in H^2.

Source: the built-in exception classes of CPython 3.12 (the ``builtins`` module of the
interpreter that runs this script; the hierarchy is the one the Python documentation
prints under "Exception hierarchy"). Python is distributed under the Python Software
Foundation License; the class names and their inheritance are facts about it, read
from the running interpreter (no download).

Usage (not run in CI; the test suite re-derives the file and compares when it runs on
the same Python minor version)::

    python scripts/derive_exception_tree.py pymc_manidp/datasets/data/exception_tree.csv

Derivation:

1. the tree: every class in ``vars(builtins)`` that subclasses ``BaseException``, once
   (``IOError`` and ``EnvironmentError`` are aliases of ``OSError``); the parent of a class
   is the next class of its method resolution order, ``cls.__mro__[1]`` (this puts
   ``ExceptionGroup``, which also derives from ``Exception``, under
   ``BaseExceptionGroup``); children in alphabetical order;
2. the embedding: Sarkar's combinatorial construction (Sarkar 2011, "Low distortion
   Delaunay embedding of trees in hyperbolic plane"), on the hyperboloid model of H^2
   with edge length ``TAU = 1``: the root ``BaseException`` at the origin, its ``m``
   children at distance ``TAU`` in the directions at angles ``2 pi k/m``; a node with
   ``m`` children and a parent sends its children at distance ``TAU`` in the directions
   at angles ``2 pi k/(m + 1)``, ``k = 1..m``, measured from the direction toward its
   parent in the frame ``(E1, E2)``: ``E1`` the unit vector toward the parent,
   ``E2 = J (x × E1)`` (``J = diag(-1, 1, 1)``, so the frame keeps its orientation along
   the tree). Every edge of the tree is then a geodesic of length ``TAU`` exactly, and a
   node of depth ``k`` lies within ``k TAU`` of the origin.

A small ``TAU`` keeps the points in a small public ball (the tree's depth, 4, times
``TAU``), which a private mean needs; a large one lowers the distortion of tree distances
(Sarkar's guarantee) at the price of a larger ball and so more noise.

Output: CSV with columns ``name, parent, depth, x0, x1, x2`` (hyperboloid coordinates,
``x0 = sqrt(1 + x1^2 + x2^2)``, 17 significant digits), rows in breadth-first order.
"""

from __future__ import annotations

import argparse
import builtins
import csv
import sys
from pathlib import Path

import numpy as np

from pymc_manidp.geometry.hyperbolic import Hyperbolic, minkowski_inner

TAU = 1.0
FIELDS = ("name", "parent", "depth", "x0", "x1", "x2")


def exception_tree() -> dict[str, str]:
    """``{class name: parent name}`` of the built-in exceptions (the root's parent ``""``)."""
    classes = {
        id(c): c
        for c in vars(builtins).values()
        if isinstance(c, type) and issubclass(c, BaseException)
    }
    return {
        c.__name__: ("" if c is BaseException else c.__mro__[1].__name__) for c in classes.values()
    }


def sarkar_embedding(parent_of: dict[str, str], tau: float = TAU):
    """Breadth-first rows ``(name, parent, depth, point)`` of Sarkar's embedding in H^2."""
    H = Hyperbolic(dim=2)
    flip = np.array([-1.0, 1.0, 1.0])
    children: dict[str, list[str]] = {}
    for name, parent in parent_of.items():
        children.setdefault(parent, []).append(name)
    (root,) = children[""]
    rows = [(root, "", 0, H.origin)]
    frame_at = {root: (np.array([0.0, 1.0, 0.0]), np.array([0.0, 0.0, 1.0]))}
    queue = [root]
    while queue:
        node = queue.pop(0)
        x = next(r[3] for r in rows if r[0] == node)
        kids = sorted(children.get(node, []))
        e1, e2 = frame_at[node]
        slots = len(kids) + (0 if node == root else 1)
        first = 0 if node == root else 1  # angle 0 points to the parent
        for k, kid in enumerate(kids, start=first):
            angle = 2.0 * np.pi * k / slots
            y = H.validate(H.exp(x, tau * (np.cos(angle) * e1 + np.sin(angle) * e2)))
            # the child's frame: E1 toward this node, E2 = J (y x E1), unit
            back = H.log(y, x)
            back = back / np.sqrt(minkowski_inner(back, back))
            side = flip * np.cross(y, back)
            frame_at[kid] = (back, side / np.sqrt(minkowski_inner(side, side)))
            rows.append((kid, node, rows[[r[0] for r in rows].index(node)][2] + 1, y))
            queue.append(kid)
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", type=Path, help="output .csv")
    args = ap.parse_args(argv)
    rows = sarkar_embedding(exception_tree())
    with args.out.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(FIELDS)
        for name, parent, depth, x in rows:
            w.writerow([name, parent, depth, *(f"{v:.17g}" for v in x)])
    version = ".".join(map(str, sys.version_info[:3]))
    print(f"wrote {args.out}: {len(rows)} classes of Python {version}")


if __name__ == "__main__":
    main()
