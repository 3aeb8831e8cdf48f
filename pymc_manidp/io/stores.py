"""Open data too big for memory as a Dask array chunked along the records.

:func:`open_points` reads a directory or glob of ``.npy`` shards, a Zarr array or
the numeric columns of Parquet files into a ``dask.array.Array`` of shape
``(n, ...)``, one chunk per shard (``.npy``), per stored chunk (Zarr) or per row
group (Parquet). Nothing is read when the array is opened: every pass of a release
(:mod:`pymc_manidp.stats.reductions`) reads each chunk once, in the worker that
uses it, so the data never travel through the scheduler. The row counts come from
the files' headers, so ``n`` (and with it the sensitivity) is known up front.

Examples
--------
>>> import os, tempfile
>>> import numpy as np
>>> folder = tempfile.mkdtemp()
>>> for i in range(3):
...     np.save(os.path.join(folder, f"part-{i}.npy"), np.tile([0.0, 0.0, 1.0], (4, 1)))
>>> x = open_points(folder)
>>> x.shape, x.chunks[0]
((12, 3), (4, 4, 4))
"""

from __future__ import annotations

import glob
import os
from pathlib import Path

import numpy as np

from pymc_manidp._validation import check_real_data
from pymc_manidp.io.files import check_regular_file

__all__ = ["input_files", "is_lazy_source", "open_points"]

_PARQUET = (".parquet", ".pq")


def is_lazy_source(path) -> bool:
    """Whether ``path`` names data :func:`open_points` opens lazily.

    A directory, a glob pattern, a ``.zarr`` store or a Parquet file; a single
    ``.npy``/``.csv`` file is read into memory instead (by the command line's file
    reader, ``pymc_manidp/io/files.py``).

    Parameters
    ----------
    path : str or Path
        What the user named (the command line's ``--data``).

    Returns
    -------
    bool
        True if :func:`open_points` should open ``path``.

    Examples
    --------
    >>> is_lazy_source("data/part-*.npy"), is_lazy_source("points.npy")
    (True, False)
    """
    text = str(path)
    if os.path.exists(text):  # a real name is that name, whatever characters it holds
        return os.path.isdir(text) or text.rstrip("/").lower().endswith((".zarr", *_PARQUET))
    return _is_pattern(text) or text.rstrip("/").lower().endswith((".zarr", *_PARQUET))


def _is_pattern(text: str) -> bool:
    """Whether ``text`` is read as a glob pattern: only a path that does not exist is."""
    return not os.path.exists(text) and any(ch in text for ch in "*?[")


def _files(path):
    """The data files at ``path``: a file, a folder's ``.npy`` or Parquet files, a pattern."""
    text = str(path)
    if _is_pattern(text):
        files = sorted(glob.glob(text))
        if not files:
            raise ValueError(f"no file matches the pattern {text} (and no file has that name)")
    elif os.path.isdir(text):
        entries = sorted(os.listdir(text))
        files = [os.path.join(text, f) for f in entries if f.lower().endswith((".npy", *_PARQUET))]
        _refuse_other_data(text, entries)
    elif os.path.exists(text):
        files = [text]
    else:
        raise ValueError(f"data not found: {text}")
    if not files:
        raise ValueError(f"no .npy or Parquet files found in {text}")
    parquet = sum(f.lower().endswith(_PARQUET) for f in files)
    if 0 < parquet < len(files):
        raise ValueError(
            f"{text} holds both Parquet files ({parquet}) and others "
            f"({len(files) - parquet}, e.g. .npy shards): one data set per folder or "
            "pattern (reading only one kind would drop the other's records); move one "
            "kind elsewhere or name the files with a pattern"
        )
    seen = {}
    for f in files:  # a FIFO would block the reader forever; an empty file is named
        check_regular_file(f)
        info = os.stat(f)
        first = seen.setdefault((info.st_dev, info.st_ino), f)
        if first != f:  # a link to another shard: its records would count twice
            raise ValueError(
                f"{f} and {first} are the same file (a symbolic or hard link): its records "
                "would be read and counted twice, and a record counted twice is not "
                "covered by the sensitivity for one; remove one of the names"
            )
    return files


#: files that may hold records but are not shards: a folder holding one beside its
#: shards would lose its records silently (n would count the shards only)
_OTHER_DATA = (".npz", ".csv", ".tsv", ".txt", ".json", ".h5", ".hdf5", ".feather", ".arrow")


