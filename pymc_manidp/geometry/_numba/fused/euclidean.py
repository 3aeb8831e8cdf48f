r"""Kernels of :math:`\mathbb R^d` in chart coordinates: ``x = origin + c``, ``J = 1``.

KNG's norm is ``|S - n x|`` with ``S = sum_i x_i``; its gradient in ``c`` is
``-n (S - n x)/|S - n x|``.
"""

from __future__ import annotations

import math

import numpy as np

from pymc_manidp.geometry._numba.cache import njit

__all__ = ["kng_norm", "log_volume_density", "params"]


def params(manifold) -> np.ndarray:
    """No constants: the flat metric."""
    return np.zeros(0)


@njit(cache=True, error_model="numpy")
def log_volume_density(c, frame, params, g_c):
    """``log J = 0``: the exp chart of a flat space is an isometry."""
    return 0.0


@njit(cache=True, error_model="numpy")
def kng_norm(c, frame, params, data, weight, g_c):
    """``|sum_i (x_i - x)|`` at ``x = origin + c``; adds ``weight`` times its gradient."""
    origin = frame[0]
    d = c.shape[0]
    n = data.shape[0]
    g = np.zeros(d)
    for i in range(n):
        for a in range(d):
            g[a] += data[i, a]
    norm2 = 0.0
    for a in range(d):
        g[a] -= n * (origin[a] + c[a])
        norm2 += g[a] * g[a]
    norm = math.sqrt(norm2)
    if norm > 0.0:
        for a in range(d):
            g_c[a] -= weight * n * g[a] / norm
    return norm
