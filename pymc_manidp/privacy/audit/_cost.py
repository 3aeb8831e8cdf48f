"""What an audit would cost, estimated (and refused if too much) before it allocates.

A quadrature grid grows like ``N^dim``, the default pairs like ``n``, a sample test
like ``size``: an audit asked for ``resolution=100000`` or ``n=10**12`` must say so in
one line, not be killed by the operating system. The limits are half of this
machine's physical memory and an hour of computing time, unless the caller passes
``max_bytes`` / ``max_seconds``.
"""

from __future__ import annotations

import math
import os
import time

from pymc_manidp._validation import check_positive_real

#: Default limit on an audit's estimated computing time, in seconds.
DEFAULT_MAX_SECONDS = 3600.0
# Used when the operating system does not say how much memory there is.
_FALLBACK_MEMORY = 16 * 2**30


def memory_limit(max_bytes=None) -> float:
    """``max_bytes`` checked, or half of this machine's physical memory."""
    if max_bytes is not None:
        return check_positive_real(max_bytes, "max_bytes")
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        total = _FALLBACK_MEMORY
    return float(total if total > 0 else _FALLBACK_MEMORY) / 2.0


def time_limit(max_seconds=None) -> float:
    """``max_seconds`` checked, or :data:`DEFAULT_MAX_SECONDS`."""
    if max_seconds is None:
        return DEFAULT_MAX_SECONDS
    return check_positive_real(max_seconds, "max_seconds")


def nbytes_of(*factors) -> float:
    """The product of ``factors`` (ints or floats) as a float, inf past the largest
    float: an int argument such as ``n = 10**400`` has no float, and its size estimate
    must still be refused by ``refuse`` (ValueError), not raise OverflowError."""
    try:
        return float(math.prod(factors))
    except OverflowError:
        return math.inf


def format_bytes(nbytes: float) -> str:
    """``1.5 GiB``-style size."""
    for unit, scale in (("EiB", 2**60), ("PiB", 2**50), ("TiB", 2**40), ("GiB", 2**30)):
        if nbytes >= scale:
            return f"{nbytes / scale:.3g} {unit}"
    return f"{nbytes / 2**20:.3g} MiB"


def format_seconds(seconds: float) -> str:
    """``2.5 h``-style duration."""
    for unit, scale in (("years", 365.25 * 86400), ("days", 86400), ("h", 3600), ("min", 60)):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds:.3g} s"


def refuse(what: str, nbytes: float, seconds, max_bytes: float, max_seconds: float, fix: str):
    """Raise ``ValueError`` if the estimates exceed the limits (``seconds`` may be None:
    not estimated yet). One sentence: what it would take, the limits, what to choose."""
    over_memory = nbytes > max_bytes
    over_time = seconds is not None and seconds > max_seconds
    if not (over_memory or over_time):
        return
    took = (
        f"about {format_bytes(nbytes)} of memory (limit {format_bytes(max_bytes)}: "
        "max_bytes, default half of this machine's memory)"
    )
    if seconds is not None:
        took += (
            f" and {format_seconds(seconds)} of computing time (limit "
            f"{format_seconds(max_seconds)}: max_seconds)"
        )
    raise ValueError(f"{what} would need {took}: {fix}")


def largest(fits, lo: int, hi: int) -> int:
    """The largest integer ``x`` in ``[lo, hi]`` with ``fits(x)`` (monotone), else ``lo - 1``."""
    if not fits(lo):
        return lo - 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid - 1)
    return lo


def timed(f, repeats: int = 3) -> float:
    """Shortest of ``repeats`` wall-clock times of ``f()`` (a busy machine only adds)."""
    best = math.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        f()
        best = min(best, time.perf_counter() - t0)
    return best
