"""NUTS for the regression KNG (issue 41 item 3): the law on TM in a chart, its Jacobian
with respect to the Sasaki volume, the gate and the refusals before the charge.

Oracles: the PyTensor gradient against the NumPy one (which finite differences of E
check in tests/stats/test_regression.py); the chart's Jacobian against a
finite-difference Gram matrix of the Sasaki metric, written here from the embedding
(the Levi-Civita connection of a sphere or hyperboloid is the tangent projection of
the ambient derivative); in ``Euclidean`` ``|grad E|/sigma ~ Gamma(2d, 1)`` exactly; on
S^2 the quadrature of the density of tests/mechanisms/test_regression_mechanism.py.
"""

from __future__ import annotations

import math

import numpy as np
import pytensor
import pytensor.tensor as pt
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats

import pymc_manidp as pmd
from pymc_manidp.geometry.jacobi import transport
from pymc_manidp.geometry.jacobi_twins import pt_regression_gradient, pt_tm_chart
from pymc_manidp.laws.regression import regression_chart_logp
from pymc_manidp.mcmc import MCMCSettings
from pymc_manidp.privacy import PrivacyBudget
from pymc_manidp.stats.regression import regression_gradient
from tests.mechanisms.test_regression_mechanism import (
    ADVERSARIAL,
    ALPHA,
    flat_mechanism,
    flat_problem,
    gradient_norms,
    sphere_law_marginals,
)

FAST = "FAST_COMPILE"  # the graphs are tiny: no C compilation (the contract suite's mode)
S2 = pmd.Sphere(dim=2)
NORTH = np.array([0.0, 0.0, 1.0])
TWINS = [
    (pmd.Euclidean(dim=2), np.array([0.3, -0.2])),
    (pmd.Sphere(dim=1), np.array([1.0, 0.0])),
    (S2, NORTH),
    (pmd.Sphere(dim=3, radius=2.0), np.array([0.0, 0.0, 0.0, 2.0])),
    (pmd.Hyperbolic(dim=2), np.array([math.cosh(0.5), math.sinh(0.5), 0.0])),
]


def _ambient_metric(M, u, w):
    """The ambient product the embedding's metric is (Minkowski on the hyperboloid)."""
    if isinstance(M, pmd.Hyperbolic):
        return -u[0] * w[0] + u[1:] @ w[1:]
    return u @ w


def _project(M, p, w):
    """The tangent part at ``p`` of an ambient vector: the Levi-Civita derivative of a
    vector field along a curve is the projection of its ambient derivative."""
    if isinstance(M, pmd.Hyperbolic):
        return w + _ambient_metric(M, w, p) * p
    if isinstance(M, pmd.Sphere):
        return w - (w @ p) * p / M.radius**2
    return w


def _chart_fn(M, m):
    a, b = pt.dvector("a"), pt.dvector("b")
    p, v = pt_tm_chart(M, m, M.tangent_basis(m), a, b)
    f = pytensor.function([a, b], [p, v], mode=FAST)
    return lambda a_, b_: [np.asarray(t) for t in f(a_, b_)]


