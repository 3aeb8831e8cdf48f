"""A pytest plugin: the CPU seconds of each test and of collection, for ranking tests.

The 2-core machine is shared, so wall times swing five- to tenfold with the load; the
CPU time a test costs (user + system, of the process and of the child processes it
waited for, from ``resource.getrusage``) is what the two xdist workers of
``bash .ci/run test`` have to share, and moves little with the load. Threads count
(nutpie's chains run in threads); a child process that is still alive when the test
ends (a Dask worker kept for the module) is charged when it is reaped.

Run (one process, no xdist, so each test is charged alone)::

    PYTHONPATH=$PWD:docs/benchmarks CPU_PER_TEST=cpu.tsv .venv/bin/python -m pytest \
        -p no:xdist -p cpu_per_test -m "not slow" tests/...
    sort -rn cpu.tsv | head -40

Writes ``CPU-s <tab> wall-s <tab> test id`` a line (``<collection>`` for collecting,
which includes importing every test module); ``CPU_PER_MODULE=file`` also writes each
test module's import cost.
"""

import os
import resource
import time

import pytest

_tests = []
_modules = []


def _cpu():
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_collection(session):
    cpu, wall = _cpu(), time.time()
    yield
    _tests.append(("<collection>", _cpu() - cpu, time.time() - wall))


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    cpu = _cpu()
    yield
    if isinstance(collector, pytest.Module):
        _modules.append((collector.nodeid, _cpu() - cpu))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    cpu, wall = _cpu(), time.time()
    yield  # setup, call and teardown: a module fixture is charged to its first test
    _tests.append((item.nodeid, _cpu() - cpu, time.time() - wall))


def pytest_unconfigure(config):
    path = os.environ.get("CPU_PER_TEST", "cpu_per_test.tsv")
    with open(path, "w") as f:
        f.writelines(f"{cpu:.2f}\t{wall:.2f}\t{nodeid}\n" for nodeid, cpu, wall in _tests)
    path = os.environ.get("CPU_PER_MODULE")
    if path:
        with open(path, "w") as f:
            rows = sorted(_modules, key=lambda row: -row[1])
            f.writelines(f"{cpu:.2f}\t{nodeid}\n" for nodeid, cpu in rows)
