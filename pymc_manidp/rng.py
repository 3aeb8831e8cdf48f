"""Random number generators from what users pass as ``random_seed``.

One rule everywhere: an int seed or a NumPy ``Generator`` makes a run reproducible (for
tests and audits), ``None`` draws the noise from OS entropy (for real releases).
"""

from __future__ import annotations

import numbers

import numpy as np

__all__ = ["as_generator", "resolve_rng"]


def resolve_rng(random_seed) -> tuple[np.random.Generator, str]:
    """Return a Generator and the seed policy a Release records.

    Parameters
    ----------
    random_seed : int, numpy.random.Generator or None
        ``None`` draws from OS entropy (real releases); an int or a Generator makes the
        run reproducible (tests, audits).

    Returns
    -------
    rng : numpy.random.Generator
        The generator to draw from (``random_seed`` itself when it is one).
    policy : str
        ``"OS entropy"`` or ``"fixed seed"``.

    Raises
    ------
    TypeError
        If ``random_seed`` is of another type (a bool or a float, say).

    Examples
    --------
    >>> resolve_rng(3)[1], resolve_rng(None)[1]
    ('fixed seed', 'OS entropy')
    """
    if random_seed is None:
        return np.random.default_rng(), "OS entropy"
    if isinstance(random_seed, np.random.Generator):
        return random_seed, "fixed seed"
    if isinstance(random_seed, bool) or not isinstance(random_seed, numbers.Integral):
        raise TypeError(
            f"random_seed must be an int, a numpy Generator or None, got {random_seed!r}"
        )
    if random_seed < 0:
        raise ValueError(f"random_seed must be a non-negative integer, got {random_seed}")
    return np.random.default_rng(int(random_seed)), "fixed seed"


def as_generator(random_seed) -> np.random.Generator:
    """Return a NumPy Generator from an int seed, a Generator (used as is) or ``None``.

    Parameters
    ----------
    random_seed : int, numpy.random.Generator or None
        As in :func:`~pymc_manidp.rng.resolve_rng`.

    Returns
    -------
    numpy.random.Generator
        The generator.

    Examples
    --------
    >>> g = as_generator(0)
    >>> as_generator(g) is g
    True
    """
    return resolve_rng(random_seed)[0]
