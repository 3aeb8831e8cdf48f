"""The ledger file (issue 27): atomic writes that survive a kill mid-write, a lock that
keeps two processes from overspending, the data set's fingerprint, tampering refused."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from pymc_manidp.io.ledger import data_fingerprint, open_ledger, read_ledger
from pymc_manidp.privacy.budget import BudgetExceededError, LedgerError

REPO = Path(__file__).resolve().parents[2]
DATA = np.array([[0, 0, 1.0], [0, 0.6, 0.8], [0.6, 0, 0.8]])


def python(code: str, *args, **kwargs) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code), *map(str, args)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kwargs,
    )


def test_a_ledger_is_created_extended_and_reopened(tmp_path):
    path = tmp_path / "ledger.json"
    b = open_ledger(path, data=DATA, epsilon=1.0, name="cities")
    b.charge(0.3, mechanism="KNG")
    again = open_ledger(path, data=DATA[::-1])  # the same records in another order
    again.charge(0.3, mechanism="KNG")
    view = read_ledger(path)
    assert view.spent.epsilon == 0.6 and len(view.entries) == 2
    assert view.public()["dataset"] == "cities"
    text = json.dumps(view.public())
    state = json.loads(path.read_text())
    assert path.stat().st_mode & 0o777 == 0o600  # the curator's file, like the data
    # the keyed fingerprint and its key stay in the curator's file
    assert state["dataset"]["fingerprint"] not in text and state["dataset"]["key"] not in text
    with pytest.raises(LedgerError, match="opened to read"):
        view.charge(0.1)
    with pytest.raises(LedgerError, match="a budget is fixed when its ledger is created"):
        open_ledger(path, data=DATA, epsilon=2.0)
    with pytest.raises(ValueError, match="to create it, give the budget"):
        open_ledger(tmp_path / "other.json", data=DATA)


def test_another_data_set_is_refused(tmp_path):
    path = tmp_path / "ledger.json"
    open_ledger(path, data=DATA, epsilon=1.0, name="cities")
    changed = DATA.copy()
    changed[1] = [0, 0.8, 0.6]  # one record replaced
    with pytest.raises(LedgerError, match=r"ledger of another data set.*'cities'"):
        open_ledger(path, data=changed)
    with pytest.raises(LedgerError, match="another data set"):
        open_ledger(path, data=DATA[:2])  # one record fewer


def test_the_fingerprint_is_keyed():
    k1, k2 = bytes(range(32)), bytes(range(1, 33))
    assert data_fingerprint(DATA, k1) == data_fingerprint(DATA[[2, 0, 1]], k1)
    assert data_fingerprint(DATA, k1) != data_fingerprint(DATA, k2)
    # the row hashes are combined, not concatenated: a different record changes it
    other = DATA.copy()
    other[0, 2] = np.nextafter(1.0, 0)
    assert data_fingerprint(other, k1) != data_fingerprint(DATA, k1)


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda s: s["entries"][0].update(epsilon=0.01), "checksum does not match"),
        (lambda s: s["entries"].pop(), "checksum does not match"),
        (lambda s: s["budget"].update(epsilon=100.0), "checksum does not match"),
    ],
)
def test_a_tampered_ledger_is_refused(tmp_path, edit, message):
    path = tmp_path / "ledger.json"
    b = open_ledger(path, data=DATA, epsilon=1.0)
    b.charge(0.5)
    b.charge(0.25)
    state = json.loads(path.read_text())
    edit(state)
    path.write_text(json.dumps(state))
    with pytest.raises(LedgerError, match=message):
        read_ledger(path)
    with pytest.raises(LedgerError, match=message):
        open_ledger(path, data=DATA)
    path.write_text(path.read_text()[:100])  # truncated
    with pytest.raises(LedgerError, match="not JSON"):
        read_ledger(path)


CRASH = """
import sys, time
import numpy as np
from pymc_manidp.io import ledger

def half_then_hang(f, text):
    f.write(text[: len(text) // 2])
    f.flush()
    print("HALF", flush=True)
    time.sleep(120)

b = ledger.open_ledger(sys.argv[1], data=np.eye(3), epsilon=1.0)
b.charge(0.25)
ledger._write_text = half_then_hang
b.charge(0.5)
"""


def test_the_ledger_survives_a_kill_mid_write(tmp_path):
    path = tmp_path / "ledger.json"
    proc = python(CRASH, path)
    try:
        assert proc.stdout.readline().strip() == "HALF", proc.stderr.read()
        # the second charge is half written to the temporary file: kill it there
        leftovers = list(tmp_path.glob(".ledger.json.*.tmp"))
        assert leftovers and 0 < leftovers[0].stat().st_size
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.kill()
        proc.communicate()
    assert proc.returncode == -signal.SIGKILL
    b = read_ledger(path)  # loads, checksum and totals consistent: the first charge only
    assert b.spent.epsilon == 0.25 and len(b.entries) == 1
    # and the lock died with the process: the ledger can be charged again
    open_ledger(path, data=np.eye(3)).charge(0.75)
    assert read_ledger(path).remaining == (0.0, 0.0)


RACER = """
import sys, time
from pathlib import Path
import numpy as np
from pymc_manidp.io.ledger import open_ledger
from pymc_manidp.privacy.budget import BudgetExceededError

b = open_ledger(sys.argv[1], data=np.eye(3))
go = Path(sys.argv[2])
while not go.exists():
    time.sleep(0.001)
won = 0
for _ in range(15):
    try:
        b.charge(0.1, mechanism=sys.argv[3])
        won += 1
    except BudgetExceededError:
        pass
print(won)
"""


def test_two_processes_charging_at_once_never_overspend(tmp_path):
    path, go = tmp_path / "ledger.json", tmp_path / "go"
    open_ledger(path, data=np.eye(3), epsilon=1.0)
    procs = [python(RACER, path, go, name) for name in ("first", "second")]
    go.touch()
    won = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        won.append(int(out))
    # 30 attempts of 0.1 against 1.0: exactly 10 succeed, none lost or doubled
    assert sum(won) == 10
    b = read_ledger(path)
    assert len(b.entries) == 10 and b.spent.epsilon == 1.0
    with pytest.raises(BudgetExceededError):
        open_ledger(path, data=np.eye(3)).charge(0.1)


def test_the_fingerprint_of_a_dask_array_is_read_in_passes():
    da = pytest.importorskip("dask.array")
    rng = np.random.default_rng(0)
    x = rng.normal(size=(50, 3))
    key = bytes(range(32))
    lazy = da.from_array(x, chunks=(7, 3))
    assert data_fingerprint(lazy, key) == data_fingerprint(x, key)
    assert data_fingerprint(lazy[:49], key) != data_fingerprint(x, key)
