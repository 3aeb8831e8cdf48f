"""The Lipschitz constant of Log_p (issue 39, docs/tangent.md Lemmas 1-2), by sampling:
the largest ratio |Log_p a - Log_p b| / rho(a, b) over pairs in the ball approaches L
and never exceeds it, on S^2, SO(3), Kendall(4), SPD(2) and H^2; and the premise
R < min(inj, pi/(2 sqrt(kappa))) is refused with a message saying what to do."""

from __future__ import annotations

import math

import numpy as np
import pytest

import pymc_manidp as pmd
from pymc_manidp.stats.tangent import log_lipschitz, tangent_reach, tangent_reach_limit

N = 20_000  # pairs per case: the whole file runs in a few seconds


def _unit_coords(rng, size, dim):
    g = rng.standard_normal((size, dim))
    return g / np.linalg.norm(g, axis=1, keepdims=True)


def _base(M):
    """A public point to work at: a non-trivial point of each space."""
    rng = np.random.default_rng(7)
    if isinstance(M, pmd.Sphere):
        x = np.array([0.2, -0.4, 1.0])
        return x / np.linalg.norm(x)
    if isinstance(M, pmd.Rotations):
        from scipy.spatial.transform import Rotation

        return Rotation.from_rotvec([0.3, -1.1, 0.5]).as_matrix()
    if isinstance(M, pmd.KendallShape):
        return M.validate(rng.standard_normal(M.point_shape))
    if isinstance(M, pmd.SPD):
        return np.array([[2.0, 0.3], [0.3, 0.7]])
    if isinstance(M, pmd.Hyperbolic):
        return M.exp_coords(np.array([1.0, 0.0, 0.0]), np.array([0.8, -0.5]))
    raise AssertionError(M)


def _ratios(M, p, center, r, rng, step):
    """Ratios over N pairs in B_r(center): ``a`` anywhere in the ball (its radius
    drawn to favour the edge, where L is approached), ``b`` a step of ``step`` from
    ``a`` in a random direction, kept only when inside the ball too."""
    d = M.dim
    s = r * (1 - rng.random(N) ** 4 * 0.999)  # mostly near the edge
    a = M.exp_coords(center, s[:, None] * _unit_coords(rng, N, d))
    w = np.stack([M.from_coords(x, c) for x, c in zip(a, _unit_coords(rng, N, d), strict=True)])
    b = M.exp(a, step * w)
    inside = (M.dist(center, a) <= r) & (M.dist(center, b) <= r)
    a, b = a[inside], b[inside]
    num = np.linalg.norm(M.log_coords(p, a) - M.log_coords(p, b), axis=-1)
    return num / M.dist(a, b)


CASES = [
    # (manifold, radius as a fraction of the limit or absolute, L's closed form)
    (pmd.Sphere(dim=2), 0.99 * math.pi / 4, lambda R: R / math.sin(R)),
    (pmd.Rotations(), 0.99 * math.pi / 2, lambda R: (R / 2) / math.sin(R / 2)),
    (pmd.KendallShape(k_landmarks=4), 0.99 * math.pi / 8, lambda R: 2 * R / math.sin(2 * R)),
    (pmd.SPD(k=2), 1.5, lambda R: 1.0),
    (pmd.Hyperbolic(dim=2), 1.5, lambda R: 1.0),
]


@pytest.mark.parametrize(("M", "r", "closed"), CASES, ids=lambda c: repr(c)[:20])
def test_ratio_approaches_and_never_exceeds_L_at_the_center(M, r, closed):
    rng = np.random.default_rng(2026)
    p = _base(M)
    L = log_lipschitz(M, tangent_reach(M, p, r, p))
    assert L == pytest.approx(closed(r), rel=1e-12)  # the formula, written again
    ratios = _ratios(M, p, p, r, rng, step=1e-5 * r)
    assert len(ratios) > N // 2
    top = float(ratios.max())
    assert top <= L * (1 + 1e-6), (top, L)
    # approached: within 5% of L - 1 (in CAT(0): the radial pairs give ratio 1)
    assert top >= 1 + 0.95 * (L - 1) - 1e-6 if L > 1 else top >= 1 - 1e-6, (top, L)


@pytest.mark.parametrize(("M", "r", "closed"), CASES[:3], ids=lambda c: repr(c)[:20])
def test_off_center_tangent_point_uses_R_equal_r_plus_distance(M, r, closed):
    # p a public point at distance r/2 from m0: R = 1.5 r; the means' ball B_r(m0) is
    # convex and inside B_R(p), its far edge at distance R from p
    rng = np.random.default_rng(39)
    m0 = _base(M)
    r = 0.6 * r
    p = M.exp_coords(m0, 0.5 * r * _unit_coords(rng, 1, M.dim)[0])
    R = tangent_reach(M, m0, r, p)
    assert R == pytest.approx(1.5 * r, rel=1e-6)
    L = log_lipschitz(M, R)
    ratios = _ratios(M, p, m0, r, rng, step=1e-5 * r)
    top = float(ratios.max())
    assert top <= L * (1 + 1e-6), (top, L)
    assert top >= 1 + 0.8 * (L - 1), (top, L)
    # and L at r alone would be exceeded: the off-center widening is needed
    assert top > log_lipschitz(M, r)


def test_a_wrong_constant_is_caught():
    # the sampled maximum tells R/sin R from a constant 1 (what CAT(0) would give)
    rng = np.random.default_rng(5)
    M, r = pmd.Sphere(dim=2), 0.7
    ratios = _ratios(M, _base(M), _base(M), r, rng, step=1e-5)
    assert ratios.max() > 1.05


@pytest.mark.parametrize(
    ("M", "limit"),
    [
        (pmd.Sphere(dim=2), math.pi / 2),
        (pmd.Sphere(dim=2, radius=2.0), math.pi),
        (pmd.Rotations(), math.pi),
        (pmd.KendallShape(k_landmarks=4), math.pi / 4),
        (pmd.SPD(k=2), math.inf),
        (pmd.Hyperbolic(dim=2), math.inf),
    ],
)
def test_reach_limit_and_refusal(M, limit):
    assert tangent_reach_limit(M) == limit
    if math.isfinite(limit):
        assert log_lipschitz(M, math.nextafter(limit, 0)) < math.inf
        with pytest.raises(ValueError, match="closer to the center"):
            log_lipschitz(M, limit)
    else:
        assert log_lipschitz(M, 1e6) == 1.0


@pytest.mark.parametrize("bad", [0.0, -1.0, math.nan, math.inf])
def test_reach_must_be_positive(bad):
    with pytest.raises(ValueError, match="R must be a finite number > 0"):
        log_lipschitz(pmd.Sphere(dim=2), bad)
