"""The exact median's proved failure bound (issue 43 item 5; docs/exact.md, "The
median's proved failure bound").

The bound (``laws.median_floor.median_failure_bound``) is checked against an
independent computation: closed-form ball volumes and SciPy's binomial tail of the
acceptance it proves. The default (``median_floor="proved"``) refuses before the charge
where the bound is above 2^-64 (nothing spent, the data not read) and records the bound
where it accepts; ``median_floor="measured"`` is recorded. Planted bugs (the bound
without ``e^{-1/σ}``; a bound from the data's own envelope) are caught by the oracle.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import special, stats

import pymc_manidp as pmd
from pymc_manidp.laws import median_floor
from pymc_manidp.laws.exact import median_cells, median_shells
from pymc_manidp.laws.median_floor import (
    MEDIAN_FAILURE_LOG2_LIMIT,
    median_failure_bound,
    median_largest_n_epsilon,
    median_max_attempts,
)
from pymc_manidp.mechanisms.kng import MEDIAN_MEASURED_NOTE
from tests.untouchable import Untouchable

NORTH = np.array([0.0, 0.0, 1.0])
S2 = pmd.Sphere(dim=2)


def _log_unit_ball(d):
    return 0.5 * d * math.log(math.pi) - special.gammaln(0.5 * d + 1)


#: (space, center, radius, the exact volume of the ball): closed forms, not the module's
#: quadrature (S^2: 2π(1 - cos r); H^2: 2π(cosh r - 1); SO(3) with κ = 1/4:
#: 4π ∫ 4 sin^2(t/2) dt = 8π (r - sin r); R^d: ω_d r^d)
def _oracle_cases():
    return [
        (S2, NORTH, 0.7, 2 * math.pi * (1 - math.cos(0.7))),
        (
            pmd.Hyperbolic(dim=2),
            pmd.Hyperbolic(dim=2).origin,
            2.0,
            2 * math.pi * (math.cosh(2.0) - 1),
        ),
        (pmd.Rotations(), np.eye(3), 1.2, 8 * math.pi * (1.2 - math.sin(1.2))),
        (pmd.Euclidean(dim=3), np.zeros(3), 5.0, math.exp(_log_unit_ball(3)) * 125.0),
        (pmd.Euclidean(dim=1), np.zeros(1), 1.0, 2.0),
    ]


def _oracle_log_a(M, dom, volume, sigma):
    """The theorem's acceptance, computed independently (exact ball volume)."""
    d, r, G = M.dim, dom.radius, float(M.log_volume_growth)
    t = min(2 * r, float(M.injectivity_radius))
    envelope = max(
        d * math.log(2 * r) + G * r,
        1e-12 / sigma + _log_unit_ball(d) + d * math.log(t) + G * t,
    )
    return -(1 + dom.rounding_error) / sigma + math.log(volume) - envelope


def _check_bound(bound_fn, M, center, r, volume, sigma, cap):
    """The oracle: the bound is a valid upper bound of the binomial tail at the proved
    acceptance (every size s: fewer than s of K s accepted), and not looser than the
    Chernoff bound by more than rounding."""
    dom = pmd.DataDomain(M, center, r)
    b = bound_fn(dom, sigma, cap)
    log_a = _oracle_log_a(M, dom, volume, sigma)
    a = math.exp(log_a)
    for s in (1, 2, 7):
        tail = stats.binom.logcdf(s - 1, cap * s, a) / math.log(2)
        assert b.log2_failure >= tail - 1e-6 * abs(tail), (s, b, tail)
    if a > 1 / cap:
        chernoff = -cap * (
            (1 / cap) * math.log((1 / cap) / a) + (1 - 1 / cap) * math.log((1 - 1 / cap) / (1 - a))
        )
        assert b.log2_failure == pytest.approx(chernoff / math.log(2), rel=1e-3, abs=1e-6)
        assert b.log_acceptance == pytest.approx(log_a, rel=1e-3)
    else:
        assert b.log2_failure == 0.0


@pytest.mark.parametrize("case", range(5))
@pytest.mark.parametrize("n_eps", [1.0, 20.0, 30.0, 40.0, 60.0])
def test_bound_matches_an_independent_computation(case, n_eps):
    M, center, r, volume = _oracle_cases()[case]
    for cap in (10**6, 10**8):
        _check_bound(median_failure_bound, M, center, r, volume, 4.0 / n_eps, cap)


@given(
    n_eps=st.one_of(
        st.floats(1e-3, 80.0),
        st.sampled_from([1 / 3, 0.3333333333333333, 39.99999999999999, 5e-3]),
    ),
    cap=st.one_of(st.integers(1, 10**12), st.sampled_from([1, 2, 10**6, 2**53])),
)
def test_bound_holds_for_adversarial_sigma_and_cap(n_eps, cap):
    M, center, r, volume = _oracle_cases()[0]
    _check_bound(median_failure_bound, M, center, r, volume, 4.0 / n_eps, cap)


