"""The privacy budget's ledger on disk: one JSON file per data set.

:func:`open_ledger` creates a ledger for a data set, or opens the existing one and
checks that it is that data set's; the :class:`~pymc_manidp.privacy.budget.PrivacyBudget`
it returns charges the file. The file is

- **written atomically**: a temporary file beside it is written, flushed to disk
  (``fsync``) and renamed over the ledger (``os.replace``), then the folder is flushed;
  a crash at any moment leaves the previous ledger or the new one, never a mixture;
- **locked** while it is read, checked, charged and written (``fcntl.flock`` on
  ``LEDGER.lock`` beside it: the ledger itself is replaced by each write, so the lock
  lives in a file that stays), so two processes charging at once never overspend;
- **checked** on every load (``privacy.ledger_state.check_state``): every field's type and
  range, its checksum, its entries and running totals, and the data set's fingerprint;
- **one file**: a symbolic link is followed to the ledger it names before anything is
  locked or written (so a link and its target share one lock and one file), and a
  ledger with several names (hard links) is refused: ``os.replace`` gives a new file
  to the name it writes, so the other names would keep the old ledger and a budget of
  their own. The ledger must be a regular file of at most ``MAX_LEDGER_BYTES``: a
  FIFO, a device or a folder is refused from ``os.stat`` before it is opened, and the
  file is opened without blocking and read up to the cap;
- **read without a lock**: every write replaces the file whole, so a reader sees one
  version or the next; reading (``read_ledger``, ``pymc-manidp budget``) creates no
  lock file, and neither does opening a ledger that does not exist;
- **left nowhere by a refusal**: a ledger that ``open_ledger`` created and that a
  release refused before its charge leaves nothing behind (the release removes it,
  with its lock, through :meth:`LedgerFile.discard_unused`), in Python as in the
  command line; the budget it returned keeps the ledger in memory and writes it again
  at its first charge.

The fingerprint (:func:`data_fingerprint`) identifies the records: a keyed BLAKE2b hash
of each record, summed over the records (so their order does not matter), with ``n``
and the record shape. The key is random per ledger and kept in the ledger: without it,
a hash of the data published anywhere would let whoever knows all records but one test
guesses of the last. The ledger file is therefore the curator's, like the data;
``PrivacyBudget.public()`` (what ``pymc-manidp budget`` prints) leaves out the key and the
fingerprint.
"""

from __future__ import annotations

import contextlib
import copy
import fcntl
import hashlib
import json
import os
import secrets
import stat
import tempfile
from pathlib import Path

import numpy as np

from pymc_manidp._validation import check_real_data
from pymc_manidp.privacy.budget import LedgerError, PrivacyBudget, check_state, new_state, seal
from pymc_manidp.stats import reductions

__all__ = [
    "MAX_LEDGER_BYTES",
    "LedgerFile",
    "check_ledger_path",
    "data_fingerprint",
    "open_ledger",
    "read_ledger",
]

#: the largest ledger read (a charge with its release record is about 1.5 kB: tens of
#: thousands of charges fit); a larger file, like /dev/zero, is refused unread
MAX_LEDGER_BYTES = 64 * 2**20

_MOD = 2**256


def _rows_digest(block: np.ndarray, key: bytes) -> int:
    total = 0
    for row in np.ascontiguousarray(block, dtype=np.float64).reshape(len(block), -1):
        h = hashlib.blake2b(row.tobytes(), key=key, digest_size=32).digest()
        total += int.from_bytes(h, "big")
    return total % _MOD


