"""The contract every manifold keeps, written once (issue 37, item 1).

``suite(*manifolds)`` returns a pytest test class that runs every check below on each
manifold given; ``tests/geometry/test_contract.py`` gives it each shipped class's own
``examples()`` (so a new file of ``geometry/`` is checked with no edit here), and a
manifold written in a test file passes the same checks with one line::

    TestRoundSphereContract = contract.suite(RoundSphere())

As in geomstats' ``RiemannianMetricTestCase``, the data come from a generator per space
and the tests are written once; here the generator is generic (points are ``exp`` of
random chart coordinates at a point the space names), so a space only lists its
instances. A check whose optional hook a space leaves at its generic ``None`` (the noise
maps, the uniform law's Gaussian chart, the ball exit) is not generated for that space.

Each check is a plain function ``check_<name>(M)`` that raises ``AssertionError``: the
planted-bug tests call them directly on a broken manifold. Oracles, not the library:
finite differences of the NumPy maps, the metric itself, bisection.
"""

from __future__ import annotations

import functools
import pickle

import numpy as np
import pytensor
import pytensor.tensor as pt
import pytest

from pymc_manidp.geometry.capabilities import (
    BallExit,
    GaussianChart,
    GenericPoint,
    NoiseMap,
    Origin,
    UniformLaw,
)

FAST = "FAST_COMPILE"  # the same graph without C compilation: the arrays are tiny
H_FD = 1e-4  # step of the 4th-order central differences


# --- the data generator --------------------------------------------------------------------
def base_point(M):
    """A point the space names (its generic point, its origin, or a uniform draw)."""
    if isinstance(M, GenericPoint):
        return M.validate(M.generic_point)
    if isinstance(M, Origin):
        return M.validate(M.origin)
    if isinstance(M, UniformLaw):
        return M.validate(M.sample_uniform(np.random.default_rng(0), ()))
    raise AssertionError(f"{M!r} names no point: give it a generic_point, origin or sample_uniform")


def reach(M):
    """A tangent-vector length that keeps ``log`` well defined for the tests."""
    return 0.95 * M.injectivity_radius if np.isfinite(M.injectivity_radius) else 3.0


def r_star(M):
    """``r*`` (data radii stay below it), or 3 where it is infinite."""
    return M.max_radius if np.isfinite(M.max_radius) else 3.0


def random_coords(M, rng, size=(), max_norm=None, min_norm=0.0):
    """Chart coordinates ``(*size, dim)``: uniform direction, norm uniform in
    ``(min_norm, max_norm)`` (``max_norm`` defaults to :func:`reach`)."""
    size = tuple(np.atleast_1d(size)) if size != () else ()
    c = rng.normal(size=(*size, M.dim))
    c /= np.linalg.norm(c, axis=-1, keepdims=True)
    return c * rng.uniform(min_norm, reach(M) if max_norm is None else max_norm, size=(*size, 1))


def random_point(M, rng, size=()):
    """Random points ``(*size, *point_shape)``: ``exp`` at :func:`base_point` of
    chart coordinates within :func:`reach` (SPD: eigenvalues about e^-3..e^3)."""
    c = random_coords(M, rng, size)
    x = np.broadcast_to(base_point(M), (*c.shape[:-1], *M.point_shape))
    return M.exp_coords(x, c)


def random_tangent(M, x, rng, max_norm=None, min_norm=0.0):
    """Tangent vectors at ``x`` and their chart coordinates."""
    batch = np.shape(x)[: np.ndim(x) - len(M.point_shape)]
    c = random_coords(M, rng, batch, max_norm, min_norm)
    return M.from_coords(x, c), c


def center_and_data(M, rng, n=5, spread=0.6):
    """A point and ``n`` data at distances ``spread/3..spread`` from it, but for one
    datum at the point itself (the finite differences of ``rho`` need no cusp near
    them: their step is 1e-4)."""
    x = M.validate(random_point(M, rng))
    v, _ = random_tangent(M, np.broadcast_to(x, (n, *x.shape)), rng, spread, spread / 3)
    ys = M.exp(x, v)
    ys[0] = x
    return x, ys


def _unit(rng, dim):
    u = rng.normal(size=dim)
    return u / np.linalg.norm(u)


