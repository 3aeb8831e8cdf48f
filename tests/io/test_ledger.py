"""The ledger file (issue 27): atomic writes that survive a kill mid-write, a lock that
keeps two processes from overspending, the data set's fingerprint, tampering refused."""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import textwrap
import threading
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from pymc_manidp.io import ledger as ledger_mod
from pymc_manidp.io.ledger import check_ledger_path, data_fingerprint, open_ledger, read_ledger
from pymc_manidp.privacy.budget import BudgetExceededError, LedgerError
from pymc_manidp.privacy.ledger_state import VERSION

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


# --- issue 43: one ledger, one file; only regular files; every written version loads ------

FIXTURES = Path(__file__).parent / "ledgers"


def _in_thread(fn, timeout=20):
    """Run ``fn`` in a daemon thread: a FIFO opened for reading would hang the test."""
    result = {}

    def work():
        try:
            result["value"] = fn()
        except BaseException as err:  # reported below
            result["error"] = err

    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    thread.join(timeout)
    assert not thread.is_alive(), f"{fn} hung"
    return result


def _copy_fixture(name, tmp_path) -> Path:
    path = tmp_path / name
    path.write_bytes((FIXTURES / name).read_bytes())
    path.chmod(0o600)
    return path


def test_version_1_ledgers_written_by_the_old_code_load_and_migrate(tmp_path):
    # both fixtures were written by main's code (fe3d785) through open_ledger; v1_third
    # is the one its own load refused: 10 then 0.3333333333333333, totals a float
    third = _copy_fixture("v1_third.json", tmp_path)
    before = json.loads(third.read_text())
    assert before["version"] == 1 and before["totals"]["epsilon"] == 10.333333333333334
    view = read_ledger(third)
    assert view.public()["spent_exact"]["epsilon"] == "10.3333333333333333"
    assert third.read_text() == json.dumps(before, indent=1) + "\n"  # a read writes nothing
    assert not (tmp_path / "v1_third.json.lock").exists()
    mixed = _copy_fixture("v1_mixed.json", tmp_path)
    old = json.loads(mixed.read_text())["entries"]
    b = read_ledger(mixed)
    assert b.entries == [{**e, "mu": None} for e in old] and b.estimated_delta == 4e-3
    assert (b.spent.epsilon, b.spent.delta, b.spent.proved) == (0.95, 3e-06, False)
    # charging migrates: version 3, every record kept (each gains mu: null), in order,
    # the new one last
    data = np.array([[0, 0, 1.0], [0, 0.6, 0.8], [0.6, 0, 0.8]])
    open_ledger(third, data=data).charge(0.5)
    after = json.loads(third.read_text())
    assert after["version"] == 3
    assert after["entries"][:2] == [{**e, "mu": None} for e in before["entries"]]
    assert after["totals"] == {"count": 3, "epsilon": "10.8333333333333333", "delta": "0"}


def test_a_symbolic_link_charges_the_ledger_it_names(tmp_path):
    real, link = tmp_path / "real.json", tmp_path / "link.json"
    open_ledger(real, data=DATA, epsilon=1.0).charge(0.6)
    link.symlink_to(real)
    open_ledger(link, data=DATA).charge(0.4)
    with pytest.raises(BudgetExceededError):
        open_ledger(real, data=DATA).charge(0.4)  # the old code let 1.4 through
    with pytest.raises(BudgetExceededError):
        open_ledger(link, data=DATA).charge(0.4)
    assert link.is_symlink() and read_ledger(link).spent.epsilon == 1.0
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "link.json",
        "real.json",
        "real.json.lock",
    ]


def test_a_ledger_with_two_names_is_refused(tmp_path):
    real, other = tmp_path / "real.json", tmp_path / "other.json"
    open_ledger(real, data=DATA, epsilon=1.0).charge(0.6)
    os.link(real, other)
    for name in (real, other):
        with pytest.raises(LedgerError, match=r"has 2 names \(hard links\).*Remove the other"):
            open_ledger(name, data=DATA)
        with pytest.raises(LedgerError, match="hard links"):
            read_ledger(name)
    other.unlink()
    open_ledger(real, data=DATA).charge(0.4)
    assert read_ledger(real).remaining == (0.0, 0.0)


