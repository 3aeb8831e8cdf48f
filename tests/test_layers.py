"""The layer picture: folders are layers, and every import points down.

Each module's imports are read with :mod:`ast` (module level and inside functions, so a
lazy import counts as much as a top-level one); importing ``a.b.c`` also runs the
``__init__`` of package ``a.b``, so it counts as an import of that package too. A
second check is dynamic: importing a folder (in a fresh interpreter) may load no module
of a higher layer, whatever its ``__init__`` does. The order, bottom to top
(docs/architecture.md):

==  ===========  ==========================================================================
0   rng          input checks (``_validation``), the package's options (``_options``),
                 seeds and generators (``rng``), progress displays (``_progress``), the
                 environment's check (``environment``)
1   geometry     the Manifold protocol, one file per manifold, private kernels; no PyMC
2   stats        Fréchet means, sensitivities, the public domain, passes over the data
3   laws         Laplace and KNG: log-densities, charts, normalizers, exact samplers, the
                 PyMC distributions, noise-aware models
4   mcmc         the PyMC model of a law, sampling (nutpie, PyMC), the compile cache, kernels
5   privacy      the Release record, the diagnostics gate, audits, the delta estimate
6   mechanisms   mechanism objects that own their release (Laplace, KNG, baselines)
7   public API   ``pymc_manidp`` itself (its names load lazily: it imports nothing)
8   io           users' files and out-of-core stores
9   datasets     generators and the shipped data
10  experiments  the papers' experiments
11  demo         the README's first command
12  cli          the command line
==  ===========  ==========================================================================

One prefix per layer, no exceptions: an import between two folders goes down or fails.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

import pymc_manidp

PACKAGE = Path(pymc_manidp.__file__).parent

#: ``(layer name, module prefix)``, bottom to top. A prefix matches itself and its
#: submodules; the bare package name matches only the package's ``__init__``.
#: Layer 0 is three modules that import nothing of the package but each other, in this
#: order: the input checks, the options they validate, the rule for seeds.
LAYERS: list[tuple[str, str]] = [
    ("validation", "pymc_manidp._validation"),
    ("options", "pymc_manidp._options"),
    ("rng", "pymc_manidp.rng"),
    ("progress", "pymc_manidp._progress"),
    ("environment", "pymc_manidp.environment"),
    ("geometry", "pymc_manidp.geometry"),
    ("stats", "pymc_manidp.stats"),
    ("laws", "pymc_manidp.laws"),
    ("mcmc", "pymc_manidp.mcmc"),
    ("privacy", "pymc_manidp.privacy"),
    ("mechanisms", "pymc_manidp.mechanisms"),
    ("public API", "pymc_manidp"),
    ("io", "pymc_manidp.io"),
    ("datasets", "pymc_manidp.datasets"),
    ("experiments", "pymc_manidp.experiments"),
    ("demo", "pymc_manidp.demo"),
    ("cli", "pymc_manidp.cli"),
]


def module_name(path: Path) -> str:
    """``pymc_manidp/stats/domain.py`` -> ``pymc_manidp.stats.domain``.

    A package's ``__init__.py`` is the package itself.
    """
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def all_modules() -> dict[str, Path]:
    """Every module of the package by dotted name."""
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def imports(name: str, source: str, known: set[str]) -> list[tuple[str, int]]:
    """``(imported module, line)`` for every import of the package in ``source``.

    ``from pkg import x`` counts as an import of ``pkg.x`` when that is a module (a
    submodule import), else of ``pkg``. Relative imports are resolved against ``name``.
    """
    is_package = name in known and (PACKAGE.parent / name.replace(".", "/")).is_dir()
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out += [(a.name, node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            mod = node.module or ""
            if node.level:
                base = name.split(".")
                base = base[: len(base) - node.level + (1 if is_package else 0)]
                mod = ".".join([*base, mod] if mod else base)
            for a in node.names:
                sub = f"{mod}.{a.name}"
                out.append((sub if sub in known else mod, node.lineno))
    # one entry per (module, line): ``from m import a, b`` is one import of m
    return sorted(
        {(m, line) for m, line in out if m == "pymc_manidp" or m.startswith("pymc_manidp.")}
    )


def layer_of(module: str) -> int:
    """Index of ``module``'s layer in :data:`LAYERS`."""
    for i, (_, prefix) in enumerate(LAYERS):
        if prefix != "pymc_manidp" and (module == prefix or module.startswith(prefix + ".")):
            return i
    if module == "pymc_manidp":
        return [p for _, p in LAYERS].index("pymc_manidp")
    raise LookupError(f"{module} is in no layer: add its folder to LAYERS")


def with_packages(target: str) -> list[str]:
    """``target`` and the packages whose ``__init__`` importing it runs (not the root's:
    it imports nothing, checked by :func:`test_importing_a_folder_loads_nothing_above_it`)."""
    parts = target.split(".")
    return [*(".".join(parts[:i]) for i in range(2, len(parts))), target]


def bad_imports(sources: dict[str, str]) -> list[str]:
    """One line per import that points to another folder at the same or a higher layer."""
    known = set(all_modules()) | set(sources)
    found = []
    for name, source in sorted(sources.items()):
        mine = layer_of(name)
        for target, line in imports(name, source, known):
            for mod in with_packages(target):
                theirs = layer_of(mod)
                if theirs > mine:
                    found.append(
                        f"{name}:{line} imports {mod} "
                        f"({LAYERS[mine][0]} -> {LAYERS[theirs][0]}, upward)"
                    )
    return found


def sources() -> dict[str, str]:
    """Every module's source text by dotted name."""
    return {name: path.read_text(encoding="utf-8") for name, path in all_modules().items()}