def _chart_coords(M, rng):
    """Chart coordinates at the origin, near it, halfway, and near r*: ``(4, dim)``."""
    u = _unit(rng, M.dim)
    return np.stack([0 * u, 1e-6 * u, 0.5 * r_star(M) * u, 0.99 * r_star(M) * u])


def _scale(a):
    return max(1.0, float(np.max(np.abs(a))))


# --- helpers ------------------------------------------------------------------------------
def _sym(a):
    return pt.tensor(dtype="float64", shape=(None,) * np.ndim(a))


def _compile(fn, *args, mode=None):
    syms = [_sym(a) for a in args]
    return pytensor.function(syms, fn(*syms), on_unused_input="ignore", mode=mode)


def _weights(out, k):
    """A fixed pseudo-random projection of ``out`` (symbolic: no shape needed)."""
    return pt.reshape(pt.sin(0.7 + 1.3 * k + 2.1 * pt.arange(out.size)), out.shape)


def vgrad(fn, args, h=H_FD, rtol=1e-6, seed=0):
    """The gradient of a random projection of ``fn(*args)`` (a list of tensors) is
    finite and equals 4th-order central differences of the graph's value along three
    random directions. One compiled function for many maps: compiling dominates."""
    rng = np.random.default_rng(seed)
    ts = [_sym(a) for a in args]
    cost = sum(pt.sum(out * _weights(out, k)) for k, out in enumerate(fn(*ts)))
    grads = pt.grad(cost, ts, disconnected_inputs="ignore")  # a flat density has no path
    f = pytensor.function(ts, [cost, *grads], mode=FAST, on_unused_input="ignore")
    g = f(*args)[1:]
    assert all(np.all(np.isfinite(gi)) for gi in g), "non-finite gradient"
    for _ in range(3):
        u = [rng.normal(size=np.shape(a)) for a in args]
        vals = [
            f(*[a + s * h * ui for a, ui in zip(args, u, strict=True)])[0] for s in (2, 1, -1, -2)
        ]
        fd = (-vals[0] + 8 * vals[1] - 8 * vals[2] + vals[3]) / (12 * h)
        an = float(sum(np.sum(gi * ui) for gi, ui in zip(g, u, strict=True)))
        assert abs(an - fd) <= rtol * max(1.0, abs(fd)), (an, fd)


# --- the checks ---------------------------------------------------------------------------
def check_exp_log_round_trip(M, seed=0, batch=6):
    """``log_x(exp_x v) = v`` below the injectivity radius, ``exp_x(log_x y) = y``,
    ``exp`` lands on the manifold (``validate`` keeps it) and ``log`` is tangent."""
    rng = np.random.default_rng(seed)
    x = random_point(M, rng, batch)
    v, _ = random_tangent(M, x, rng)
    y = M.exp(x, v)
    np.testing.assert_allclose(M.log(x, y), v, atol=1e-8 * _scale(v))
    np.testing.assert_allclose(M.dist(M.exp(x, M.log(x, y)), y), 0.0, atol=1e-6)
    np.testing.assert_allclose(M.validate(y), y, atol=1e-10 * _scale(y))
    w = M.log(y, x)
    np.testing.assert_allclose(M.to_tangent(y, w), w, atol=1e-10 * _scale(w))
    # chart coordinates: log_coords inverts exp_coords
    c = random_coords(M, rng, batch)
    np.testing.assert_allclose(M.log_coords(x, M.exp_coords(x, c)), c, atol=1e-8 * _scale(c))


