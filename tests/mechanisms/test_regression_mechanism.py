"""KNG for geodesic regression (issue 41 item 2-3): the privacy map, its premises, the
exact flat sampler and its law.

Oracle of the law (docs/regression.md, "The flat case"): in ``Euclidean`` the gradient
is ``(G (x) I)(theta - theta_hat)``, ``theta_hat`` the least-squares fit (computed here
with ``numpy.linalg.lstsq``), so ``|grad E(theta~)|/sigma ~ Gamma(2d, 1)`` exactly.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats

import pymc_manidp as pmd
from pymc_manidp.privacy import PrivacyBudget
from pymc_manidp.stats.regression import regression_gradient

ALPHA = 0.01


def flat_problem(n=30, d=2, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.uniform(-0.5, 2.0, n)  # not centred: footpoint and slope coupled
    y = 0.2 + np.outer(x, np.linspace(0.1, 0.2, d)) + rng.normal(0, 0.1, (n, d))
    y = np.clip(y, -0.6, 0.6)
    return x, y


def gradient_norms(draws, x, y):
    """``|(G (x) I)(theta - theta_hat)|`` for draws ``(size, 2, d)``, written here."""
    design = np.stack([np.ones_like(x), x], axis=1)
    theta_hat, *_ = np.linalg.lstsq(design, y, rcond=None)
    G = design.T @ design / len(x)
    grad = np.einsum("ab,mbd->mad", G, draws - theta_hat)
    return np.sqrt(np.sum(grad**2, axis=(1, 2)))


def flat_mechanism(d=2, epsilon=1.0):
    return pmd.RegressionKNGMechanism(
        pmd.Euclidean(dim=d),
        epsilon=epsilon,
        center=np.zeros(d),
        radius=1.0,
        covariate_bound=2.0,
        slope_bound=1e3,  # the law's mass beyond it is below e^-100: unrestricted
    )


def test_flat_sigma_is_twice_the_joint_sensitivity_over_epsilon():
    mech = flat_mechanism()
    n = 30
    dp, dv = mech.sensitivities(n)
    assert (dp, dv) == pytest.approx((2 * 1.0 / n, 2 * 1.0 * 2.0 / n))
    assert mech.sigma(n) == pytest.approx(2 * math.hypot(dp, dv) / 1.0)


@pytest.mark.parametrize("d", [1, 2])
def test_flat_exact_law_passes_the_gamma_ks_test_and_catches_a_wrong_sigma(d):
    # seeded, 2,000 draws, alpha = 0.01: |grad E|/sigma ~ Gamma(2d, 1)
    x, y = flat_problem(d=d)
    mech = flat_mechanism(d=d)
    sigma = mech.sigma(len(x))
    draws = mech.sample(x, y, 2000, random_seed=41)
    g = gradient_norms(draws, x, y)
    assert stats.kstest(g / sigma, stats.gamma(2 * d).cdf).pvalue > ALPHA
    assert stats.kstest(g / (1.2 * sigma), stats.gamma(2 * d).cdf).pvalue < ALPHA
    # the right law in the wrong dimension is caught too (a Gamma(d) radius)
    assert stats.kstest(g / sigma, stats.gamma(d).cdf).pvalue < ALPHA


def test_flat_gradient_is_the_librarys_gradient():
    # the oracle's gradient is the one the law is defined by
    x, y = flat_problem()
    draws = flat_mechanism().sample(x, y, 5, random_seed=1)
    M = pmd.Euclidean(dim=2)
    for th, g in zip(draws, gradient_norms(draws, x, y), strict=True):
        _, gp, gv = regression_gradient(M, th[0], th[1], x, y)
        assert math.hypot(np.linalg.norm(gp), np.linalg.norm(gv)) == pytest.approx(g, rel=1e-10)


def test_restricted_flat_law_stays_in_its_domain():
    x, y = flat_problem()
    mech = pmd.RegressionKNGMechanism(
        pmd.Euclidean(dim=2), epsilon=0.5, center=np.zeros(2), radius=1.0,
        covariate_bound=2.0, slope_bound=0.4, footpoint_radius=0.5,
    )  # fmt: skip
    draws = mech.sample(x, y, 300, random_seed=2)
    assert np.all(np.linalg.norm(draws[:, 1], axis=1) <= 0.4)
    assert np.all(np.linalg.norm(draws[:, 0], axis=1) <= 0.5)


def test_release_records_a_pure_dp_value_and_charges_once():
    x, y = flat_problem()
    mech = flat_mechanism()
    budget = PrivacyBudget(3.0)
    rel = mech.release(x, y, random_seed=7, budget=budget)
    assert rel.value.shape == (2, 2)
    assert rel.delta == 0.0 and rel.n == len(x)
    assert rel.sigma == pytest.approx(mech.sigma(len(x)))
    assert any("covariates are public" in note for note in rel.notes)
    assert budget.spent.epsilon == 1.0 and len(budget.entries) == 1
    again = mech.release(x, y, random_seed=7)
    np.testing.assert_array_equal(again.value, rel.value)


@pytest.mark.parametrize(
    ("x", "y", "match"),
    [
        (np.linspace(-3, 3, 30), None, "exceeds the public covariate bound"),
        (np.linspace(-1, 1, 29), None, "one row per record"),
        (np.ones(30), None, "single value"),
        (None, np.zeros((30, 3)), "trailing shape"),
    ],
)
def test_public_refusals_come_before_the_charge(x, y, match):
    x0, y0 = flat_problem()
    x = x0 if x is None else x
    y = y0 if y is None else y
    budget = PrivacyBudget(3.0)
    with pytest.raises(ValueError, match=match):
        flat_mechanism().release(x, y, budget=budget)
    assert budget.spent.epsilon == 0 and budget.entries == []


def test_the_base_entry_points_that_take_points_only_say_what_to_call():
    _, y = flat_problem()
    mech = flat_mechanism()
    with pytest.raises(NotImplementedError, match="release\\(x, y\\)"):
        mech.release_many([y, y])


def test_responses_outside_the_ball_are_refused_after_the_charge():
    x, y = flat_problem()
    y = y.copy()
    y[3] = [5.0, 0.0]
    budget = PrivacyBudget(3.0)
    with pytest.raises(ValueError, match="outside"):
        flat_mechanism().release(x, y, budget=budget)
    assert budget.spent.epsilon == 1.0  # the data were read: the charge stands


S2 = pmd.Sphere(dim=2)
NORTH = np.array([0.0, 0.0, 1.0])


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"footpoint_radius": None}, "footpoint_radius is required"),
        ({"slope_bound": 4.0}, "not identifiable"),
        ({"footpoint_radius": 2.2}, "cut locus"),  # 0.5 + 2.2 + 0.5 > pi
        ({"covariate_bound": 0.0}, "covariate_bound must be a finite number > 0"),
        ({"slope_bound": float("inf")}, "slope_bound must be a finite number > 0"),
        ({"footpoint_radius": -1.0}, "footpoint_radius must be a finite number > 0"),
    ],
)
def test_premises_are_refused_at_construction(kwargs, match):
    args = {"covariate_bound": 1.0, "slope_bound": 0.5, "footpoint_radius": 0.5, **kwargs}
    with pytest.raises(ValueError, match=match):
        pmd.RegressionKNGMechanism(S2, epsilon=1.0, center=NORTH, radius=0.5, **args)


def test_a_data_radius_at_r_star_is_refused():
    with pytest.raises(ValueError, match="not below r\\*"):
        pmd.RegressionKNGMechanism(
            S2, epsilon=1.0, center=NORTH, radius=math.pi / 4, covariate_bound=1.0,
            slope_bound=0.1, footpoint_radius=0.1,
        )  # fmt: skip


def test_a_space_without_closed_form_jacobi_fields_is_refused():
    class Other(pmd.Sphere):
        pass

    with pytest.raises(ValueError, match="no closed-form Jacobi fields"):
        pmd.RegressionKNGMechanism(
            Other(dim=2), epsilon=1.0, center=NORTH, radius=0.3, covariate_bound=1.0,
            slope_bound=0.1, footpoint_radius=0.1,
        )  # fmt: skip


@pytest.mark.parametrize("M", [pmd.Hyperbolic(dim=2), pmd.SPD(k=2)])
def test_footpoint_ball_is_required_where_volume_grows_exponentially(M):
    center = np.eye(2) if isinstance(M, pmd.SPD) else np.array([1.0, 0, 0])
    with pytest.raises(ValueError, match="grows exponentially"):
        pmd.RegressionKNGMechanism(
            M, epsilon=1.0, center=center, radius=0.5, covariate_bound=1.0, slope_bound=1.0
        )


def sphere_mechanism():
    return pmd.RegressionKNGMechanism(
        S2, epsilon=1.0, center=NORTH, radius=0.5, covariate_bound=1.0, slope_bound=0.5,
        footpoint_radius=0.5,
    )  # fmt: skip


def sphere_data(n=20):
    x = np.arange(-1, 1, 2 / n)
    v = np.array([0.3, 0.0, 0.0])
    y = S2.exp(NORTH, x[:, None] * v)
    return x, y


def test_curved_release_is_exact_and_charged_once():
    x, y = sphere_data(10)  # n eps = 10: inside the proved failure bound (10.66)
    budget = PrivacyBudget(3.0)
    rel = sphere_mechanism().release(x, y, budget=budget, random_seed=3)
    p, v = rel.value
    assert rel.delta == 0.0 and budget.spent.epsilon == 1.0
    assert float(S2.dist(NORTH, p)) <= 0.5 and abs(float(p @ v)) < 1e-12
    assert float(np.linalg.norm(v)) <= 0.5
    with pytest.raises(ValueError, match="no 'metropolis' sampler"):
        sphere_mechanism().release(x, y, sampler="metropolis", budget=budget)
    assert budget.spent.epsilon == 1.0


@pytest.mark.parametrize(
    ("M", "center", "cdf", "wrong"),
    [
        # the uniform law of B_R(m) w.r.t. volume: P(rho <= t) = (1 - cos t)/(1 - cos R)
        # on S^2 and (cosh t - 1)/(cosh R - 1) on H^2 (R = 2); a flat base measure (t/R)^2 is
        # caught
        (S2, NORTH, lambda t: (1 - np.cos(t)) / (1 - np.cos(2.0)), lambda t: (t / 2) ** 2),
        (
            pmd.Hyperbolic(dim=2),
            np.array([1.0, 0, 0]),
            lambda t: (np.cosh(t) - 1) / (np.cosh(2.0) - 1),
            lambda t: (t / 2) ** 2,
        ),
    ],
)
def test_curved_sampler_base_measure_is_sasaki(M, center, cdf, wrong):
    # at epsilon = 1e-9 the density e^{-|grad E|/sigma} is 1 to 1e-8 on the domain: the
    # draws follow the Sasaki measure's uniform law (2,000 draws, seeded, alpha = 0.01);
    # the slope's norm is uniform in the V-disc: P(|v| <= s) = (s/V)^2
    x = np.linspace(-1, 1, 8)
    y = np.stack([M.exp(center, xi * M.tangent_basis(center)[0] * 0.1) for xi in x])
    mech = pmd.RegressionKNGMechanism(
        M, epsilon=1e-9, center=center, radius=0.3, covariate_bound=1.0, slope_bound=0.5,
        footpoint_radius=2.0,
    )  # fmt: skip
    draws = mech.sample(x, y, 2000, random_seed=5)
    rho = M.dist(center, draws[:, 0])
    speed = np.sqrt(M.inner(draws[:, 0], draws[:, 1], draws[:, 1]))
    assert stats.kstest(rho, cdf).pvalue > ALPHA
    assert stats.kstest(rho, wrong).pvalue < ALPHA
    assert stats.kstest(speed / 0.5, lambda s: s**2).pvalue > ALPHA
    assert stats.kstest(speed / 0.5, lambda s: s).pvalue < ALPHA


S1 = pmd.Sphere(dim=1)


def circle_problem():
    rng = np.random.default_rng(9)
    x = np.linspace(-1, 1, 10)
    angles = 0.3 * x + rng.normal(0, 0.1, 10)
    y = np.stack([np.cos(angles), np.sin(angles)], axis=1)
    mech = pmd.RegressionKNGMechanism(
        S1, epsilon=5.0, center=[1.0, 0.0], radius=0.5, covariate_bound=1.0,
        slope_bound=0.5, footpoint_radius=0.5,
    )  # fmt: skip
    return x, y, angles, mech


def circle_marginals(x, angles, sigma, R=0.5, V=0.5, k=801):
    """The KNG law on TS^1 = (angle a, slope b) by a k x k midpoint quadrature, the
    gradient written here: residuals wrap(theta_i - a - x_i b), Sasaki measure da db."""
    a = -R + (np.arange(k) + 0.5) * (2 * R / k)
    b = -V + (np.arange(k) + 0.5) * (2 * V / k)
    res = angles[None, None, :] - a[:, None, None] - x[None, None, :] * b[None, :, None]
    res = np.angle(np.exp(1j * res))
    ga, gb = -res.mean(axis=2), -(x * res).mean(axis=2)
    dens = np.exp(-np.sqrt(ga**2 + gb**2) / sigma)
    dens /= dens.sum()
    cdf_a, cdf_b = np.cumsum(dens.sum(axis=1)), np.cumsum(dens.sum(axis=0))
    edges_a, edges_b = a + R / k, b + V / k
    return (
        lambda t: np.interp(t, edges_a, cdf_a, left=0.0, right=1.0),
        lambda t: np.interp(t, edges_b, cdf_b, left=0.0, right=1.0),
    )


# slow tier: 38 s on the loaded 2-core machine (thousands of exact draws and a
# quadrature); the default tier keeps the flat law's KS test and the Δ searches
@pytest.mark.slow
def test_curved_law_matches_a_quadrature_of_its_density_on_the_circle():
    # the oracle: a quadrature of the density on the whole 2-d domain of TS^1, written
    # apart from the package; the curved sampler (the one S^2, H^2, SPD, Kendall and SO(3)
    # use) matches both marginals (2,000 draws, seeded, alpha = 0.01) and sigma x 1.3 is
    # caught
    x, y, angles, mech = circle_problem()
    sigma = mech.sigma(len(x))
    draws = mech.sample(x, y, 2000, random_seed=12)
    p, v = draws[:, 0], draws[:, 1]
    a = np.arctan2(p[:, 1], p[:, 0])
    b = v[:, 0] * -p[:, 1] + v[:, 1] * p[:, 0]  # along (-sin a, cos a)
    cdf_a, cdf_b = circle_marginals(x, angles, sigma)
    assert stats.kstest(a, cdf_a).pvalue > ALPHA
    assert stats.kstest(b, cdf_b).pvalue > ALPHA
    wrong_a, wrong_b = circle_marginals(x, angles, 1.3 * sigma)
    assert min(stats.kstest(a, wrong_a).pvalue, stats.kstest(b, wrong_b).pvalue) < ALPHA


def test_curved_logp_is_the_gradient_norm_on_the_domain():
    x, y = sphere_data()
    mech = sphere_mechanism()
    sigma = mech.sigma(len(x))
    # T = r + R + L = 1.5, tau = min(T, r T/sin T) = 0.75: Delta = (2 tau/n) sqrt(1 + X^2)
    tau = 0.5 * 1.5 / math.sin(1.5)
    assert sigma == pytest.approx(2 * 2 * tau / 20 * math.sqrt(2))
    p = S2.exp(NORTH, np.array([0.0, 0.1, 0.0]))
    v = S2.to_tangent(p, np.array([0.2, 0.0, 0.0]))
    _, gp, gv = regression_gradient(S2, p, v, x, y)
    want = -math.sqrt(float(gp @ gp + gv @ gv)) / sigma
    assert mech.logp(np.stack([p, v]), x, y) == pytest.approx(want, rel=1e-12)
    assert mech.logp(np.stack([p, 3 * v]), x, y) == -np.inf  # |v| > V
    far = S2.exp(NORTH, np.array([0.0, 0.6, 0.0]))  # beyond the footpoint ball
    assert mech.logp(np.stack([far, S2.to_tangent(far, v)]), x, y) == -np.inf


ADVERSARIAL = st.one_of(
    st.sampled_from(
        [1 / 3, 0.3333333333333333, math.nextafter(1 / 3, 0), 5e-324, 1e308, 10**400, 0, -1.0]
    ),
    st.sampled_from([math.nan, math.inf, -math.inf, True, "1.0", None, [0.5], np.array([0.5])]),
    st.floats(min_value=1e-3, max_value=3.0),
)


@given(X=ADVERSARIAL, V=ADVERSARIAL, R=ADVERSARIAL)
def test_constructor_contract(X, V, R):
    # a mechanism with a finite sigma, or TypeError/ValueError naming the argument or
    # the premise; never a mechanism whose sensitivity is not a finite number
    try:
        mech = pmd.RegressionKNGMechanism(
            S2, epsilon=1.0, center=NORTH, radius=0.3, covariate_bound=X, slope_bound=V,
            footpoint_radius=R,
        )  # fmt: skip
    except TypeError as err:
        assert any(k in str(err) for k in ("covariate_bound", "slope_bound", "footpoint_radius"))
        return
    except ValueError as err:
        assert any(
            k in str(err)
            for k in ("covariate_bound", "slope_bound", "footpoint_radius", "injectivity radius")
        ), err
        return
    sigma = mech.sigma(10)
    assert math.isfinite(sigma) and sigma > 0
    L = mech.covariate_bound * mech.slope_bound
    assert 0.3 + mech.footpoint_radius + L < math.pi


@given(
    xs=st.lists(
        st.one_of(
            st.sampled_from([1 / 3, 0.3333333333333333, 5e-324, 1e308, -2.5]),
            st.floats(allow_nan=True, allow_infinity=True),
        ),
        min_size=1,
        max_size=6,
    )
)
def test_release_covariate_contract(xs):
    # refused before the charge (x is public) or released; the budget says which
    n = len(xs)
    y = np.tile([0.1, 0.1], (n, 1))
    budget = PrivacyBudget(5.0)
    try:
        rel = flat_mechanism().release(np.array(xs), y, budget=budget, random_seed=0)
    except ValueError as err:
        assert budget.spent.epsilon == 0, err
        return
    assert budget.spent.epsilon == 1.0 and np.all(np.isfinite(rel.value))


def test_flat_sampler_through_the_chart_on_the_hyperbolic_line():
    # H^1 is flat without cut locus: the K-norm sampler runs in normal coordinates at the
    # center (the signed distance t = asinh(y_1), slope b with v = b (sinh t, cosh t));
    # the oracle is OLS on t, written here (2,000 draws, seeded, alpha = 0.01)
    H1, c = pmd.Hyperbolic(dim=1), np.array([1.0, 0.0])
    mech = pmd.RegressionKNGMechanism(
        H1, epsilon=1.0, center=c, radius=1.0, covariate_bound=2.0, slope_bound=100.0
    )
    x = np.linspace(-1, 1, 10) + 0.3
    y = H1.exp(c, np.outer(0.3 * x, [0.0, 1.0]))
    draws = mech.sample(x, y, 2000, random_seed=0)
    t = np.arcsinh(y[:, 1])
    design = np.stack([np.ones_like(x), x], 1)
    theta_hat, *_ = np.linalg.lstsq(design, t, rcond=None)
    tp = np.arcsinh(draws[:, 0, 1])
    theta = np.stack([tp, draws[:, 1, 1] / np.cosh(tp)], axis=1)
    g = np.linalg.norm((theta - theta_hat) @ (design.T @ design / len(x)), axis=1)
    sigma = mech.sigma(len(x))
    assert stats.kstest(g / sigma, stats.gamma(2).cdf).pvalue > ALPHA
    assert stats.kstest(g / (1.2 * sigma), stats.gamma(2).cdf).pvalue < ALPHA


def sphere_law_marginals(x, y, sigma, R, V, k=28):
    """CDFs of rho(m, p) and |v| under the KNG law on TS^2 by a k^4 midpoint quadrature.

    Written here, apart from the package: the footpoint in polar normal coordinates
    (t, phi) at the north pole, the slope in the frame carried from the pole along the
    radial geodesic (polar (s, psi)), the Sasaki density (sin t / t) t dt dphi s ds dpsi,
    and the sphere's regression gradient (Fletcher's formula: factor 1 along the
    geodesic, cos s and sin s / s across).
    """
    north = np.array([0.0, 0.0, 1.0])
    t = (np.arange(k) + 0.5) * R / k
    s = (np.arange(k) + 0.5) * V / k
    ang = (np.arange(k) + 0.5) * 2 * np.pi / k
    T, PHI, SL, PSI = np.meshgrid(t, ang, s, ang, indexing="ij")
    e = np.stack([np.cos(PHI), np.sin(PHI), 0 * PHI], -1)
    e_perp = np.stack([-np.sin(PHI), np.cos(PHI), 0 * PHI], -1)
    p = np.cos(T)[..., None] * north + np.sin(T)[..., None] * e
    e_moved = -np.sin(T)[..., None] * north + np.cos(T)[..., None] * e
    v = (SL * np.cos(PSI - PHI))[..., None] * e_moved + (SL * np.sin(PSI - PHI))[..., None] * e_perp
    u = v / SL[..., None]
    gp = gv = 0.0
    for xi, yi in zip(x, y, strict=True):
        arc = xi * SL
        yhat = np.cos(arc)[..., None] * p + np.sin(arc)[..., None] * u
        c = np.clip(yhat @ yi, -1, 1)
        theta = np.arccos(c)
        eps = (yi - c[..., None] * yhat) * (theta / np.sin(theta))[..., None]
        vel = -np.sin(arc)[..., None] * p + np.cos(arc)[..., None] * u
        a = np.sum(eps * vel, -1)[..., None]
        w = eps - a * vel
        gp = gp + a * u + np.cos(arc)[..., None] * w
        gv = gv + xi * (a * u + np.sinc(arc / np.pi)[..., None] * w)
    g = np.sqrt(np.sum(gp**2, -1) + np.sum(gv**2, -1)) / len(x)
    dens = np.exp(-g / sigma) * np.sin(T) * SL
    dens /= dens.sum()
    cdf_t, cdf_s = np.cumsum(dens.sum(axis=(1, 2, 3))), np.cumsum(dens.sum(axis=(0, 1, 3)))
    return (
        lambda q: np.interp(q, t + R / (2 * k), cdf_t, left=0.0, right=1.0),
        lambda q: np.interp(q, s + V / (2 * k), cdf_s, left=0.0, right=1.0),
    )


# slow tier: 23 s on the loaded 2-core machine (thousands of exact draws and a
# quadrature); the default tier keeps the flat law's KS test and the Δ searches
@pytest.mark.slow
def test_sphere_law_matches_a_quadrature_of_its_density():
    # the must-hold oracle on S^2: the whole 4-d law on TS^2 by quadrature (28^4 points;
    # 40^4 moves the p-values below by < 0.01), 2,000 draws, seeded, alpha = 0.01;
    # sigma x 1.3 is caught
    x = np.linspace(-1, 1, 10)
    rng = np.random.default_rng(3)
    noise = np.c_[rng.normal(0, 0.05, (10, 2)), np.zeros(10)]
    y = S2.exp(NORTH, x[:, None] * np.array([0.3, 0, 0]) + noise)
    mech = pmd.RegressionKNGMechanism(
        S2, epsilon=2.0, center=NORTH, radius=0.5, covariate_bound=1.0, slope_bound=0.5,
        footpoint_radius=0.5,
    )  # fmt: skip
    sigma = mech.sigma(len(x))
    draws = mech.sample(x, y, 2000, random_seed=1)
    rho = S2.dist(NORTH, draws[:, 0])
    speed = np.linalg.norm(draws[:, 1], axis=1)
    cdf_t, cdf_s = sphere_law_marginals(x, y, sigma, 0.5, 0.5)
    assert stats.kstest(rho, cdf_t).pvalue > ALPHA
    assert stats.kstest(speed, cdf_s).pvalue > ALPHA
    wrong_t, _ = sphere_law_marginals(x, y, 1.3 * sigma, 0.5, 0.5)
    assert stats.kstest(rho, wrong_t).pvalue < ALPHA
