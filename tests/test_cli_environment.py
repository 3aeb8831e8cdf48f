"""The command line in a broken environment: one line, code 2, nothing written.

Issue 43 item 11: the dependencies read environment variables when they are imported.
``OMP_NUM_THREADS=nan`` (PyTensor), ``NUMBA_NUM_THREADS=0`` (numba) and
``PYTENSORRC=/etc/passwd`` gave tracebacks with code 1 (which means "audit failed");
``HOME=''`` made ``./.pytensor`` and ``XDG_CACHE_HOME=garbage`` made
``./garbage/matplotlib`` in the working folder. ``environment.environment_problem`` checks them
before anything reads them (docs/cli.md, "Exit codes"). The tests run the CLI in a
fresh process from an empty working folder and check the code, the single line on
stderr and that the folder is still empty; a hypothesis test draws adversarial values
(nan, 0, -1, empty, blanks, relative paths, files, non-UTF-8 bytes) and checks the
check itself against an oracle written from the dependencies' rules.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pymc_manidp.environment import environment_problem as _environment_problem

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    path = tmp_path_factory.mktemp("data") / "points.npy"
    rng = np.random.default_rng(0)
    x = rng.normal(size=(50, 3)) * [0.05, 0.05, 1.0] + [0.0, 0.0, 3.0]
    np.save(path, x / np.linalg.norm(x, axis=1, keepdims=True))
    return path


def _cli(env_changes, data, tmp_path):
    """Code and stderr of a release run from an empty working folder, and that folder."""
    cwd = tmp_path / "cwd"
    cwd.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k not in env_changes}
    env.update(env_changes, PYTHONPATH=str(ROOT))
    args = ["release", str(data), "--manifold", "sphere", "--epsilon", "1"]
    args += ["--center", "0,0,1", "--radius", "0.5", "--out", str(tmp_path / "release.json")]
    proc = subprocess.run(
        [sys.executable, "-m", "pymc_manidp.cli", *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
    )
    return proc.returncode, proc.stderr, cwd


def _refused_in_one_line(code, err, cwd, name):
    assert code == 2, err
    assert "Traceback" not in err and err.strip().count("\n") == 0, err
    assert name in err, err
    assert list(cwd.iterdir()) == []  # nothing written in the working folder


BROKEN = {
    "OMP_NUM_THREADS=nan": ("OMP_NUM_THREADS", "nan"),
    "OMP_NUM_THREADS=-1": ("OMP_NUM_THREADS", "-1"),
    "NUMBA_NUM_THREADS=0": ("NUMBA_NUM_THREADS", "0"),
    "NUMBA_NUM_THREADS empty": ("NUMBA_NUM_THREADS", ""),  # numba parses '' and warns
    "PYTENSORRC=/etc/passwd": ("PYTENSORRC", "/etc/passwd"),
    "PYTENSORRC relative": ("PYTENSORRC", "pytensorrc"),
    "HOME empty": ("HOME", ""),
    "XDG_CACHE_HOME relative": ("XDG_CACHE_HOME", "garbage"),
    "XDG_CACHE_HOME blank": ("XDG_CACHE_HOME", " "),
    "MPLCONFIGDIR a file": ("MPLCONFIGDIR", "/etc/passwd"),
    "compiledir relative": ("PYTENSOR_FLAGS", "base_compiledir=rel"),
    # refused by PyTensor or numba themselves at import: one line all the same
    "floatX unknown": ("PYTENSOR_FLAGS", "floatX=float13"),
    "NUMBA_OPT unparsable": ("NUMBA_OPT", "abc"),
}


@pytest.mark.parametrize("case", list(BROKEN))
def test_a_broken_environment_is_refused_in_one_line_writing_nothing(case, data, tmp_path):
    name, value = BROKEN[case]
    code, err, cwd = _cli({name: value}, data, tmp_path)
    _refused_in_one_line(code, err, cwd, name)
    assert not (tmp_path / "release.json").exists()


def test_absolute_cache_folders_are_used_and_the_working_folder_stays_empty(data, tmp_path):
    """The control: valid values release (code 0), their caches where they point."""
    xdg = tmp_path / "xdg"
    code, err, cwd = _cli({"XDG_CACHE_HOME": str(xdg), "OMP_NUM_THREADS": "1"}, data, tmp_path)
    assert code == 0, err
    assert (tmp_path / "release.json").is_file()
    assert list(cwd.iterdir()) == []


# ---- the check against an oracle, over adversarial values --------------------------

THREADS = ("OMP_NUM_THREADS", "NUMBA_NUM_THREADS")
FOLDERS = (
    "HOME",
    "XDG_CACHE_HOME",
    "XDG_CONFIG_HOME",
    "MPLCONFIGDIR",
    "NUMBA_CACHE_DIR",
    "PYMC_MANIDP_CACHE_DIR",
)
A_FILE = "/etc/passwd"
VALUES = st.one_of(
    st.sampled_from(
        [
            "nan",
            "inf",
            "0",
            "-1",
            "1",
            "4",
            " 2 ",
            "1e3",
            "4_0",
            "\u0664",  # an Arabic-Indic 4: int() takes it, OpenMP would not
            "9" * 400,
            "",
            " ",
            "garbage",
            "./rel",
            "~",
            "~/cache",
            A_FILE,
            "/",
            "/nonexistent/cache",
            "/tmp",
            "/tmp/\udcff",  # a non-UTF-8 byte, as os.environ decodes it
            "\udcff",
            "a,b",
            "base_compiledir=rel",
            "base_compiledir=/tmp",
            '"unbalanced',
        ]
    ),
    st.text(max_size=8),
)


def _folder_ok(name, value):
    if name == "PYMC_MANIDP_CACHE_DIR":
        value = os.path.expanduser(value.strip())
    if value == "" and name != "HOME":
        return True
    return os.path.isabs(value) and not (os.path.exists(value) and not os.path.isdir(value))


@settings(deadline=None)
@given(name=st.sampled_from(THREADS + FOLDERS), value=VALUES)
def test_the_environment_check_against_the_dependencies_rules(name, value):
    problem = _environment_problem({name: value})
    if name in THREADS:
        text = value.strip()
        ok = (value == "" and name == "OMP_NUM_THREADS") or (
            text.isascii() and text.isdigit() and int(text) >= 1
        )
    else:
        ok = _folder_ok(name, value)
    if ok:
        assert problem is None
    else:
        assert problem is not None and "\n" not in problem
        assert f"environment variable {name}=" in problem


@settings(deadline=None)
@given(value=VALUES)
def test_pytensor_files_and_flags_are_checked(value):
    problem = _environment_problem({"PYTENSORRC": value})
    entries = [os.path.expanduser(e) for e in value.split(os.pathsep) if e]
    bad = any(not os.path.isabs(e) or e == A_FILE for e in entries)
    assert (problem is not None) == bad, problem
    problem = _environment_problem({"PYTENSOR_FLAGS": value})
    if "compiledir=rel" in value or value.count('"') % 2:
        assert problem is not None and "PYTENSOR_FLAGS" in problem and "\n" not in problem


@settings(max_examples=10, deadline=None)
@given(name=st.sampled_from(THREADS + FOLDERS + ("PYTENSORRC",)), value=VALUES)
def test_every_refused_value_ends_the_cli_in_one_line(name, value, tmp_path_factory):
    """End to end on values the check refuses: they cost no import, so this is fast."""
    if _environment_problem({name: value}) is None:
        return
    tmp_path = tmp_path_factory.mktemp("env")
    data = tmp_path / "none.npy"  # never read: the refusal comes first
    code, err, cwd = _cli({name: value}, data, tmp_path)
    _refused_in_one_line(code, err, cwd, name)


# ---- PyTensor's compile folder: ours alone, as the package's own cache -------------

PYTENSOR_PLANTS = {
    "a file another user's": (lambda p: os.chown(p, 12345, -1), True),
    "a file anyone may write": (lambda p: p.chmod(0o666), True),
    "group-writable, another group": (lambda p: (os.chown(p, -1, 12345), p.chmod(0o664)), True),
    # the control: what PyTensor writes under umask 002 is accepted
    "group-writable, our own group": (
        lambda p: (os.chown(p, -1, os.getgid()), p.chmod(0o664)),
        False,
    ),
}


@pytest.mark.parametrize("kind", list(PYTENSOR_PLANTS))
def test_pytensor_compile_folder_others_can_write_is_refused(kind, tmp_path):
    """PyTensor loads pickles and compiled modules from its ``base_compiledir`` (its
    numba cache in ``numba/``): the CLI checks it as the package's own cache."""
    if os.getuid() != 0:
        pytest.skip("giving a file to another user or group needs root")
    plant, refused = PYTENSOR_PLANTS[kind]
    base = tmp_path / "pytensor"
    (base / "numba").mkdir(parents=True)
    planted = base / "numba" / "f-1.py312.nbi"
    planted.write_bytes(b"not read")
    plant(planted)
    env = {"PYTENSOR_FLAGS": f"base_compiledir={base}"}
    code, err, cwd = _cli(env, tmp_path / "none.npy", tmp_path)
    assert code == 2 and err.strip().count("\n") == 0, err
    assert ("PyTensor's compile folder" in err and str(planted) in err) == refused, err
    if not refused:
        assert "data file not found" in err  # went on to the command
    assert list(cwd.iterdir()) == []


