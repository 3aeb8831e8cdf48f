r"""Orientations of two inertial sensors (IMUs), as rotation matrices on SO(3).

A small real dataset on SO(3) (:class:`~pymc_manidp.geometry.rotations.Rotations`)
for demos: the orientation estimates of an x-io NGIMU held nearly still (499 records
over 10 s) and of an x-io IMU turned all around (every 4th of 6313 records). Data from
the scikit-kinematics 0.12.0 distribution (BSD-3-Clause, Copyright (C) 2016 Thomas
Haslwanter); see ``data/LICENSES.md`` and ``scripts/derive_orientations.py``.
"""

from __future__ import annotations

import csv
import io
from importlib import resources
from typing import NamedTuple

import numpy as np

from pymc_manidp.geometry.rotations import Rotations

__all__ = ["ORIENTATIONS_ATTRIBUTION", "Orientations", "load_orientations"]

#: The notice the BSD-3-Clause licence of the sensor data asks to keep with copies of
#: the data (the full text is in ``data/LICENSES.md``).
ORIENTATIONS_ATTRIBUTION = (
    "IMU orientation data from scikit-kinematics 0.12.0, Copyright (C) 2016 Thomas "
    "Haslwanter, BSD-3-Clause licence"
)

_RECORDINGS = ("ngimu", "xio")


class Orientations(NamedTuple):
    """One recording's orientations.

    Attributes
    ----------
    points : ndarray, shape ``(n, 3, 3)``
        Rotation matrices (orthonormal to rounding, determinant +1).
    quaternions : ndarray, shape ``(n, 4)``
        The same orientations as unit quaternions, scalar first ``(w, x, y, z)`` with
        ``w >= 0``, as stored.
    index : ndarray, shape ``(n,)``
        Time in seconds (``"ngimu"``) or the sensor's packet number (``"xio"``).
    recording : str
        ``"ngimu"`` (n = 499, within 0.6 rad of the identity) or ``"xio"`` (n = 1579,
        spread over the whole group).
    """

    points: np.ndarray
    quaternions: np.ndarray
    index: np.ndarray
    recording: str


def load_orientations(recording: str = "ngimu") -> Orientations:
    """Load one recording of sensor orientations.

    Parameters
    ----------
    recording : {"ngimu", "xio"}
        ``"ngimu"``: an x-io NGIMU, 499 orientations over 10 s, nearly still (every
        record within 0.6 rad of the identity: a ball of radius pi/4 around it, a
        public choice, holds them all). ``"xio"``: an x-io IMU turned all around,
        1579 orientations (every 4th of the source's 6313).

    Returns
    -------
    Orientations
        The recording's rotations, quaternions and times (or packet numbers).

    Raises
    ------
    ValueError
        If ``recording`` is not one of the two.

    Examples
    --------
    >>> data = load_orientations()
    >>> data.points.shape
    (499, 3, 3)
    """
    if recording not in _RECORDINGS:
        raise ValueError(f"recording must be one of {', '.join(_RECORDINGS)}, got {recording!r}")
    path = resources.files("pymc_manidp.datasets").joinpath("data/orientations.csv")
    rows = [r for r in csv.DictReader(io.StringIO(path.read_text("utf-8")))]
    rows = [r for r in rows if r["recording"] == recording]
    q = np.array([[float(r[k]) for k in ("qw", "qx", "qy", "qz")] for r in rows])
    points = Rotations().from_quaternions(q, scalar_first=True)
    index = np.array([float(r["index"]) for r in rows])
    return Orientations(points=points, quaternions=q, index=index, recording=recording)
