"""The experiments that release through ``release_many`` are not charged to a budget.

``Mechanism.sample`` refused to run inside ``with budget:`` (its draws are releases the
budget would not see); ``release_many`` charges the budget entered instead, so an
experiment run inside one would spend it on simulated replicates. ``kng2022_fig1``
refuses, as the experiments did before.
"""

from __future__ import annotations

import pytest

import pymc_manidp as pmd
from pymc_manidp.experiments import _common as C
from pymc_manidp.experiments import kng2022_fig1


def test_kng2022_fig1_refuses_to_run_inside_a_budget():
    seeds = C.child_seeds(1, 0, 0, count=2)
    job = ("S2", 10, 1.0, [(j, seeds[j]) for j in range(2)])
    assert len(kng2022_fig1._chunk(*job)) == 2 * 7  # seven methods per replicate on S2
    budget = pmd.PrivacyBudget(10.0)
    with budget, pytest.raises(ValueError, match="outside 'with budget:'"):
        kng2022_fig1._chunk(*job)
    assert budget.entries == []
