r"""nutpie with its compiled entry points cached on disk across processes.

nutpie's public ``nutpie.compile_pymc_model`` wraps PyTensor's numba function of the
log-density and its gradient in two numba ``cfunc`` that hold the data as constants:
numba cannot cache them, so every process compiles them again, and a first release
of KNG on S² in a fresh process takes about three times as long as with this module
(docs/benchmarks.md, "nutpie's public API against the cache"). This module builds the
two entry points from its own templates, which read the data through the pointer
nutpie passes them (``user_data``), so numba caches them under :func:`cache_dir`
(``PYMC_MANIDP_CACHE_DIR``; :func:`clear_cache`), with a small JSON manifest (sizes,
names, the order of the ``pm.Data``) keyed on a hash of the model's structure.

It is the one module that uses nutpie's private helpers, and only through
:func:`_nutpie_internals`, which checks them (and nutpie's version) first: if they
changed, :func:`_compile_nutpie_or_fallback` warns, naming the version, and compiles
with the public API.

The cache holds code that runs beside the private data, so nothing is loaded from it
unless every folder and file the loader reads is the user's own and writable by the
user only, with no link (:func:`_cache_is_private`). A manifest is data: each field is
checked against the model, and the entry points are stored under a key that hashes
the model's structure with *every* manifest field, so a manifest other than the one
written with them finds none (a miss: the model is compiled, the entry rewritten).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import inspect
import itertools
import json
import math
import os
import shutil
import stat
import threading
import warnings
import weakref
from pathlib import Path

import numpy as np

from pymc_manidp.geometry._numba.cache import (
    CACHE_ENV,
    CACHE_SUBDIRS,
    cache_dir,
    private_cache,
)
from pymc_manidp.geometry._numba.cache import not_ours_alone as _not_ours_alone  # noqa: F401 (tests)

__all__ = ["CACHE_ENV", "NutpieInternalsError", "cache_dir", "clear_cache", "compile_nutpie"]

_CACHE_FORMAT = 4  # bump when the wrappers' layout changes: old entries are then ignored
_WRAPPER_KEYS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_LOCATOR = None


def clear_cache() -> None:
    """Delete what the package caches under :func:`cache_dir` (rebuilt on demand).

    Only the folders the package writes (``numba``, with the kernels' cache, and
    ``models``) are removed, so a ``PYMC_MANIDP_CACHE_DIR`` pointed at a folder with
    other files loses none of them.
    """
    for sub in CACHE_SUBDIRS:
        shutil.rmtree(cache_dir() / sub, ignore_errors=True)


def _cache_is_private() -> bool:
    """Whether :func:`cache_dir` may be read and written: ours alone, all the way down.

    The cache holds code that runs in the curator's process beside the private data
    (numba's pickled index and object code), so the folder and everything the loader
    reads below it (``numba/``, ``models/``) must belong to the current user, be
    writable by nobody else, and be plain files and folders
    (:func:`pymc_manidp.geometry._numba.cache.not_ours_alone`). Otherwise it warns,
    naming the first offending path, and returns False: the model is then compiled in
    the process and nothing is read from or written to the cache.
    """
    return private_cache(stacklevel=4) is not None


def _private_files(pattern):
    """Make the cache files matching ``pattern`` writable by us only (a umask of 002
    would leave numba's new files group-writable, and :func:`_cache_is_private` would
    then refuse the cache)."""
    for path in (cache_dir() / "numba").glob(pattern):
        try:
            path.chmod(stat.S_IMODE(path.lstat().st_mode) & ~0o022)
        except FileNotFoundError:  # replaced by another process meanwhile
            pass


class NutpieInternalsError(ImportError):
    """The nutpie installed lacks, or changed, a private helper this cache needs."""


# nutpie.compile_pymc's private helpers used here, each with the parameters it gets
# (all by keyword); CompiledPyMCModel with the fields it is built with
_NUTPIE_PRIVATE = {
    "_make_functions": ("model", "mode", "compute_grad", "join_expanded", "pymc_initial_point_fn"),
    "_rv_dict_to_flat_array_wrapper": ("fn", "names", "shapes"),
    "_prepare_dims_and_coords": ("model", "shape_info", "reparameterized_names"),
    "CompiledPyMCModel": tuple(
        "dims reparameterized_names compiled_logp_func compiled_expand_func initial_point_func "
        "shared_data shared_var_keys user_data n_expanded shape_info logp_func expand_func "
        "_n_dim _shapes _coords".split()
    ),
}
# the C signature nuts-rs calls the entry points with is not visible from Python:
# only the versions this module was tested with are trusted
_NUTPIE_TESTED = "0.16."


def _nutpie_internals():
    """``nutpie.compile_pymc``, once the private helpers this module uses are checked.

    The only way this module reaches nutpie's internals. Each helper of
    :data:`_NUTPIE_PRIVATE` must exist, accept the parameters listed and need no
    other; nutpie's version must be one this module was tested with. Raises
    :class:`NutpieInternalsError`, naming nutpie's version and the helper, otherwise
    (:func:`_compile_nutpie_or_fallback` then compiles with nutpie's public API).
    """
    import nutpie
    from nutpie import compile_pymc as ncp

    version = nutpie.__version__
    for name, passed in _NUTPIE_PRIVATE.items():
        helper = getattr(ncp, name, None)
        try:
            params = inspect.signature(helper).parameters
        except (TypeError, ValueError):  # None, or not introspectable
            problem = "is missing"
        else:
            kinds = {p.kind for p in params.values()}
            named = {n for n, p in params.items() if p.kind != p.POSITIONAL_ONLY}
            needed = {
                n
                for n, p in params.items()
                if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
            }
            accepts = inspect.Parameter.VAR_KEYWORD in kinds or set(passed) <= named
            if accepts and needed <= set(passed):
                continue
            problem = f"now has the signature {name}{inspect.signature(helper)}"
        raise NutpieInternalsError(
            f"nutpie {version}: nutpie.compile_pymc.{name} {problem}, but pymc-manidp's "
            f"compile cache (pymc_manidp/mcmc/nutpie_cache.py) passes it {', '.join(passed)} "
            "as nutpie 0.16 does. Install nutpie 0.16 (pip install 'nutpie>=0.16.10,<0.17') "
            "to cache compiled models across processes."
        )
    if not version.startswith(_NUTPIE_TESTED):
        raise NutpieInternalsError(
            f"nutpie {version}: pymc-manidp's compile cache is tested with nutpie "
            f"{_NUTPIE_TESTED}x only (the C entry points it builds must match how nutpie's "
            "sampler calls them). Install nutpie 0.16 (pip install 'nutpie>=0.16.10,<0.17') "
            "to cache compiled models across processes."
        )
    return ncp


def _register_locator():
    """Teach numba where our generated wrappers are cached (once per process)."""
    global _LOCATOR
    if _LOCATOR is not None:
        return
    from numba.core.caching import CacheImpl, _CacheLocator

    class ManidpCacheLocator(_CacheLocator):
        """Numba cache locator of the generated nutpie wrappers: :func:`cache_dir`."""

        def __init__(self, key, path):
            self._key = key
            self._path = path

        def ensure_cache_path(self):
            self._path.mkdir(mode=0o700, parents=True, exist_ok=True)

        def get_cache_path(self):
            return str(self._path)

        def get_source_stamp(self):
            return 0  # the key hashes the model, the manifest and this source

        def get_disambiguator(self):
            return self._key

        @classmethod
        def from_function(cls, py_func, py_file):
            key = _WRAPPER_KEYS.get(py_func)
            if key is not None:
                return cls(key, cache_dir() / "numba")
            return None

    CacheImpl._locator_classes.insert(0, ManidpCacheLocator)
    _LOCATOR = ManidpCacheLocator


@functools.cache
def _address_as_void_pointer():
    from numba.core import cgutils, types
    from numba.extending import intrinsic

    @intrinsic
    def address_as_void_pointer(typingctx, src):
        def codegen(cgctx, builder, sig, args):
            return builder.inttoptr(args[0], cgutils.voidptr_t)

        return types.voidptr(src), codegen

    return address_as_void_pointer


# The copies out are loops: an ``out[...] = grad`` broadcast compiled numba's shape-error
# machinery (string formatting of shapes), about 3 CPU s of a cold first release
_LOGP_SRC = """
def logp_wrapper(dim, x_, out_, logp_, user_data_):
    if dim != {n_dim}:
        return -1
    try:
        u = numba.carray(user_data_, ({n_user},), np.int64)
        x = numba.carray(x_, ({n_dim},))
        out = numba.carray(out_, ({n_dim},))
        logp = numba.carray(logp_, ())
{unpack}
        logp_val, grad = inner(x{args})
        logp[()] = logp_val
        for i in range({n_dim}):
            out[i] = grad[i]
        if not np.all(np.isfinite(out)):
            return 3
        if not np.isfinite(logp_val):
            return 4
    except Exception:
        return 1
    return 0
"""

_EXPAND_SRC = """
def expand_wrapper(dim, expanded, x_, out_, user_data_):
    if dim != {n_dim}:
        return -1
    if expanded != {n_expanded}:
        return -1
    try:
        u = numba.carray(user_data_, ({n_user},), np.int64)
        x = numba.carray(x_, ({n_dim},))
        out = numba.carray(out_, ({n_expanded},))
{unpack}
        (values,) = inner(x{args})
        for i in range({n_expanded}):
            out[i] = values[i]
    except Exception:
        return -2
    return 0
"""


_TEMPLATES = {"logp": _LOGP_SRC, "expand": _EXPAND_SRC}


def _user_layout(keys, shared_data):
    """Offsets of each array's pointer and shape in the int64 ``user_data`` vector."""
    layout, pos = {}, 0
    for key in keys:
        layout[key] = pos
        pos += 1 + shared_data[key].ndim
    return layout, pos


def _user_data(keys, shared_data):
    """The int64 vector the wrappers read: per array, its address then its shape."""
    out = []
    for key in keys:
        val = shared_data[key]
        out += [val.ctypes.data, *val.shape]
    return np.asarray(out, dtype=np.int64)


def _wrapper_src(template, arg_keys, shared_data, **fmt):
    """The source of a wrapper around a numba function (see :data:`_LOGP_SRC`) whose data
    arguments are ``shared_data[key]`` for ``key`` in ``arg_keys`` (in that order).

    Only our templates, integers and the arrays' own dtypes and ranks enter the source:
    a cache manifest names keys, never code (:func:`_load_compiled`)."""
    layout, n_user = _user_layout(list(shared_data), shared_data)
    unpack, args = [], ""
    for i, key in enumerate(arg_keys):
        off, val = layout[key], shared_data[key]
        shape = "".join(f"u[{off + 1 + a}], " for a in range(val.ndim))
        unpack.append(
            f"        d{i} = numba.carray(_ptr(u[{off}]), ({shape}), np.{val.dtype.name})"
        )
        args += f", d{i}"
    return template.format(
        n_user=max(n_user, 1), unpack="\n".join(unpack) or "        pass", args=args, **fmt
    )


def _cfunc(src, name, key, signature, inner):
    """Compile ``src``'s function ``name`` as a numba cfunc, cached under ``key``.

    ``inner=None`` only loads it from the cache: returns None on a miss. ``key=None``
    compiles without caching. Returns the cfunc (its ``cache_hits`` says whether it
    was loaded)."""
    import numba

    # __name__: numba rebuilds a cached function's environment from this module
    env = {"__name__": __name__, "numba": numba, "np": np, "inner": inner}
    env["_ptr"] = _address_as_void_pointer()
    namespace: dict = {}
    exec(compile(src, "<pymc_manidp-nutpie>", "exec"), env, namespace)
    py_func = namespace[name]
    if key is None:
        return numba.cfunc(signature)(py_func)
    _register_locator()
    _WRAPPER_KEYS[py_func] = key
    try:
        if inner is None:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                cfunc = numba.cfunc(signature, cache=True)(py_func)
            return cfunc if cfunc.cache_hits else None
        cfunc = numba.cfunc(signature, cache=True)(py_func)
    except Exception as err:  # an unreadable entry, or a miss without ``inner``
        if inner is None:
            return None
        warnings.warn(
            f"dropping an unreadable compiled-function cache entry ({err!r})", stacklevel=3
        )
        for path in (cache_dir() / "numba").glob(f"*{key}*"):
            path.unlink(missing_ok=True)
        cfunc = numba.cfunc(signature, cache=True)(py_func)
    _private_files(f"*{key}*")
    return cfunc


def _entry_points(manifest, struct_key, shared_data, inner=None):
    """The two cfuncs of ``manifest`` (``{"logp": ..., "expand": ...}``).

    Each is cached under a hash of ``struct_key`` and every manifest field: the
    entry points written with one manifest are found with that manifest only.
    ``inner`` (PyTensor's numba functions by kind) compiles them on a miss; without
    it, a miss returns None. ``struct_key=None``: compiled, not cached."""
    fmt = dict(n_dim=int(manifest["n_dim"]), n_expanded=int(manifest["n_expanded"]))
    cfuncs = {}
    for kind, signature in _signatures().items():
        src = _wrapper_src(_TEMPLATES[kind], manifest[f"{kind}_args"], shared_data, **fmt)
        key = None
        if struct_key is not None:
            text = json.dumps([_CACHE_FORMAT, struct_key, kind, manifest], sort_keys=True)
            key = hashlib.sha256(text.encode()).hexdigest()
        cfuncs[kind] = _cfunc(src, f"{kind}_wrapper", key, signature, inner and inner[kind])
        if cfuncs[kind] is None:
            return None
    return cfuncs


def _signatures():
    import numba

    c_double = numba.types.CPointer(numba.types.double)
    u64, voidptr = numba.types.uint64, numba.types.voidptr
    return {
        "logp": numba.types.int64(u64, c_double, c_double, c_double, voidptr),
        "expand": numba.types.int64(u64, u64, c_double, c_double, voidptr),
    }


def _structure_key(model):
    """A hash of everything the compiled model depends on except the data, or None.

    The graphs of the log-density and of the traced variables before any rewrite:
    every node's op (class and ``__props__``), its inputs and output types, every
    constant's bytes, every input's name and type (the ``pm.Data`` by name, never
    their values), plus the versions of the libraries that compile them and a hash of
    this package's source. None (not cacheable) when an op has no ``__props__`` or a
    prop prints as a memory address (it would differ in every process).
    """
    import numba
    import nutpie
    import pymc
    import pytensor
    from pytensor.graph.basic import Constant
    from pytensor.graph.traversal import graph_inputs, io_toposort

    outputs = [model.logp(), *model.unobserved_value_vars]
    h = hashlib.sha256()
    cfg = pytensor.config
    versions = (_CACHE_FORMAT, pymc.__version__, pytensor.__version__, numba.__version__)
    # check_bounds decides whether nutpie strips the parameter checks when it compiles
    flags = (cfg.floatX, cfg.numba__fastmath, cfg.optimizer, bool(model.check_bounds))
    flags += (cfg.optimizer_including, cfg.optimizer_excluding, cfg.optimizer_requiring)
    h.update(repr((*versions, nutpie.__version__, flags, _source_hash())).encode())
    ids = {}
    inputs = list(graph_inputs(outputs))
    for var in inputs:
        if isinstance(var, Constant):
            data = np.asarray(var.data)
            token = ("const", str(var.type), data.dtype.str, data.shape)
            h.update(repr(token).encode() + data.tobytes())
        else:
            h.update(repr(("input", var.name, str(var.type), type(var).__name__)).encode())
        ids[var] = len(ids)
    for node in io_toposort(inputs, outputs):
        op = node.op
        if not hasattr(op, "__props__"):
            return None
        props = repr([(p, _prop_token(getattr(op, p))) for p in op.__props__])
        if " at 0x" in props:
            return None
        ins = [ids[v] for v in node.inputs]
        h.update(repr((type(op).__module__, type(op).__qualname__, props, ins)).encode())
        for out in node.outputs:
            ids[out] = len(ids)
            h.update(str(out.type).encode())
    h.update(repr([ids[o] for o in outputs]).encode())
    return h.hexdigest()


def _prop_token(value):
    """An op's prop as it enters the structure key: arrays by their bytes (their repr
    elides the middle of large ones)."""
    if isinstance(value, np.ndarray):
        return ("array", value.dtype.str, value.shape, hashlib.sha256(value.tobytes()).hexdigest())
    return value


@functools.cache
def _source_hash():
    """Hash of this package's Python source (a new version never loads old entries)."""
    return _tree_hash(Path(__file__).resolve().parents[1])


def _tree_hash(root):
    """sha256 over the ``*.py`` files under ``root``, in ``sorted(Path)`` order, of each
    file's path relative to ``root`` followed by its bytes.

    The relative path is cut from the string: ``Path.relative_to`` cost 80% of this
    hash (5-15 ms of every warm first release, for 140 files), and the digest is the
    one ``relative_to`` gave (``tests/mcmc/test_nutpie_cache.py``)."""
    h = hashlib.sha256()
    prefix = len(str(root)) + 1
    for path in sorted(root.rglob("*.py")):
        name = str(path)
        h.update(name[prefix:].encode())
        with open(name, "rb") as f:
            h.update(f.read())
    return h.hexdigest()


def _manifest_path(key):
    return cache_dir() / "models" / f"{key}.json"


def _model_layout(model):
    """What ``model`` alone fixes of a manifest, as nutpie's ``_make_functions`` lays it
    out: the traced variables' names (free values first) and static shapes (None
    where unknown), and the names of the free values that are transformed."""
    free = [model.rvs_to_values[rv] for rv in model.free_RVs]
    names = [v.name for v in free]
    traced = free + [v for v in model.unobserved_value_vars if v.name not in names]
    reparam = [
        model.rvs_to_values[rv].name
        for rv in model.free_RVs
        if model.rvs_to_transforms.get(rv) is not None
    ]
    return [v.name for v in traced], [v.type.shape for v in traced], len(free), reparam


_FIELDS = {"n_dim", "n_expanded", "shape_info", "reparameterized", "shared", "inner"}
_FIELDS |= {"logp_args", "expand_args"}


def _check_manifest(model, manifest):
    """Raise ValueError unless every field of ``manifest`` fits ``model``.

    Names, order and transforms of the traced variables as the model gives them;
    shapes of the right rank, equal to the static ones where known, with the slices
    and sizes they imply; the ``pm.Data`` read, distinct and the model's; each entry
    point's arguments among them; PyTensor's keys of its compiled graphs, strings.
    What the model does not fix (a shape it leaves to the data, the order of the
    ``pm.Data``, the graphs' keys) is bound by the entry points' key."""
    names, static, n_free, reparam = _model_layout(model)
    got_names, slices, shapes = manifest["shape_info"]
    shared, keys = manifest["shared"], {f"s{i}" for i in range(len(manifest["shared"]))}
    sizes = [math.prod(sh) for sh in shapes]
    ends = np.cumsum([0, *sizes]).tolist()
    ok = (
        set(manifest) == _FIELDS
        and len(manifest["inner"]) == 2
        and all(type(k) is str for k in manifest["inner"])
        and got_names == names
        and manifest["reparameterized"] == reparam
        and len(shapes) == len(static)
        and all(
            len(sh) == len(st)
            and all(
                type(d) is int and d >= 0 and s in (None, d) for d, s in zip(sh, st, strict=True)
            )
            for sh, st in zip(shapes, static, strict=True)
        )
        and slices == [list(ab) for ab in itertools.pairwise(ends)]
        and type(manifest["n_dim"]) is int
        and manifest["n_dim"] == ends[n_free]
        and type(manifest["n_expanded"]) is int
        and manifest["n_expanded"] == ends[-1]
        and len(set(shared)) == len(shared)
        and set(shared) <= {v.name for v in model.data_vars}
        and all(set(manifest[k]) <= keys for k in ("logp_args", "expand_args"))
    )
    if not ok:
        raise ValueError("the cached manifest does not fit the model")


def _initial_point_fn(model):
    """PyMC's jittered initial point of ``model``, compiled for Python's linker.

    PyMC compiles it in ``FAST_COMPILE`` mode, whose virtual machine imports
    PyTensor's C layer (and with it setuptools) in a fresh process: 0.3-0.5 s of a
    first release for a function nutpie calls once per chain. The same graph with the
    pure-Python linker costs 0.14 s and returns the same values. Locked: nutpie's
    chains call it from their threads."""
    import pytensor.compile.mode as pt_mode
    from pymc.initial_point import make_initial_point_fn

    fast_compile = pt_mode.FAST_COMPILE  # read by make_initial_point_fn at call time
    pt_mode.FAST_COMPILE = pt_mode.Mode(linker="py", optimizer="fast_compile")
    try:
        fn = make_initial_point_fn(
            model=model,
            default_strategy="support_point",
            jitter_rvs=set(model.free_RVs),
            return_transformed=True,
        )
    finally:
        pt_mode.FAST_COMPILE = fast_compile
    lock = threading.Lock()

    def locked(seed=None):
        with lock:
            return fn(seed)

    return locked


def _assemble(ncp, model, manifest, cfuncs, initial_point_fn, shared, fns):
    """nutpie's ``CompiledPyMCModel`` from its parts (``shared``: the
    ``(shared_var_keys, shared_data)`` of :func:`_shared_arrays`)."""
    shared_var_keys, shared_data = shared
    names, slices, shapes = manifest["shape_info"]
    shape_info = (names, [slice(*sl) for sl in slices], [tuple(sh) for sh in shapes])
    n_free = len(model.free_RVs)
    flat_initial = ncp._rv_dict_to_flat_array_wrapper(
        fn=initial_point_fn, names=names[:n_free], shapes=shape_info[2][:n_free]
    )
    reparam = manifest["reparameterized"]
    dims, coords = ncp._prepare_dims_and_coords(
        model=model, shape_info=shape_info, reparameterized_names=reparam
    )
    return ncp.CompiledPyMCModel(
        _n_dim=manifest["n_dim"],
        dims=dims,
        _coords=coords,
        _shapes={name: tuple(shape) for name, _, shape in zip(*shape_info, strict=True)},
        compiled_logp_func=cfuncs["logp"],
        compiled_expand_func=cfuncs["expand"],
        initial_point_func=flat_initial,
        shared_data=shared_data,
        shared_var_keys=shared_var_keys,
        user_data=_user_data(list(shared_data), shared_data),
        n_expanded=manifest["n_expanded"],
        shape_info=shape_info,
        logp_func=fns[0],
        expand_func=fns[1],
        reparameterized_names=reparam,
    )


def _shared_arrays(variables):
    shared_var_keys, shared_data = {}, {}
    for var in variables:
        if var not in shared_var_keys:
            key = f"s{len(shared_var_keys)}"
            shared_var_keys[var] = key
            val = np.array(var.get_value(), order="C", copy=True)
            val.flags.writeable = False
            shared_data[key] = val
    return shared_var_keys, shared_data


def _load_compiled(ncp, model, key):
    """The compiled model from the cache without compiling any PyTensor function, or None.

    None (a miss) unless the manifest parses, fits the model (:func:`_check_manifest`)
    and both entry points stored with it are found."""
    path = _manifest_path(key)
    if not path.is_file():
        return None
    try:
        manifest = json.loads(path.read_text())
        _check_manifest(model, manifest)
        by_name = {v.name: v for v in model.data_vars}
        shared = _shared_arrays(by_name[n] for n in manifest["shared"])
        cfuncs = _entry_points(manifest, key, shared[1])
        if cfuncs is None:
            return None
        initial = _initial_point_fn(model)
        return _assemble(ncp, model, manifest, cfuncs, initial, shared, (None, None))
    except (OSError, ValueError, KeyError, TypeError, IndexError, AttributeError):
        return None


def compile_nutpie(model):
    """``nutpie.compile_pymc_model(model)`` with its compilation cached across processes.

    Same model, same sampler (nutpie's ``CompiledPyMCModel``), but the two numba
    entry points nutpie would compile in every process read the data through a
    pointer, so they are cached under :func:`cache_dir`; with them a small manifest
    (sizes, names, the order of the ``pm.Data``) keyed on a hash of the model's
    structure (``_structure_key``). A model of the same structure compiled before
    (any data, any n) is then assembled without compiling any PyTensor function for
    NUTS. Nothing is loaded from a cache folder that is not the user's own alone.

    Parameters
    ----------
    model : pymc.Model
        The model; its data-dependent quantities are ``pm.Data`` (read through the
        pointer, so the cached entry points serve any values).

    Returns
    -------
    compiled : nutpie.CompiledPyMCModel
        What ``nutpie.sample`` takes, holding the model's current data.
    cache_hits : int
        How many of the two entry points were loaded from the cache (0, 1 or 2).

    Raises
    ------
    ImportError
        nutpie is not installed, or its private helpers this function uses have
        changed (a ``NutpieInternalsError``, checked before they are used).
    """
    from pytensor.link.numba.cache import CACHED_SRC_FUNCTIONS

    ncp = _nutpie_internals()
    struct_key = _structure_key(model) if _cache_is_private() else None
    if struct_key is not None:
        loaded = _load_compiled(ncp, model, struct_key)
        if loaded is not None:
            return loaded, 2
    initial_point_fn = _initial_point_fn(model)
    n_dim, n_expanded, logp_pt, expand_pt, _, shape_info, reparam = ncp._make_functions(
        model=model,
        mode="NUMBA",
        compute_grad=True,
        join_expanded=True,
        pymc_initial_point_fn=initial_point_fn,
    )
    shared = _shared_arrays([*logp_pt.get_shared(), *expand_pt.get_shared()])
    manifest = {
        "n_dim": int(n_dim),
        "n_expanded": int(n_expanded),
        "shape_info": [
            list(shape_info[0]),
            [[int(sl.start), int(sl.stop)] for sl in shape_info[1]],
            [[int(d) for d in sh] for sh in shape_info[2]],
        ],
        "reparameterized": list(reparam),
        "shared": [var.name for var in shared[0]],
        "logp_args": [shared[0][var] for var in logp_pt.get_shared()],
        "expand_args": [shared[0][var] for var in expand_pt.get_shared()],
    }
    inner = {"logp": logp_pt.vm.jit_fn, "expand": expand_pt.vm.jit_fn}
    # PyTensor's keys of the compiled graphs: a wrapper is reused around the same code only
    manifest["inner"] = [CACHED_SRC_FUNCTIONS.get(inner[k].py_func) for k in ("logp", "expand")]
    names = manifest["shared"]
    if len(set(names)) != len(names) or None in names or None in manifest["inner"]:
        struct_key = None  # a load finds the pm.Data by name; PyTensor could not key a graph
    with warnings.catch_warnings():
        # an inner function numba cannot cache (it holds constants) leaves the wrapper
        # uncached too: the next process compiles it again, as nutpie would
        warnings.filterwarnings("ignore", message="Cannot cache compiled function")
        cfuncs = _entry_points(manifest, struct_key, shared[1], inner)
    hits = 0 if struct_key is None else sum(int(f.cache_hits > 0) for f in cfuncs.values())
    if struct_key is not None:
        path = _manifest_path(struct_key)
        try:
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as out:
                json.dump(manifest, out)
            tmp.replace(path)  # atomic: a concurrent reader sees all or nothing
        except OSError:
            pass  # a read-only cache only costs compile time
    fns = (logp_pt, expand_pt)
    return _assemble(ncp, model, manifest, cfuncs, initial_point_fn, shared, fns), hits


def _compile_nutpie_or_fallback(model):
    """:func:`compile_nutpie`, or nutpie's public compile if its internals have changed.

    :func:`compile_nutpie` uses helpers of ``nutpie.compile_pymc`` that are not public
    API: if a nutpie release renames or changes them, sample anyway (compiling in
    every process) and say so, naming the version."""
    try:
        return compile_nutpie(model)
    except (ImportError, AttributeError, TypeError, ValueError) as err:
        import nutpie

        why = str(err) if isinstance(err, NutpieInternalsError) else f"{err!r}"
        warnings.warn(
            f"cannot cache nutpie's compiled model, compiling it in this process with "
            f"nutpie.compile_pymc_model (nutpie {nutpie.__version__}): {why}",
            stacklevel=3,
        )
        return nutpie.compile_pymc_model(model), 0


def _nutpie_with_data(compiled, values):
    """A copy of :func:`compile_nutpie`'s model reading ``values`` (by ``pm.Data`` name).

    The compiled wrappers are shared; the copy owns its arrays and the pointer vector."""
    shared_data = dict(compiled.shared_data)
    for var, key in compiled.shared_var_keys.items():
        if var.name in values:
            old = shared_data[key]
            new = np.array(values[var.name], dtype=old.dtype, order="C", copy=True)
            if new.ndim != old.ndim:
                raise ValueError(f"{var.name} must have rank {old.ndim}, got {new.ndim}")
            new.flags.writeable = False
            shared_data[key] = new
    return dataclasses.replace(
        compiled,
        shared_data=shared_data,
        user_data=_user_data(list(shared_data), shared_data),
    )
