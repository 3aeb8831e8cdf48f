"""L-lag coupling bounds on TV(pi_t, pi) and the estimated delta of MCMC releases.

The chains and kernels themselves are tested in tests/mcmc/test_kernels.py. Oracles
here: an independent formula for the L-lag bound and, on the sphere, the exact sampler:
the chain's time-t law is simulated by many independent chains and compared with exact
draws on a 1-D statistic (distance to the footpoint). Every histogram TV is a lower
bound of the true TV (data processing) up to its sampling noise, so a valid bound must
lie above it at every t.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pymc as pm
import pytest
from scipy import stats

import pymc_manidp as pmd
from pymc_manidp import mcmc
from pymc_manidp.privacy import coupling as cp
from pymc_manidp.privacy.release import MCMC_DELTA_ESTIMATED_NOTE, MCMC_DELTA_NOTE

ALPHA = 0.01


# ------------------------------------------------------------------ helpers


def sphere_laplace():
    """Unrestricted Laplace on S^2, n = 50 records near the north pole (seed 0)."""
    rng = np.random.default_rng(0)
    S = pmd.Sphere(dim=2)
    north = np.array([0.0, 0.0, 1.0])
    tangent = np.concatenate([rng.normal(size=(50, 2)) * 0.1, np.zeros((50, 1))], axis=1)
    data = S.exp(north, tangent)
    mech = pmd.LaplaceMechanism(S, epsilon=1.0, center=north, radius=np.pi / 8)
    return S, mech, data


def far_init(target, shift=4.0):
    """PyMC's jittered start, with the log-radius moved up by ``shift``: far from the mode.

    In the polar chart (``PolarChart``: unconstrained value ``(z, s)``) the last
    coordinate is the log-radius ``s``; ``shift = 4`` puts the chains about 1.9 rad
    from the footpoint, where the target (sigma = 0.024) has no mass.
    """
    assert target.names[-1][0] == "release_polar__"

    def init(size, rng):
        q = target.start + rng.uniform(-1.0, 1.0, size=(size, target.dim))
        q[:, -1] += shift
        return q

    return init


def histogram_tv(a, b, edges):
    pa = np.histogram(a, edges)[0] / len(a)
    pb = np.histogram(b, edges)[0] / len(b)
    return 0.5 * np.abs(pa - pb).sum()


def histogram_noise(n, bins):
    """Expected histogram TV of two independent samples of size n from one law.

    With equiprobable bins E|p_a - p_b| ~ sqrt(2 p (1 - p) / n) sqrt(2/pi) per bin.
    """
    p = 1.0 / bins
    return 0.5 * bins * np.sqrt(2 * p * (1 - p) / n) * np.sqrt(2 / np.pi)


# ------------------------------------------------------------------ the bound


def test_tv_bound_matches_the_tail_sum_formula():
    # independent form: E[ceil((tau - L - t)/L)^+] = sum_{j >= 0} P(tau > L + t + j L)
    rng = np.random.default_rng(2)
    lag = 7
    tau = lag + rng.geometric(0.05, size=300)
    ts = np.arange(0, 120, 5)
    b = cp.tv_bound(tau, lag, ts)
    tails = np.array([sum(np.mean(tau > lag + t + j * lag) for j in range(200)) for t in ts])
    np.testing.assert_allclose(b.raw, tails)
    # a TV is at most 1: the bound is the capped mean (issue 25, item 22), and the
    # early times do exceed 1 here, so the cap is exercised
    assert tails[0] > 2.0
    np.testing.assert_allclose(b.estimate, np.minimum(1.0, tails))
    assert np.all(b.upper(2.0) <= 1.0) and np.all(b.lower(2.0) <= b.estimate)
    assert np.all(np.diff(b.estimate) <= 0)  # a bound on a non-increasing TV
    with pytest.raises(ValueError, match="smaller than the lag"):
        cp.tv_bound(tau, lag + 100, ts)


def test_upper_limit_when_no_pair_was_late_is_the_rule_of_three():
    # oracle: the exact one-sided Clopper-Pearson limit after 0 events in R trials,
    # Beta(1, R)'s (1 - alpha) quantile, alpha = 0.05 at z = 1.96 (the rule of three,
    # ~3/R); at that p the chance of seeing no late pair in R is alpha exactly
    alpha = 2 * stats.norm.sf(1.96)  # 0.05 to 4 digits
    for reps in (20, 100, 200, 5000):
        p = cp.none_late_upper(reps, z=1.96)
        assert p == pytest.approx(stats.beta.ppf(1 - alpha, 1, reps), rel=1e-9)
        assert (1 - p) ** reps == pytest.approx(alpha, rel=1e-9)
        assert 2.7 < p * reps < 3.0  # the rule of three, 3/R (an upper bound of it)
    assert 0.0149 < cp.none_late_upper(200) < 0.0156  # "R = 200: about 0.015"
    # every pair met before t: estimate and se are 0, but the upper limits are not
    lag, reps = 10, 200
    tau = lag + np.arange(reps) % 5  # all meet within 5 steps after the lag
    b = cp.tv_bound(tau, lag, [0, 50])
    assert b.raw[1] == 0.0 and b.se[1] == 0.0
    assert b.upper(2.0)[1] == cp.none_late_upper(reps)  # was 0.0 before issue 28
    assert b.upper(2.0)[0] == pytest.approx(min(1.0, b.raw[0] + 2 * b.se[0]))  # unchanged
    est = cp.DeltaEstimate(1.0, 50, 0.0, 0.0, 0.0, 0.0, b)
    assert est.delta_upper() == pytest.approx((1 + np.e) * cp.none_late_upper(reps))
    assert est.as_dict()["delta_upper_2se"] == est.delta_upper() > 0.0
    with pytest.raises(ValueError, match="reps"):
        cp.none_late_upper(0)


# ------------------------------------------------------------- validation against the exact law


@pytest.fixture(scope="module")
def sphere_run():
    """Meeting times (R = 500, L = 20) and 20,000 chains of RWMH(0.5) on the S^2 Laplace."""
    S, mech, data = sphere_laplace()
    model = mech.model(data)
    target = mcmc.BatchTarget(model)
    init = far_init(target)
    kernel = mcmc.RWMH(0.5)
    lag, ts = 20, np.arange(0, 120, 6)
    tau = mcmc.meeting_times(target, kernel, lag=lag, reps=500, init=init, random_seed=1)
    states = mcmc.draw_chain(target, kernel, ts[-1], 20_000, init=init, random_seed=2, record=ts)
    exact = S.dist(mech.footpoint(data)[1], mech.sample(data, 20_000, random_seed=3))
    edges = np.quantile(exact, np.linspace(0, 1, 21))
    edges[0], edges[-1] = 0.0, np.inf
    tv = np.array(
        [histogram_tv(target.deterministic("distance", states[t]), exact, edges) for t in ts]
    )
    return dict(
        model=model, target=target, init=init, kernel=kernel, lag=lag, ts=ts, tau=tau,
        exact=exact, edges=edges, tv=tv,
    )  # fmt: skip


def test_tv_bound_lies_above_the_true_tv_across_the_transient(sphere_run):
    # 20 equiprobable bins, 20,000 chain states vs 20,000 exact draws: the histogram TV
    # has a noise floor of about 0.014; allowed: twice that, plus 2 s.e. of the bound.
    r = sphere_run
    bound = cp.tv_bound(r["tau"], r["lag"], r["ts"])
    slack = 2 * histogram_noise(20_000, 20) * np.sqrt(2)
    assert np.all(r["tv"] <= bound.upper(2.0) + slack), (r["tv"], bound.estimate)
    # the transient is real: the chain starts far (TV near 1) and the bound follows it
    assert r["tv"][0] > 0.9 and bound.estimate[0] > 0.9
    assert r["tv"][-1] < 0.05 and bound.estimate[-1] < 0.01
    # a deliberately wrong bound (meeting times counted from the start of the coupled
    # phase, i.e. off by one lag: the bound at t + L) falls below the true TV
    wrong = cp.tv_bound(r["tau"], r["lag"], r["ts"] + r["lag"])
    assert np.any(r["tv"] > wrong.upper(2.0) + slack)


def test_comparison_catches_a_chain_of_the_wrong_law(sphere_run):
    # the same chains with half the rate: they meet and the bound vanishes, but their
    # law is not the mechanism's; the exact-law comparison shows it (what the validation
    # above would report for a wrong model).
    r = sphere_run
    model = r["model"]
    sigma = float(model["scale"].get_value())
    try:
        pm.set_data({"scale": sigma / 2}, model=model)
        far = mcmc.draw_chain(r["target"], r["kernel"], 120, 20_000, init=r["init"], random_seed=7)
        tv = histogram_tv(r["target"].deterministic("distance", far), r["exact"], r["edges"])
        tau = mcmc.meeting_times(
            r["target"], r["kernel"], lag=20, reps=200, init=r["init"], random_seed=8
        )
    finally:
        pm.set_data({"scale": sigma}, model=model)
    assert cp.tv_bound(tau, 20, [120]).upper(2.0)[0] < 0.05
    assert tv > 0.3


def test_estimate_catches_a_short_chain_and_clears_a_long_one():
    # Laplace on S^2 (n = 50, epsilon = 1), tuned RWMH from far away (init as above),
    # R = 100 pairs. t = 5: well inside the transient, delta_hat must be large;
    # t = 1,000 (the default tune length, L = 1,000): the bound must vanish.
    _, mech, data = sphere_laplace()
    target = mcmc.BatchTarget(mech.model(data))
    init = far_init(target)
    kernel = mcmc.tune_kernel(target, "rwmh", init=init, random_seed=9)
    short = cp.estimate_delta(
        target, epsilon=1.0, t=5, kernel=kernel, reps=100, init=init, random_seed=10
    )
    long = cp.estimate_delta(
        target, epsilon=1.0, t=1000, kernel=kernel, reps=100, init=init, random_seed=11
    )
    # (1 + e) * TV_hat > 1: delta_hat is capped at 1 (vacuous), and so is the lower
    # end of its band: the chain is caught beyond the Monte Carlo error
    assert short.tv > 0.9 and short.delta_hat == 1.0
    at_5 = cp.tv_bound(short.bound.meeting_times, short.bound.lag, [5])
    assert (1 + np.e) * at_5.lower(2.0)[0] > 1.0
    # every pair met in time: TV_hat = 0 +- 0, but 100 pairs cannot certify 0; the
    # stated upper limit is the rule of three's (issue 28, item 7)
    assert long.tv == 0.0 and long.tv_se == 0.0
    assert long.delta_upper() == pytest.approx((1 + np.e) * cp.none_late_upper(100))
    record = long.as_dict()
    assert record["delta_upper_2se"] == long.delta_upper() > 0.0
    assert record["label"].startswith("ESTIMATE") and record["kernel"]["kernel"] == "RWMH"
    assert record["t"] == 1000 and record["lag"] == 1000 and record["reps"] == 100


# ------------------------------------------------------- delta_hat's range, t, the budget


def test_delta_from_tv_is_the_conversion_capped_at_one_for_any_epsilon():
    # closed form (1 + e^eps) * gamma below 1; a delta of 1 or more is vacuous (every
    # mechanism is (eps, 1)-DP), so it is capped; e^eps overflowing a float (eps > 709.78)
    # gives 0 for a zero TV and 1 otherwise, never OverflowError (issue 25, item 22)
    assert cp.delta_from_tv(1.0, 0.01) == pytest.approx((1 + np.e) * 0.01)
    assert cp.delta_from_tv(np.log(3.0), 0.2) == pytest.approx(0.8)
    assert cp.delta_from_tv(np.log(3.0), 0.3) == 1.0  # 1.2 capped
    assert cp.delta_from_tv(1.0, 5.0) == 1.0  # an uncapped L-lag mean above 1
    assert cp.delta_from_tv(1e300, 0.0) == 0.0
    assert cp.delta_from_tv(1e300, 1e-12) == 1.0
    assert cp.delta_from_tv(709.0, 1e-320) == pytest.approx((1 + np.exp(709.0)) * 1e-320)
    with pytest.raises(ValueError, match="tv must be a number >= 0"):
        cp.delta_from_tv(1.0, float("nan"))
    with pytest.raises(ValueError, match="epsilon must be a finite number > 0"):
        cp.delta_from_tv(float("inf"), 0.1)


@pytest.fixture(scope="module")
def sphere_target():
    _, mech, data = sphere_laplace()
    return mech, mcmc.BatchTarget(mech.model(data))


def test_coupled_release_delta_hat_never_exceeds_one(sphere_target):
    # issue 25, item 22: at t = 1 (L = 1) the pairs meet tens of lags late, the L-lag
    # mean is far above 1, and delta_hat was (1 + e) times it (20.8). Now the TV bound
    # is capped at 1 and delta_hat, its s.e. and upper limit at 1, also for an epsilon
    # whose e^epsilon overflows (1e300 raised OverflowError).
    _, target = sphere_target
    kernel = mcmc.RWMH(0.5)
    for epsilon in (1.0, 1e300):
        _, rec = cp.coupled_release(
            target, epsilon=epsilon, t=1, kernel=kernel, reps=50, chains=10, random_seed=21
        )
        assert max(rec["curve"]["raw"]) > 2.0  # the uncapped mean: the cap is exercised
        assert rec["tv_hat"] == 1.0 and rec["delta_hat"] == 1.0
        assert rec["delta_se"] <= 1.0 and rec["delta_upper_2se"] <= 1.0
        assert max(rec["curve"]["tv_hat"]) <= 1.0
        assert "capped at 1" in rec["note"] and "every data set" in rec["note"]


def test_conditioned_delta_hat_is_capped_for_any_epsilon(sphere_target):
    # the restricted-law path (2 TV / p) with e^epsilon overflowing: a finite delta_hat
    # in {0, 1}, 0 exactly when the conditioned TV bound is 0
    mech, target = sphere_target
    _, rec = cp.coupled_release(
        target, epsilon=1e300, t=30, kernel=mcmc.RWMH(0.5), domain=mech.domain,
        reps=50, chains=50, random_seed=22,
    )  # fmt: skip
    assert rec["inside_fraction"] > 0
    assert rec["delta_hat"] == (0.0 if rec["tv_conditioned_hat"] == 0 else 1.0)
    assert 0.0 <= rec["delta_upper_2se"] <= 1.0 and 0.0 <= rec["delta_se"] <= 1.0


@pytest.mark.parametrize("fn", [cp.coupled_release, cp.estimate_delta])
def test_t_must_be_at_least_one(fn, sphere_target):
    # t = 0 released a draw of the initial law (issue 25, item 22)
    _, target = sphere_target
    for t in (0, -3):
        with pytest.raises(ValueError, match=f"t must be an integer >= 1, got {t}: .*initial law"):
            fn(target, epsilon=1.0, t=t, kernel=mcmc.RWMH(0.5), random_seed=0)
    with pytest.raises(TypeError, match="t must be an integer"):
        fn(target, epsilon=1.0, t=1.5, kernel=mcmc.RWMH(0.5), random_seed=0)


@pytest.fixture
def no_chains_run(monkeypatch):
    """Any chain run fails the test: a refusal must come before the chains."""
    from pymc_manidp.mcmc import kernels

    def ran(*args, **kwargs):
        raise AssertionError("a chain ran before the budget check")

    for name in ("meeting_times", "draw_chain", "run_chain"):
        monkeypatch.setattr(kernels, name, ran)


def test_time_budget_refuses_a_huge_t_before_running(sphere_target, monkeypatch, no_chains_run):
    # issue 25, item 22: t = 10**9 had no time limit. The lag phase and the released
    # chains are costed from the measured cost of one batched step, and refused with
    # the numbers against the MCMC budget (600 s unless the environment says otherwise)
    _, target = sphere_target
    monkeypatch.delenv(mcmc.MAX_SECONDS_ENV, raising=False)
    with pytest.raises(ValueError) as err:
        cp.coupled_release(target, epsilon=1.0, t=10**9, kernel=mcmc.RWMH(0.5), random_seed=0)
    msg = str(err.value)
    assert "t = 1000000000 would take at least" in msg and "over the 600 s budget" in msg
    assert "L = 1000000000 steps of 200 chains" in msg and "t = 1000000000 steps of 200" in msg
    assert mcmc.MAX_SECONDS_ENV in msg
    # the budget comes from the environment variable, or from max_seconds
    monkeypatch.setenv(mcmc.MAX_SECONDS_ENV, "1e-6")
    with pytest.raises(ValueError, match="over the 1e-06 s budget"):
        cp.estimate_delta(target, epsilon=1.0, t=10, kernel=mcmc.RWMH(0.5), random_seed=0)
    monkeypatch.delenv(mcmc.MAX_SECONDS_ENV)
    with pytest.raises(ValueError, match="over the 1e-06 s budget"):
        cp.coupled_release(
            target, epsilon=1.0, t=10, kernel=mcmc.RWMH(0.5), max_seconds=1e-6, random_seed=0
        )
    with pytest.raises(ValueError, match="max_seconds must be a finite number > 0"):
        cp.estimate_delta(
            target, epsilon=1.0, t=10, kernel=mcmc.RWMH(0.5), max_seconds=float("nan")
        )


def test_meeting_phase_stops_when_its_time_budget_is_spent(sphere_target):
    # the coupled phase has a random length: it stops with a CouplingError naming the
    # budget once that is spent (checked after each coupled step; a budget of 1 ns is
    # spent after the first, and from the far start no pair meets in one step)
    _, target = sphere_target
    init = far_init(target)
    with pytest.raises(mcmc.CouplingError, match=r"20 of 20 coupled pairs had not met after 1 "):
        mcmc.meeting_times(
            target, mcmc.RWMH(0.5), lag=1, reps=20, init=init, max_seconds=1e-9, random_seed=3
        )
    # without a budget the same pairs meet
    tau = mcmc.meeting_times(target, mcmc.RWMH(0.5), lag=1, reps=20, init=init, random_seed=3)
    assert tau.shape == (20,) and np.all(tau > 1)


def laplace_case(name):
    """Unrestricted Laplace on SPD(2) (n = 50) or Kendall(8) (n = 200), seed 12."""
    rng = np.random.default_rng(12)
    if name == "SPD2":
        P = pmd.SPD(k=2)
        a = rng.normal(size=(50, 2, 2)) * 0.2
        data = P.exp(np.eye(2), a + np.swapaxes(a, 1, 2))
        return P, pmd.LaplaceMechanism(P, epsilon=1.0, center=np.eye(2), radius=1.5), data
    K = pmd.KendallShape(k_landmarks=8)
    angles = np.arange(8) * 2 * np.pi / 8
    base = np.stack([np.cos(angles), 0.6 * np.sin(angles)], axis=1)
    data = base + rng.normal(size=(200, 8, 2)) * 0.01
    return K, pmd.LaplaceMechanism(K, epsilon=1.0, center=K.validate(base), radius=0.2), data


@pytest.mark.slow
@pytest.mark.parametrize("case", ["SPD2", "Kendall8"])
def test_tv_bound_above_true_tv_on_spd_and_kendall(case):
    # as on S^2, with a tuned RWMH started far away (log-radius + 4: 55 sigma on SPD(2),
    # about 50 sigma on Kendall(8)), R = 300, L = 50, 12 times spanning the transient;
    # 5,000 chains vs 5,000 exact draws, 20 bins (noise floor about 0.035; allowed twice
    # that, times sqrt 2, plus 2 s.e.).
    M, mech, data = laplace_case(case)
    target = mcmc.BatchTarget(mech.model(data))
    init = far_init(target)
    kernel = mcmc.tune_kernel(target, "rwmh", random_seed=15)
    lag, n = 50, 5000
    tau = mcmc.meeting_times(target, kernel, lag=lag, reps=300, init=init, random_seed=16)
    ts = np.unique(np.linspace(0, np.quantile(tau - lag, 0.99), 12).astype(int))
    bound = cp.tv_bound(tau, lag, ts)
    states = mcmc.draw_chain(target, kernel, int(ts[-1]), n, init=init, random_seed=17, record=ts)
    exact = M.dist(mech.footpoint(data)[1], mech.sample(data, n, random_seed=18))
    edges = np.quantile(exact, np.linspace(0, 1, 21))
    edges[0], edges[-1] = 0.0, np.inf
    tv = np.array(
        [histogram_tv(target.deterministic("distance", states[t]), exact, edges) for t in ts]
    )
    slack = 2 * histogram_noise(n, 20) * np.sqrt(2)
    assert tv[0] > 0.9  # the start is far: the transient is tested
    assert np.all(tv <= bound.upper(2.0) + slack), (ts, tv, bound.estimate)


@pytest.mark.slow
@pytest.mark.parametrize("case", ["S2-hmc", "SPD2", "Kendall8"])
def test_bound_vanishes_by_the_default_tune_length(case):
    # tuned kernel, PyMC's default initial law, R = 100, L = t = 1,000: every pair met
    # within 1,000 coupled steps, so the estimate (and its s.e.) is 0; at t = 0 the
    # bound is positive (the chain does start away from the target).
    if case == "S2-hmc":
        _, mech, data = sphere_laplace()
        kind = "hmc"
    else:
        _, mech, data = laplace_case(case)
        kind = "rwmh"
    est = cp.estimate_delta(
        mech.model(data), epsilon=1.0, t=1000, kernel=kind, reps=100, random_seed=13
    )
    assert est.tv == 0.0 and est.tv_upper() == cp.none_late_upper(100)
    assert est.bound.estimate[0] > 0.0


# ------------------------------------------------------------------ the Release record


def test_release_records_delta_estimate_for_the_curator_only():
    # KNG on S^2, PyMC Metropolis (gate skipped: a short run), estimate_delta=True:
    # the value comes from the assessed chain at t = tune and lies in the public ball;
    # the estimate is recorded, labelled, and absent from public().
    S, _, data = sphere_laplace()
    mech = pmd.KNGMechanism(S, epsilon=1.0, center=[0, 0, 1.0], radius=np.pi / 8)
    rel = mech.release(
        data, sampler="metropolis", random_seed=14, skip_diagnostics=True, estimate_delta=True,
        settings=mcmc.MCMCSettings(draws=300, tune=200, chains=2, cores=1),
    )  # fmt: skip
    est = rel.delta_estimate
    assert rel.delta is None
    assert est["label"].startswith("ESTIMATE") and est["kernel"]["kernel"] == "RWMH"
    assert est["t"] == 200 and est["reps"] == 200 and 0 < est["inside_fraction"] <= 1
    assert est["delta_hat"] == pytest.approx(
        min(1.0, (1 + np.e) * min(1.0, 2 * est["tv_hat"] / est["inside_fraction"]))
    )
    assert est["delta_hat"] < 0.05  # a tuned chain from PyMC's start has long converged
    assert S.dist([0, 0, 1.0], rel.value) <= np.pi / 8
    public = rel.public()
    assert "delta_estimate" not in public and public["delta"] is None
    assert "delta_hat" not in str(public) and "ESTIMATE" not in str(public)
    # the published notes say that gamma was estimated, and give no number (issue 28)
    assert MCMC_DELTA_ESTIMATED_NOTE in rel.notes and MCMC_DELTA_NOTE not in rel.notes
    assert "not bounded by any computation" not in str(public)
    with pytest.raises(ValueError, match="MCMC samplers"):
        mech.release(data, estimate_delta=True)
    # the curator report shows the estimate and its curve; a release without one does not
    from pymc_manidp.privacy.diagnostics import report

    rep = report(rel)
    try:
        assert "tv_bound" in rep.figures and "delta ESTIMATE" in str(rep)
        ax = rep.figures["tv_bound"].axes[0]
        np.testing.assert_allclose(ax.lines[0].get_ydata(), est["curve"]["tv_hat"])
    finally:
        rep.close()
    rep = report(dataclasses.replace(rel, delta_estimate=None))
    assert "tv_bound" not in rep.figures and "ESTIMATE" not in str(rep)
    rep.close()


# ------------------------------------------------------------------ names served lazily


def test_unknown_names_fail():
    import pymc_manidp.privacy as privacy

    with pytest.raises(AttributeError, match="no attribute 'nothing_here'"):
        _ = privacy.nothing_here
    with pytest.raises(AttributeError, match="no attribute 'nothing_here'"):
        _ = cp.nothing_here


def test_coupling_error_is_one_class_without_a_warning():
    import warnings

    import pymc_manidp.privacy as privacy

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert privacy.CouplingError is cp.CouplingError is mcmc.CouplingError
    assert "CouplingError" in privacy.__all__ and "HMC" not in privacy.__all__


def test_importing_privacy_loads_no_pymc():
    """The Release record and the audits run without PyMC: the kernels load on first use."""
    import subprocess
    import sys
    from pathlib import Path

    code = (
        "import sys, pymc_manidp.privacy\n"
        "print(sorted(m for m in sys.modules if m in ('pymc', 'pymc_manidp.mcmc')))"
    )
    root = Path(pmd.__file__).parent.parent
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=root
    )
    assert out.stdout.strip() == "[]"
