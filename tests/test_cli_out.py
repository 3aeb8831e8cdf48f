"""``release --out``: a regular file or a new path, refused before the charge otherwise
(issue 43, item 9).

The record is written to a temporary file and renamed over ``--out``, which replaces
whatever had that name: a FIFO or a device became a plain file, and a ledger's lock got a
new inode (two writers then lock two files). Every odd target is refused before the
ledger is charged and before the data are read; a release whose output cannot be
written after the charge exits 4 and says that the ledger keeps its record. Only FIFOs,
links and files made in a temporary folder are used, never a real device.
"""

from __future__ import annotations

import errno
import json
import os
import shlex
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from pymc_manidp.cli import EXIT_OUTPUT_LOST, main
from pymc_manidp.cli import commands as cli_commands  # release() looks its helpers up here
from tests.test_cli_budget import DATA, run  # the CLI run that asserts no traceback


def release(data, ledger, out):
    return [
        "release",
        data,
        "--manifold",
        "sphere",
        "--epsilon",
        "0.1",
        "--center",
        "0,0,1",
        "--radius",
        "0.7",
        "--budget",
        ledger,
        "--budget-epsilon",
        "10",
        "--out",
        out,
    ]


def _fingerprint(path: Path):
    """What a refusal must leave as it was: the kind, inode and content of ``path``."""
    try:
        st_ = os.lstat(path)
    except FileNotFoundError:
        return None
    content = path.read_bytes() if stat.S_ISREG(st_.st_mode) else None
    return stat.S_IFMT(st_.st_mode), st_.st_ino, content


def _make(kind: str, folder: Path, data: Path, ledger: Path) -> str:
    """An ``--out`` target of ``kind`` in ``folder`` (FIFOs, links and files only)."""
    target = folder / "target.json"
    if kind == "new":
        pass
    elif kind == "existing file":
        target.write_text("old")
    elif kind == "empty file":
        target.write_bytes(b"")
    elif kind == "folder":
        target.mkdir()
    elif kind == "folder/":
        target.mkdir()
        return str(target) + "/"
    elif kind == "fifo":
        os.mkfifo(target)
    elif kind == "symlink to fifo":
        os.mkfifo(folder / "pipe")
        target.symlink_to(folder / "pipe")
    elif kind == "symlink to file":
        (folder / "real.json").write_text("old")
        target.symlink_to(folder / "real.json")
    elif kind == "dangling symlink":
        target.symlink_to(folder / "nowhere.json")
    elif kind == "the ledger":
        return str(ledger)
    elif kind == "the ledger's lock":
        return str(ledger) + ".lock"
    elif kind == "hard link to the lock":
        os.link(str(ledger) + ".lock", target)
    elif kind == "another ledger":
        target.write_text(ledger.read_text())
    elif kind == "another ledger's lock":
        (folder / "other.json").write_text(ledger.read_text())
        (folder / "other.json.lock").write_bytes(b"")
        return str(folder / "other.json.lock")
    elif kind == "the data":
        return str(data)
    elif kind == "missing folder":
        return str(folder / "missing" / "r.json")
    elif kind == "under a file":
        target.write_text("old")
        return str(target / "r.json")
    return str(target)


KINDS = [
    "new",
    "existing file",
    "empty file",
    "folder",
    "folder/",
    "fifo",
    "symlink to fifo",
    "symlink to file",
    "dangling symlink",
    "the ledger",
    "the ledger's lock",
    "hard link to the lock",
    "another ledger",
    "another ledger's lock",
    "the data",
    "missing folder",
    "under a file",
]
WRITABLE = {"new", "existing file", "empty file"}


