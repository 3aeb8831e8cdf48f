"""What the experiments share: seeds, Dask scale-out, progress bars, tables, figures.

Reproducibility: an experiment's seed becomes a :class:`numpy.random.SeedSequence`;
every grid point and every replicate gets its own child (``SeedSequence.spawn``), so
replicate ``j`` at sample size ``n`` sees the same random numbers whatever the number
of workers, the scheduler, the chunking of the work or the total number of replicates.

Parallelism (the project's rule: scale-out runs on Dask, never a home-made process
pool): chunks of replicates are Dask tasks (:func:`parallel_map`). With a current
``distributed`` client (or ``scheduler=`` a client or its address) the cluster runs
them; otherwise Dask's local scheduler does, on :data:`LOCAL_SCHEDULER` (processes:
the replicates are loops of small NumPy calls that mostly hold the GIL, so threads do
not run them in parallel; ``docs/benchmarks/bench_experiments_scheduler.py``).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import numpy as np

from pymc_manidp._progress import _progress_enabled

__all__ = [
    "CONNECT_TIMEOUT",
    "LOCAL_SCHEDULER",
    "ClusterError",
    "band",
    "child_seeds",
    "cluster",
    "connected",
    "figure",
    "parallel_map",
    "save_figure",
    "summarize",
    "write_json",
    "write_table",
]

#: Dask's local scheduler for replicates when no ``distributed`` client is current.
#: Processes, not threads: a replicate is a loop of NumPy calls on arrays of a few
#: hundred to a few thousand floats, mostly interpreter time under the GIL. Measured
#: (``docs/benchmarks.md``): two threads used no more CPU per wall second than one
#: (0.59 against 0.50 on a shared, saturated box), so threads cannot approach 2x;
#: processes run the same code without the GIL and pay a fixed start-up (~5 s of
#: imports per worker, once per ``parallel_map``) that full runs of hours amortize.
LOCAL_SCHEDULER = "processes"

#: Names of Dask's local schedulers accepted by ``scheduler=`` (as in ``dask.compute``).
_LOCAL_NAMES = ("threads", "processes", "sync", "synchronous", "single-threaded")


@contextlib.contextmanager
def cluster(scheduler=None) -> Iterator[object | None]:
    """The ``distributed`` client to run on, or None for Dask's local scheduler.

    Parameters
    ----------
    scheduler : None, str or distributed.Client
        None: the current client (``distributed.get_client()``) if one exists; a
        ``distributed.Client``: that one; an address (``"tcp://10.0.0.5:8786"``): a
        client connected for the block and closed after it; a name of Dask's local
        schedulers (``"threads"``, ``"processes"``, ``"sync"``): None.

    Yields
    ------
    distributed.Client or None
    """
    if scheduler is None:
        yield _current_client()
    elif isinstance(scheduler, str) and scheduler in _LOCAL_NAMES:
        yield None
    elif isinstance(scheduler, str):
        with connected(scheduler) as client:
            yield client
    elif hasattr(scheduler, "submit") and hasattr(scheduler, "gather"):
        yield scheduler
    else:
        raise TypeError(
            "scheduler must be None, a distributed.Client, a scheduler address or one of "
            f"{', '.join(_LOCAL_NAMES)}; got {type(scheduler).__name__}"
        )


#: Seconds to wait for a scheduler's handshake (and for a lost one to come back).
CONNECT_TIMEOUT = 10.0

#: A Dask handshake is a few hundred bytes; a first "length" above this is not one
#: (an HTTP reply read as a length asked for 3 EiB).
_MAX_HANDSHAKE = 1 << 16


class ClusterError(ConnectionError):
    """The Dask scheduler cannot be reached, is not a Dask scheduler, or was lost."""


def _recv(sock, size: int, deadline: float, address: str) -> bytes:
    """Exactly ``size`` bytes from ``sock`` before ``deadline`` (``time.monotonic``)."""
    data = b""
    while len(data) < size:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError
        sock.settimeout(left)
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ClusterError(
                f"{address} is not a Dask scheduler: it closed the connection without a handshake"
            )
        data += chunk
    return data


def _check_handshake(address: str, timeout: float) -> None:
    """Refuse a ``tcp://`` address whose server does not greet like a Dask scheduler.

    A scheduler sends its handshake (a length-prefixed msgpack frame naming the
    pickle protocol and compression) as soon as a connection opens. A silent listener
    or a web server sends nothing (``distributed`` would then wait forever) or bytes
    that ``distributed`` reads as an absurd frame length. Other protocols (``tls://``
    ...) are left to ``distributed``'s own timeout.
    """
    scheme, _, rest = address.rpartition("://")
    if scheme not in ("", "tcp"):
        return
    host, _, port = rest.rpartition(":")
    try:
        sock = socket.create_connection((host.strip("[]"), int(port)), timeout=timeout)
    except (OSError, ValueError) as err:
        raise ClusterError(f"cannot reach the Dask scheduler at {address}: {err}") from None
    not_dask = f"{address} is not a Dask scheduler"
    with sock:
        deadline = time.monotonic() + timeout
        try:
            head = _recv(sock, 8, deadline, address)
            size = int.from_bytes(head, "little")
            if not 0 < size <= _MAX_HANDSHAKE:
                raise ClusterError(f"{not_dask}: it answered {head!r}, not a Dask handshake")
            body = _recv(sock, size, deadline, address)
        except TimeoutError:
            raise ClusterError(
                f"{not_dask}: no handshake within {timeout:g} s (a web server or the "
                "dashboard's port? the scheduler's is usually 8786)"
            ) from None
        except OSError as err:
            if isinstance(err, ClusterError):
                raise
            raise ClusterError(f"{address}: {err}") from None
    if b"pickle-protocol" not in body:
        raise ClusterError(f"{not_dask}: its first message is not a Dask handshake")


def _lost(client, err) -> bool:
    from concurrent.futures import CancelledError

    from distributed.comm import CommClosedError

    return client.status not in ("running", "connecting") or isinstance(
        err, CancelledError | CommClosedError | TimeoutError
    )


@contextlib.contextmanager
def connected(address: str, *, timeout: float = CONNECT_TIMEOUT, quiet: bool = False):
    """A ``distributed.Client`` of the scheduler at ``address``, closed after the block.

    The address is checked first (:func:`_check_handshake`): a server that is not a
    Dask scheduler is refused within ``timeout`` seconds instead of hanging. A cluster
    lost during the block (the scheduler killed, the network gone) becomes one
    :class:`ClusterError`; other errors pass unchanged.

    Parameters
    ----------
    address : str
        ``"tcp://host:port"`` (or ``"host:port"``), or another ``distributed`` address.
    timeout : float
        Seconds to wait for the handshake, the connection, and a lost scheduler.
    quiet : bool
        Silence ``distributed``'s log lines in the block (the command line prints one
        error line instead).

    Yields
    ------
    distributed.Client

    Raises
    ------
    ClusterError
        A ``ConnectionError``: unreachable, not a Dask scheduler, or lost.
    """
    _check_handshake(address, timeout)
    from distributed import Client

    logger = logging.getLogger("distributed")
    level = logger.level
    if quiet:
        logger.setLevel(logging.CRITICAL + 1)
    try:
        try:
            client = Client(address, timeout=timeout)
        except (OSError, TimeoutError, ValueError) as err:
            raise ClusterError(
                f"cannot connect to the Dask scheduler at {address}: {err}"
            ) from None
        with client:
            try:
                yield client
            except Exception as err:
                if not _lost(client, err):
                    raise
                raise ClusterError(
                    f"lost the Dask cluster at {address} ({type(err).__name__}): nothing "
                    "was released"
                ) from None
    finally:
        logger.setLevel(level)


def _current_client():
    # Only when distributed was imported: a user who made a client has imported it, and
    # importing it here would cost a second for nothing.
    if "distributed" not in sys.modules:
        return None
    from distributed import get_client

    try:
        return get_client()
    except ValueError:  # no client made current
        return None


def child_seeds(seed: int, *path: int, count: int) -> list[np.random.SeedSequence]:
    """``count`` independent children of the node ``path`` below ``SeedSequence(seed)``.

    ``path`` walks down the spawn tree (``root.spawn(i+1)[i]`` at each level), so the
    children of one node never depend on how many siblings another node has.

    Examples
    --------
    >>> a = child_seeds(1, 2, count=3)[1].generate_state(1)
    >>> b = child_seeds(1, 2, count=10)[1].generate_state(1)
    >>> bool((a == b).all())
    True
    """
    node = np.random.SeedSequence(int(seed))
    for i in path:
        node = node.spawn(i + 1)[i]
    return node.spawn(count)


def parallel_map(
    fn: Callable,
    jobs: Sequence[tuple],
    *,
    workers: int,
    progress: bool,
    description: str,
    scheduler=None,
) -> list:
    """``[fn(*job) for job in jobs]`` as Dask tasks, with a progress bar.

    Parameters
    ----------
    fn : callable
        A module-level function (worker processes import it by name).
    jobs : sequence of tuple
        The arguments of each call; every job carries its own seeds, so where it runs
        does not change its result.
    workers : int
        Workers of Dask's local scheduler; 1 runs the jobs in this process, in order.
        Ignored on a ``distributed`` cluster (its workers are the user's choice).
    progress : bool or None
        Show a rich progress bar on stderr, advanced as each job finishes; ``None``:
        only when stderr is a terminal and ``$CI`` is unset.
    description : str
        The bar's label.
    scheduler : None, str or distributed.Client
        Where to run (:func:`cluster`): None uses the current ``distributed`` client if
        there is one, else Dask's local :data:`LOCAL_SCHEDULER`.

    Returns
    -------
    list
        The results in the order of ``jobs``.
    """
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
    )
    from rich.console import Console

    # the bar on stderr, as run() documents: stdout carries what the command prints
    with (
        cluster(scheduler) as client,
        Progress(
            *columns,
            console=Console(stderr=True),
            disable=not _progress_enabled(progress),
            transient=False,
        ) as bar,
    ):
        task = bar.add_task(description, total=len(jobs))
        if client is not None:
            return _on_cluster(client, fn, jobs, lambda: bar.advance(task))
        local = scheduler if isinstance(scheduler, str) else LOCAL_SCHEDULER
        if workers <= 1 or local in ("sync", "synchronous", "single-threaded"):
            results = []
            for job in jobs:
                results.append(fn(*job))
                bar.advance(task)
            return results
        return _on_local(local, workers, fn, jobs, lambda: bar.advance(task))


def _on_cluster(client, fn, jobs, advance) -> list:
    """Submit every job to a ``distributed`` client; gather in job order."""
    from distributed import as_completed

    # pure=False: two jobs with equal arguments are still two replicates' tasks
    futures = [client.submit(fn, *job, pure=False) for job in jobs]
    for _ in as_completed(futures):
        advance()
    return client.gather(futures)


def _on_local(local: str, workers: int, fn, jobs, advance) -> list:
    """Run the jobs as delayed tasks on Dask's local ``threads`` or ``processes``."""
    import dask
    from dask.callbacks import Callback

    parts = [dask.delayed(fn, pure=False)(*job) for job in jobs]
    keys = {p.key for p in parts}

    class _Advance(Callback):
        # Dask calls _posttask in this process (the scheduler's loop) whatever the pool
        def _posttask(self, key, result, dsk, state, worker_id):
            if key in keys:
                advance()

    # chunksize=1: one job per message, so the bar moves as each job ends (jobs are
    # seconds long; batching saves nothing)
    with _Advance():
        return list(dask.compute(*parts, scheduler=local, num_workers=int(workers), chunksize=1))


def replicate_data(jobs, gen, M, n: int, space: str):
    """For each ``(rep, seed)`` job: ``(rng, x, fm, base)``, one replicate's data.

    ``rng`` the replicate's generator (seeded by the job), ``x`` its ``n`` records from
    ``gen(n, rng)``, ``fm`` their Fréchet mean on ``M`` (tolerance ``1e-12``) and
    ``base`` the keys of its result rows (``space``, ``n``, ``rep``).
    """
    from pymc_manidp.stats.frechet import frechet_mean

    for rep, ss in jobs:
        rng = np.random.default_rng(ss)
        x = gen(n, rng)
        yield rng, x, frechet_mean(M, x, tol=1e-12).mean, {"space": space, "n": n, "rep": rep}


def chunks(count: int, size: int) -> list[range]:
    """Split ``range(count)`` into consecutive ranges of at most ``size``."""
    return [range(i, min(i + size, count)) for i in range(0, count, size)]


def summarize(rows: list[dict], by: Sequence[str], value: str):
    """Mean, SD, standard error and count of ``value`` per group: a DataFrame."""
    import pandas as pd

    df = pd.DataFrame(rows)
    g = df.groupby(list(by), sort=False)[value]
    out = g.agg(mean="mean", sd="std", count="count").reset_index()
    out["se"] = out["sd"] / np.sqrt(out["count"])
    return out


def write_table(df, out: Path | None, name: str) -> None:
    """Write a DataFrame as ``name.csv`` in ``out`` (when ``out`` is given)."""
    if out is not None:
        df.to_csv(out / f"{name}.csv", index=False)


def _jsonable(x):
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_jsonable(v) for v in x]
    if isinstance(x, np.ndarray):
        return _jsonable(x.tolist())
    if isinstance(x, np.generic):
        return x.item()
    if isinstance(x, float) and not np.isfinite(x):
        return None
    return x


