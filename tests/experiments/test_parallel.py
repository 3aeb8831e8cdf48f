"""Replicates on Dask: the same rows, in the same order, wherever they run.

``experiments._common.parallel_map`` hands each chunk of replicates (with its own
``SeedSequence`` children) to Dask: in this process (``workers=1``), on the local
``processes`` or ``threads`` scheduler, or on a ``distributed`` cluster (here a
``LocalCluster`` with thread workers, for speed). Every path must return exactly the
serial rows (bit-identical floats, same order) and advance the progress bar once per job.
"""

from __future__ import annotations

import threading

import pytest

from pymc_manidp.experiments import _common as C
from pymc_manidp.experiments import kng2022_fig1


def _jobs(replicates=4, seed=7):
    """``kng2022_fig1``'s jobs at two sample sizes, two replicates per job (one chunk each)."""
    jobs = []
    for s, space in enumerate(kng2022_fig1.SPACES):
        for i, n in enumerate((10, 40)):
            seeds = C.child_seeds(seed, s, i, count=replicates)
            jobs += [(space, n, 1.0, [(j, seeds[j]) for j in p]) for p in C.chunks(replicates, 2)]
    return jobs


@pytest.fixture(scope="module")
def serial():
    return C.parallel_map(
        kng2022_fig1._chunk, _jobs(), workers=1, progress=False, description="serial"
    )


@pytest.fixture(scope="module")
def local_cluster():
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None
    ) as cluster:
        yield cluster


def test_serial_rows_are_the_replicates_in_job_order(serial):
    # the oracle the other paths are compared with must itself be the plain loop
    assert serial == [kng2022_fig1._chunk(*job) for job in _jobs()]
    reps = [(r["space"], r["n"], r["rep"]) for rows in serial for r in rows[:1]]
    assert reps == [(s, n, j) for s in kng2022_fig1.SPACES for n in (10, 40) for j in (0, 2)]


# "processes" starts worker processes that import PyMC (30 s on the loaded 2-core
# machine): slow tier; None and "threads" run the same rows in the default tier
@pytest.mark.parametrize(
    "scheduler", [None, pytest.param("processes", marks=pytest.mark.slow), "threads"]
)
def test_local_scheduler_gives_the_serial_rows(serial, scheduler, capsys):
    rows = C.parallel_map(
        kng2022_fig1._chunk,
        _jobs(),
        workers=2,
        progress=True,
        description="local",
        scheduler=scheduler,
    )
    assert rows == serial
    jobs = len(_jobs())
    assert f"{jobs}/{jobs}" in capsys.readouterr().err  # the bar saw every job finish


def test_a_different_seed_changes_the_rows(serial):
    # the comparisons above can fail: other seeds give other floats
    other = C.parallel_map(
        kng2022_fig1._chunk, _jobs(seed=8), workers=1, progress=False, description="x"
    )
    assert [r["dist"] for rows in other for r in rows] != [
        r["dist"] for rows in serial for r in rows
    ]


def _where(i):
    """``(i, name of the thread)``: distributed's worker threads are not this one."""
    return i, threading.current_thread().name


def test_current_distributed_client_runs_the_jobs(local_cluster, serial, capsys):
    from distributed import Client

    with Client(local_cluster):  # made current: parallel_map finds it by get_client()
        rows = C.parallel_map(
            kng2022_fig1._chunk, _jobs(), workers=1, progress=True, description="cluster"
        )
        where = C.parallel_map(
            _where, [(i,) for i in range(6)], workers=1, progress=False, description="w"
        )
    assert rows == serial
    jobs = len(_jobs())
    assert f"{jobs}/{jobs}" in capsys.readouterr().err
    assert [i for i, _ in where] == list(range(6))
    # workers=1 would run them in this thread: they ran on the cluster's worker threads
    assert all(name != threading.current_thread().name for _, name in where)


def test_scheduler_address_runs_there(local_cluster, serial):
    rows = C.parallel_map(
        kng2022_fig1._chunk,
        _jobs(),
        workers=1,
        progress=False,
        description="address",
        scheduler=local_cluster.scheduler_address,
    )
    where = C.parallel_map(
        _where,
        [(0,)],
        workers=1,
        progress=False,
        description="w",
        scheduler=local_cluster.scheduler_address,
    )
    assert rows == serial
    assert where[0][1] != threading.current_thread().name


def test_bad_scheduler_is_a_type_error():
    with pytest.raises(TypeError, match="scheduler must be"):
        C.parallel_map(_where, [(0,)], workers=1, progress=False, description="x", scheduler=3)


def test_cli_reproduce_on_a_cluster_gives_the_in_process_table(local_cluster, tmp_path):
    """``pymc-manidp reproduce ... --scheduler ADDRESS``: run() connects once, same numbers."""
    import pandas as pd

    from pymc_manidp.cli import main

    argv = ["reproduce", "kng2022_fig1", "--quick", "--replicates", "2", "--seed", "5"]
    code = main([*argv, "--out", str(tmp_path), "--scheduler", local_cluster.scheduler_address])
    assert code == 0
    table = pd.read_csv(tmp_path / "kng2022_fig1" / "table.csv")
    here = kng2022_fig1.kng2022_fig1(quick=True, replicates=2, seed=5, workers=1)
    # through CSV: compare at the file's precision (repr of each float: exact round trip)
    pd.testing.assert_frame_equal(table, here.reset_index(drop=True), check_dtype=False)
