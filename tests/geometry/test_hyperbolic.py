"""Hyperbolic space on the hyperboloid: maps, frames, closed forms, twins, converters.

Oracles written here, apart from the module: ``arccosh(-<x, y>_L)`` and the Poincaré
ball's distance formula for ``rho``; the geodesic ``cosh t o + sinh t e`` at the
origin; a finite-difference ``sqrt det G`` for the volume density; ``scipy.integrate``
for the Laplace normalizer; a root finder for the distance to the ball's edge; 4th-order
central differences for the PyTensor gradients.
"""

from __future__ import annotations

import numpy as np
import pytensor
import pytensor.tensor as pt
import pytest
from scipy import integrate, optimize, special

from pymc_manidp.geometry.base import Manifold, check_manifold
from pymc_manidp.geometry.capabilities import UniformLaw
from pymc_manidp.geometry.hyperbolic import (
    Hyperbolic,
    from_poincare,
    hyperbolic_laplace_log_normalizer,
    poincare_dist,
    to_poincare,
)

DIMS = [1, 2, 3, 5]
FD_H = 1e-4


def _mink(u, v):
    """The Minkowski product, written again for the oracles."""
    u, v = np.asarray(u, float), np.asarray(v, float)
    return -u[..., 0] * v[..., 0] + np.sum(u[..., 1:] * v[..., 1:], axis=-1)


def _lift(xs):
    """Hyperboloid points with spatial part ``xs``: ``x0 = sqrt(1 + |xs|^2)``."""
    xs = np.asarray(xs, float)
    return np.concatenate([np.sqrt(1.0 + np.sum(xs**2, axis=-1, keepdims=True)), xs], axis=-1)


def _points(H, n, rng, scale=1.0):
    return _lift(scale * rng.normal(size=(n, H.dim)))


@pytest.mark.parametrize("dim", DIMS)
def test_exp_log_round_trips_and_distance_closed_form(dim):
    H = Hyperbolic(dim=dim)
    rng = np.random.default_rng(dim)
    x, y = _points(H, 40, rng), _points(H, 40, rng)
    assert isinstance(H, Manifold) and check_manifold(H) is H
    np.testing.assert_allclose(_mink(x, x), -1.0, atol=1e-12)
    want = np.arccosh(-_mink(x, y))
    np.testing.assert_allclose(H.dist(x, y), want, rtol=1e-10)
    v = H.log(x, y)
    np.testing.assert_allclose(_mink(x, v), 0.0, atol=1e-11)  # tangent at x
    np.testing.assert_allclose(np.sqrt(_mink(v, v)), want, rtol=1e-10)  # |log| = rho
    np.testing.assert_allclose(H.exp(x, v), y, rtol=1e-10, atol=1e-10)
    # exp then log: a tangent vector back (to_tangent of an ambient vector, rescaled to
    # length <= 2: the hyperboloid's coordinates grow like e^t, and so does rounding)
    u = H.to_tangent(x, rng.normal(size=x.shape))
    u *= np.minimum(1.0, 2.0 / np.sqrt(_mink(u, u)))[:, None]
    np.testing.assert_allclose(H.log(x, H.exp(x, u)), u, rtol=1e-9, atol=1e-10)
    np.testing.assert_allclose(H.dist(x, x), 0.0, atol=0)


def test_geodesic_at_the_origin_and_poincare_radius():
    """``exp_o(t e_1) = (cosh t, sinh t, 0)``; a ball point at Euclidean radius ``s`` is
    at distance ``2 atanh(s)`` from the center."""
    H = Hyperbolic(dim=2)
    for t in (1e-9, 0.3, 2.0, 7.0):
        x = H.exp(H.origin, np.array([0.0, t, 0.0]))
        np.testing.assert_allclose(x, [np.cosh(t), np.sinh(t), 0.0], rtol=1e-14)
        assert H.dist(H.origin, x) == pytest.approx(t, rel=1e-13)
    for s in (1e-8, 0.5, 0.99):
        p = np.array([0.0, s])
        assert H.dist(H.origin, from_poincare(p)) == pytest.approx(2 * np.arctanh(s), rel=1e-12)


def test_distance_is_accurate_for_nearby_points():
    """Two points 1e-9 apart far from the origin: ``arccosh`` of ``-<x, y>_L`` loses
    every digit, the difference form keeps them."""
    H = Hyperbolic(dim=3)
    x = H.exp_coords(H.origin, [1.0, -0.5, 0.3])
    for t in (1e-9, 1e-6, 1e-3):
        c = np.array([0.6, 0.0, 0.8]) * t
        y = H.exp_coords(x, c)
        assert H.dist(x, y) == pytest.approx(t, rel=1e-6)
        np.testing.assert_allclose(H.log_coords(x, y), c, rtol=1e-6, atol=1e-15)