def test_a_fifo_is_refused_at_once_and_nothing_is_created(tmp_path):
    fifo = tmp_path / "ledger.json"
    os.mkfifo(fifo)
    for fn in (
        lambda: read_ledger(fifo),
        lambda: open_ledger(fifo, data=DATA),
        lambda: open_ledger(fifo, data=DATA, epsilon=1.0),
        lambda: check_ledger_path(fifo),
    ):
        err = _in_thread(fn).get("error")
        assert isinstance(err, LedgerError) and "is a FIFO (named pipe)" in str(err)
    assert [p.name for p in tmp_path.iterdir()] == ["ledger.json"]  # no lock file


def test_a_device_and_a_folder_are_refused_unopened(tmp_path, monkeypatch):
    (tmp_path / "folder").mkdir()
    with pytest.raises(LedgerError, match="is a folder"):
        read_ledger(tmp_path / "folder")
    fake = tmp_path / "zero.json"
    fake.write_text("0")
    real_stat = os.stat

    def device_stat(path, *args, **kwargs):  # what os.stat says of /dev/zero
        st = real_stat(path, *args, **kwargs)
        if str(path) == str(fake):
            return os.stat_result((stat.S_IFCHR | 0o666, *tuple(st)[1:]))
        return st

    opened = []
    real_open = os.open
    monkeypatch.setattr(os, "stat", device_stat)
    monkeypatch.setattr(
        os, "open", lambda p, *a, **k: opened.append(str(p)) or real_open(p, *a, **k)
    )
    with pytest.raises(LedgerError, match="is a character device"):
        read_ledger(fake)
    with pytest.raises(LedgerError, match="is a character device"):
        open_ledger(fake, data=DATA)
    assert str(fake) not in opened and not (tmp_path / "zero.json.lock").exists()


def test_the_size_read_is_capped(tmp_path, monkeypatch):
    path = tmp_path / "ledger.json"
    open_ledger(path, data=DATA, epsilon=1.0)
    monkeypatch.setattr(ledger_mod, "MAX_LEDGER_BYTES", 100)
    with pytest.raises(LedgerError, match="more than a ledger's 100"):
        read_ledger(path)


def test_reads_create_no_lock_file(tmp_path, capsys):
    from pymc_manidp.cli import main

    missing = tmp_path / "missing.json"
    with pytest.raises(ValueError, match="ledger not found"):
        read_ledger(missing)
    with pytest.raises(ValueError, match="ledger not found"):
        open_ledger(missing, data=DATA)
    assert main(["budget", str(missing)]) == 2
    path = tmp_path / "sub" / "ledger.json"
    path.parent.mkdir()
    open_ledger(path, data=DATA, epsilon=1.0)
    (path.parent / "ledger.json.lock").unlink()
    assert read_ledger(path).spent.epsilon == 0
    assert main(["budget", str(path)]) == 0
    capsys.readouterr()
    assert list(tmp_path.iterdir()) == [path.parent] and list(path.parent.iterdir()) == [path]


@pytest.mark.parametrize(
    "text, message",
    [
        (b"\xff\xfe{}", "not UTF-8 text: byte 0 is 0xff"),
        (b"[" * 100_000 + b"]" * 100_000, "nested too deep|nested deeper"),
        (b'{"format": NaN}', "NaN is not a number a ledger holds"),
        (b'{"a": 1, "a": 2}', "the field 'a' appears twice"),
        (b"1" * 5000, "not JSON"),
        (b"", "not JSON"),
    ],
)
def test_a_file_that_is_not_a_ledger_is_refused_by_name(tmp_path, text, message):
    path = tmp_path / "ledger.json"
    path.write_bytes(text)
    with pytest.raises(LedgerError, match=message) as info:
        read_ledger(path)
    assert str(path) in str(info.value)


