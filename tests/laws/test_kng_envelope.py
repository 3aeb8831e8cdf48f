"""KNG's exact sampler with the local (shell-wise) envelope: law, acceptance, errors.

The oracle for non-identical data is independent of the sampler: the CDF of the
polar angle θ = ρ(m0, x) (and of the distance to one record) under KNG's density
``mech.logp`` (the definition), integrated on a fine (θ, φ) grid of S² with the
textbook area element ``sin θ dθ dφ``.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

import pymc_manidp as pmd
from pymc_manidp.laws import exact
from pymc_manidp.laws.exact import kng_mean

S2 = pmd.Sphere(dim=2)
NORTH = np.array([0.0, 0.0, 1.0])
ALPHA = 0.01
N = 20_000


def _sphere_point(theta, phi):
    return np.stack([np.sin(theta) * np.cos(phi), np.sin(theta) * np.sin(phi), np.cos(theta)], -1)


def _data(n, r, seed):
    """Records spread over the ball, a cluster off-center plus some on the boundary."""
    rng = np.random.default_rng(seed)
    th = np.concatenate([rng.uniform(0.3 * r, 0.6 * r, n - 5), np.full(5, 0.999 * r)])
    ph = np.concatenate([rng.normal(0.5, 0.4, n - 5), rng.uniform(0, 2 * np.pi, 5)])
    return _sphere_point(th, ph)


def _quadrature_cdfs(mech, data, stats_fns, nt=2800, nph=350):
    """CDFs of each statistic of x under KNG's law, by quadrature on the ball.

    A fine grid in θ: the mass of a row of cells sits at its center value, an error of
    up to half a row's mass in the CDF of θ. With 700 rows, the narrow law of
    ε = 5 (σ ≈ 0.03) was refuted at N = 20,000 by the grid alone (KS p = 0.0004 to
    0.09 over six seeds; 0.02 to 0.68 with 2,800 rows), not by the sampler.
    """
    r = mech.domain.radius
    th = (np.arange(nt) + 0.5) * r / nt
    ph = (np.arange(nph) + 0.5) * 2 * np.pi / nph
    T, P = np.meshgrid(th, ph, indexing="ij")
    x = _sphere_point(T.ravel(), P.ravel())
    logw = np.log(np.sin(T.ravel())) + mech.logp(x, data)
    w = np.exp(logw - logw.max())
    w /= w.sum()
    cdfs = []
    for fn in stats_fns:
        v = fn(x)
        order = np.argsort(v)
        # each cell's mass sits at its center value: the CDF there counts half of it
        vs, cs = v[order], np.cumsum(w[order]) - 0.5 * w[order]
        cdfs.append(lambda q, vs=vs, cs=cs: np.interp(q, vs, cs, left=0.0, right=1.0))
    return cdfs


@pytest.mark.slow
@pytest.mark.parametrize("epsilon", [1.0, 5.0])
def test_kng_law_near_r_star_matches_quadrature(epsilon):
    """r = 0.99 r* on S² (Lemma 1's H = 0.03), n = 40 spread records.

    N = 20,000, α = 0.01 per statistic. The local envelope must accept far more than
    Lemma 1's slope would (about H^2 ≈ 1e-3 of proposals) and give the exact law.
    """
    r = 0.99 * np.pi / 4
    data = _data(40, r, seed=3)
    mech = pmd.KNGMechanism(S2, epsilon=epsilon, center=NORTH, radius=r)
    x, info = mech.sample(data, N, random_seed=4, return_info=True)
    assert info["acceptance_rate"] > 0.2
    assert info["envelope_slope_H"] < 0.05
    fns = [lambda y: S2.dist(NORTH, y), lambda y: S2.dist(data[0], y)]
    for fn, cdf in zip(fns, _quadrature_cdfs(mech, data, fns), strict=True):
        assert stats.kstest(fn(x), cdf).pvalue > ALPHA
    # the test has power: KNG with a 20% larger sigma is refuted by the same oracle
    wrong = pmd.KNGMechanism(S2, epsilon=epsilon / 1.2, center=NORTH, radius=r)
    y = wrong.sample(data, N, random_seed=4)
    pvals = [
        stats.kstest(fn(y), cdf).pvalue
        for fn, cdf in zip(fns, _quadrature_cdfs(mech, data, fns), strict=True)
    ]
    assert min(pvals) < ALPHA


def test_an_envelope_that_overstates_the_curvature_is_caught(monkeypatch):
    """h inflated by 30%: the bound g exceeds |grad F| somewhere, and the sampler
    refuses (fails closed) instead of returning draws of a wrong law."""
    r = 0.99 * np.pi / 4
    data = _data(40, r, seed=3)
    dom = pmd.DataDomain(S2, NORTH, r)
    true_h = kng_mean._h
    monkeypatch.setattr(kng_mean, "_h", lambda s, kappa: 1.3 * true_h(s, kappa))
    with pytest.raises(exact.ExactSamplingError, match="violated the KNG envelope bound"):
        exact.sample_kng(S2, data, 0.01, 5000, rng=1, domain=dom)


@pytest.mark.parametrize(
    "M, center, r",
    [
        (S2, NORTH, np.pi / 8),
        (S2, NORTH, 0.999 * np.pi / 4),
        (
            pmd.KendallShape(k_landmarks=4),
            np.array([[0, 0], [1, 0], [1, 1], [0, 1.0]]),
            0.99 * np.pi / 8,
        ),
    ],
)
def test_acceptance_does_not_collapse_as_n_epsilon_grows(M, center, r):
    """Acceptance stays above 0.3 from n·ε = 1e3 to 1e10 (it fell to 0 before, when
    the mean's rounding slack 1e-9 r and Lemma 1's slope H dominated)."""
    rng = np.random.default_rng(0)
    dom = pmd.DataDomain(M, center, r)
    data = dom.check(M.exp_coords(dom.center, rng.normal(size=(1000, M.dim)) * r / 3), clip=True)
    for eps in (1.0, 1e3, 1e7):
        mech = pmd.KNGMechanism(M, epsilon=eps, center=center, radius=r)
        _, info = mech.sample(data, 200, random_seed=1, return_info=True)
        assert info["acceptance_rate"] > 0.3, eps


def test_the_cap_error_names_floating_point_when_sigma_is_below_the_means_precision():
    """A mean known only to ±e with L e/σ large: the message says floating point and
    a smaller epsilon, not 'more data / a larger epsilon'."""
    dom = pmd.DataDomain(S2, NORTH, np.pi / 8)
    data = _data(50, np.pi / 8, seed=1)
    with pytest.raises(exact.ExactSamplingError) as err:
        exact.sample_kng(S2, data, 1e-16, 1, rng=0, domain=dom, max_attempts=50)
    msg = str(err.value)
    assert "floating point" in msg and "smaller epsilon" in msg
    assert "larger epsilon" not in msg and "rows" not in msg and "KNG" in msg


def test_cap_errors_name_the_mechanism_that_hit_them():
    """An SPD KNG release stopped at its cap used to report 'SPD(2) Laplace radial law'."""
    P = pmd.SPD(k=2)
    dom = pmd.DataDomain(P, np.eye(2), 1.5)
    data = P.exp_coords(np.eye(2), np.random.default_rng(0).normal(size=(20, 3)) * 0.5)
    data = dom.check(data, clip=True)
    with pytest.raises(exact.ExactSamplingError) as err:
        exact.sample_kng(P, data, 5.0, 200, rng=0, domain=dom, max_attempts=1)
    assert "KNG" in str(err.value) and "Laplace radial law" not in str(err.value)
    with pytest.raises(exact.ExactSamplingError) as err:
        exact.sample_laplace(P, np.eye(2), 5.0, 200, rng=0, domain=dom, max_attempts=1)
    assert "restricted Laplace" in str(err.value) and "rows" not in str(err.value)


# --- radii an ulp below r* (issue 43 item 5) --------------------------------------------------
def _below(r_star, which):
    if which == "1e-9":
        return r_star * (1 - 1e-9)
    r = np.nextafter(r_star, 0.0)
    return r if which == "1ulp" else np.nextafter(r, 0.0)


@pytest.mark.parametrize("which", ["1ulp", "2ulp", "1e-9"])
@pytest.mark.parametrize(
    "M",
    [
        pmd.Sphere(dim=5),
        pmd.KendallShape(k_landmarks=3),
        pmd.KendallShape(k_landmarks=5),
        pmd.Rotations(),
    ],
    ids=str,
)
def test_kng_mean_releases_at_radii_just_below_r_star(M, which):
    """At r* - 1 ulp, H = h(2r) is ~4e-16 (a cot next to pi/2) and the shells' slopes
    with it: their upper incomplete gammas were both 1 and each shell's mass 0, so these
    raised "the shells' weights are not a distribution" (Kendall and SO(3) with records
    at the edge; S^5 with two clusters at opposite edges, at r*(1 - 1e-9) and eps = 1e-3).
    The masses now come from the lower tail. On SO(3) such radii are refused (records
    at opposite edges sat within log's 1e-8 of a half turn: the median raised
    ValueError after reading them) and the largest supported radius releases."""
    r = _below(M.max_radius, which)
    center = M.generic_point
    if M.log_cut_margin:
        # SO(3): records at opposite edges are 2r ~ pi - 4e-16 apart, where log refuses
        # (within 1e-8 of a half turn): such radii are refused before anything is read,
        # and the largest supported radius, pi/2 - 1e-8, is the one tried
        with pytest.raises(ValueError, match="the largest radius supported on Rotations"):
            pmd.KNGMechanism(M, epsilon=1.0, center=center, radius=r)
        largest = 0.5 * M.injectivity_radius - M.log_cut_margin
        r = largest if which == "1e-9" else _below(np.nextafter(largest, 4.0), which)
    rng = np.random.default_rng(0)
    c = rng.normal(size=(20, M.dim))
    two = np.repeat(c[:1], 20, 0)
    two[10:] *= -1
    for coords in (c, two):  # records on the edge: spread, and two opposite clusters
        coords = coords * (r * (1 - 1e-12) / np.linalg.norm(coords, axis=-1))[:, None]
        data = M.exp_coords(center, coords)
        released = 0
        for eps in (1e-3, 1.0):
            mech = pmd.KNGMechanism(M, epsilon=eps, center=center, radius=r)
            budget = pmd.PrivacyBudget(10.0)
            try:
                rel = mech.release(data, random_seed=1, budget=budget)
            except ValueError as err:
                # issue 43's contract: a refusal comes from public facts, before the
                # charge (sigma above the shells' range, or H so small near r* that the
                # mean's rounding exceeds sigma): nothing spent
                assert "sigma" in str(err), err
                assert budget.spent.epsilon == 0.0
                continue
            released += 1
            assert float(M.dist(center, M.validate(rel.value))) <= r
        assert released  # the shells' masses from the lower tail release at some epsilon
    if M.log_cut_margin:  # the median, whose Weiszfeld steps visit records, there too
        mech = pmd.KNGMechanism(M, epsilon=1.0, center=center, radius=r, statistic="median")
        assert float(M.dist(center, M.validate(mech.release(data, random_seed=1).value))) <= r
