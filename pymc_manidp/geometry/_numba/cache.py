"""The package's cache folder, the check that it is ours alone, and numba's cache of our kernels.

Everything the package caches on disk holds code that runs in the curator's process
beside the private data: numba's index (``.nbi``) and object code (``.nbc``) are
pickles, and loading one runs whatever it was made to run. So every cache the package
loads lives under one folder, :func:`cache_dir`, and nothing is read from it unless the
folder and every file the loaders read below it are the user's own, writable by the
user only, with no link (:func:`private_cache`):

- ``numba/``: numba's cache of the compiled NUTS entry points
  (:mod:`pymc_manidp.mcmc.nutpie_cache`) and, in ``numba/kernels/``, of the kernels of
  this folder (:func:`njit`);
- ``models/``: the manifests of the compiled models (:mod:`pymc_manidp.mcmc.nutpie_cache`).

The kernels of this folder are decorated with this module's :func:`njit` instead of
numba's: ``cache=True`` then caches them in ``numba/kernels/``, checked as above, and
never where numba would put them by default (``__pycache__`` beside the sources, or
``$NUMBA_CACHE_DIR``, which nobody checks). Keyed on a hash of each source file's
contents and of every kernel file it may call (:func:`_source_hash`), not their paths,
so a second clone of the same code on the same machine compiles nothing, and a changed
callee is never run from an old cache. When the folder is not private the kernels are
compiled in the process (a warning says why) and nothing is read from or written to disk.
"""

from __future__ import annotations

import atexit
import functools
import hashlib
import os
import stat
import warnings
from pathlib import Path

from pymc_manidp._options import options
from pymc_manidp._validation import read_env
from pymc_manidp.environment import BrokenEnvironmentError, environment_problem

__all__ = [
    "CACHE_ENV",
    "cache_dir",
    "check_environment_once",
    "njit",
    "not_ours_alone",
    "private_cache",
    "pytensor_compiledir_problem",
]

CACHE_ENV = options.env("cache_dir")
#: the folders under :func:`cache_dir` that hold what the loaders read
CACHE_SUBDIRS = ("numba", "models")
#: where numba caches the kernels of this folder, under :func:`cache_dir`
KERNEL_SUBDIR = ("numba", "kernels")
_KERNEL_DIR = Path(__file__).resolve().parent


def cache_dir() -> Path:
    """Directory of everything the package caches across processes.

    Deleting it (``pymc_manidp.mcmc.clear_cache()``) is always safe: the next run
    compiles again. PyTensor keeps its own compiled functions under
    ``pytensor.config.base_compiledir`` (``PYTENSOR_FLAGS=base_compiledir=...``).

    Returns
    -------
    pathlib.Path
        ``pymc_manidp.options["cache_dir"]`` (set in Python, else
        ``$PYMC_MANIDP_CACHE_DIR``) if set, else ``$XDG_CACHE_HOME/pymc-manidp`` (by
        default ``~/.cache/pymc-manidp``). It may not exist yet.

    Raises
    ------
    ValueError
        Either variable, or ``HOME`` when it is used, set to something other than an
        absolute path (named): a relative folder would move with the working folder.
    """
    env = options["cache_dir"]
    if env:
        return Path(env)
    base = read_env("XDG_CACHE_HOME", "path")
    if base is None:
        home = os.environ.get("HOME")  # '' or relative: a cache that moves with the folder
        if home is not None and not os.path.isabs(home):
            raise ValueError(
                f"environment variable HOME={os.environ.get('HOME')!r} must be an absolute "
                f"path (the default cache folder is ~/.cache/pymc-manidp); set HOME, or "
                f"set {CACHE_ENV} to an absolute path"
            )
        base = os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "pymc-manidp"


