"""The public namespace ``pymc_manidp`` holds the public API and nothing else (issue 38, item 12).

``dir(pmd)`` is what tab completion and ``help(pmd)`` show a user: it must list exactly
``__all__``, each name of which resolves to the object of that name. Helpers the
``__init__`` needs (``importlib``, ``from __future__ import annotations``) must not leak
as ``pmd.importlib`` or ``pmd.annotations``. That ``import pymc_manidp`` stays lazy is
tests/test_layers.py's business.
"""

from __future__ import annotations

import types

import pytest

import pymc_manidp as pmd


def test_dir_is_all():
    assert len(set(pmd.__all__)) == len(pmd.__all__)
    assert dir(pmd) == sorted(pmd.__all__)


@pytest.mark.parametrize("name", sorted(pmd.__all__))
def test_each_public_name_resolves_to_itself(name):
    value = getattr(pmd, name)
    if name == "__version__":
        assert isinstance(value, str)
    elif name == "options":  # the one instance of the package's options
        from pymc_manidp._options import Options

        assert isinstance(value, Options)
    else:  # a class or a function, found under its own name
        assert value.__name__ == name


@pytest.mark.parametrize("name", ["annotations", "importlib", "_PUBLIC", "sys"])
def test_helpers_are_not_public(name):
    assert name not in dir(pmd)
    if not name.startswith("_"):
        with pytest.raises(AttributeError, match=f"no attribute '{name}'"):
            getattr(pmd, name)


def test_module_dict_holds_only_public_names_and_subpackages():
    # whatever was imported so far: a public name, a subpackage set by the import
    # system (pmd.geometry after ``import pymc_manidp.geometry``), or a private name
    leaked = [
        key
        for key, value in vars(pmd).items()
        if not key.startswith("_")
        and key not in pmd.__all__
        and not (isinstance(value, types.ModuleType) and value.__name__ == f"pymc_manidp.{key}")
    ]
    assert leaked == []
