"""Many releases in one call (issue 26 item 1): ``Mechanism.release_many``.

The oracle for the law is the single release's own exact sampler: each value of
``release_many`` must follow the law of ``release(data)``, i.e. of ``mech.sample(data,
size)`` (i.i.d. draws of the same law, the samplers tested against quadrature and
closed forms in tests/laws/). Two-sample Kolmogorov–Smirnov tests on distances, α =
0.01, N = 2,000 draws on each side; a mechanism with a 30% smaller ε (a wider law) is
refuted by the same test, so the test has power.
"""

from __future__ import annotations

import re
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

import pymc_manidp as pmd
from pymc_manidp.laws.exact import ExactSamplingError

ALPHA = 0.01
N = 2_000
S2 = pmd.Sphere(dim=2)
NORTH = np.array([0.0, 0.0, 1.0])
P2 = pmd.SPD(k=2)


def _sphere_data(n, r, seed):
    rng = np.random.default_rng(seed)
    c = rng.normal(size=(n, 2)) * 0.3 * r + np.array([0.3 * r, 0.0])
    c = c * np.minimum(1.0, 0.95 * r / np.linalg.norm(c, axis=-1))[:, None]
    return S2.exp_coords(NORTH, c)


def _spd_data(n, r, seed):
    rng = np.random.default_rng(seed)
    c = rng.normal(size=(n, 3)) * 0.3 * r + np.array([0.2 * r, 0.0, 0.0])
    c = c * np.minimum(1.0, 0.95 * r / np.linalg.norm(c, axis=-1))[:, None]
    return P2.exp_coords(np.eye(2), c)


def _ks(a, b):
    return stats.ks_2samp(a, b).pvalue


CASES = {
    "KNG on S2": (lambda eps: pmd.KNGMechanism(S2, epsilon=eps, center=NORTH, radius=0.5), 0),
    "KNG on SPD(2)": (
        lambda eps: pmd.KNGMechanism(P2, epsilon=eps, center=np.eye(2), radius=1.0),
        1,
    ),
    "Laplace on S2": (
        lambda eps: pmd.LaplaceMechanism(S2, epsilon=eps, center=NORTH, radius=0.5),
        0,
    ),
    "restricted Laplace on SPD(2)": (
        lambda eps: pmd.LaplaceMechanism(
            P2, epsilon=eps, center=np.eye(2), radius=1.0, restrict=True
        ),
        1,
    ),
}


def _seeds(per_set, count, seed):
    """One seed for the call, or one per data set (children of one SeedSequence)."""
    if not per_set:
        return seed
    return [np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(count)]


@pytest.mark.parametrize("per_set", [False, True], ids=["one seed", "a seed per data set"])
@pytest.mark.parametrize("case", list(CASES))
def test_each_value_has_the_single_release_law(case, per_set):
    """R = N replicates of one data set (n = 30, ε = 0.5): the N values of one call
    against N i.i.d. draws of the single release's law, on the distance to the ball's
    center and to the first record; with one random source for the call and with one
    per data set (another path through the samplers)."""
    make, kind = CASES[case]
    mech = make(0.5)
    r = mech.domain.radius
    data = _sphere_data(30, r, 1) if kind == 0 else _spd_data(30, r, 1)
    M, m0 = mech.manifold, mech.domain.center
    stack = np.broadcast_to(data, (N, *data.shape))
    got = mech.release_many(stack, random_seed=_seeds(per_set, N, 2)).values
    ref = mech.sample(data, N, random_seed=3)
    wrong = make(0.5 * 0.7).sample(data, N, random_seed=3)
    for point in (m0, data[0]):
        assert _ks(M.dist(point, got), M.dist(point, ref)) > ALPHA
    # the same test refutes a 30% smaller epsilon
    assert _ks(M.dist(m0, got), M.dist(m0, wrong)) < ALPHA


