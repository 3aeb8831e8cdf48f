"""A CLI that speaks CLI (issue 38, items 9 and 10), through the installed command.

- item 9: a refused command creates no ledger, and the retry with ``--budget-delta``
  succeeds (the issue's reproducer, word for word);
- item 10: errors name the command's options (``--delta``, ``--budget-epsilon``), not
  the Python keyword arguments of the library's messages; ``--help`` states each
  default; a released value prints with every digit.
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from pymc_manidp import cli
from pymc_manidp.cli import messages as cli_messages
from pymc_manidp.io.ledger import read_ledger
from pymc_manidp.mcmc.settings import MCMCSettings
from tests.test_cli_budget import run  # the in-process run that asserts no traceback

ROOT = Path(__file__).parents[1]
PACKAGE = ROOT / "pymc_manidp"


def installed(*args, cwd):
    """``pymc-manidp ARGS`` as a user runs it: the console script beside this Python
    (``python -m pymc_manidp.cli`` where none is installed), importing this checkout."""
    script = Path(sys.executable).with_name("pymc-manidp")
    command = [str(script)] if script.exists() else [sys.executable, "-m", "pymc_manidp.cli"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [*command, *map(str, args)], cwd=cwd, env=env, capture_output=True, text=True, timeout=600
    )
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


@pytest.fixture
def north(tmp_path):
    """40 unit vectors around the north pole (a CSV, as a user has them)."""
    rng = np.random.default_rng(0)
    x = np.array([0, 0, 1.0]) + 0.2 * rng.normal(size=(40, 3))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    np.savetxt(tmp_path / "north.csv", x, delimiter=",")
    return "north.csv"


# --- item 9 -----------------------------------------------------------------------------------
def test_the_issue_reproducer_leaves_no_ledger_and_the_retry_succeeds(tmp_path, north):
    # issue 38 item 9, word for word: an MCMC release with a new ledger but no --delta
    argv = ["release", north, "--manifold", "sphere", "--epsilon", "1", "--center", "0,0,1"]
    argv += ["--radius", "0.7", "--sampler", "nuts", "--budget", "hx.json"]
    proc = installed(*argv, "--budget-epsilon", "1", cwd=tmp_path)
    assert proc.returncode == 2 and proc.stdout == "", proc.stderr
    # item 10 too: the way out is said in options
    assert "--delta 1e-6" in proc.stderr and "--estimate-delta" in proc.stderr
    assert "--sampler exact" in proc.stderr and "delta=" not in proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == [north]  # no hx.json, no lock
    # the retry with the ledger's delta and the release's assumed delta is charged
    retry = ["--budget-epsilon", "1", "--budget-delta", "1e-5", "--delta", "1e-6"]
    retry += ["--seed", "1", "--allow-fixed-seed", "--out", "r.json"]
    proc = installed(*argv, *retry, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    ledger = read_ledger(tmp_path / "hx.json")
    assert ledger.public()["budget"]["delta"] == 1e-5
    [entry] = ledger.entries
    assert (entry["epsilon"], entry["delta"], entry["delta_basis"]) == (1.0, 1e-6, "assumed")
    assert entry["status"] == "released"


# --- item 10: errors in options -----------------------------------------------------------------
#: what a Python keyword argument looks like in a message: ``name=`` outside a Python
#: call or repr, a name with an underscore, or a keyword opening a "must" sentence
PYTHON_CALL = re.compile(r"\b[A-Z]\w*\([^()]*\)")
KEYWORD_TEXT = re.compile(
    r"(?<![\w.\-\[])[a-z][a-z_]*=|\b(random_seed|skip_diagnostics|estimate_delta|"
    r"budget_epsilon|budget_delta|budget_plan|t_max)\b|"
    r"(?:^|: )(epsilon|delta|draws|tune|chains|radius|plan|seed) must\b"
)


def python_keywords(line: str) -> list[str]:
    """The Python keyword arguments ``line`` names (none inside a Python call)."""
    return [m.group(0) for m in KEYWORD_TEXT.finditer(PYTHON_CALL.sub("", line))]


def test_errors_name_options_through_the_installed_command(tmp_path, north):
    base = ["release", north, "--manifold", "sphere", "--epsilon", "1", "--center", "0,0,1"]
    base += ["--radius", "0.7", "--out", "o.json"]
    proc = installed(*base, "--budget", "l.json", "--budget-epsilon", "-1", cwd=tmp_path)
    assert proc.returncode == 2
    assert "error: --budget-epsilon must be a finite number > 0, got -1.0" in proc.stderr
    proc = installed(*base, "--sampler", "nuts", "--draws", "0", cwd=tmp_path)
    assert proc.returncode == 2 and "error: --draws must be an integer >= 1" in proc.stderr


#: refusals a user meets, each with the options its message must name (in-process: the
#: same main() the installed command runs, without a process start per case)
REFUSALS = {
    "nuts without delta": (
        ["--sampler", "nuts", "--budget", "l1.json", "--budget-epsilon", "1"],
        ["--delta 1e-6", "--estimate-delta", "--sampler exact"],
    ),
    "ledger epsilon": (["--budget", "l.json", "--budget-epsilon", "nan"], ["--budget-epsilon"]),
    "ledger delta": (
        ["--budget", "l.json", "--budget-epsilon", "1", "--budget-delta", "2"],
        ["--budget-delta must be in [0, 1)"],
    ),
    "release delta": (
        "--sampler nuts --budget l.json --budget-epsilon 1 --budget-delta 0.1 --delta 2".split(),
        ["--delta must be in (0, 1)"],
    ),
    "optimal without plan": (
        ["--budget", "l.json", "--budget-epsilon", "1", "--composition", "optimal"],
        ["--composition optimal needs", "--budget-plan EPS[:DELTA],...", "--composition basic"],
    ),
    "plan with basic": (
        ["--budget", "l.json", "--budget-epsilon", "1", "--budget-plan", "0.5,0.5"],
        ["for --composition optimal", "(drop --budget-plan)"],
    ),
    "plan item": (
        "--budget l.json --budget-epsilon 1 --composition optimal --budget-plan 0.1,nan".split(),
        ["--budget-plan item 2's epsilon must be a finite number"],
    ),
    "chains": (["--sampler", "nuts", "--chains", "1"], ["--chains must be an integer >= 2"]),
    "tune": (["--sampler", "metropolis", "--tune", "-1"], ["--tune must be an integer >= 0"]),
    "seed": (["--seed", "-1", "--allow-fixed-seed"], ["--seed must be a non-negative integer"]),
    "epsilon": (["--epsilon", "0"], ["--epsilon must be a finite number > 0"]),
    "radius": (["--radius", "-1"], ["--radius must be a finite number > 0"]),
    "outside the ball": (["--radius", "0.05"], ["Pass --clip to move them"]),
    "sigma past the exact range": (["--epsilon", "1e-300"], ["or --sampler nuts"]),
    "ledger missing": (["--budget", "l2.json"], ["give the budget (--budget-epsilon)"]),
}


@pytest.mark.parametrize("case", list(REFUSALS))
def test_every_refusal_names_options_not_keywords(case, tmp_path, north, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    extra, expected = REFUSALS[case]
    argv = ["release", north, "--manifold", "sphere", "--epsilon", "1", "--center", "0,0,1"]
    argv += ["--radius", "0.7", "--out", "o.json"]
    for i in range(0, len(extra), 2):  # a later option replaces an earlier one
        if extra[i] in argv and not extra[i + 1].startswith("--"):
            argv[argv.index(extra[i]) + 1] = extra[i + 1]
        else:
            argv += extra[i : i + 2]
    code, _, err = run(argv, capsys)
    line = err.strip().splitlines()[-1]
    assert code == 2 and python_keywords(line) == [], line
    for text in expected:
        assert text in line, (text, line)


def test_the_ledgers_other_budget_is_named_in_options(tmp_path, north, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    argv = ["release", north, "--manifold", "sphere", "--epsilon", "0.1", "--center", "0,0,1"]
    argv += ["--radius", "0.7", "--out", "o.json", "--budget", "l.json", "--budget-epsilon"]
    assert run([*argv, "1"], capsys)[0] == 0
    code, _, err = run([*argv, "2"], capsys)
    assert code == 2 and "a budget is fixed when its ledger is created" in err
    assert "omit --budget-epsilon, --budget-delta, --composition and --budget-plan" in err


def _library_messages():
    """Every string the package can raise or format, as its source writes it (f-string
    fields left as ``{}``)."""
    texts = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.JoinedStr):
                parts = [v.value if isinstance(v, ast.Constant) else "{}" for v in node.values]
                texts.append((path, "".join(map(str, parts))))
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                texts.append((path, node.value))
    return texts


def test_every_keyword_a_library_message_names_has_an_option():
    # the static side of item 10: every 'name=value' a message of the package writes,
    # where name is a keyword of release, is translated; a new message naming one
    # without an option fails here
    options = cli_messages._keyword_options(cli.build_parser().commands["release"])
    pattern = re.compile(rf"(?<![\w.\-\[])({'|'.join(map(re.escape, options))})=[^=]")
    found = 0
    for path, text in _library_messages():
        if path.is_relative_to(PACKAGE / "cli") or not pattern.search(PYTHON_CALL.sub("", text)):
            continue
        found += 1
        spoken = cli_messages._speak_cli(" ".join(text.split()), options)
        assert not pattern.search(PYTHON_CALL.sub("", spoken)), (path.name, spoken)
    assert found >= 15  # the messages of budget.py, base.py, domain.py, ... are seen


def test_the_translation_keeps_prose_and_python_calls():
    options = cli_messages._keyword_options(cli.build_parser().commands["release"])
    keep = [
        "Use epsilon >= 1.5 for this n, or a larger epsilon",  # prose about a quantity
        "on Sphere(dim=2, radius=1.0) for radius 0.7",  # a repr: Python, and says so
        "raise max_attempts (KNGMechanism(..., max_attempts=...))",
        "budget.plan must be null; entries[2].delta must be 0",  # ledger fields
        "the budget (epsilon = 1, delta = 0) has spent epsilon = 0.8",
    ]
    for text in keep:
        assert cli_messages._speak_cli(text, options) == text
    said = cli_messages._speak_cli(
        "Run longer (more draws/tune); skip_diagnostics=True releases", options
    )
    assert said == "Run longer (more --draws/--tune); --skip-diagnostics releases"


# --- item 10: --help states each default ---------------------------------------------------------
def _option_help(text: str, option: str) -> str:
    """The help of ``option`` in a ``--help`` text, on one line."""
    lines = text.splitlines()
    start = next(i for i, s in enumerate(lines) if re.match(rf"\s+{re.escape(option)}\b", s))
    block = [lines[start]]
    for s in lines[start + 1 :]:
        if re.match(r"\s+-", s) or not s.startswith(" "):
            break
        block.append(s)
    return " ".join(" ".join(block).split())


def test_help_states_every_default(tmp_path):
    parser = cli.build_parser()
    release_help = installed("release", "--help", cwd=tmp_path)
    assert release_help.returncode == 0
    checked = 0
    for name, command in parser.commands.items():
        text = release_help.stdout if name == "release" else command.format_help()
        for action in command.options:
            default = action.default
            if not action.option_strings or default in (None, False, "==SUPPRESS=="):
                continue
            shown = _option_help(text, action.option_strings[-1])
            assert f"(default: {default})" in shown, (name, shown)
            checked += 1
    assert checked >= 14  # every command's options with a default
    settings = MCMCSettings()
    text = release_help.stdout
    for option in cli.MCMC_OPTIONS:  # not given, the release uses MCMCSettings'
        assert f"(default: {getattr(settings, option)})" in _option_help(text, f"--{option}")
    assert "(default: kng)" in _option_help(text, "--mechanism")  # the issue's example
    assert "(default: mean)" in _option_help(text, "--statistic")
    assert "(default: 0)" in _option_help(text, "--budget-delta")
    assert "(default: basic)" in _option_help(text, "--composition")


# --- item 10: every digit of a released value ----------------------------------------------------
def test_a_rotation_1e_9_from_the_identity_prints_as_one(tmp_path):
    # three records at a rotation of 1e-9 rad about x; epsilon so large that the noise
    # (sigma ~ 1e-10) is below the offset: the value is a rotation about 1e-9 from I.
    # Six significant digits lost all but six of its digits (and never said how far
    # from the center it is)
    t = 1e-9
    rotation = np.array([[1, 0, 0], [0, np.cos(t), -np.sin(t)], [0, np.sin(t), np.cos(t)]])
    np.savetxt(tmp_path / "rot.csv", np.tile(rotation.reshape(1, 9), (3, 1)), delimiter=",")
    argv = ["release", "rot.csv", "--manifold", "rotations", "--epsilon", "1e9"]
    argv += ["--center", "identity", "--radius", "0.1", "--out", "rot.json"]
    # seeded: sigma is 1.3e-10, so the noise moves the distance by several sigma often
    # enough (0.73e-9 to 1.43e-9 in six unseeded runs; 1.72e-9 failed a clean-clone CI
    # run) for the bounds below to fail about one run in ten; seed 2 gives 0.95e-9
    argv += ["--seed", "2", "--allow-fixed-seed"]
    proc = installed(*argv, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    value = np.array(json.loads((tmp_path / "rot.json").read_text())["release"]["value"])
    printed = proc.stdout.split("released value: ")[1].split("geodesic distance")[0]
    shown = np.array(json.loads(printed))  # separators are commas: the digits read back
    assert np.array_equal(shown, value)  # every digit, not six
    # the distance from the center (I): the rotation angle, here read from the
    # antisymmetric part (arccos of the trace loses it to rounding near 0)
    angle = (
        np.linalg.norm(
            [value[2, 1] - value[1, 2], value[0, 2] - value[2, 0], value[1, 0] - value[0, 1]]
        )
        / 2
    )
    far = float(proc.stdout.split("geodesic distance from --center: ")[1].split()[0])
    assert 0.5e-9 < far < 1.5e-9 and far == pytest.approx(angle, rel=1e-6)
