"""Progress displays of the long calls: on in a terminal, off in logs and under CI.

Every call that can take more than a few seconds (an MCMC release, ``release_many``,
``calibration_study``, the audits, ``reproduce``) takes ``progressbar=`` as
``pm.sample`` does: ``True`` shows progress, ``False`` hides it, ``None`` (the default)
shows it only when stderr is a terminal and the environment variable ``CI`` is unset
or false, so that logs and CI runs stay free of redrawn bars. :func:`_progress_enabled`
is that one rule; :func:`progress_bar` is a ``rich`` bar, the library PyMC 6 draws its
own bars with, so the two look alike. Showing progress never changes a result: no
random number is drawn for it. A layer-0 module (beside ``rng``): it imports nothing
of the package, and ``rich`` only when a bar is shown.
"""

from __future__ import annotations

import contextlib
import os
import sys

import numpy as np

__all__ = ["progress_bar", "progress_status"]

#: values of ``$CI`` that mean "not under CI" (CI services set it to "true" or "1")
_CI_OFF = ("", "0", "false", "no", "off")


def _progress_enabled(progressbar=None) -> bool:
    """Whether to show progress: ``progressbar`` when it is a bool, else the default.

    Parameters
    ----------
    progressbar : bool or None
        ``True``/``False`` forces progress on/off; ``None``: on iff stderr is a
        terminal and ``$CI`` is unset (or ``0``/``false``/``no``/``off``).

    Returns
    -------
    bool

    Raises
    ------
    TypeError
        ``progressbar`` is neither a bool nor None (NumPy bools are accepted).

    Examples
    --------
    >>> _progress_enabled(True), _progress_enabled(False)
    (True, False)
    """
    if progressbar is not None:
        # a string such as "no" is truthy: refused rather than read as True
        if not isinstance(progressbar, (bool, np.bool_)):
            raise TypeError(
                f"progressbar must be True, False or None (automatic), got {progressbar!r}"
            )
        return bool(progressbar)
    if os.environ.get("CI", "").strip().lower() not in _CI_OFF:
        return False
    try:
        return bool(sys.stderr is not None and sys.stderr.isatty())
    except (AttributeError, ValueError, OSError):  # no stream, a closed one, a stand-in
        return False


@contextlib.contextmanager
def progress_bar(description: str, total: int, progressbar=None):
    """A rich progress bar on stderr for ``total`` steps; yields ``advance(k=1)``.

    Parameters
    ----------
    description : str
        The bar's label.
    total : int
        How many steps the work has.
    progressbar : bool or None
        As :func:`_progress_enabled`; when off, nothing is imported or drawn and
        ``advance`` does nothing.

    Yields
    ------
    callable
        ``advance(k=1)``: ``k`` more steps are done.
    """
    if not _progress_enabled(progressbar):
        yield lambda k=1: None
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    # stderr: stdout may carry what a command prints (a release, a table)
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=Console(stderr=True),
        transient=False,
    ) as bar:
        task = bar.add_task(description, total=int(total))
        yield lambda k=1: bar.advance(task, k)


@contextlib.contextmanager
def progress_status(message: str, progressbar=None):
    """A spinner with ``message`` on stderr while the block runs (work of unknown
    length, such as compiling a model), when :func:`_progress_enabled`.

    Parameters
    ----------
    message : str
        What is being done.
    progressbar : bool or None
        As :func:`_progress_enabled`.
    """
    if not _progress_enabled(progressbar):
        yield
        return
    from rich.console import Console

    with Console(stderr=True).status(message):
        yield
