"""Manifolds under test and random points/tangent vectors on them.

Random generators live here, not in the library: the tests must not trust the
code they test to make their inputs.
"""

from __future__ import annotations

import numpy as np
import pytest

import pymc_manidp as pmd

MANIFOLDS = {
    "S1(R=2)": pmd.Sphere(dim=1, radius=2.0),
    "S2(R=0.5)": pmd.Sphere(dim=2, radius=0.5),
    "S2": pmd.Sphere(dim=2),
    "S5(R=3)": pmd.Sphere(dim=5, radius=3.0),
    "SPD2": pmd.SPD(k=2),
    "SPD3": pmd.SPD(k=3),
    "SPD5": pmd.SPD(k=5),
    "Kendall3": pmd.KendallShape(k_landmarks=3),
    "Kendall4": pmd.KendallShape(k_landmarks=4),
    "Kendall10": pmd.KendallShape(k_landmarks=10),
    "R3": pmd.Euclidean(dim=3),
}


def manifold_params(names=None):
    names = list(MANIFOLDS) if names is None else names
    return pytest.mark.parametrize("M", [MANIFOLDS[n] for n in names], ids=names)


def _expm_sym(a):
    w, u = np.linalg.eigh(0.5 * (a + np.swapaxes(a, -1, -2)))
    return (u * np.exp(w)[..., None, :]) @ np.swapaxes(u, -1, -2)


def random_point(M, rng, size=()):
    """Random points; SPD eigenvalues spread over about e^{-2}..e^{2}."""
    size = tuple(np.atleast_1d(size)) if size != () else ()
    if isinstance(M, pmd.Sphere):
        x = rng.normal(size=(*size, M.dim + 1))
        return M.radius * x / np.linalg.norm(x, axis=-1, keepdims=True)
    if isinstance(M, pmd.SPD):
        a = rng.normal(size=(*size, M.k, M.k)) * 0.7
        return _expm_sym(a)
    if isinstance(M, pmd.KendallShape):
        # raw configurations: arbitrary location, scale and orientation
        return rng.normal(size=(*size, M.k_landmarks, 2)) * 3.0 + rng.normal(size=2)
    return rng.normal(size=(*size, M.dim)) * 2.0


def reach(M):
    """A tangent-vector length that keeps log well defined for the tests."""
    if np.isfinite(M.injectivity_radius):
        return 0.95 * M.injectivity_radius
    return 3.0


def random_tangent(M, x, rng, max_norm=None):
    """Tangent vectors at x, direction uniform in the frame, norm in (0, max_norm)."""
    max_norm = reach(M) if max_norm is None else max_norm
    batch = np.shape(x)[: np.ndim(x) - len(M.point_shape)]
    c = rng.normal(size=(*batch, M.dim))
    c /= np.linalg.norm(c, axis=-1, keepdims=True)
    c *= rng.uniform(0.0, max_norm, size=(*batch, 1))
    return M.from_coords(x, c), c


def standard(M, x):
    """Points in the representation the maps return (pre-shapes for Kendall)."""
    return M.validate(x)
