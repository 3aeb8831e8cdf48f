"""The environment variables the dependencies read when they are imported, checked
with the standard library only (issue 43 item 11 and its leftovers, item 5).

PyTensor, numba and matplotlib read variables at import and fail with a traceback
(``OMP_NUM_THREADS=nan``, ``NUMBA_NUM_THREADS=0``, a ``PYTENSORRC`` that is not a
configuration file) or write where they should not (``HOME=''`` made ``./.pytensor``,
a relative compile folder in ``PYTENSOR_FLAGS`` or in a ``PYTENSORRC`` file compiles,
and loads compiled code, in the working folder). One check,
:func:`environment_problem`, serves both ways in: the command line runs it before any
dependency is imported (one line, exit 2), and the first release or sample from Python
runs it with the check of PyTensor's compile folder
(``geometry._numba.cache.check_environment_once``), raising
:class:`BrokenEnvironmentError`. This module imports nothing but the standard library,
so that the command line can run it before anything reads the variables.
"""

from __future__ import annotations

import os

__all__ = ["BrokenEnvironmentError", "check_environment", "environment_problem"]


class BrokenEnvironmentError(EnvironmentError):
    """An environment that would break a dependency or misplace its compiled code.

    The environment would break a dependency, or make one write or load compiled code
    where it should not; the message names the variable (or file), its value and the
    fix. Raised before any privacy budget is charged or any data are read.
    """


#: folders the dependencies (and the package) make or read below: a relative one would
#: write into the working folder (``HOME=''`` made ``./.pytensor``), a file breaks them
_PATH_VARIABLES = {
    "HOME": "PyTensor's, numba's and matplotlib's caches live under it",
    "XDG_CACHE_HOME": "matplotlib's and pymc-manidp's caches",
    "XDG_CONFIG_HOME": "matplotlib's configuration",
    "MPLCONFIGDIR": "matplotlib's configuration and cache",
    "NUMBA_CACHE_DIR": "numba's cache",
    "PYMC_MANIDP_CACHE_DIR": "pymc-manidp's compile cache",
}
#: thread counts read when PyTensor and numba are imported (numba refuses 0 there,
#: PyTensor refuses anything ``int()`` does not parse)
_THREAD_VARIABLES = {
    "OMP_NUM_THREADS": "OpenMP threads, read by PyTensor",
    "NUMBA_NUM_THREADS": "numba's threads",
}