@pytest.mark.parametrize(("M", "m"), TWINS, ids=lambda a: str(a))
def test_twin_gradient_and_chart_match_numpy(M, m):
    # the chart is Exp_m and the transport of jacobi.py, and the PyTensor gradient is
    # regression_gradient's, at random (a, b) and at b = 0 (no direction of v), where the
    # gradient of its norm must be finite too
    rng = np.random.default_rng(7)
    d = M.dim
    E = M.tangent_basis(m)
    x = rng.uniform(-1, 1, 9)
    y = M.exp(m, 0.3 * rng.normal(size=(9, d)) @ E)
    a_t, b_t = pt.dvector("a"), pt.dvector("b")
    p_t, v_t = pt_tm_chart(M, m, E, a_t, b_t)
    gp_t, gv_t = pt_regression_gradient(M, p_t, v_t, x, y)
    norm = pt.sqrt(M.pt_inner(p_t, gp_t, gp_t) + M.pt_inner(p_t, gv_t, gv_t))
    f = pytensor.function([a_t, b_t], [p_t, v_t, gp_t, gv_t, *pt.grad(norm, [a_t, b_t])], mode=FAST)
    for b_scale in (0.4, 0.0):
        a, b = 0.4 * rng.normal(size=d), b_scale * rng.normal(size=d)
        p, v, gp, gv, da, db = f(a, b)
        A = a @ E
        np.testing.assert_allclose(p, M.exp(m, A), atol=1e-13)
        np.testing.assert_allclose(v, transport(M, m, A, b @ E), atol=1e-13)
        _, gp0, gv0 = regression_gradient(M, p, v, x, y)
        np.testing.assert_allclose(gp, gp0, atol=1e-13)
        np.testing.assert_allclose(gv, gv0, atol=1e-13)
        assert np.isfinite(da).all() and np.isfinite(db).all()


@pytest.mark.parametrize(("M", "m"), TWINS[1:], ids=lambda a: str(a))
def test_tm_chart_jacobian_is_the_exp_chart_volume_density(M, m):
    # The Sasaki metric in the chart (a, b) by central differences: for a direction e of
    # (a, b), |(dp, Dv)|^2 = |dp|^2 + |P_p dv|^2 (P_p the tangent projection). The Gram
    # matrix has the fibre block I (the transported frame is orthonormal) and
    # sqrt det = J(a), the exp chart's volume density (docs/regression.md)
    rng = np.random.default_rng(3)
    d = M.dim
    chart = _chart_fn(M, m)
    h = 1e-6
    for _ in range(3):
        a, b = 0.7 * rng.normal(size=d), 0.5 * rng.normal(size=d)
        p, _ = chart(a, b)
        cols = []
        for k in range(2 * d):
            e = np.zeros(2 * d)
            e[k] = h
            (p1, v1), (p0, v0) = chart(a + e[:d], b + e[d:]), chart(a - e[:d], b - e[d:])
            cols.append(((p1 - p0) / (2 * h), _project(M, p, (v1 - v0) / (2 * h))))
        G = np.array(
            [
                [_ambient_metric(M, u[0], w[0]) + _ambient_metric(M, u[1], w[1]) for w in cols]
                for u in cols
            ]
        )
        np.testing.assert_allclose(G[d:, d:], np.eye(d), atol=1e-7)
        want = math.exp(float(M.log_volume_density(a)))
        assert math.sqrt(np.linalg.det(G)) == pytest.approx(want, rel=1e-6)


@pytest.mark.parametrize(("M", "m"), TWINS, ids=lambda a: str(a))
def test_chart_logp_is_the_law_times_the_jacobians(M, m):
    # the model's log-density in z: -|grad E|/sigma (the library's NumPy gradient) plus
    # log J(a) plus the two tanh caps' log-Jacobians, each written here
    rng = np.random.default_rng(11)
    d = M.dim
    E = M.tangent_basis(m)
    x = rng.uniform(-1, 1, 6)
    y = M.exp(m, 0.2 * rng.normal(size=(6, d)) @ E)
    R, V, sigma = 0.8, 0.6, 0.37
    z = pt.dvector("z")
    logp, p, v, _ = regression_chart_logp(M, m, R, V, z, x, y, sigma)
    f = pytensor.function([z], [logp, p, v], mode=FAST)

    def capped(w, cap):
        s = np.linalg.norm(w)
        c = cap * np.tanh(s / cap) / s
        return c * w, math.log(1 - math.tanh(s / cap) ** 2) + (d - 1) * math.log(c)

    for _ in range(3):
        zz = rng.normal(size=2 * d)
        got, pp, vv = f(zz)
        a, ja = capped(zz[:d], R)
        b, jb = capped(zz[d:], V)
        np.testing.assert_allclose(pp, M.exp(m, a @ E), atol=1e-13)
        _, gp, gv = regression_gradient(M, pp, vv, x, y)
        g = math.sqrt(float(M.inner(pp, gp, gp) + M.inner(pp, gv, gv)))
        want = -g / sigma + float(M.log_volume_density(a)) + ja + jb
        assert got == pytest.approx(want, rel=1e-10)
        assert float(np.sqrt(M.inner(pp, vv, vv))) == pytest.approx(np.linalg.norm(b))


