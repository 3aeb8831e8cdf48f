"""The experiments that release through ``release_many`` are not charged to a budget.

``Mechanism.sample`` refused to run inside ``with budget:`` (its draws are releases the
budget would not see); ``release_many`` charges the budget entered instead, so an
experiment run inside one would spend it on simulated replicates. Every chunk function
that releases through it refuses, as the experiments did before.
"""

from __future__ import annotations

import pytest

import pymc_manidp as pmd
from pymc_manidp.experiments import _common as C
from pymc_manidp.experiments import kng2022_fig1, laplace2021_fig1, theorems


def _jobs(count=2):
    seeds = C.child_seeds(1, 0, 0, count=count)
    return [(j, seeds[j]) for j in range(count)]


CHUNKS = [
    # (chunk, arguments, rows it returns outside a budget)
    (kng2022_fig1._chunk, ("S2", 10, 1.0, _jobs()), 2 * 7),  # seven methods on S2
    (laplace2021_fig1._utility_chunk, ("S2", 10, 1.0, (0.5, 1.0), _jobs()), 2 * 3),
    (laplace2021_fig1._utility_chunk, ("SPD(2)", 10, 1.0, (0.5, 1.0), _jobs()), 2 * (2 + 4)),
    (theorems._rate_chunk, ("S2", 20, 1.0, _jobs()), 2 * 2),
    (theorems._inflation_chunk, (2, 3, 20, 1.0, 1.0, _jobs()), 2),
]


@pytest.mark.parametrize(
    "chunk, args, rows",
    CHUNKS,
    ids=[f"{c.__module__.split('.')[-1]}.{c.__name__}" for c, *_ in CHUNKS],
)
def test_chunks_refuse_to_run_inside_a_budget(chunk, args, rows):
    assert len(chunk(*args)) == rows
    budget = pmd.PrivacyBudget(10.0)
    with budget, pytest.raises(ValueError, match="outside 'with budget:'"):
        chunk(*args)
    assert budget.entries == []
