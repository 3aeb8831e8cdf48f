"""The moving charts: the non-centred form of a Laplace variable whose footpoint is
random (``laws/charts.py``: ``MovingTangentChart``, the default, and
``MovingPolarChart``), and the auxiliary radius of the normalized-Gaussian chart.

Oracle: on a space whose volume density is radial, the Laplace law at ``x`` puts mass
``1/vol(S^{d-1})`` on each direction's ray, so for every noise ``w`` the chart's
target integrates over the log-radius ``s`` to the standard normal density of ``w``:

.. math:: \\int e^{\\log f(y(w, s)) + \\log|J|(w, s)}\\,ds = \\varphi_m(w).

A chart that drops the volume density, or its Gaussian term, fails this. The tangent
chart has no log-radius: its target integrated over the tangent part of ``w`` (in polar
coordinates, the law being radial) is the standard normal density of the removed part.
The normalized-Gaussian chart's target integrates to the manifold's volume whatever the
auxiliary radius's extra degrees of freedom.
"""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
import pytest
from scipy import stats

import pymc_manidp as pmd
from pymc_manidp.geometry.capabilities import Origin
from pymc_manidp.laws.charts import (
    MovingPolarChart,
    MovingTangentChart,
    NormalizedGaussian,
    PolarChart,
    log_unit_sphere_volume,
)
from pymc_manidp.laws.distributions import laplace_logp

SPACES = {
    "S2": (pmd.Sphere(dim=2), 0.5),
    "S1": (pmd.Sphere(dim=1), 0.4),
    "Kendall4": (pmd.KendallShape(k_landmarks=4), 0.3),
    "SO3": (pmd.Rotations(), 0.4),
    "H2": (pmd.Hyperbolic(dim=2), 0.3),
    "R2": (pmd.Euclidean(dim=2), 1.5),
}
S_GRID = np.linspace(-25.0, 6.0, 6001)


def _point(M, rng):
    base = M.origin if isinstance(M, Origin) else M.sample_uniform(rng, ())
    return M.exp_coords(base, 0.6 * rng.normal(size=M.dim))


def _target(M, chart, x, sigma):
    """Compiled ``(value) -> log f(y) + log|J|``, value ``(k, m + 1)`` (or ``(k, m)``)."""
    v = pt.matrix("v")
    y = chart.backward(v, None, None, x, sigma)
    out = laplace_logp(M, y, x, sigma) + chart.log_jac_det(v, None, None, x, sigma)
    return pytensor.function([v], out, mode="FAST_COMPILE")


def _ray_integrals(M, sigma, drop_volume=False, n_dirs=4, seed=0):
    """``int exp(target) ds / phi_m(w)`` for a few noises ``w`` (``d = 1``: the
    integral over the tangent component, with the removed one fixed)."""
    rng = np.random.default_rng(seed)
    x = _point(M, rng)
    chart = MovingPolarChart(M)
    if drop_volume:  # the deliberately wrong chart: no volume density
        M = _drop_volume(M)
        chart = MovingPolarChart(M)
    f = _target(M, chart, x, sigma)
    m = int(np.prod(M.noise_shape))
    ratios = []
    for _ in range(n_dirs):
        w = rng.normal(size=m)
        if M.dim == 1:
            # w = a e + b e_perp: integrate over a; the chart's removed part is b
            tangent = M.pt_log_noise(x, M.pt_exp_noise(x, 1e-3 * w.reshape(M.noise_shape)))
            e = tangent.eval().ravel()
            e /= np.linalg.norm(e)
            perp = w - (w @ e) * e
            a = np.linspace(-40.0, 40.0, 8001)  # h(a) -> T: the whole circle
            vals = np.exp(f(perp[None, :] + a[:, None] * e[None, :]))
            integral = np.trapezoid(vals, a)
            ratios.append(integral / stats.norm.pdf(np.linalg.norm(perp)) ** (m - 1))
            continue
        vals = np.exp(f(np.column_stack([np.tile(w, (len(S_GRID), 1)), S_GRID])))
        ratios.append(np.trapezoid(vals, S_GRID) / np.prod(stats.norm.pdf(w)))
    return np.array(ratios)


@pytest.mark.parametrize("name", list(SPACES))
def test_each_ray_carries_its_share_of_the_law(name):
    M, sigma = SPACES[name]
    np.testing.assert_allclose(_ray_integrals(M, sigma), 1.0, rtol=2e-4)


def _drop_volume(M):
    """The deliberately wrong space: its noise map forgets the volume density."""
    M = type(M)(**{k: getattr(M, k) for k in ("dim", "radius")})
    object.__setattr__(M, "pt_log_volume_density_noise", lambda x, w: pt.zeros_like(w[..., 0]))
    return M


def _plane_integrals(M, sigma, drop_volume=False, n_dirs=3, seed=1):
    """For a few noises ``w`` = ``perp + a e`` (``e`` a unit tangent direction, ``perp``
    the part the noise map removes): ``vol(S^{d-1}) int_0^inf a^{d-1} exp(target) da``
    over the standard normal density of ``perp``, for the tangent chart."""
    rng = np.random.default_rng(seed)
    x = _point(M, rng)
    if drop_volume:
        M = _drop_volume(M)
    chart = MovingTangentChart(M)
    f = _target(M, chart, x, sigma)
    m, d = int(np.prod(M.noise_shape)), M.dim
    # up to where the tail is below 1e-10 (h'(a) ~ 4 e^{-2 sigma a/T} on compact spaces,
    # whose cap T is then met in floating point)
    big_t = M.injectivity_radius
    a = np.linspace(0.0, (12.0 * big_t if np.isfinite(big_t) else 60.0) / sigma, 60001)
    ratios = []
    for _ in range(n_dirs):
        w = rng.normal(size=m)
        tangent = M.pt_log_noise(x, M.pt_exp_noise(x, 1e-3 * w.reshape(M.noise_shape)))
        e = tangent.eval().ravel()
        e /= np.linalg.norm(e)
        perp = w - (w @ e) * e
        vals = np.exp(f(perp[None, :] + a[:, None] * e[None, :]))
        integral = np.exp(log_unit_sphere_volume(d)) * np.trapezoid(a ** (d - 1) * vals, a)
        phi = np.exp(-0.5 * perp @ perp - 0.5 * (m - d) * np.log(2 * np.pi))
        ratios.append(integral / phi)
    return np.array(ratios)