def data_fingerprint(data, key: bytes) -> str:
    """The keyed fingerprint of a data set.

    The same records (in any order) give the same string, another data set another one.

    Parameters
    ----------
    data : array_like or dask.array.Array, shape ``(n, *point_shape)``
        The records (read in passes when a Dask array).
    key : bytes
        The ledger's secret key (16 to 64 bytes).

    Returns
    -------
    str
        ``"blake2b-keyed:<hex>"``.

    Examples
    --------
    >>> import numpy as np
    >>> x = np.array([[0, 0, 1.0], [0, 1.0, 0]])
    >>> key = bytes(32)
    >>> data_fingerprint(x, key) == data_fingerprint(x[::-1], key)
    True
    >>> data_fingerprint(x, key) == data_fingerprint(x[:1], key)
    False
    """
    if not isinstance(key, bytes) or not 16 <= len(key) <= 64:
        raise ValueError("key must be 16 to 64 bytes")
    if reductions.is_dask(data):
        check_real_data(data, "data")  # a Dask masked array: its mask would be ignored
        reductions.n_rows(data)  # unknown chunk sizes: a message, not int(nan)
        shape = tuple(int(s) for s in data.shape)
        total = 0
        for i in range(data.numblocks[0]):
            total += _rows_digest(np.asarray(data.blocks[i].compute()), key)
        total %= _MOD
    else:
        data = np.asarray(data, dtype=np.float64)
        if data.ndim < 1:
            raise ValueError("data must have one record per row, got a scalar")
        shape = data.shape
        total = _rows_digest(data, key)
    header = f"n={shape[0]};point_shape={tuple(shape[1:])};".encode()
    digest = hashlib.blake2b(header + total.to_bytes(32, "big"), key=key, digest_size=32)
    return "blake2b-keyed:" + digest.hexdigest()


def _write_text(f, text: str) -> None:
    f.write(text)


