"""Issue 25, item 14: ``--scheduler`` at something that is not a Dask scheduler, or a
cluster lost mid-release, is one clean error line within a bounded time; nothing is
released. Every server here listens on 127.0.0.1 only and every wait is bounded."""

from __future__ import annotations

import contextlib
import http.server
import socket
import threading

import numpy as np
import pytest

from pymc_manidp.datasets import generators
from pymc_manidp.experiments._common import ClusterError, connected
from tests.test_cli import release_args, run

distributed = pytest.importorskip("distributed")

NORTH = np.array([0.0, 0.0, 1.0])


@contextlib.contextmanager
def silent_listener():
    """Accepts connections (the kernel's backlog) and never says a word."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(8)
        yield f"tcp://127.0.0.1:{sock.getsockname()[1]}"


@contextlib.contextmanager
def eager_http_400():
    """Sends an HTTP 400 reply as soon as a connection opens (read as a frame length,
    these bytes asked ``distributed`` for 3 EiB)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    sock.settimeout(0.2)
    stop = threading.Event()

    def serve():
        for _ in range(3000):  # bounded: at most 3000 x 0.2 s
            if stop.is_set():
                return
            try:
                conn, _ = sock.accept()
            except TimeoutError:
                continue
            with conn:
                conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"tcp://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        stop.set()
        thread.join(timeout=5)
        sock.close()


@contextlib.contextmanager
def http_server_replying_400():
    """A tiny HTTP server: 400 to every request (it waits for one first)."""

    class Handler(http.server.BaseHTTPRequestHandler):
        timeout = 5  # bounded: a silent client is dropped after 5 s

        def do_GET(self):
            self.send_error(400)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1})
    thread.daemon = True
    thread.start()
    try:
        yield f"tcp://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


@pytest.mark.parametrize("server", [silent_listener, eager_http_400, http_server_replying_400])
def test_a_server_that_is_not_a_scheduler_is_refused_within_the_timeout(server):
    with server() as address, pytest.raises(ClusterError, match="is not a Dask scheduler"):
        with connected(address, timeout=1.0):
            pytest.fail("connected to something that is not a Dask scheduler")


def test_an_address_nobody_listens_on_is_refused():
    with socket.socket() as sock:  # a port just freed: nothing listens there
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(ClusterError, match="cannot reach"):
        with connected(f"tcp://127.0.0.1:{port}", timeout=1.0):
            pass


@pytest.fixture
def shards(tmp_path):
    folder = tmp_path / "shards"
    folder.mkdir()
    pts = generators.sphere_cap(200, radius=0.3, center=NORTH, random_seed=4)
    for i, part in enumerate(np.array_split(pts, 4)):
        np.save(folder / f"part-{i}.npy", part)
    return folder


def _in_thread(fn, limit=120):
    """``fn()`` in a thread joined with a time limit: a hang fails the test instead."""
    box = {}
    thread = threading.Thread(target=lambda: box.setdefault("value", fn()), daemon=True)
    thread.start()
    thread.join(timeout=limit)
    if thread.is_alive():
        pytest.fail(f"still running after {limit} s: the connection hangs")
    return box["value"]


@pytest.mark.parametrize("server", [silent_listener, http_server_replying_400])
def test_cli_scheduler_that_is_not_dask_is_one_line_exit_2(server, shards, capsys):
    with server() as address:
        code, out, err = _in_thread(
            lambda: run(release_args(shards, "--scheduler", address), capsys)
        )
    assert code == 2 and out == "", err
    assert err.strip().splitlines() == [err.strip()] and "is not a Dask scheduler" in err


# slow tier: a loopback cluster with a worker process (30 s on the loaded 2-core
# machine); the dead-port and not-a-scheduler refusals stay in the default tier
@pytest.mark.slow
def test_a_cluster_lost_mid_release_is_one_line_and_nothing_released(
    shards, capsys, monkeypatch, tmp_path
):
    from pymc_manidp.stats import reductions

    cluster = distributed.LocalCluster(
        n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None,
        protocol="tcp", host="127.0.0.1",
    )  # fmt: skip
    progress = reductions.progress

    @contextlib.contextmanager
    def lose_the_cluster(*args, **kwargs):  # connected, then the cluster dies
        cluster.close(timeout=10)
        with progress(*args, **kwargs) as bar:
            yield bar

    monkeypatch.setattr(reductions, "progress", lose_the_cluster)
    out_file = tmp_path / "release.json"
    argv = release_args(shards, "--scheduler", cluster.scheduler_address, out=str(out_file))
    code, out, err = _in_thread(lambda: run(argv, capsys))
    assert code == 2 and out == "" and not out_file.exists(), err
    errors = [line for line in err.splitlines() if "error" in line.lower()]
    assert len(errors) == 1 and "lost the Dask cluster" in errors[0], err
    assert "nothing was released" in errors[0]
