"""pymc-manidp: differentially private releases on Riemannian manifolds, the PyMC way.

The public names below are loaded on first use (PEP 562), so that importing a lower
layer (``import pymc_manidp.geometry``) does not load PyMC through this package's
``__init__``; ``import pymc_manidp as pmd`` then ``pmd.KNGMechanism`` works as usual. The manifold
classes (``pmd.Sphere``, ``pmd.SPD``, ...) are those of :mod:`pymc_manidp.geometry`,
which finds them in its folder: a new space edits no file here.
"""

# no ``from __future__ import annotations`` and ``importlib`` under a private name: a
# module-level name here is an attribute of ``pmd`` (tests/test_public_namespace.py)
import importlib as _importlib

__version__ = "0.1.0.dev0"

#: public name -> module that defines it (docs/architecture.md: the layers)
_PUBLIC = {
    "Manifold": "pymc_manidp.geometry",
    "DataDomain": "pymc_manidp.stats",
    "DomainError": "pymc_manidp.stats",
    "FrechetResult": "pymc_manidp.stats",
    "frechet_mean": "pymc_manidp.stats",
    "MedianResult": "pymc_manidp.stats",
    "frechet_median": "pymc_manidp.stats",
    "RegressionResult": "pymc_manidp.stats",
    "geodesic_regression": "pymc_manidp.stats",
    "ManifoldLaplace": "pymc_manidp.laws",
    "KNG": "pymc_manidp.laws",
    "ManifoldUniform": "pymc_manidp.laws",
    "VonMisesFisher": "pymc_manidp.laws",
    "MatrixFisher": "pymc_manidp.laws",
    "Bingham": "pymc_manidp.laws",
    "noise_aware_data": "pymc_manidp.laws",
    "noise_aware_model": "pymc_manidp.laws",
    "noise_aware_regression_model": "pymc_manidp.laws",
    "calibration_study": "pymc_manidp.mcmc",
    "MCMCSettings": "pymc_manidp.mcmc",  # how long an MCMC release samples
    "Release": "pymc_manidp.privacy",
    "DiagnosticsError": "pymc_manidp.privacy",
    "PrivacyBudget": "pymc_manidp.privacy",
    "BudgetExceededError": "pymc_manidp.privacy",
    "LaplaceMechanism": "pymc_manidp.mechanisms",
    "KNGMechanism": "pymc_manidp.mechanisms",
    "RegressionKNGMechanism": "pymc_manidp.mechanisms",
    "SequentialRegressionKNGMechanism": "pymc_manidp.mechanisms",
    "options": "pymc_manidp._options",
    "TangentGaussianMechanism": "pymc_manidp.mechanisms",
    "TangentLaplaceMechanism": "pymc_manidp.mechanisms",
    "TwoStageTangentMechanism": "pymc_manidp.mechanisms",
    "RiemannianGaussianMechanism": "pymc_manidp.mechanisms",
}


#: the subpackages, loaded on first use as ``pmd.datasets``, ``pmd.privacy``, ...: the docs
#: write ``pmd.datasets.load_cities()`` after ``import pymc_manidp as pmd`` alone. They
#: stay out of ``__all__`` (``from pymc_manidp import *`` imports the API, not the layers)
_SUBPACKAGES = frozenset(
    {
        "geometry",
        "stats",
        "laws",
        "mcmc",
        "privacy",
        "mechanisms",
        "io",
        "datasets",
        "experiments",
        "cli",
    }
)


def _manifold_classes() -> dict[str, type]:
    # the manifolds are not listed here: each is one file of pymc_manidp.geometry,
    # found there (docs/architecture.md, "How to add a manifold")
    return _importlib.import_module("pymc_manidp.geometry").MANIFOLD_CLASSES


def __getattr__(name: str):
    if name in _PUBLIC:
        value = getattr(_importlib.import_module(_PUBLIC[name]), name)
    elif name == "__all__":
        value = _public_names()
    elif name in _SUBPACKAGES:
        value = _importlib.import_module(f"pymc_manidp.{name}")
    elif name[:1].isupper() and name in _manifold_classes():  # Sphere, SPD, ...
        value = _manifold_classes()[name]
    else:
        raise AttributeError(f"module 'pymc_manidp' has no attribute {name!r}")
    globals()[name] = value  # later look-ups skip this function
    return value


def _public_names() -> list[str]:
    return sorted([*_PUBLIC, *_manifold_classes(), "__version__"])


def __dir__():
    # the public API only (what tab completion and help() show), not this module's helpers
    return _public_names()