def sphere_mechanism():
    return pmd.RegressionKNGMechanism(
        S2, epsilon=2.0, center=NORTH, radius=0.5, covariate_bound=1.0, slope_bound=0.5,
        footpoint_radius=0.5,
    )  # fmt: skip


def test_samplers_name_nuts_only_where_the_gradient_has_a_twin():
    assert sphere_mechanism().samplers == ("exact", "nuts")
    assert flat_mechanism().samplers == ("exact", "nuts")
    spd = pmd.RegressionKNGMechanism(
        pmd.SPD(k=2), epsilon=1.0, center=np.eye(2), radius=0.3, covariate_bound=1.0,
        slope_bound=0.3, footpoint_radius=0.3,
    )  # fmt: skip
    assert spd.samplers == ("exact",)


@pytest.mark.parametrize(
    ("M", "center"),
    [
        (pmd.SPD(k=2), np.eye(2)),
        (pmd.Rotations(), np.eye(3)),
        (pmd.KendallShape(k_landmarks=4), None),
    ],
    ids=["SPD", "SO3", "Kendall"],
)
def test_nuts_on_a_space_without_a_twin_is_refused_before_the_charge(M, center):
    center = M.validate(M.generic_point) if center is None else center
    mech = pmd.RegressionKNGMechanism(
        M, epsilon=1.0, center=center, radius=0.1, covariate_bound=1.0, slope_bound=0.1,
        footpoint_radius=0.1,
    )  # fmt: skip
    x = np.linspace(-1, 1, 6)
    y = np.broadcast_to(M.validate(center), (6, *M.point_shape)).copy()
    budget = PrivacyBudget(3.0)
    with pytest.raises(ValueError, match=r"no 'nuts' sampler.*available samplers for it are exact"):
        mech.release(x, y, sampler="nuts", budget=budget, delta=1e-6)
    assert budget.spent.epsilon == 0 and budget.entries == []
    with pytest.raises(ValueError, match="no 'nuts' sampler"):
        mech.model(x, y)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"sampler": "metropolis"}, r"no 'metropolis' sampler.*exact, nuts"),
        ({"sampler": "nuts"}, "no proved delta"),
        ({"estimate_delta": True}, "estimate_delta=True is for MCMC"),
        ({"sampler": "nuts", "delta": 1e-6, "settings": MCMCSettings(draws=10**9)}, "trace"),
        ({"sampler": "nuts", "delta": 2.0}, "delta must be in"),
        ({"sampler": "nuts", "delta": 1e-6, "skip_diagnostics": "yes"}, "skip_diagnostics"),
    ],
)
def test_nuts_premises_are_refused_before_the_charge(kwargs, match):
    x, y = flat_problem()
    budget = PrivacyBudget(3.0)
    with pytest.raises((ValueError, TypeError), match=match):
        flat_mechanism().release(x, y, budget=budget, **kwargs)
    assert budget.spent.epsilon == 0 and budget.entries == []


def test_nuts_time_limit_is_checked_before_the_charge():
    x, y = flat_problem()
    budget = PrivacyBudget(3.0)
    with pmd.options.context(mcmc_max_seconds=1e-9):
        with pytest.raises(ValueError, match="would take at least"):
            flat_mechanism().release(x, y, sampler="nuts", budget=budget, delta=1e-6)
    assert budget.spent.epsilon == 0 and budget.entries == []