def _refuse_other_data(folder: str, entries) -> None:
    """Refuse a folder holding, beside its shards, files or folders that may hold records.

    Hidden names (``.``) and ``_`` names (Spark's ``_SUCCESS``, Parquet's
    ``_metadata``) are left alone; so is any other file (``README.md``).
    """
    others = [
        f
        for f in entries
        if not f.startswith((".", "_"))
        and (f.lower().endswith(_OTHER_DATA) or os.path.isdir(os.path.join(folder, f)))
    ]
    if others:
        named = ", ".join(others[:3]) + (", ..." if len(others) > 3 else "")
        raise ValueError(
            f"{folder} holds {len(others)} file(s) or folder(s) that may hold records but "
            f"are not .npy or Parquet shards ({named}): they would be left out, so n would "
            "count only the shards; one data set per folder: move them elsewhere, or name "
            f"the shards with a pattern such as {os.path.join(folder, '*.npy')}"
        )


def _changed(path, what: str, now, opened) -> ValueError:
    """The error for data that changed between opening (when n was counted) and reading."""
    return ValueError(
        f"{path} changed after it was opened: its {what} {now}, but it was opened with "
        f"{opened}. n, and with it the sensitivity, were computed from what was opened, "
        "so nothing is released from what is read now; a charge already made to a "
        "privacy budget stands (the release had started). Keep the files unchanged "
        "while a release reads them"
    )


def input_files(path) -> list[Path]:
    """Every file :func:`open_points` would read for ``path`` (a ``.zarr`` store: its folder).

    The command line refuses an output path among them (``--out`` must never replace
    an input).

    Examples
    --------
    >>> import os, tempfile
    >>> folder = tempfile.mkdtemp()
    >>> np.save(os.path.join(folder, "part-0.npy"), np.zeros((2, 3)))
    >>> [p.name for p in input_files(folder)]
    ['part-0.npy']
    """
    text = str(path).rstrip("/") or "/"
    if text.lower().endswith(".zarr"):
        return [Path(text)]
    return [Path(f) for f in _files(text)]


def _npy_header(path):
    """Shape and dtype of an ``.npy`` shard (a memory map reads only the header)."""
    try:
        arr = np.load(path, mmap_mode="r", allow_pickle=False)
    except (ValueError, OSError, EOFError) as err:
        raise ValueError(f"cannot read {path} as a NumPy array: {err or 'truncated'}") from None
    if len(arr.shape) < 2:
        raise ValueError(f"{path}: a shard must hold one record per row, got shape {arr.shape}")
    check_real_data(arr, str(path))
    return arr.shape, arr.dtype


def _load_npy(path, start, stop, shape, dtype):
    """Rows ``start:stop`` of an ``.npy`` shard (a memory map: only those rows are read),
    if the shard still has the ``shape`` and ``dtype`` it was opened with."""
    try:
        check_regular_file(path)  # a FIFO put in its place would block the worker
        arr = np.load(path, mmap_mode="r", allow_pickle=False)
    except (ValueError, OSError, EOFError) as err:
        raise _changed(path, "content", f"cannot be read ({err or 'empty'})", shape) from None
    if arr.shape != shape or arr.dtype != dtype:
        raise _changed(
            path, "shape and dtype are", (arr.shape, str(arr.dtype)), (shape, str(dtype))
        )
    return np.array(arr[start:stop], dtype=float)


def _parquet_layout(meta, columns) -> tuple:
    """What a Parquet file must still have when read: rows per group, the columns' types."""
    groups = tuple(meta.metadata.row_group(g).num_rows for g in range(meta.num_row_groups))
    schema = meta.schema_arrow
    types = tuple(
        str(schema.field(c).type) if schema.get_field_index(c) >= 0 else None for c in columns
    )
    return groups, types


def _load_parquet(path, group, columns, layout):
    """Row group ``group``'s ``columns`` (by name), page checksums verified where written."""
    import pyarrow.parquet as pq

    try:
        check_regular_file(path)
        meta = pq.ParquetFile(path, page_checksum_verification=True)
        now = _parquet_layout(meta, columns)
    except Exception as err:  # pyarrow raises several types for a bad file
        raise _changed(path, "content", f"cannot be read ({err})", "a readable file") from None
    if now != layout:
        raise _changed(path, "row groups (rows) and column types are", now, layout)
    try:
        table = meta.read_row_group(group, columns=columns)
    except Exception as err:  # a CRC mismatch (OSError), a bad codec, ...
        raise ValueError(
            f"{path}: row group {group} is corrupt ({type(err).__name__}: {err}); a charge "
            "already made to a privacy budget stands (the release had started)"
        ) from None
    # by name, in the order asked for: never by position in the file
    return np.column_stack([table.column(c).to_numpy().astype(float) for c in columns])