def test_a_list_of_data_sets_of_different_sizes():
    """Data sets of n = 20 and n = 60, interleaved in a list: each value follows its own
    data set's law (σ of its own n) and the records come back in the list's order."""
    mech = pmd.KNGMechanism(S2, epsilon=0.5, center=NORTH, radius=0.5)
    a, b = _sphere_data(20, 0.5, 4), _sphere_data(60, 0.5, 5)
    rels = mech.release_many([a, b] * (N // 2), random_seed=6)
    assert [r.n for r in rels[:4]] == [20, 60, 20, 60]
    assert rels[0].sigma == mech.sigma(20) and rels[1].sigma == mech.sigma(60)
    vals = rels.values
    for data, got in ((a, vals[0::2]), (b, vals[1::2])):
        ref = mech.sample(data, N // 2, random_seed=7)
        assert _ks(S2.dist(NORTH, got), S2.dist(NORTH, ref)) > ALPHA
    # the two laws differ enough to tell apart: the grouping matters
    assert _ks(S2.dist(NORTH, vals[0::2]), S2.dist(NORTH, vals[1::2])) < ALPHA


def test_records_are_releases_of_their_own():
    mech = pmd.LaplaceMechanism(P2, epsilon=1.0, center=np.eye(2), radius=1.0)
    stack = np.stack([_spd_data(25, 1.0, s) for s in range(3)])
    rels = mech.release_many(stack, random_seed=0)
    cal = mech.calibrate(25)
    assert isinstance(rels, tuple) and len(rels) == 3
    for rel in rels:
        assert (rel.n, rel.sigma, rel.sensitivity) == (25, cal.sigma, cal.sensitivity)
        assert rel.delta == 0.0 and rel.sampler == "exact" and rel.seed_policy == "fixed seed"
        assert rel.sampler_info["proposals"] >= 1
        assert "sampler_info" not in rel.public()
    assert rels.values.shape == (3, 2, 2)
    assert len(rels.public()) == 3


@pytest.mark.parametrize("statistic", ["mean", "median"])
def test_the_same_seed_gives_the_same_values(statistic):
    mech = pmd.KNGMechanism(S2, epsilon=1.0, center=NORTH, radius=0.5, statistic=statistic)
    stack = np.stack([_sphere_data(15, 0.5, s) for s in range(4)])
    one = mech.release_many(stack, random_seed=11).values
    two = mech.release_many(stack, random_seed=11).values
    other = mech.release_many(stack, random_seed=12).values
    assert np.array_equal(one, two)
    assert not np.array_equal(one, other)
    assert one.shape == (4, 3)


def test_a_bad_data_set_fails_alone_and_the_others_are_released():
    """Issue 38 item 8: data set 5 (in the second size group) has a record outside the
    ball; it gets a failed record naming it and its row, every other data set is
    released with the values it gets without the bad one (a seed per data set), and
    the call warns with the summary. Before: DomainError for the whole call."""
    mech = pmd.KNGMechanism(S2, epsilon=1.0, center=NORTH, radius=0.5)
    datasets = [_sphere_data(10, 0.5, s) for s in range(4)] + [
        _sphere_data(12, 0.5, s) for s in range(4)
    ]
    datasets[5] = datasets[5].copy()
    datasets[5][3] = S2.exp_coords(NORTH, np.array([0.9, 0.0]))
    seeds = list(range(8))
    with pytest.warns(UserWarning, match=r"8 data sets: 7 released, 1 failed \(data set 5: "):
        rels = mech.release_many(datasets, random_seed=seeds)
    assert len(rels) == 8 and [f.index for f in rels.failed] == [5]
    (bad,) = rels.failed
    assert isinstance(bad, pmd.privacy.FailedRelease) and rels[5] is bad
    assert bad.error == "DomainError" and bad.n == 12
    assert re.search(r"data set 5 of release_many: .*first at row 3", bad.reason)
    assert bad.public() == {"index": 5, "n": 12, "status": "failed", "error": "DomainError"}
    good = [j for j in range(8) if j != 5]
    alone = mech.release_many([datasets[j] for j in good], random_seed=[seeds[j] for j in good])
    np.testing.assert_array_equal(rels.released.values, alone.values)
    assert rels.summary() == "8 data sets: 7 released, 1 failed (data set 5: DomainError)"
    with pytest.raises(ValueError, match=r"1 failed .*\.released\.values"):
        _ = rels.values
    assert rels.public()[5] == bad.public() and rels.public()[4] == rels[4].public()
    # with clip=True the same call releases all, and every record says so
    rels = mech.release_many(datasets, random_seed=0, clip=True)
    assert not rels.failed and all(r.opt_outs == ("clip",) for r in rels)


def _failing_for(mech, poison, error=ExactSamplingError):
    """``mech.exact_draws_stack`` failing after the data were read whenever the stack
    holds the data set ``poison`` (the stacked draw fails as a whole, as a sampler
    that gives up would)."""
    real = mech.exact_draws_stack
    calls = []

    def draws(data, n, sigma, rng):
        calls.append(len(data) // n)
        sets = np.asarray(data).reshape((-1, n, *mech.manifold.point_shape))
        if any(np.allclose(d, poison, rtol=0, atol=1e-12) for d in sets):
            rng0 = rng[0] if isinstance(rng, list) else rng
            rng0.random()  # what it drew before failing must not shift the others'
            raise error("the sampler gave up on these data")
        return real(data, n, sigma, rng)

    return draws, calls


@pytest.mark.parametrize("per_set", [True, False], ids=["a seed per data set", "one seed"])
def test_a_draw_that_fails_for_one_data_set_fails_it_alone(monkeypatch, per_set):
    """A failure after the data were read (the draw) in a stack of 5: the stacked draw
    is retried data set by data set, so only the poisoned one fails; the ledger holds
    5 charges, 4 released and 1 failed with the error's type, and spends exactly 5 ε."""
    mech = pmd.KNGMechanism(S2, epsilon=0.5, center=NORTH, radius=0.5)
    stack = np.stack([_sphere_data(10, 0.5, s) for s in range(5)])
    seeds = list(range(10, 15)) if per_set else 3
    clean = mech.release_many(stack, random_seed=seeds)
    draws, calls = _failing_for(mech, stack[2])
    monkeypatch.setattr(mech, "exact_draws_stack", draws)
    budget = pmd.PrivacyBudget(epsilon=3.0)
    with pytest.warns(UserWarning, match=r"5 data sets: 4 released, 1 failed"):
        rels = mech.release_many(stack, random_seed=seeds, budget=budget)
    assert calls == [5, 1, 1, 1, 1, 1]  # the stack, then each alone
    assert [type(r).__name__ for r in rels] == ["Release"] * 2 + ["FailedRelease"] + ["Release"] * 2
    assert rels[2].error == "ExactSamplingError" and "gave up" in rels[2].reason
    statuses = [e["status"] for e in budget.entries]
    assert statuses == ["released", "released", "failed", "released", "released"]
    assert budget.entries[2]["error"] == "ExactSamplingError"
    assert budget.spent.exact[0] == Fraction(5, 2)  # every charge stands, exactly
    released = [e["release"]["value"] for e in budget.entries if e["status"] == "released"]
    assert released == [r.public()["value"] for r in rels.released]
    if per_set:  # each value is its own seed's: as without the failure (up to rounding:
        # drawn alone, not in the stack, a Fréchet mean's sums may round differently)
        np.testing.assert_allclose(rels.released.values, clean.values[[0, 1, 3, 4]], rtol=1e-12)


def test_a_failure_of_every_data_set_is_recorded_for_each(monkeypatch):
    mech = pmd.KNGMechanism(S2, epsilon=0.5, center=NORTH, radius=0.5)
    stack = np.stack([_sphere_data(10, 0.5, s) for s in range(3)])
    budget = pmd.PrivacyBudget(epsilon=3.0)

    def boom(*a):
        raise ExactSamplingError("stopped")

    monkeypatch.setattr(mech, "exact_draws_stack", boom)
    with pytest.warns(UserWarning, match="3 data sets: 0 released, 3 failed"):
        rels = mech.release_many(stack, random_seed=0, budget=budget)
    assert [f.index for f in rels.failed] == [0, 1, 2] and not rels.released
    assert [e["status"] for e in budget.entries] == ["failed"] * 3
    assert budget.spent.exact[0] == Fraction(3, 2)  # the charges stand


def test_an_interrupt_aborts_the_call_and_marks_every_charge_failed(monkeypatch):
    """Only an Exception is a data set's failure: an interrupt stops the whole call."""
    mech = pmd.KNGMechanism(S2, epsilon=0.5, center=NORTH, radius=0.5)
    stack = np.stack([_sphere_data(10, 0.5, s) for s in range(3)])
    budget = pmd.PrivacyBudget(epsilon=3.0)
    draws, _ = _failing_for(mech, stack[1], error=KeyboardInterrupt)
    monkeypatch.setattr(mech, "exact_draws_stack", draws)
    with pytest.raises(KeyboardInterrupt):
        mech.release_many(stack, random_seed=0, budget=budget)
    assert [e["status"] for e in budget.entries] == ["failed"] * 3


def test_the_budget_is_charged_once_per_data_set():
    mech = pmd.KNGMechanism(S2, epsilon=0.5, center=NORTH, radius=0.5)
    stack = np.stack([_sphere_data(10, 0.5, s) for s in range(4)])
    budget = pmd.PrivacyBudget(epsilon=3.0)
    rels = mech.release_many(stack, random_seed=0, budget=budget)
    assert budget.spent.epsilon == pytest.approx(4 * 0.5)
    assert [e["status"] for e in budget.entries] == ["released"] * 4
    assert [e["release"]["value"] for e in budget.entries] == [r.public()["value"] for r in rels]
    # five more (2.5) would overspend the 1.0 left: refused before any charge is made
    with pytest.raises(pmd.BudgetExceededError):
        mech.release_many(np.concatenate([stack, stack[:1]]), random_seed=0, budget=budget)
    assert len(budget.entries) == 4
    with budget:  # the budget entered is charged too
        mech.release_many(stack[:2], random_seed=0)
    assert budget.spent.epsilon == pytest.approx(3.0)


def test_the_batch_is_checked_by_its_exact_sum():
    # 3 * 0.7 is 2.0999999999999996 in floats: the old product check admitted three
    # charges of 0.7 against that budget, the third then refused after two were made
    mech = pmd.KNGMechanism(S2, epsilon=0.7, center=NORTH, radius=0.5)
    stack = np.stack([_sphere_data(10, 0.5, s) for s in range(3)])
    budget = pmd.PrivacyBudget(epsilon=2.0999999999999996)
    with pytest.raises(pmd.BudgetExceededError, match=r"3 charges of epsilon = 0\.7"):
        mech.release_many(stack, random_seed=0, budget=budget)
    assert budget.entries == []  # none made and then marked failed
    budget = pmd.PrivacyBudget(epsilon=2.1)  # exactly 3 * 7/10: fits
    mech.release_many(stack, random_seed=0, budget=budget)
    assert budget.spent.exact[0] == Fraction(21, 10) and len(budget.entries) == 3


def test_what_is_refused():
    mech = pmd.KNGMechanism(S2, epsilon=1.0, center=NORTH, radius=0.5)
    with pytest.raises(ValueError, match=r"stack \(R, n, 3\) or a list"):
        mech.release_many(_sphere_data(10, 0.5, 0), random_seed=0)
    with pytest.raises(ValueError, match="data set 1 must have shape"):
        mech.release_many([_sphere_data(10, 0.5, 0), np.zeros((4, 2))])
    with pytest.raises(ValueError, match="empty"):
        mech.release_many([])
    da = pytest.importorskip("dask.array")
    with pytest.raises(ValueError, match="Dask"):
        mech.release_many(da.from_array(np.stack([_sphere_data(10, 0.5, 0)] * 2)))

    class OtherSphere(pmd.Sphere):  # may change the geometry: no exact sampler
        pass

    other = pmd.KNGMechanism(OtherSphere(dim=2), epsilon=1.0, center=NORTH, radius=0.5)
    with pytest.raises(ValueError, match="no 'exact' sampler"):
        other.release_many(np.stack([_sphere_data(10, 0.5, 0)] * 2))


@pytest.mark.parametrize(
    "make",
    [
        lambda: pmd.KNGMechanism(S2, epsilon=1.0, center=NORTH, radius=0.5),
        lambda: pmd.KNGMechanism(P2, epsilon=1.0, center=np.eye(2), radius=1.0),
        lambda: pmd.KNGMechanism(S2, epsilon=1.0, center=NORTH, radius=0.5, statistic="median"),
        lambda: pmd.LaplaceMechanism(P2, epsilon=1.0, center=np.eye(2), radius=1.0, restrict=True),
    ],
    ids=["KNG S2", "KNG SPD(2)", "KNG median S2", "restricted Laplace SPD(2)"],
)
def test_a_seed_per_data_set_makes_each_value_independent_of_the_others(make):
    """With one seed per data set, a data set's value is the same whatever else is in the
    call and however the call is split (what the experiments need to give the same
    numbers for any chunking of their replicates)."""
    mech = make()
    M = mech.manifold
    gen = _sphere_data if isinstance(M, pmd.Sphere) else _spd_data
    datasets = [gen(12, mech.domain.radius, s) for s in range(5)] + [gen(20, mech.domain.radius, 9)]
    seeds = list(range(100, 106))
    whole = mech.release_many(datasets, random_seed=seeds).values
    alone = [
        mech.release_many([d], random_seed=[s]).values[0]
        for d, s in zip(datasets, seeds, strict=True)
    ]
    split = np.concatenate(
        [
            mech.release_many(datasets[:2], random_seed=seeds[:2]).values,
            mech.release_many(datasets[2:], random_seed=seeds[2:]).values,
        ]
    )
    np.testing.assert_array_equal(whole, np.stack(alone))
    np.testing.assert_array_equal(whole, split)
    # the seeds matter: others give other values
    other = mech.release_many(datasets, random_seed=[s + 50 for s in seeds]).values
    assert not np.allclose(whole, other)
    rels = mech.release_many(datasets, random_seed=[None, *seeds[1:]])
    assert [r.seed_policy for r in rels[:2]] == ["OS entropy", "fixed seed"]
    with pytest.raises(ValueError, match="one seed per data set"):
        mech.release_many(datasets, random_seed=seeds[:3])


K5 = pmd.KendallShape(k_landmarks=5)
_T = np.linspace(0, 2 * np.pi, 5, endpoint=False)
K5_CENTER = K5.validate(np.stack([np.cos(_T), 0.5 * np.sin(_T)], -1))
OTHER = {
    "KNG on Kendall(5)": (pmd.KNGMechanism, K5, K5_CENTER, 0.3),
    "Laplace on SO(3)": (pmd.LaplaceMechanism, pmd.Rotations(), np.eye(3), 0.8),
    "KNG on H2": (pmd.KNGMechanism, pmd.Hyperbolic(dim=2), np.eye(3)[0], 1.0),
}


@pytest.mark.parametrize("case", list(OTHER))
def test_the_law_on_other_spaces(case):
    """As above (one seed per data set), on spaces whose stack gradient is the generic
    one: curved with a non-spherical volume (Kendall), compact (SO(3)), negatively
    curved (H2). N = 2,000, α = 0.01, the distance to the ball's center; a 30% smaller ε
    is refuted."""
    cls, M, center, r = OTHER[case]
    rng = np.random.default_rng(21)
    c = rng.normal(size=(30, M.dim))
    c *= 0.9 * r * rng.uniform(0, 1, (30, 1)) / np.linalg.norm(c, axis=1, keepdims=True)
    data = M.validate(M.exp_coords(np.broadcast_to(center, (30, *center.shape)), c))
    mech = cls(M, epsilon=0.5, center=center, radius=r)
    stack = np.broadcast_to(data, (N, *data.shape))
    got = mech.release_many(stack, random_seed=_seeds(True, N, 22)).values
    ref = mech.sample(data, N, random_seed=23)
    wrong = cls(M, epsilon=0.35, center=center, radius=r).sample(data, N, random_seed=23)
    assert _ks(M.dist(center, got), M.dist(center, ref)) > ALPHA
    assert _ks(M.dist(center, got), M.dist(center, wrong)) < ALPHA