@pytest.mark.parametrize("flag", ["compiledir", "base_compiledir"])
def test_pytensor_compiledir_set_alone_is_checked_too(flag, tmp_path):
    """``PYTENSOR_FLAGS=compiledir=DIR`` moves the folder PyTensor loads compiled
    modules from without moving ``base_compiledir``: a folder of another user's named
    that way must be refused as ``base_compiledir=DIR`` is (issue 43 item 7)."""
    if os.getuid() != 0:
        pytest.skip("giving a file to another user needs root")
    folder = tmp_path / "theirs"
    folder.mkdir()
    os.chown(folder, 65534, 65534)
    folder.chmod(0o777)
    env = {"PYTENSOR_FLAGS": f"{flag}={folder}"}
    code, err, _ = _cli(env, tmp_path / "none.npy", tmp_path)
    assert code == 2 and err.strip().count("\n") == 0, err
    assert "PyTensor's compile folder" in err and str(folder) in err, err


# ---- the same checks from Python (issue 43, leftovers item 5) ----------------------

API_RELEASE = """
import sys
import numpy as np
import pymc_manidp as pmd
from pymc_manidp.io.ledger import open_ledger
x = np.array([[0, 0, 1.0], [0, 0.1, 0.995]])
x /= np.linalg.norm(x, axis=1, keepdims=True)
mech = pmd.KNGMechanism(pmd.Sphere(dim=2), epsilon=1.0, center=[0, 0, 1.0], radius=0.5)
budget = open_ledger(sys.argv[1], data=x, epsilon=2.0)
try:
    mech.release(x, budget=budget, random_seed=0)
except OSError as err:
    print(type(err).__module__ + "." + type(err).__name__)
    print(err)
else:
    print("released")
"""