def _resealed(path, edit):
    state = json.loads(path.read_text())
    edit(state)
    body = {k: v for k, v in state.items() if k != "checksum"}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"))
    state["checksum"] = "sha256:" + hashlib.sha256(text.encode()).hexdigest()
    path.write_text(json.dumps(state))


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda s: s["entries"][0].update(epsilon=10**400), r"entries\[0\]\.epsilon"),
        (lambda s: s["dataset"].pop("fingerprint"), r"dataset\.fingerprint is missing"),
        (lambda s: s.update(dataset="cities"), "dataset must be an object"),
        (lambda s: s.update(dataset=None), "a ledger file names its data set"),
        (lambda s: s["budget"].update(epsilon="5"), r"budget\.epsilon must be a number"),
        (lambda s: s["entries"][0].update(index=True), r"entries\[0\]\.index"),
        (
            lambda s: s["entries"][0].update(delta_basis="estimated", delta=0.5),
            r"entries\[0\]\.delta must be 0 for an estimated delta",
        ),
    ],
)
def test_a_resealed_ledger_file_is_refused_field_by_field(tmp_path, edit, message):
    path = tmp_path / "ledger.json"
    open_ledger(path, data=DATA, epsilon=1.0).charge(0.5)
    _resealed(path, edit)
    for fn in (lambda: read_ledger(path), lambda: open_ledger(path, data=DATA)):
        with pytest.raises(LedgerError, match=message):
            fn()


def _planned_ledger(path):
    """An optimal ledger with a plan of two charges, both made."""
    plan = [0.5, (0.25, 1e-7)]
    b = open_ledger(path, data=DATA, epsilon=1.0, delta=1e-6, composition="optimal", plan=plan)
    b.charge(0.5)
    b.charge(0.25, 1e-7)


def _set_plan(i, j, value):
    return lambda s: s["budget"]["plan"][i].__setitem__(j, value)


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda s: s["budget"].update(plan="0.5"), r"budget\.plan must be null or a list"),
        (lambda s: s["budget"].update(plan=[]), r"budget\.plan must be null or a list of 1"),
        (lambda s: s["budget"]["plan"].append(0.1), r"budget\.plan\[2\] must be a pair"),
        (lambda s: s["budget"]["plan"][0].extend([0.1, 0.1]), r"budget\.plan\[0\] must be a pair"),
        # a third number makes a Gaussian charge: its mu is checked
        (lambda s: s["budget"]["plan"][0].append(0.0), r"budget\.plan\[0\]\[2\] \(mu\) must be in"),
        (_set_plan(0, 0, True), r"budget\.plan\[0\]\[0\] \(epsilon\) must be a number"),
        (_set_plan(0, 0, "0.5"), r"budget\.plan\[0\]\[0\] \(epsilon\) must be a number"),
        (_set_plan(1, 0, -0.25), r"budget\.plan\[1\]\[0\] \(epsilon\) must be in \(0, inf\]"),
        (_set_plan(1, 1, 1.0), r"budget\.plan\[1\]\[1\] \(delta\) must be in \[0, 1\)"),
        (
            lambda s: s["budget"].update(composition="basic"),
            r"budget\.plan must be null for 'basic'",
        ),
        (_set_plan(0, 0, 0.4), r"entries\[0\]: .* is not the plan's charge 0 \(budget\.plan\[0\]"),
        (_set_plan(1, 1, 0.0), r"entries\[1\]: .* is not the plan's charge 1"),
        (lambda s: s["budget"]["plan"].pop(), r"entries\[1\]: .* \(past the plan\)"),
        (lambda s: s["budget"].update(plan={"0": [0.5, 0.0]}), r"budget\.plan must be null"),
    ],
)
def test_a_resealed_plan_is_refused_field_by_field(tmp_path, edit, message):
    path = tmp_path / "ledger.json"
    _planned_ledger(path)
    _resealed(path, edit)
    for fn in (lambda: read_ledger(path), lambda: open_ledger(path, data=DATA)):
        with pytest.raises(LedgerError, match=message):
            fn()


def test_a_version_1_ledger_with_a_plan_migrates_keeping_it(tmp_path):
    # main wrote plans in version 1 ledgers (totals as floats) before version 2 existed
    path = tmp_path / "ledger.json"
    _planned_ledger(path)
    state = json.loads(path.read_text())
    plan = state["budget"]["plan"]
    state["entries"].pop()

    def as_v1(s):
        for e in state["entries"]:  # version 1 entries had no mu
            e.pop("mu")
        s.update(version=1, entries=state["entries"])
        s["totals"] = {"count": 1, "epsilon": 0.5, "delta": 0.0}

    _resealed(path, as_v1)
    before = path.read_text()
    b = read_ledger(path)
    assert b.plan == [tuple(c) for c in plan] and b.spent.epsilon == 0.5
    assert path.read_text() == before  # a read writes nothing
    with pytest.raises(BudgetExceededError, match="charge 1 of the plan"):
        open_ledger(path, data=DATA).charge(0.25)
    open_ledger(path, data=DATA).charge(0.25, 1e-7)
    after = json.loads(path.read_text())
    assert after["version"] == VERSION == 3 and after["budget"]["plan"] == plan
    assert after["totals"] == {"count": 2, "epsilon": "0.75", "delta": "0.0000001"}
    # without its plan (an older optimal ledger) it loads and counts by basic composition
    _resealed(path, lambda s: s["budget"].pop("plan"))
    b = read_ledger(path)
    assert b.plan is None and (b.spent.epsilon, b.spent.delta) == (0.75, 1e-7)
    assert b.spent.rule.startswith("basic composition")


