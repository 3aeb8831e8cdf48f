r"""nutpie with its compiled entry points cached on disk across processes.

nutpie.compile_pymc_model wraps PyTensor's numba function of the log-density and its
gradient in a numba ``cfunc`` that holds the data as constants: numba cannot cache it,
so every process compiled it again (20-35 s on 2 cores). This module rebuilds those
wrappers so that they read the data through nutpie's ``user_data`` pointer and can be
cached (:func:`cache_dir`, ``PYMC_MANIDP_CACHE_DIR``; :func:`clear_cache`). It is the
one module that uses nutpie's private helpers.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import re
import shutil
import warnings
import weakref
from pathlib import Path

import numpy as np

from pymc_manidp.geometry.validation import read_env

__all__ = ["CACHE_ENV", "cache_dir", "clear_cache", "compile_nutpie"]

#
# nutpie.compile_pymc_model wraps PyTensor's numba function of the log-density and its
# gradient in a numba ``cfunc`` that holds the data as constants ("dynamic globals"):
# numba cannot cache it, so every process compiled it again (20-35 s on 2 cores, most of
# a first release; PyTensor's own numba function inside it is cached already). The
# wrappers below read the data (and their shapes) through the pointer the sampler passes
# them (nutpie's ``user_data``), so they do not depend on the data or on n, and numba
# caches them under :func:`cache_dir`, keyed on PyTensor's hash of the compiled graph.

CACHE_ENV = "PYMC_MANIDP_CACHE_DIR"
_CACHE_FORMAT = 2  # bump when the wrappers' layout changes: old entries are then ignored
_WRAPPER_KEYS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_LOCATOR = None


def cache_dir() -> Path:
    """Directory of the compiled NUTS entry points kept across processes.

    ``$PYMC_MANIDP_CACHE_DIR`` if set, else ``$XDG_CACHE_HOME/pymc-manidp`` (by default
    ``~/.cache/pymc-manidp``). Deleting it (:func:`clear_cache`) is always safe: the
    next release compiles again. PyTensor keeps its own compiled functions under
    ``pytensor.config.base_compiledir`` (``PYTENSOR_FLAGS=base_compiledir=...``).
    """
    env = read_env(CACHE_ENV, "path")
    if env:
        return Path(env).expanduser()
    base = read_env("XDG_CACHE_HOME", "path") or Path.home() / ".cache"
    return Path(base) / "pymc-manidp"


def clear_cache() -> None:
    """Delete the compiled NUTS entry points under :func:`cache_dir` (rebuilt on demand).

    Only the two folders this module writes (``numba``, ``models``) are removed, so a
    ``PYMC_MANIDP_CACHE_DIR`` pointed at a folder with other files loses none of them.
    """
    for sub in ("numba", "models"):
        shutil.rmtree(cache_dir() / sub, ignore_errors=True)


def _cache_is_private() -> bool:
    """Whether :func:`cache_dir` may be read and written: ours, and writable by us only.

    The cache holds code that runs in the curator's process beside the private data
    (numba's pickled index and object code): a folder another user could write to is
    not used (the model is then compiled in the process, and nothing is cached).
    """
    path = cache_dir()
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        st = path.stat()
    except OSError:
        return False
    return st.st_uid == os.getuid() and not st.st_mode & 0o022


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
            return 0  # the key hashes the source and the inner graph

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
        out[...] = grad
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
        out[...] = values
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

    ``inner=None`` only loads it from the cache: returns None on a miss. Returns the
    cfunc (its ``cache_hits`` says whether it was loaded)."""
    import numba

    # __name__: numba rebuilds a cached function's environment from this module
    env = {"__name__": __name__, "numba": numba, "np": np, "inner": inner}
    env["_ptr"] = _address_as_void_pointer()
    namespace: dict = {}
    exec(compile(src, "<pymc_manidp-nutpie>", "exec"), env, namespace)
    py_func = namespace[name]
    if key is None:  # PyTensor could not key the graph: compile, do not cache
        return numba.cfunc(signature)(py_func)
    _register_locator()
    _WRAPPER_KEYS[py_func] = key
    try:
        if inner is None:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                cfunc = numba.cfunc(signature, cache=True)(py_func)
            return cfunc if cfunc.cache_hits else None
        return numba.cfunc(signature, cache=True)(py_func)
    except Exception as err:  # an unreadable entry, or a miss without ``inner``
        if inner is None:
            return None
        warnings.warn(
            f"dropping an unreadable compiled-function cache entry ({err!r})", stacklevel=3
        )
        for path in (cache_dir() / "numba").glob(f"*{key}*"):
            path.unlink(missing_ok=True)
        return numba.cfunc(signature, cache=True)(py_func)


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
    import hashlib

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
    import hashlib

    if isinstance(value, np.ndarray):
        return ("array", value.dtype.str, value.shape, hashlib.sha256(value.tobytes()).hexdigest())
    return value


@functools.cache
def _source_hash():
    """Hash of this package's Python source (a new version never loads old entries)."""
    import hashlib

    root = Path(__file__).resolve().parents[1]
    h = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        h.update(str(path.relative_to(root)).encode() + path.read_bytes())
    return h.hexdigest()


def _manifest_path(key):
    return cache_dir() / "models" / f"{key}.json"


def _initial_point_fn(model):
    """PyMC's jittered initial point of ``model``, compiled for Python's linker.

    PyMC compiles it in ``FAST_COMPILE`` mode, whose virtual machine imports
    PyTensor's C layer (and with it setuptools) in a fresh process: 0.3-0.5 s of a
    first release for a function nutpie calls once per chain. The same graph with the
    pure-Python linker costs 0.14 s and returns the same values."""
    import pytensor.compile.mode as pt_mode
    from nutpie import compile_pymc as ncp
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
    return ncp._wrap_with_lock(fn)


def _assemble(model, manifest, cfuncs, initial_point_fn, shared_var_keys, shared_data, fns):
    """nutpie's ``CompiledPyMCModel`` from its parts."""
    from nutpie import compile_pymc as ncp

    names, slices, shapes = manifest["shape_info"]
    shape_info = (names, [slice(*sl) for sl in slices], [tuple(sh) for sh in shapes])
    n_free = len(model.free_RVs)
    flat_initial = ncp._rv_dict_to_flat_array_wrapper(
        initial_point_fn, names=names[:n_free], shapes=shape_info[2][:n_free]
    )
    reparam = manifest["reparameterized"]
    dims, coords = ncp._prepare_dims_and_coords(model, shape_info, reparam)
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


_HEX = re.compile(r"[0-9a-f]{64}")


def _load_compiled(model, key):
    """The compiled model from the cache without compiling any PyTensor function, or None.

    The manifest is data: its fields are checked (integers, known ``pm.Data`` names,
    hexadecimal keys) and the wrappers' source is generated here from our templates,
    so a tampered or stale manifest only ever means a miss."""
    import json

    path = _manifest_path(key)
    if not path.is_file():
        return None
    try:
        manifest = json.loads(path.read_text())
        by_name = {v.name: v for v in model.data_vars}
        shared_var_keys, shared_data = _shared_arrays(by_name[n] for n in manifest["shared"])
        fmt = dict(n_dim=int(manifest["n_dim"]), n_expanded=int(manifest["n_expanded"]))
        cfuncs = {}
        for kind, signature in _signatures().items():
            entry = manifest[kind]
            args, entry_key = list(entry["args"]), str(entry["key"])
            if not _HEX.fullmatch(entry_key) or not set(args) <= set(shared_data):
                return None
            src = _wrapper_src(_TEMPLATES[kind], args, shared_data, **fmt)
            cfuncs[kind] = _cfunc(src, f"{kind}_wrapper", entry_key, signature, None)
            if cfuncs[kind] is None:
                return None
        initial = _initial_point_fn(model)
        return _assemble(
            model, manifest, cfuncs, initial, shared_var_keys, shared_data, (None, None)
        )
    except (OSError, ValueError, KeyError, TypeError, IndexError):
        return None


def compile_nutpie(model):
    """``nutpie.compile_pymc_model(model)`` with its compilation cached across processes.

    Same model, same sampler (nutpie's ``CompiledPyMCModel``), but the two numba
    entry points nutpie would compile in every process read the data through a
    pointer, so they are cached under :func:`cache_dir`; with them a small manifest
    (sizes, names, the order of the ``pm.Data``) keyed on :func:`_structure_key`. A
    model of the same structure compiled before (any data, any n) is then assembled
    without compiling any PyTensor function for NUTS. Returns the compiled model and
    the number of its two entry points loaded from the cache.
    """
    import hashlib
    import json

    import numba
    from nutpie import compile_pymc as ncp
    from pytensor.link.numba.cache import CACHED_SRC_FUNCTIONS

    private = _cache_is_private()
    struct_key = _structure_key(model) if private else None
    if struct_key is not None:
        loaded = _load_compiled(model, struct_key)
        if loaded is not None:
            return loaded, 2
    initial_point_fn = _initial_point_fn(model)
    n_dim, n_expanded, logp_pt, expand_pt, _, shape_info, reparam = ncp._make_functions(
        model,
        mode="NUMBA",
        compute_grad=True,
        join_expanded=True,
        pymc_initial_point_fn=initial_point_fn,
    )
    shared_var_keys, shared_data = _shared_arrays([*logp_pt.get_shared(), *expand_pt.get_shared()])
    fmt = dict(n_dim=n_dim, n_expanded=n_expanded)
    manifest = {
        "n_dim": int(n_dim),
        "n_expanded": int(n_expanded),
        "shape_info": [
            list(shape_info[0]),
            [[int(sl.start), int(sl.stop)] for sl in shape_info[1]],
            [[int(d) for d in sh] for sh in shape_info[2]],
        ],
        "reparameterized": list(reparam),
        "shared": [var.name for var in shared_var_keys],
    }
    cfuncs, hits = {}, 0
    templates = {"logp": logp_pt, "expand": expand_pt}
    for kind, signature in _signatures().items():
        fn_pt = templates[kind]
        args = [shared_var_keys[var] for var in fn_pt.get_shared()]
        src = _wrapper_src(_TEMPLATES[kind], args, shared_data, **fmt)
        inner = fn_pt.vm.jit_fn
        inner_key = CACHED_SRC_FUNCTIONS.get(inner.py_func) if private else None
        key = None
        if inner_key is not None:
            # this package's source too: a new kernel never meets an old wrapper
            text = f"{_CACHE_FORMAT}\n{inner_key}\n{src}\n{numba.__version__}\n{_source_hash()}"
            key = hashlib.sha256(text.encode()).hexdigest()
        cfuncs[kind] = _cfunc(src, f"{kind}_wrapper", key, signature, inner)
        hits += int(cfuncs[kind].cache_hits > 0) if key is not None else 0
        manifest[kind] = {"args": args, "key": key}
    cacheable = struct_key is not None and all(manifest[k]["key"] for k in templates)
    names = [var.name for var in shared_var_keys]
    if cacheable and len(set(names)) == len(names) and None not in names:
        path = _manifest_path(struct_key)
        try:
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps(manifest))
            tmp.replace(path)  # atomic: a concurrent reader sees all or nothing
        except OSError:
            pass  # a read-only cache only costs compile time
    compiled = _assemble(
        model,
        manifest,
        cfuncs,
        initial_point_fn,
        shared_var_keys,
        shared_data,
        (logp_pt, expand_pt),
    )
    return compiled, hits


def _compile_nutpie_or_fallback(model):
    """:func:`compile_nutpie`, or nutpie's own compile if its internals have changed.

    :func:`compile_nutpie` uses helpers of ``nutpie.compile_pymc`` that are not public
    API: if a nutpie release renames them, sample anyway (compiling in every process)
    and say so."""
    try:
        return compile_nutpie(model)
    except (ImportError, AttributeError, TypeError, ValueError) as err:
        import nutpie

        warnings.warn(
            f"nutpie {nutpie.__version__}: cannot cache its compiled model ({err!r}); "
            "compiling it in this process",
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
