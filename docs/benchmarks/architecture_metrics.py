"""Architecture metrics of a checkout: cross-folder call hops of one exact and one NUTS
release, the longest functions, and the import picture between folders.

Run from the root of a checkout (the package imported is the one in the current folder):

    PYTHONPATH=$PWD python docs/benchmarks/architecture_metrics.py

A *hop* is a call whose caller and callee are functions of the package in different
folders (``geometry``, ``stats``, ``laws``, ...; a top-level module is its own folder);
the hop count is the number of distinct (caller, callee) pairs of that kind in one
release, so loops do not inflate it. An *upward* hop is one whose callee sits in a
higher layer than its caller (a callback: ``layer_of`` of the checkout's own
``tests/test_layers.py``). The traced release is a mechanism's second one, so that
imports and compilation (the same in every layout) do not count.
"""

from __future__ import annotations

import ast
import collections
import sys
import warnings
from pathlib import Path

import numpy as np

import pymc_manidp as pmd

PKG = Path(pmd.__file__).parent


def folder_of(filename: str) -> str | None:
    p = Path(filename)
    try:
        rel = p.resolve().relative_to(PKG.resolve())
    except ValueError:
        return None
    return rel.parts[0].removesuffix(".py") if len(rel.parts) > 1 else rel.stem


def module_of(frame) -> str:
    return frame.f_globals.get("__name__", "")


def layer_function():
    """``layer_of(module)`` of this checkout's own tests/test_layers.py."""
    sys.path.insert(0, str(PKG.parent))
    from tests.test_layers import layer_of

    return layer_of


def trace(fn):
    edges = set()
    entries = collections.Counter()

    def prof(frame, event, arg):
        if event == "call":
            callee = folder_of(frame.f_code.co_filename)
            caller_frame = frame.f_back
            while caller_frame is not None and folder_of(caller_frame.f_code.co_filename) is None:
                caller_frame = caller_frame.f_back
            if callee is not None and caller_frame is not None:
                caller = folder_of(caller_frame.f_code.co_filename)
                if caller != callee:
                    edges.add(
                        (
                            module_of(caller_frame),
                            caller_frame.f_code.co_qualname,
                            module_of(frame),
                            frame.f_code.co_qualname,
                        )
                    )
                    entries[callee] += 1

    sys.setprofile(prof)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return edges, entries


def longest_functions(n=10):
    rows = []
    for path in sorted(PKG.rglob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                rows.append(
                    (
                        node.end_lineno - node.lineno + 1,
                        f"{path.relative_to(PKG.parent)}:{node.name}",
                    )
                )
    return sorted(rows, reverse=True)[:n]


def import_picture():
    pairs = collections.Counter()
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(PKG)
        mine = rel.parts[0].removesuffix(".py") if len(rel.parts) > 1 else rel.stem
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.ImportFrom)
                and node.module
                and node.module.startswith("pymc_manidp")
            ):
                parts = node.module.split(".")
                theirs = parts[1] if len(parts) > 1 else (node.names[0].name if node.names else "")
                if theirs != mine:
                    pairs[(mine, theirs)] += 1
    return pairs


def main():
    warnings.simplefilter("ignore")
    layer_of = layer_function()
    S = pmd.Sphere(dim=2)
    rng = np.random.default_rng(0)
    data = S.exp(np.array([0, 0, 1.0]), np.c_[0.1 * rng.standard_normal((200, 2)), np.zeros(200)])
    mech = pmd.KNGMechanism(S, epsilon=1.0, center=[0, 0, 1.0], radius=0.7)
    for sampler in ("exact", "nuts"):
        # a first release compiles (NUTS) and imports: trace a second one, as a user's
        mech.release(data, sampler=sampler, random_seed=2)
        edges, entries = trace(lambda s=sampler: mech.release(data, sampler=s, random_seed=1))
        up = sorted(f"{a}.{fa} -> {b}.{fb}" for a, fa, b, fb in edges if layer_of(b) > layer_of(a))
        print(
            f"KNG release, sampler={sampler}: {len(edges)} cross-folder call pairs, "
            f"{len(up)} of them upward (a lower layer calling a higher one); "
            f"cross-folder calls into each folder: {dict(sorted(entries.items()))}"
        )
        for u in up:
            print("    upward:", u)
    print("\nlongest functions (lines):")
    for length, name in longest_functions():
        print(f"  {length:4d}  {name}")
    print("\nimports between folders (importer -> imported: count):")
    for (a, b), c in sorted(import_picture().items()):
        print(f"  {a} -> {b}: {c}")


if __name__ == "__main__":
    main()
