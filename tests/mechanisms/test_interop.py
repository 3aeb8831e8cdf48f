"""Our releases in OpenDP's and dp_accounting's accountants (issue 27): composed with one
of their mechanisms, the totals are the sums the theorems give."""

from __future__ import annotations

import math

import numpy as np
import pytest

import pymc_manidp as pmd
from pymc_manidp.mechanisms import dp_event, opendp_measurement
from pymc_manidp.privacy.release import Calibration, build_release

S2 = pmd.Sphere(dim=2)
NORTH = np.array([0.0, 0.0, 1.0])
DATA = np.array([[0, 0, 1.0], [0, 0.6, 0.8], [0.6, 0, 0.8]])


def kng(epsilon):
    return pmd.KNGMechanism(S2, epsilon=epsilon, center=NORTH, radius=0.7)


def test_two_releases_and_an_opendp_sum_compose_in_opendp():
    dp = pytest.importorskip("opendp.prelude")
    ours = [opendp_measurement(kng(0.3)), opendp_measurement(kng(0.5))]
    dp.enable_features("contrib", "honest-but-curious")
    # theirs: OpenDP's Laplace on a bounded sum of (z + 1)/2, one value per record;
    # a replaced record is one removal and one addition (symmetric distance 2)
    values = dp.vector_domain(dp.atom_domain(bounds=(0.0, 1.0), nan=False), size=len(DATA))
    column = dp.t.make_user_transformation(
        ours[0].input_domain,
        dp.change_one_distance(),
        values,
        dp.symmetric_distance(),
        lambda x: [float(v) for v in (np.asarray(x)[:, 2] + 1) / 2],
        lambda d_in: 2 * d_in,
    )
    theirs = column >> dp.t.then_sum() >> dp.m.then_laplace(scale=5.0)
    assert theirs.map(1) == pytest.approx(0.2, rel=1e-9)  # (U - L)/scale = 1/5
    composed = dp.c.make_composition([*ours, theirs])
    assert composed.map(1) == pytest.approx(0.3 + 0.5 + 0.2, rel=1e-9)
    assert composed.map(2) == pytest.approx(2 * (0.3 + 0.5 + 0.2), rel=1e-9)  # group privacy
    first, second, total = composed(DATA)
    assert np.allclose([np.linalg.norm(first), np.linalg.norm(second)], 1) and np.isfinite(total)
    # the release refuses data outside the public ball, inside OpenDP too
    outside = np.array([[1.0, 0, 0], [0, 0, 1.0]])
    with pytest.raises(Exception, match="outside the public ball"):
        ours[0](outside)


def test_the_opendp_privacy_map_is_epsilon_times_replacements():
    pytest.importorskip("opendp")
    meas = opendp_measurement(kng(0.25))
    assert [meas.map(k) for k in (0, 1, 4)] == [0.0, 0.25, 1.0]
    with pytest.raises(ValueError, match="sampler= is not for an OpenDP measurement"):
        opendp_measurement(kng(0.25), sampler="nuts")


def test_a_budget_entered_around_opendp_is_not_charged():
    pytest.importorskip("opendp")
    meas = opendp_measurement(kng(0.25))
    b = pmd.PrivacyBudget(1.0)
    with b:
        meas(DATA)
    assert b.entries == []  # OpenDP's compositor accounts for it, not the budget


def test_two_releases_and_a_randomized_response_compose_in_dp_accounting():
    dpa = pytest.importorskip("dp_accounting")
    from dp_accounting.pld import PLDAccountant

    r1 = kng(0.3).release(DATA, random_seed=0)
    r2 = kng(0.5).release(DATA, random_seed=1)
    # theirs: 4-ary randomized response; truth kept with prob. 1 - p + p/4:
    # epsilon = log((1 - p + p/4) / (p/4)); p chosen for epsilon = 0.2
    k, eps3 = 4, 0.2
    p = k / (math.exp(eps3) + k - 1)
    assert math.log((1 - p + p / k) / (p / k)) == pytest.approx(eps3)
    theirs = dpa.RandomizedResponseDpEvent(noise_parameter=p, num_buckets=k)
    acc = PLDAccountant(neighboring_relation=dpa.NeighboringRelation.REPLACE_ONE)
    acc.compose(dpa.ComposedDpEvent([dp_event(r1), dp_event(r2), theirs]))
    # pure epsilon-DP composes to the sum at delta = 0 (PLD discretized by 1e-4)
    assert acc.get_epsilon(0.0) == pytest.approx(1.0, abs=1e-3)
    # a wrong event (epsilon doubled) is told apart
    wrong = PLDAccountant(neighboring_relation=dpa.NeighboringRelation.REPLACE_ONE)
    doubled = build_release(
        value=NORTH,
        mechanism="KNG",
        epsilon=0.6,
        calibration=Calibration(n=3, sensitivity=0.1, sigma=0.3),
        sampler="exact",
        seed_policy="OS entropy",
        exact=True,
    )
    wrong.compose(dpa.ComposedDpEvent([dp_event(doubled), dp_event(r2), theirs]))
    assert wrong.get_epsilon(0.0) == pytest.approx(1.3, abs=1e-3)


def test_an_mcmc_release_is_no_dp_accounting_event():
    pytest.importorskip("dp_accounting")
    rel = build_release(
        value=NORTH,
        mechanism="KNG",
        epsilon=0.5,
        calibration=Calibration(n=3, sensitivity=0.1, sigma=0.4),
        sampler="nuts",
        seed_policy="OS entropy",
        exact=False,
    )
    with pytest.raises(ValueError, match="no proved delta"):
        dp_event(rel)
    with pytest.raises(TypeError, match="must be a Release"):
        dp_event(0.5)
