"""The public namespace ``pymc_manidp`` holds the public API and nothing else (issue 38, item 12).

``dir(pmd)`` is what tab completion and ``help(pmd)`` show a user: it must list exactly
``__all__``, each name of which resolves to the object of that name. Helpers the
``__init__`` needs (``importlib``, ``from __future__ import annotations``) must not leak
as ``pmd.importlib`` or ``pmd.annotations``. That ``import pymc_manidp`` stays lazy is
tests/test_layers.py's business. The old names removed before 1.0 stay removed, each
listed in docs/changelog.md with its new name (issue 37, item 7).
"""

from __future__ import annotations

import functools
import subprocess
import sys
import types
import warnings
from pathlib import Path

import pytest

import pymc_manidp as pmd

ROOT = Path(__file__).parents[1]


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


@pytest.mark.parametrize("name", ["datasets", "laws", "privacy", "stats", "mcmc"])
def test_subpackages_load_on_attribute_access_in_a_fresh_process(name):
    """``import pymc_manidp as pmd; pmd.datasets.load_cities()`` as the docs write it:
    in a fresh process (here the subpackage may already be imported) the attribute
    loads the subpackage; it stays out of ``__all__`` and ``dir``."""
    code = (
        "import sys, pymc_manidp as pmd\n"
        f"assert 'pymc_manidp.{name}' not in sys.modules\n"
        f"m = pmd.{name}\n"
        f"assert m is sys.modules['pymc_manidp.{name}']\n"
        f"assert '{name}' not in pmd.__all__ and '{name}' not in dir(pmd)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, timeout=120)


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


# --- the old names removed before 1.0 (issue 37 item 7; docs/changelog.md) ----------------
_MOVED_TO_LAWS = (
    "KNG",
    "ChartTransform",
    "ManifoldLaplace",
    "ManifoldUniform",
    "NormalizedGaussian",
    "PolarChart",
    "kng_logp",
    "laplace_log_normalizer",
    "laplace_logp",
)
_MOVED_TO_MCMC = (
    "HMC",
    "RWMH",
    "BatchTarget",
    "draw_chain",
    "initial_law",
    "meeting_times",
    "reflection_maximal",
    "tune_kernel",
)


def _module_attribute(module, name):
    import importlib

    return getattr(importlib.import_module(module), name)


def _mechanism():
    return pmd.KNGMechanism(pmd.Sphere(dim=2), epsilon=1.0, center=[0, 0, 1.0], radius=0.3)


def _chart(**kw):
    from pymc_manidp.laws import ChartTransform

    return ChartTransform(pmd.Sphere(dim=2), scale=0.2, **kw)


def _overrides_scale():
    class Old(pmd.KNGMechanism):
        def scale(self, n):
            return 1.0

    return Old


def _fast_extra():
    import tomllib

    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    return pyproject["project"]["optional-dependencies"]["fast"]


#: (old name as the changelog writes it, how code reaches it, what that raises, matching)
REMOVED = [
    *(
        (
            f"`{module}.{name}",
            functools.partial(_module_attribute, module, name),
            AttributeError,
            f"no attribute '{name}'",
        )
        for module, name in [
            *(("pymc_manidp.mechanisms", name) for name in _MOVED_TO_LAWS),
            *(
                (where, name)
                for where in ("pymc_manidp.privacy", "pymc_manidp.privacy.coupling")
                for name in _MOVED_TO_MCMC
            ),
            ("pymc_manidp.stats", "rate"),
            ("pymc_manidp.stats.sensitivity", "rate"),
            ("pymc_manidp.io", "MANIFOLDS"),
        ]
    ),
    ("`Mechanism.scale(n)`", lambda: _mechanism().scale, AttributeError, "'scale'"),
    (
        "`Mechanism.last_sampler_info`",
        lambda: _mechanism().last_sampler_info,
        AttributeError,
        "'last_sampler_info'",
    ),
    (  # the one check kept: ignoring the override would release with another sigma
        "overrides `scale(n)`",
        _overrides_scale,
        TypeError,
        r"Old overrides scale\(n\), which was renamed sigma\(n\) in 0.1.0: override sigma",
    ),
    (
        "`ChartTransform(manifold, center=..., scale=...)`",
        lambda: _chart(center=[0, 0, 1.0]),
        TypeError,
        "'center'",
    ),
    (
        "`ChartTransform.center`",
        lambda: _chart(origin=[0, 0, 1.0]).center,
        AttributeError,
        "center",
    ),
    ('`pip install "pymc-manidp[fast]"`', _fast_extra, KeyError, "fast"),
]


@pytest.mark.parametrize(("old", "reach", "error", "match"), REMOVED, ids=[r[0] for r in REMOVED])
def test_old_names_are_gone_and_in_the_changelog(old, reach, error, match):
    """No shim serves an old name any longer, with or without a warning, and the
    changelog says what to write instead."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a shim that warns fails here too
        with pytest.raises(error, match=match):
            reach()
    assert old in (ROOT / "docs" / "changelog.md").read_text(encoding="utf-8")
