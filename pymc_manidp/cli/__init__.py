"""Command line ``pymc-manidp``: ``demo``, ``release``, ``budget``, ``audit`` and
``reproduce``.

Every failure ends the program with one line on stderr, never a traceback. Exit codes
(docs/cli.md):

- 0: success;
- 1: the privacy audit ran and failed (``audit`` only);
- 2: bad input or a refused release (docs/cli.md lists every class: a missing or
  malformed input, an output that is an input, a cluster that is not one, a bad
  environment variable, a failed premise, diagnostics, a sampler cap);
- 3: an unexpected internal error (a bug: please report the line printed);
- 4: the release was made (and charged to ``--budget``) but its output could not be
  written; the ledger keeps its public record (``pymc-manidp budget LEDGER --json``);
- 130: interrupted (Ctrl-C);
- 141: the reader of standard output closed it early (``--out - | head``): what was
  asked for was done (a release was made and charged) and its output cut short.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

# the command line's parts, one job each; the names once defined here are still served
# from here
from pymc_manidp.cli.commands import (
    AUDIT_ALIASES,  # noqa: F401
    COMMANDS,
    MCMC_OPTIONS,  # noqa: F401
    audit,  # noqa: F401
    budget,  # noqa: F401
    demo,  # noqa: F401
    release,  # noqa: F401
    reproduce,  # noqa: F401
)
from pymc_manidp.cli.exit_codes import (
    EXIT_AUDIT_FAILED,
    EXIT_BAD_INPUT,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_OUTPUT_LOST,
    EXIT_PIPE_CLOSED,
    OutputLostError,
)
from pymc_manidp.cli.messages import (
    KEYWORD_OPTIONS,  # noqa: F401
    LEDGER_KEYWORD_OPTIONS,  # noqa: F401
    _error_line,
    _one_line,
)
from pymc_manidp.cli.parser import build_parser
from pymc_manidp.environment import environment_problem

# Nothing heavy is imported here: NumPy, PyTensor and the package load inside main(),
# where a Ctrl-C during the seconds of imports exits 130 with one line, and after
# PyTensor's compile folder is known to be writable.

__all__ = [
    "EXIT_AUDIT_FAILED",
    "EXIT_BAD_INPUT",
    "EXIT_INTERNAL",
    "EXIT_OUTPUT_LOST",
    "build_parser",
    "main",
]


class _BrokenEnvironment(RuntimeError):
    """A dependency cannot be imported in this environment (exit code 2)."""


def _start_dependencies() -> None:
    """Import PyTensor and numba here, where their failure is the environment's.

    :func:`~pymc_manidp.environment.environment_problem` catches the variables known to
    break them; any other setting they refuse (a PyTensor flag with a bad value, a
    numba variable numba cannot parse) raises here, as a :class:`_BrokenEnvironment`
    with one line naming it, instead of a traceback or numba's many-line warning.
    """
    import warnings

    with warnings.catch_warnings():
        # numba warns, with a traceback in the message, about a variable it cannot parse
        warnings.filterwarnings("error", message="Environment variable '", category=RuntimeWarning)
        for name, label in (("pytensor", "PyTensor"), ("numba", "numba")):
            try:
                __import__(name)
            except Exception as err:
                first = (str(err).splitlines() or [type(err).__name__])[0]
                raise _BrokenEnvironment(
                    f"{label} cannot start with this environment ({type(err).__name__}: "
                    f"{first}); check the variables it reads (PYTENSOR_FLAGS, PYTENSORRC, "
                    "OMP_NUM_THREADS, NUMBA_*)"
                ) from err
    _check_pytensor_compiledir()


def _check_pytensor_compiledir() -> None:
    """Refuse PyTensor's compile folder unless it is ours alone (issue 43 item 7): the
    check a release from Python makes too (``geometry._numba.cache``)."""
    from pymc_manidp.geometry._numba.cache import pytensor_compiledir_problem

    problem = pytensor_compiledir_problem()
    if problem is not None:
        raise _BrokenEnvironment(problem)


def _cannot_write(folder: Path) -> str | None:
    """Why ``folder`` cannot be made or written, or None (it is made, mode 0700)."""
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder):
            return None
    except OSError as err:
        return err.strerror or type(err).__name__


def _writable_compile_dir() -> None:
    """Give PyTensor and the package a temporary compile folder (with one warning line)
    when theirs cannot be made or written, e.g. ``HOME`` read-only or ``/proc``.

    PyTensor creates its folder (``~/.pytensor``) when it is first imported and fails
    with a long traceback; the package's cache (``~/.cache/pymc-manidp``, where numba
    keeps the compiled kernels) would warn at every kernel module. A folder the user
    chose for PyTensor (``PYTENSOR_FLAGS``, ``PYTENSORRC``) is left alone. Runs after
    :func:`~pymc_manidp.environment.environment_problem`, so the variables read here
    are absolute paths.
    """
    import atexit
    import shutil

    home = os.path.expanduser("~")
    notes, tmp = [], None

    def temporary():
        nonlocal tmp
        if tmp is None:
            tmp = tempfile.mkdtemp(prefix="pymc-manidp-pytensor-")
            atexit.register(shutil.rmtree, tmp, ignore_errors=True)
        return tmp

    flags = os.environ.get("PYTENSOR_FLAGS", "")
    if not ("compiledir" in flags or os.environ.get("PYTENSORRC")):
        default = Path(home) / ".pytensor"
        reason = _cannot_write(default)
        if reason is not None:
            new = f"base_compiledir={temporary()}"
            os.environ["PYTENSOR_FLAGS"] = ",".join(filter(None, (flags, new)))
            notes.append(f"PyTensor's compile folder {default} cannot be written ({reason})")
    # as geometry/_numba/cache.py's cache_dir, without importing it (it loads PyTensor)
    ours = os.path.expanduser(os.environ.get("PYMC_MANIDP_CACHE_DIR", "").strip())
    if not ours:
        xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(home, ".cache")
        ours = os.path.join(xdg, "pymc-manidp")
    reason = _cannot_write(Path(ours))
    if reason is not None:
        os.environ["PYMC_MANIDP_CACHE_DIR"] = os.path.join(temporary(), "pymc-manidp")
        notes.append(f"the package's compile cache {ours} cannot be written ({reason})")
    if notes:
        print(
            f"pymc-manidp: warning: {' and '.join(notes)} (HOME={os.environ.get('HOME')!r}): "
            f"compiling in {tmp}, removed at exit; set HOME to a writable folder, or "
            "PYTENSOR_FLAGS=base_compiledir=DIR and PYMC_MANIDP_CACHE_DIR=DIR",
            file=sys.stderr,
        )


def _silence_stdout() -> None:
    """Send what is left for a closed stdout to /dev/null (Python's documented remedy for
    SIGPIPE: otherwise the flush at exit prints a traceback of its own)."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # not a file (a test's capture)
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit code (module docstring), one line on stderr."""
    problem = environment_problem()  # shared with the Python API: stdlib only
    if problem is not None:  # before any dependency reads it
        print(f"pymc-manidp: error: {problem}", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:  # the imports take seconds: Ctrl-C there is an interruption like any other
        _writable_compile_dir()
        _start_dependencies()
        from pymc_manidp.laws.exact import ExactSamplingError
        from pymc_manidp.privacy.diagnostics import DiagnosticsError

        parser = build_parser()
        args = parser.parse_args(argv)
    except KeyboardInterrupt:
        print("pymc-manidp: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except _BrokenEnvironment as err:
        print(f"pymc-manidp: error: {_one_line(err)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        return COMMANDS[args.command](args)
    except BrokenPipeError:
        # not a refusal (code 2 says nothing was released, and here something was): the
        # reader left. Point stdout at /dev/null so the interpreter's last flush is quiet
        _silence_stdout()
        print(
            f"pymc-manidp {args.command}: standard output was closed by its reader; "
            "the command ran, its output was cut short",
            file=sys.stderr,
        )
        return EXIT_PIPE_CLOSED
    except OutputLostError as err:  # not code 2: a release was made, and maybe charged
        print(f"pymc-manidp {args.command}: error: {_one_line(err)}", file=sys.stderr)
        return EXIT_OUTPUT_LOST
    # OSError includes a lost or unreachable cluster (ClusterError); ImportError a
    # missing optional package (nutpie asked for by name)
    except (
        ValueError,
        TypeError,
        OSError,
        ImportError,
        DiagnosticsError,
        ExactSamplingError,
    ) as err:
        line = _error_line(err, parser.commands[args.command])
        print(f"pymc-manidp {args.command}: error: {line}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("pymc-manidp: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as err:  # a bug: still one line, and a code apart from "audit failed"
        print(
            f"pymc-manidp {args.command}: internal error ({type(err).__name__}): "
            f"{_one_line(err)}; nothing was released. Please report this line.",
            file=sys.stderr,
        )
        return EXIT_INTERNAL
