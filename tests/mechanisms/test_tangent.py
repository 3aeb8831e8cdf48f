"""The tangent Gaussian and Laplace (K-norm) mechanisms (issue 39, docs/tangent.md).

Delta_T and sigma against the formulas computed apart from the package; the laws of
u - Log_p(x_bar) by KS tests (alpha = 0.01, fixed seeds, 4,000 draws each) that a
sigma 1.5 times too large fails; the record (u stored, y = Exp_p(u), JSON round trip);
the budget charge (epsilon, delta) with mu recorded; every refusal before the charge.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats

import pymc_manidp as pmd
from pymc_manidp.privacy.budget import BudgetExceededError, PrivacyBudget
from tests.mechanisms.test_precharge import SPACES as PRECHARGE_SPACES
from tests.mechanisms.test_precharge import _draw_data
from tests.stats.test_gaussian_calibration import _mp_mu

ALPHA = 0.01
DRAWS = 4000  # per KS test
NORTH = np.array([0.0, 0.0, 1.0])


def _data(M, center, r, n, seed):
    """``n`` records inside B_r(center), spread over it."""
    rng = np.random.default_rng(seed)
    c = rng.standard_normal((n, M.dim))
    c *= (0.9 * r * rng.random((n, 1)) ** (1 / M.dim)) / np.linalg.norm(c, axis=1, keepdims=True)
    return M.exp_coords(center, c)


def _spaces():
    from scipy.spatial.transform import Rotation

    return [
        (pmd.Sphere(dim=2), NORTH, math.pi / 8),
        (pmd.SPD(k=2), np.eye(2), 1.0),
        (pmd.Hyperbolic(dim=2), np.array([1.0, 0.0, 0.0]), 1.5),
        (pmd.Rotations(), Rotation.from_rotvec([0.2, 0.1, -0.3]).as_matrix(), 0.5),
        (
            pmd.KendallShape(k_landmarks=4),
            pmd.KendallShape(k_landmarks=4).validate(
                np.array([[1.0, 0.0], [0.1, 1.0], [-1.0, 0.2], [0.0, -1.1]])
            ),
            0.3,
        ),
    ]


SPACES = _spaces()
IDS = ["S2", "SPD2", "H2", "SO3", "Kendall4"]


# --- the privacy map ---------------------------------------------------------------
def test_sensitivity_and_sigma_match_the_formulas_on_the_sphere():
    r, n, eps, delta = math.pi / 8, 100, 0.7, 1e-7
    H = (2 * r) / math.tan(2 * r)  # h(r, kappa = 1), written again
    tol = 1e-9 * r
    geodesic = 2 * r * (2 - H) / (n * H) + 2 * tol / H
    L = r / math.sin(r)
    kw = {"center": NORTH, "radius": r}
    lap = pmd.TangentLaplaceMechanism(pmd.Sphere(dim=2), epsilon=eps, **kw)
    gau = pmd.TangentGaussianMechanism(pmd.Sphere(dim=2), epsilon=eps, delta=delta, **kw)
    assert lap.sensitivity(n) == pytest.approx(L * geodesic, rel=1e-12)
    assert gau.sensitivity(n) == lap.sensitivity(n)
    assert lap.sigma(n) == pytest.approx(L * geodesic / eps, rel=1e-12)
    mu = _mp_mu(eps, delta)  # the Balle-Wang root in 60-digit mpmath
    assert gau.sigma(n) == pytest.approx(L * geodesic / mu, rel=1e-6)
    assert gau.sigma(n) >= gau.sensitivity(n) / mu  # never less noise than the root
    assert gau.mu(n) == pytest.approx(mu, rel=1e-6)
    assert gau.mu(n) == gau.sensitivity(n) / gau.sigma(n)


def test_sensitivity_on_hadamard_spaces_is_the_geodesic_one():
    r, n = 1.5, 40
    for M, c in [(pmd.Hyperbolic(dim=3), [1.0, 0, 0, 0]), (pmd.SPD(k=3), np.eye(3))]:
        far = M.exp_coords(np.asarray(c, float), np.full(M.dim, 3.0))  # any p: L = 1
        mech = pmd.TangentLaplaceMechanism(M, epsilon=1.0, center=c, radius=r, tangent_point=far)
        assert mech.lipschitz == 1.0
        assert mech.sensitivity(n) == pytest.approx(2 * r / n + 2 * 1e-9 * r, rel=1e-12)


def test_off_center_point_widens_L():
    S = pmd.Sphere(dim=2)
    r = 0.3
    p = S.exp_coords(NORTH, np.array([0.5, 0.0]))
    mech = pmd.TangentLaplaceMechanism(S, epsilon=1.0, center=NORTH, radius=r, tangent_point=p)
    R = r + 0.5
    assert mech.reach == pytest.approx(R, abs=2e-7)
    assert mech.lipschitz == pytest.approx(R / math.sin(R), rel=1e-6)
    assert mech.lipschitz >= R / math.sin(R)


# --- the laws ------------------------------------------------------------------------
def _noise(mech, data, sigma, seed):
    checked = mech.domain.check(data)
    out = mech.exact_draws(checked, sigma, DRAWS, np.random.default_rng(seed))
    u = out.info["tangent_coords"]
    # the point published is Exp_p(u): the same draw, post-processed
    np.testing.assert_allclose(out.points, mech.manifold.exp_coords(mech.tangent_point, u))
    return u - mech.mean_coords(checked)


def _gaussian_pvalues(z, sigma):
    d = z.shape[1]
    axes = [stats.kstest(z[:, j], stats.norm(0, sigma).cdf).pvalue for j in range(d)]
    sq = stats.kstest(np.sum(z**2, axis=1) / sigma**2, stats.chi2(d).cdf).pvalue
    return min(axes), sq


def _knorm_pvalues(z, sigma):
    d = z.shape[1]
    norm = np.linalg.norm(z, axis=1)
    radius = stats.kstest(norm, stats.gamma(d, scale=sigma).cdf).pvalue
    # a uniform direction's first coordinate: (x1 + 1)/2 ~ Beta((d-1)/2, (d-1)/2)
    x1 = (z[:, 0] / norm + 1) / 2
    direction = stats.kstest(x1, stats.beta((d - 1) / 2, (d - 1) / 2).cdf).pvalue
    return radius, direction


@pytest.mark.parametrize(("M", "center", "r"), SPACES, ids=IDS)
def test_gaussian_law(M, center, r):
    mech = pmd.TangentGaussianMechanism(M, epsilon=1.0, delta=1e-6, center=center, radius=r)
    data = _data(M, center, r, 50, seed=1)
    sigma = mech.sigma(50)
    z = _noise(mech, data, sigma, seed=11)
    axes, sq = _gaussian_pvalues(z, sigma)
    assert axes > ALPHA / M.dim and sq > ALPHA, (axes, sq)  # Bonferroni over the axes
    # a sigma 1.5 times too large is caught by the same tests
    wrong = _noise(mech, data, 1.5 * sigma, seed=11)
    axes, sq = _gaussian_pvalues(wrong, sigma)
    assert axes < ALPHA and sq < ALPHA, (axes, sq)


@pytest.mark.parametrize(("M", "center", "r"), SPACES, ids=IDS)
def test_knorm_law(M, center, r):
    mech = pmd.TangentLaplaceMechanism(M, epsilon=1.0, center=center, radius=r)
    data = _data(M, center, r, 50, seed=2)
    sigma = mech.sigma(50)
    z = _noise(mech, data, sigma, seed=12)
    radius, direction = _knorm_pvalues(z, sigma)
    assert radius > ALPHA and direction > ALPHA, (radius, direction)
    wrong = _noise(mech, data, 1.5 * sigma, seed=12)
    assert _knorm_pvalues(wrong, sigma)[0] < ALPHA


def test_gaussian_law_at_an_earlier_release():
    # p = an earlier release (public): u - Log_p x_bar is still N(0, sigma^2 I)
    S = pmd.Sphere(dim=2)
    data = _data(S, NORTH, 0.3, 80, seed=3)
    first = pmd.TangentLaplaceMechanism(S, epsilon=1.0, center=NORTH, radius=0.3)
    p = first.release(data, random_seed=4).value
    mech = pmd.TangentGaussianMechanism(
        S, epsilon=1.0, delta=1e-6, center=NORTH, radius=0.3, tangent_point=p
    )
    sigma = mech.sigma(80)
    axes, sq = _gaussian_pvalues(_noise(mech, data, sigma, seed=5), sigma)
    assert axes > ALPHA / 2 and sq > ALPHA


# --- the record ----------------------------------------------------------------------
def test_record_stores_u_and_round_trips(tmp_path):
    S = pmd.Sphere(dim=2)
    data = _data(S, NORTH, 0.3, 60, seed=6)
    mech = pmd.TangentGaussianMechanism(S, epsilon=1.0, delta=1e-6, center=NORTH, radius=0.3)
    rel = mech.release(data, random_seed=7)
    t = rel.tangent
    assert t["noise"] == "gaussian" and t["mu"] == mech.mu(60)
    assert t["coords"].shape == (2,) and not t["coords"].flags.writeable
    np.testing.assert_allclose(rel.value, S.exp_coords(NORTH, t["coords"]))
    assert rel.delta == 1e-6 and rel.sigma == mech.sigma(60) and rel.restricted is False
    assert not any("delta = 0" in note for note in rel.notes)
    assert any("analytic Gaussian" in note for note in rel.notes)
    pub = rel.public()
    assert pub["tangent"]["coords"] == t["coords"].tolist() and pub["tangent"]["mu"] > 0
    assert "tangent_coords" not in (rel.sampler_info or {})
    path = tmp_path / "rel.json"
    rel.to_json(path, public=True)
    back = pmd.Release.from_json(path)
    assert back.public() == pub
    # a release of another mechanism carries no tangent key (its record is unchanged)
    kng = pmd.KNGMechanism(S, epsilon=1.0, center=NORTH, radius=0.3)
    assert "tangent" not in kng.release(data, random_seed=1).public()
    lap = pmd.TangentLaplaceMechanism(S, epsilon=1.0, center=NORTH, radius=0.3)
    lrel = lap.release(data, random_seed=7)
    assert lrel.delta == 0.0 and lrel.tangent["mu"] is None
    assert lrel.tangent["noise"] == "k-norm"


def test_release_many_records_one_u_per_data_set():
    S = pmd.Sphere(dim=2)
    stack = np.stack([_data(S, NORTH, 0.3, 30, seed=s) for s in range(3)])
    mech = pmd.TangentGaussianMechanism(S, epsilon=1.0, delta=1e-6, center=NORTH, radius=0.3)
    budget = PrivacyBudget(epsilon=10, delta=1e-5)
    rels = mech.release_many(stack, random_seed=[1, 2, 3], budget=budget)
    for rel in rels:
        assert rel.tangent["coords"].shape == (2,)
        np.testing.assert_allclose(rel.value, S.exp_coords(NORTH, rel.tangent["coords"]))
    assert budget.spent.epsilon == pytest.approx(3.0) and budget.spent.delta == pytest.approx(3e-6)


# --- the budget ----------------------------------------------------------------------
def test_gaussian_is_charged_epsilon_delta_with_mu_in_the_ledger():
    S = pmd.Sphere(dim=2)
    data = _data(S, NORTH, 0.3, 60, seed=8)
    mech = pmd.TangentGaussianMechanism(S, epsilon=0.5, delta=1e-7, center=NORTH, radius=0.3)
    budget = PrivacyBudget(epsilon=1.0, delta=1e-6)
    mech.release(data, budget=budget)
    spent = budget.spent
    assert (spent.epsilon, spent.delta, spent.proved) == (0.5, 1e-7, True)
    entry = budget.entries[-1]
    assert entry["delta_basis"] == "proved" and entry["status"] == "released"
    assert entry["release"]["tangent"]["mu"] == mech.mu(60)
    # a delta the budget cannot hold is refused before the data are read
    big = pmd.TangentGaussianMechanism(S, epsilon=0.1, delta=1e-6, center=NORTH, radius=0.3)
    with pytest.raises(BudgetExceededError):
        big.release(np.full((60, 3), np.nan), budget=budget)  # never read
    assert budget.spent == spent
    # delta= is the MCMC curator's assumption, not the Gaussian's own delta
    with pytest.raises(ValueError, match="drop delta="):
        mech.release(data, budget=budget, delta=1e-6)
    assert budget.spent == spent


def test_refusals_before_the_charge():
    S = pmd.Sphere(dim=2)
    budget = PrivacyBudget(epsilon=1.0, delta=1e-6)
    mech = pmd.TangentGaussianMechanism(S, epsilon=0.5, delta=1e-7, center=NORTH, radius=0.3)
    with pytest.raises(ValueError, match="shape"):
        mech.release(np.zeros((5, 4)), budget=budget)
    with pytest.raises(ValueError, match="no 'nuts' sampler"):
        mech.release(_data(S, NORTH, 0.3, 10, 0), sampler="nuts", budget=budget)
    assert budget.spent.epsilon == 0 and budget.entries == []


def test_tangent_point_too_far_is_refused_saying_what_to_do():
    S = pmd.Sphere(dim=2)
    far = S.exp_coords(NORTH, np.array([1.3, 0.0]))  # R = 0.3 + 1.3 > pi/2
    with pytest.raises(ValueError, match=r"closer to the center \(rho\(p, center\) < 1\.27"):
        pmd.TangentLaplaceMechanism(S, epsilon=1.0, center=NORTH, radius=0.3, tangent_point=far)
    K = pmd.KendallShape(k_landmarks=4)
    m0 = K.validate(np.random.default_rng(0).standard_normal((4, 2)))
    p = K.exp_coords(m0, np.array([0.5, 0.0, 0.0, 0.0]))  # R = 0.2 + 0.5 < pi/4: ok
    assert pmd.TangentLaplaceMechanism(
        K, epsilon=1.0, center=m0, radius=0.2, tangent_point=p
    ).lipschitz == pytest.approx(2 * 0.7 / math.sin(1.4), rel=1e-5)
    p = K.exp_coords(m0, np.array([0.6, 0.0, 0.0, 0.0]))  # R = 0.8 > pi/4
    with pytest.raises(ValueError, match="closer to the center"):
        pmd.TangentLaplaceMechanism(K, epsilon=1.0, center=m0, radius=0.2, tangent_point=p)


@pytest.mark.parametrize(
    ("point", "error", "match"),
    [
        ([0.0, 1.0], ValueError, "one point of shape"),
        ([[0.0, 0.0, 1.0]], ValueError, "one point of shape"),
        ([0.0, 0.0, 2.0], ValueError, None),
        ([0.0, np.nan, 1.0], ValueError, None),
        # wrong types are TypeErrors naming the argument (the convention); a float
        # conversion raised OverflowError for 10**400, ValueError for a string and took
        # [True, False, True] as (1, 0, 1)
        ("north", TypeError, "tangent_point must hold real numbers"),
        ([10**400, 0, 1.0], TypeError, "tangent_point must hold real numbers"),
        ([True, False, True], TypeError, "tangent_point must hold real numbers"),
        ([0.0, 0.0, 1 + 1e-3], ValueError, None),
        ([5e-324, 0.0, 1.0], None, None),
    ],
)
def test_tangent_point_must_be_one_point(point, error, match):
    def make():
        return pmd.TangentGaussianMechanism(
            pmd.Sphere(dim=2), epsilon=1, delta=1e-6, center=NORTH, radius=0.3,
            tangent_point=point,
        )  # fmt: skip

    if error is None:  # a point a subnormal away from the center is one
        assert make().tangent_point.shape == (3,)
        return
    with pytest.raises(error, match=match):
        make()


_junk = st.one_of(
    st.none(),
    st.booleans(),
    st.text(max_size=3),
    st.sampled_from([math.nan, math.inf, -1.0, 0.0, 5e-324, 1e308, 10**400, 1.0, 1 / 3]),
    st.just(math.nextafter(1.0, 0.0)),
    st.just([1e-6]),
)


@given(epsilon=_junk, delta=_junk)
def test_constructor_contract(epsilon, delta):
    try:
        mech = pmd.TangentGaussianMechanism(
            pmd.Sphere(dim=2), epsilon=epsilon, delta=delta, center=NORTH, radius=0.3
        )
    except TypeError:
        return
    except ValueError as err:
        assert "epsilon" in str(err) or "delta" in str(err)
        return
    # accepted: a usable calibration, or a refusal naming what to change
    try:
        cal = mech.calibrate(50)
    except ValueError as err:
        assert "epsilon" in str(err) or "delta" in str(err)
        return
    assert cal.sigma > 0 and math.isfinite(cal.sigma)
    assert mech.mu(50) <= _mp_mu(float(epsilon), float(delta)) * (1 + 1e-6)


@pytest.mark.parametrize("cls", ["TangentGaussianMechanism", "TangentLaplaceMechanism"])
def test_unrepresentable_point_is_refused_before_the_charge(cls):
    # on H^2 a sigma of thousands would put Exp_p(u) past cosh's range: refused from
    # public facts (the rule), where it used to fail after the charge
    H = pmd.Hyperbolic(dim=2)
    kw = {"delta": 1e-6} if cls == "TangentGaussianMechanism" else {}
    mech = getattr(pmd, cls)(H, epsilon=1e-4, center=[1.0, 0, 0], radius=1.5, **kw)
    budget = PrivacyBudget(epsilon=1.0, delta=1e-5)
    data = _data(H, np.array([1.0, 0, 0]), 1.5, 10, seed=0)
    with pytest.raises(ValueError, match=r"too large for Hyperbolic.*larger epsilon"):
        mech.release(data, budget=budget)
    assert budget.entries == []
    # a compact space always represents the point
    S = pmd.Sphere(dim=2)
    small = getattr(pmd, cls)(S, epsilon=1e-4, center=NORTH, radius=0.3, **kw)
    assert small.release(_data(S, NORTH, 0.3, 10, seed=0), random_seed=0).value.shape == (3,)


def test_dp_event_composes_as_gdp():
    # k tangent Gaussian releases and pure-eps ones in one REPLACE_ONE PLD accountant:
    # the Gaussian part alone gives eps with gaussian_delta(eps, sqrt(k) mu) = delta
    # (GDP composition, Dong, Roth & Su 2022, Cor. 3.3), computed apart here
    dpa = pytest.importorskip("dp_accounting")
    from dp_accounting.pld import pld_privacy_accountant

    from pymc_manidp.mechanisms.interop import dp_event
    from pymc_manidp.stats.gaussian import gaussian_delta

    S = pmd.Sphere(dim=2)
    data = _data(S, NORTH, 0.3, 40, seed=9)
    mech = pmd.TangentGaussianMechanism(S, epsilon=0.5, delta=1e-7, center=NORTH, radius=0.3)
    rel = mech.release(data, random_seed=0)
    event = dp_event(rel)
    assert isinstance(event, dpa.GaussianDpEvent)
    k, delta = 16, 1e-6
    acc = pld_privacy_accountant.PLDAccountant(dpa.NeighboringRelation.REPLACE_ONE)
    acc.compose(event, k)
    eps = acc.get_epsilon(delta)
    mu_total = math.sqrt(k) * rel.tangent["mu"]
    exact = _gdp_eps(mu_total, delta)
    assert eps == pytest.approx(exact, abs=5e-3)
    assert gaussian_delta(exact, mu_total) == pytest.approx(delta, rel=1e-6)
    # one release alone: dp_accounting's epsilon at the release's own delta is its epsilon
    one = pld_privacy_accountant.PLDAccountant(dpa.NeighboringRelation.REPLACE_ONE)
    one.compose(event)
    assert one.get_epsilon(1e-7) == pytest.approx(0.5, abs=2e-3)
    # mixed with a pure-eps release's event (randomized response): it adds to the total
    lap = pmd.TangentLaplaceMechanism(S, epsilon=0.2, center=NORTH, radius=0.3)
    acc.compose(dp_event(lap.release(data, random_seed=0)))
    assert acc.get_epsilon(delta) > eps


def _gdp_eps(mu, delta):
    """The eps at which mu-GDP has the given delta, by bisection on gaussian_delta."""
    from pymc_manidp.stats.gaussian import gaussian_delta

    lo, hi = 0.0, 100.0
    for _ in range(200):
        mid = (lo + hi) / 2
        if gaussian_delta(mid, mu) > delta:
            lo = mid
        else:
            hi = mid
    return hi


@given(
    space=st.sampled_from(["sphere", "spd", "hyperbolic", "kendall", "rotations", "euclidean"]),
    epsilon=st.sampled_from([1 / 3, 5e-324, 1e-300, 1e-9, 1.0, 1e9, 1e300, 10**400, True]),
    delta=st.sampled_from([1e-6, 1 / 3, 1e-300, 1e-301, 5e-324, 0.0, 1.0, math.nan, "1e-6"]),
    kind=st.sampled_from(["ok", "nan", "far", "dask", "wrong record shape", "empty", "None"]),
    many=st.booleans(),
)
def test_gaussian_release_is_charged_once_or_refused_uncharged(space, epsilon, delta, kind, many):
    """tests/mechanisms/test_precharge.py's contract, for the Gaussian's (epsilon, delta)."""
    M, c, r = PRECHARGE_SPACES[space]
    try:
        m = pmd.TangentGaussianMechanism(M, epsilon=epsilon, delta=delta, center=c, radius=r)
    except (TypeError, ValueError) as err:
        assert "epsilon" in str(err) or "delta" in str(err)
        return
    data, why = _draw_data(space, kind)
    if many and kind == "dask":
        data, why = np.asarray(data), "ok"
    budget = PrivacyBudget(1e308, delta=0.5)
    try:
        out = (
            m.release_many([data], budget=budget, random_seed=0)[0]
            if many
            else m.release(data, budget=budget, random_seed=0)
        )
    except (TypeError, ValueError) as err:
        if budget.entries:  # charged: only a value-dependent refusal may come after it
            assert why == "values", f"charged, then refused for a public fact: {err}"
            assert [e["status"] for e in budget.entries] == ["failed"]
        else:
            assert budget.spent.epsilon == 0 and budget.spent.delta == 0
        return
    assert why == "ok", f"released {kind!r} data"
    assert len(budget.entries) == 1
    assert (budget.spent.epsilon, budget.spent.delta) == (float(epsilon), float(delta))
    assert np.all(np.isfinite(out.value)) and np.all(np.isfinite(out.tangent["coords"]))


@pytest.mark.parametrize(("M", "center", "r"), SPACES, ids=IDS)
def test_privacy_audit_in_the_tangent_chart(M, center, r):
    """The audit of an additive mechanism in R^d is exact without a grid: at a pair
    (D, D') the K-norm's privacy loss is sup_u |log f_D(u) - log f_D'(u)| =
    |g - g'|/sigma, and the Gaussian's delta at epsilon is gaussian_delta(epsilon,
    |g - g'|/sigma) (Balle & Wang's condition is an equivalence). So the audit is the
    largest |g(D) - g(D')| over the package's adversarial neighbour pairs
    (privacy.audit.neighbour_pairs: boundary records moved across, clusters with an
    outlier, random pairs), against Delta_T; sigma/2 is caught where the pairs reach
    more than half of Delta_T (all but Kendall, whose Delta from Reimherr et al.'s
    Thm 2 is loose: 0.31 of it is reached)."""
    from pymc_manidp.privacy.audit.neighbours import neighbour_pairs
    from pymc_manidp.stats.gaussian import gaussian_delta

    n, eps, delta = 20, 1.0, 1e-6
    lap = pmd.TangentLaplaceMechanism(M, epsilon=eps, center=center, radius=r)
    gau = pmd.TangentGaussianMechanism(M, epsilon=eps, delta=delta, center=center, radius=r)
    worst = 0.0
    for pair in neighbour_pairs(lap.domain, n, directions=2 * M.dim, random_pairs=8):
        g = lap.mean_coords(lap.domain.check(pair.data))
        g2 = lap.mean_coords(lap.domain.check(pair.neighbour))
        worst = max(worst, float(np.linalg.norm(g - g2)))
    assert worst <= lap.sensitivity(n)
    assert worst / lap.sigma(n) <= eps  # the K-norm's audited loss
    assert gaussian_delta(eps, worst / gau.sigma(n)) <= delta  # the Gaussian's
    if isinstance(M, pmd.KendallShape):
        assert worst > 0.25 * lap.sensitivity(n)
        return
    assert worst > 0.6 * lap.sensitivity(n)
    assert worst / (lap.sigma(n) / 2) > eps  # sigma/2 caught
    assert gaussian_delta(eps, worst / (gau.sigma(n) / 2)) > delta


_coordinate = st.sampled_from(
    [0.0, 1.0, 1 / 3, 5e-324, -1e308, 1e308, 10**400, math.nan, math.inf, True, "0", None]
)


@given(tangent_point=st.one_of(st.lists(_coordinate, min_size=0, max_size=4), _coordinate))
def test_tangent_point_contract(tangent_point):
    """A TypeError or ValueError naming tangent_point (or the point's premise), or a
    mechanism at a point of the sphere; never an OverflowError (10**400) or a bool read
    as a coordinate."""
    try:
        mech = pmd.TangentGaussianMechanism(
            pmd.Sphere(dim=2), epsilon=1.0, delta=1e-6, center=NORTH, radius=0.3,
            tangent_point=tangent_point,
        )  # fmt: skip
    except TypeError as err:
        assert "tangent_point" in str(err)
        return
    except ValueError as err:
        assert any(w in str(err) for w in ("tangent_point", "points", "sphere", "norm"))
        return
    if tangent_point is None:  # the center
        assert np.array_equal(mech.tangent_point, NORTH)
        return
    assert all(isinstance(c, float | int) and not isinstance(c, bool) for c in tangent_point)
    assert mech.tangent_point.shape == (3,) and np.isclose(np.linalg.norm(mech.tangent_point), 1)
