"""A manifold is one file: the package finds it (issue 23's premise).

``pymc_manidp.geometry`` discovers the spaces of its folder; data files, the command
line and ``pymc_manidp``'s namespace read them from there. The test drops a new module
into a copy of the package and uses the space everywhere, with no other file edited.
"""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import pymc_manidp as pmd
from pymc_manidp import geometry
from pymc_manidp.io import MANIFOLD_NAMES, manifold_for

ROOT = Path(__file__).resolve().parents[2]


def test_every_space_of_the_folder_is_public_and_named_once():
    assert set(geometry.MANIFOLD_CLASSES) >= {"Sphere", "SPD", "KendallShape", "Euclidean"}
    for cls_name, cls in geometry.MANIFOLD_CLASSES.items():
        assert getattr(pmd, cls_name) is cls
        assert cls_name in pmd.__all__ and cls_name in geometry.__all__
    names = [c.name for c in geometry.MANIFOLD_CLASSES.values() if c.name is not None]
    assert len(names) == len(set(names)) and tuple(sorted(names)) == MANIFOLD_NAMES


EXAMPLES = [M for cls in geometry.MANIFOLD_CLASSES.values() for M in cls.examples()]


@pytest.mark.parametrize("M", EXAMPLES, ids=repr)
def test_a_space_is_rebuilt_from_its_records(M):
    if type(M).name is None:
        pytest.skip(f"{type(M).__name__} is not read from files")
    for shape in {M.point_shape, (math.prod(M.point_shape),)}:
        rebuilt = type(M).from_record_shape(shape)  # a matrix may come flat, row by row
        assert rebuilt.point_shape == M.point_shape and rebuilt.dim == M.dim
    # through the reader, under the class's own name
    rebuilt, points = manifold_for(type(M).name, np.zeros((3, *M.point_shape)))
    assert rebuilt.point_shape == M.point_shape and points.shape == (3, *M.point_shape)


def test_unnamed_subclasses_are_not_offered_and_bad_names_are_refused():
    class Globe(pmd.Sphere):  # a subclass is another space: no name until it says so
        pass

    assert Globe.name is None and pmd.Sphere.name == "sphere"
    with pytest.raises(ValueError, match="unknown manifold 'globe': choose one of"):
        geometry.manifold_class("globe")
    with pytest.raises(ValueError, match="Tiny is not read from data files"):
        type("Tiny", (geometry.ManifoldBase,), {}).from_record_shape((3,))


def test_every_named_space_says_how_its_records_are_laid_out():
    for name in MANIFOLD_NAMES:
        assert geometry.manifold_class(name).record_layout.startswith("(n, ")


NEW_SPACE = textwrap.dedent(
    '''
    """A test space: the unit sphere under another name, in its own file."""
    from dataclasses import dataclass
    from typing import ClassVar

    import numpy as np

    from pymc_manidp.geometry.sphere import Sphere

    __all__ = ["Globe"]


    @dataclass(frozen=True)
    class Globe(Sphere):
        name: ClassVar[str] = "globe"
        record_layout: ClassVar[str] = "(n, 3): a unit vector"
        exact_sampling = True
        homogeneous = True
        volume_is_radial = True

        @classmethod
        def from_record_shape(cls, shape):
            if shape != (3,):
                raise ValueError(f"globe records have 3 coordinates, got {shape}")
            return cls(dim=2)

        @classmethod
        def audit_space(cls):
            return cls(dim=2), np.array([0.0, 0.0, 1.0]), np.pi / 8, 40
    '''
)

USE_IT = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    import pymc_manidp as pmd
    from pymc_manidp.cli import build_parser
    from pymc_manidp.io import manifold_for

    M, x = manifold_for("globe", np.tile([0.0, 0.0, 1.0], (4, 1)))
    parser = build_parser()
    release = parser.parse_args(["release", "d.npy", "--manifold", "globe", "--epsilon", "1",
                                 "--center", "0,0,1", "--radius", "0.3"])
    audit = parser.parse_args(["audit", "--manifold", "globe"])
    print(json.dumps({"public": pmd.Globe is type(M), "points": list(x.shape),
                      "release": release.manifold, "audit": audit.manifold}))
    """
)


@pytest.mark.parametrize("duplicate", [False, True], ids=["new", "duplicate-name"])
def test_a_new_file_in_geometry_is_a_new_space_everywhere(tmp_path, duplicate):
    package = tmp_path / "pymc_manidp"
    shutil.copytree(ROOT / "pymc_manidp", package, ignore=shutil.ignore_patterns("__pycache__"))
    source = NEW_SPACE.replace('"globe"', '"sphere"') if duplicate else NEW_SPACE
    (package / "geometry" / "globe.py").write_text(source)
    run = subprocess.run(
        [sys.executable, "-c", USE_IT],
        cwd=tmp_path,
        env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    if duplicate:
        assert run.returncode != 0 and "two manifolds are called 'sphere'" in run.stderr
        return
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout.strip().splitlines()[-1]) == {
        "public": True,
        "points": [4, 3],
        "release": "globe",
        "audit": "globe",
    }
