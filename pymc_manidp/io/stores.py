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

__all__ = ["is_lazy_source", "open_points"]

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
    return (
        any(ch in text for ch in "*?[")
        or os.path.isdir(text)
        or text.rstrip("/").lower().endswith((".zarr", *_PARQUET))
    )


def _files(path):
    text = str(path)
    if any(ch in text for ch in "*?["):
        files = sorted(glob.glob(text))
    elif os.path.isdir(text):
        entries = sorted(os.listdir(text))
        npy = [os.path.join(text, f) for f in entries if f.lower().endswith(".npy")]
        pq = [os.path.join(text, f) for f in entries if f.lower().endswith(_PARQUET)]
        files = npy or pq
    else:
        files = [text] if os.path.isfile(text) else []
    if not files:
        raise ValueError(f"no .npy or Parquet files found at {text}")
    return files


def _npy_header(path):
    """Shape and dtype of an ``.npy`` shard (a memory map reads only the header)."""
    try:
        arr = np.load(path, mmap_mode="r", allow_pickle=False)
    except (ValueError, OSError) as err:
        raise ValueError(f"cannot read {path} as a NumPy array: {err}") from None
    return arr.shape, arr.dtype


def _load_npy(path, start, stop):
    """Rows ``start:stop`` of an ``.npy`` shard (a memory map: only those rows are read)."""
    return np.array(np.load(path, mmap_mode="r")[start:stop], dtype=float)


def _load_parquet(path, group, columns):
    import pyarrow.parquet as pq

    table = pq.ParquetFile(path).read_row_group(group, columns=columns)
    return np.column_stack([table.column(c).to_numpy().astype(float) for c in table.column_names])


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
        (default: every column).
    component : str, optional
        Zarr: the array inside a group.

    Returns
    -------
    dask.array.Array, shape ``(n, ...)``
        The records as float64, chunked along ``n`` only; nothing is read yet.

    Raises
    ------
    ValueError
        Nothing found, shards of different trailing shapes, non-numeric data.
    """
    import dask
    import dask.array as da

    text = str(path).rstrip("/")
    if text.lower().endswith(".zarr"):
        try:
            arr = da.from_zarr(text, component=component)
        except Exception as err:  # zarr raises several types for a bad store
            raise ValueError(f"cannot open {text} as a Zarr array: {err}") from None
        if arr.ndim < 2:
            raise ValueError(f"{text} must hold one record per row, got shape {arr.shape}")
        rows = chunk_rows or arr.chunks[0][0]
        return arr.rechunk({0: rows, **{i: -1 for i in range(1, arr.ndim)}}).astype(float)

    files = _files(text)
    parts = []
    if files[0].lower().endswith(_PARQUET):
        import pyarrow.parquet as pq

        for f in files:
            meta = pq.ParquetFile(f)
            names = list(columns) if columns is not None else meta.schema_arrow.names
            for g in range(meta.num_row_groups):
                rows = meta.metadata.row_group(g).num_rows
                load = dask.delayed(_load_parquet, pure=True)(f, g, names)
                parts.append(da.from_delayed(load, (rows, len(names)), dtype=float))
    else:
        trailing = None
        for f in files:
            if not f.lower().endswith(".npy"):
                raise ValueError(f"{f}: shards must all be .npy files")
            shape, dtype = _npy_header(f)
            if len(shape) < 2 or not (np.issubdtype(dtype, np.number) and dtype.kind != "c"):
                raise ValueError(
                    f"{f}: a shard must hold real numbers, one record per row; got shape "
                    f"{shape}, dtype {dtype}"
                )
            if trailing is None:
                trailing = shape[1:]
            elif shape[1:] != trailing:
                raise ValueError(
                    f"{f}: rows of shape {shape[1:]}, but earlier shards have {trailing}"
                )
            step = chunk_rows or max(shape[0], 1)
            for start in range(0, shape[0], step):
                stop = min(start + step, shape[0])
                load = dask.delayed(_load_npy, pure=True)(f, start, stop)
                parts.append(da.from_delayed(load, (stop - start, *trailing), dtype=float))
    if not parts:
        raise ValueError(f"the files at {text} hold no records")
    return da.concatenate(parts, axis=0) if len(parts) > 1 else parts[0]


def source_name(path) -> str:
    """The name written in a release's provenance (the folder, pattern or file name)."""
    return Path(str(path).rstrip("/")).name
