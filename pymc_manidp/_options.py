"""The package's options: one validated object, ``pymc_manidp.options``.

Modelled on arviz-base's ``rcParams``: one mapping of a fixed set of keys, each value
validated when it is set (a bad value is an error naming the key and what it accepts,
never a setting taken silently), and a context manager that sets some and restores
them on exit. An option not set in Python falls back to its environment variable, read
(and validated, naming the variable) each time the option is read, so a variable set
after the import still counts; then to its default.

Layer 0: the geometry layer's cache folder reads ``cache_dir``, the MCMC layer the
other two, so the options sit below both.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass

from pymc_manidp._validation import check_positive_real, read_env

__all__ = ["Options", "options"]


@dataclass(frozen=True)
class _Option:
    env: str
    kind: str  # a kind of read_env: "positive real", "choice" or "path"
    default: object
    what: str  # for read_env's message ("" for the variables whose message had none)
    choices: tuple = ()


_OPTIONS = {
    "mcmc_max_seconds": _Option("PYMC_MANIDP_MCMC_MAX_SECONDS", "positive real", 600.0, ""),
    "nuts_backend": _Option(
        "PYMC_MANIDP_NUTS_BACKEND",
        "choice",
        "auto",
        "the NUTS backend",
        choices=("nutpie", "pymc", "auto"),
    ),
    "cache_dir": _Option("PYMC_MANIDP_CACHE_DIR", "path", None, ""),
    "mcmc_max_trace_bytes": _Option("PYMC_MANIDP_MCMC_MAX_TRACE_BYTES", "positive real", 2e9, ""),
    # read when a mechanism compiles its NUTS model for a new n: "auto" fuses the
    # law's log-density into one numba kernel where the manifold has kernels for it
    # (pymc_manidp.laws.fused), "graph" keeps PyTensor's autodiff graph of the chart
    "nuts_density": _Option(
        "PYMC_MANIDP_NUTS_DENSITY",
        "choice",
        "auto",
        "the NUTS log-density",
        choices=("auto", "graph"),
    ),
}


def _validated(key: str, opt: _Option, value):
    """``value`` as the option stores it, or the error naming the key and what it takes."""
    if opt.kind == "positive real":
        return check_positive_real(value, f"options[{key!r}]")
    if opt.kind == "choice":
        if not isinstance(value, str):
            raise TypeError(
                f"options[{key!r}] must be a str, one of {', '.join(opt.choices)}; got "
                f"{type(value).__name__}"
            )
        if value.strip().lower() not in opt.choices:
            raise ValueError(
                f"options[{key!r}] must be one of {', '.join(opt.choices)}, got {value!r}"
            )
        return value.strip().lower()
    if not isinstance(value, (str, os.PathLike)) or isinstance(value, bytes):
        raise TypeError(
            f"options[{key!r}] must be a path (str or os.PathLike), got {type(value).__name__}"
        )
    path = os.path.expanduser(os.fspath(value))
    if "\0" in path or not os.path.isabs(path):
        raise ValueError(
            f"options[{key!r}] must be an absolute path (a relative one would move with the "
            f"working folder), got {value!r}"
        )
    return path


class Options:
    """The package's options: a mapping of fixed keys, validated when set.

    ================== ================================ ============ ==============================
    key                environment variable             default      value
    ================== ================================ ============ ==============================
    mcmc_max_seconds   ``PYMC_MANIDP_MCMC_MAX_SECONDS`` ``600.0``    time limit of an MCMC run
                                                                     (seconds, a finite number > 0)
    nuts_backend       ``PYMC_MANIDP_NUTS_BACKEND``     ``"auto"``   ``"nutpie"``, ``"pymc"`` or
                                                                     ``"auto"`` (nutpie if
                                                                     installed)
    cache_dir          ``PYMC_MANIDP_CACHE_DIR``        ``None``     the cache folder, an absolute
                                                                     path (None:
                                                                     ``$XDG_CACHE_HOME`` or
                                                                     ``~/.cache``, then
                                                                     ``pymc-manidp``)
    ================== ================================ ============ ==============================

    ``mcmc_max_trace_bytes`` (``PYMC_MANIDP_MCMC_MAX_TRACE_BYTES``, default ``2e9``): the
    memory limit of an MCMC run's trace in bytes, a finite number > 0
    (:func:`~pymc_manidp.mcmc.memory_limit.check_mcmc_memory`).

    Reading a key gives the value set in Python, else its environment variable's
    (validated when read: a bad one is a ``ValueError`` naming the variable), else the
    default. Setting a key validates the value (``TypeError`` for a wrong type,
    ``ValueError`` naming the accepted range); setting it to None, or :meth:`reset`,
    returns it to the environment variable and the default. An unknown key is a
    ``KeyError`` naming the keys.

    Examples
    --------
    >>> import pymc_manidp as pmd
    >>> pmd.options["mcmc_max_seconds"]
    600.0
    >>> with pmd.options.context(mcmc_max_seconds=60, nuts_backend="pymc"):
    ...     pmd.options["mcmc_max_seconds"], pmd.options["nuts_backend"]
    (60.0, 'pymc')
    >>> pmd.options["mcmc_max_seconds"]
    600.0
    >>> pmd.options["mcmc_max_seconds"] = float("nan")
    Traceback (most recent call last):
    ...
    ValueError: options['mcmc_max_seconds'] must be a finite number > 0, got nan
    """

    def __init__(self):
        self._set: dict[str, object] = {}

    @staticmethod
    def _option(key) -> _Option:
        try:
            return _OPTIONS[key]
        except (KeyError, TypeError):
            raise KeyError(
                f"{key!r} is not an option of pymc_manidp; the options are {', '.join(_OPTIONS)}"
            ) from None

    def __getitem__(self, key):
        opt = self._option(key)
        if key in self._set:
            return self._set[key]
        return read_env(opt.env, opt.kind, opt.default, choices=opt.choices, what=opt.what)

    def __setitem__(self, key, value):
        opt = self._option(key)
        if value is None:
            self._set.pop(key, None)
        else:
            self._set[key] = _validated(key, opt, value)

    def __iter__(self):
        return iter(_OPTIONS)

    def __len__(self) -> int:
        return len(_OPTIONS)

    def __contains__(self, key) -> bool:
        return key in _OPTIONS

    def keys(self):
        """The option names."""
        return _OPTIONS.keys()

    def default(self, key):
        """The default of option ``key`` (when neither set nor in the environment)."""
        return self._option(key).default

    def env(self, key) -> str:
        """The environment variable option ``key`` falls back to."""
        return self._option(key).env

    def reset(self, key=None) -> None:
        """Return option ``key`` (all options when None) to its variable and default."""
        if key is None:
            self._set.clear()
        else:
            self._option(key)
            self._set.pop(key, None)

    @contextlib.contextmanager
    def context(self, **values):
        """Set options for the ``with`` block; restore what was set before on exit.

        Every value is validated before any is set: a bad one changes nothing.

        Parameters
        ----------
        **values
            Option names and values, e.g. ``nuts_backend="pymc"``.

        Yields
        ------
        Options
            This object.
        """
        new = {}
        for key, value in values.items():
            opt = self._option(key)
            new[key] = None if value is None else _validated(key, opt, value)
        saved = dict(self._set)
        try:
            for key, value in new.items():
                if value is None:
                    self._set.pop(key, None)
                else:
                    self._set[key] = value
            yield self
        finally:
            self._set.clear()
            self._set.update(saved)

    def __repr__(self) -> str:
        rows = []
        for key, opt in _OPTIONS.items():
            where = (
                "set"
                if key in self._set
                else "env"
                if os.environ.get(opt.env, "").strip()
                else "default"
            )
            try:
                value = repr(self[key])
            except ValueError:
                value = f"<invalid ${opt.env}>"
            rows.append(f"  {key}: {value} ({where})")
        return "Options(\n" + "\n".join(rows) + "\n)"


#: The package's options (``pymc_manidp.options``).
options = Options()
