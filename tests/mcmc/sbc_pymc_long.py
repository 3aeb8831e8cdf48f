"""The SBC of ``test_sbc_manifolds.py`` with PyMC's NUTS: run on demand, not by default.

The same studies, sizes and checks as ``tests/mcmc/test_sbc_manifolds.py`` (SPD(3) and
Kendall(6), 80 replicates, α = 0.01 with Bonferroni), sampled with PyMC's NUTS, where
the SPD(3) crash of issue 28 happened. The slow tier runs them with 40 replicates
(``test_sbc_with_pymc_is_calibrated``); these, twice the size, are for a closer look.
The file name does not match ``test_*.py``, so ``pytest`` collects it only when
named::

    pytest -p no:xdist tests/mcmc/sbc_pymc_long.py --durations=0
"""

from __future__ import annotations

import pytest

from tests.mcmc.test_sbc_manifolds import SPACES, check_calibrated


@pytest.mark.slow
@pytest.mark.parametrize("space", list(SPACES))
def test_sbc_with_pymc_is_calibrated(space):
    check_calibrated(space, "pymc")