def not_ours_alone(root, subdirs=CACHE_SUBDIRS, *, own_group_may_write=False) -> str | None:
    """Why the tree under ``root`` that the cache loaders read is not ours alone, or None.

    ``root`` itself may be a link the user chose (its target is checked); below it,
    in ``subdirs`` (all of it when None), every folder and file must be a plain folder
    or file (no symbolic link: it could point out of the tree; no FIFO), belong to the
    current user and be writable by nobody else. Files beside those folders are not
    read and not checked. ``own_group_may_write`` accepts group-writable entries whose
    group is the user's own primary group, for a folder another program writes under
    the user's umask (002 with a group per user is a common default): PyTensor's.
    """
    # plain strings and os.lstat, no Path per entry: a fresh process walks PyTensor's
    # whole folder (0.10 -> 0.04 CPU s on 7,482 entries; issue 38 item 6)
    root = str(Path(root))
    subdirs = [""] if subdirs is None else subdirs

    def fail(err):
        if not isinstance(err, FileNotFoundError):  # gone: another process replaced it
            raise err

    paths = [root]
    for sub in subdirs:
        top = os.path.join(root, sub) if sub else root
        if sub and not os.path.lexists(top):
            continue
        if sub:
            paths.append(top)
        for folder, dirs, files in os.walk(top, onerror=fail):  # links not followed
            paths += [os.path.join(folder, name) for name in dirs + files]
    uid = os.getuid()
    for i, path in enumerate(paths):
        try:
            st = os.stat(path) if i == 0 else os.lstat(path)
        except FileNotFoundError:  # a temporary file another process has just renamed
            continue
        if stat.S_ISLNK(st.st_mode):
            return f"{path} is a symbolic link"
        if not (stat.S_ISDIR(st.st_mode) or stat.S_ISREG(st.st_mode)):
            return f"{path} is not a regular file or folder"
        if st.st_uid != uid:
            return f"{path} belongs to uid {st.st_uid}, not to you (uid {uid})"
        others = 0o002 if own_group_may_write and st.st_gid == os.getgid() else 0o022
        if st.st_mode & others:
            return f"{path} can be written by others (mode {stat.S_IMODE(st.st_mode):o})"
    return None


def pytensor_compiledir_problem() -> str | None:
    """Why PyTensor's compile folder may not be used, or None (issue 43 item 7).

    PyTensor loads compiled modules and pickles (its numba cache, each module's key)
    from ``base_compiledir``; it creates the folder on import but reads nothing there
    before its first compilation, so checking right after the import is in time. The
    same rule as the package's own cache (:func:`not_ours_alone`), except that entries
    writable by the user's own primary group are accepted: PyTensor writes them with
    the user's umask, which is 002 on many systems.

    Returns
    -------
    str or None
        One line naming the folder, what is wrong and the fix.
    """
    import pytensor

    # compiledir (where the modules are loaded from) may be set apart from its base;
    # inside it (the default), the walk of the base covers it
    folders = [pytensor.config.base_compiledir]
    if not Path(pytensor.config.compiledir).is_relative_to(folders[0]):
        folders.append(pytensor.config.compiledir)
    for base in folders:
        try:
            problem = not_ours_alone(base, None, own_group_may_write=True)
        except OSError as err:
            problem = f"it cannot be inspected ({err})"
        if problem is not None:
            return (
                f"PyTensor's compile folder {base} is not yours alone: {problem}. It holds "
                "compiled code that runs in this process; remove it, or make it yours and "
                "writable by you only (chmod -R go-w), or set "
                "PYTENSOR_FLAGS=base_compiledir=DIR to a folder of your own"
            )
    return None


_ENVIRONMENT_CHECKED = False


def check_environment_once() -> None:
    """The command line's checks, for Python: the environment variables the
    dependencies read (:func:`pymc_manidp.environment.environment_problem`) and
    PyTensor's compile folder (:func:`pytensor_compiledir_problem`), run by the first
    release or MCMC sample of the process, and again after a refusal.

    Raises
    ------
    pymc_manidp.environment.BrokenEnvironmentError
        Naming the variable or folder and the fix; before any budget is charged or any
        data are read.
    """
    global _ENVIRONMENT_CHECKED
    if _ENVIRONMENT_CHECKED:
        return
    problem = environment_problem() or pytensor_compiledir_problem()
    if problem is not None:
        raise BrokenEnvironmentError(problem)
    _ENVIRONMENT_CHECKED = True


