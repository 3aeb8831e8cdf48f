"""A manifold is one file: a space the package does not ship runs everywhere (issue 22).

``RoundSphere`` below is the round unit sphere S^2 written from scratch in this file
(its maps, frame, volume density, radial law, uniform law and PyTensor twins), under a
name the package has never heard of. With no change to the package it runs the
Fréchet mean, the public domain, both mechanisms (exact and NUTS), ``pm.draw`` and
``pm.logp`` of ``ManifoldLaplace`` and both privacy audits. The shipped ``Sphere(dim=2)``
is the oracle: the same law must give the same numbers (log-densities, normalizers,
Fréchet means, audits) or the same distributions (two-sample KS tests of exact draws).

The last test greps the package: no module outside ``geometry/`` may ask which concrete
class a manifold is (everything that differs between manifolds is a member).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest
from scipy import stats

import pymc_manidp as pmd
from pymc_manidp import geometry
from pymc_manidp.geometry import BallExit, GaussianChart, ManifoldBase, NoiseMap, UniformLaw
from pymc_manidp.geometry.base import check_manifold
from pymc_manidp.privacy.audit import quadrature_audit, sample_test
from tests.geometry import contract

ALPHA = 0.01  # two-sample KS tests: reject equality of the laws at this level
NORTH = np.array([0.0, 0.0, 1.0])
TINY = 1e-300  # keeps square roots differentiable at 0


# --- the manifold, from scratch ------------------------------------------------------------
def _dot(a, b):
    return np.sum(np.asarray(a, float) * np.asarray(b, float), axis=-1)


def _sin_over(t):
    """``sin(t)/t`` with its limit 1 at 0."""
    return np.sinc(np.asarray(t, float) / np.pi)


@dataclass(frozen=True)
class RoundSphere(ManifoldBase):
    """The unit sphere S^2 in R^3, round metric; points ``(..., 3)``."""

    dim = 2
    point_shape = (3,)
    injectivity_radius = np.pi
    curvature_bounds = (1.0, 1.0)

    # the volume density sin(t)/t <= 1 of the exp chart depends on t = |c| only
    exact_sampling = True
    homogeneous = True
    volume_is_radial = True
    log_volume = float(np.log(4.0 * np.pi))
    gaussian_shape = (3,)

    # --- NumPy maps ---------------------------------------------------------------------
    def validate(self, points):
        x = np.asarray(points, dtype=float)
        if x.ndim < 1 or x.shape[-1] != 3:
            raise ValueError(f"points must have shape (..., 3), got {x.shape}")
        # the protocol: name the first bad row, so a user can find it in the data
        rows = x.reshape(-1, 3)
        bad = ~np.all(np.isfinite(rows), axis=-1)
        if bad.any():
            raise ValueError(f"points must be finite: first at row {np.argmax(bad)}")
        r = np.sqrt(_dot(x, x))
        off = np.abs(np.sqrt(_dot(rows, rows)) - 1.0) > 1e-6
        if off.any():
            raise ValueError(f"points are not on the unit sphere: first at row {np.argmax(off)}")
        return x / r[..., None]

    def exp(self, x, v):
        x, v = np.asarray(x, float), np.asarray(v, float)
        t = np.sqrt(_dot(v, v))[..., None]
        return np.cos(t) * x + _sin_over(t) * v

    def log(self, x, y):
        x, y = np.asarray(x, float), np.asarray(y, float)
        theta = self.dist(x, y)[..., None]
        if np.any(np.pi - theta < 1e-8):
            raise ValueError("log is undefined at antipodal points")
        u = y - _dot(x, y)[..., None] * x
        return u / _sin_over(theta)

    def dist(self, x, y):
        x, y = np.asarray(x, float), np.asarray(y, float)
        return np.arctan2(np.linalg.norm(np.cross(x, y), axis=-1), _dot(x, y))

    def inner(self, x, u, v):
        return _dot(u, v)

    def to_tangent(self, x, v):
        x, v = np.asarray(x, float), np.asarray(v, float)
        return v - _dot(x, v)[..., None] * x

    def tangent_basis(self, x):
        """Gram-Schmidt of a fixed axis against ``x``, then ``x`` cross it: ``(..., 2, 3)``."""
        x = np.asarray(x, float)
        axis = np.where(np.abs(x[..., 2:3]) < 0.9, [0.0, 0.0, 1.0], [1.0, 0.0, 0.0])
        b1 = axis - _dot(axis, x)[..., None] * x
        b1 = b1 / np.linalg.norm(b1, axis=-1, keepdims=True)
        return np.stack([b1, np.cross(x, b1)], axis=-2)

    def log_volume_density(self, coords):
        coords = np.asarray(coords, float)
        return np.log(_sin_over(np.sqrt(_dot(coords, coords))))

    def sample_uniform(self, rng, size=()):
        z = rng.standard_normal((*tuple(size), 3))
        return z / np.linalg.norm(z, axis=-1, keepdims=True)

    # --- PyTensor twins ------------------------------------------------------------------
    def pt_exp_frame(self, frame, coords):
        origin = pt.as_tensor_variable(frame["origin"])
        coords = pt.as_tensor_variable(coords)
        v = pt.tensordot(coords, pt.as_tensor_variable(frame["basis"]), axes=[[-1], [0]])
        t = pt.sqrt(pt.sum(coords**2, axis=-1, keepdims=True) + TINY)
        return pt.cos(t) * origin + (pt.sin(t) / t) * v

    def pt_log(self, x, y):
        x, y = pt.as_tensor_variable(x), pt.as_tensor_variable(y)
        c = pt.sum(x * y, axis=-1, keepdims=True)
        u = y - c * x
        s = pt.sqrt(pt.sum(u**2, axis=-1, keepdims=True) + TINY)
        return pt.arctan2(s, c) / s * u

    def pt_dist(self, x, y):
        x, y = pt.as_tensor_variable(x), pt.as_tensor_variable(y)
        d = pt.sqrt(pt.sum((x - y) ** 2, axis=-1) + TINY)
        return 2.0 * pt.arctan2(d, pt.sqrt(pt.sum((x + y) ** 2, axis=-1)))

    def pt_inner(self, x, u, v):
        return pt.sum(pt.as_tensor_variable(u) * v, axis=-1)

    def pt_norm(self, x, v):
        return pt.sqrt(self.pt_inner(x, v, v) + TINY)

    def pt_log_volume_density(self, coords):
        t = pt.sqrt(pt.sum(pt.as_tensor_variable(coords) ** 2, axis=-1) + TINY)
        return pt.log(pt.sin(t) / t)

    def pt_from_gaussian(self, z):
        z = pt.as_tensor_variable(z)
        return z / pt.sqrt(pt.sum(z**2, axis=-1, keepdims=True))

    def pt_to_gaussian(self, x):
        return pt.as_tensor_variable(x)


R2 = RoundSphere()
S2 = pmd.Sphere(dim=2)  # the oracle: the same law
TestRoundSphereContract = contract.suite(R2)  # the contract every shipped space keeps


def _cap(n, radius, seed):
    """``n`` points of a cap of geodesic radius ``radius`` at the north pole."""
    from pymc_manidp.datasets import sphere_cap

    return sphere_cap(n, radius=radius, random_seed=seed)


@pytest.fixture(scope="module")
def data():
    return _cap(30, 0.3, 1)


# --- geometry --------------------------------------------------------------------------------
def test_it_is_a_manifold_and_agrees_with_the_shipped_sphere():
    rng = np.random.default_rng(0)
    x = _cap(50, 1.2, 0)
    y = _cap(50, 1.2, 1)
    assert check_manifold(R2) is R2
    assert R2.max_radius == pytest.approx(np.pi / 4)
    np.testing.assert_allclose(R2.dist(x, y), S2.dist(x, y), atol=1e-13)
    np.testing.assert_allclose(R2.log(x, y), S2.log(x, y), atol=1e-12)
    np.testing.assert_allclose(R2.exp(x, R2.log(x, y)), y, atol=1e-12)
    c = rng.normal(size=(20, 2))
    np.testing.assert_allclose(R2.log_volume_density(c), S2.log_volume_density(c), atol=1e-13)
    # the frame is orthonormal and tangent (any such frame serves the chart)
    b = R2.tangent_basis(x)
    np.testing.assert_allclose(
        np.einsum("nai,nbi->nab", b, b), np.broadcast_to(np.eye(2), (50, 2, 2)), atol=1e-13
    )
    np.testing.assert_allclose(np.einsum("nai,ni->na", b, x), 0.0, atol=1e-13)
    # the generic members derived from the ones above
    assert R2.log_volume_growth == 0.0 and R2.laplace_max_sigma == np.inf
    assert R2.mcmc_seconds_per_point > 0 and not isinstance(R2, BallExit)
    assert isinstance(R2, UniformLaw) and isinstance(R2, GaussianChart)
    assert not isinstance(R2, NoiseMap)


def test_frechet_mean_and_domain(data):
    got = pmd.frechet_mean(R2, data)
    want = pmd.frechet_mean(S2, data)
    assert got.converged
    np.testing.assert_allclose(got.mean, want.mean, atol=1e-9)
    dom = pmd.DataDomain(R2, NORTH, 0.35)
    np.testing.assert_allclose(dom.check(data), data, atol=1e-12)
    assert dom.curvature_factor == pytest.approx(pmd.DataDomain(S2, NORTH, 0.35).curvature_factor)
    with pytest.raises(ValueError, match="r\\*"):
        pmd.DataDomain(R2, NORTH, 0.8)  # r* = pi/4
    # clipping into the ball moves a record along the same geodesic on both
    far = S2.exp_coords(NORTH, np.array([[0.5, 0.0], [0.0, -0.6], [0.1, 0.1]]))
    want = pmd.DataDomain(S2, NORTH, 0.35).check(far, clip=True)
    np.testing.assert_allclose(dom.check(far, clip=True), want, atol=1e-12)


# --- the PyMC distribution ------------------------------------------------------------------
def test_laplace_logp_is_the_spheres():
    """Normalized log-densities (the radial quadrature of Z) agree with Sphere's."""
    eta = S2.exp_coords(NORTH, [0.2, -0.1])
    values = _cap(7, 2.5, 3)
    for sigma in (0.05, 0.4, 2.0):
        got = pm.logp(pmd.ManifoldLaplace.dist(R2, eta, sigma), values).eval()
        want = pm.logp(pmd.ManifoldLaplace.dist(S2, eta, sigma), values).eval()
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10)
    # the uniform law: -log(4 pi) everywhere, as on the sphere
    lp = pm.logp(pmd.ManifoldUniform.dist(R2), values).eval()
    np.testing.assert_allclose(lp, -np.log(4 * np.pi))


