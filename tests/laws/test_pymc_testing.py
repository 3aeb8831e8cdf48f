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
from unittest import mock

import numpy as np
import pymc as pm
import pytest
from pymc.testing import (
    BaseTestDistributionRandom,
    Domain,
    assert_support_point_is_expected,
    check_logp,
)
from scipy import stats

import pymc_manidp as pmd
from pymc_manidp.laws import directional
from pymc_manidp.laws.directional import sample_vmf
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


# --- the von Mises–Fisher law (issue 40, item 5) ----------------------------------------
def _unit_vectors(p, n, seed):
    g = np.random.default_rng(seed).standard_normal((n, p))
    return list(g / np.linalg.norm(g, axis=-1, keepdims=True))


class TestVonMisesFisherRandom(BaseTestDistributionRandom):
    """Draws equal Wood's sampler's for the same seed; their law against SciPy's and the
    cosine's exact law: ``tests/laws/test_vmf.py``."""

    pymc_dist = pmd.VonMisesFisher
    pymc_dist_params = {"mu": NORTH, "kappa": 7.5}
    expected_rv_op_params = {"mu": NORTH, "kappa": 7.5}
    reference_dist_params = {"mu": NORTH, "kappa": 7.5}
    reference_dist = staticmethod(
        _seeded(
            lambda rng, size, mu, kappa: sample_vmf(mu, kappa, size=np.atleast_1d(size), rng=rng)
        )
    )
    sizes_to_check = MULTI_SIZES
    sizes_expected = _expected((3,))
    checks_to_run = [
        "check_pymc_params_match_rv_op",
        "check_pymc_draws_match_reference",
        "check_rv_size",
    ]


def _scipy_vmf_logpdf(value, mu, kappa):
    kappa = float(kappa)  # SciPy wants a Python scalar
    if kappa == 0:  # SciPy refuses κ = 0: the uniform law
        return -pmd.Sphere(dim=len(value) - 1).log_volume
    return stats.vonmises_fisher(mu, kappa).logpdf(value)


@pytest.mark.parametrize("p", [3, 10])
def test_vmf_check_logp_against_scipy(p):
    """``pymc.testing.check_logp``: values and ``mu`` unit vectors of R^p, κ from 0 to 1e4
    (SciPy's log-density is good to about 1e-9 there: 6 decimals); a κ below 0 must raise
    PyMC's ParameterValueError (the helper's own check of the edge)."""
    check_logp(
        pmd.VonMisesFisher,
        Domain(_unit_vectors(p, 4, 0), edges=(None, None)),
        {
            "mu": Domain(_unit_vectors(p, 3, 1), edges=(None, None)),
            "kappa": Domain([0.0, 0.3, 5.0, 300.0, 1e4], edges=(0.0, None)),
        },
        _scipy_vmf_logpdf,
        n_samples=-1,
    )


def test_vmf_check_logp_catches_a_wrong_normalizer():
    """The same helper refutes the law with a normalizer planted one dimension off."""
    right = directional._scaled_log_normalizer

    with (
        mock.patch.object(directional, "_scaled_log_normalizer", lambda p, k: right(p + 1, k)),
        pytest.raises(AssertionError),
    ):
        check_logp(
            pmd.VonMisesFisher,
            Domain(_unit_vectors(3, 2, 0), edges=(None, None)),
            {
                "mu": Domain(_unit_vectors(3, 2, 1), edges=(None, None)),
                "kappa": Domain([0.3, 5.0], edges=(0.0, None)),
            },
            _scipy_vmf_logpdf,
            n_samples=-1,
        )


def test_vmf_support_point_is_the_mean_direction():
    mu = np.array([0.6, 0.0, 0.8])
    with pm.Model() as model:
        pmd.VonMisesFisher("x", mu, 4.0, size=(2,))
    assert_support_point_is_expected(model, np.broadcast_to(mu, (2, 3)))
