"""Derive the packaged IMU orientations from the scikit-kinematics 0.12.0 wheel's test data.

Source: ``tests/data/data_ngimu/quaternion.csv`` (an x-io NGIMU sensor, 499 orientations
over 10 s, recorded 2018-02-08: columns time in s, W, X, Y, Z) and
``tests/data/data_xio/00033_RotationMatrix.csv`` (an x-io IMU, 6313 orientations:
packet number and the rotation matrix's elements 11, 12, ..., 33, row by row) in the
scikit-kinematics 0.12.0 wheel (BSD-3-Clause, Copyright (C) 2016 Thomas Haslwanter).
scikit-kinematics is not a dependency (its wheel also installs a top-level ``tests``
package): only these two data files are read.

Usage (not run in CI)::

    pip download scikit-kinematics==0.12.0 --no-deps -d /tmp/sk
    unzip -o /tmp/sk/scikit_kinematics-0.12.0-py3-none-any.whl \
        'tests/data/data_ngimu/quaternion.csv' \
        'tests/data/data_xio/00033_RotationMatrix.csv' -d /tmp/sk
    python scripts/derive_orientations.py /tmp/sk/tests/data \
        pymc_manidp/datasets/data/orientations.csv

Derivation: NGIMU: every record, its quaternion normalized (the device writes norms of
0.9983); x-io: every 4th record (1579 of 6313), each matrix orthonormalized (it is
orthogonal to 6e-7 as given) and converted to its unit quaternion (Shepperd's method,
scalar part >= 0). Written as ``recording, index, qw, qx, qy, qz`` (scalar first; 9
decimals), ``index`` the time in s (NGIMU) or the packet number (x-io).
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

import numpy as np

from pymc_manidp.geometry.rotations import Rotations, quaternions_of

FIELDS = ("recording", "index", "qw", "qx", "qy", "qz")
XIO_EVERY = 4


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("source", type=Path, help="the wheel's tests/data directory")
    ap.add_argument("out", type=Path, help="output .csv")
    args = ap.parse_args(argv)
    rows = []
    ng = np.loadtxt(args.source / "data_ngimu" / "quaternion.csv", delimiter=",", skiprows=1)
    q = ng[:, 1:] / np.linalg.norm(ng[:, 1:], axis=1, keepdims=True)
    q = np.where(q[:, :1] < 0, -q, q)
    rows += [
        ("ngimu", f"{t:.6f}", *(f"{v:.9f}" for v in qq)) for t, qq in zip(ng[:, 0], q, strict=True)
    ]
    xio = np.loadtxt(
        args.source / "data_xio" / "00033_RotationMatrix.csv", delimiter=",", skiprows=1
    )[::XIO_EVERY]
    mats = Rotations().validate(xio[:, 1:].reshape(-1, 3, 3))
    q = quaternions_of(mats)
    rows += [
        ("xio", str(int(k)), *(f"{v:.9f}" for v in qq)) for k, qq in zip(xio[:, 0], q, strict=True)
    ]
    with args.out.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(FIELDS)
        w.writerows(rows)
    print(f"wrote {args.out}: {len(rows)} orientations, {args.out.stat().st_size} bytes")


if __name__ == "__main__":
    main()
