r"""Noise-aware inference from tangent releases (issue 39, item 3).

The likelihood of a tangent release's coordinates u given the Fréchet mean eta is
N(E_p^T Log_p eta, sigma^2 I) (Gaussian) or the K-norm law around it, on R^d:
checked against SciPy's Gaussian log-density and the K-norm normalizer's radial
integral on S^2, H^2 and SPD(2), then calibrated by simulation-based calibration
(``pmd.calibration_study`` on nutpie) on the three spaces, with a Gaussian and a
K-norm release of the same data in one model (S^2: the default prior, uniform on the
public ball; H^2 and SPD(2): a ``ManifoldLaplace(m0, 0.3)`` prior, the spaces are not
compact).

SBC sizes and test: 40 replicates (S^2 in the default tier, H^2 and SPD(2) in the
``slow`` tier; 150 on all three in the ``slow`` tier, where releases drawn at 1.5 sigma
are rejected too: at 1.25 sigma SPD(2) was not, p = 0.016 against 0.0017), 2 chains x
100 draws after 100 tuning steps thinned by 4 (ranks among L = 50 draws), the statistics
the two tangent coordinates at m0 (SPD(2): three); per statistic a chi-square test of
uniform ranks (8 bins) and a binomial test of the 90 % intervals' coverage against
0.9 (L - 1)/(L + 1) (tests/mcmc/test_sbc_manifolds.py), Bonferroni at alpha = 0.01 over
the 2k tests. The same study with the releases drawn at 2 sigma while
the likelihood says sigma (a posterior twice too narrow) is rejected.
"""

from __future__ import annotations

import math
from unittest import mock

import numpy as np
import pymc as pm
import pytensor
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import integrate, special
from scipy import stats as sps

import pymc_manidp as pmd
from pymc_manidp.laws import inference
from pymc_manidp.mcmc.sampling import has_nutpie

SPACES = {
    "S2": (pmd.Sphere(dim=2), np.array([0.0, 0.0, 1.0]), np.pi / 6, None),
    "H2": (pmd.Hyperbolic(dim=2), np.array([1.0, 0.0, 0.0]), 1.0, 0.3),
    "SPD2": (pmd.SPD(k=2), np.eye(2), 1.0, 0.3),
}
NAMES = {"gaussian": "tangent Gaussian", "k-norm": "tangent Laplace"}
ALPHA = 0.01
LEVEL = 0.9
needs_nutpie = pytest.mark.skipif(not has_nutpie(), reason="nutpie is not installed")


def record(space, noise, sigma, coords=None, point=None):
    M, c, r, _ = SPACES[space]
    p = c if point is None else point
    u = np.zeros(M.dim) if coords is None else coords
    return {
        "value": M.exp_coords(p, u),
        "mechanism": NAMES[noise],
        "sigma": sigma,
        "manifold": repr(M),
        "tangent": {"point": p, "coords": u, "noise": noise, "mu": None},
        "public_ball": {"center": c, "radius": r},
    }


def fixed(value):
    """A 'prior' that is the point itself: the model's logp is the likelihood at it."""
    return lambda name, **kw: pm.Data(name, value)


def _logp_at(model):
    return float(model.compile_logp()({}))


@pytest.mark.parametrize("space", list(SPACES))
@pytest.mark.parametrize("noise", ["gaussian", "k-norm"])
def test_likelihood_is_the_noise_law_around_log_p_eta(space, noise):
    M, c, r, _ = SPACES[space]
    rng = np.random.default_rng(5)
    # a tangent point off the center (public, e.g. an earlier release) and a mean in
    # the ball: the model must use Log_p, not Log_m0
    p = M.exp_coords(c, rng.uniform(-0.2, 0.2, M.dim) * r)
    eta = M.exp_coords(c, rng.uniform(-0.5, 0.5, M.dim) * r)
    u = rng.normal(size=M.dim) * 0.3
    sigma = 0.25
    model = pmd.noise_aware_model(record(space, noise, sigma, u, p), M, prior=fixed(eta))
    v = M.log_coords(p, eta)
    d = M.dim
    if noise == "gaussian":
        want = sps.multivariate_normal(v, sigma**2 * np.eye(d)).logpdf(u)
    else:
        area = 2 * np.pi ** (d / 2) / special.gamma(d / 2)
        want = -np.linalg.norm(u - v) / sigma - np.log(sigma**d * special.gamma(d) * area)
    assert _logp_at(model) == pytest.approx(want, rel=1e-10)