ODD_ARGUMENTS = st.sampled_from(
    [True, np.bool_(False), "1", None, float("nan"), -1.0, 0.0, 10**400, 1.0, 1e-17, 5e-324]
) | st.floats(min_value=5e-324, max_value=1e300)


@given(ODD_ARGUMENTS, ODD_ARGUMENTS, st.sampled_from(["basic", "advanced", None, True]))
def test_open_ledger_makes_a_ledger_or_refuses_and_writes_nothing(
    tmp_path_factory, epsilon, delta, composition
):
    folder = tmp_path_factory.mktemp("args")
    path = folder / "ledger.json"
    try:
        b = open_ledger(path, data=DATA, epsilon=epsilon, delta=delta, composition=composition)
    except TypeError as err:
        assert "must be a real number" in str(err)
        assert list(folder.iterdir()) == []  # refused before the lock or the ledger
        return
    except ValueError as err:
        # epsilon None opens an existing ledger: there is none
        expected = ("epsilon must", "delta must", "composition must", "ledger not found")
        assert any(k in str(err) for k in expected)
        assert list(folder.iterdir()) == []
        return
    assert Fraction(repr(b.epsilon)) <= Fraction(repr(float(epsilon)))  # never more
    assert read_ledger(path).remaining == (b.epsilon, b.delta)


MUTATIONS = st.sampled_from(
    [True, None, "5", 5, -1.0, 0.0, 0.5, 1e308, 10**400, [], {}, 5e-324, "0.1", [[[]]]]
)


@given(st.data())
def test_any_resealed_field_loads_right_or_is_refused(tmp_path_factory, data):
    path = tmp_path_factory.mktemp("fuzz") / "ledger.json"
    open_ledger(path, data=DATA, epsilon=1.0, delta=1e-6).charge(0.25, 1e-7)
    state = json.loads(path.read_text())
    # a random field anywhere in the state, set to a random adversarial value
    where = data.draw(st.sampled_from(sorted(_leaves(state))))
    value = data.draw(MUTATIONS)
    _resealed(path, lambda s: _set(s, where, value))
    try:
        b = read_ledger(path)
    except LedgerError as err:
        assert str(path) in str(err)
        return
    except ValueError as err:  # pragma: no cover - only "not found"
        raise AssertionError(err) from None
    eps = sum((Fraction(repr(e["epsilon"])) for e in b.entries), Fraction(0))
    assert b.spent.exact[0] == eps
    if eps > Fraction(repr(b.epsilon)):
        # a budget lowered below what was spent (by hand: the writer never does it) is
        # harmless: nothing more can be charged
        assert b.remaining[0] == 0.0
        with pytest.raises(BudgetExceededError):
            open_ledger(path, data=DATA).charge(5e-324)