def test_distance_is_accurate_for_distant_points():
    """Far out the difference form cancels terms of size ``x_0^2``; the product form
    ``-2(<x, y>_L + 1)`` takes over: distances up to 300 from the origin, and from a
    point near it, to full relative accuracy."""
    H = Hyperbolic(dim=2)
    near = H.exp_coords(H.origin, [0.2, -0.1])
    for t in (10.0, 80.0, 300.0):
        x = H.exp(H.origin, np.array([0.0, 0.6 * t, 0.8 * t]))
        assert H.dist(H.origin, x) == pytest.approx(t, rel=1e-13)
        assert H.dist(x, H.origin) == pytest.approx(t, rel=1e-13)
        want = np.arccosh(-_mink(near, x))  # accurate here: -<x, y>_L is large
        assert H.dist(near, x) == pytest.approx(want, rel=1e-13)
        np.testing.assert_allclose(H.norm(near, H.log(near, x)), want, rtol=1e-12)
        d = float(pytensor.function([], H.pt_dist(pt.as_tensor(near), pt.as_tensor(x)))())
        assert d == pytest.approx(want, rel=1e-13)


@pytest.mark.parametrize("dim", DIMS)
def test_frames_are_minkowski_orthonormal_and_tangent(dim):
    H = Hyperbolic(dim=dim)
    x = _points(H, 30, np.random.default_rng(3), scale=2.0)
    b = H.tangent_basis(x)
    assert b.shape == (30, dim, dim + 1)
    gram = _mink(b[:, :, None, :], b[:, None, :, :])
    np.testing.assert_allclose(gram, np.broadcast_to(np.eye(dim), gram.shape), atol=1e-11)
    np.testing.assert_allclose(_mink(b, x[:, None, :]), 0.0, atol=1e-11)
    # at the origin: the standard axes
    np.testing.assert_allclose(H.tangent_basis(H.origin), np.eye(dim + 1)[1:], atol=0)
    # chart coordinates round trip
    c = np.random.default_rng(4).normal(size=(30, dim))
    np.testing.assert_allclose(H.log_coords(x, H.exp_coords(x, c)), c, rtol=1e-9, atol=1e-9)


def _pulled_back_sqrt_det(H, x, c):
    """``log sqrt det G`` of ``c -> exp_x(sum c_a E_a)`` by 4th-order differences."""
    cols = []
    for a in range(H.dim):
        e = np.zeros(H.dim)
        e[a] = FD_H
        f = [H.exp_coords(x, c + s * e) for s in (2, 1, -1, -2)]
        cols.append((-f[0] + 8 * f[1] - 8 * f[2] + f[3]) / (12 * FD_H))
    cols = np.stack(cols)
    g = _mink(cols[:, None, :], cols[None, :, :])
    sign, logdet = np.linalg.slogdet(g)
    assert sign > 0
    return 0.5 * logdet


@pytest.mark.parametrize("dim", [2, 3, 5])
def test_log_volume_density_matches_pulled_back_metric(dim):
    H = Hyperbolic(dim=dim)
    rng = np.random.default_rng(10 + dim)
    x = _points(H, 1, rng, scale=0.5)[0]
    dirs = rng.normal(size=(12, dim))
    dirs /= np.linalg.norm(dirs, axis=-1, keepdims=True)
    t = np.concatenate([rng.uniform(0.05, 3.0, 8), [1e-3, 1e-2, 0.3, 4.0]])
    for c in dirs * t[:, None]:
        want = _pulled_back_sqrt_det(H, x, c)
        got = H.log_volume_density(c)
        assert abs(np.expm1(got - want)) < 1e-6, (c, got, want)
        # the closed form itself
        s = np.linalg.norm(c)
        assert got == pytest.approx((dim - 1) * np.log(np.sinh(s) / s), rel=1e-10, abs=1e-14)
    # the check can fail: the flat density is far off
    c = np.full(dim, 0.8)
    assert abs(np.expm1(0.0 - _pulled_back_sqrt_det(H, x, c))) > 1e-2


