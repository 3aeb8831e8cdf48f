"""The noise maps of the moving chart (``pt_exp_noise``, ``pt_noise_norm``,
``pt_log_noise``, ``pt_log_volume_density_noise``) on every built-in manifold.

Oracles: the linear map ``P_x`` read in the manifold's own orthonormal frame
(``tangent_basis``, ``inner``) must be a co-isometry, ``A A^T = I`` — exactly what
makes a standard normal noise standard normal on ``T_x``; the exp of the noise must
be the manifold's NumPy ``exp``; its distance the noise's norm; ``pt_log_noise`` its
inverse; the volume density the NumPy one at the same tangent vector.
"""

from __future__ import annotations

import functools

import numpy as np
import pytensor
import pytensor.tensor as pt
import pytest

import pymc_manidp as pmd

SPACES = {
    "S2": pmd.Sphere(dim=2),
    "S3(R=2)": pmd.Sphere(dim=3, radius=2.0),
    "S1": pmd.Sphere(dim=1),
    "Kendall5": pmd.KendallShape(k_landmarks=5),
    "SPD1": pmd.SPD(k=1),
    "SPD2": pmd.SPD(k=2),
    "SPD3": pmd.SPD(k=3),
    "SO3": pmd.Rotations(),
    "H2": pmd.Hyperbolic(dim=2),
    "H3": pmd.Hyperbolic(dim=3),
    "R3": pmd.Euclidean(dim=3),
}
params = pytest.mark.parametrize("M", list(SPACES.values()), ids=list(SPACES))


@functools.cache
def _compiled(M):
    """The four maps compiled once per space (FAST_COMPILE: no C compilation, the
    arrays are tiny), each taking one or a batch of footpoints and noises."""
    nd, nn = len(M.point_shape), len(M.noise_shape)
    out = {}
    for batch in (0, 1):
        x = pt.tensor("x", shape=(None,) * (nd + batch))
        w = pt.tensor("w", shape=(None,) * (nn + batch))
        y = pt.tensor("y", shape=(None,) * (nd + batch))
        mode = pytensor.compile.mode.get_mode("FAST_COMPILE")
        out["exp", batch] = pytensor.function([x, w], M.pt_exp_noise(x, w), mode=mode)
        out["norm", batch] = pytensor.function(
            [x, w], M.pt_noise_norm(x, w), mode=mode, on_unused_input="ignore"
        )
        out["log", batch] = pytensor.function([x, y], M.pt_log_noise(x, y), mode=mode)
        out["lvd", batch] = pytensor.function(
            [x, w], M.pt_log_volume_density_noise(x, w), mode=mode, on_unused_input="ignore"
        )
    return out


def _f(M, name, *args):
    batch = int(np.ndim(args[-1]) > len(M.noise_shape if name != "log" else M.point_shape))
    return np.asarray(_compiled(M)[name, batch](*args))


def _point(M, rng):
    """A point away from any special position: exp of random coordinates."""
    base = M.origin if M.origin is not None else M.sample_uniform(rng, ())
    return M.exp_coords(base, 0.7 * rng.normal(size=M.dim))


def _frame_matrix(M, x, exp_noise, eps=1e-6):
    """``A[a, i] = <E_a, P_x e_i>``: ``P_x`` on the noise basis ``e_i`` read in the
    manifold's frame, ``P_x e_i`` the derivative of ``exp_noise(x, eps e_i)`` at 0."""
    m = int(np.prod(M.noise_shape))
    basis = M.tangent_basis(x)
    cols = []
    for i in range(m):
        e = np.zeros(m)
        e[i] = eps
        e = e.reshape(M.noise_shape)
        v = (exp_noise(x, e) - exp_noise(x, -e)) / (2 * eps)
        cols.append([M.inner(x, b, v) for b in basis])
    return np.array(cols).T


def _is_coisometry(M, x, exp_noise) -> bool:
    a = _frame_matrix(M, x, exp_noise)
    return bool(np.allclose(a @ a.T, np.eye(M.dim), atol=1e-6))


@params
def test_noise_is_standard_normal_on_the_tangent_space(M):
    rng = np.random.default_rng(1)
    x = _point(M, rng)

    def exp_noise(x, w):
        return _f(M, "exp", x, w)

    assert _is_coisometry(M, x, exp_noise)


def test_the_coisometry_check_catches_a_wrong_scale():
    # a map off by 2% in length (or one that forgets the symmetric part) must fail
    M = pmd.SPD(k=3)
    x = _point(M, np.random.default_rng(1))
    assert not _is_coisometry(M, x, lambda x, w: _f(M, "exp", x, 1.02 * w))
    assert not _is_coisometry(M, x, lambda x, w: _f(M, "exp", x, w + np.swapaxes(w, -1, -2)))
    S = pmd.Sphere(dim=2)
    y = _point(S, np.random.default_rng(2))
    assert not _is_coisometry(S, y, lambda x, w: _f(S, "exp", x, 1.02 * w))


@params
def test_exp_noise_matches_numpy_exp_and_log_noise_inverts_it(M):
    rng = np.random.default_rng(2)
    for _ in range(3):
        x = _point(M, rng)
        w = 0.4 * rng.normal(size=M.noise_shape)
        y = _f(M, "exp", x, w)
        # the tangent vector P_x w, from the frame matrix: exp_x of it is the same point
        a = _frame_matrix(M, x, lambda x, w: _f(M, "exp", x, w))
        c = a @ w.ravel()
        np.testing.assert_allclose(M.dist(y, M.exp_coords(x, c)), 0.0, atol=1e-7)
        np.testing.assert_allclose(_f(M, "norm", x, w), np.linalg.norm(c), rtol=1e-8)
        np.testing.assert_allclose(M.dist(x, y), np.linalg.norm(c), rtol=1e-7, atol=1e-12)
        back = _f(M, "log", x, y)
        np.testing.assert_allclose(M.dist(_f(M, "exp", x, back), y), 0.0, atol=1e-7)
        np.testing.assert_allclose(_f(M, "norm", x, back), np.linalg.norm(c), rtol=1e-7)
        np.testing.assert_allclose(_f(M, "lvd", x, w), M.log_volume_density(c), atol=1e-9)


@params
def test_noise_maps_broadcast_over_a_batch(M):
    rng = np.random.default_rng(3)
    xs = np.stack([_point(M, rng) for _ in range(4)])
    ws = 0.3 * rng.normal(size=(4, *M.noise_shape))
    batch = _f(M, "exp", xs, ws)
    one = np.stack([_f(M, "exp", xs[i], ws[i]) for i in range(4)])
    np.testing.assert_allclose(batch, one, atol=1e-12)
    # one footpoint for a batch of noises (a group mean's population mean)
    shared = _compiled_shared(M)(xs[0], ws)
    np.testing.assert_allclose(shared[1], _f(M, "exp", xs[0], ws[1]), atol=1e-12)


def _compiled_shared(M):
    x = pt.tensor("x", shape=(None,) * len(M.point_shape))
    w = pt.tensor("w", shape=(None,) * (len(M.noise_shape) + 1))
    return pytensor.function([x, w], M.pt_exp_noise(x, w), mode="FAST_COMPILE")