def _leaves(obj, prefix=()):
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _leaves(v, (*prefix, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _leaves(v, (*prefix, i))
    if prefix:
        yield prefix


def _set(state, where, value):
    for k in where[:-1]:
        state = state[k]
    state[where[-1]] = value


KILLED = """
import sys
import numpy as np
from pymc_manidp.io.ledger import open_ledger
b = open_ledger(sys.argv[1], data=np.eye(3))
for i in range(10_000):
    b.charge(1e-17, mechanism="killed")
    print(i, flush=True)
"""


def test_kills_mid_run_lose_or_double_no_charge(tmp_path):
    path = tmp_path / "ledger.json"
    open_ledger(path, data=np.eye(3), epsilon=1.0)
    printed = 0
    for wait in (3, 17):  # kill after a few charges, each time somewhere else
        proc = python(KILLED, path)
        try:
            lines = [proc.stdout.readline() for _ in range(wait)]
            assert all(lines), proc.stderr.read()
            os.kill(proc.pid, signal.SIGKILL)
        finally:
            proc.kill()
            rest, _ = proc.communicate()
        done = len(lines) + len(rest.splitlines())  # charges the process saw succeed
        count = len(read_ledger(path).entries)  # the ledger always loads
        # each printed charge is in; at most the one being printed is in beyond them
        assert printed + done <= count <= printed + done + 1
        printed = count
    b = read_ledger(path)
    assert b.spent.exact[0] == Fraction(count, 10**17)
    assert [e["index"] for e in b.entries] == list(range(count))


# --- the ledger's stateful test (issue 43, item 15) -----------------------------------------

#: charges where float rounding bites (1/3, 1e-17 next to 1, 1e16, subnormals, sub-ulp)
ADVERSARIAL_EPSILONS = st.sampled_from(
    [
        0.3333333333333333,
        1 / 3,
        1e-17,
        1e16,
        1.0,
        0.1,
        0.7,
        10.0,
        5e-324,
        2.2250738585072014e-308,
        math.nextafter(1.0, 0),
        math.nextafter(0.1, 1),
    ]
) | st.floats(min_value=5e-324, max_value=2e16, allow_nan=False, allow_infinity=False)


class Boom(Exception):
    """A release that failed after its charge."""


class LedgerMachine(RuleBasedStateMachine):
    """Random charges, settles, failures, reloads, links and a concurrent writer on one
    ledger file, checked against a model list of the charges.

    Invariants: the ledger always loads (by its name and through a symbolic link), its
    entries are the model's (no charge lost or doubled, statuses as set), its exact
    total is at most the budget, and its sealed totals are the exact sums.
    """

    def __init__(self):
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="ledger-machine-"))
        self.real = self.dir / "real.json"
        self.link = self.dir / "link.json"
        self.model = []  # [epsilon as charged (decimal), status]
        self.budget = None

    def teardown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    @initialize(budget=st.sampled_from([1.0, 1e16, 20.0, 0.30000000000000004, 1e-300, 2.1]))
    def create(self, budget):
        self.budget = Fraction(repr(budget))
        open_ledger(self.real, data=DATA, epsilon=budget)
        self.link.symlink_to(self.real)

    def _open(self, name):
        return open_ledger(self.real if name == "real" else self.link, data=DATA)

    def _spent(self):
        return sum((e for e, _ in self.model), Fraction(0))

    def _admits(self, epsilon) -> bool:
        return self._spent() + Fraction(repr(epsilon)) <= self.budget

    @rule(epsilon=ADVERSARIAL_EPSILONS, name=st.sampled_from(["real", "link"]))
    def charge(self, epsilon, name):
        fits = self._admits(epsilon)
        try:
            index = self._open(name).charge(epsilon, mechanism="machine", status="charged")
        except BudgetExceededError:
            assert not fits, "a charge that fits was refused"
            return
        assert fits, "a charge that overspends was accepted"
        assert index == len(self.model)
        self.model.append([Fraction(repr(epsilon)), "charged"])

    @rule(name=st.sampled_from(["real", "link"]), nudge=st.sampled_from([0, 1, -1]))
    def fill(self, name, nudge):
        # the float nearest what is left, or one ulp either side: brings the total to
        # the budget's edge, where a float comparison admits 1e16 + 1 or 1 + 1e-17
        left = self.budget - self._spent()
        epsilon = float(left)
        if nudge:
            epsilon = math.nextafter(epsilon, math.inf * nudge)
        if epsilon > 0:
            self.charge(epsilon, name)

    @precondition(lambda self: any(s == "charged" for _, s in self.model))
    @rule(data=st.data(), name=st.sampled_from(["real", "link"]))
    def fail(self, data, name):
        open_ = [i for i, (_, s) in enumerate(self.model) if s == "charged"]
        i = data.draw(st.sampled_from(open_))
        self._open(name).fail(i, Boom())
        self.model[i][1] = "failed"

    @rule(epsilon=ADVERSARIAL_EPSILONS)
    def check_only(self, epsilon):
        fits = self._admits(epsilon)
        try:
            read_ledger(self.link).check(epsilon)
        except BudgetExceededError:
            assert not fits
        else:
            assert fits

    @rule()
    def hard_link_is_refused(self):
        other = self.dir / "hard.json"
        os.link(self.real, other)
        try:
            for name in (self.real, self.link, other):
                with pytest.raises(LedgerError, match="hard links"):
                    open_ledger(name, data=DATA).charge(1e-17)
        finally:
            other.unlink()

    @rule(epsilon=ADVERSARIAL_EPSILONS, times=st.integers(1, 4))
    def concurrent_writer(self, epsilon, times):
        # a second store on the same file, through the link, charging in another thread
        # while this one charges by the real name: the lock orders them
        won = {"thread": 0, "main": 0}

        def work(who, name):
            b = self._open(name)
            for _ in range(times):
                try:
                    b.charge(epsilon, mechanism=who, status="external")
                    won[who] += 1
                except BudgetExceededError:
                    pass

        thread = threading.Thread(target=work, args=("thread", "link"))
        thread.start()
        work("main", "real")
        thread.join()
        entries = read_ledger(self.real).entries
        new = entries[len(self.model) :]
        assert len(new) == won["thread"] + won["main"]  # no charge lost or doubled
        assert sum(e["mechanism"] == "thread" for e in new) == won["thread"]
        for e in new:
            self.model.append([Fraction(repr(e["epsilon"])), "external"])

    @invariant()
    def the_ledger_loads_and_matches_the_model(self):
        if self.budget is None:
            return
        for name in (self.real, self.link):
            b = read_ledger(name)
            entries = b.entries
            assert [Fraction(repr(e["epsilon"])) for e in entries] == [e for e, _ in self.model]
            assert [e["status"] for e in entries] == [s for _, s in self.model]
            assert [e["index"] for e in entries] == list(range(len(self.model)))
            spent = b.spent.exact[0]
            assert spent == self._spent() <= self.budget  # exactly, as fractions
            state = json.loads(self.real.read_text())
            assert state["version"] == VERSION and Fraction(state["totals"]["epsilon"]) == spent
        assert self.link.is_symlink() and sorted(p.name for p in self.dir.iterdir()) == [
            "link.json",
            "real.json",
            "real.json.lock",
        ]