def test_constants_and_hooks():
    H2, H1 = Hyperbolic(dim=2), Hyperbolic(dim=1)
    assert H2.curvature_bounds == (-1.0, -1.0) and H1.curvature_bounds == (0.0, 0.0)
    assert H2.injectivity_radius == np.inf and H2.max_radius == np.inf
    assert H2.log_volume_growth == 1.0 and Hyperbolic(dim=5).log_volume_growth == 4.0
    assert H2.laplace_max_sigma == 1.0 and Hyperbolic(dim=4).laplace_max_sigma == pytest.approx(
        1 / 3
    )
    assert H1.laplace_max_sigma == np.inf
    assert H2.exact_sampling and H2.homogeneous and H2.volume_is_radial
    assert H2.log_volume == np.inf and not isinstance(H2, UniformLaw)
    np.testing.assert_array_equal(H2.origin, [1.0, 0.0, 0.0])
    g = H2.generic_point
    assert _mink(g, g) == pytest.approx(-1.0) and H2.dist(H2.origin, g) == pytest.approx(0.7)
    with pytest.raises(ValueError, match=r"not normalizable for sigma = 1 >= 1/\(dim - 1\) = 1"):
        H2.check_laplace_normalizable(1.0)
    H2.check_laplace_normalizable(0.93)
    # normalizable, but its draws overflow (issue 43 item 5): refused, naming the limit
    with pytest.raises(ValueError, match=r"too heavy-tailed.*largest supported sigma is 0\.93"):
        H2.check_laplace_normalizable(0.999)
    with pytest.raises(ValueError, match="dim"):
        Hyperbolic(dim=0)


def test_registry_members():
    assert Hyperbolic.name == "hyperbolic" and "x0" in Hyperbolic.record_layout
    assert Hyperbolic.from_record_shape((3,)) == Hyperbolic(dim=2)
    assert Hyperbolic.from_record_shape((6,)) == Hyperbolic(dim=5)
    for bad in ((1,), (3, 3), ()):
        with pytest.raises(ValueError, match=r"hyperbolic records have shape \(n, d\+1\)"):
            Hyperbolic.from_record_shape(bad)
    M, center, radius, nodes = Hyperbolic.audit_space()
    assert M == Hyperbolic(dim=2) and radius < M.max_radius and nodes > 0
    np.testing.assert_array_equal(M.validate(center), center)


def test_ambient_mean_start_is_the_lorentzian_centroid():
    H = Hyperbolic(dim=3)
    x = _points(H, 20, np.random.default_rng(5))
    m = x.mean(axis=0)
    start = H.ambient_mean_start(m)
    np.testing.assert_allclose(start, m / np.sqrt(-_mink(m, m)), rtol=1e-12)
    assert _mink(start, start) == pytest.approx(-1.0)
    assert H.ambient_mean_start(np.array([0.0, 1.0, 0.0, 0.0])) is None  # spacelike


# --- validate and the converters ------------------------------------------------------------
def test_validate_projects_and_refuses_by_row():
    H = Hyperbolic(dim=2)
    x = _points(H, 4, np.random.default_rng(6))
    nudged = x.copy()
    nudged[:, 0] *= 1 + 1e-8
    np.testing.assert_allclose(H.validate(nudged), x, rtol=1e-15)
    np.testing.assert_allclose(_mink(H.validate(nudged), H.validate(nudged)), -1.0, atol=1e-13)
    off = x.copy()
    off[2, 0] += 0.1
    with pytest.raises(ValueError, match=r"not on the hyperboloid.*1 of 4 rows, first at row 2"):
        H.validate(off)
    lower = x.copy()
    lower[1] *= -1
    with pytest.raises(ValueError, match=r"upper sheet.*x0 > 0.*first at row 1.*Negate"):
        H.validate(lower)
    bad = x.copy()
    bad[3, 1] = np.nan
    with pytest.raises(ValueError, match=r"NaN or infinite.*row 3"):
        H.validate(bad)
    with pytest.raises(ValueError, match=r"trailing shape \(3,\)"):
        H.validate(np.zeros((4, 2)))
    # Poincaré-ball points are not hyperboloid points: the message says what to do
    with pytest.raises(ValueError, match="from_poincare"):
        Hyperbolic(dim=1).validate([[0.3, 0.2]])


