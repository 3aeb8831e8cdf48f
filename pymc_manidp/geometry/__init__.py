"""Geometry layer: manifolds with NumPy maps and PyTensor twins.

A manifold is one module of this folder (docs/architecture.md, "How to add a
manifold"). The modules are found here, not listed: every public module of the folder
other than ``base`` is imported, and each class it exports in its
``__all__`` that subclasses :class:`ManifoldBase` becomes part of this package's
namespace (and of ``pymc_manidp``'s); the ones with a
``name`` are offered to data files and the command line
(:func:`manifold_class`, :func:`manifold_names`). So a new space edits no file but
its own.
"""

from __future__ import annotations

import importlib
import pkgutil

from pymc_manidp.geometry.base import Manifold, ManifoldBase, max_radius_from
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

#: modules of this folder that hold no manifold
_NOT_SPACES = frozenset({"base"})


def _discover() -> dict[str, type]:
    """The manifold classes of this folder's modules, by class name."""
    classes: dict[str, type] = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name.startswith("_") or info.name in _NOT_SPACES:
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        for attr in getattr(module, "__all__", ()):
            obj = getattr(module, attr)
            if isinstance(obj, type) and issubclass(obj, ManifoldBase):
                classes[attr] = obj
    return classes


#: every manifold class of the package, by class name (``{"Sphere": Sphere, ...}``)
MANIFOLD_CLASSES: dict[str, type] = _discover()
globals().update(MANIFOLD_CLASSES)


def _by_name() -> dict[str, type]:
    named: dict[str, type] = {}
    for cls in MANIFOLD_CLASSES.values():
        if cls.name is None:
            continue
        if cls.name in named:
            raise RuntimeError(
                f"two manifolds are called {cls.name!r}: {named[cls.name].__name__} and "
                f"{cls.__name__} (ManifoldBase.name must be unique)"
            )
        named[cls.name] = cls
    return dict(sorted(named.items()))


_BY_NAME = _by_name()


def manifold_names() -> tuple[str, ...]:
    """The names of the spaces that data files and the command line offer, sorted.

    Returns
    -------
    tuple of str
        Each named space's ``name`` (``"sphere"``, ``"spd"``, ...).

    Examples
    --------
    >>> {"sphere", "spd", "kendall", "euclidean"} <= set(manifold_names())
    True
    """
    return tuple(_BY_NAME)


def manifold_class(name: str) -> type:
    """The manifold class called ``name`` (its class attribute ``name``).

    Parameters
    ----------
    name : str
        One of :func:`manifold_names`.

    Returns
    -------
    type
        The class; ``from_record_shape`` builds an instance from the data's shape.

    Raises
    ------
    ValueError
        No space has that name (the message lists the names).

    Examples
    --------
    >>> manifold_class("sphere").from_record_shape((3,))
    Sphere(dim=2, radius=1.0)
    """
    try:
        return _BY_NAME[name]
    except (KeyError, TypeError):
        raise ValueError(
            f"unknown manifold {name!r}: choose one of {', '.join(_BY_NAME)}"
        ) from None


__all__ = [
    "MANIFOLD_CLASSES",
    "Manifold",
    "ManifoldBase",
    "manifold_class",
    "manifold_names",
    "max_radius_from",
    "AmbientMeanStart",
    "BallExit",
    "GaussianChart",
    "GenericPoint",
    "LaplaceNormalizer",
    "NoiseMap",
    "Origin",
    "Projection",
    "UniformLaw",
    *sorted(MANIFOLD_CLASSES),
]
