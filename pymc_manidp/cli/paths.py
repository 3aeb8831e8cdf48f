"""The files of a release on the command line: every input it reads, and the output
checked before the release is charged (never an input, a ledger or a special file) and
written whole or not at all."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path


def _input_paths(args) -> list[Path]:
    """Every file the release reads: the data (a folder's or pattern's members, a
    ``.zarr`` store's folder) and a center file."""
    from pymc_manidp.io.stores import input_files, is_lazy_source

    paths = []
    if is_lazy_source(args.data):
        try:
            paths += input_files(args.data)
        except ValueError:  # nothing readable there: the reader names the problem later
            pass
    else:
        paths.append(Path(args.data))
    if str(args.center).strip().lower().endswith((".npy", ".csv", ".txt")):
        paths.append(Path(str(args.center).strip()))
    if getattr(args, "budget", None) is not None:  # the ledger is read and rewritten
        paths.append(Path(args.budget))
    return paths


def _stdout_is_open() -> bool:
    """False when standard output is closed (``>&-``): Python then sets ``sys.stdout``
    to None and ``print`` writes nowhere, silently."""
    if sys.stdout is None:
        return False
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # not a file (a test's capture): trust it
        return True
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


def _is_ledger(path: Path) -> bool:
    """``path`` is a regular file that starts as a privacy ledger does."""
    from pymc_manidp.privacy.budget import FORMAT

    try:  # non-blocking: a FIFO would otherwise wait for a writer
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return False
    try:
        return stat.S_ISREG(os.fstat(fd).st_mode) and FORMAT.encode() in os.read(fd, 4096)
    except OSError:
        return False
    finally:
        os.close(fd)


def _same_file(a: Path, b: Path) -> bool:
    """``a`` and ``b`` are one file by any names (False if either is missing)."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _resolve(path: Path) -> Path:
    """``path.resolve()``, a loop of symbolic links refused as the user's error (pathlib
    raises RuntimeError for it)."""
    try:
        return path.resolve()
    except (RuntimeError, OSError) as err:
        raise ValueError(
            f"{path} cannot be resolved: a loop of symbolic links, or {err}; name a file"
        ) from None


def _check_out(args) -> Path | None:
    """The output file, checked before any sampling: no input, a writable folder.

    An input is any file the release reads, after resolving folders, patterns and
    symbolic links (and hard links: the same file by any name); a name ending in
    ``/`` is a folder, and a folder is never the output. An existing output must be a
    regular file, and neither a privacy ledger nor a ledger's lock file: the record
    replaces it (``os.replace``), which would turn a device (``/dev/null``) or a FIFO
    into a plain file, lose a ledger, or give a lock a new inode that the next writer
    locks while another holds the old one. ``-`` (standard output) must be open.
    """
    if args.out == "-":
        if not _stdout_is_open():
            raise ValueError(
                "--out -: standard output is closed, so the release would be printed "
                "nowhere (and charged to a --budget all the same): open it (e.g. "
                "> release.json) or write to --out FILE"
            )
        return None
    out = Path(args.out)
    if args.out.endswith(("/", os.sep)) or args.out in (".", ".."):
        what = "is a folder" if out.is_dir() else "names a folder that does not exist"
        raise ValueError(f"--out {args.out} {what}: name a file, e.g. {out / 'release.json'}")
    try:
        st = os.lstat(out)
    except FileNotFoundError:
        st = None
    except OSError as err:  # e.g. a component that is not a folder
        raise ValueError(f"--out {out}: {err.strerror or err}") from None
    target = _resolve(out)
    # the ledger is written by the release even when it does not exist yet
    if getattr(args, "budget", None) is not None:
        from pymc_manidp.io.ledger import LedgerFile

        ledger = LedgerFile(args.budget)
        for name, path in (("the ledger", ledger.path), ("the ledger's lock", ledger.lock_path)):
            if target == _resolve(path) or _same_file(out, path):
                raise ValueError(
                    f"--out {out} is {name} of --budget {args.budget}: write elsewhere"
                )
    if st is not None and (
        _is_ledger(out) or (out.name.endswith(".lock") and _is_ledger(out.with_suffix("")))
    ):
        raise ValueError(
            f"--out {out} is a privacy ledger or a ledger's lock file: replacing it would "
            "lose the ledger's charges or defeat its lock; write elsewhere"
        )
    for src in _input_paths(args):
        if not src.exists():
            continue
        same = target == _resolve(src) or _same_file(out, src)
        if same or (src.is_dir() and _resolve(src) in target.parents):
            raise ValueError(
                f"--out {out} is {'inside ' if not same else ''}the input {src}: it would "
                "be overwritten; write the release elsewhere"
            )
    # after the inputs and ledgers, whose messages say more; the same check as
    # Release.to_json's (io.files.check_output_target)
    from pymc_manidp.io.files import check_output_target

    try:
        check_output_target(out, label=f"--out {out}")
    except ValueError as err:
        if "not a regular file" in str(err):
            raise ValueError(f"{err} (--out - for standard output)") from None
        raise
    parent = out.parent if str(out.parent) else Path(".")
    if not parent.is_dir():
        raise ValueError(f"--out {out}: folder {parent} does not exist")
    if not os.access(parent, os.W_OK) or (st is not None and not os.access(out, os.W_OK)):
        raise ValueError(f"--out {out}: not writable")
    return out


def _write_atomic(out: Path, text: str) -> None:
    """Write ``text`` to ``out`` whole or not at all (``io.files.write_atomic``)."""
    from pymc_manidp.io.files import write_atomic

    write_atomic(out, text)
