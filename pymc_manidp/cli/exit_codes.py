"""The exit codes of ``pymc-manidp`` (docs/cli.md) and the error that means code 4."""

from __future__ import annotations


class OutputLostError(OSError):
    """A release was made (and maybe charged) but writing its output failed."""


EXIT_AUDIT_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_INTERNAL = 3
EXIT_OUTPUT_LOST = 4
EXIT_INTERRUPTED = 130
EXIT_PIPE_CLOSED = 141  # 128 + SIGPIPE: what a shell reports for a writer killed by it