def _planted_without_exp_factor(dom, sigma, cap):
    """The bug: the target's mass taken as vol(B), without e^{-1/σ}."""
    true = median_failure_bound(dom, sigma, cap)
    log_a = min(0.0, true.log_acceptance + (1 + dom.rounding_error + 1e-9) / sigma)
    return median_floor.FailureBound(median_floor._log2_chernoff(log_a, cap), log_a, cap)


def _planted_data_envelope(dom, sigma, cap):
    """The bug: the shells' mass of one data set (records all at the center, where the
    envelope is the law itself) in place of the data-free bound."""
    M = dom.manifold
    data = np.repeat(dom.center[None], 20, axis=0)
    shells = median_shells._MedianShells.build(M, data, sigma, dom)
    log_target = -(1 + 1e-9) / sigma + median_floor._log_ball_volume_lower(M, dom.radius)
    log_a = min(0.0, log_target - shells.log_mass(M))
    return median_floor.FailureBound(median_floor._log2_chernoff(log_a, cap), log_a, cap)


@pytest.mark.parametrize("planted", [_planted_without_exp_factor, _planted_data_envelope])
def test_planted_bugs_are_caught_by_the_oracle(planted):
    """Each planted bound claims a failure chance below the binomial tail of the
    acceptance some data set has: the oracle check fails on it."""
    M, center, r, volume = _oracle_cases()[0]
    with pytest.raises(AssertionError):
        for n_eps in (20.0, 30.0, 40.0):
            _check_bound(planted, M, center, r, volume, 4.0 / n_eps, 10**6)


