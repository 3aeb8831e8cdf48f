"""Writing a record whole or not at all, and only over a regular file.

Shared by :meth:`Release.to_json <pymc_manidp.privacy.Release.to_json>` and the command
line's ``--out`` (through :mod:`pymc_manidp.io.files`, which re-exports both helpers).
They live in this layer, not in ``io/``, because ``Release`` (privacy, layer 5) may not
import upwards (docs/architecture.md, layers).
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from pathlib import Path

__all__ = ["check_output_target", "read_regular_bytes", "write_atomic"]


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "a device"


def check_output_target(path, *, label: str | None = None) -> os.stat_result | None:
    """Refuse an existing ``path`` that is not a regular file; its ``lstat`` (or None).

    The record replaces the target (``os.replace``), which would replace a symbolic
    link instead of writing through it, and turn a FIFO or a device (``/dev/null``)
    into a plain file; a folder is never a record.

    Parameters
    ----------
    path : str or os.PathLike
    label : str, optional
        How messages name the target (the CLI passes ``"--out PATH"``).

    Raises
    ------
    ValueError
        A symbolic link, a folder, a FIFO, socket or device, or a path whose folder
        cannot be read.
    """
    path = Path(path)
    label = label or str(path)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as err:  # e.g. a component that is not a folder
        raise ValueError(f"{label}: {err.strerror or err}") from None
    if stat.S_ISLNK(st.st_mode):
        raise ValueError(
            f"{label} is a symbolic link (to {os.path.realpath(path)}): the record "
            "would replace the link, not write through it; name the file itself"
        )
    if stat.S_ISDIR(st.st_mode):
        raise ValueError(f"{label} is a folder: name a file")
    if not stat.S_ISREG(st.st_mode):
        raise ValueError(
            f"{label} is {_kind(st.st_mode)}, not a regular file: the record would replace "
            "it with a plain file; write to a regular file or a new path"
        )
    return st


def write_atomic(path, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` whole or not at all.

    A temporary file in the same folder is written, flushed to disk and renamed over
    ``path`` (a rename within a file system is atomic): a failed write (disk full, a
    file size limit, a signal) leaves the previous file intact and no partial file.
    The new file gets the mode a new file gets (``0o666`` less the umask).

    Raises
    ------
    OSError
        The write failed, or ``path`` became something other than a regular file
        since it was checked (:func:`check_output_target`); it is then not replaced.
    """
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        # mkstemp makes the file 0600; a record is meant to be read: the usual mode
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        # checked before the work that made the record; again here, it may have changed
        with contextlib.suppress(FileNotFoundError):
            if not stat.S_ISREG(os.lstat(path).st_mode):
                raise OSError(f"{path} is no longer a regular file: not replaced")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    try:  # the rename itself reaches the disk with the folder's entry
        dir_fd = os.open(path.parent, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(dir_fd)
    except OSError:
        pass
    finally:
        os.close(dir_fd)


def read_regular_bytes(path, *, limit: int = 1 << 28) -> bytes:
    """The bytes of ``path`` if it is a regular file (symlinks followed), at most ``limit``.

    A FIFO or device is refused before it is opened (reading one blocks or never
    ends); the file is opened without blocking and checked again through its
    descriptor, so a path swapped for a FIFO in between is refused too.

    Raises
    ------
    ValueError
        Not found, a folder, a FIFO, socket or device, unreadable, or larger than
        ``limit`` bytes.
    """
    path = Path(path)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise ValueError(f"{path}: no such file") from None
    except OSError as err:
        raise ValueError(f"cannot read {path}: {err.strerror or err}") from None
    if stat.S_ISDIR(st.st_mode):
        raise ValueError(f"{path} is a folder, not a file: name the record's file")
    if not stat.S_ISREG(st.st_mode):
        raise ValueError(f"{path} is {_kind(st.st_mode)}, not a regular file: only files are read")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as err:
        raise ValueError(f"cannot read {path}: {err.strerror or err}") from None
    with os.fdopen(fd, "rb") as f:
        mode = os.fstat(f.fileno()).st_mode
        if not stat.S_ISREG(mode):
            raise ValueError(f"{path} is {_kind(mode)}, not a regular file: only files are read")
        data = f.read(limit + 1)
    if len(data) > limit:
        raise ValueError(f"{path} is larger than {limit} bytes: not a release record")
    return data
