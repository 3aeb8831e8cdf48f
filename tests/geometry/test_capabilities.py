"""The optional members are capabilities (issue 37, item 6): a space has all of one or none.

``isinstance(M, NoiseMap)`` only looks at whether the members exist, so a space that
defined a member as ``None`` (or as a property returning ``None``) would pass it and
break the code that trusts it. The oracle is the table of what each shipped space
offers (docs/architecture.md, "How to add a manifold").
"""

from __future__ import annotations

import pytest

import pymc_manidp as pmd
from pymc_manidp.geometry import MANIFOLD_CLASSES, capabilities
from pymc_manidp.geometry.capabilities import (
    AmbientMeanStart,
    BallExit,
    GaussianChart,
    GenericPoint,
    LaplaceNormalizer,
    NoiseMap,
    Origin,
    Projection,
    UniformLaw,
)
from pymc_manidp.laws.normalizers import has_laplace_normalizer
from tests.geometry.test_custom_manifold import R2

PROTOCOLS = [getattr(capabilities, name) for name in capabilities.__all__]

#: what each space offers (SPD(k): the Laplace normalizer for k <= 3 only)
OFFERS = {
    "Euclidean": {BallExit, NoiseMap, Origin},  # its mean is a closed form
    "Hyperbolic": {AmbientMeanStart, BallExit, GenericPoint, LaplaceNormalizer, NoiseMap, Origin},
    "KendallShape": {BallExit, GaussianChart, GenericPoint, NoiseMap, UniformLaw},
    "Rotations": {
        *(AmbientMeanStart, BallExit, GaussianChart, GenericPoint, LaplaceNormalizer),
        *(NoiseMap, Origin, Projection, UniformLaw),
    },
    "SPD": {AmbientMeanStart, LaplaceNormalizer, NoiseMap, Origin, Projection},
    "Sphere": {
        *(AmbientMeanStart, BallExit, GaussianChart, GenericPoint, NoiseMap),
        *(Projection, UniformLaw),
    },
}

SPACES = [M for cls in MANIFOLD_CLASSES.values() for M in cls.examples()]
SPACES += [pmd.SPD(k=4), R2]


def _members(proto) -> list[str]:
    return sorted(proto.__protocol_attrs__)


@pytest.mark.parametrize("M", SPACES, ids=repr)
@pytest.mark.parametrize("proto", PROTOCOLS, ids=lambda p: p.__name__)
def test_a_space_has_all_of_a_capability_or_none_of_it(M, proto):
    names = _members(proto)
    if isinstance(M, proto):
        for name in names:
            value = getattr(M, name)
            assert callable(value) or isinstance(value, tuple) or hasattr(value, "shape"), (
                f"{M!r}.{name} = {value!r}: a capability's member must be defined, not None"
            )
    else:
        assert not [name for name in names if hasattr(M, name)], (
            f"{M!r} defines part of {proto.__name__}: define all of {names} or none"
        )


@pytest.mark.parametrize("cls", sorted(MANIFOLD_CLASSES), ids=str)
def test_each_shipped_space_offers_what_the_table_says(cls):
    for M in MANIFOLD_CLASSES[cls].examples():
        got = {proto for proto in PROTOCOLS if isinstance(M, proto)}
        assert got == OFFERS[cls], f"{M!r}"


def test_a_capability_can_depend_on_the_instance():
    """SPD's tabulated normalizer exists for k <= 3 only (set per instance)."""
    assert isinstance(pmd.SPD(k=3), LaplaceNormalizer)
    assert not isinstance(pmd.SPD(k=4), LaplaceNormalizer)
    assert has_laplace_normalizer(pmd.SPD(k=3))
    assert not has_laplace_normalizer(pmd.SPD(k=4))


def test_the_test_only_manifold_offers_what_it_defines():
    got = {proto for proto in PROTOCOLS if isinstance(R2, proto)}
    assert got == {GaussianChart, UniformLaw}