@given(
    sampler=st.sampled_from(["nuts", "NUTS", "metropolis", "", None, 1, True]),
    delta=st.one_of(st.none(), ADVERSARIAL),
    flags=st.sampled_from([True, False, 0, 1, "True", None, np.bool_(True)]),
)
def test_nuts_release_contract(sampler, delta, flags):
    # every combination is refused before the charge (TypeError/ValueError, the budget
    # untouched): a run that every other check lets through meets a time limit of 1e-9 s,
    # which is checked before the charge too, so nothing ever samples here
    x, y = flat_problem()
    budget = PrivacyBudget(3.0)
    with pmd.options.context(mcmc_max_seconds=1e-9):
        with pytest.raises((TypeError, ValueError)):
            flat_mechanism().release(
                x, y, sampler=sampler, delta=delta, budget=budget,
                skip_diagnostics=flags, estimate_delta=flags,
            )  # fmt: skip
    assert budget.spent.epsilon == 0 and budget.entries == []


def thinned(rel, every=4):
    """The run's draws ``(m, 2, *point_shape)``, every ``every``-th of each chain (NUTS
    draws are autocorrelated; the KS tests below assume independent ones)."""
    post = np.asarray(rel.diagnostics.posterior["release"].values)[:, ::every]
    return post.reshape(-1, *post.shape[2:])


@pytest.mark.slow  # NUTS: ~40 CPU-s to compile the model cold, ~5 s to sample
def test_flat_nuts_release_passes_the_gamma_ks_test_and_catches_a_wrong_sigma():
    # the must-hold oracle: in Euclidean |grad E(theta~)|/sigma ~ Gamma(2d, 1) (d = 2),
    # 4 chains x 1000 draws thinned to 1,000, seeded, alpha = 0.01; sigma x 1.2 caught.
    # The release is gated, charged with its assumed delta and recorded as MCMC
    x, y = flat_problem()
    mech = flat_mechanism()
    budget = PrivacyBudget(3.0, delta=1e-3)
    rel = mech.release(x, y, sampler="nuts", random_seed=5, budget=budget, delta=1e-6)
    assert rel.delta is None and rel.sampler == "nuts" and rel.value.shape == (2, 2)
    assert budget.spent.epsilon == 1.0 and budget.spent.delta == pytest.approx(1e-6)
    assert any("assumption" in note for note in rel.notes)
    assert "failed_checks" not in rel.sampler_info
    g = gradient_norms(thinned(rel), x, y)
    sigma = mech.sigma(len(x))
    assert stats.kstest(g / sigma, stats.gamma(4).cdf).pvalue > ALPHA
    assert stats.kstest(g / (1.2 * sigma), stats.gamma(4).cdf).pvalue < ALPHA


@pytest.mark.slow  # NUTS: ~60 CPU-s to compile the model cold, ~10 s to sample
def test_sphere_nuts_release_matches_the_quadrature_of_its_density():
    # the same data and quadrature oracle as the exact sampler's test on TS^2 (28^4
    # midpoint rule of the density, written apart from the package): the marginals of
    # rho(m, p) and |v| over 4 x 2000 draws thinned to 2,000 pass at alpha = 0.01, and
    # sigma x 1.3 is caught (with 1,000 draws it was not: p = 0.02; the exact sampler's
    # test uses 2,000 too)
    x = np.linspace(-1, 1, 10)
    rng = np.random.default_rng(3)
    noise = np.c_[rng.normal(0, 0.05, (10, 2)), np.zeros(10)]
    y = S2.exp(NORTH, x[:, None] * np.array([0.3, 0, 0]) + noise)
    mech = sphere_mechanism()
    rel = mech.release(x, y, sampler="nuts", random_seed=2, settings=MCMCSettings(draws=2000))
    draws = thinned(rel)
    sigma = mech.sigma(len(x))
    rho = S2.dist(NORTH, draws[:, 0])
    speed = np.linalg.norm(draws[:, 1], axis=1)
    assert np.all(rho <= 0.5) and np.all(speed <= 0.5)
    assert np.allclose(np.sum(draws[:, 0] * draws[:, 1], axis=1), 0, atol=1e-12)
    cdf_t, cdf_s = sphere_law_marginals(x, y, sigma, 0.5, 0.5)
    assert stats.kstest(rho, cdf_t).pvalue > ALPHA
    assert stats.kstest(speed, cdf_s).pvalue > ALPHA
    wrong_t, wrong_s = sphere_law_marginals(x, y, 1.3 * sigma, 0.5, 0.5)
    assert min(stats.kstest(rho, wrong_t).pvalue, stats.kstest(speed, wrong_s).pvalue) < ALPHA