@pytest.mark.parametrize("d", [1, 2, 3])
def test_k_norm_normalizer_is_the_radial_integral(d):
    # int_{R^d} e^{-|z|/s} dz = |S^{d-1}| int_0^inf r^{d-1} e^{-r/s} dr, by quadrature
    M = pmd.Sphere(dim=d)
    c = np.eye(d + 1)[-1]
    rec = {
        "value": c, "mechanism": "tangent Laplace", "sigma": 0.7,
        "tangent": {"point": c, "coords": np.zeros(d), "noise": "k-norm"},
    }  # fmt: skip
    lp = _logp_at(pmd.noise_aware_model(rec, M, prior=fixed(c)))
    area = 2 * np.pi ** (d / 2) / special.gamma(d / 2)
    radial = integrate.quad(lambda t: t ** (d - 1) * np.exp(-t / 0.7), 0, np.inf)[0]
    assert lp == pytest.approx(-np.log(area * radial), rel=1e-10)


def test_several_releases_mixed_with_a_laplace_give_the_product():
    M, c, _r, _ = SPACES["S2"]
    eta = M.exp_coords(c, np.array([0.1, -0.2]))
    recs = [
        record("S2", "gaussian", 0.2, np.array([0.05, -0.1])),
        record("S2", "k-norm", 0.3, np.array([0.2, 0.1])),
        {"value": M.exp_coords(c, np.array([0.0, 0.1])), "mechanism": "manifold Laplace",
         "sigma": 0.25, "restricted": False},
    ]  # fmt: skip
    model = pmd.noise_aware_model(recs, M, prior=fixed(eta))
    assert [v.name for v in model.observed_RVs] == ["release_0", "release_1", "release_2"]
    parts = [_logp_at(pmd.noise_aware_model(x, M, prior=fixed(eta))) for x in recs]
    assert _logp_at(model) == pytest.approx(sum(parts), rel=1e-12)
    # the default prior: uniform on the tangent releases' public ball, in a chart
    default = pmd.noise_aware_model(recs, M)
    assert [v.name for v in default.free_RVs] == ["mean"]


def test_a_mechanisms_release_is_read_and_new_values_replace_it():
    M, c, r, _ = SPACES["H2"]
    mech = pmd.TangentGaussianMechanism(M, epsilon=1.0, delta=1e-6, center=c, radius=r)
    data = M.exp_coords(c, np.random.default_rng(0).uniform(-0.5, 0.5, (30, 2)))
    rel = mech.release(data, random_seed=2)
    prior = lambda n, **kw: pmd.ManifoldLaplace(n, M, c, 0.3, **kw)  # noqa: E731
    model = pmd.noise_aware_model(rel.public(), M, prior=prior)
    assert np.array_equal(model["released"].get_value(), rel.tangent["coords"])
    values = pmd.noise_aware_data(model, np.array([0.1, 0.2]))
    assert np.array_equal(values["released"], [0.1, 0.2])
    again = pmd.noise_aware_data(model, rel.public())
    assert np.array_equal(again["released"], rel.tangent["coords"])
    other = pmd.TangentLaplaceMechanism(M, epsilon=1.0, center=c, radius=r).release(
        data, random_seed=3
    )
    with pytest.raises(ValueError, match="same tangent point and noise"):
        pmd.noise_aware_data(model, other.public())


def test_two_stage_and_incomplete_records_are_refused():
    M, _c, _r, _ = SPACES["H2"]
    two = {**record("H2", "gaussian", 0.2), "mechanism": "two-stage tangent Gaussian"}
    with pytest.raises(ValueError, match=r"two-stage .*partial likelihood"):
        pmd.noise_aware_model(two, M)
    bare = {k: v for k, v in record("H2", "gaussian", 0.2).items() if k != "tangent"}
    with pytest.raises(ValueError, match=r"publish Release\.public\(\)"):
        pmd.noise_aware_model(bare, M)
    wrong = record("H2", "gaussian", 0.2)
    wrong["tangent"] = {**wrong["tangent"], "noise": "k-norm"}
    with pytest.raises(ValueError, match="noise"):
        pmd.noise_aware_model(wrong, M)
    with pytest.raises(ValueError, match="compact"):  # H^2: no default uniform prior
        pmd.noise_aware_model(record("H2", "gaussian", 0.2), M)


ADVERSARIAL = st.one_of(
    st.sampled_from(
        [
            None, True, "0.1", 1 / 3, 0.3333333333333333, 5e-324, 1e308, 10**400,
            float("nan"), float("inf"), [0.1], [0.1, 0.2, 0.3], [[0.1, 0.2]],
            [0.1, float("nan")], [1e308, -1e308], [5e-324, math.nextafter(0.0, 1.0)],
            [10**400, 0], [True, False], ["a", "b"],
        ]
    ),
    st.lists(st.floats(allow_nan=True, allow_infinity=True), min_size=0, max_size=3),
)  # fmt: skip


