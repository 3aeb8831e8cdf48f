"""Issue 43, items 4 and 15: a refusal that depends only on public facts charges nothing.

The contract of ``release``/``release_many`` (docs/privacy-budget.md: bad arguments
charge nothing): the data's type, shape and ``n`` (public in this library's privacy
unit), σ from (ε, n, r), the law's existence and the exact sampler's numerical range
are checked before the privacy budget is charged. Only a failure that depends on the
records' values (NaN, a record outside the ball) may come after the charge, and it is
recorded as failed.

The sweep tries every public refusal on every manifold with every mechanism that runs
there; the property tests draw adversarial arguments (floats at the edges, wrong types
and shapes, Dask arrays of unknown chunk sizes) and check the outcome is a release
charged exactly once, a clear ``TypeError``/``ValueError`` with nothing charged, or (bad
values only) a charge marked failed. ``test_a_charge_before_the_checks_is_caught``
plants the old order (charge first) and shows the sweep's check fails on it.
"""

from __future__ import annotations

import math

import dask.array as da
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import pymc_manidp as pmd
from pymc_manidp.laws.exact_range import kng_sigma_range
from pymc_manidp.mechanisms import baselines
from pymc_manidp.mechanisms.base import Mechanism
from pymc_manidp.privacy.budget import PrivacyBudget


def _kendall_center():
    a = 2 * np.pi * np.arange(4) / 4
    return pmd.KendallShape(k_landmarks=4).validate(np.stack([np.cos(a), np.sin(a)], 1))


# the six shipped manifolds: (manifold, public center, public radius)
SPACES = {
    "sphere": (pmd.Sphere(dim=2), np.array([0.0, 0.0, 1.0]), 0.5),
    "spd": (pmd.SPD(k=2), np.eye(2), 0.5),
    "hyperbolic": (pmd.Hyperbolic(dim=2), np.array([1.0, 0.0, 0.0]), 0.5),
    "kendall": (pmd.KendallShape(k_landmarks=4), _kendall_center(), 0.3),
    "rotations": (pmd.Rotations(), np.eye(3), 0.5),
    "euclidean": (pmd.Euclidean(dim=2), np.zeros(2), 0.5),
}

MECHANISMS = {
    "laplace": lambda M, **k: pmd.LaplaceMechanism(M, **k),
    "laplace-restricted": lambda M, **k: pmd.LaplaceMechanism(M, restrict=True, **k),
    "kng-mean": lambda M, **k: pmd.KNGMechanism(M, **k),
    "kng-median": lambda M, **k: pmd.KNGMechanism(M, statistic="median", **k),
    "euclidean-laplace": lambda M, **k: baselines.EuclideanLaplace(M, **k),
    "projected-laplace": lambda M, **k: baselines.ProjectedLaplace(M, **k),
    "landmark-laplace": lambda M, **k: baselines.LandmarkLaplace(M, **k),
    "tangent-laplace": lambda M, **k: pmd.TangentLaplaceMechanism(M, **k),
}


def _mechanism(mech, space, epsilon=1.0):
    M, c, r = SPACES[space]
    try:
        return MECHANISMS[mech](M, epsilon=epsilon, center=c, radius=r)
    except (TypeError, ValueError) as err:
        if "needs" in str(err):
            pytest.skip(f"{mech} does not run on {space}: {err}")
        raise


def _runs_on(mech, space):
    M, c, r = SPACES[space]
    try:
        MECHANISMS[mech](M, epsilon=1.0, center=c, radius=r)
    except TypeError as err:
        assert "needs" in str(err)
        return False
    return True


PAIRS = [(m, s) for m in MECHANISMS for s in SPACES if _runs_on(m, s)]


def _data(space, n=3):
    """``n`` records at the public center (inside every ball)."""
    _, c, _ = SPACES[space]
    return np.repeat(c[None], n, axis=0)


def _unknown_chunks(x):
    """A Dask array of ``x``'s records whose chunk sizes are unknown (a boolean mask)."""
    arr = da.from_array(x, chunks=(2, *x.shape[1:]))
    keep = da.from_array(np.ones(len(x), bool), chunks=2)
    return arr[keep]


def _public_bad_inputs(space):
    """``(label, data)``: inputs refusable from their type and shape alone."""
    M, c, _ = SPACES[space]
    x = _data(space)
    wrong = np.zeros((3, *M.point_shape[:-1], M.point_shape[-1] + 1))
    return [
        ("wrong record shape", wrong),
        ("one point, not a data set", c),
        ("empty", np.zeros((0, *M.point_shape))),
        ("strings", x.astype(str)),
        ("bools", np.ones(x.shape, bool)),
        ("None", None),
        ("a string", "data.npy"),
        ("ragged", [list(c.ravel()), list(c.ravel())[:-1]]),
        ("masked", np.ma.masked_array(x, mask=np.eye(*x.reshape(3, -1).shape).reshape(x.shape))),
        ("dask, unknown chunks", _unknown_chunks(x)),
    ]