def _write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` whole or not at all (temporary file, fsync, rename)."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            _write_text(f, text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    with contextlib.suppress(OSError):  # the rename reaches the disk with the folder
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


_KINDS = (
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def _refuse_odd(path, st) -> None:
    """Refuse a ledger that is not one regular file with one name, of bounded size."""
    if not stat.S_ISREG(st.st_mode):
        kind = next((k for test, k in _KINDS if test(st.st_mode)), "not a regular file")
        raise LedgerError(
            f"ledger {path} is {kind}: a ledger is a regular file (JSON) written by "
            "pymc-manidp; name a file"
        )
    if st.st_nlink > 1:
        raise LedgerError(
            f"ledger {path} has {st.st_nlink} names (hard links): each write replaces "
            "the file under one name, so the other names would keep an old copy with a "
            "budget of its own. Remove the other names (find them with "
            f"'find / -samefile {path}') or use a symbolic link"
        )
    if st.st_size > MAX_LEDGER_BYTES:
        raise LedgerError(
            f"ledger {path} is {st.st_size} bytes, more than a ledger's {MAX_LEDGER_BYTES}: "
            "not a ledger written by pymc-manidp"
        )


def _stat(real: Path, shown) -> os.stat_result | None:
    """``os.stat`` of the ledger (None when missing), odd files refused unopened."""
    try:
        st = os.stat(real)
    except FileNotFoundError:
        return None
    except OSError as err:
        raise LedgerError(f"ledger {shown}: {err.strerror or err}") from None
    _refuse_odd(shown, st)
    return st


def _ledger_path(path) -> Path:
    """``path`` as a ``Path``, refusing a name that cannot be a file.

    ``Path("x.json/")`` is ``x.json``: without this check a ledger named with a trailing
    separator (which the system reads as a folder) would be created as a file.
    """
    text = os.fspath(path)
    if isinstance(text, bytes):
        text = os.fsdecode(text)
    if not text or os.path.basename(text) in ("", ".", ".."):
        raise LedgerError(
            f"ledger {text!r} names a folder (it ends with {os.sep!r}, '.' or '..'), not a "
            "file: name the ledger's file, e.g. ledger.json"
        )
    return Path(text)


def check_ledger_path(path) -> bool:
    """Refuse a ledger path that cannot be a ledger, without opening or creating
    anything; True when the ledger exists.

    Parameters
    ----------
    path : str or Path

    Raises
    ------
    LedgerError
        A FIFO, device, folder or socket, a file with several names or above the size
        cap; a name that ends with a separator (``x.json/``).
    """
    path = _ledger_path(path)
    return _stat(Path(os.path.realpath(path)), path) is not None


def _no_duplicates(pairs):
    keys = [k for k, _ in pairs]
    if len(set(keys)) != len(keys):
        twice = next(k for k in keys if keys.count(k) > 1)
        raise ValueError(f"the field {twice!r} appears twice in one object")
    return dict(pairs)


def _no_constant(name):
    raise ValueError(f"{name} is not a number a ledger holds")


def _load(path, real: Path) -> dict:
    """Read and check the ledger at ``real`` (``path`` as the user named it)."""
    if _stat(real, path) is None:
        raise ValueError(f"ledger not found: {path}")
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(real, flags)
    except FileNotFoundError:
        raise ValueError(f"ledger not found: {path}") from None
    except OSError as err:
        raise LedgerError(f"ledger {path}: {err.strerror or err}") from None
    with os.fdopen(fd, "rb") as f:
        _refuse_odd(path, os.fstat(f.fileno()))  # what was opened, if it changed since
        raw = f.read(MAX_LEDGER_BYTES + 1)
    if len(raw) > MAX_LEDGER_BYTES:
        raise LedgerError(f"ledger {path} is larger than a ledger's {MAX_LEDGER_BYTES} bytes")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise LedgerError(
            f"{path} is not a ledger (not UTF-8 text: byte {err.start} is {raw[err.start]:#04x})"
        ) from None
    try:
        state = json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_no_constant)
    except RecursionError:
        raise LedgerError(f"{path} is not a ledger (JSON nested too deep)") from None
    except ValueError as err:  # JSONDecodeError, a duplicate field, NaN, a 5000-digit int
        raise LedgerError(f"{path} is not a ledger (not JSON: {err})") from None
    try:
        state = check_state(state)
    except LedgerError as err:
        raise LedgerError(f"{path}: {err}") from None
    if not isinstance(state["dataset"], dict):
        raise LedgerError(
            f"{path}: inconsistent ledger: dataset is null: a ledger file names its data set"
        )
    return state


class LedgerFile:
    """A ledger file as the store of a :class:`~pymc_manidp.privacy.budget.PrivacyBudget`.

    Parameters
    ----------
    path : str or Path
        The ledger (JSON).
    fingerprint : str or None
        The data set's fingerprint the ledger must name (checked on every load);
        None: opened to read, and charging it is refused.
    """

    def __init__(self, path, fingerprint=None):
        self.path = _ledger_path(path)
        # one ledger, one file: a link is followed once, here, and the ledger it names
        # is the one locked, read and replaced (replacing the link would fork it)
        self.real = Path(os.path.realpath(self.path))
        self.fingerprint = fingerprint
        self.created = False  # written by this open_ledger: discard_unused may remove it
        # the state discard_unused removed from disk: read here, written at the first charge
        self._pending = None

    @property
    def lock_path(self) -> Path:
        """The lock file beside the ledger (kept: removing it would race)."""
        return self.real.with_name(self.real.name + ".lock")

    @contextlib.contextmanager
    def _locked(self, how):
        flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
        try:
            fd = os.open(self.lock_path, flags, 0o600)
        except OSError as err:
            raise LedgerError(
                f"the ledger's lock {self.lock_path} cannot be opened ({err.strerror or err}): "
                "it must be a regular file (not a link) in a writable folder"
            ) from None
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise LedgerError(
                    f"the ledger's lock {self.lock_path} is not a regular file: remove it"
                )
            fcntl.flock(fd, how)
            try:
                held = os.stat(self.lock_path, follow_symlinks=False).st_ino
            except FileNotFoundError:
                held = None
            if held != os.fstat(fd).st_ino:
                # removed (discard_unused) while this process waited: a lock on the old
                # inode excludes no one who opens the name now; take the lock again
                os.close(fd)
                fd = None
                with self._locked(how):
                    yield
                return
            yield
        finally:
            if fd is not None:
                os.close(fd)  # closing the file releases the lock

    def _check(self, state) -> dict:
        if self.fingerprint is not None and state["dataset"]["fingerprint"] != self.fingerprint:
            raise LedgerError(
                f"{self.path} is the ledger of another data set "
                f"({state['dataset']['name']!r}): its fingerprint differs from these records'. "
                "A ledger covers one data set; if records were added or corrected, the records "
                "the data sets share have spent this ledger's budget too"
            )
        return state

    def read(self) -> dict:
        """The ledger's state, checked. No lock: every write replaces the file whole,
        so this reads one version or the next, and creates nothing."""
        if self._pending is not None:
            if _stat(self.real, self.path) is None:
                return copy.deepcopy(self._pending)
            self._refuse_replaced()
        return self._check(_load(self.path, self.real))

    def _refuse_replaced(self):
        raise LedgerError(
            f"ledger {self.path} was created by another process after this budget's "
            "ledger, created here, was removed by a refused release: nothing was charged; "
            "open it again with open_ledger"
        )

    def discard_unused(self) -> bool:
        """Remove the ledger, and its lock, if this store created it and nothing was
        charged to it (a release refused before its charge); True if removed. The
        state stays in memory: a later charge writes the ledger again."""
        if not self.created:
            return False
        with self._locked(fcntl.LOCK_EX):
            if _stat(self.real, self.path) is None:
                return False
            state = _load(self.path, self.real)
            if state["entries"]:
                return False
            os.unlink(self.real)
            os.unlink(self.lock_path)
        self.created = False
        self._pending = self._check(state)
        return True

    @contextlib.contextmanager
    def transaction(self):
        """Lock, load and check the ledger; yield its state; write it back atomically."""
        if self.fingerprint is None:
            raise LedgerError(
                f"{self.path} was opened to read: open it with "
                "pymc_manidp.io.ledger.open_ledger(path, data=...) to charge it"
            )
        with self._locked(fcntl.LOCK_EX):
            missing = _stat(self.real, self.path) is None
            if missing and self._pending is not None:
                # removed by a refused release: written again if this charge is made
                state = copy.deepcopy(self._pending)
                try:
                    yield state
                except BaseException:  # refused (an overspend): still nothing on disk
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(self.lock_path)
                    raise
                _write_atomic(self.real, _dumps(seal(state)))
                self._pending, self.created = None, True
                return
            if self._pending is not None:
                self._refuse_replaced()
            if missing:
                # the lock this made is removed too (held: a waiter takes it again)
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(self.lock_path)
                raise LedgerError(
                    f"ledger {self.path} was removed after it was opened (a release that "
                    "created it was refused before its charge, or someone removed it): "
                    "nothing was charged; run again"
                )
            state = self._check(_load(self.path, self.real))
            yield state
            _write_atomic(self.real, _dumps(seal(state)))


def _dumps(state: dict) -> str:
    return json.dumps(state, indent=1, allow_nan=False) + "\n"


def open_ledger(
    path, *, data, epsilon=None, delta=0.0, composition="basic", plan=None, name=None
) -> PrivacyBudget:
    """The privacy budget of ``data`` kept in the ledger file ``path``.

    Creates the ledger with a budget of ``(epsilon, delta)`` when ``path`` does not
    exist; otherwise opens it, refusing a ledger that is inconsistent or names another
    data set (and an ``epsilon``/``delta`` other than the ledger's: a budget is fixed
    when its ledger is created).

    Parameters
    ----------
    path : str or Path
        The ledger file (JSON); a lock file ``path.lock`` is kept beside it.
    data : array_like or dask.array.Array
        The records the budget protects (hashed for the fingerprint, nothing else).
    epsilon, delta : float
        The budget, for a new ledger (``epsilon`` None: the ledger must exist).
    composition : {"basic", "optimal"}
    plan : sequence of (float, float), optional
        ``composition="optimal"``: the charges declared before the first release
        (``PrivacyBudget``'s ``plan``), kept in the ledger; checked against an existing
        ledger's like the budget.
    name : str or None
        A name for the data set (default: the ledger's file name), printed with it.

    Returns
    -------
    PrivacyBudget
        The budget, kept in the file: every charge locks, checks and rewrites it.

    Raises
    ------
    LedgerError
        An inconsistent or tampered ledger, another data set's, or another budget.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> import numpy as np
    >>> x = np.array([[0, 0, 1.0], [0, 0.6, 0.8]])
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "ledger.json"
    >>> b = open_ledger(path, data=x, epsilon=1.0)
    >>> b.charge(0.25, mechanism="elsewhere")
    0
    >>> open_ledger(path, data=x).spent.epsilon
    0.25
    """
    path = _ledger_path(path)
    if epsilon is not None:
        # a bad budget, composition or plan is refused before a lock file is made and the
        # data are hashed; ``asked`` holds them as a ledger stores them (a budget rounded
        # down, a plan's charges up), to compare with an existing ledger's
        asked = {"epsilon": epsilon, "delta": delta, "composition": composition}
        asked.update(new_state(**asked, plan=plan)["budget"])
    elif plan is not None:
        raise ValueError("a plan is declared with the budget (epsilon) of a new ledger")
    store = LedgerFile(path)
    real = store.real
    if not real.parent.is_dir():
        raise ValueError(f"ledger {path}: folder {real.parent} does not exist")
    # refused before a lock file is made beside it: a missing ledger without a budget
    # (a read), a FIFO, a device, a file with several names
    exists = check_ledger_path(path)
    if not exists and epsilon is None:
        raise ValueError(f"ledger not found: {path}; to create it, give the budget (epsilon=)")
    if exists:  # a file that is not a ledger (the data, a CSV) is refused before its lock
        _load(path, real)
    with store._locked(fcntl.LOCK_EX):
        if _stat(real, path) is None:
            if epsilon is None:
                raise ValueError(
                    f"ledger not found: {path}; to create it, give the budget (epsilon=)"
                )
            key = secrets.token_bytes(32)
            dataset = {
                "name": str(name) if name is not None else path.stem,
                "key": key.hex(),
                "fingerprint": data_fingerprint(data, key),
            }
            state = new_state(epsilon, delta, composition=composition, dataset=dataset, plan=plan)
            _write_atomic(real, _dumps(state))
            store.created = True
        else:
            state = _load(path, real)
        dataset = state["dataset"]
        if not isinstance(dataset, dict) or "key" not in dataset:
            raise LedgerError(f"{path} names no data set: it is not a ledger file")
        store.fingerprint = data_fingerprint(data, bytes.fromhex(dataset["key"]))
        store._check(state)
        budget = state["budget"]
        if epsilon is not None:
            for k, v in asked.items():
                if v != budget.get(k):
                    raise LedgerError(
                        f"{path} has a budget of epsilon = {budget['epsilon']:g}, "
                        f"delta = {budget['delta']:g} ({budget['composition']} composition), "
                        f"not {k} = {v!r}: a budget is fixed when its ledger is created "
                        "(to charge the existing ledger, omit epsilon=, delta=, "
                        "composition= and plan=)"
                    )
    return PrivacyBudget.from_store(store)


def discard_unused(budget) -> bool:
    """Remove a ledger, and its lock file, that ``open_ledger`` created for ``budget``
    if nothing was ever charged to it; True if removed.

    For a release refused before its charge (a public check, an overspend): it spent
    nothing, so it leaves no ledger behind (issue 38 item 9; ``Mechanism.release`` does
    it through ``PrivacyBudget.refused``). ``budget`` still works: its first
    charge writes the ledger again (issue 43's leftovers, item 1). A ledger that existed
    before, or that holds a charge (by this process or another), is kept. The lock file
    is removed while held: a process waiting on it takes the lock again on the new
    file (``LedgerFile._locked``), and finds no ledger, so charges nothing.

    Parameters
    ----------
    budget : PrivacyBudget
        As returned by :func:`open_ledger`.
    """
    store = getattr(budget, "_store", None)
    return isinstance(store, LedgerFile) and store.discard_unused()


def read_ledger(path) -> PrivacyBudget:
    """The ledger at ``path``, checked, opened to read (charging it is refused).

    Parameters
    ----------
    path : str or Path
        The ledger file (JSON).

    Returns
    -------
    PrivacyBudget
        Its totals, entries and public view; ``charge`` raises ``LedgerError``.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> import numpy as np
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "ledger.json"
    >>> _ = open_ledger(path, data=np.ones((3, 2)), epsilon=2.0)
    >>> read_ledger(path).public()["remaining"]
    {'epsilon': 2.0, 'delta': 0.0}
    """
    store = LedgerFile(path)
    store.read()  # refuse a damaged ledger now
    return PrivacyBudget.from_store(store)