def check_distance(M, seed=1, batch=6):
    """``dist`` is the norm of ``log``, symmetric, zero on the diagonal, and obeys the
    triangle inequality."""
    rng = np.random.default_rng(seed)
    x = random_point(M, rng, batch)
    v, c = random_tangent(M, x, rng)
    y = M.exp(x, v)
    d = M.dist(x, y)
    np.testing.assert_allclose(d, np.linalg.norm(c, axis=-1), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(M.norm(x, M.log(x, y)), d, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(M.dist(y, x), d, rtol=1e-9, atol=1e-12)
    assert np.all(M.dist(x, x) < 1e-7)
    a, b, z = (random_point(M, rng, 20) for _ in range(3))
    assert np.all(M.dist(a, z) <= M.dist(a, b) + M.dist(b, z) + 1e-10)


def check_frame(M, seed=2, batch=4):
    """``tangent_basis`` is orthonormal in the metric and tangent."""
    rng = np.random.default_rng(seed)
    x = random_point(M, rng, batch)
    basis = M.tangent_basis(x)
    nb = len(M.point_shape) + 1
    assert basis.shape == (batch, M.dim, *M.point_shape)
    np.testing.assert_allclose(M.to_tangent(np.expand_dims(x, -nb), basis), basis, atol=1e-12)
    xe = np.expand_dims(x, (-nb, -nb - 1))
    gram = M.inner(xe, np.expand_dims(basis, -nb), np.expand_dims(basis, -nb - 1))
    np.testing.assert_allclose(gram, np.broadcast_to(np.eye(M.dim), gram.shape), atol=1e-12)


def pulled_back_log_sqrt_det(M, x, c, h=H_FD):
    """``log sqrt(det G)`` of the metric pulled back through the exp chart at ``x``:
    columns by 4th-order central differences of ``exp_coords``, projected to the tangent
    space at the image and measured with the manifold's ``inner`` there."""
    cols = []
    for a in range(M.dim):
        e = np.zeros(M.dim)
        e[a] = h
        f = [M.exp_coords(x, c + s * e) for s in (2, 1, -1, -2)]
        cols.append((-f[0] + 8 * f[1] - 8 * f[2] + f[3]) / (12 * h))
    y = M.exp_coords(x, c)
    cols = np.stack([M.to_tangent(y, j) for j in cols])
    ye = np.expand_dims(y, (0, 1))
    sign, logdet = np.linalg.slogdet(M.inner(ye, cols[:, None], cols[None, :]))
    assert sign > 0
    return 0.5 * logdet


def check_volume_density(M, seed=3):
    """``log_volume_density`` equals the pulled-back ``sqrt(det G)`` within 1e-6
    (relative, on the density), over the chart and near its center."""
    rng = np.random.default_rng(seed)
    x = M.validate(random_point(M, rng))
    t = np.concatenate([rng.uniform(0.05, 0.9 * reach(M), 6), [1e-3, 3e-2, 0.99 * r_star(M)]])
    for c in np.stack([_unit(rng, M.dim) for _ in t]) * t[:, None]:
        want = pulled_back_log_sqrt_det(M, x, c)
        got = M.log_volume_density(c)
        assert abs(np.expm1(got - want)) < 1e-6, (M, c, got, want)


def check_twin_values(M, seed=4):
    """Every PyTensor twin equals its NumPy original to 1e-10, at the chart origin,
    near it and near r*, with a datum at the footpoint."""
    rng = np.random.default_rng(seed)
    x, ys = center_and_data(M, rng)
    c = np.concatenate([_chart_coords(M, rng), random_coords(M, rng, 4)])
    v = M.log(x, ys)
    frame = M.chart_frame(x)
    fn = _compile(
        lambda xx, yy, cc, vv: [
            M.pt_exp_coords(x, cc),
            M.pt_exp_frame(frame, cc),
            M.pt_log(xx, yy),
            M.pt_dist(xx, yy),
            M.pt_inner(xx, vv, vv),
            M.pt_norm(xx, vv),
            M.pt_log_volume_density(cc),
            M.pt_log_frame(frame, yy),
            M.pt_frechet_gradient_norm(xx, yy),
        ],
        x,
        ys,
        c,
        v,
        mode=FAST,
    )
    got = fn(x, ys, c, v)
    want = [
        M.exp_coords(x, c),
        M.exp_coords(x, c),
        v,
        M.dist(x, ys),
        M.inner(x, v, v),
        M.norm(x, v),
        M.log_volume_density(c),
        M.log_coords(x, ys),
        M.norm(x, np.sum(v, axis=0)),
    ]
    names = ["exp_coords", "exp_frame", "log", "dist", "inner", "norm", "lvd", "log_frame", "kng"]
    for name, g, w in zip(names, got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-10, err_msg=f"pt_{name}")
    np.testing.assert_allclose(got[0][0], x, rtol=0, atol=1e-12)
    # KNG's norm at a batch of points
    batch = M.exp_coords(x, random_coords(M, rng, 3, max_norm=0.5))
    got = _compile(M.pt_frechet_gradient_norm, batch, ys, mode=FAST)(batch, ys)
    want = [M.norm(b, np.sum(M.log(b, ys), axis=0)) for b in batch]
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10)


def check_twin_gradients(M, seed=5):
    """Gradients of the twins are finite and equal finite differences, along the chart
    at its origin, near it, halfway and near r* (where the samplers move), and in the
    points; ``rho(x, x)`` and ``|0|`` (cusps) have finite gradients."""
    rng = np.random.default_rng(seed)
    x, ys = center_and_data(M, rng)
    frame = M.chart_frame(x)
    c = _chart_coords(M, rng)

    def maps(cc, xx, p, vv):
        y = M.pt_exp_frame(frame, cc)
        return [
            y,
            M.pt_log_volume_density(cc),
            M.pt_frechet_gradient_norm(y, ys),
            M.pt_log(x, y),  # log at the footpoint of a moving point
            M.pt_log_frame(frame, y),
            M.pt_dist(x, y[2:]),  # away from the cusp at c = 0
            M.pt_log(xx, ys[1:]),
            M.pt_dist(xx, ys[1:]),
            M.pt_log(p, ys[:1]),  # log between coinciding points
            M.pt_norm(x, vv),
        ]

    vgrad(maps, [c, x, ys[0], M.log(x, ys[1:])])
    t = _sym(x)
    f = pytensor.function(
        [t], [pt.grad(M.pt_dist(t, x), t), pt.grad(M.pt_norm(x, t), t)], mode=FAST
    )
    assert np.all(np.isfinite(f(x)[0])), "gradient of rho(x, x)"
    assert np.all(np.isfinite(f(np.zeros_like(x))[1])), "gradient of |0|"


def check_shared_frame(M, seed=6):
    """``pt_exp_frame`` with its frame in shared variables follows a new center (as
    ``pm.Data`` does in a compiled MCMC model)."""
    rng = np.random.default_rng(seed)
    x1, x2 = (M.validate(random_point(M, rng)) for _ in range(2))
    c = random_coords(M, rng, 4, max_norm=0.5 * r_star(M))
    frame = {k: pytensor.shared(v, name=k) for k, v in M.chart_frame(x1).items()}
    cc = pt.matrix("cc")
    fn = pytensor.function([cc], M.pt_exp_frame(frame, cc), mode=FAST)
    np.testing.assert_allclose(fn(c), M.exp_coords(x1, c), rtol=0, atol=1e-10)
    for k, v in M.chart_frame(x2).items():
        frame[k].set_value(v)
    np.testing.assert_allclose(fn(c), M.exp_coords(x2, c), rtol=0, atol=1e-10)


def check_validate(M, seed=7):
    """``validate`` keeps points (idempotent, same shape, batched) and refuses
    non-finite rows, naming the row, and wrong shapes, with ``ValueError``."""
    rng = np.random.default_rng(seed)
    x = random_point(M, rng, 5)
    got = M.validate(x)
    assert got.shape == x.shape
    np.testing.assert_allclose(M.validate(got), got, atol=1e-12 * _scale(got))
    for bad in (np.nan, np.inf):
        y = got.copy()
        y[3].flat[0] = bad
        with pytest.raises(ValueError, match=r"\brow 3\b"):
            M.validate(y)
    wrong = np.zeros((*M.point_shape[:-1], M.point_shape[-1] + 1))
    with pytest.raises(ValueError):
        M.validate(wrong)
    with pytest.raises((TypeError, ValueError)):
        M.validate("a point")


def check_frechet_gradient(M, seed=8):
    """``frechet_gradient`` is minus the gradient of the Fréchet energy (finite
    differences of ``dist`` along the frame) and ``energy = 1/2 sum w rho^2``; the
    one-sweep and stacked forms agree with it."""
    rng = np.random.default_rng(seed)
    x, ys = center_and_data(M, rng, n=6)
    x = M.exp_coords(x, random_coords(M, rng, max_norm=0.2))  # off the datum
    w = rng.uniform(0.5, 1.5, len(ys))
    w /= w.sum()
    g, energy = M.frechet_gradient(x, ys, w)
    rho = M.dist(x, ys)
    assert energy == pytest.approx(0.5 * np.sum(w * rho**2), rel=1e-9, abs=1e-12)
    coords = M.to_coords(x, g)
    for a in range(M.dim):
        e = np.zeros(M.dim)
        e[a] = H_FD
        f = [0.5 * np.sum(w * M.dist(M.exp_coords(x, s * e), ys) ** 2) for s in (2, 1, -1, -2)]
        fd = (-f[0] + 8 * f[1] - 8 * f[2] + f[3]) / (12 * H_FD)
        assert abs(-coords[a] - fd) < 1e-7 * max(1.0, abs(fd)), (a, -coords[a], fd)
    g2, e2, rho2 = M.frechet_gradient_distances(x, ys, w)
    np.testing.assert_allclose(g2, g, atol=1e-12 * _scale(g))
    assert e2 == pytest.approx(energy, rel=1e-12)
    np.testing.assert_allclose(rho2, rho, rtol=1e-9, atol=1e-12)
    eq = np.full(len(ys), 1.0 / len(ys))
    gs, es = M.stack_frechet_gradient(np.stack([x, ys[1]]), np.stack([ys, ys]))
    for j, xj in enumerate([x, ys[1]]):
        gj, ej = M.frechet_gradient(xj, ys, eq)
        np.testing.assert_allclose(gs[j], gj, atol=1e-10 * _scale(gj))
        assert es[j] == pytest.approx(ej, rel=1e-10, abs=1e-14)


def check_pickle(M):
    """A manifold survives pickling (process-based samplers and Dask ship it)."""
    back = pickle.loads(pickle.dumps(M))
    assert type(back) is type(M) and back == M and hash(back) == hash(M)
    x = random_point(M, np.random.default_rng(9), 3)
    np.testing.assert_array_equal(
        back.exp_coords(x, np.zeros((3, M.dim))), M.exp_coords(x, np.zeros((3, M.dim)))
    )


# --- optional hooks ------------------------------------------------------------------------
@functools.cache
def _noise_maps(M):
    """The four noise maps compiled once per space, for one or a batch of footpoints."""
    nd, nn = len(M.point_shape), len(M.noise_shape)
    out = {}
    for batch in (0, 1):
        x = pt.tensor("x", shape=(None,) * (nd + batch))
        w = pt.tensor("w", shape=(None,) * (nn + batch))
        y = pt.tensor("y", shape=(None,) * (nd + batch))
        kw = {"mode": FAST, "on_unused_input": "ignore"}
        out["exp", batch] = pytensor.function([x, w], M.pt_exp_noise(x, w), **kw)
        out["norm", batch] = pytensor.function([x, w], M.pt_noise_norm(x, w), **kw)
        out["log", batch] = pytensor.function([x, y], M.pt_log_noise(x, y), **kw)
        out["lvd", batch] = pytensor.function([x, w], M.pt_log_volume_density_noise(x, w), **kw)
    return out


def _noise(M, name, *args):
    tail = M.point_shape if name == "log" else M.noise_shape
    return np.asarray(_noise_maps(M)[name, int(np.ndim(args[-1]) > len(tail))](*args))


def noise_frame_matrix(M, x, exp_noise, eps=1e-6):
    """``A[a, i] = <E_a, P_x e_i>``: ``P_x`` on the noise basis read in the manifold's
    frame (derivatives of ``exp_noise(x, eps e_i)`` at 0)."""
    m = int(np.prod(M.noise_shape))
    cols = []
    for i in range(m):
        e = np.zeros(m)
        e[i] = eps
        e = e.reshape(M.noise_shape)
        v = (exp_noise(x, e) - exp_noise(x, -e)) / (2 * eps)
        cols.append([M.inner(x, b, v) for b in M.tangent_basis(x)])
    return np.array(cols).T


def check_noise_maps(M, seed=10):
    """The moving chart's noise: ``P_x`` is a co-isometry (``A A^T = I``: standard
    normal noise is standard normal on ``T_x``), ``pt_exp_noise`` is NumPy's ``exp`` of
    ``P_x w``, ``pt_noise_norm`` its length, ``pt_log_noise`` its inverse, the volume
    density NumPy's at ``P_x w``, and all four broadcast over a batch."""
    rng = np.random.default_rng(seed)
    for _ in range(2):
        x = M.validate(random_point(M, rng))
        a = noise_frame_matrix(M, x, lambda x, w: _noise(M, "exp", x, w))
        np.testing.assert_allclose(a @ a.T, np.eye(M.dim), atol=1e-6)
        w = 0.4 * rng.normal(size=M.noise_shape)
        y = _noise(M, "exp", x, w)
        c = a @ w.ravel()
        np.testing.assert_allclose(M.dist(y, M.exp_coords(x, c)), 0.0, atol=1e-7)
        np.testing.assert_allclose(_noise(M, "norm", x, w), np.linalg.norm(c), rtol=1e-8)
        back = _noise(M, "log", x, y)
        np.testing.assert_allclose(M.dist(_noise(M, "exp", x, back), y), 0.0, atol=1e-7)
        np.testing.assert_allclose(_noise(M, "norm", x, back), np.linalg.norm(c), rtol=1e-7)
        np.testing.assert_allclose(_noise(M, "lvd", x, w), M.log_volume_density(c), atol=1e-9)
    xs = random_point(M, rng, 3)
    ws = 0.3 * rng.normal(size=(3, *M.noise_shape))
    one = np.stack([_noise(M, "exp", xs[i], ws[i]) for i in range(3)])
    np.testing.assert_allclose(_noise(M, "exp", xs, ws), one, atol=1e-12)


def check_gaussian_chart(M, seed=11):
    """The uniform law's chart: ``pt_from_gaussian`` is homogeneous of degree 0 and
    lands on the manifold; ``pt_to_gaussian`` is its right inverse."""
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(4, *M.gaussian_shape))
    zz = _sym(z)
    f = pytensor.function([zz], M.pt_from_gaussian(zz), mode=FAST)
    x = f(z)
    np.testing.assert_allclose(M.validate(x), x, atol=1e-10)
    np.testing.assert_allclose(f(2.5 * z), x, atol=1e-12)
    xx = _sym(x)
    g = pytensor.function([xx], M.pt_from_gaussian(M.pt_to_gaussian(xx)), mode=FAST)
    np.testing.assert_allclose(M.dist(g(x), x), 0.0, atol=1e-7)