LedgerMachine.TestCase.settings = settings(stateful_step_count=15)
test_the_ledger_machine = LedgerMachine.TestCase


#: plans whose exact sum is the budget or just under it (their float sums are not:
#: ten 0.1 add up to 0.9999999999999999, 0.1 + 0.2 to 0.30000000000000004)
PLANS = [
    (1.0, [0.1] * 10),
    (0.3, [0.1, 0.2]),
    (2.1, [0.7, 0.7, 0.7]),
    (1.0, [0.3333333333333333, 1e-17, 0.3333333333333333, 0.1, 5e-324]),
    (1e16, [1e16 - 2, 1.0, 1.0]),
]


class PlannedLedgerMachine(LedgerMachine):
    """The same machine on an optimal ledger with a plan: a charge is admitted exactly
    when it is the plan's next one (each plan here fits its budget by its exact sum,
    so the total stays the basic one, compared exactly); any other is refused."""

    @initialize(which=st.sampled_from(range(len(PLANS))))
    def create(self, which):
        budget, plan = PLANS[which]
        self.budget, self.plan = Fraction(repr(budget)), plan
        open_ledger(self.real, data=DATA, epsilon=budget, composition="optimal", plan=plan)
        self.link.symlink_to(self.real)

    def _admits(self, epsilon) -> bool:
        k = len(self.model)
        return k < len(self.plan) and epsilon == self.plan[k]

    @rule(name=st.sampled_from(["real", "link"]))
    def charge_planned(self, name):
        if len(self.model) < len(self.plan):
            self.charge(self.plan[len(self.model)], name)

    @invariant()
    def the_entries_are_the_plan_so_far(self):
        if self.budget is not None:
            state = json.loads(self.real.read_text())
            assert state["budget"]["plan"] == [[e, 0.0] for e in self.plan]
            assert [[e["epsilon"], e["delta"]] for e in state["entries"]] == state["budget"][
                "plan"
            ][: len(state["entries"])]


PlannedLedgerMachine.TestCase.settings = settings(stateful_step_count=15, max_examples=15)
test_the_planned_ledger_machine = PlannedLedgerMachine.TestCase


def _gaussian_charge(epsilon, delta):
    from pymc_manidp.stats.gaussian import gaussian_mu

    return [epsilon, delta, gaussian_mu(epsilon, delta)]


