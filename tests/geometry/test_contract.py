"""The contract suite (``tests/geometry/contract.py``) on every shipped manifold, and
proof that it can fail: planted bugs in a PyTensor twin and in a volume density.

The spaces come from the registry (``geometry.MANIFOLD_CLASSES``) and each class's own
``examples()``: a new file of ``geometry/`` is checked here with no edit of this file.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

import pymc_manidp as pmd
from pymc_manidp import geometry
from tests.geometry import contract

SHIPPED = [M for cls in geometry.MANIFOLD_CLASSES.values() for M in cls.examples()]

TestShippedContract = contract.suite(*SHIPPED)


@pytest.mark.parametrize("cls", list(geometry.MANIFOLD_CLASSES.values()), ids=lambda c: c.__name__)
def test_every_registered_class_gives_small_examples_of_itself(cls):
    examples = cls.examples()
    assert examples, f"{cls.__name__}.examples() is empty: the contract suite would skip it"
    assert all(type(M) is cls for M in examples)
    assert all(M.dim <= 6 for M in examples)  # small: the suite must stay fast


def test_the_six_shipped_spaces_are_all_checked():
    assert {type(M).__name__ for M in SHIPPED} == set(geometry.MANIFOLD_CLASSES)
    assert len(geometry.MANIFOLD_CLASSES) >= 6


def test_optional_checks_are_generated_only_where_the_hook_is():
    names = {
        name: {p.args[1][i].__class__ for i in range(len(p.args[1]))}
        for name, f in vars(TestShippedContract).items()
        if name.startswith("test_")
        for p in f.pytestmark
    }
    assert pmd.SPD not in names["test_gaussian_chart"]  # SPD has no uniform law
    assert pmd.SPD not in names["test_ball_exit"]
    assert names["test_twin_values"] == set(geometry.MANIFOLD_CLASSES.values())


# --- planted bugs: the suite's checks fail on them -----------------------------------------
@dataclass(frozen=True)
class WrongDistTwin(pmd.Sphere):
    """``pt_dist`` off by one part in a million: a twin that disagrees with NumPy."""

    def pt_dist(self, x, y):
        return (1 + 1e-6) * super().pt_dist(x, y)


@dataclass(frozen=True)
class CutGradientTwin(pmd.Hyperbolic):
    """``pt_log_volume_density`` with the right values and a gradient cut off (what a
    hand-written series branch without its derivative does)."""

    def pt_log_volume_density(self, coords):
        from pytensor.gradient import disconnected_grad

        return disconnected_grad(super().pt_log_volume_density(coords))


@dataclass(frozen=True)
class WrongVolumeDensity(pmd.SPD):
    """The SPD volume density with its sinh argument not halved (``sinh(d)/d``
    instead of ``sinh(d/2)/(d/2)``): a plausible slip in a formula."""

    def log_volume_density(self, coords):
        return 2.0 * super().log_volume_density(coords)


def test_the_suite_catches_a_wrong_twin_value():
    M = WrongDistTwin(dim=2)
    contract.check_exp_log_round_trip(M)  # the NumPy maps are the sphere's
    with pytest.raises(AssertionError, match="pt_dist"):
        contract.check_twin_values(M)


def test_the_suite_catches_a_twin_with_a_wrong_gradient():
    M = CutGradientTwin(dim=3)
    contract.check_twin_values(M)  # the values are right
    with pytest.raises(AssertionError):
        contract.check_twin_gradients(M)


def test_the_suite_catches_a_wrong_volume_density():
    M = WrongVolumeDensity(k=2)
    contract.check_distance(M)
    with pytest.raises(AssertionError):
        contract.check_volume_density(M)
    # and, as a control, the unbroken twin of the planted class passes
    contract.check_volume_density(pmd.SPD(k=2))


@pytest.mark.parametrize(
    "wrong", [lambda w: 1.02 * w, lambda w: w + np.swapaxes(w, -1, -2)], ids=["2%", "symmetrized"]
)
def test_the_noise_check_catches_a_wrong_noise_map(monkeypatch, wrong):
    """A noise map off by 2% in length, or one that forgets to symmetrize its noise
    (SPD), breaks the co-isometry."""
    M = pmd.SPD(k=2)

    def exp_noise(M_, name, x, w):
        return np.asarray(M_.pt_exp_noise(x, wrong(w)).eval())

    monkeypatch.setattr(contract, "_noise", exp_noise)
    with pytest.raises(AssertionError, match="Not equal to tolerance"):
        contract.check_noise_maps(M)


def test_flat_volume_density_is_far_from_the_sphere_chart():
    """The missing-Jacobian mistake is far off the pulled-back metric."""
    M = pmd.Sphere(dim=2)
    got = contract.pulled_back_log_sqrt_det(M, np.array([0.0, 0.0, 1.0]), np.array([1.0, 0.5]))
    assert abs(np.expm1(0.0 - got)) > 1e-2
