"""The log volume density of every exp chart against sqrt(det G) by finite differences.

G is the pull-back of the metric through c -> exp_x(sum_a c_a E_a(x)); its columns
are 4th-order central differences of the ambient map, projected to the tangent
(for Kendall: horizontal) space at the image and measured with the manifold's
inner product there. No closed form from the library enters the reference.
"""

from __future__ import annotations

import numpy as np

import pymc_manidp as pmd
from tests.cases import manifold_params, random_point, reach

H = 1e-4


def _pulled_back_sqrt_det(M, x, c):
    dim = M.dim
    cols = []
    for a in range(dim):
        e = np.zeros(dim)
        e[a] = H
        f = [M.exp_coords(x, c + s * e) for s in (2, 1, -1, -2)]
        cols.append((-f[0] + 8 * f[1] - 8 * f[2] + f[3]) / (12 * H))
    y = M.exp_coords(x, c)
    cols = np.stack([M.to_tangent(y, j) for j in cols])  # (dim, *point_shape)
    ye = np.expand_dims(y, (0, 1))
    g = M.inner(ye, cols[:, None], cols[None, :])
    sign, logdet = np.linalg.slogdet(g)
    assert sign > 0
    return 0.5 * logdet


@manifold_params(
    [
        "S1(R=2)",
        "S2",
        "S2(R=0.5)",
        "S5(R=3)",
        "SPD2",
        "SPD3",
        "SPD5",
        "Kendall3",
        "Kendall4",
        "Kendall10",
        "R3",
    ]
)
def test_log_volume_density_matches_pulled_back_metric(M):
    rng = np.random.default_rng(2024 + M.dim)
    max_t = 0.9 * reach(M) if np.isfinite(M.injectivity_radius) else 3.0
    for _ in range(3):
        x = random_point(M, rng)
        dirs = rng.normal(size=(24, M.dim))
        dirs /= np.linalg.norm(dirs, axis=-1, keepdims=True)
        # 20 spread over the chart, 4 near its center
        t = np.concatenate([rng.uniform(0.05, max_t, 20), [1e-3, 3e-3, 1e-2, 3e-2]])
        for c in dirs * t[:, None]:
            expected = _pulled_back_sqrt_det(M, x, c)
            got = M.log_volume_density(c)
            # 1e-6 relative on the density itself
            assert abs(np.expm1(got - expected)) < 1e-6, (M, c, got, expected)


def test_log_volume_density_is_minus_inf_outside_injective_chart():
    S = pmd.Sphere(dim=3, radius=2.0)
    assert S.log_volume_density(np.array([2.0 * np.pi + 0.1, 0, 0])) == -np.inf
    K = pmd.KendallShape(k_landmarks=5)
    assert K.log_volume_density(np.array([np.pi / 2 + 0.01, 0, 0, 0, 0, 0])) == -np.inf


def test_a_wrong_volume_density_is_caught():
    # The check can fail: the flat density (the missing-Jacobian mistake) is far off.
    M = pmd.Sphere(dim=2)
    x = np.array([0.0, 0.0, 1.0])
    c = np.array([1.0, 0.5])
    assert abs(np.expm1(0.0 - _pulled_back_sqrt_det(M, x, c))) > 1e-2
