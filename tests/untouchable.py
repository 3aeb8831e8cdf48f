"""Data that refuse to be read: for tests that a release is refused before the data are.

A refusal from public facts (arguments, n, ε, the manifold) must come before the data
are read; passing :class:`Untouchable` records proves it: anything beyond their shape
and dtype raises :class:`Touched`, so a refusal that read them first fails the test.
"""

from __future__ import annotations

import numpy as np


class Touched(Exception):
    """The data were read."""


class Untouchable:
    """``n`` records of ``point_shape`` whose every access but shape and dtype raises."""

    dtype = np.dtype(float)

    def __init__(self, n, point_shape=(3,)):
        self.shape = (n, *point_shape)

    def __getattr__(self, name):
        raise Touched(name)

    def __array__(self, *args, **kwargs):
        raise Touched("__array__")

    def __len__(self):
        raise Touched("__len__")

    def __getitem__(self, item):
        raise Touched("__getitem__")
