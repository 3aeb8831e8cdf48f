"""Simulation-based calibration of one ranked statistic on nutpie, for the law tests.

:func:`nutpie_sbc` runs :func:`pymc_manidp.calibration_study` (the model compiled once,
every replicate's chains adapting from scratch) and returns the chi-square p-value of
the ranks of one statistic; with ``release_factor`` the releases are drawn at
``release_factor * sigma`` while the model's likelihood keeps ``sigma`` (the pattern of
``tests/mcmc/test_sbc_manifolds.py``): a model whose likelihood has half the sigma of
the data is ``release_factor = 2``. The prior's own draws are left alone (they go
through the same sampler, at another sigma, or through ``sample_uniform``).

Sizes (``SIZES``): 2 chains x 100 draws after 100 tuning steps, thinned by 4: ranks
among L = 50 draws, 10 bins.
"""

from __future__ import annotations

from unittest import mock

import numpy as np
import pytest

import pymc_manidp as pmd
from pymc_manidp.mcmc.sampling import has_nutpie

SIZES = {"draws": 100, "tune": 100, "chains": 2, "thin": 4, "bins": 10}
needs_nutpie = pytest.mark.skipif(not has_nutpie(), reason="nutpie is not installed")


def nutpie_sbc(model, statistic, sigma, replicates, seed, release_factor=None):
    """``(p-value, result)``: chi-square of the ranks of ``statistic(points) -> (m,)``.

    ``sigma`` is the model's likelihood sigma; with ``release_factor`` the releases
    (and only draws at ``sigma``) are drawn at ``release_factor * sigma``.
    """
    from pymc_manidp.laws import exact

    original = exact.sample_laplace

    def off(M, footpoint, s, *args, **kwargs):
        wrong = release_factor is not None and np.isclose(s, sigma)
        return original(M, footpoint, release_factor * s if wrong else s, *args, **kwargs)

    def stats(points):
        return np.asarray(statistic(points), float)[:, None]

    with mock.patch.object(exact, "sample_laplace", off):
        res = pmd.calibration_study(
            model,
            replicates=replicates,
            statistics=stats,
            backend="nutpie",
            random_seed=seed,
            **SIZES,
        )
    return float(res.pvalues[0]), res