def test_kng_and_restricted_laplace_logp_are_the_spheres(data):
    """The unnormalized laws on the public ball: log-densities equal Sphere's, inside
    and outside the ball (-inf), and a model of each has a finite start (the polar
    chart at the Fréchet mean, uncapped: RoundSphere has no closed-form ball exit)."""
    values = _cap(9, 0.5, 5)  # some outside the ball of radius 0.35
    for M in (R2, S2):
        dom = pmd.DataDomain(M, NORTH, 0.35)
        kng = pm.logp(pmd.KNG.dist(M, data, 0.1, dom), values).eval()
        lap = pm.logp(pmd.ManifoldLaplace.dist(M, NORTH, 0.1, domain=dom), values).eval()
        if M is R2:
            got = (kng, lap)
        with pm.Model() as m:
            pmd.KNG("k", M, data, 0.1, dom)
            pmd.ManifoldLaplace("x", M, NORTH, 0.1, domain=dom)
        assert np.isfinite(m.compile_logp()(m.initial_point()))
    inside = S2.dist(NORTH, values) <= 0.35
    assert inside.any() and not inside.all()
    for a, b in zip(got, (kng, lap), strict=True):
        np.testing.assert_allclose(a[inside], b[inside], rtol=1e-10)
        assert np.all(a[~inside] == -np.inf) and np.all(b[~inside] == -np.inf)


