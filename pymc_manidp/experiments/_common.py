"""What the experiments share: seeds, the process pool, progress bars, tables, figures.

Reproducibility: an experiment's seed becomes a :class:`numpy.random.SeedSequence`;
every grid point and every replicate gets its own child (``SeedSequence.spawn``), so
replicate ``j`` at sample size ``n`` sees the same random numbers whatever the number
of workers, the chunking of the work or the total number of replicates.

Parallelism: replicates run in chunks on a :class:`~concurrent.futures.ProcessPoolExecutor`
(``spawn`` start method: safe with the progress bar's thread) that is created once
and reused by every experiment of a run (:func:`shutdown_pool` closes it).
"""

from __future__ import annotations

import json
import multiprocessing
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

import numpy as np

__all__ = [
    "band",
    "child_seeds",
    "figure",
    "parallel_map",
    "save_figure",
    "shutdown_pool",
    "summarize",
    "write_json",
    "write_table",
]

_POOL: ProcessPoolExecutor | None = None
_POOL_WORKERS = 0


def _pool(workers: int) -> ProcessPoolExecutor:
    global _POOL, _POOL_WORKERS
    if _POOL is None or _POOL_WORKERS != workers:
        shutdown_pool()
        _POOL = ProcessPoolExecutor(
            max_workers=workers, mp_context=multiprocessing.get_context("spawn")
        )
        _POOL_WORKERS = workers
    return _POOL


def shutdown_pool() -> None:
    """Stop the worker processes of the shared pool (no-op when none runs)."""
    global _POOL, _POOL_WORKERS
    if _POOL is not None:
        _POOL.shutdown(wait=True, cancel_futures=True)
    _POOL, _POOL_WORKERS = None, 0


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
    fn: Callable, jobs: Sequence[tuple], *, workers: int, progress: bool, description: str
) -> list:
    """``[fn(*job) for job in jobs]``, on ``workers`` processes, with a progress bar.

    ``fn`` must be a module-level function (it is pickled by name). Results come back
    in the order of ``jobs``.
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
    results: list = [None] * len(jobs)
    with Progress(*columns, disable=not progress, transient=False) as bar:
        task = bar.add_task(description, total=len(jobs))
        if workers <= 1:
            for i, job in enumerate(jobs):
                results[i] = fn(*job)
                bar.advance(task)
            return results
        pool = _pool(workers)
        futures = {pool.submit(fn, *job): i for i, job in enumerate(jobs)}
        for fut in as_completed(futures):
            results[futures[fut]] = fut.result()
            bar.advance(task)
    return results


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
    """Two workers (the papers' replicates are independent), fewer on a 1-core box."""
    return max(1, min(2, os.cpu_count() or 1))