def test_one_prefix_per_folder():
    """Every folder (and top-level module) of the package is one layer, and no more."""
    tops = {p.stem for p in PACKAGE.iterdir() if p.suffix == ".py" and p.stem != "__init__"}
    tops |= {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    prefixes = {p.split(".", 1)[1] for _, p in LAYERS if p != "pymc_manidp"}
    assert tops == prefixes


def test_every_module_has_a_layer():
    for name in all_modules():
        layer_of(name)  # raises LookupError naming the module


def test_no_import_points_up():
    found = bad_imports(sources())
    assert not found, "upward imports:\n" + "\n".join(found)


def find_cycle(sources: dict[str, str]) -> list[str] | None:
    """An import cycle among ``sources`` (``[a, b, ..., a]``), or None.

    Lazy imports count: a function-level import that closes a cycle only hides it.
    """
    known = set(all_modules()) | set(sources)
    graph = {
        n: {t for t, _ in imports(n, s, known) if t in sources and t != n}
        for n, s in sources.items()
    }
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(node, path):
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state and (cycle := visit(nxt, [*path, nxt])):
                return cycle
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node, [node])):
            return cycle
    return None


def test_the_module_graph_has_no_cycle():
    """Within a layer too: no module reaches itself through imports."""
    cycle = find_cycle(sources())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_the_cycle_finder_sees_a_lazy_cycle():
    fake = {
        "pymc_manidp.stats.a": "from pymc_manidp.stats import b\n",
        "pymc_manidp.stats.b": "def f():\n    from pymc_manidp.stats.a import g\n",
    }
    assert find_cycle(fake) == ["pymc_manidp.stats.a", "pymc_manidp.stats.b", "pymc_manidp.stats.a"]


@pytest.mark.parametrize(
    "name, source, culprit",
    [
        # a lazy import inside a function counts
        (
            "pymc_manidp.geometry.fake",
            "def f():\n    from pymc_manidp.privacy.release import Release\n",
            "pymc_manidp.privacy",
        ),
        # a submodule import through its package, and a plain import
        ("pymc_manidp.stats.fake", "from pymc_manidp.laws import exact\n", "pymc_manidp.laws"),
        ("pymc_manidp.privacy.fake", "import pymc_manidp.mechanisms.kng\n", "mechanisms"),
        # a relative import resolved against the importer
        ("pymc_manidp.laws.fake", "from ..mcmc import sample\n", "pymc_manidp.mcmc"),
        # the laws below MCMC, MCMC below privacy
        ("pymc_manidp.laws.charts", "from pymc_manidp.mcmc.model import x\n", "mcmc"),
        ("pymc_manidp.mcmc.fake", "from pymc_manidp.privacy import Release\n", "privacy"),
        # the public API is above every layer below it
        ("pymc_manidp.mechanisms.fake", "import pymc_manidp as pmd\n", "public API"),
    ],
)
def test_the_checker_catches_an_upward_import(name, source, culprit):
    found = bad_imports({name: source})
    assert found and all(culprit in f and name in f for f in found)


def test_a_planted_upward_import_in_a_real_module_fails_the_test():
    """Plant an upward import in a copy of a real module's source: the check fails."""
    mods = sources()
    mods["pymc_manidp.stats.domain"] += "\ndef _planted():\n    from pymc_manidp import mcmc\n"
    found = bad_imports(mods)
    assert len(found) == 1 and "pymc_manidp.stats.domain" in found[0]


def test_the_checker_accepts_downward_and_same_folder_imports():
    ok = {
        "pymc_manidp.privacy.fake": "from pymc_manidp import mcmc\n"
        "from pymc_manidp.laws import exact\n"
        "from pymc_manidp.privacy.release import Release\n",
        "pymc_manidp.mechanisms.fake": "def f():\n    from pymc_manidp.privacy import release\n",
        "pymc_manidp.cli": "import pymc_manidp as pmd\n",
    }
    assert bad_imports(ok) == []


_LOADED = """
import importlib, json, pkgutil, sys
pkg = importlib.import_module({name!r})
if {name!r} != "pymc_manidp" and hasattr(pkg, "__path__"):
    for info in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + "."):
        importlib.import_module(info.name)
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] in
                        ("pymc_manidp", "pymc", "pytensor", "arviz", "nutpie"))))
"""


def loaded_by(name: str) -> list[str]:
    """The modules a fresh interpreter holds after importing ``name`` and its submodules."""
    out = subprocess.run(
        [sys.executable, "-c", _LOADED.format(name=name)],
        capture_output=True,
        text=True,
        check=True,
        cwd=PACKAGE.parent,
    )
    return json.loads(out.stdout.splitlines()[-1])


@pytest.mark.parametrize(
    "prefix",
    [p for _, p in LAYERS[: LAYERS.index(("mechanisms", "pymc_manidp.mechanisms")) + 1]]
    + ["pymc_manidp"],
)
def test_importing_a_folder_loads_nothing_above_it(prefix):
    """Dynamic: ``__init__`` side effects and lazy imports run at import time included."""
    mine = layer_of(prefix)
    loaded = loaded_by(prefix)
    # the root package is every module's parent: its __init__ imports nothing (below)
    above = [m for m in loaded if m.startswith("pymc_manidp.") and layer_of(m) > mine]
    assert not above, f"importing {prefix} loads {above}"
    if prefix == "pymc_manidp":  # the public names load on first use only
        assert loaded == ["pymc_manidp"]


def test_geometry_loads_no_pymc():
    """NumPy users of the manifolds need no PyMC (geometry's PyTensor twins load lazily)."""
    loaded = loaded_by("pymc_manidp.geometry")
    assert not [m for m in loaded if m.split(".")[0] in ("pymc", "arviz", "nutpie")]