def environment_problem(environ=None) -> str | None:
    """Why the environment would break a dependency at import, or None.

    The dependencies read these variables when they are imported and fail with a
    traceback (``OMP_NUM_THREADS=nan``, ``NUMBA_NUM_THREADS=0``, ``PYTENSORRC`` naming
    a file that is not a configuration), or write where they should not (``HOME=''``
    made ``./.pytensor``, ``XDG_CACHE_HOME=garbage`` made ``./garbage/matplotlib``). So
    they are checked here, with the standard library only, before anything reads them;
    the CLI refuses a broken one with one line and code 2 (docs/cli.md), a release or a
    sample from Python with :class:`BrokenEnvironmentError`. An empty
    variable counts as unset, as the dependencies read it, except where one does not
    (``HOME=''`` and ``NUMBA_NUM_THREADS=''``, which numba tries to parse).

    Parameters
    ----------
    environ : mapping, optional
        The variables (default ``os.environ``).

    Returns
    -------
    str or None
        One line naming the variable, its value and what is accepted.
    """
    import configparser
    import shlex

    env = os.environ if environ is None else environ

    def var(name, what):
        return f"environment variable {name}={env[name]!r} ({what})"

    for name, what in _THREAD_VARIABLES.items():
        raw = env.get(name)
        if raw is None or (raw == "" and name == "OMP_NUM_THREADS"):
            continue
        text = raw.strip()
        if not (text.isascii() and text.isdigit() and int(text) >= 1):
            return f"{var(name, what)} must be a whole number >= 1; unset it for the default"

    def bad_folder(path, name, what):
        if not os.path.isabs(path):  # a relative one would write into the working folder
            return (
                f"{var(name, what)} must be an absolute path (a relative one would write "
                "into the working folder); unset it for the default"
            )
        if os.path.exists(path) and not os.path.isdir(path):
            return f"{var(name, what)} is a file, not a folder; unset it or name a folder"
        return None

    for name, what in _PATH_VARIABLES.items():
        raw = env.get(name)
        if name == "PYMC_MANIDP_CACHE_DIR" and raw is not None:
            raw = os.path.expanduser(raw.strip())  # as read_env reads our own variables
        if raw is None or (raw == "" and name != "HOME"):
            continue
        problem = bad_folder(raw, name, what)
        if problem:
            return problem

    flags = env.get("PYTENSOR_FLAGS", "")
    try:  # as PyTensor splits them (pytensor.configparser.parse_config_string)
        splitter = shlex.shlex(flags, posix=True)
        splitter.whitespace, splitter.whitespace_split = ",", True
        pairs = [kv.strip().split("=", 1) for kv in splitter if kv.strip()]
    except ValueError as err:
        return f"{var('PYTENSOR_FLAGS', 'PyTensor settings')} cannot be parsed: {err}"
    for pair in pairs:
        if len(pair) == 2 and pair[0].strip().endswith("compiledir"):
            what = f"PyTensor's {pair[0].strip()}"
            problem = bad_folder(os.path.expanduser(pair[1]), "PYTENSOR_FLAGS", what)
            if problem:
                return problem

    rc = env.get("PYTENSORRC")
    # unset, PyTensor reads ~/.pytensorrc (pytensor.configparser.config_files_from_pytensorrc)
    given = rc is not None
    what = "PyTensor's configuration files"
    for entry in (rc if given else "~/.pytensorrc").split(os.pathsep):
        if not entry:
            continue
        path = _expanduser(entry, env)
        where = var("PYTENSORRC", what) if given else f"PyTensor's configuration file {path}"
        if not os.path.isabs(path):
            return f"{where}: {entry!r} must be an absolute path; unset it for the default"
        if not os.path.isfile(path):
            continue  # PyTensor skips files it cannot open, as configparser does
        # PyTensor's own defaults, which its files may interpolate (%(USER)s)
        keys = ("USER", "LSCRATCH", "TMPDIR", "TEMP", "TMP", "PID")
        parser = configparser.ConfigParser(dict.fromkeys(keys, "x"))
        values = []
        try:  # as PyTensor reads it: interpolation errors show when values are read
            parser.read(path)
            for section in parser.sections():
                for option in parser.options(section):
                    values.append((section, option, parser.get(section, option)))
        except (configparser.Error, UnicodeDecodeError, OSError) as err:
            first = str(err).splitlines()[0] if str(err) else type(err).__name__
            return f"{where}: {path} is not a configuration file ({first})"
        for section, option, value in values:
            # a compile folder set in the file, as PYTENSOR_FLAGS would set it: a
            # relative one would write (and load compiled code) in the working folder
            if option.endswith("compiledir") and value.strip():
                folder = os.path.expanduser(value.strip())
                if not os.path.isabs(folder):
                    return (
                        f"{where}: {path} sets [{section}] {option} = {value.strip()!r}, a "
                        "relative path (PyTensor would compile into the working folder): "
                        "make it absolute, or remove it for the default"
                    )
                if os.path.exists(folder) and not os.path.isdir(folder):
                    return (
                        f"{where}: {path} sets [{section}] {option} = {value.strip()!r}, a "
                        "file, not a folder: name a folder, or remove it for the default"
                    )
    return None


def _expanduser(path: str, env) -> str:
    """``os.path.expanduser`` with ``HOME`` read from ``env`` (the mapping checked)."""
    if path.startswith("~") and "HOME" in env and (path == "~" or path[1] == os.sep):
        return env["HOME"] + path[1:]
    return os.path.expanduser(path)


def check_environment(environ=None) -> None:
    """Raise :class:`BrokenEnvironmentError` if :func:`environment_problem` finds one.

    Parameters
    ----------
    environ : mapping, optional
        The variables (default ``os.environ``).

    Raises
    ------
    BrokenEnvironmentError
        Naming the variable, its value and the fix.

    Examples
    --------
    >>> check_environment({"OMP_NUM_THREADS": "nan"})
    Traceback (most recent call last):
    ...
    pymc_manidp.environment.BrokenEnvironmentError: environment variable OMP_NUM_THREADS='nan' ...
    """
    problem = environment_problem(environ)
    if problem is not None:
        raise BrokenEnvironmentError(problem)