def private_cache(*, stacklevel: int = 2) -> Path | None:
    """:func:`cache_dir`, created with mode 0700, if it may be read and written; else None.

    None, with a warning naming the first offending path (or the variable that names
    no absolute folder), unless every folder and file the loaders read is ours alone
    (:func:`not_ours_alone`). The caller then compiles in the process and reads and
    writes nothing on disk.
    """
    try:
        root = cache_dir()
    except ValueError as err:  # a bad variable: a computation still needs no cache
        warnings.warn(
            f"not using the compile cache: {err}; compiling in this process instead",
            stacklevel=stacklevel + 1,
        )
        return None
    try:
        root.mkdir(mode=0o700, parents=True, exist_ok=True)
        problem = not_ours_alone(root)
    except OSError as err:
        problem = f"it cannot be inspected ({err})"
    if problem is None:
        return root
    warnings.warn(
        f"not using the compile cache {root}: {problem}. It holds code that runs in this "
        "process, so it is read only if every file in it is yours and writable by you only; "
        f"compiling in this process instead. Remove {root / 'numba'} and {root / 'models'} "
        f"(pymc_manidp.mcmc.clear_cache()) or set {CACHE_ENV} to a folder of your own.",
        stacklevel=stacklevel + 1,
    )
    return None


# --- numba's cache of the kernels of this folder -----------------------------------

#: the kernels decorated with :func:`njit` (their Python functions) -> their cache folder
_KERNEL_FOLDERS: dict = {}


#: the folders (below the package) whose kernels call one another: a kernel's cache is
#: valid only for the sources of all of them
_KERNEL_TREES = ("geometry/_numba", "laws/fused")


@functools.cache
def _kernel_tree_hash() -> str:
    """sha256 of every ``*.py`` under :data:`_KERNEL_TREES`, names and bytes, in order."""
    package = Path(__file__).resolve().parents[2]
    h = hashlib.sha256()
    for tree in _KERNEL_TREES:
        for path in sorted((package / tree).rglob("*.py")):
            h.update(path.relative_to(package).as_posix().encode())
            h.update(path.read_bytes())
    return h.hexdigest()


@functools.cache
def _source_hash(path: str) -> str:
    """sha256 of a kernel file's bytes and of the kernel trees' sources.

    numba's cache of a kernel holds the object code of every jitted function it calls,
    compiled in, but checks only its own file: a kernel calling one of another file
    (``fused/spd.py`` calls ``sym_sums``'s) kept running the old callee after that file
    changed. So a kernel's cache is valid for its own source and the sources of every
    kernel it may call (the kernel trees of this package): an edit or an upgrade of any
    kernel compiles them all again, once.
    """
    h = hashlib.sha256(Path(path).read_bytes())
    h.update(_kernel_tree_hash().encode())
    return h.hexdigest()


@functools.cache
def _kernel_cache_folder() -> Path | None:
    """Where the kernels are cached in this process, or None to compile them uncached.

    Decided once per process, when the first kernel module is imported (the kernels'
    caches are loaded at their first call, after the check). None when numba's cache
    cannot be pointed here (its locator list is private API: if it changed, or if
    ``NUMBA_CACHE_LOCATOR_CLASSES`` replaces it, the kernels are not cached at all
    rather than cached where nobody checks) or when the folder is not private.
    """
    try:
        from numba.core import config
        from numba.core.caching import CacheImpl, _CacheLocator
    except ImportError:  # pragma: no cover - a numba without them
        return _uncached("numba.core.caching has no _CacheLocator")
    if getattr(config, "CACHE_LOCATOR_CLASSES", None):
        return _uncached(f"NUMBA_CACHE_LOCATOR_CLASSES={config.CACHE_LOCATOR_CLASSES!r} is set")
    classes = getattr(CacheImpl, "_locator_classes", None)
    if not isinstance(classes, list):  # pragma: no cover - a numba without it
        return _uncached("numba's CacheImpl._locator_classes is gone")
    root = private_cache(stacklevel=5)
    if root is None:
        return None
    if not any(getattr(c, "_pymc_manidp_kernels", False) for c in classes):
        classes.insert(0, _kernel_locator_class(_CacheLocator))
    folder = root.joinpath(*KERNEL_SUBDIR)
    atexit.register(_private_files, folder)
    return folder