def test_poincare_converters_round_trip_and_preserve_distance():
    rng = np.random.default_rng(8)
    for d in (1, 2, 4):
        H = Hyperbolic(dim=d)
        u = rng.normal(size=(50, d))
        p = u / np.linalg.norm(u, axis=-1, keepdims=True) * rng.uniform(0, 0.995, (50, 1))
        x = from_poincare(p)
        np.testing.assert_allclose(_mink(x, x), -1.0, atol=1e-9)
        np.testing.assert_allclose(to_poincare(x), p, atol=1e-13)
        np.testing.assert_allclose(from_poincare(to_poincare(x)), x, rtol=1e-10)
        q = np.roll(p, 1, axis=0)
        # the textbook ball formula, written again here
        num = 2 * np.sum((p - q) ** 2, -1)
        den = (1 - np.sum(p**2, -1)) * (1 - np.sum(q**2, -1))
        want = np.arccosh(1 + num / den)
        np.testing.assert_allclose(H.dist(x, from_poincare(q)), want, rtol=1e-9)
        np.testing.assert_allclose(poincare_dist(p, q), want, rtol=1e-12)


def test_from_poincare_refuses_points_outside_the_open_ball():
    with pytest.raises(ValueError, match=r"norm < 1.*1 of 3 rows, first at row 1"):
        from_poincare([[0.1, 0.0], [0.6, 0.8], [0.0, 0.2]])
    with pytest.raises(ValueError, match="norm < 1"):
        from_poincare([[1.5, 0.0]])
    with pytest.raises(ValueError, match="NaN or infinite"):
        from_poincare([[np.nan, 0.0]])


# --- the Laplace normalizer -----------------------------------------------------------------
@pytest.mark.parametrize("dim", [1, 2, 3, 5])
def test_normalizer_closed_form_matches_quadrature(dim):
    """``Z = vol(S^{d-1}) int_0^inf e^{-t/s} sinh^{d-1} t dt`` by adaptive quadrature."""
    H = Hyperbolic(dim=dim)
    log_vol = np.log(2.0) + 0.5 * dim * np.log(np.pi) - special.gammaln(0.5 * dim)
    edge = H.laplace_max_sigma
    for frac in (0.01, 0.3, 0.8, 0.97):
        sigma = frac * (edge if np.isfinite(edge) else 1.0)

        def f(t, sigma=sigma):
            # e^{-t/s} sinh^{d-1} t = e^{-(1/s - d + 1) t} ((1 - e^{-2t})/2)^{d-1}
            return np.exp(-(1 / sigma - (dim - 1)) * t) * (-np.expm1(-2 * t) / 2) ** (dim - 1)

        val, _ = integrate.quad(f, 0, np.inf, epsabs=0, epsrel=1e-12, limit=500)
        want = log_vol + np.log(val)
        got = float(hyperbolic_laplace_log_normalizer(dim, sigma).eval())
        assert got == pytest.approx(want, abs=1e-9), (sigma, got, want)
        assert float(H.pt_laplace_log_normalizer(sigma).eval()) == got
    if np.isfinite(edge):
        out = hyperbolic_laplace_log_normalizer(dim, np.array([edge, 2 * edge])).eval()
        assert np.all(out == np.inf)


def test_normalizer_gradient_is_finite_and_right():
    s = pt.dscalar("s")
    lz = hyperbolic_laplace_log_normalizer(3, s)
    f = pytensor.function([s], [lz, pt.grad(lz, s)])
    for sigma in (1e-3, 0.2, 0.45):
        _, g = f(sigma)
        h = 1e-6 * sigma
        fd = (f(sigma + h)[0] - f(sigma - h)[0]) / (2 * h)
        assert np.isfinite(g) and g == pytest.approx(fd, rel=1e-6)


# --- the ball's edge along chart directions -------------------------------------------------
def test_ball_exit_matches_a_root_finder():
    H = Hyperbolic(dim=3)
    rng = np.random.default_rng(9)
    m0 = H.exp_coords(H.origin, [0.4, -0.2, 0.1])
    r = 1.3
    origin = H.exp_coords(m0, [0.5, 0.3, -0.2])  # inside the ball
    frame = H.chart_frame(origin)
    omega = rng.normal(size=(6, 3))
    omega /= np.linalg.norm(omega, axis=-1, keepdims=True)
    got = H.pt_ball_exit(frame, pt.as_tensor(omega), m0, r).eval()
    for w, t in zip(omega, got, strict=True):
        root = optimize.brentq(lambda s, w=w: H.dist(m0, H.exp_coords(origin, s * w)) - r, 0, 10)
        assert t == pytest.approx(root, abs=1e-10)
    # from the center every direction exits at r
    at_center = H.pt_ball_exit(H.chart_frame(m0), pt.as_tensor(omega), m0, r).eval()
    np.testing.assert_allclose(at_center, r, rtol=1e-12)


