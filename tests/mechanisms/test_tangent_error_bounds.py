"""The error bounds of a tangent release, (E2) and (E3) of docs/tangent.md, checked.

y = Exp_p(u0 + Z) with u0 = Log_p x̄, a = ρ(p, x̄), b = ‖u0 + Z‖, S(t) = sinh t / t:

- (E2) sec in [−K, 0] (H^d, SPD): ‖Z‖ ≤ ρ(y, x̄) ≤ min(S(√K max(a, b)), 1 + 2a/‖Z‖) ‖Z‖;
- (E3) sec ≥ 0 (S^d, SO(3), Kendall): ρ(y, x̄) ≤ ‖Z‖, even past the cut locus.

Each is checked on every draw (no statistics: the bounds hold surely) over 1,000 draws
per space: noise from 10⁻³ to 3 (past π on the compact spaces), public points at the
center and off it, and small noise orthogonal to u0, where (E2)'s upper bound is
tight. Each check is shown to fail with a wrong constant (K/2 for K, 0.99 ‖Z‖ for
‖Z‖), so it can fail.
"""

from __future__ import annotations

import numpy as np
import pytest

import pymc_manidp as pmd

RTOL = 1e-7  # distances through arccosh/eigh near 0 lose digits
DRAWS = 1000


def _S(t):
    t = np.asarray(t, float)
    return np.where(t < 1e-8, 1.0, np.sinh(t) / np.where(t < 1e-8, 1.0, t))


def _unit(rng, shape):
    v = rng.standard_normal(shape)
    return v / np.linalg.norm(v, axis=-1, keepdims=True)


def _draws(M, center, r, seed):
    """``(a, |Z|, b, rho)`` for DRAWS releases: x̄ in B_r(m0), p = m0 or a public
    point r/2 from it, Z of every size, a quarter of them small and orthogonal to u0."""
    rng = np.random.default_rng(seed)
    d, m = M.dim, DRAWS
    xbar = M.exp_coords(center, _unit(rng, (m, d)) * r * rng.random((m, 1)))
    off = M.exp_coords(center, _unit(rng, (m, d)) * r / 2)
    at_center = (np.arange(m) % 2 == 1).reshape((m,) + (1,) * len(M.point_shape))
    p = np.where(at_center, np.broadcast_to(center, off.shape), off)
    u0 = np.asarray(M.log_coords(p, xbar), float)
    z = rng.standard_normal((m, d)) * 10 ** rng.uniform(-3, np.log10(3.0), (m, 1))
    orth = _unit(rng, (m, d))
    orth -= np.sum(orth * u0, -1, keepdims=True) / np.sum(u0 * u0, -1, keepdims=True) * u0
    orth *= 1e-3 / np.linalg.norm(orth, axis=-1, keepdims=True)
    z = np.where((np.arange(m) % 4 == 3)[:, None], orth, z)
    y = M.exp_coords(p, u0 + z)
    a, b = np.linalg.norm(u0, axis=-1), np.linalg.norm(u0 + z, axis=-1)
    return a, np.linalg.norm(z, axis=-1), b, np.asarray(M.dist(y, xbar), float)


HADAMARD = [
    ("H2", lambda: (pmd.Hyperbolic(dim=2), np.eye(3)[0], 1.5)),
    ("H5", lambda: (pmd.Hyperbolic(dim=5), np.eye(6)[0], 1.5)),
    ("SPD(2)", lambda: (pmd.SPD(k=2), np.eye(2), 1.5)),
    ("SPD(3)", lambda: (pmd.SPD(k=3), np.eye(3), 1.5)),
]


def _e2_upper(M, a, z, b, K):
    return np.minimum(_S(np.sqrt(K) * np.maximum(a, b)) * z, z + 2 * a)


@pytest.mark.parametrize("name, make", HADAMARD, ids=[h[0] for h in HADAMARD])
def test_e2_hadamard_error_between_noise_and_curvature_bound(name, make):
    M, center, r = make()
    K = -M.curvature_bounds[0]
    assert K > 0 and M.curvature_bounds[1] <= 0
    a, z, b, rho = _draws(M, center, r, seed=11)
    assert np.all(rho >= z * (1 - RTOL))  # lower: Log_p is 1-Lipschitz (Lemma 1)
    assert np.all(rho <= _e2_upper(M, a, z, b, K) * (1 + RTOL))
    # the radial draws make the lower bound tight: 1.01 |Z| is not a lower bound
    assert np.any(rho < 1.01 * z)


def test_e2_upper_bound_is_tight_and_a_wrong_curvature_constant_is_caught():
    """On H² (constant curvature −1) the orthogonal small-noise draws reach
    S(a) |Z|: the bound with K/2 is broken, so the check can fail."""
    M, center, r = HADAMARD[0][1]()
    a, z, b, rho = _draws(M, center, r, seed=12)
    assert np.all(rho <= _e2_upper(M, a, z, b, 1.0) * (1 + RTOL))
    assert np.any(rho > _e2_upper(M, a, z, b, 0.5) * (1 + 1e-3))
    ratio = rho / _e2_upper(M, a, z, b, 1.0)
    assert ratio.max() > 0.999  # attained to 0.1 %


def test_e2_sharper_factor_at_a_holds_numerically_on_h2():
    """[N], not proved (docs/tangent.md): ρ(y, x̄) ≤ S(√K a)|Z| with a = ρ(p, x̄) even
    when b > a (proved only for b ≤ a). Checked on H² and H⁵ draws."""
    for _, make in HADAMARD[:2]:
        M, center, r = make()
        a, z, b, rho = _draws(M, center, r, seed=13)
        assert np.all(rho <= _S(a) * z * (1 + RTOL))
        assert np.any(b > a + 0.1)  # the unproved case is exercised


NONNEG = [
    ("S2", lambda: (pmd.Sphere(dim=2), np.array([0.0, 0.0, 1.0]), np.pi / 8)),
    ("S5", lambda: (pmd.Sphere(dim=5), np.eye(6)[-1], 0.7)),
    ("SO(3)", lambda: (pmd.Rotations(), np.eye(3), 1.2)),
    (
        "Kendall(4)",
        lambda: (
            (K := pmd.KendallShape(k_landmarks=4)),
            K.validate(np.array([[0.0, 0.0], [1.0, 0.0], [1.0, 1.0], [0.0, 1.0]])),
            0.35,
        ),
    ),
]


@pytest.mark.parametrize("name, make", NONNEG, ids=[h[0] for h in NONNEG])
def test_e3_nonnegative_curvature_error_at_most_the_noise(name, make):
    M, center, r = make()
    assert M.curvature_bounds[0] >= 0
    _a, z, b, rho = _draws(M, center, r, seed=21)
    assert np.all(rho <= z * (1 + RTOL) + 1e-12)
    assert np.any(b > M.injectivity_radius)  # past the cut locus too
    # radial small noise gives equality: 0.99 |Z| is not a bound (the check can fail)
    assert np.any(rho > 0.99 * z)