@given(coords=ADVERSARIAL)
def test_tangent_coordinates_are_d_finite_numbers(coords):
    M, c, _r, _ = SPACES["S2"]
    rec = record("S2", "gaussian", 0.2)
    rec["tangent"] = {**rec["tangent"], "coords": coords}
    try:
        u = np.asarray(coords, dtype=float)
        ok = u.shape == (2,) and bool(np.all(np.isfinite(u)))
    except (TypeError, ValueError, OverflowError):
        ok = False
    if ok:
        model = pmd.noise_aware_model(rec, M, prior=fixed(c))
        assert np.array_equal(model["released"].get_value(), u)
    else:
        with pytest.raises((ValueError, TypeError, OverflowError)):
            pmd.noise_aware_model(rec, M, prior=fixed(c))


@given(sigma=ADVERSARIAL)
def test_tangent_sigma_is_a_number_in_its_float_range(sigma):
    M, c, _r, _ = SPACES["S2"]
    rec = record("S2", "k-norm", sigma)
    try:
        value = float(sigma)
        # a number in [1e-150, 1e150] (1/sigma^2 and sigma^d normal floats)
        ok = not isinstance(sigma, bool | str) and 1e-150 <= value <= 1e150
    except (TypeError, ValueError, OverflowError):
        ok = False
    if ok:
        model = pmd.noise_aware_model(rec, M, prior=fixed(c))
        assert np.isfinite(_logp_at(model))
    else:
        with pytest.raises((ValueError, TypeError, OverflowError)):
            pmd.noise_aware_model(rec, M, prior=fixed(c))


# --- simulation-based calibration -----------------------------------------------------


def _model(space):
    M, c, _r, prior_sigma = SPACES[space]
    prior = None
    if prior_sigma is not None:
        prior = lambda n, **kw: pmd.ManifoldLaplace(n, M, c, prior_sigma, **kw)  # noqa: E731
    recs = [record(space, "gaussian", 0.2), record(space, "k-norm", 0.15)]
    return pmd.noise_aware_model(recs, M, prior=prior)


def _study(space, replicates, factor=1.0, seed=3):
    M, c, _, _ = SPACES[space]
    original = inference.tangent_noise

    def drawn_at(noise, dim, sigma, size, rng):  # the releases' noise, factor * sigma
        return original(noise, dim, factor * sigma, size, rng)

    def coordinates(points):
        points = np.asarray(points)
        return np.asarray(M.log_coords(np.broadcast_to(c, points.shape), points))

    # strict IEEE: the ranks are the same in a cold and a warm process (test_sbc_manifolds)
    with (
        mock.patch.object(inference, "tangent_noise", drawn_at),
        pytensor.config.change_flags(numba__fastmath=False),
    ):
        return pmd.calibration_study(
            _model(space), replicates=replicates, statistics=coordinates, backend="nutpie",
            random_seed=seed, draws=100, tune=100, chains=2, thin=4, bins=8,
        )  # fmt: skip


def _pvalues(res):
    replicates = res.ranks.shape[0]
    null = LEVEL * (res.n_draws - 1) / (res.n_draws + 1)
    covered = np.rint(np.asarray(res.coverage.loc[LEVEL]) * replicates).astype(int)
    binomial = [sps.binomtest(int(k), replicates, null).pvalue for k in covered]
    return np.concatenate([res.pvalues, binomial])


# S^2 in the default tier; H^2 and SPD(2) (the same likelihood code, each about 40 CPU-s
# for its two studies, docs/benchmarks.md "Test tiers") in the slow tier, beside their
# 150-replicate studies
@needs_nutpie
@pytest.mark.parametrize(
    "space",
    [
        "S2",
        pytest.param("H2", marks=pytest.mark.slow),
        pytest.param("SPD2", marks=pytest.mark.slow),
    ],
)
def test_sbc_is_calibrated_and_catches_releases_at_twice_the_sigma(space):
    res = _study(space, 40)
    p = _pvalues(res)
    assert res.n_draws == 50 and p.min() > ALPHA / p.size, (p, res.coverage)
    wrong = _pvalues(_study(space, 40, factor=2.0))
    assert wrong.min() < ALPHA / wrong.size, wrong


@pytest.mark.slow
@needs_nutpie
@pytest.mark.parametrize("space", list(SPACES))
def test_a_larger_sbc_is_calibrated_and_catches_a_sigma_50_percent_off(space):
    res = _study(space, 150, seed=11)
    p = _pvalues(res)
    assert p.min() > ALPHA / p.size, (p, res.coverage)
    wrong = _pvalues(_study(space, 150, factor=1.5, seed=11))
    assert wrong.min() < ALPHA / wrong.size, wrong