#: plans with Gaussian charges (issue 39): each fits its (epsilon, delta) budget only by
#: composing the Gaussians exactly (GDP, or mixed PLDs), not by basic sums
GAUSSIAN_PLANS = [
    ((1.0, 1e-6), [_gaussian_charge(0.2, 1e-7)] * 16),
    ((1.0, 1e-6), [_gaussian_charge(0.25, 1e-7), [0.1, 0.0], _gaussian_charge(0.25, 1e-7)] * 3),
    ((0.5, 1e-6), [_gaussian_charge(1 / 3, 1e-8), [1e-17, 0.0], _gaussian_charge(0.1, 1e-9)]),
]


class GaussianPlannedLedgerMachine(LedgerMachine):
    """The machine on optimal ledgers whose plans hold Gaussian charges: a charge is
    admitted exactly when it is the plan's next one, mu included (the base rules' pure
    charges are admitted only where the plan has that pure charge next); every state
    loads, its entries are the plan so far and its total, from composing the Gaussians
    exactly, is within the budget."""

    @initialize(which=st.sampled_from(range(len(GAUSSIAN_PLANS))))
    def create(self, which):
        (budget, delta), plan = GAUSSIAN_PLANS[which]
        self.budget, self.delta, self.plan = Fraction(repr(budget)), delta, plan
        open_ledger(
            self.real, data=DATA, epsilon=budget, delta=delta, composition="optimal", plan=plan
        )
        self.link.symlink_to(self.real)

    def _admits(self, epsilon) -> bool:
        k = len(self.model)
        return k < len(self.plan) and [epsilon, 0.0] == self.plan[k]

    @rule(name=st.sampled_from(["real", "link"]), drop_mu=st.booleans())
    def charge_planned(self, name, drop_mu):
        k = len(self.model)
        if k >= len(self.plan):
            return
        epsilon, delta, *mu = self.plan[k]
        gaussian = bool(mu)
        try:
            index = self._open(name).charge(
                epsilon, delta, mu=None if drop_mu else (mu or [None])[0], status="charged"
            )
        except BudgetExceededError:
            assert gaussian and drop_mu, "the plan's next charge was refused"
            return
        assert not (gaussian and drop_mu), "a Gaussian charge without its mu was admitted"
        assert index == k
        self.model.append([Fraction(repr(epsilon)), "charged"])

    def _spent(self):  # not a basic sum: the ledger's own total is checked below
        return Fraction(0)

    @invariant()
    def the_ledger_loads_and_matches_the_model(self):
        if self.budget is None:
            return
        for name in (self.real, self.link):
            b = read_ledger(name)
            entries = b.entries
            assert [Fraction(repr(e["epsilon"])) for e in entries] == [e for e, _ in self.model]
            assert [e["status"] for e in entries] == [s for _, s in self.model]
            forms = [
                [e["epsilon"], e["delta"]] + ([] if e["mu"] is None else [e["mu"]]) for e in entries
            ]
            assert forms == self.plan[: len(entries)]
            spent = b.spent
            assert Fraction(repr(spent.epsilon)) <= self.budget and spent.delta <= self.delta
            state = json.loads(self.real.read_text())
            assert state["version"] == VERSION and state["budget"]["plan"] == self.plan


GaussianPlannedLedgerMachine.TestCase.settings = settings(stateful_step_count=20, max_examples=15)
test_the_gaussian_planned_ledger_machine = GaussianPlannedLedgerMachine.TestCase


def _mechanism():
    from pymc_manidp import KNGMechanism, Sphere

    return KNGMechanism(Sphere(dim=2), epsilon=0.25, center=[0, 0, 1.0], radius=0.7)


#: calls refused before their charge, from their arguments or an overspend
REFUSED_CALLS = {
    "sampler": lambda m, b: m.release(DATA, budget=b, sampler="gibbs"),
    "clip": lambda m, b: m.release(DATA, budget=b, clip="yes"),
    "estimate_delta": lambda m, b: m.release(DATA, budget=b, estimate_delta=True),
    "seed": lambda m, b: m.release(DATA, budget=b, random_seed="0"),
    "shape": lambda m, b: m.release(DATA[:, :2], budget=b),
    "empty": lambda m, b: m.release(DATA[:0], budget=b),
    "delta": lambda m, b: m.release(DATA, budget=b, delta=0.1),
    "many": lambda m, b: m.release_many([DATA, DATA[:, :2]], budget=b),
    "overspend": lambda m, b: m.release_many([DATA] * 5, budget=b),
    "entered": lambda m, b: _entered(b, lambda: m.release(DATA, sampler="gibbs")),
}


