"""The layer picture: every import of the package points down (or sideways), never up.

Each module's imports are read with :mod:`ast` (module-level and inside functions, so
a lazy import counts as much as a top-level one) and each module is mapped to its
layer. The order, bottom to top (DESIGN.md's table, revised where the code showed a
better split):

==  =================  =====================================================================
0   foundation         ``rng`` (seeds and generators)
1   geometry           manifolds, charts, NumPy and PyTensor numerics
2   statistics         ``stats``: Fréchet means, sensitivity, the data domain, passes
3   exact samplers     ``samplers`` (package), ``samplers.exact``, ``samplers.random_walk``:
                       NumPy samplers of the laws, given geometry and statistics
4   laws               ``mechanisms.transforms``, ``.normalizers``, ``.distributions``: tangent
                       charts and the PyMC distributions (their ``rng_fn`` draws with the
                       exact samplers, hence above them)
5   MCMC               ``samplers.mcmc``: PyMC models built from the laws, and sampling
6   privacy            ``privacy``: the Release record, the diagnostics gate, the release
                       procedure (``privacy.procedure``), audits, coupling, inference
7   mechanisms         ``mechanisms`` (package), ``mechanisms.base`` / ``laplace`` / ``kng``:
                       mechanism objects that know ε, Δ, σ and whose ``release`` runs the
                       privacy layer's procedure (a mechanism carries its privacy map, as
                       OpenDP's Measurement: it sits on top of what it composes)
8   public API         ``pymc_manidp`` (the package's ``__init__``)
9   applications       ``baselines``, ``datasets``, ``experiments``, ``cli``, ``demo``,
                       ``files``, ``io``
==  =================  =====================================================================

Why the revision: the table's "mechanisms" row held both the laws (needed by the MCMC
samplers) and the mechanism objects (which need the samplers and the privacy gate), and
its "samplers" row held both the exact samplers (needed by the laws' ``rng_fn``) and
the MCMC samplers (which need the laws). Splitting each row in two gives an order with
no cycle; the packages keep their names and public paths.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import pymc_manidp

PACKAGE = Path(pymc_manidp.__file__).parent

#: ``(layer name, module prefixes)``, bottom to top. A module belongs to the layer of
#: its longest matching prefix (a prefix matches itself and its submodules; the bare
#: package name ``pymc_manidp`` matches only the package's ``__init__``).
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("foundation", ("pymc_manidp.rng",)),
    ("geometry", ("pymc_manidp.geometry",)),
    ("statistics", ("pymc_manidp.stats",)),
    ("exact samplers", ("pymc_manidp.samplers",)),
    (
        "laws",
        (
            "pymc_manidp.mechanisms.transforms",
            "pymc_manidp.mechanisms.normalizers",
            "pymc_manidp.mechanisms.distributions",
        ),
    ),
    ("MCMC", ("pymc_manidp.samplers.mcmc",)),
    ("privacy", ("pymc_manidp.privacy",)),
    ("mechanisms", ("pymc_manidp.mechanisms",)),
    ("public API", ("pymc_manidp",)),
    (
        "applications",
        (
            "pymc_manidp.baselines",
            "pymc_manidp.datasets",
            "pymc_manidp.experiments",
            "pymc_manidp.cli",
            "pymc_manidp.demo",
            "pymc_manidp.files",
            "pymc_manidp.io",
        ),
    ),
]

#: Upward imports allowed on purpose, ``(importer, imported): reason``. Empty: add an
#: entry only with a design reason written here, never to make the test pass.
EXCEPTIONS: dict[tuple[str, str], str] = {}


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
    """Index of ``module``'s layer in :data:`LAYERS` (longest matching prefix)."""
    best, best_len = None, -1
    for i, (_, prefixes) in enumerate(LAYERS):
        for p in prefixes:
            hit = module == p if p == "pymc_manidp" else module == p or module.startswith(p + ".")
            if hit and len(p) > best_len:
                best, best_len = i, len(p)
    if best is None:
        raise LookupError(f"{module} is in no layer: add it to LAYERS")
    return best


def upward_imports(sources: dict[str, str]) -> list[str]:
    """One line per import that points to a higher layer (and is not an exception)."""
    known = set(all_modules()) | set(sources)
    found = []
    for name, source in sorted(sources.items()):
        mine = layer_of(name)
        for target, line in imports(name, source, known):
            theirs = layer_of(target)
            if theirs > mine and (name, target) not in EXCEPTIONS:
                found.append(
                    f"{name}:{line} imports {target} "
                    f"({LAYERS[mine][0]} -> {LAYERS[theirs][0]}, upward)"
                )
    return found


def sources() -> dict[str, str]:
    """Every module's source text by dotted name."""
    return {name: path.read_text(encoding="utf-8") for name, path in all_modules().items()}


def test_every_module_has_a_layer():
    for name in all_modules():
        layer_of(name)  # raises LookupError naming the module


def test_no_import_points_up():
    found = upward_imports(sources())
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


def test_exceptions_are_still_needed():
    """An exception whose import is gone is removed from the list, not kept for later."""
    mods = sources()
    known = set(mods)
    present = {(n, t) for n, s in mods.items() for t, _ in imports(n, s, known)}
    assert set(EXCEPTIONS) <= present


@pytest.mark.parametrize(
    "name, source, culprit",
    [
        # a lazy import inside a function counts
        (
            "pymc_manidp.geometry.fake",
            "def f():\n    from pymc_manidp.privacy.release import Release\n",
            "pymc_manidp.privacy.release",
        ),
        # a submodule import through its package, and a plain import
        (
            "pymc_manidp.stats.fake",
            "from pymc_manidp.samplers import exact\n",
            "pymc_manidp.samplers.exact",
        ),
        (
            "pymc_manidp.privacy.fake",
            "import pymc_manidp.mechanisms.kng\n",
            "pymc_manidp.mechanisms.kng",
        ),
        # a relative import resolved against the importer
        (
            "pymc_manidp.mechanisms.distributions",
            "from .base import Mechanism\n",
            "pymc_manidp.mechanisms.base",
        ),
        # the laws below the MCMC samplers
        (
            "pymc_manidp.mechanisms.transforms",
            "from pymc_manidp.samplers.mcmc import sample\n",
            "pymc_manidp.samplers.mcmc",
        ),
    ],
)
def test_the_checker_catches_an_upward_import(name, source, culprit):
    found = upward_imports({name: source})
    assert len(found) == 1 and culprit in found[0] and name in found[0]


def test_the_checker_accepts_downward_and_sideways_imports():
    ok = {
        "pymc_manidp.privacy.fake": "from pymc_manidp.samplers import exact, mcmc\n"
        "from pymc_manidp.privacy.release import Release\n",
        "pymc_manidp.mechanisms.fake": (
            "def f():\n    from pymc_manidp.privacy import diagnostics\n"
        ),
    }
    assert upward_imports(ok) == []
