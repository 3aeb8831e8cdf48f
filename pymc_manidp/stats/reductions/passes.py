"""Running a pass: NumPy arrays walked in cache-sized blocks (``BLOCK_ELEMENTS``), Dask
arrays reduced chunk by chunk (``_run_pass``, each chunk's rows checked against the ``n``
it declared), the count of passes and the progress bars.

Every pass of the package runs through ``_run_pass`` of this module, looked up here at
each call (``passes._run_pass``): a benchmark or a test that wraps it sees every pass.
"""

from __future__ import annotations

import contextlib
import math
import sys

import numpy as np

from pymc_manidp._validation import check_real_data

#: floats per block of a NumPy pass (256 KiB): measured fastest on S^2 and SPD(2)
#: between 2^13 and 2^18 (docs/scaling.md)
BLOCK_ELEMENTS = 1 << 15


def n_rows(data) -> int:
    """Number of records of a NumPy or Dask array (Dask chunks must be known).

    Parameters
    ----------
    data : ndarray or dask.array.Array, shape ``(n, *point_shape)``
        The records.

    Returns
    -------
    int
        ``n``.

    Raises
    ------
    ValueError
        If the Dask array's chunk sizes are unknown.

    Examples
    --------
    >>> import numpy as np
    >>> n_rows(np.zeros((5, 3)))
    5
    """
    n = data.shape[0]
    if isinstance(n, float) and math.isnan(n):
        raise ValueError(
            "the Dask array's chunk sizes are unknown: call data.compute_chunk_sizes() "
            "(or load it with pymc_manidp.io) so that n, and so the sensitivity, is known"
        )
    return int(n)


def _rows_per_block(point_shape, m: int = 1) -> int:
    return max(1, BLOCK_ELEMENTS // (math.prod(point_shape) * max(m, 1)))


def rows_per_block(point_shape, m: int = 1) -> int:
    """Return the rows of a NumPy block when each row is worked on at ``m`` points at once.

    The passes' rule (``BLOCK_ELEMENTS`` floats of records times ``m``), for sums over
    the records computed outside this module (the median's shells): their
    temporaries, ``m`` numbers per record, then stay cache-sized however large ``n``.

    Parameters
    ----------
    point_shape : tuple of int
        Shape of one record.
    m : int
        Points (or shells) each row is combined with.

    Returns
    -------
    int
        At least 1.

    Examples
    --------
    >>> rows_per_block((3,), 4)
    2730
    """
    return _rows_per_block(point_shape, m)


def _point_chunks(data, point_shape):
    """A Dask array chunked along ``n`` only (one chunk over each point axis)."""
    if data.ndim != len(point_shape) + 1 or tuple(data.shape[1:]) != tuple(point_shape):
        raise ValueError(
            f"data must have shape (n, {', '.join(map(str, point_shape))}), got {data.shape}"
        )
    if any(len(c) > 1 for c in data.chunks[1:]):
        data = data.rechunk({i: -1 for i in range(1, data.ndim)})
    return data


def lazy_validate(M, data):
    """A Dask array of points validated chunk by chunk when a pass reads them (lazy).

    For Dask data that no check pass saw: an invalid record then raises inside the
    pass (``DataDomain.check`` names the chunk and row instead).

    Parameters
    ----------
    M : Manifold
        The manifold of the data.
    data : dask.array.Array, shape ``(n, *point_shape)``
        The records (rechunked to one chunk over each point axis if needed).

    Returns
    -------
    dask.array.Array, shape ``(n, *point_shape)``
        The same records, each chunk passed through ``M.validate`` when computed.
    """
    check_real_data(data, "data")  # a Dask masked array: refused before any read
    return _point_chunks(data, M.point_shape).map_blocks(M.validate, dtype=float)


_PROGRESS = {"on": False, "count": 0}
_PASSES = [0]  # every pass of this process, NumPy or Dask (for benchmarks and docs)


def pass_count() -> int:
    """Count the passes over data run so far in this process (each function here counts one).

    Returns
    -------
    int
        The number of passes, NumPy or Dask (for benchmarks and docs).
    """
    return _PASSES[0]


@contextlib.contextmanager
def progress(enabled: bool = True):
    """Show a progress bar (on stderr) for every Dask pass run inside the block.

    With a current ``distributed`` client the bar is ``distributed.progress``;
    otherwise Dask's local ``ProgressBar``. NumPy passes show nothing.

    Parameters
    ----------
    enabled : bool
        Show the bars (False: a block that hides them, inside an enabled one).

    Yields
    ------
    None
        Inside the block, passes are numbered from 1.
    """
    old = dict(_PROGRESS)
    _PROGRESS.update(on=bool(enabled), count=0)  # passes numbered from 1 in each block
    try:
        yield
    finally:
        _PROGRESS.update(old)


def _client():
    if "distributed" not in sys.modules:
        return None
    from distributed import get_client

    try:
        return get_client()
    except ValueError:
        return None


def _rows_checked(block, index, offset, rows, chunk_fn, *args):
    """``chunk_fn`` on a block that has the ``rows`` its chunk declared (n counted them)."""
    got = np.shape(block)[:1]
    if got != (rows,):
        raise ValueError(
            f"chunk {index} (rows {offset}:{offset + rows}) was declared with {rows} rows but "
            f"{got[0] if got else 'no'} were read: n, and with it the sensitivity, counted "
            "the declared rows, so nothing is released (the data changed after they were "
            "opened, or a loader returns other rows than it declares); a charge already "
            "made to a privacy budget stands (the release had started)"
        )
    return chunk_fn(block, index, offset, *args)


def _run_pass(data, chunk_fn, label: str, *args):
    """``[chunk_fn(block, chunk_index, row_offset, *args) for each chunk]`` computed by Dask."""
    import dask

    blocks = data.to_delayed().ravel()
    offsets = np.concatenate([[0], np.cumsum(data.chunks[0])[:-1]]).astype(int)
    fn = dask.delayed(_rows_checked, pure=True)  # each block's rows checked where it is read
    parts = [
        fn(b, i, int(off), int(rows), chunk_fn, *args)
        for i, (b, off, rows) in enumerate(zip(blocks, offsets, data.chunks[0], strict=True))
    ]
    _PROGRESS["count"] += 1
    client = _client()
    if not _PROGRESS["on"]:
        return list(dask.compute(*parts))
    print(f"pass {_PROGRESS['count']}: {label} over {len(parts)} chunks", file=sys.stderr)
    if client is not None:
        from distributed import progress as dist_progress

        futures = client.compute(parts)
        with contextlib.redirect_stdout(sys.stderr):  # stdout may carry the release
            dist_progress(futures)
            print()
        return client.gather(futures)
    from dask.diagnostics import ProgressBar

    with ProgressBar(out=sys.stderr):
        return list(dask.compute(*parts))