# capsys is drained by every run(): sharing it across examples is safe
@settings(
    max_examples=len(KINDS) * 2,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(kind=st.sampled_from(KINDS), relative=st.booleans())
def test_an_odd_out_is_refused_before_the_charge(kind, relative, capsys):
    """Each target either refused with one line, nothing charged or replaced, or
    written as a regular file holding the release the ledger recorded."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        data = folder / "points.npy"
        np.save(data, DATA)
        ledger = folder / "ledger.json"
        assert run(release(data, ledger, folder / "first.json"), capsys)[0] == 0
        out = _make(kind, folder, data, ledger)
        if relative:  # the same target by a relative name
            out = os.path.relpath(out, os.getcwd()) + ("/" if out.endswith("/") else "")
        watched = [ledger, Path(str(ledger) + ".lock"), folder / "target.json", folder / "pipe"]
        watched += [folder / "real.json", folder / "other.json", folder / "other.json.lock"]
        before = {p: _fingerprint(p) for p in watched}
        code, stdout, err = run(release(data, ledger, out), capsys)
        entries = json.loads(ledger.read_text())["entries"]
        if kind in WRITABLE:
            assert code == 0, err
            record = json.loads(Path(out).read_text())
            assert stat.S_ISREG(os.lstat(out).st_mode)
            assert len(entries) == 2 and entries[1]["release"] == record["release"]
            return
        assert code == 2 and stdout == "", (kind, err)
        assert err.count("\n") == 1 and "--out" in err, err
        # nothing charged, nothing replaced: every watched path as it was
        assert len(entries) == 1
        assert {p: _fingerprint(p) for p in watched} == before, kind
        assert not list(folder.glob(".*.tmp"))


for _kind in KINDS:  # every kind at least once, whatever hypothesis draws
    test_an_odd_out_is_refused_before_the_charge = example(kind=_kind, relative=False)(
        test_an_odd_out_is_refused_before_the_charge
    )


def test_the_messages_name_what_the_target_is(tmp_path, capsys):
    data = tmp_path / "points.npy"
    np.save(data, DATA)
    ledger = tmp_path / "ledger.json"
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "link").symlink_to(tmp_path / "fifo")
    for out, msg in (
        (tmp_path / "fifo", "is a FIFO, not a regular file"),
        (tmp_path / "link", "is a symbolic link"),
        (str(ledger) + ".lock", "is the ledger's lock of --budget"),
    ):
        code, _, err = run(release(data, ledger, out), capsys)
        assert code == 2 and msg in err, err
    assert not ledger.exists()  # refused before the ledger was even created


def test_a_write_that_fails_after_the_charge_says_the_ledger_keeps_it(
    tmp_path, capsys, monkeypatch
):
    data = tmp_path / "points.npy"
    np.save(data, DATA)
    ledger = tmp_path / "ledger.json"

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(cli_commands, "_write_atomic", full)
    code, _, err = run(release(data, ledger, tmp_path / "r.json"), capsys)
    assert code == EXIT_OUTPUT_LOST and err.count("\n") == 1
    assert "the release was made and charged" in err and "No space left" in err
    assert f"kept in the ledger: pymc-manidp budget {ledger} --json" in err
    (entry,) = json.loads(ledger.read_text())["entries"]
    assert entry["status"] == "released" and entry["release"]["value"] is not None

    class FullStdout:
        def write(self, text):
            raise OSError(errno.ENOSPC, "No space left on device")

        def flush(self):
            pass

    monkeypatch.setattr(sys, "stdout", FullStdout())
    code = main([str(a) for a in release(data, ledger, "-")])
    err = capsys.readouterr().err
    assert code == EXIT_OUTPUT_LOST and "writing it to standard output failed" in err
    assert len(json.loads(ledger.read_text())["entries"]) == 2


def _cli_with_stdout_closed(args):
    """Run ``pymc-manidp ARGS`` with its standard output closed by a real shell (``>&-``),
    on this checkout's package whatever is installed."""
    argv = [sys.executable, "-m", "pymc_manidp.cli", *args]
    return subprocess.run(
        ["bash", "-c", f"{shlex.join(argv)} >&-"],
        stdin=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        timeout=600,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])},
    )


def test_a_closed_stdout_is_refused_before_the_charge(tmp_path):
    """``release --out - --budget L >&-`` printed the release nowhere and exited 0,
    charged; now exit 2 before the charge (a real shell closes the descriptor)."""
    data = tmp_path / "points.npy"
    np.save(data, DATA)
    ledger = tmp_path / "ledger.json"
    proc = _cli_with_stdout_closed([str(a) for a in release(data, ledger, "-")])
    assert proc.returncode == 2, proc.stderr
    assert "standard output is closed" in proc.stderr and "Traceback" not in proc.stderr
    assert proc.stderr.strip().count("\n") == 0
    assert not ledger.exists()  # refused before the ledger was created or charged


