"""``.ci/setup`` installs what each entry point needs and nothing more (issue 25, item 24).

``bash .ci/run demo`` (the README's first command) must not wait for a browser or the
docs' tools, nor fail when another package manager holds apt's lock; ``bash .ci/run``
(tests, site and its checks) must still get everything on a fresh machine.

The script runs for real, on a copy in a temporary folder, with fakes that record their
arguments instead of installing: ``.venv/bin/python`` (so ``python -m pip``), ``apt-get``,
``npm`` (it packs a tiny MathJax tarball of the real layout) and ``id`` (root, so that
apt-get may be used). ``PATH`` holds only the fakes and the few real tools the script
calls, so a chromium or npm installed on this machine does not hide a missing install.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: real tools the script (and the fake npm) call
TOOLS = ("bash", "dirname", "grep", "mktemp", "tar", "gzip", "rm", "mkdir", "mv", "chmod")
TOOLS += ("touch", "cat")

RECORD = '#!/bin/sh\necho "{name} $*" >> "{log}"\n'
# npm pack mathjax@V writes mathjax-V.tgz holding package/... as the registry's does
FAKE_NPM = """#!/bin/sh
echo "npm $*" >> "{log}"
version="${{3#mathjax@}}"
mkdir -p package/es5/input package/es5/output/chtml package/es5/ui package/es5/a11y \\
  package/es5/sre