def assert_uncharged(call):
    """``call(budget)`` raises a clear TypeError/ValueError and charges nothing."""
    budget = PrivacyBudget(1e6)
    with pytest.raises((TypeError, ValueError)) as info:
        call(budget)
    assert budget.spent.epsilon == 0, f"charged for a public refusal: {info.value}"
    assert budget.entries == [], f"a ledger entry for a public refusal: {budget.entries}"
    assert len(str(info.value)) > 20
    return info.value


@pytest.mark.parametrize(("mech", "space"), PAIRS)
def test_every_public_refusal_charges_nothing(mech, space):
    m = _mechanism(mech, space)
    for label, data in _public_bad_inputs(space):
        err = assert_uncharged(lambda b, d=data: m.release(d, budget=b))
        if label == "dask, unknown chunks":
            assert "compute_chunk_sizes" in str(err)
        if label == "empty":
            assert "empty" in str(err)
    # release_many: a stack of empty data sets, a wrong shape
    M = SPACES[space][0]
    assert_uncharged(lambda b: m.release_many(np.zeros((2, 0, *M.point_shape)), budget=b))
    assert_uncharged(lambda b: m.release_many([_data(space), np.zeros((3, 7))], budget=b))
    assert_uncharged(lambda b: m.release_many([_data(space).astype(str)], budget=b))


@pytest.mark.parametrize(("mech", "space"), PAIRS)
@pytest.mark.parametrize("epsilon", [1e-300, 1e-30, 1e-8, 1e30, 1e300])
def test_an_epsilon_the_release_cannot_use_is_refused_before_the_charge(mech, space, epsilon):
    """Each ε either releases (charged once) or is refused with nothing charged: σ out
    of floating point, a Laplace that is not normalizable (SPD, hyperbolic), or a σ out
    of the exact KNG sampler's range (``kng_sigma_range``)."""
    m = _mechanism(mech, space, epsilon)
    budget = PrivacyBudget(1e301)
    try:
        rel = m.release(_data(space), budget=budget, random_seed=0)
    except (TypeError, ValueError) as err:
        assert budget.spent.epsilon == 0 and budget.entries == [], err
        assert "epsilon" in str(err) or "sigma" in str(err)
        return
    assert budget.spent.epsilon == epsilon and len(budget.entries) == 1
    assert np.all(np.isfinite(rel.value))


def test_the_issue_examples_charge_nothing():
    H3 = pmd.Hyperbolic(dim=3)
    c3 = np.array([1.0, 0, 0, 0])
    lap = pmd.LaplaceMechanism(H3, epsilon=0.1, center=c3, radius=1)
    err = assert_uncharged(lambda b: lap.release(c3[None], budget=b))
    assert "not normalizable" in str(err)
    S, c, r = SPACES["sphere"]
    kng = pmd.KNGMechanism(S, epsilon=1e-300, center=c, radius=r)
    err = assert_uncharged(lambda b: kng.release(_data("sphere"), budget=b))
    assert "largest" in str(err) and "epsilon >=" in str(err)
    # the smallest epsilon it names releases, one ulp below it is refused
    sigma_max = kng_sigma_range(kng.domain)[1]
    eps_min = float(str(err).split("epsilon >= ")[1].split()[0])
    ok = pmd.KNGMechanism(S, epsilon=eps_min * (1 + 1e-5), center=c, radius=r)
    assert ok.calibrate(3).sigma <= sigma_max
    ok.release(_data("sphere"), random_seed=0)


def test_an_exact_kng_sigma_inside_the_range_releases_on_a_sphere_of_dimension_10():
    """σ just inside the upper end releases (S^10, where the shells fail first)."""
    S = pmd.Sphere(dim=10)
    c = np.zeros(11)
    c[-1] = 1.0
    mech = pmd.KNGMechanism(S, epsilon=1.0, center=c, radius=0.5)
    hi = kng_sigma_range(mech.domain)[1]
    n = 3
    eps = mech.calibrate(n).sigma / (0.99 * hi)  # sigma = 0.99 hi
    mech = pmd.KNGMechanism(S, epsilon=eps, center=c, radius=0.5)
    budget = PrivacyBudget(10.0)
    mech.release(np.repeat(c[None], n, 0), budget=budget, random_seed=1)
    assert budget.spent.epsilon == eps
    too_far = pmd.KNGMechanism(S, epsilon=eps / 1.02, center=c, radius=0.5)
    assert_uncharged(lambda b: too_far.release(np.repeat(c[None], n, 0), budget=b))


def test_a_charge_before_the_checks_is_caught(monkeypatch):
    """The planted bug: the public checks skipped, so the charge comes first (as before
    issue 43). The sweep's check must fail on it."""
    m = _mechanism("kng-mean", "sphere")
    monkeypatch.setattr(Mechanism, "public_calibration", lambda self, data, sampler="exact": None)
    with pytest.raises(AssertionError, match="charged for a public refusal"):
        assert_uncharged(lambda b: m.release(np.zeros((3, 4)), budget=b))