def test_exact_draws_follow_the_spheres_law():
    """Distances of ``pm.draw`` to the footpoint: KS against Sphere's (n = 3000, alpha 0.01)."""
    eta = S2.exp_coords(NORTH, [0.3, 0.1])
    sigma = 0.5
    got = pm.draw(pmd.ManifoldLaplace.dist(R2, eta, sigma, size=3000), random_seed=11)
    want = pm.draw(pmd.ManifoldLaplace.dist(S2, eta, sigma, size=3000), random_seed=12)
    assert got.shape == (3000, 3)
    np.testing.assert_allclose(np.linalg.norm(got, axis=-1), 1.0, atol=1e-12)
    assert stats.ks_2samp(S2.dist(eta, got), S2.dist(eta, want)).pvalue > ALPHA
    # directions: the height along a fixed axis, as the law is isotropic around eta
    assert stats.ks_2samp(got[:, 0], want[:, 0]).pvalue > ALPHA
    # and the uniform law's draws: z-coordinates uniform on [-1, 1] (Archimedes)
    u = pm.draw(pmd.ManifoldUniform.dist(R2, size=2000), random_seed=13)
    assert stats.kstest(u[:, 2], stats.uniform(-1, 2).cdf).pvalue > ALPHA


def test_a_model_with_a_random_footpoint_samples():
    """The footpoint is itself random: the global chart is the normalized Gaussian."""
    obs = _cap(5, 0.2, 4)
    with pm.Model() as m:
        eta = pmd.ManifoldUniform("eta", R2)
        pmd.ManifoldLaplace("x", R2, eta, 0.3, observed=obs)
    assert sorted(m.initial_point()) == ["eta_gaussian__"]
    assert np.isfinite(m.compile_logp()(m.initial_point()))


