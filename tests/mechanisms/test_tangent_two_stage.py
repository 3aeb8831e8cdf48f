"""The two-stage tangent release (issue 39, item 1): a coarse pure-ε point, then the
tangent Gaussian there; one call, one record, one charge (docs/tangent.md)."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from scipy import stats

import pymc_manidp as pmd
from pymc_manidp.privacy.budget import BudgetExceededError, PrivacyBudget
from pymc_manidp.privacy.release import Release
from pymc_manidp.stats.gaussian import gaussian_sigma

ALPHA = 0.01
DRAWS = 2000
H0 = np.array([1.0, 0.0, 0.0])


def _spaces():
    return [
        (pmd.Hyperbolic(dim=2), H0, 1.5),
        (pmd.SPD(k=2), np.eye(2), 1.0),
    ]


def _data(M, center, r, n=50, seed=1):
    rng = np.random.default_rng(seed)
    c = rng.uniform(-0.5, 0.5, size=(n, M.dim)) * r / math.sqrt(M.dim)
    c[:, 0] += 0.4 * r  # the mean off the center, where two stages are meant for
    return M.exp_coords(center, c)


@pytest.mark.parametrize(("M", "center", "r"), _spaces(), ids=["H2", "SPD2"])
def test_both_stages_draw_their_laws_and_a_wrong_sigma_is_caught(M, center, r):
    """KS at alpha = 0.01 on 2,000 draws (fixed seed): stage 1's |Log_m0 p - Log_m0 x_bar|
    is Gamma(d, sigma_1); stage 2's u - E_p^T Log_p x_bar is N(0, sigma_2^2) per axis, its
    squared norm chi^2_d; the same draws fail against 1.5 sigma."""
    mech = pmd.TwoStageTangentMechanism(M, epsilon=1.0, delta=1e-6, center=center, radius=r)
    data = mech.domain.check(_data(M, center, r))
    sigma = mech.sigma(len(data))
    sigma_1 = mech.coarse.sigma(len(data))
    out = mech.exact_draws(data, sigma, DRAWS, np.random.default_rng(3))
    ps, u = out.info["tangent_point"], out.info["tangent_coords"]
    mean = pmd.mechanisms.base.converged_mean(M, mech.domain, data, mech.grad_tol)
    z1 = np.asarray(M.log_coords(center, ps)) - np.asarray(M.log_coords(center, mean))
    z2 = np.stack([u[j] - M.log_coords(p, mean) for j, p in enumerate(ps)])
    np.testing.assert_allclose(
        out.points, np.stack([M.exp_coords(p, uj) for p, uj in zip(ps, u, strict=True)])
    )
    d = M.dim
    for scale, ok in ((1.0, True), (1.5, False)):
        p1 = stats.kstest(np.linalg.norm(z1, axis=1), stats.gamma(d, scale=scale * sigma_1).cdf)
        axes = [stats.kstest(z2[:, j], stats.norm(0, scale * sigma).cdf).pvalue for j in range(d)]
        sq = stats.kstest(np.sum(z2**2, axis=1) / (scale * sigma) ** 2, stats.chi2(d).cdf).pvalue
        assert (min(p1.pvalue, *axes, sq) > ALPHA) == ok, (scale, p1.pvalue, axes, sq)
    # the calibration: stage 2 at (eps_2, delta) with Delta_T = Delta (L = 1 here)
    assert sigma == gaussian_sigma(mech.sensitivity(len(data)), mech.epsilon_2, 1e-6)[0]
    assert mech.lipschitz == 1.0
    assert sigma_1 == pmd.TangentLaplaceMechanism(
        M, epsilon=mech.epsilon_1, center=center, radius=r
    ).sigma(len(data))


def test_one_call_one_record_one_charge(tmp_path):
    M, c, r = _spaces()[0]
    mech = pmd.TwoStageTangentMechanism(M, epsilon=0.3, delta=1e-7, center=c, radius=r, split=1 / 3)
    # the shares add up to at most epsilon as the decimals the budget charges
    assert Fraction(repr(mech.epsilon_1)) + Fraction(repr(mech.epsilon_2)) <= Fraction("0.3")
    assert mech.planned_charge == (0.3, 1e-7)
    b = PrivacyBudget(1.0, 1e-6)
    rel = mech.release(_data(M, c, r), budget=b, random_seed=0)
    assert len(b.entries) == 1 and (b.spent.epsilon, b.spent.delta) == (0.3, 1e-7)
    assert b.entries[0]["mu"] is None  # not a Gaussian charge: stage 1 is pure epsilon
    assert (rel.epsilon, rel.delta, rel.tangent["mu"]) == (0.3, 1e-7, None)
    assert not np.allclose(rel.tangent["point"], c)  # the coarse private point
    np.testing.assert_allclose(rel.value, M.exp_coords(rel.tangent["point"], rel.tangent["coords"]))
    assert any("two stages" in note for note in rel.notes)
    rel.to_json(tmp_path / "r.json")
    back = Release.from_json(tmp_path / "r.json")
    np.testing.assert_array_equal(back.tangent["point"], rel.tangent["point"])
    rels = mech.release_many([_data(M, c, r)] * 2, budget=b, random_seed=[1, 2])
    assert len(b.entries) == 3 and not np.allclose(
        rels[0].tangent["point"], rels[1].tangent["point"]
    )
    # no dp_accounting event: it is no Gaussian (stage 1 is pure eps); the budget says so
    pytest.importorskip("dp_accounting")
    from pymc_manidp.mechanisms.interop import dp_event

    with pytest.raises(ValueError, match="PrivacyBudget"):
        dp_event(rel)
    # a plan of optimal composition admits it as an (epsilon, delta) charge
    planned = PrivacyBudget(1.0, 1e-6, composition="optimal", plan=[mech.planned_charge] * 2)
    mech.release(_data(M, c, r), budget=planned)
    assert len(planned.entries) == 1


def test_premises_are_refused_before_the_charge_saying_what_to_do(monkeypatch):
    with pytest.raises(ValueError, match=r"Use pmd\.TangentGaussianMechanism"):
        pmd.TwoStageTangentMechanism(
            pmd.Sphere(dim=2), epsilon=1.0, delta=1e-6, center=[0, 0, 1.0], radius=0.3
        )
    M, c, r = _spaces()[0]
    mech = pmd.TwoStageTangentMechanism(M, epsilon=1.0, delta=1e-6, center=c, radius=r)

    def never(*_):
        raise AssertionError("the data were read")

    monkeypatch.setattr(type(mech), "exact_draws", never)
    b = PrivacyBudget(0.5, 1e-6)
    with pytest.raises(BudgetExceededError, match="nothing was computed"):
        mech.release(_data(M, c, r), budget=b)
    with pytest.raises(ValueError, match="shape"):
        mech.release(_data(M, c, r)[:, :2], budget=b)
    other = PrivacyBudget(5.0, 1e-6, composition="optimal", plan=[(1.0, 1e-7)])
    with pytest.raises(BudgetExceededError, match="charge 0 of the plan"):
        mech.release(_data(M, c, r), budget=other)
    assert b.entries == [] and other.entries == []
    # a sigma whose point would overflow the hyperboloid: refused before the charge
    tiny = pmd.TwoStageTangentMechanism(M, epsilon=1e-6, delta=1e-6, center=c, radius=r)
    with pytest.raises(ValueError, match="too large"):
        tiny.release(_data(M, c, r), budget=PrivacyBudget(1.0, 1e-6))


ODD = st.sampled_from(
    [1 / 3, 0.3333333333333333, 5e-324, 1e-300, 0.0, 1.0, -0.2, math.nan, math.inf, 10**400,
     True, None, "0.2", math.nextafter(1.0, 0), math.nextafter(0.0, 1)]
) | st.floats(min_value=1e-3, max_value=0.999)  # fmt: skip


@given(split=ODD, epsilon=ODD, delta=st.sampled_from([1e-6, 1 / 3, 0.0, 1e-301, 5e-324]))
@example(split=10**400, epsilon=1.0, delta=1e-6)  # was an OverflowError (float(split))
@example(split=-(10**400), epsilon=1.0, delta=1e-6)
def test_constructor_contract(split, epsilon, delta):
    """A TypeError or a ValueError naming the argument and its range, or a mechanism
    whose two shares are positive and add up to at most epsilon (as decimals)."""
    M, c, r = _spaces()[0]
    try:
        mech = pmd.TwoStageTangentMechanism(
            M, epsilon=epsilon, delta=delta, center=c, radius=r, split=split
        )
    except TypeError as err:
        assert any(w in str(err) for w in ("split", "epsilon", "delta"))
        return
    except ValueError as err:
        assert any(w in str(err) for w in ("split", "epsilon", "delta", "sigma"))
        return
    assert 0 < split < 1 and mech.epsilon_1 > 0 and mech.epsilon_2 > 0
    total = Fraction(repr(mech.epsilon_1)) + Fraction(repr(mech.epsilon_2))
    assert total <= Fraction(repr(mech.epsilon))