def _parquet_dtype(arrow_type) -> np.dtype:
    """The NumPy dtype an Arrow column would become (object when it has none)."""
    try:
        return np.dtype(arrow_type.to_pandas_dtype())
    except (TypeError, NotImplementedError):  # dictionary-coded, nested, decimal, ...
        return np.dtype(object)


def _parquet_parts(files, columns):
    """One lazy block per row group; columns matched by name, types checked per file."""
    import dask
    import dask.array as da
    import pyarrow.parquet as pq

    if columns is not None:
        if isinstance(columns, str) or not all(isinstance(c, str) for c in columns):
            raise TypeError(f"columns must be a list of column names, got {columns!r}")
        if len(set(columns)) != len(columns) or not columns:
            raise ValueError(f"columns must name each column once (at least one), got {columns}")
    names, parts = None if columns is None else list(columns), []
    for f in files:
        try:
            meta = pq.ParquetFile(f)
        except Exception as err:  # pyarrow raises several types for a bad file
            raise ValueError(f"cannot read {f} as Parquet: {err}") from None
        schema = meta.schema_arrow
        twice = sorted({c for c in schema.names if schema.names.count(c) > 1})
        if twice:  # a name cannot say which of its columns holds the coordinate
            raise ValueError(
                f"{f}: the column name(s) {twice} appear more than once: columns are read "
                "by name, so each needs its own; rename them"
            )
        if names is None:  # every column of the first file, in its order
            names = list(schema.names)
        missing = [c for c in names if c not in schema.names]
        extra = [c for c in schema.names if c not in names] if columns is None else []
        if missing or extra:
            raise ValueError(
                f"{f}: columns {schema.names}, but the data have {names} (missing "
                f"{missing}, unexpected {extra}): columns are matched by name, so every "
                "file needs the same names (pass columns= to choose some)"
            )
        for c in names:
            field = schema.field(c)
            check_real_data(_parquet_dtype(field.type), f"{f}, column {c!r} ({field.type})")
        layout = _parquet_layout(meta, names)
        for g, rows in enumerate(layout[0]):
            load = dask.delayed(_load_parquet, pure=True)(f, g, names, layout)
            parts.append(da.from_delayed(load, (rows, len(names)), dtype=float))
    return parts


def _load_zarr(path, component, start, stop, layout):
    """Rows ``start:stop`` of a Zarr array that still has the shape, chunks and dtype it
    was opened with (``layout``); a chunk that cannot be decoded is named."""
    import zarr

    try:
        z = zarr.open_array(path, path=component or "", mode="r")
    except Exception as err:  # zarr raises several types for a bad store
        raise _changed(path, "metadata", f"cannot be read ({err})", layout) from None
    if _zarr_layout(z) != layout:
        raise _changed(path, "shape, chunks and dtype are", _zarr_layout(z), layout)
    try:
        block = z[start:stop]
    except Exception as err:  # zarr and its codecs raise many types for a corrupt chunk
        raise ValueError(
            f"{path}: cannot read rows {start}:{stop} (a corrupt chunk?): "
            f"{type(err).__name__}: {err}"
        ) from None
    return np.asarray(block, dtype=float)


def _zarr_layout(z) -> tuple:
    """What a Zarr array must still have when read: shape, chunks, dtype, fill value."""
    return tuple(z.shape), tuple(z.chunks), str(z.dtype), repr(z.fill_value)


def _open_zarr(text, component, chunk_rows):
    """A Zarr array as lazy blocks of rows, after checking its dtype and its chunks."""
    import dask
    import dask.array as da
    import zarr

    try:
        z = zarr.open_array(text, path=component or "", mode="r")
    except Exception as err:  # zarr raises several types for a bad store
        raise ValueError(f"cannot open {text} as a Zarr array: {err}") from None
    if z.ndim < 2:
        raise ValueError(f"{text} must hold one record per row, got shape {z.shape}")
    check_real_data(z, text)
    # A chunk absent from the store reads as the fill value, as the Zarr specification
    # defines: Zarr itself omits every chunk equal to it (write_empty_chunks=False, its
    # default), and nothing in a store tells such a chunk from one lost afterwards, so
    # refusing absent chunks would refuse stores Zarr wrote (docs/datasets.md).
    layout = _zarr_layout(z)
    step = chunk_rows or z.chunks[0]
    parts = []
    for start in range(0, z.shape[0], step):
        stop = min(start + step, z.shape[0])
        load = dask.delayed(_load_zarr, pure=True)(text, component, start, stop, layout)
        parts.append(da.from_delayed(load, (stop - start, *z.shape[1:]), dtype=float))
    return parts