def write_json(obj: dict, out: Path | None, name: str) -> None:
    """Write ``obj`` as ``name.json`` in ``out`` (when ``out`` is given)."""
    if out is not None:
        (out / f"{name}.json").write_text(json.dumps(_jsonable(obj), indent=2) + "\n")


def prepare_out(out, name: str) -> Path | None:
    """The experiment's output folder ``out/name`` (created), or None."""
    if out is None:
        return None
    path = Path(out) / name
    path.mkdir(parents=True, exist_ok=True)
    return path


def figure(nrows: int, ncols: int, *, width: float = 4.6, height: float = 3.6):
    """A matplotlib Figure (object API: no global pyplot state) and its axes grid."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width * ncols, height * nrows), layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False)
    return fig, axes


def save_figure(fig, out: Path | None, name: str) -> None:
    """Save ``fig`` as ``name.png`` in ``out`` (when given); 110 dpi keeps committed files small."""
    if out is not None:
        fig.savefig(out / f"{name}.png", dpi=110)


def band(ax, x, mean, se, *, label, color=None, linestyle="-", marker="o"):
    """Plot ``mean`` against ``x`` with a shaded ``mean ± 2 SE`` band."""
    x, mean, se = (np.asarray(a, float) for a in (x, mean, se))
    (line,) = ax.plot(x, mean, linestyle=linestyle, marker=marker, ms=3.5, color=color, label=label)
    ax.fill_between(x, mean - 2 * se, mean + 2 * se, color=line.get_color(), alpha=0.22, lw=0)
    return line


def default_workers() -> int:
    """Two workers of Dask's local scheduler (replicates are independent), one on a 1-core box."""
    return max(1, min(2, os.cpu_count() or 1))
