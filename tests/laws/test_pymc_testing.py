"""PyMC's own test helpers (``pymc.testing``) on the manifold distributions.

``BaseTestDistributionRandom``: ``dist`` passes the parameters to the ``Op`` in order,
``size`` gives the shapes PyMC's multivariate distributions give, and draws equal the
exact sampler's for the same seed (the law of those draws is tested by KS elsewhere:
``tests/laws/test_pymc_workflow.py``, ``tests/laws/test_exact.py``).
``assert_support_point_is_expected``: the starting point is one ``sigma`` from the
footpoint (off the cusp; the polar chart puts the footpoint at log-radius ``-inf``).
"""

# ruff: noqa: RUF012  (pymc.testing.BaseTestDistributionRandom is configured by class attributes)
from __future__ import annotations

import warnings

import numpy as np
import pymc as pm
from pymc.testing import BaseTestDistributionRandom, assert_support_point_is_expected

import pymc_manidp as pmd
from pymc_manidp.laws.exact import sample_kng, sample_laplace

warnings.filterwarnings("ignore", message="Numba will use object mode")

S2 = pmd.Sphere(dim=2)
NORTH = np.array([0.0, 0.0, 1.0])
K5 = pmd.KendallShape(k_landmarks=5)
DOM = pmd.DataDomain(S2, NORTH, 0.4)
DATA = S2.exp_coords(NORTH, np.random.default_rng(0).normal(size=(10, 2)) * 0.05)
MULTI_SIZES = [None, (), 1, (1,), 5, (4, 5)]


def _expected(point_shape):
    return [
        point_shape,
        point_shape,
        (1, *point_shape),
        (1, *point_shape),
        (5, *point_shape),
        (4, 5, *point_shape),
    ]


def _seeded(draw):
    def builder():
        def ref(size, **params):
            rng = np.random.default_rng(20160911)  # BaseTestDistributionRandom's seed
            return draw(rng, size, **params)

        return ref

    return builder


class TestManifoldLaplaceRandom(BaseTestDistributionRandom):
    pymc_dist = pmd.ManifoldLaplace
    pymc_dist_params = {"manifold": S2, "footpoint": NORTH, "sigma": 0.2}
    expected_rv_op_params = {"footpoint": NORTH, "sigma": 0.2}
    reference_dist_params = {"footpoint": NORTH, "sigma": 0.2}
    reference_dist = staticmethod(
        _seeded(
            lambda rng, size, footpoint, sigma: (
                sample_laplace(S2, footpoint, sigma, size, rng).points
            )
        )
    )
    sizes_to_check = MULTI_SIZES
    sizes_expected = _expected((3,))
    checks_to_run = [
        "check_pymc_params_match_rv_op",
        "check_pymc_draws_match_reference",
        "check_rv_size",
    ]


class TestKNGRandom(BaseTestDistributionRandom):
    pymc_dist = pmd.KNG
    pymc_dist_params = {"manifold": S2, "data": DATA, "sigma": 0.05, "domain": DOM}
    expected_rv_op_params = {"data": DATA, "sigma": 0.05}
    reference_dist_params = {"data": DATA, "sigma": 0.05}
    reference_dist = staticmethod(
        _seeded(
            lambda rng, size, data, sigma: sample_kng(S2, data, sigma, size, rng, domain=DOM).points
        )
    )
    sizes_to_check = MULTI_SIZES
    sizes_expected = _expected((3,))
    checks_to_run = [
        "check_pymc_params_match_rv_op",
        "check_pymc_draws_match_reference",
        "check_rv_size",
    ]


class TestManifoldUniformRandom(BaseTestDistributionRandom):
    pymc_dist = pmd.ManifoldUniform
    pymc_dist_params = {"manifold": K5}
    expected_rv_op_params = {}
    reference_dist_params = {}
    reference_dist = staticmethod(
        _seeded(lambda rng, size: K5.validate(rng.standard_normal((size, 5, 2))))
    )
    sizes_to_check = MULTI_SIZES
    sizes_expected = _expected((5, 2))
    checks_to_run = [
        "check_pymc_params_match_rv_op",
        "check_pymc_draws_match_reference",
        "check_rv_size",
    ]


def test_laplace_support_point():
    with pm.Model() as model:
        pmd.ManifoldLaplace("x", S2, NORTH, 0.2, size=(2,))
    u = np.full(2, 0.2 / np.sqrt(2))
    expected = np.broadcast_to(S2.exp_coords(NORTH, u), (2, 3))
    assert_support_point_is_expected(model, expected)
    assert np.allclose(S2.dist(NORTH, expected), 0.2)  # one sigma from the footpoint


def test_kng_support_point():
    with pm.Model() as model:
        pmd.KNG("x", S2, DATA, 0.05, DOM)
    mean = pmd.frechet_mean(S2, DATA).mean
    expected = S2.exp_coords(mean, np.full(2, 0.05 / np.sqrt(2)))
    assert_support_point_is_expected(model, expected)
    assert np.isclose(S2.dist(mean, expected), 0.05)


def test_uniform_support_point():
    with pm.Model() as model:
        pmd.ManifoldUniform("x", S2)
    assert_support_point_is_expected(model, np.array([1.0, 2.0, 3.0]) / np.sqrt(14.0))