# --- the envelopes the sampler builds stay below the data-free masses ----------------------
def _placements(M, center, r, n=12, seed=0):
    u = np.random.default_rng(seed).normal(size=(n, M.dim))
    u /= np.linalg.norm(u, axis=1, keepdims=True)
    t = r * (1 - 1e-9)
    out = {
        "one edge point": np.repeat(t * u[:1], n, axis=0),
        "opposite": t * np.array([u[0] if i % 2 else -u[0] for i in range(n)]),
        "center": np.zeros((n, M.dim)),
        "half cluster": np.concatenate([t * np.repeat(u[:1], n // 2, 0), 1e-9 * u[n // 2 :]]),
    }
    return {k: M.validate(M.exp_coords(center, c)) for k, c in out.items()}


@pytest.mark.parametrize("which", [0, 1, 2])
@pytest.mark.parametrize("sigma", [0.5, 0.1])
def test_sampler_envelopes_weigh_at_most_the_data_free_mass(which, sigma):
    """The proof's two data-free masses bound what ``_MedianCells`` and
    ``_MedianShells`` compute on worst placements (every size of refinement)."""
    M, center, r, _ = _oracle_cases()[which]
    dom = pmd.DataDomain(M, center, r)
    d, G = M.dim, float(M.log_volume_growth)
    log_cells = d * math.log(2 * r * (1 + 1e-9)) + G * r
    t = min(2 * r * (1 + 1e-9), float(M.injectivity_radius))
    log_shells = 1e-12 / sigma + _log_unit_ball(d) + d * math.log(t) + G * t
    for data in _placements(M, center, r).values():
        data = dom.check(data)
        shells = median_shells._MedianShells.build(M, data, sigma, dom)
        assert shells.log_mass(M) <= log_shells + 1e-9
        # 10^6 draws refine the boxes to their whole budget (seconds in d = 3: d <= 2 only)
        for size in (1, 10**6) if M.dim <= 2 else (1,):
            cells = median_cells._MedianCells.build(M, data, sigma, dom, size, ref=shells.x_hat)
            assert cells.log_mass(M, dom) <= log_cells + 1e-9


# --- the mechanism: refused before the charge beyond the proof, recorded inside it --------
def _median(epsilon, **kw):
    return pmd.KNGMechanism(S2, epsilon=epsilon, center=NORTH, radius=0.6, statistic="median", **kw)


@pytest.mark.parametrize("n", [7, 40, 3000])
def test_default_refuses_beyond_the_proof_before_the_charge_and_accepts_inside(n):
    """At n ε a part in 10^6 above the largest proved (for this n's cap) the release
    raises before the charge, naming that n ε, nuts and the opt-in, with nothing spent
    and the data not read; a part in 10^6 below it releases, its bound <= 2^-64 in
    the record."""
    dom = pmd.DataDomain(S2, NORTH, 0.6)
    ne = median_largest_n_epsilon(dom, median_max_attempts(n))
    assert 30 < ne < 80
    budget = pmd.PrivacyBudget(1e9)
    over = _median(ne * (1 + 1e-6) / n)
    with pytest.raises(
        ValueError, match=rf"largest n epsilon proved .* is {ne:.4g}.*nuts.*median_floor='measured'"
    ):
        over.release(Untouchable(n), random_seed=1, budget=budget)
    assert budget.spent.epsilon == 0 and not budget.entries
    with pytest.raises(ValueError, match="largest n epsilon proved"):
        over.sample(Untouchable(n), 3, random_seed=1)
    x = S2.exp_coords(NORTH, np.random.default_rng(n).normal(size=(n, 2)) * 0.1)
    rel = _median(ne * (1 - 1e-6) / n).release(x, random_seed=1, budget=budget)
    bound = median_failure_bound(dom, rel.sigma, median_max_attempts(n))
    assert bound.log2_failure <= MEDIAN_FAILURE_LOG2_LIMIT
    assert any(f"is at most 2^{bound.log2_failure:.4g} for every data set" in m for m in rel.notes)
    assert rel.opt_outs == ()


def test_refused_before_now_accepted_where_proved():
    """SPD(3) (d = 6, volume growth) was refused whatever ε (no measured floor); at a
    small n ε the proof covers it and the default releases; the measured opt-in still
    refuses it."""
    M = pmd.SPD(k=3)
    dom = pmd.DataDomain(M, np.eye(3), 1.0)
    ne = median_largest_n_epsilon(dom, median_max_attempts(20))
    assert ne > 4
    x = np.repeat(np.eye(3)[None], 20, axis=0)
    kw = dict(center=np.eye(3), radius=1.0, statistic="median")
    rel = pmd.KNGMechanism(M, epsilon=0.9 * ne / 20, **kw).release(x, random_seed=2)
    assert any("proved from public facts" in m for m in rel.notes)
    measured = pmd.KNGMechanism(M, epsilon=0.9 * ne / 20, median_floor="measured", **kw)
    with pytest.raises(ValueError, match="not supported in dimension 6"):
        measured.release(x, random_seed=2)


def test_measured_opt_in_is_recorded_and_keeps_its_floor(tmp_path):
    """``median_floor="measured"`` releases where the proof does not reach, down to the
    measured floor, and says so: ``opt_outs``, the note, the JSON record (reloaded)."""
    n = 100
    x = S2.exp_coords(NORTH, np.random.default_rng(0).normal(size=(n, 2)) * 0.1)
    with pytest.raises(ValueError, match="largest n epsilon proved"):
        _median(5.0).public_calibration(x)
    mech = _median(5.0, median_floor="measured")
    rel = mech.release(x, random_seed=3)
    assert rel.opt_outs == ("median_floor_measured",)
    assert MEDIAN_MEASURED_NOTE in rel.notes
    assert not any("proved from public facts" in m for m in rel.notes)
    path = tmp_path / "rel.json"
    rel.to_json(path, public=True)
    back = json.loads(path.read_text())
    assert "median_floor_measured" in json.dumps(back)
    assert pmd.Release.from_json(path).opt_outs == ("median_floor_measured",)
    # the measured floor (n ε <= 1,000 on S^2) still refuses beyond it
    with pytest.raises(ValueError, match="the smallest the exact median sampler supports"):
        _median(10.01, median_floor="measured").release(x, random_seed=3)
    # NUTS is not limited by either floor, and the opt-in says nothing there
    assert _median(5.0).public_calibration(x, "nuts").sigma == pytest.approx(4 / 500)


@pytest.mark.parametrize(
    ("value", "err", "match"),
    [
        ("Measured", ValueError, r"median_floor must be one of 'proved', 'measured'"),
        (None, TypeError, "median_floor must be a string"),
        (True, TypeError, "median_floor must be a string"),
        (1, TypeError, "median_floor must be a string"),
    ],
)
def test_median_floor_argument_is_checked(value, err, match):
    with pytest.raises(err, match=match):
        _median(1.0, median_floor=value)
    with pytest.raises(ValueError, match="median_floor is for statistic='median'"):
        pmd.KNGMechanism(S2, epsilon=1.0, center=NORTH, radius=0.6, median_floor="measured")


def test_release_many_records_the_bound_per_data_set():
    x = S2.exp_coords(NORTH, np.random.default_rng(5).normal(size=(2, 30, 2)) * 0.1)
    rels = _median(1.0).release_many(x, random_seed=4)
    assert all(any("proved from public facts" in m for m in r.notes) for r in rels)
    rels = _median(1.0, median_floor="measured").release_many(x, random_seed=4)
    assert all(r.opt_outs == ("median_floor_measured",) for r in rels)


def test_default_cap_grows_as_n_shrinks_and_explicit_cap_is_kept():
    assert median_max_attempts(1) == median_max_attempts(100) == 10**8
    assert median_max_attempts(1000) == 10**7
    assert median_max_attempts(10**4) == median_max_attempts(10**7) == 10**6
    assert _median(1.0).median_cap(40) == 10**8
    assert _median(1.0, max_attempts=5).median_cap(40) == 5
    # the measured floors keep the cap they were measured with
    assert _median(1.0, median_floor="measured").median_cap(40) == 10**6
    for bad in (0, -1, 1.5, True, None):
        with pytest.raises((TypeError, ValueError)):
            median_max_attempts(bad)
