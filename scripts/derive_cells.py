"""Derive the packaged cell-contour landmarks from geomstats' cells.txt.

Source: ``geomstats/datasets/data/cells/{cells,cell_lines,treatments}.txt`` in the
geomstats 2.8.0 wheel (MIT licence, Copyright (c) 2018 Nina Miolane): 650 boundaries of
mouse osteosarcoma cells (lines dlm8 and dunn; treatments control, cytd, jasp), each a
closed pixel contour in counter-clockwise order. geomstats is not imported (it fails to
import with NumPy >= 2.4): only its data files are read.

Usage (not run in CI)::

    pip download geomstats==2.8.0 --no-deps -d /tmp/gs
    unzip -o /tmp/gs/geomstats-2.8.0-py3-none-any.whl 'geomstats/datasets/data/cells/*' -d /tmp/gs
    python scripts/derive_cells.py /tmp/gs/geomstats/datasets/data/cells \
        pymc_manidp/datasets/data/cells.npz --k 64

Derivation, per contour:

1. orient counter-clockwise (positive signed area; all 650 already are);
2. starting point: the contour point farthest from the centroid along the contour's
   major principal axis (the "tip" of the cell). It moves with the cell under rotation
   and translation, so labels correspond across cells up to the near-symmetric cases
   where both tips are about equally far;
3. resample ``k`` landmarks equally spaced in arc length along the closed polygon,
   starting at that point (linear interpolation);
4. translate so the landmarks' mean is 0 and store in units of 1/QUANT pixels as int16
   (the source is integer pixels, so this rounding is far below its resolution).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

QUANT = 32  # stored unit: 1/32 pixel


def read_contours(path: Path) -> list[np.ndarray]:
    blocks = path.read_text().split("\n\n")
    return [
        np.array([[float(c) for c in line.split()] for line in b.strip().split("\n")])
        for b in blocks
        if b.strip()
    ]


def read_labels(path: Path) -> np.ndarray:
    return np.array(path.read_text().strip("\n").split("\n"))


def signed_area(c: np.ndarray) -> float:
    x, y = c[:, 0], c[:, 1]
    return 0.5 * float(np.sum(x * np.roll(y, -1) - np.roll(x, -1) * y))


def drop_repeats(c: np.ndarray) -> np.ndarray:
    keep = np.any(c != np.roll(c, 1, axis=0), axis=1)
    return c[keep]


def resample(c: np.ndarray, k: int) -> np.ndarray:
    """``k`` landmarks equally spaced in arc length along the closed polygon ``c``."""
    c = drop_repeats(c)
    if signed_area(c) < 0:
        c = c[::-1]
    closed = np.vstack([c, c[:1]])
    seg = np.sqrt(np.sum(np.diff(closed, axis=0) ** 2, axis=1))
    s = np.concatenate([[0.0], np.cumsum(seg)])
    total = s[-1]
    # arc-length-weighted centroid and principal axis of the polygon's edges
    mid = 0.5 * (closed[1:] + closed[:-1])
    w = seg / total
    centroid = w @ mid
    cov = (w[:, None] * (mid - centroid)).T @ (mid - centroid)
    axis = np.linalg.eigh(cov)[1][:, -1]
    start = int(np.argmax(np.abs((c - centroid) @ axis)))
    t = (s[start] + total * np.arange(k) / k) % total
    out = np.stack([np.interp(t, s, closed[:, j]) for j in range(2)], axis=1)
    return out - out.mean(axis=0)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("source", type=Path, help="directory holding cells.txt etc.")
    ap.add_argument("out", type=Path, help="output .npz")
    ap.add_argument("--k", type=int, default=64, help="landmarks per contour")
    args = ap.parse_args(argv)
    contours = read_contours(args.source / "cells.txt")
    lines = read_labels(args.source / "cell_lines.txt")
    treatments = read_labels(args.source / "treatments.txt")
    if not len(contours) == len(lines) == len(treatments) == 650:
        raise SystemExit("expected 650 contours with 650 labels each")
    land = np.stack([resample(c, args.k) for c in contours])
    q = np.round(land * QUANT)
    if np.abs(q).max() >= 2**15:
        raise SystemExit("coordinates overflow int16; lower QUANT")
    line_names, line_codes = np.unique(lines, return_inverse=True)
    treat_names, treat_codes = np.unique(treatments, return_inverse=True)
    np.savez_compressed(
        args.out,
        landmarks=q.astype(np.int16),
        quantum=np.float64(1.0 / QUANT),
        cell_line=line_codes.astype(np.uint8),
        cell_line_names=line_names.astype("U8"),
        treatment=treat_codes.astype(np.uint8),
        treatment_names=treat_names.astype("U8"),
    )
    print(f"wrote {args.out}: {land.shape}, {args.out.stat().st_size} bytes")


if __name__ == "__main__":
    main()