# --- the mechanisms -------------------------------------------------------------------------
MECHS = {
    "laplace": lambda M: pmd.LaplaceMechanism(M, epsilon=1.0, center=NORTH, radius=0.35),
    "kng": lambda M: pmd.KNGMechanism(M, epsilon=1.0, center=NORTH, radius=0.35),
}


@pytest.mark.parametrize("kind", sorted(MECHS))
def test_exact_mechanism_releases_the_spheres_law(kind, data, monkeypatch):
    """Exact draws of both mechanisms follow Sphere's law; one release is pure ε-DP.

    The samplers draw the distance to the envelope's center by the same steps on both
    manifolds (the same generator calls, accepted by the same volume density), and
    only the tangent frame (the directions) differs: with one seed the distances to
    the Fréchet mean agree to rounding, a check far sharper than a two-sample test. A
    wrong volume density or radial support would change the accepted radii.
    """
    # KNG's envelope is centered at a Fréchet mean stopped at a loose absolute tolerance:
    # the same steps need the same descent, so Sphere takes R2's Karcher steps here, not
    # its Newton steps (either center gives the same law)
    monkeypatch.setattr(pmd.Sphere, "frechet_newton", False)
    mech, oracle = MECHS[kind](R2), MECHS[kind](S2)
    assert mech.sigma(len(data)) == pytest.approx(oracle.sigma(len(data)))
    rel = mech.release(data, random_seed=5)
    assert rel.sampler == "exact" and rel.delta == 0.0
    mean = pmd.frechet_mean(S2, data).mean
    got = mech.sample(data, 2000, random_seed=6)
    want = oracle.sample(data, 2000, random_seed=6)
    np.testing.assert_allclose(S2.dist(mean, got), S2.dist(mean, want), atol=1e-9)
    # the directions differ (another frame), the law of the points does not: KS on
    # the first coordinate, n = 2000 each, alpha 0.01
    assert not np.allclose(got, want)
    assert stats.ks_2samp(got[:, 0], want[:, 0]).pvalue > ALPHA


@pytest.mark.parametrize("kind", sorted(MECHS))
def test_nuts_mechanism_releases(kind, data):
    """A NUTS release (nutpie, 2 chains x 800 draws after 300 tuning steps; 300 draws
    give an ESS near 330, below the gate's 400) passes the diagnostics gate and
    lands where the law puts its mass: within 10 sigma of the Fréchet mean (the law's
    distance has mean about 2 sigma)."""
    mech = MECHS[kind](R2)
    rel = mech.release(
        data,
        sampler="nuts",
        settings=pmd.MCMCSettings(draws=800, tune=300, chains=2),
        random_seed=3,
    )
    assert rel.sampler == "nuts" and rel.delta is None
    value = R2.validate(rel.value)
    mean = pmd.frechet_mean(R2, data).mean
    assert R2.dist(mean, value) < 10 * mech.sigma(len(data))