touch package/LICENSE package/es5/tex-mml-chtml.js
echo "{{\\"name\\": \\"mathjax\\", \\"version\\": \\"$version\\"}}" > package/package.json
tar -czf "mathjax-$version.tgz" package
rm -rf package
"""


def fake_root(tmp_path: Path, *, npm: bool = True) -> tuple[Path, Path, dict]:
    """A copy of .ci/setup with recording fakes; returns (root, log, env)."""
    root, bin_dir, log = tmp_path / "repo", tmp_path / "bin", tmp_path / "calls.log"
    (root / ".ci").mkdir(parents=True)
    shutil.copy(ROOT / ".ci" / "setup", root / ".ci" / "setup")
    (root / ".venv" / "bin").mkdir(parents=True)
    bin_dir.mkdir()
    log.touch()
    fakes = {root / ".venv" / "bin" / "python": RECORD.format(name="python", log=log)}
    fakes[bin_dir / "apt-get"] = RECORD.format(name="apt-get", log=log)
    fakes[bin_dir / "id"] = "#!/bin/sh\necho 0\n"
    if npm:
        fakes[bin_dir / "npm"] = FAKE_NPM.format(log=log)
    for path, text in fakes.items():
        path.write_text(text)
        path.chmod(0o755)
    for tool in TOOLS:
        real = shutil.which(tool)
        assert real, f"{tool} not found"
        (bin_dir / tool).symlink_to(real)
    return root, log, {"PATH": str(bin_dir), "HOME": str(tmp_path)}


def setup(tmp_path, *args, npm=True) -> tuple[list[str], Path]:
    """Run the copy of .ci/setup with ``args``; the recorded calls and the root."""
    root, log, env = fake_root(tmp_path, npm=npm)
    bash = shutil.which("bash")
    proc = subprocess.run(
        [bash, str(root / ".ci" / "setup"), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    return log.read_text().splitlines(), root


def pip_targets(calls: list[str]) -> list[str]:
    """What ``python -m pip install`` was asked to install (the editable targets)."""
    targets = []
    for call in calls:
        words = call.split()
        if words[:4] == ["python", "-m", "pip", "install"]:
            targets += [words[i + 1] for i, w in enumerate(words) if w == "-e"]
    return targets


def test_demo_installs_the_package_alone(tmp_path):
    calls, _ = setup(tmp_path, "demo")
    assert pip_targets(calls) == ["."]
    assert not [c for c in calls if c.startswith(("apt-get", "npm"))], calls
    assert not any("chromium" in c or "[test" in c or "[docs" in c for c in calls), calls


def test_test_setup_installs_the_test_extra_only(tmp_path):
    calls, _ = setup(tmp_path, "test")
    assert pip_targets(calls) == [".[test]"]
    assert not [c for c in calls if c.startswith(("apt-get", "npm"))], calls


def test_docs_setup_fetches_mathjax_but_no_browser(tmp_path):
    calls, root = setup(tmp_path, "docs")
    assert pip_targets(calls) == [".[docs]"]
    assert [c for c in calls if c.startswith("npm")] == ["npm pack --silent mathjax@3.2.2"]
    assert not [c for c in calls if c.startswith("apt-get")], calls
    # unpacked where docs/conf.py's mathjax_path finds it, the tarball removed
    mathjax = root / "docs" / "_build" / "vendor" / "mathjax"
    assert (mathjax / "es5" / "tex-mml-chtml.js").is_file()
    assert (mathjax / "LICENSE").is_file()
    assert sorted(p.name for p in mathjax.parent.iterdir()) == ["mathjax"]


def test_default_sets_up_everything_bash_ci_run_needs(tmp_path):
    calls, root = setup(tmp_path)
    assert pip_targets(calls) == [".[test,docs]"]
    assert "npm pack --silent mathjax@3.2.2" in calls
    assert "apt-get install -y -qq chromium" in calls, calls
    assert (root / "docs" / "_build" / "vendor" / "mathjax" / "es5" / "tex-mml-chtml.js").exists()


def test_mathjax_is_fetched_once(tmp_path):
    root, log, env = fake_root(tmp_path)
    for _ in range(2):
        subprocess.run(["bash", str(root / ".ci" / "setup"), "docs"], env=env, check=True)
    assert [c for c in log.read_text().splitlines() if c.startswith("npm")] == [
        "npm pack --silent mathjax@3.2.2"
    ]


def test_docs_setup_without_npm_installs_it_as_root(tmp_path):
    # a fresh machine may lack npm: as root it comes from apt (which here installs
    # nothing, so the script then stops with an error naming npm)
    root, log, env = fake_root(tmp_path, npm=False)
    proc = subprocess.run(
        ["bash", str(root / ".ci" / "setup"), "docs"], env=env, capture_output=True, text=True
    )
    assert "apt-get install -y -qq npm" in log.read_text().splitlines()
    assert proc.returncode == 1 and "npm not found" in proc.stderr


@pytest.mark.parametrize("arg", ["all-the-things", "site"])
def test_unknown_argument_is_refused(tmp_path, arg):
    root, log, env = fake_root(tmp_path)
    proc = subprocess.run(
        ["bash", str(root / ".ci" / "setup"), arg], env=env, capture_output=True, text=True
    )
    assert proc.returncode == 2 and "usage: bash .ci/setup [demo|test|docs]" in proc.stderr
    assert log.read_text() == ""  # refused before installing anything


PYTEST = "python -m pytest -n 2 --dist worksteal --ignore=tests/test_docs_site.py"
DOCS = ["python -m sphinx", "python -m pytest tests/test_docs_site.py"]


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["demo", "--quick"], ["setup demo", "pymc-manidp demo --quick"]),
        (["test"], ["setup test", f"{PYTEST} -m not slow"]),
        (["test", "-m", "slow"], ["setup test", f"{PYTEST} -m not slow -m slow"]),
        (["docs"], ["setup docs", "python -m sphinx"]),
        ([], ["setup", f"{PYTEST} -m not slow", f"{PYTEST} -m slow", *DOCS]),
    ],
)
def test_each_entry_point_sets_up_its_own_needs(tmp_path, args, expected):
    # .ci/run with a recording .ci/setup: each command asks for its set-up, before it runs;
    # `test` runs the default tier (a later -m replaces it), the full run both tiers
    root, log = tmp_path / "repo", tmp_path / "calls.log"
    (root / ".ci").mkdir(parents=True)
    (root / ".venv" / "bin").mkdir(parents=True)
    shutil.copy(ROOT / ".ci" / "run", root / ".ci" / "run")
    fakes = {
        root / ".ci" / "setup": RECORD.format(name="setup", log=log),
        root / ".venv" / "bin" / "python": RECORD.format(name="python", log=log),
        root / ".venv" / "bin" / "pymc-manidp": RECORD.format(name="pymc-manidp", log=log),
    }
    for path, text in fakes.items():
        path.write_text(text)
        path.chmod(0o755)
    proc = subprocess.run(
        ["bash", str(root / ".ci" / "run"), *args], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    calls = [c.rstrip() for c in log.read_text().splitlines()]
    assert len(calls) == len(expected), calls
    assert calls[0] == expected[0], calls  # the set-up first, with exactly this argument
    assert all(c.startswith(e) for c, e in zip(calls[1:], expected[1:], strict=True)), calls


# the fake pytest of the slow tier exits with the given code; the others succeed
SLOW_EXITS = (
    '#!/bin/sh\necho "python $*" >> "{log}"\ncase "$*" in *"-m slow"*) exit {code};; esac\n'
)


@pytest.mark.parametrize(("code", "runs_on"), [(5, True), (1, False), (0, True)])
def test_an_empty_slow_tier_is_not_a_failure_but_a_failing_one_is(tmp_path, code, runs_on):
    # pytest exits 5 when it selects nothing (arguments naming default-tier files only)
    root, log = tmp_path / "repo", tmp_path / "calls.log"
    (root / ".ci").mkdir(parents=True)
    (root / ".venv" / "bin").mkdir(parents=True)
    shutil.copy(ROOT / ".ci" / "run", root / ".ci" / "run")
    fakes = {
        root / ".ci" / "setup": "#!/bin/sh\n",
        root / ".venv" / "bin" / "python": SLOW_EXITS.format(log=log, code=code),
    }
    for path, text in fakes.items():
        path.write_text(text)
        path.chmod(0o755)
    proc = subprocess.run(
        ["bash", str(root / ".ci" / "run"), "tests/test_layers.py"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    calls = log.read_text()
    assert ("python -m sphinx" in calls) is runs_on, calls  # the docs come after the tests
    assert (proc.returncode == 0) is runs_on, proc.stderr