def _private_files(folder) -> None:
    """Make the kernels' cache files writable by us only (at exit, after numba wrote them).

    numba writes them with the process's umask: under 002 they would be group-writable
    and the next process would refuse the whole cache (:func:`not_ours_alone`). Files
    written since the check sit in folders only we can write (0700), so no one else
    can have changed them.
    """
    uid = os.getuid()
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return
    for entry in entries:
        try:
            st = entry.stat(follow_symlinks=False)
            if stat.S_ISREG(st.st_mode) and st.st_uid == uid and st.st_mode & 0o022:
                os.chmod(entry.path, stat.S_IMODE(st.st_mode) & ~0o022)
        except OSError:  # gone meanwhile
            pass


def _uncached(why: str) -> None:
    import numba

    warnings.warn(
        f"numba {numba.__version__}: pymc-manidp's kernels are compiled in every process "
        f"and not cached ({why}); unset it or install a numba this version was tested "
        "with (numba 0.68) to cache them",
        RuntimeWarning,
        stacklevel=6,
    )
    return None


def _kernel_locator_class(base):
    """A numba cache locator for the kernels decorated with :func:`njit`, and no others."""

    class KernelCacheLocator(base):
        """Numba's cache of a kernel of ``geometry/_numba``: the checked cache folder."""

        _pymc_manidp_kernels = True

        def __init__(self, folder, py_file, lineno, module=""):
            self._folder = folder
            self._py_file = py_file
            self._lineno = lineno
            self._module = module

        def ensure_cache_path(self):
            # level by level: parents=True would make ``numba/`` with the umask's mode
            for folder in (self._folder.parent, self._folder):
                folder.mkdir(mode=0o700, exist_ok=True)

        def get_cache_path(self):
            return str(self._folder)

        def get_source_stamp(self):
            return _source_hash(self._py_file)

        def get_disambiguator(self):
            # the module too: the key is the source's contents, not its path, so the
            # same file under two module names (a file moved, a copy in another
            # package) would load an index whose functions live in the other module
            # (ModuleNotFoundError on load, seen when kernels moved between folders)
            return f"{self._module}-{self._lineno}"

        @classmethod
        def from_function(cls, py_func, py_file):
            folder = _KERNEL_FOLDERS.get(py_func)
            if folder is None:
                return None  # not ours: numba's own locators decide
            return cls(folder, py_file, py_func.__code__.co_firstlineno, py_func.__module__)

    return KernelCacheLocator


def njit(*args, cache: bool = False, **options):
    """``numba.njit`` for the kernels of this folder, whose ``cache=True`` is checked.

    With ``cache=True`` the kernel is cached under :func:`cache_dir` (``numba/kernels``)
    when that folder is ours alone, and compiled uncached in the process otherwise: it
    is never cached in ``__pycache__`` or ``$NUMBA_CACHE_DIR``. Other options are
    numba's. Use it as numba's: ``@njit(cache=True, error_model="numpy")`` or ``@njit``.
    """
    import numba

    def decorate(py_func):
        folder = _kernel_cache_folder() if cache else None
        if folder is None:
            return numba.njit(**options)(py_func)
        _KERNEL_FOLDERS[py_func] = folder
        return numba.njit(cache=True, **options)(py_func)

    if args:
        if len(args) != 1 or not callable(args[0]):
            raise TypeError("njit takes the function alone (no signatures): numba infers them")
        return decorate(args[0])
    return decorate