def open_points(path, *, chunk_rows: int | None = None, columns=None, component=None):
    """A lazy ``dask.array.Array`` of the records stored at ``path``.

    Parameters
    ----------
    path : str or Path
        A directory of ``.npy`` shards (or of Parquet files), a glob pattern such as
        ``"data/part-*.npy"``, a ``.zarr`` store or a Parquet file. Shards are taken
        in sorted name order; each holds rows of the same trailing shape.
    chunk_rows : int, optional
        Split ``.npy`` shards into chunks of at most this many rows (default: one
        chunk per shard); rechunk Zarr arrays along the rows.
    columns : list of str, optional
        Parquet: the numeric columns holding one record's coordinates, in order
        (default: every column of the first file). Columns are read by name in every
        file, never by position; a file without one of them is an error naming it.
    component : str, optional
        Zarr: the array inside a group.

    Returns
    -------
    dask.array.Array, shape ``(n, ...)``
        The records as float64, chunked along ``n`` only; nothing is read yet.

    Raises
    ------
    ValueError
        Nothing found, a FIFO or empty file, shards of different trailing shapes,
        Parquet files with other or repeated column names, a folder holding anything
        that may hold records beside its shards (``.npy`` and Parquet, a ``.csv``,
        ``.npz``, ``.txt``, a subfolder). When a block is read (after any charge to a
        privacy budget, which stands): a file or store that changed since it was
        opened, a Parquet page whose checksum fails, a corrupt Zarr chunk.
    TypeError
        Data that are not integer or floating point (bools, complex, dates...).

    Notes
    -----
    A Zarr chunk absent from the store is read as the fill value, as the Zarr
    specification defines (Zarr omits chunks equal to it); one lost from the store
    cannot be told apart. Parquet files written without page checksums (pyarrow's
    default) cannot show a corrupt value. See docs/datasets.md.
    """
    import dask
    import dask.array as da

    if chunk_rows is not None:  # 0 gave range()'s error, -1 "no records", True one row
        if isinstance(chunk_rows, bool) or not isinstance(chunk_rows, (int, np.integer)):
            raise TypeError(f"chunk_rows must be a whole number of rows, got {chunk_rows!r}")
        if chunk_rows < 1:
            raise ValueError(f"chunk_rows must be at least 1 (or None), got {chunk_rows}")
        chunk_rows = int(chunk_rows)
    if component is not None and not isinstance(component, str):
        raise TypeError(f"component must be the name of an array in the group, got {component!r}")
    text = str(path).rstrip("/") or "/"
    if text.lower().endswith(".zarr"):
        parts = _open_zarr(text, component, chunk_rows)
        files = []
    else:
        files = _files(text)
        parts = []
    if files and files[0].lower().endswith(_PARQUET):
        parts = _parquet_parts(files, columns)
    elif files:
        trailing = None
        for f in files:
            if not f.lower().endswith(".npy"):
                raise ValueError(f"{f}: shards must all be .npy files")
            shape, dtype = _npy_header(f)
            if trailing is None:
                trailing = shape[1:]
            elif shape[1:] != trailing:
                raise ValueError(
                    f"{f}: rows of shape {shape[1:]}, but earlier shards have {trailing}"
                )
            step = chunk_rows or max(shape[0], 1)
            for start in range(0, shape[0], step):
                stop = min(start + step, shape[0])
                load = dask.delayed(_load_npy, pure=True)(f, start, stop, shape, dtype)
                parts.append(da.from_delayed(load, (stop - start, *trailing), dtype=float))
    if not parts:
        raise ValueError(f"the files at {text} hold no records")
    return da.concatenate(parts, axis=0) if len(parts) > 1 else parts[0]


def source_name(path) -> str:
    """The name written in a release's provenance (the folder, pattern or file name)."""
    return Path(str(path).rstrip("/")).name
