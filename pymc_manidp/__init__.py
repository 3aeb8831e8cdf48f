"""pymc-manidp: differentially private releases on Riemannian manifolds, the PyMC way.

The public names below are loaded on first use (PEP 562), so that importing a lower
layer (``import pymc_manidp.geometry``) does not load PyMC through this package's
``__init__``; ``import pymc_manidp as pmd`` then ``pmd.KNGMechanism`` works as usual.
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0.dev0"

#: public name -> module that defines it (docs/architecture.md: the layers)
_PUBLIC = {
    "Manifold": "pymc_manidp.geometry",
    "Sphere": "pymc_manidp.geometry",
    "SPD": "pymc_manidp.geometry",
    "KendallShape": "pymc_manidp.geometry",
    "Euclidean": "pymc_manidp.geometry",
    "DataDomain": "pymc_manidp.stats",
    "DomainError": "pymc_manidp.stats",
    "FrechetResult": "pymc_manidp.stats",
    "frechet_mean": "pymc_manidp.stats",
    "ManifoldLaplace": "pymc_manidp.laws",
    "KNG": "pymc_manidp.laws",
    "ManifoldUniform": "pymc_manidp.laws",
    "noise_aware_data": "pymc_manidp.laws",
    "noise_aware_model": "pymc_manidp.laws",
    "calibration_study": "pymc_manidp.mcmc",
    "Release": "pymc_manidp.privacy",
    "DiagnosticsError": "pymc_manidp.privacy",
    "LaplaceMechanism": "pymc_manidp.mechanisms",
    "KNGMechanism": "pymc_manidp.mechanisms",
}

__all__ = sorted([*_PUBLIC, "__version__"])


def __getattr__(name: str):
    if name in _PUBLIC:
        value = getattr(importlib.import_module(_PUBLIC[name]), name)
        globals()[name] = value  # later look-ups skip this function
        return value
    raise AttributeError(f"module 'pymc_manidp' has no attribute {name!r}")


def __dir__():
    return sorted({*globals(), *_PUBLIC})
