r"""Simulation-based calibration on SPD(3) and Kendall(6), PyMC's NUTS and nutpie (issue 28).

``pmd.calibration_study`` of ``pmd.noise_aware_model`` with one unrestricted Laplace
release: on SPD(3) with a ``ManifoldLaplace(I, 0.3)`` prior (SPD is not compact: the
default uniform prior does not exist) and a release at σ = 0.3, where PyMC's NUTS used
to stop with ``ZeroDivisionError`` (the kernel fix and its seeds:
``tests/laws/test_numerical_failures.py``); on Kendall(6) with the default uniform
prior and σ = 0.05 (n = 50 records in a ball of radius 0.3 at ε = 1 give σ ≈ 0.04).
A prior at σ = 0.5 is normalizable on SPD(3) but barely (σ < 1/√2): its radius has a
tail e^{-(2 - √2)t}, it drew truths at distance 11 from I, whose posteriors took
trees of 1,023 steps, and the study 90 s instead of 20 s on nutpie.

Every study must complete (0 crashes) and pass, at α = 0.01 with Bonferroni over its
2k tests (k statistics):

- a chi-square test of uniform ranks per statistic (Talts et al. 2018), 8 bins;
- a two-sided binomial test of the 90% central intervals' coverage per statistic,
  against the coverage uniform ranks give with L draws: the interval between the
  empirical quantiles (NumPy's linear interpolation at positions l(L − 1)/2 ±) of L
  exchangeable draws covers a further one with probability l(L − 1)/(L + 1)
  (E U_(j) = (j + 1)/(L + 1) for the order statistics of L uniforms), 0.865 for
  l = 0.9, L = 50, not 0.9.

The statistics are functions of the point, not of its representative: on SPD(3)
log det η, the distance ‖log η‖ to the prior's center I and the entry η₀₁; on
Kendall's shapes (a pre-shape is defined up to a rotation, so its coordinates are not)
the distances to three fixed shapes.

Sizes: 80 replicates, 2 chains × 100 draws after 100 tuning steps, thinned by 4
(ranks among L = 50 draws). The same study with the releases drawn at another σ than
the model's likelihood says (SPD: σ/2, the posterior twice too wide; Kendall: 2σ,
twice too narrow) is rejected at these sizes; the wrong variants run on nutpie (the
test's power does not depend on the backend, and nutpie costs a fraction). PyMC's
NUTS runs the same studies with 40 replicates, and its own wrong variants (a
likelihood with half the releases' σ), at the end of this file; the 80-replicate
studies with PyMC's NUTS are in ``sbc_pymc_long.py``, run on demand:
``pytest -p no:xdist tests/mcmc/sbc_pymc_long.py``.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytensor
import pytest
from scipy import stats as sps

import pymc_manidp as pmd
from pymc_manidp.mcmc.sampling import has_nutpie

ALPHA = 0.01
LEVEL = 0.9
SIZES = {"replicates": 80, "draws": 100, "tune": 100, "thin": 4, "bins": 8}
SPD3 = pmd.SPD(k=3)
K6 = pmd.KendallShape(k_landmarks=6)
SPD_PRIOR_SIGMA = 0.3
warnings.filterwarnings("ignore", message="Numba will use object mode")

needs_nutpie = pytest.mark.skipif(not has_nutpie(), reason="nutpie is not installed")


def _spd_statistics(points):
    """log det, the distance to I and the entry (0, 1): ``(m, 3, 3) -> (m, 3)``."""
    log_w = np.log(np.linalg.eigvalsh(points))
    return np.stack([log_w.sum(-1), np.sqrt(np.sum(log_w**2, axis=-1)), points[..., 0, 1]], axis=-1)


_K6_REFERENCES = K6.sample_uniform(np.random.default_rng(0), (3,))


def _kendall_statistics(points):
    """Distances to three fixed shapes: ``(m, 6, 2) -> (m, 3)``."""
    return np.stack([K6.dist(ref, points) for ref in _K6_REFERENCES], axis=-1)


def _spd_model(sigma):
    record = {"value": np.eye(3), "mechanism": "manifold Laplace", "sigma": sigma}
    prior = lambda name, **kw: pmd.ManifoldLaplace(name, SPD3, np.eye(3), SPD_PRIOR_SIGMA, **kw)  # noqa: E731
    return pmd.noise_aware_model({**record, "restricted": False}, SPD3, prior=prior)


def _kendall_model(sigma):
    record = {"value": K6.generic_point, "mechanism": "manifold Laplace", "sigma": sigma}
    return pmd.noise_aware_model({**record, "restricted": False}, K6)


# space: (model of sigma, statistics, the release's sigma, the wrong variant's factor
# on it, the study's seed)
SPACES = {
    "SPD3": (_spd_model, _spd_statistics, 0.3, 0.5, 1),
    "Kendall6": (_kendall_model, _kendall_statistics, 0.05, 2.0, 2),
}


def _study(space, backend, sizes=SIZES, sigma=None):
    build, statistics, release_sigma, _, seed = SPACES[space]
    sigma = release_sigma if sigma is None else sigma
    # numba's fastmath (PyTensor's default) lets a freshly compiled log-density differ
    # in the last bits from the same one loaded from the on-disk caches, and NUTS turns
    # a last bit into another chain: strict IEEE makes the ranks the same in a cold and
    # a warm process (as tests/laws/test_inference.py's SBC does)
    with pytensor.config.change_flags(numba__fastmath=False):
        return pmd.calibration_study(
            build(sigma), statistics=statistics, backend=backend, random_seed=seed, **sizes
        )


def sbc_pvalues(res):
    """The study's 2k p-values: chi-square of the ranks, then binomial of the coverage."""
    replicates = res.ranks.shape[0]
    null = LEVEL * (res.n_draws - 1) / (res.n_draws + 1)  # module docstring
    covered = np.rint(np.asarray(res.coverage.loc[LEVEL]) * replicates).astype(int)
    binomial = [sps.binomtest(int(c), replicates, null).pvalue for c in covered]
    return np.concatenate([res.pvalues, binomial])