@pytest.mark.parametrize("name", ["x.lock", "ledger.json.lock"])
def test_a_lock_named_file_without_a_ledger_beside_it_is_an_ordinary_output(tmp_path, capsys, name):
    data = tmp_path / "points.npy"
    np.save(data, DATA)
    (tmp_path / name).write_text("old")
    argv = [a for a in release(data, tmp_path / "l.json", tmp_path / name)]
    argv = argv[: argv.index("--budget")] + argv[argv.index("--out") :]
    code, _, err = run(argv, capsys)
    assert code == 0, err
    assert json.loads((tmp_path / name).read_text())["release"]["epsilon"] == 0.1


def test_a_target_made_a_fifo_after_the_check_is_not_replaced(tmp_path, capsys, monkeypatch):
    data = tmp_path / "points.npy"
    np.save(data, DATA)
    ledger = tmp_path / "ledger.json"
    check = cli_commands._check_out

    def check_then_swap(args):
        out = check(args)
        os.mkfifo(out)  # a new path when checked, a FIFO when written
        return out

    monkeypatch.setattr(cli_commands, "_check_out", check_then_swap)
    code, _, err = run(release(data, ledger, tmp_path / "r.json"), capsys)
    assert code == EXIT_OUTPUT_LOST and "no longer a regular file" in err, err
    assert stat.S_ISFIFO(os.lstat(tmp_path / "r.json").st_mode)
    assert not list(tmp_path.glob(".*.tmp"))
    assert json.loads(ledger.read_text())["entries"][0]["status"] == "released"


def test_the_out_record_is_read_back_by_release_from_json(tmp_path, capsys):
    """``--out`` and ``Release.to_json`` write one sealed format (issue 38, item 7): the
    CLI's record loads as the public release, exactly, and a changed byte is refused."""
    import pymc_manidp as pmd
    from pymc_manidp.privacy import ReleaseFileError

    data = tmp_path / "d.npy"
    np.save(data, DATA)
    out = tmp_path / "r.json"
    code, _, err = run(release(data, tmp_path / "ledger.json", out), capsys)
    assert code == 0, err
    doc = json.loads(out.read_text())
    back = pmd.Release.from_json(out)
    assert back.value.tolist() == doc["release"]["value"] and back.n == 3
    assert back.epsilon == 0.1 and back.sampler_info is None
    text = out.read_text()
    out.write_text(text.replace('"n": 3', '"n": 4'))
    with pytest.raises(ReleaseFileError, match="checksum does not match"):
        pmd.Release.from_json(out)


@pytest.mark.parametrize("where", ["out", "budget"])
def test_a_loop_of_links_as_out_or_ledger_is_one_line(where, tmp_path, capsys):
    # pathlib's resolve() raises RuntimeError on a loop: it was reported as an internal
    # error (exit 3) instead of a refusal of the path
    data = tmp_path / "d.npy"
    np.save(data, DATA)
    (tmp_path / "loop1").symlink_to("loop2")
    (tmp_path / "loop2").symlink_to("loop1")
    loop = tmp_path / "loop1"
    argv = release(data, loop if where == "budget" else tmp_path / "l.json", tmp_path / "o.json")
    if where == "out":
        argv[-1] = str(loop)
    code, _, err = run(argv, capsys)
    assert code == 2 and "internal error" not in err, err
    assert "symbolic links" in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d.npy", "loop1", "loop2"]


def test_a_file_that_is_not_a_ledger_gets_no_lock_beside_it(tmp_path, capsys):
    # issue 43 item 2: a lock file is made only beside a ledger (or a new one)
    data = tmp_path / "d.npy"
    np.save(data, DATA)
    (tmp_path / "c.csv").write_text("0,0,1\n")
    for other in (data, tmp_path / "c.csv"):
        code, _, err = run(release(data, other, tmp_path / "o.json"), capsys)
        assert code == 2 and "is not a ledger" in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.csv", "d.npy"]


def test_budget_with_a_closed_stdout_fails_loudly(tmp_path, capsys):
    """``budget L --json >&-`` printed the ledger nowhere and exited 0 (found replaying
    issue 43): a command whose only output is lost is not a success."""
    data = tmp_path / "points.npy"
    np.save(data, DATA)
    ledger = tmp_path / "ledger.json"
    code, _, err = run([str(a) for a in release(data, ledger, tmp_path / "r.json")], capsys)
    assert code == 0, err
    before = ledger.read_bytes()
    proc = _cli_with_stdout_closed(["budget", str(ledger), "--json"])
    assert proc.returncode == 2, proc.stderr
    assert "standard output is closed" in proc.stderr and "Traceback" not in proc.stderr
    assert ledger.read_bytes() == before  # a read: the ledger is untouched
