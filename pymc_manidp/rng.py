"""Random number generators from what users pass as ``random_seed``.

One rule everywhere: an int seed or a NumPy ``Generator`` makes a run reproducible (for
tests and audits), ``None`` draws the noise from OS entropy (for real releases).
"""

from __future__ import annotations

import numbers

import numpy as np

__all__ = ["as_generator", "resolve_rng"]


def resolve_rng(random_seed) -> tuple[np.random.Generator, str]:
    """A Generator and the seed policy a Release records.

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
    """A NumPy Generator from an int seed, a Generator (used as is) or ``None``."""
    return resolve_rng(random_seed)[0]