def _describe(res):
    return {
        "histogram": res.histogram.T.tolist(),
        "coverage": res.coverage.loc[LEVEL].round(3).tolist(),
        "pvalues": sbc_pvalues(res).round(4).tolist(),
        "divergences": int(res.divergences.sum()),
    }


def check_calibrated(space, backend, sizes=SIZES):
    res = _study(space, backend, sizes)  # 0 crashes: the study completes
    assert res.ranks.shape == (sizes["replicates"], 3) and res.n_draws == 50
    pvalues = sbc_pvalues(res)
    assert pvalues.min() > ALPHA / pvalues.size, _describe(res)


def _check_wrong_sigma_is_rejected(
    space, monkeypatch, backend="nutpie", sizes=SIZES, sigma=None, factor=None
):
    # the releases are drawn at factor * sigma while the model's likelihood keeps sigma
    # (default: the release's sigma and factor of SPACES); the prior's own draws (SPD:
    # the Laplace at I) are left alone
    from pymc_manidp.laws import exact

    _, _, release_sigma, release_factor, _ = SPACES[space]
    sigma = release_sigma if sigma is None else sigma
    factor = release_factor if factor is None else factor
    original = exact.sample_laplace

    def off(M, footpoint, s, *args, **kwargs):
        prior = np.shape(footpoint) == (3, 3) and np.array_equal(footpoint, np.eye(3))
        wrong = np.isclose(s, sigma) and not prior
        return original(M, footpoint, factor * s if wrong else s, *args, **kwargs)

    monkeypatch.setattr(exact, "sample_laplace", off)
    res = _study(space, backend, sizes, sigma)
    pvalues = sbc_pvalues(res)
    assert pvalues.min() < ALPHA / pvalues.size, _describe(res)


# measured 2026-11-25 (pytest --durations, 2 busy cores, nutpie's cache warm): 34, 19,
# 19 and 18 s; 17, 11, 10 and 10 s once a study drew its truths and releases without
# numba (issue 28). A machine's first run also compiles the models into it (SPD(3):
# 70 s on an idle core, up to 8 min on a loaded one; Kendall(6): 30 s)
@pytest.mark.slow
@needs_nutpie
@pytest.mark.parametrize("space", list(SPACES))
def test_sbc_with_nutpie_is_calibrated(space):
    check_calibrated(space, "nutpie")


@pytest.mark.slow
@needs_nutpie
@pytest.mark.parametrize("space", list(SPACES))
def test_sbc_rejects_releases_drawn_at_another_sigma(space, monkeypatch):
    _check_wrong_sigma_is_rejected(space, monkeypatch)


# PyMC's NUTS: half the replicates (40, 5 a rank bin), the same draws (L = 50), each
# replicate about 0.2-0.4 s (a FreshNUTS: compiled once a study, fresh adaptation per
# replicate). At these sizes the nutpie variants above (SPD: releases at sigma/2, a
# posterior too wide) are not caught (measured: min p 0.007-0.07 over 3 seeds, against
# 0.0017); a likelihood with half the sigma the releases were drawn with (a posterior
# too narrow) is, on PyMC's NUTS itself: SPD's model at 0.15 with releases at 0.3
# (min p 8e-10), Kendall's at 0.05 with releases at 0.1 (min p 1e-4).
PYMC_SIZES = {**SIZES, "replicates": 40}
PYMC_WRONG = {"SPD3": (0.15, 2.0), "Kendall6": (0.05, 2.0)}  # (model's sigma, factor)


@pytest.mark.slow
@pytest.mark.parametrize("space", list(SPACES))
def test_sbc_with_pymc_is_calibrated(space):
    check_calibrated(space, "pymc", PYMC_SIZES)


@pytest.mark.slow
@pytest.mark.parametrize("space", list(SPACES))
def test_sbc_with_pymc_rejects_a_likelihood_with_half_the_sigma(space, monkeypatch):
    sigma, factor = PYMC_WRONG[space]
    _check_wrong_sigma_is_rejected(space, monkeypatch, "pymc", PYMC_SIZES, sigma, factor)
