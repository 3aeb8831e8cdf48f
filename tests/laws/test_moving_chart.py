"""The moving polar chart: the non-centred form of a Laplace variable whose footpoint
is random (``laws/charts.py``, ``MovingPolarChart``).

Oracle: on a space whose volume density is radial, the Laplace law at ``x`` puts mass
``1/vol(S^{d-1})`` on each direction's ray, so for every noise ``w`` the chart's
target integrates over the log-radius ``s`` to the standard normal density of ``w``:

.. math:: \\int e^{\\log f(y(w, s)) + \\log|J|(w, s)}\\,ds = \\varphi_m(w).

A chart that drops the volume density, or its Gaussian term, fails this.
"""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
import pytest
from scipy import stats

import pymc_manidp as pmd
from pymc_manidp.laws.charts import MovingPolarChart, NormalizedGaussian, PolarChart
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
    base = M.origin if M.origin is not None else M.sample_uniform(rng, ())
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
        M = type(M)(**{k: getattr(M, k) for k in ("dim", "radius")})
        object.__setattr__(M, "pt_log_volume_density_noise", lambda x, w: pt.zeros_like(w[..., 0]))
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


def test_a_chart_without_the_volume_density_fails_the_ray_oracle():
    M, sigma = SPACES["S2"]
    assert np.all(np.abs(_ray_integrals(M, sigma, drop_volume=True) - 1.0) > 0.01)


@pytest.mark.parametrize("name", ["S2", "SO3", "H2", "Kendall4", "S1"])
def test_forward_is_a_right_inverse_of_backward(name):
    M, sigma = SPACES[name]
    rng = np.random.default_rng(4)
    x = np.stack([_point(M, rng) for _ in range(3)])
    y = np.stack([M.exp_coords(x[i], 0.5 * rng.normal(size=M.dim)) for i in range(3)])
    y[0] = x[0]  # the footpoint itself: sent a little way off, finite
    chart = MovingPolarChart(M)
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
    assert isinstance(m.rvs_to_transforms[theta], MovingPolarChart)
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