@pytest.mark.parametrize("name", list(SPACES))
def test_each_tangent_plane_carries_the_law(name):
    M, sigma = SPACES[name]
    np.testing.assert_allclose(_plane_integrals(M, sigma), 1.0, rtol=2e-4)


def test_a_tangent_chart_without_the_volume_density_fails_the_plane_oracle():
    M, sigma = SPACES["S2"]
    assert np.all(np.abs(_plane_integrals(M, sigma, drop_volume=True) - 1.0) > 0.01)


@pytest.mark.parametrize("name", ["S2", "Kendall4", "SO3"])
@pytest.mark.parametrize("extra_dof", [0.0, 8.0])
def test_the_normalized_gaussian_target_has_the_manifolds_volume(name, extra_dof):
    """``vol(S^{D-1}) int_0^inf r^{D-1} exp(log|J|(r e)) dr = vol(M)`` along any ``e``:
    the uniform law's target integrates to one, whatever the auxiliary radius."""
    M, _ = SPACES[name]
    chart = NormalizedGaussian(M, extra_dof=extra_dof)
    shape = tuple(M.gaussian_shape)
    size = int(np.prod(shape))
    e = np.random.default_rng(2).normal(size=size)
    e /= np.linalg.norm(e)
    r = np.linspace(1e-9, 30.0, 30001)
    z = pt.as_tensor((r[:, None] * e[None, :]).reshape(-1, *shape))
    log_jac = chart.log_jac_det(z).eval() - float(M.log_volume)
    mass = np.exp(log_unit_sphere_volume(size)) * np.trapezoid(r ** (size - 1) * np.exp(log_jac), r)
    np.testing.assert_allclose(mass, 1.0, rtol=1e-6)
    # the deliberately wrong chart: the standard normal's constant with extra_dof = 8
    if extra_dof:
        wrong = NormalizedGaussian(M, extra_dof=0.0)
        wrong_jac = wrong.log_jac_det(z).eval() - float(M.log_volume) + extra_dof * np.log(r)
        wrong_mass = np.exp(log_unit_sphere_volume(size)) * np.trapezoid(
            r ** (size - 1) * np.exp(wrong_jac), r
        )
        assert abs(wrong_mass - 1.0) > 1.0


def test_extra_dof_must_be_a_number_at_least_zero():
    with pytest.raises(ValueError, match="extra_dof"):
        NormalizedGaussian(pmd.Sphere(dim=2), extra_dof=-1.0)


def test_a_chart_without_the_volume_density_fails_the_ray_oracle():
    M, sigma = SPACES["S2"]
    assert np.all(np.abs(_ray_integrals(M, sigma, drop_volume=True) - 1.0) > 0.01)


@pytest.mark.parametrize("chart_type", [MovingTangentChart, MovingPolarChart])
@pytest.mark.parametrize("name", ["S2", "SO3", "H2", "Kendall4", "S1"])
def test_forward_is_a_right_inverse_of_backward(name, chart_type):
    M, sigma = SPACES[name]
    rng = np.random.default_rng(4)
    x = np.stack([_point(M, rng) for _ in range(3)])
    y = np.stack([M.exp_coords(x[i], 0.5 * rng.normal(size=M.dim)) for i in range(3)])
    y[0] = x[0]  # the footpoint itself: sent a little way off, finite
    chart = chart_type(M)
    u = chart.forward(pt.as_tensor(y), None, None, pt.as_tensor(x), sigma)
    back = chart.backward(u, None, None, pt.as_tensor(x), sigma).eval()
    assert np.all(np.isfinite(u.eval()))
    np.testing.assert_allclose(M.dist(back[1:], y[1:]), 0.0, atol=1e-8)
    assert M.dist(back[0], y[0]) < 1e-5 * sigma


def test_the_chart_follows_a_random_footpoint_and_only_then():
    S = pmd.Sphere(dim=2)
    with pm.Model() as m:
        mu = pmd.ManifoldUniform("mu", S)
        theta = pmd.ManifoldLaplace("theta", S, mu, 0.2, size=3)
        fixed = pmd.ManifoldLaplace("fixed", S, np.array([0.0, 0.0, 1.0]), 0.2)
    assert isinstance(m.rvs_to_transforms[theta], MovingTangentChart)
    assert isinstance(m.rvs_to_transforms[fixed], PolarChart)
    assert isinstance(m.rvs_to_transforms[mu], NormalizedGaussian)
    # the start is a finite point of the sphere, a little way from mu's start
    ip = m.initial_point()
    assert np.all(np.isfinite(ip["theta_moving__"]))
    # the centred form stays available
    with pm.Model() as c:
        mu = pmd.ManifoldUniform("mu", S)
        theta = pmd.ManifoldLaplace("theta", S, mu, 0.2, default_transform=NormalizedGaussian(S))
    assert isinstance(c.rvs_to_transforms[theta], NormalizedGaussian)
