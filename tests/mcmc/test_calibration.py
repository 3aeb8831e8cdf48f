"""Calibration studies (issue 28, item 5): one compilation per study, SBC on S^2.

The compilation count is PyTensor's own: every compiled function goes through
``FunctionMaker``, counted here by a patch; a study's count must not grow with its
number of replicates. The slow SBC test states its alpha and sample size and catches a
deliberately wrong likelihood (half the sigma the releases were drawn with).
"""

from __future__ import annotations

import warnings

import numpy as np
import pymc as pm
import pytest
from pytensor.compile import maker

import pymc_manidp as pmd
from pymc_manidp.mcmc.sampling import has_nutpie

S2 = pmd.Sphere(dim=2)
M0 = np.array([0.0, 0.0, 1.0])
ALPHA = 0.01
warnings.filterwarnings("ignore", message="Numba will use object mode")


def _record(sigma=0.3, restricted=False):
    rec = {"value": M0, "mechanism": "manifold Laplace", "sigma": sigma, "restricted": restricted}
    if restricted:
        rec["public_ball"] = {"center": M0.tolist(), "radius": 0.5}
    return rec


@pytest.fixture
def compilations(monkeypatch):
    count = {"n": 0}
    original = maker.FunctionMaker.__init__

    def counting(self, *args, **kwargs):
        count["n"] += 1
        return original(self, *args, **kwargs)

    monkeypatch.setattr(maker.FunctionMaker, "__init__", counting)
    return count


def _study(model, replicates, backend, **kw):
    return pmd.calibration_study(
        model, replicates=replicates, draws=20, tune=20, backend=backend, random_seed=4, **kw
    )


@pytest.mark.skipif(not has_nutpie(), reason="nutpie is not installed")
def test_a_study_compiles_once_whatever_its_size(compilations):
    # nutpie: the prior draws and the model, compiled once each, for 1 or 3 replicates.
    # A first study in a fresh clone also fills nutpie's on-disk cache (more compiles,
    # once per machine): it runs before the count
    _study(pmd.noise_aware_model(_record(), S2), 1, "nutpie")
    counts = []
    for replicates in (1, 3):
        compilations["n"] = 0
        res = _study(pmd.noise_aware_model(_record(), S2), replicates, "nutpie")
        counts.append(compilations["n"])
        assert res.ranks.shape == (replicates, 3) and res.compilations == 1
    assert counts[0] == counts[1] <= 2, counts


@pytest.mark.slow
def test_with_pymc_a_replicate_compiles_nothing(compilations, monkeypatch):
    # PyMC's sampler: the NUTS step, the initial point and the ranked variable compiled
    # once per study (a FreshNUTS); the replicates' runs compile nothing. (pm.sample,
    # called per replicate until issue 28, compiled its initial point and trace helpers
    # at every call: about 1 s a replicate.)
    from pymc_manidp.mcmc.sampling import FreshNUTS

    during_runs = []
    original = FreshNUTS.sample

    def counted(self, **kwargs):
        before = compilations["n"]
        out = original(self, **kwargs)
        during_runs.append(compilations["n"] - before)
        return out

    monkeypatch.setattr(FreshNUTS, "sample", counted)
    res = _study(pmd.noise_aware_model(_record(), S2), 3, "pymc")
    assert during_runs == [0, 0, 0] and compilations["n"] > 0
    assert res.divergences.shape == (3,) and res.compilations == 1


@pytest.mark.skipif(not has_nutpie(), reason="nutpie is not installed")
def test_the_result_is_the_same_whatever_the_chunking():
    model = pmd.noise_aware_model(_record(), S2)
    one = _study(model, 3, "nutpie")
    two = _study(model, 3, "nutpie", chunks=2)
    np.testing.assert_array_equal(one.ranks, two.ranks)
    np.testing.assert_array_equal(one.truths, two.truths)
    assert two.compilations == 2
    # the table and the histogram describe the ranks
    assert list(one.coverage.index) == [0.5, 0.8, 0.9, 0.95]
    assert one.histogram.sum(axis=0).tolist() == [3, 3, 3]
    assert one.expected.sum() == pytest.approx(3.0)
    assert ((one.ranks >= 0) & (one.ranks <= one.n_draws)).all() and one.n_draws == 40


@pytest.mark.skipif(not has_nutpie(), reason="nutpie is not installed")
def test_a_distributed_client_runs_the_chunks():
    distributed = pytest.importorskip("distributed")
    model = pmd.noise_aware_model(_record(), S2)
    local = _study(model, 2, "nutpie")
    with distributed.Client(processes=False, n_workers=1, threads_per_worker=1) as client:
        on_cluster = _study(model, 2, "nutpie", client=client)
    np.testing.assert_array_equal(local.ranks, on_cluster.ranks)


def test_a_study_refuses_what_it_cannot_replace():
    with pm.Model() as model:
        pmd.ManifoldUniform("mean", S2)
        pmd.ManifoldLaplace("release", S2, model["mean"], 0.3, observed=M0)
    with pytest.raises(ValueError, match=r"is not a pm\.Data"):
        pmd.calibration_study(model, replicates=2)
    with pytest.raises(ValueError, match="is not a free variable"):
        pmd.calibration_study(pmd.noise_aware_model(_record(), S2), var="eta")


@pytest.mark.slow
def test_sbc_is_uniform_and_catches_a_likelihood_with_half_the_sigma(monkeypatch):
    # 150 replicates of one unrestricted release on S^2 (sigma = 0.3, uniform prior),
    # 2 chains x 200 draws thinned by 4 (100 draws per rank); chi-square of 10 rank bins
    # per coordinate, Bonferroni over the 3 at alpha = 0.01; the 90% intervals cover
    # within 0.08. The same study with releases drawn at 2 sigma (the model's likelihood
    # has half the true sigma) is caught. (A release restricted to a ball of radius 0.5
    # at sigma = 0.3 tells little beyond the prior: there SBC has almost no power against
    # a wrong likelihood, measured on grid posteriors; the restricted posterior is
    # checked against quadrature in tests/laws/test_noise_aware.py.)
    kw = dict(replicates=150, draws=200, tune=300, thin=4, random_seed=8)
    res = pmd.calibration_study(pmd.noise_aware_model(_record(0.3), S2), **kw)
    assert res.pvalues.min() > ALPHA / 3, (res.pvalues, res.histogram.T)
    assert np.all(np.abs(res.coverage.loc[0.9] - 0.9) < 0.08), res.coverage
    assert res.divergences.sum() <= 5

    from pymc_manidp.laws import exact

    original = exact.sample_laplace

    def doubled(M, footpoint, sigma, *args, **kwargs):
        return original(M, footpoint, 2 * sigma, *args, **kwargs)

    monkeypatch.setattr(exact, "sample_laplace", doubled)
    wrong = pmd.calibration_study(pmd.noise_aware_model(_record(0.3), S2), **kw)
    assert wrong.pvalues.min() < ALPHA / 3, (wrong.pvalues, wrong.histogram.T)