def _entered(b, call):
    with b:
        call()


@settings(max_examples=25)
@given(st.lists(st.sampled_from([*REFUSED_CALLS, "release"]), min_size=1, max_size=5))
def test_a_refused_release_leaves_no_new_ledger_and_the_budget_still_charges(
    tmp_path_factory, calls
):
    # issue 43, leftovers item 1: open_ledger(new) then a refused release left the new
    # ledger on disk (the CLI removed it, the Python API did not)
    folder = tmp_path_factory.mktemp("refused")
    path = folder / "new.json"
    mech, b = _mechanism(), open_ledger(path, data=DATA, epsilon=1.0)
    made = 0
    for call in calls:
        if call == "release":
            mech.release(DATA, budget=b, random_seed=made)
            made += 1
        else:
            with pytest.raises((ValueError, TypeError)):
                REFUSED_CALLS[call](mech, b)
        # a file exactly when something was charged (the lock beside it)
        assert sorted(p.name for p in folder.iterdir()) == (
            ["new.json", "new.json.lock"] if made else []
        ), call
        assert b.spent.epsilon == 0.25 * made and len(b.entries) == made
    if made:
        assert read_ledger(path).spent.epsilon == 0.25 * made


def test_a_ledger_name_ending_with_a_separator_is_refused_and_nothing_made(tmp_path):
    # issue 43, leftovers item 2: Path("x.json/") is x.json, so a ledger was created
    for name in (f"{tmp_path}/x.json/", f"{tmp_path}/x.json/.", f"{tmp_path}/"):
        for call, kwargs in (
            (open_ledger, {"data": DATA, "epsilon": 1.0}),
            (open_ledger, {"data": DATA}),
            (check_ledger_path, {}),
            (read_ledger, {}),
        ):
            with pytest.raises(LedgerError, match=r"names a folder.*not a file"):
                call(name, **kwargs)
    assert list(tmp_path.iterdir()) == []


def test_a_removed_new_ledger_is_written_again_only_by_a_charge_that_is_made(tmp_path):
    path = tmp_path / "new.json"
    b = open_ledger(path, data=DATA, epsilon=1.0)
    with pytest.raises(ValueError, match="sampler"):
        _mechanism().release(DATA, budget=b, sampler="gibbs")
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(BudgetExceededError):  # refused inside the transaction: no file, no lock
        b.charge(5.0)
    assert list(tmp_path.iterdir()) == [] and b.remaining == (1.0, 0.0)
    assert b.charge(0.5) == 0
    assert read_ledger(path).spent.epsilon == 0.5
    assert open_ledger(path, data=DATA).charge(0.5) == 1  # the key and fingerprint kept


def test_version_2_ledgers_load_and_migrate_keeping_every_record(tmp_path):
    # written by main's code at b096efc through open_ledger (before Gaussian charges):
    # an optimal plan with a failed charge, and a basic one with an assumed delta
    planned = _copy_fixture("v2_planned.json", tmp_path)
    before = json.loads(planned.read_text())
    assert before["version"] == 2
    b = read_ledger(planned)
    assert b.entries == [{**e, "mu": None} for e in before["entries"]]
    assert planned.read_text() == json.dumps(before, indent=1) + "\n"  # a read writes nothing
    open_ledger(planned, data=DATA).charge(0.2, 2e-7)  # the plan's last charge
    after = json.loads(planned.read_text())
    assert after["version"] == VERSION and after["budget"]["plan"] == before["budget"]["plan"]
    assert after["entries"][:2] == [{**e, "mu": None} for e in before["entries"]]
    assert after["totals"] == {"count": 3, "epsilon": "1", "delta": "0.0000003"}
    basic = _copy_fixture("v2_basic.json", tmp_path)
    old = json.loads(basic.read_text())["entries"]
    b = open_ledger(basic, data=DATA)
    assert (b.spent.epsilon, b.spent.delta, b.spent.proved) == (0.35, 2e-6, False)
    b.charge(0.5, 1e-6, mu=0.1)  # a Gaussian charge joins a migrated ledger
    after = json.loads(basic.read_text())
    assert after["entries"][:2] == [{**e, "mu": None} for e in old]
    assert after["entries"][2]["mu"] == 0.1