def check_ball_exit(M, seed=12):
    """``pt_ball_exit``: the distance from a chart origin inside ``B_r(m0)`` to its
    edge along unit chart directions, against bisection of ``dist``."""
    rng = np.random.default_rng(seed)
    m0 = M.validate(random_point(M, rng))
    r = 0.8 * r_star(M)
    origin = M.exp_coords(m0, random_coords(M, rng, max_norm=0.6 * r))
    omega = np.stack([_unit(rng, M.dim) for _ in range(4)])
    got = M.pt_ball_exit(M.chart_frame(origin), pt.as_tensor(omega), m0, r).eval()
    for w, t_exit in zip(omega, got, strict=True):
        lo, hi = 0.0, 2 * r + 0.1
        for _ in range(60):
            mid = 0.5 * (lo + hi)
            lo, hi = (mid, hi) if M.dist(m0, M.exp_coords(origin, mid * w)) <= r else (lo, mid)
        assert t_exit == pytest.approx(lo, abs=1e-9)


#: every check, with the capability a space must have for it to be generated (``None``: all)
CHECKS = {
    check_exp_log_round_trip: None,
    check_distance: None,
    check_frame: None,
    check_volume_density: None,
    check_twin_values: None,
    check_twin_gradients: None,
    check_shared_frame: None,
    check_validate: None,
    check_frechet_gradient: None,
    check_pickle: None,
    check_noise_maps: NoiseMap,
    check_gaussian_chart: GaussianChart,
    check_ball_exit: BallExit,
}


def applies(check, M) -> bool:
    capability = CHECKS[check]
    return capability is None or isinstance(M, capability)


def _test(check, spaces):
    @pytest.mark.parametrize("M", spaces, ids=[repr(M) for M in spaces])
    def test(self, M):
        check(M)

    test.__name__ = "test_" + check.__name__.removeprefix("check_")
    test.__doc__ = check.__doc__
    return test


def suite(*manifolds):
    """A test class running every check on each of ``manifolds`` (a check whose optional
    hook a manifold lacks is not generated for it). Assign it to a ``Test*`` name."""
    members = {}
    for check in CHECKS:
        spaces = [M for M in manifolds if applies(check, M)]
        if spaces:
            members["test_" + check.__name__.removeprefix("check_")] = _test(check, spaces)
    return type("ManifoldContract", (), members)