# --- rounding far from the origin (issue 43 item 5) ----------------------------------------
def _grad_norm_oracle(x, data):
    """``|(1/n) sum_i log_x(x_i)|`` at 80 digits from the same float inputs: the
    log map ``rho/sinh(rho) (x_i - cosh(rho) x)``, ``cosh rho = -<x, x_i>_L``."""
    import mpmath as mp

    with mp.workdps(80):
        xm = [mp.mpf(float(v)) for v in x]

        def mi(u, v):
            return -u[0] * v[0] + sum(a * b for a, b in zip(u[1:], v[1:], strict=True))

        g = [mp.mpf(0)] * len(xm)
        for y in data:
            ym = [mp.mpf(float(v)) for v in y]
            c = -mi(xm, ym)
            rho = mp.acosh(c) if c > 1 else mp.mpf(0)
            fac = rho / mp.sinh(rho) if rho > 0 else mp.mpf(1)
            g = [gi + fac * (a - c * b) for gi, a, b in zip(g, ym, xm, strict=True)]
        g = [gi / len(data) for gi in g]
        return float(mp.sqrt(max(mi(g, g), 0)))


@pytest.mark.parametrize("reach", [2.0, 5.0, 8.0, 11.0])
def test_rounding_error_bounds_the_gradient_norms_error(reach):
    """``rounding_error`` bounds |computed - exact| KNG gradient norms in the ball, for
    the placements that cancel most: records near the center with a far point, at
    opposite edges, all at one far point with a point 1e-6..1 from it. Fails with the
    bound ``eps cosh^2 R`` instead of 1024 of it (the errors reach ~50 of it)."""
    from pymc_manidp.stats import reductions

    H = Hyperbolic(dim=2)
    o = H.origin
    rng = np.random.default_rng(0)
    eta = H.rounding_error(o, reach)
    assert eta == pytest.approx(
        1024 * np.finfo(float).eps * np.cosh(reach) * np.cosh(3 * reach), rel=1e-12
    )
    worst = 0.0
    for trial in range(24):
        u = rng.normal(size=2)
        u /= np.linalg.norm(u)
        kind = trial % 3
        if kind == 0:
            data = H.exp_coords(o, rng.normal(size=(5, 2)) * 0.1)
            x = H.exp_coords(o, reach * u * rng.uniform(0.5, 1.0))
        elif kind == 1:
            data = H.exp_coords(o, np.array([reach * u, -reach * u] * 2))
            x = H.exp_coords(o, reach * u * rng.uniform(0.9, 1.0) + rng.normal(size=2) * 1e-3)
        else:
            data = H.exp_coords(o, np.array([reach * u] * 4) * (1 - 1e-12))
            x = H.exp_coords(o, reach * u * 0.999 + rng.normal(size=2) * 10 ** rng.uniform(-6, 0))
        data, x = H.validate(data), H.validate(x)
        got = float(reductions.grad_norms(H, x[None], data)[0])
        worst = max(worst, abs(got - _grad_norm_oracle(x, data)))
    assert worst <= eta
    # the growth is real: a bound of a few ulps of the radius (every other space's)
    # fails beyond R = 2, where the errors exceed eps cosh^2 R
    if reach >= 5:
        assert worst >= np.finfo(float).eps * np.cosh(reach) ** 2


@pytest.mark.parametrize("dim", [2, 3, 5])
def test_laplace_supported_sigma_is_where_the_tail_past_600_is_2_to_the_minus_64(dim):
    """The radius is ``-log(U)/2``, ``U ~ Beta(b, d)``: mpmath's Beta cdf at ``e^{-1200}``
    is at most 2^-64 at the supported sigma and above 2^-64 5% beyond it."""
    import mpmath as mp

    H = Hyperbolic(dim=dim)
    top = H.laplace_supported_sigma
    assert 0.9 * H.laplace_max_sigma < top < H.laplace_max_sigma

    def log_tail(sigma):
        b = (1.0 / sigma - dim + 1) / 2
        with mp.workdps(30):
            p = mp.betainc(b, dim, 0, mp.exp(-1200), regularized=True)
            return float(mp.log(p))

    assert log_tail(top) <= -64 * np.log(2) + 1e-9  # the bound is tight: ~equality
    assert log_tail(top + 0.05 * (H.laplace_max_sigma - top)) > -64 * np.log(2)
    H.check_laplace_normalizable(top)  # supported: no error
    with pytest.raises(ValueError, match=r"too heavy-tailed.*largest supported sigma"):
        H.check_laplace_normalizable(0.999 * H.laplace_max_sigma)