# --- property tests (issue 43, item 15) ----------------------------------------------------

#: floats at the edges, wrong types: what a careless user or an attacker passes
ADVERSARIAL_REALS = st.one_of(
    st.sampled_from(
        [
            1 / 3,
            0.3333333333333333,
            5e-324,
            2.2250738585072014e-308,
            math.nextafter(1.0, 2.0),
            math.nextafter(1.0, 0.0),
            1e308,
            10**400,
            math.inf,
            -math.inf,
            math.nan,
            0.0,
            -0.0,
            -1.0,
            True,
            False,
            "1.0",
            None,
            [1.0],
            np.float32(0.5),
            np.int64(2),
            1,
        ]
    ),
    st.floats(allow_nan=True, allow_infinity=True, allow_subnormal=True),
)


def _valid_epsilon(e):
    if isinstance(e, (bool, np.bool_, str)) or e is None or isinstance(e, list):
        return False
    try:
        f = float(e)
    except OverflowError:
        return False
    return math.isfinite(f) and f > 0


@given(
    mech=st.sampled_from(list(MECHANISMS)),
    space=st.sampled_from(list(SPACES)),
    epsilon=ADVERSARIAL_REALS,
    radius=ADVERSARIAL_REALS,
    center_kind=st.sampled_from(["ok", "sub-ulp", "nan", "wrong shape", "None", "string"]),
)
def test_a_constructor_accepts_only_what_it_can_use(mech, space, epsilon, radius, center_kind):
    M, c, _ = SPACES[space]
    if not _runs_on(mech, space):
        return
    center = {
        "ok": c,
        "sub-ulp": np.nextafter(c, 2.0),
        "nan": np.full(c.shape, np.nan),
        "wrong shape": c.ravel()[:-1],
        "None": None,
        "string": "north",
    }[center_kind]
    try:
        m = MECHANISMS[mech](M, epsilon=epsilon, center=center, radius=radius)
    except (TypeError, ValueError) as err:
        assert str(err)
        return
    # accepted: every argument is one the release can use
    assert _valid_epsilon(epsilon) and m.epsilon == float(epsilon)
    assert 0 < m.domain.radius < M.max_radius
    assert center_kind in ("ok", "sub-ulp")


def _draw_data(space, kind):
    M, c, r = SPACES[space]
    x = _data(space)
    if kind == "ok":
        return x, "ok"
    if kind == "nan":
        y = x.copy()
        y.reshape(3, -1)[1, 0] = np.nan
        return y, "values"
    if kind == "far":  # a valid point outside the public ball
        v = M.from_coords(c, np.r_[1.5 * r / 1.0, np.zeros(M.dim - 1)])
        return np.concatenate([x, M.exp(c, v)[None]]), "values"
    if kind == "dask":
        return da.from_array(x, chunks=(2, *x.shape[1:])), "ok"
    public = dict(_public_bad_inputs(space))
    return public[kind], "public"


DATA_KINDS = [
    "ok",
    "nan",
    "far",
    "dask",
    "wrong record shape",
    "empty",
    "strings",
    "bools",
    "None",
    "ragged",
    "dask, unknown chunks",
]


@given(
    mech=st.sampled_from(list(MECHANISMS)),
    space=st.sampled_from(list(SPACES)),
    epsilon=st.sampled_from([1 / 3, 5e-324, 1e-300, 1e-9, 1.0, 1e9, 1e300, 10**400, True]),
    kind=st.sampled_from(DATA_KINDS),
    many=st.booleans(),
)
def test_a_release_is_charged_once_or_refused_uncharged(mech, space, epsilon, kind, many):
    """The contract of ``release`` and ``release_many``: a release charged ε once; or a
    TypeError/ValueError with nothing charged; or, for bad *values* only (NaN, outside
    the ball: data-dependent), the charge marked failed. Never a charged failure on data
    whose values are fine."""
    M, c, r = SPACES[space]
    if not _runs_on(mech, space):
        return
    try:
        m = MECHANISMS[mech](M, epsilon=epsilon, center=c, radius=r)
    except (TypeError, ValueError):
        assert not _valid_epsilon(epsilon)
        return
    data, why = _draw_data(space, kind)
    if many and kind == "dask":
        data, why = np.asarray(data), "ok"
    budget = PrivacyBudget(1e308)
    call = (lambda: m.release_many([data], budget=budget, random_seed=0)) if many else (
        lambda: m.release(data, budget=budget, random_seed=0)
    )  # fmt: skip
    try:
        out = call()
    except (TypeError, ValueError) as err:
        if budget.entries:  # charged: only a value-dependent refusal may come after it
            assert why == "values", f"charged, then refused for a public fact: {err}"
            assert [e["status"] for e in budget.entries] == ["failed"]
        else:
            assert budget.spent.epsilon == 0
        return
    assert why == "ok", f"released {kind!r} data"
    assert len(budget.entries) == 1 and budget.spent.epsilon == float(epsilon)
    value = out[0].value if many else out.value
    assert np.all(np.isfinite(value))
