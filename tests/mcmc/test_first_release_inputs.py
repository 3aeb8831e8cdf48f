"""What a first NUTS release compiles, and what its model carries (issue 38 item 6).

A first release's cost is compiling the model's log-density (docs/benchmarks.md, "Where
a first NUTS release goes"). These tests pin the two facts that make that a one-time
cost per shipped space and law, whatever the data: the model holds the records only
where the law reads them (KNG's Σ log_x(x_i); the Laplace's density depends on the data
only through the Fréchet mean η), and its structure, which keys the compiled entry
points (``mcmc.nutpie_cache``), does not depend on n or on the values of the data.
Counts and keys only: no compilation, no clock.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import pymc_manidp as pmd
from pymc_manidp.mcmc import nutpie_cache


def _data(M, center, r, n, seed):
    """``n`` records inside B_r(center), spread over it."""
    rng = np.random.default_rng(seed)
    c = rng.standard_normal((n, M.dim))
    c *= (0.9 * r * rng.random((n, 1)) ** (1 / M.dim)) / np.linalg.norm(c, axis=1, keepdims=True)
    return M.exp_coords(center, c)


def _spaces():
    from scipy.spatial.transform import Rotation

    kendall = pmd.KendallShape(k_landmarks=4)
    shape = np.array([[1.0, 0.0], [0.1, 1.0], [-1.0, 0.2], [0.0, -1.1]])
    return {
        "S2": (pmd.Sphere(dim=2), np.array([0.0, 0.0, 1.0]), math.pi / 8),
        "SPD2": (pmd.SPD(k=2), np.eye(2), 1.0),
        "H2": (pmd.Hyperbolic(dim=2), np.array([1.0, 0.0, 0.0]), 1.5),
        "SO3": (pmd.Rotations(), Rotation.from_rotvec([0.2, 0.1, -0.3]).as_matrix(), 0.5),
        "Kendall4": (kendall, kendall.validate(shape), 0.3),
        "R3": (pmd.Euclidean(dim=3), np.zeros(3), 1.0),
    }


SPACES = _spaces()


def _inputs(model):
    """Each ``pm.Data`` of ``model`` by name: its shape."""
    return {v.name: np.shape(v.get_value()) for v in model.data_vars}


@pytest.mark.parametrize("space", SPACES)
def test_laplace_model_carries_no_record_and_one_structure_for_every_n(space):
    M, center, r = SPACES[space]
    mech = pmd.LaplaceMechanism(M, epsilon=1.0, center=center, radius=r)
    small, large = (mech.model(_data(M, center, r, n, n)) for n in (30, 300))
    shapes = _inputs(small)
    # sigma, the chart at eta and the footpoint eta: nothing of the size of the data
    assert shapes == _inputs(large)
    assert set(shapes) == {"scale", "footpoint", *(k for k in shapes if k.startswith("chart_"))}
    assert all(30 not in s and 300 not in s for s in shapes.values())
    key = nutpie_cache._structure_key(small)
    assert key is not None and key == nutpie_cache._structure_key(large)


@pytest.mark.parametrize("space", SPACES)
def test_kng_model_reads_the_records_once_and_one_structure_for_every_n(space):
    M, center, r = SPACES[space]
    mech = pmd.KNGMechanism(M, epsilon=1.0, center=center, radius=r)
    small, large = (mech.model(_data(M, center, r, n, n)) for n in (30, 300))
    sized = {k: s for k, s in _inputs(large).items() if 300 in s}
    # KNG's density is |sum_i log_x(x_i)|: the records enter once, as "data"
    assert list(sized) == ["data"] and sized["data"][0] == 300
    assert _inputs(small)["data"][0] == 30
    key = nutpie_cache._structure_key(small)
    assert key is not None and key == nutpie_cache._structure_key(large)


def _mechanisms(M, center, r, epsilon=1.0):
    yield pmd.LaplaceMechanism(M, epsilon=epsilon, center=center, radius=r)
    yield pmd.KNGMechanism(M, epsilon=epsilon, center=center, radius=r)
    if (
        "nuts"
        in pmd.KNGMechanism(M, epsilon=1.0, center=center, radius=r, statistic="median").samplers
    ):
        yield pmd.KNGMechanism(M, epsilon=epsilon, center=center, radius=r, statistic="median")


@pytest.mark.parametrize("space", SPACES)
def test_warm_cache_compiles_the_model_a_later_release_looks_up(space, monkeypatch):
    """``Mechanism.warm_cache`` compiles, from the public center alone, the model whose
    structure key a release of other data (other n, ε, ball) looks up on disk."""
    from pymc_manidp.mechanisms import base

    M, center, r = SPACES[space]
    compiled = []

    class Recorder:  # stands for CompiledSampler: records what would be compiled
        def __init__(self, model, sampler, *, backend=None):
            compiled.append((nutpie_cache._structure_key(model), sampler))
            self.cache_hits = 0

    monkeypatch.setattr(base.mcmc, "CompiledSampler", Recorder)
    for mech in _mechanisms(M, center, r):
        assert mech.warm_cache() == 0
    # a release elsewhere: another n, epsilon, a smaller ball about another center;
    # the median's chart is capped at the ball's edge, so its key is the ball's own
    c2 = M.exp_coords(center, np.full(M.dim, 0.05 * r / np.sqrt(M.dim)))
    elsewhere = _mechanisms(M, c2, 0.5 * r, 0.3)
    same_ball = _mechanisms(M, center, r, 0.3)
    for (key, sampler), other, same in zip(compiled, elsewhere, same_ball, strict=True):
        assert sampler == "nuts" and key is not None
        median = getattr(same, "statistic", None) == "median"
        mech, c, rr = (same, center, r) if median else (other, c2, 0.5 * r)
        assert key == nutpie_cache._structure_key(_release_model(mech, _data(M, c, rr, 77, 5)))
        if median:  # the ball enters its model: another ball is another compile
            elsewhere_model = _release_model(other, _data(M, c2, 0.5 * r, 77, 5))
            assert key != nutpie_cache._structure_key(elsewhere_model)


def _release_model(mech, data):
    """The model a NUTS release of ``data`` compiles (fused where the space has kernels)."""
    checked = mech.domain.check(data)
    mode, inputs = mech.mcmc_inputs(checked)
    return mech._release_model(mode, mech.calibrate(len(data)).sigma, inputs)


def test_warm_cache_is_refused_where_there_is_no_nuts():
    M = pmd.Sphere(dim=2)
    mech = pmd.TangentLaplaceMechanism(M, epsilon=1.0, center=[0.0, 0.0, 1.0], radius=0.3)
    with pytest.raises(ValueError, match="no 'nuts' sampler exists"):
        mech.warm_cache()


@pytest.mark.parametrize("space", SPACES)
def test_initial_point_unrewritten_equals_pymcs_own(space):
    """The cache's initial-point function (Python's linker, no graph rewrites: cheaper
    for a function nutpie calls once per chain) gives PyMC's own jittered start, the
    one ``nutpie.compile_pymc_model`` would use, bit for bit: seeded releases do not
    move. 5 seeds on each mechanism with NUTS of each space."""
    from pymc.initial_point import make_initial_point_fn

    M, center, r = SPACES[space]
    for mech in _mechanisms(M, center, r):
        model = mech.model(_data(M, center, r, 40, 3))
        ours = nutpie_cache._initial_point_fn(model)
        pymcs = make_initial_point_fn(
            model=model,
            default_strategy="support_point",
            jitter_rvs=set(model.free_RVs),
            return_transformed=True,
        )
        for seed in (0, 1, 2, 12345, 2**31 - 1):
            got, want = ours(seed), pymcs(seed)
            assert list(got) == list(want)
            for name in want:
                np.testing.assert_array_equal(got[name], want[name], strict=True)


@given(backend=st.sampled_from([1, True, 0, 1.5, b"pymc", ["pymc"], "", "numba", "PYMC ", None]))
def test_warm_cache_refuses_a_bad_backend_before_compiling(backend):
    """A TypeError (not a string: 1 and True raised AttributeError on .lower()) or a
    ValueError naming the choices ("" read as the default before), raised before any
    compile; None is the default backend."""
    from pymc_manidp.mcmc import sampling

    def no_compile(*_, **__):
        raise AssertionError("compiled")

    mech = pmd.KNGMechanism(pmd.Sphere(dim=2), epsilon=1.0, center=[0.0, 0.0, 1.0], radius=0.3)
    if backend is None:
        assert sampling.nuts_backend(backend) in ("nutpie", "pymc")
        return
    err = TypeError if not isinstance(backend, str) else ValueError
    with pytest.raises(err, match="backend must be"):
        sampling.nuts_backend(backend)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(sampling.CompiledSampler, "__init__", no_compile)
        with pytest.raises(err, match="backend must be"):
            mech.warm_cache(backend=backend)