# --- the audits -----------------------------------------------------------------------------
def test_quadrature_audit_matches_the_spheres(data):
    """The same pairs on both: the worst log-ratio agrees within the grid's error."""
    neighbour = data.copy()
    neighbour[0] = S2.exp_coords(NORTH, [0.0, -0.34])
    data = data.copy()
    data[0] = S2.exp_coords(NORTH, [0.0, 0.34])
    pairs = [(data[:10], neighbour[:10])]
    res = quadrature_audit(MECHS["laplace"](R2), pairs, resolution=120, refine=1)
    want = quadrature_audit(MECHS["laplace"](S2), pairs, resolution=120, refine=1)
    assert res.passed, res.summary()
    tol = 3 * (res.grid_error + want.grid_error) + 1e-9
    assert abs(res.worst_log_ratio - want.worst_log_ratio) < tol, (res.summary(), want.summary())


def test_sample_test_passes_the_exact_laplace(data):
    """The black-box histogram test (20,000 draws each, confidence 0.99): no bin
    certifies a privacy loss above epsilon."""
    neighbour = data[:10].copy()
    neighbour[0] = S2.exp_coords(NORTH, [0.0, -0.34])
    res = sample_test(MECHS["laplace"](R2), data[:10], neighbour, size=20_000, random_seed=0)
    assert res.passed and res.epsilon_lb < 1.0, res.summary()


# --- the grep: no module outside geometry/ asks for a concrete manifold class -------------
# every shipped space, from the package's own registry (a new file is covered at once)
_CLASSES = "(" + "|".join(sorted(geometry.MANIFOLD_CLASSES, key=len, reverse=True)) + ")"
_FORBIDDEN = [
    (rf"isinstance\([^)]*\b{_CLASSES}\b", "isinstance of a concrete manifold class"),
    (rf"issubclass\([^)]*\b{_CLASSES}\b", "issubclass of a concrete manifold class"),
    (r"\btype\([^)]*\)\s*(is|==|!=|in)\s*(not\s+)?[A-Z(]", "a manifold's type compared"),
    (r"__name__\s*(==|!=|in\b)(?!\s*[\"']__main__)", "a class name compared"),
    (rf"[\"']{_CLASSES}\d*[\"']\s*[:\]]", "a table keyed by a class name"),
    (rf"(==|!=)\s*[\"']{_CLASSES}[\"']", "a class name compared"),
    (rf"\bcase\s+{_CLASSES}\s*\(", "a match on a concrete manifold class"),
    (r"\.name\s*(==|!=|in\b)\s*[\"'(\[]", "a space's name compared"),
]
_PACKAGE = Path(pmd.__file__).parent
# the public API's table of lazily loaded names: it names the classes, asks nothing
_EXEMPT = {"__init__.py"}


def _violations(root: Path) -> list[str]:
    found = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if rel.startswith("geometry/") or rel in _EXEMPT:
            continue
        for lineno, line in enumerate(path.read_text().splitlines(), 1):
            code = line.split("#", 1)[0]
            for pattern, what in _FORBIDDEN:
                if re.search(pattern, code):
                    found.append(f"{rel}:{lineno}: {what}: {line.strip()}")
    return found


def test_no_module_outside_geometry_asks_for_a_manifold_class():
    found = _violations(_PACKAGE)
    assert not found, "\n".join(found)


def test_the_grep_catches_what_it_forbids(tmp_path):
    planted = {
        "laws/a.py": "if isinstance(M, (Sphere, KendallShape)):\n    pass\n",
        "laws/b.py": "if type(M) is SPD:\n    pass\n",
        "mcmc/c.py": 'COST = {"Sphere": 2e-8, "SPD2": 1e-7}\n',
        "stats/d.py": 'if type(manifold).__name__ == "Euclidean":\n    pass\n',
        "stats/e.py": "if type(M) in EXACT_MANIFOLDS:\n    pass\n",
        "io/g.py": 'if __name__ == "__main__":\n    pass\n',  # a script guard: allowed
        "mechanisms/f.py": "if isinstance(M, Rotations):\n    pass\n",  # a newer space
        "privacy/i.py": 'if type(M).name == "hyperbolic":\n    pass\n',
        "geometry/h.py": "if isinstance(M, Sphere):\n    pass\n",  # allowed there
    }
    for rel, text in planted.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    hits = {v.split(":", 1)[0] for v in _violations(tmp_path)}
    assert hits == {
        "laws/a.py",
        "laws/b.py",
        "mcmc/c.py",
        "stats/d.py",
        "stats/e.py",
        "mechanisms/f.py",
        "privacy/i.py",
    }