@pytest.mark.slow  # the coupling estimate: 60-120 s (200 coupled pairs) with the model warm
def test_nuts_release_with_estimated_delta_is_charged_as_estimated():
    # as the mean's: the value is the coupled kernel's draw, its delta-hat is recorded for
    # the curator (labelled an estimate) and the budget's entry has the basis "estimated"
    x, y = flat_problem()
    budget = PrivacyBudget(3.0)
    rel = flat_mechanism().release(
        x, y, sampler="nuts", random_seed=3, budget=budget, estimate_delta=True
    )
    assert rel.delta is None and "ESTIMATE" in rel.delta_estimate["label"]
    assert 0.0 <= rel.delta_estimate["delta_hat"] <= 1.0
    assert "delta_estimate" not in rel.public()
    entry = budget.entries[-1]
    assert entry["delta_basis"] == "estimated" and entry["status"] == "released"
    assert budget.spent.epsilon == 1.0


@pytest.mark.slow  # NUTS on H^2: ~60-140 s to compile the model cold; exact draws ~30 s
def test_hyperbolic_nuts_release_agrees_with_the_exact_sampler():
    # two-sample KS tests (alpha = 0.01) of rho(m, p) and |v| between the NUTS run
    # (4 x 3000 draws thinned by 6 to 2,000; the distance's bulk ESS was ~3,000) and
    # 3,000 exact draws (rejection from the Sasaki uniform law, proved); the exact law at
    # sigma x 1.3 is told apart
    H, c = pmd.Hyperbolic(dim=2), np.array([1.0, 0.0, 0.0])
    x = np.linspace(-1, 1, 20)
    rng = np.random.default_rng(0)
    E = H.tangent_basis(c)
    y = H.exp(c, (np.outer(x, [0.3, 0.1]) + rng.normal(0, 0.05, (20, 2))) @ E)
    mech = pmd.RegressionKNGMechanism(
        H, epsilon=1.0, center=c, radius=0.5, covariate_bound=1.0, slope_bound=0.5,
        footpoint_radius=0.5,
    )  # fmt: skip
    rel = mech.release(x, y, sampler="nuts", random_seed=3, settings=MCMCSettings(draws=3000))
    draws = thinned(rel, every=6)
    sigma = mech.sigma(len(x))
    exact, _ = mech.exact_draws_xy(x, y, sigma, 3000, np.random.default_rng(13))
    wrong, _ = mech.exact_draws_xy(x, y, 1.3 * sigma, 3000, np.random.default_rng(14))

    def marginals(d):
        return H.dist(c, d[:, 0]), np.sqrt(H.inner(d[:, 0], d[:, 1], d[:, 1]))

    ps = [
        stats.ks_2samp(a, b).pvalue for a, b in zip(marginals(draws), marginals(exact), strict=True)
    ]
    assert min(ps) > ALPHA, ps
    bad = [
        stats.ks_2samp(a, b).pvalue for a, b in zip(marginals(draws), marginals(wrong), strict=True)
    ]
    assert min(bad) < ALPHA, bad
