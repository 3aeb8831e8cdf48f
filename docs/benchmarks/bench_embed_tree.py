"""embed_tree on an ICD-10-sized tree, against the quadratic loop of
scripts/derive_exception_tree.py it replaces (issue 38, item 4).

The tree: 12,542 nodes like the ICD-10 classification's (1 root, 22 chapters, 12 blocks
each, 8 three-character categories per block, then 5 subcategories under 1,695
categories and 4 under the other 417), depth 4, edge 1.5. Prints the best and median
of 7 calls of ``pmd.datasets.embed_tree``, then one call of the script's
``sarkar_embedding`` and the largest difference between the two embeddings.

    PYTHONPATH=. .venv/bin/python docs/benchmarks/bench_embed_tree.py
"""

import importlib.util
import time
from pathlib import Path

import numpy as np

from pymc_manidp.datasets import embed_tree

ROOT = Path(__file__).resolve().parents[2]


def icd10_sized():
    parents, level = [-1], [0]
    for fan in (22, 12, 8):
        nxt = []
        for p in level:
            for _ in range(fan):
                parents.append(p)
                nxt.append(len(parents) - 1)
        level = nxt
    for j, p in enumerate(level):
        parents += [p] * (5 if j < 1695 else 4)
    assert len(parents) == 12_542
    return np.array(parents)


def main():
    parents = icd10_sized()
    times = []
    for _ in range(7):
        t0 = time.perf_counter()
        x = embed_tree(parents, edge=1.5)
        times.append(time.perf_counter() - t0)
    print(
        f"embed_tree: n = {len(parents)}, best {min(times) * 1e3:.1f} ms, "
        f"median {np.median(times) * 1e3:.1f} ms"
    )
    spec = importlib.util.spec_from_file_location(
        "derive_exception_tree", ROOT / "scripts" / "derive_exception_tree.py"
    )
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    name = [f"n{i:05d}" for i in range(len(parents))]
    parent_of = {name[i]: ("" if p < 0 else name[p]) for i, p in enumerate(parents)}
    t0 = time.perf_counter()
    rows = script.sarkar_embedding(parent_of, tau=1.5)
    print(f"scripts/ sarkar_embedding: {time.perf_counter() - t0:.1f} s")
    old = dict((r[0], r[3]) for r in rows)
    old = np.array([old[k] for k in name])
    print(f"largest |difference| / largest coordinate: {np.max(np.abs(old - x)) / np.max(x):.2g}")


if __name__ == "__main__":
    main()