def _api(env_changes, tmp_path):
    """What a release from Python printed (run in a fresh process from an empty folder)."""
    cwd = tmp_path / "cwd"
    cwd.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k not in env_changes}
    env.update(env_changes, PYTHONPATH=str(ROOT))
    proc = subprocess.run(
        [sys.executable, "-c", API_RELEASE, str(tmp_path / "ledger.json")],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.splitlines(), cwd


def _rc(tmp_path, text, name="pytensorrc"):
    rc = tmp_path / name
    rc.write_text(text)
    return str(rc)


@pytest.mark.parametrize("option", ["base_compiledir", "compiledir"])
def test_a_relative_compile_folder_in_a_pytensorrc_file_is_refused(option, tmp_path, data):
    # leftovers item 5: only PYTENSOR_FLAGS's compile folders were checked, not a file's
    rc = _rc(tmp_path, f"[global]\n{option} = relative/pytensor\n")
    problem = _environment_problem({"PYTENSORRC": rc})
    assert problem is not None and "\n" not in problem
    assert f"{option} = 'relative/pytensor'" in problem and "relative path" in problem
    assert (
        _environment_problem(
            {"PYTENSORRC": _rc(tmp_path, f"[global]\n{option} = /abs\n", "absolute")}
        )
        is None
    )
    code, err, cwd = _cli({"PYTENSORRC": rc}, data, tmp_path)
    _refused_in_one_line(code, err, cwd, "PYTENSORRC")


def test_a_release_from_python_checks_the_environment_and_leaves_nothing(tmp_path):
    # leftovers item 5: the checks ran in the CLI only; from Python a relative compile
    # folder compiled into the working folder. One exception type, naming the variable
    rc = _rc(tmp_path, "[global]\nbase_compiledir = relative/pytensor\n")
    lines, cwd = _api({"PYTENSORRC": rc}, tmp_path)
    assert lines[0] == "pymc_manidp.environment.BrokenEnvironmentError", lines
    assert "PYTENSORRC" in lines[1] and "make it absolute" in lines[1]
    # PyTensor made its (empty) folders when imported, before the first release could
    # check (docs/cli.md): nothing was compiled into them
    assert [p for p in cwd.rglob("*") if not p.is_dir()] == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cwd", "pytensorrc"]  # no ledger


def test_a_release_from_python_refuses_a_compile_folder_others_can_write(tmp_path):
    base = tmp_path / "pytensor"
    base.mkdir()
    base.chmod(0o777)  # writable by everyone: compiled code anyone could replace
    lines, _ = _api({"PYTENSOR_FLAGS": f"base_compiledir={base}"}, tmp_path)
    assert lines[0] == "pymc_manidp.environment.BrokenEnvironmentError", lines
    assert "PyTensor's compile folder" in lines[1] and "can be written by others" in lines[1]
    assert not (tmp_path / "ledger.json").exists()
    base.chmod(0o700)
    lines, _ = _api({"PYTENSOR_FLAGS": f"base_compiledir={base}"}, tmp_path)
    assert lines == ["released"]
