"""Sphinx configuration of the pymc-manidp site (``bash .ci/run docs``).

Sources: the Markdown pages in ``docs/``, the notebooks in ``notebooks/`` (through the
``docs/notebooks`` symlink, executed by MyST-NB through its jupyter-cache, so an unchanged
notebook is never run twice), an API reference generated from every package's
``__all__`` (autosummary + numpydoc, validated), and a gallery of the figures that
``pymc-manidp reproduce all --quick`` draws.

Quick local pass over the text (not what CI runs): ``MANIDP_DOCS_GALLERY=off bash .ci/run
docs -D nb_execution_mode=off`` skips the reproduction run (the gallery gets stubs) and
the notebooks' execution.
"""

from __future__ import annotations

import importlib
import inspect
import os
import re
import shutil
import subprocess
import sys
import zlib
from pathlib import Path

from sphinx.util import logging

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
sys.path.insert(0, str(ROOT))  # document this checkout, not an installed copy

import pymc_manidp  # noqa: E402

sys.path.insert(0, str(DOCS))
import sitecache  # noqa: E402  (not "from": a conf name jupyter_cache is a MyST-NB option)

logger = logging.getLogger("pymc_manidp.docs")

# --- project ---------------------------------------------------------------------------
project = "pymc-manidp"
author = "the pymc-manidp developers"
copyright = "2026, the pymc-manidp developers"
release = pymc_manidp.__version__
version = release

extensions = [
    "myst_nb",  # Markdown pages and notebooks (brings myst_parser)
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.intersphinx",
    "sphinx.ext.mathjax",
    "numpydoc",
    "sphinx_copybutton",
]
source_suffix = {".rst": "restructuredtext", ".md": "myst-nb", ".ipynb": "myst-nb"}
root_doc = "index"
templates_path = ["_templates"]
exclude_patterns = [
    "_build",
    "_generated/gallery/*.md",  # figure lists, included by gallery.md
    "benchmarks",
    "notebooks/README.md",  # its table is in notebooks.md; the file is for GitHub readers
    "**.ipynb_checkpoints",
]

# Warnings are errors (-W) and every cross-reference must resolve: the public API is
# checked for broken links and missing docstrings on every build.
nitpicky = True

# --- MyST and notebooks ----------------------------------------------------------------
myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence", "deflist"]
myst_heading_anchors = 3
#: The notebook tests (tests/test_notebooks.py) execute each notebook once with nbclient
#: and store it here; the docs build then finds it and does not execute it again. One
#: cache per version of the package's code (docs/sitecache.py): outputs never go stale.
JUPYTER_CACHE = sitecache.jupyter_cache()
nb_execution_mode = "cache"
nb_execution_cache_path = str(JUPYTER_CACHE)
nb_execution_timeout = 600
nb_execution_raise_on_error = True  # a notebook that fails is a failed build
nb_execution_show_tb = True
nb_merge_streams = True

# --- API reference: autosummary, autodoc, numpydoc -------------------------------------
autosummary_generate = True
autosummary_ignore_module_all = False  # a package's public names are its __all__
autodoc_typehints = "none"  # numpydoc's Parameters section carries the types (and shapes)
autodoc_default_options = {"member-order": "bysource"}
numpydoc_show_class_members = False  # the class template lists members (autodoc)
numpydoc_class_members_toctree = False
numpydoc_attributes_as_param_list = True

# Validation: every docstring the API reference renders is checked; a failure is a
# warning, so -W fails the build. Left out: the extended summary, "See Also" and an
# example on *every* method (the module and class docstrings carry the examples, and
# the doctests run them), and two layout rules (summary on the first line; a period at
# the end of each parameter description) that the existing docstrings do not follow.
numpydoc_validation_checks = {"all", "ES01", "SA01", "EX01", "GL01", "PR09", "RT02"}

#: Public objects left out of the checks above: none (emptied 2026-11-23, once the
#: parallel work was merged). Keep it empty: fix the docstring, do not add an entry.
NUMPYDOC_TEMPORARY_EXCLUDE: list[str] = []
# A record class (a dataclass users read, not build) documents its fields under Attributes.
numpydoc_validation_overrides = {"PR01": [r"Attributes\n\s*-{3,}"]}
#: Scope: the full checks apply to every name in a documented module's ``__all__``
#: (classes, functions, constants). Methods and properties of those classes (a dotted
#: name after a capitalized class name) must have a docstring (``undocumented_members``
#: below fails the build otherwise) but are not held to full Parameters/Returns sections
#: yet.
MEMBERS = r"^pymc_manidp(\.[a-z_]\w*)+\.[A-Z]\w*\.\w+$"
#: A typing.Protocol has no constructor of its own (numpydoc sees ``*args, **kwargs``).
PROTOCOLS = [
    r"^pymc_manidp\.geometry\.Manifold$",
    # the optional members' protocols (geometry/capabilities.py)
    r"^pymc_manidp\.geometry\.(AmbientMeanStart|BallExit|GaussianChart|GenericPoint"
    r"|LaplaceNormalizer|NoiseMap|Origin|Projection|UniformLaw)$",
]
numpydoc_validation_exclude = {MEMBERS, *PROTOCOLS} | {
    re.escape(name) + "$" for name in NUMPYDOC_TEMPORARY_EXCLUDE
}

#: Cross-references allowed to stay unresolved: none. A docstring that names a private
#: helper says it in words (``_kng_shells``), not as a reference.
NITPICK_TEMPORARY_IGNORE: list[tuple[str, str]] = []
nitpick_ignore = list(NITPICK_TEMPORARY_IGNORE)

# --- intersphinx, offline --------------------------------------------------------------
# The build machines reach package registries only, not the projects' documentation
# sites, and no installed wheel ships an objects.inv. So by default the inventories are
# written here, at build time, from the short table below (the external names our
# docstrings refer to, with their pages on the official sites): intersphinx then links
# them exactly as it would with the downloaded inventories, and the build is offline and
# reproducible. With MANIDP_DOCS_ONLINE=1 the projects' own inventories are fetched
# instead (a machine with internet access).
EXTERNAL = {
    "numpy": (
        "https://numpy.org/doc/stable/",
        [
            ("py:class", "numpy.ndarray", "reference/generated/numpy.ndarray.html"),
            ("py:class", "numpy.random.Generator", "reference/random/generator.html"),
            (
                "py:class",
                "numpy.random.SeedSequence",
                "reference/random/bit_generators/generated/numpy.random.SeedSequence.html",
            ),
            (
                "py:function",
                "numpy.random.default_rng",
                "reference/random/generator.html#numpy.random.default_rng",
            ),
        ],
    ),
    "pymc": (
        "https://www.pymc.io/projects/docs/en/stable/",
        [
            ("py:class", "pymc.Model", "api/generated/pymc.Model.html"),
            ("py:class", "pymc.CustomDist", "api/distributions/generated/pymc.CustomDist.html"),
            ("py:function", "pymc.sample", "api/generated/pymc.sample.html"),
            ("py:class", "pymc.Data", "api/generated/pymc.Data.html"),
        ],
    ),
    "arviz": (
        "https://python.arviz.org/en/stable/",
        [
            ("py:function", "arviz.rhat", "api/generated/arviz.rhat.html"),
            ("py:function", "arviz.ess", "api/generated/arviz.ess.html"),
        ],
    ),
}


def write_inventory(path: Path, project_name: str, entries) -> None:
    """Write a Sphinx objects.inv (format version 2) holding ``entries``."""
    header = (
        "# Sphinx inventory version 2\n"
        f"# Project: {project_name}\n"
        "# Version: stable\n"
        "# The remainder of this file is compressed using zlib.\n"
    )
    body = "".join(f"{name} {role} 1 {uri} -\n" for role, name, uri in entries)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(header.encode() + zlib.compress(body.encode()))


if os.environ.get("MANIDP_DOCS_ONLINE") == "1":
    intersphinx_mapping = {name: (url, None) for name, (url, _) in EXTERNAL.items()}
else:
    intersphinx_mapping = {}
    for name, (url, entries) in EXTERNAL.items():
        inv = DOCS / "_build" / "inventories" / f"{name}.inv"
        write_inventory(inv, name, entries)
        intersphinx_mapping[name] = (url, str(inv))

# --- the API pages: one per package, listing its __all__ ---------------------------
#: The packages of the API reference, bottom layer first: the toctree of docs/api/index.rst.
API_PACKAGES = [
    "pymc_manidp.rng",
    "pymc_manidp.environment",
    "pymc_manidp.geometry",
    # the manifolds' own pages: their module-level formulas and converters
    "pymc_manidp.geometry.rotations",
    "pymc_manidp.geometry.hyperbolic",
    "pymc_manidp.stats",
    "pymc_manidp.stats.reductions",
    "pymc_manidp.laws",
    "pymc_manidp.laws.normalizers",
    "pymc_manidp.mcmc",
    "pymc_manidp.privacy",
    "pymc_manidp.mechanisms",
    "pymc_manidp.io",
    "pymc_manidp.datasets",
    "pymc_manidp.experiments",
]
API_GENERATED = DOCS / "api" / "generated"


def defining_module(package: str, name: str) -> str:
    """The module whose source assigns ``name`` (where autodoc finds its ``#:`` comment)."""
    obj = getattr(importlib.import_module(package), name)
    for modname in sorted(sys.modules):
        if modname.startswith(package + ".") and vars(sys.modules[modname]).get(name) is obj:
            source = inspect.getsource(sys.modules[modname])
            if re.search(rf"^{name}\b.*=", source, re.MULTILINE):
                return modname
    return package


def package_page(modname: str) -> str:
    """The reST page of one package: its docstring and a table per kind of public name.

    Written here rather than by an autosummary module template because autosummary takes
    an already imported subpackage (``pymc_manidp.geometry``) for an attribute of its
    parent; a package's public names are exactly its ``__all__``.
    """
    title = modname.replace("_", r"\_")
    out = [title, "=" * len(title), "", f".. automodule:: {modname}", "   :no-members:", ""]
    out += [f".. currentmodule:: {modname}", ""]
    for kind, names in package_kinds(modname).items():
        if not names:
            continue
        # stubs use docs/_templates/autosummary/{class,exception,data}.rst
        out += [
            kind,
            "-" * len(kind),
            "",
            ".. autosummary::",
            "   :toctree: .",
            "   :nosignatures:",
        ]
        out += [""] + [f"   {n}" for n in sorted(names, key=str.lower)] + [""]
    return "\n".join(out)


def package_kinds(modname: str) -> dict[str, list[str]]:
    """A package's ``__all__`` by kind, each name as its autosummary entry.

    A constant's entry is relative to ``modname`` and names the module whose ``#:``
    comment documents it (``cities.ATTRIBUTION``).
    """
    module = importlib.import_module(modname)
    kinds: dict[str, list[str]] = {
        "Classes": [],
        "Functions": [],
        "Exceptions and warnings": [],
        "Constants": [],
    }
    for name in module.__all__:
        obj = getattr(module, name)
        if inspect.isclass(obj) and issubclass(obj, BaseException):
            kinds["Exceptions and warnings"].append(name)
        elif inspect.isclass(obj):
            kinds["Classes"].append(name)
        elif callable(obj):
            kinds["Functions"].append(name)
        else:
            const = defining_module(modname, name) + "." + name
            kinds["Constants"].append(const.removeprefix(modname + "."))
    return kinds


API_GENERATED.mkdir(parents=True, exist_ok=True)
#: Module-level constants: documented by a ``#:`` comment, which numpydoc's section rules
#: do not fit; ``undocumented_members`` still fails the build on a missing one.
CONSTANTS = [
    f"{m}.{name}"
    for m in API_PACKAGES
    for name in importlib.import_module(m).__all__
    if not callable(getattr(importlib.import_module(m), name))
]
CONSTANTS = [
    defining_module(c.rpartition(".")[0], c.rpartition(".")[2]) + "." + c.rpartition(".")[2]
    for c in CONSTANTS
]
numpydoc_validation_exclude |= {re.escape(name) + "$" for name in CONSTANTS}
_pages = set()
for _modname in API_PACKAGES:
    _page = API_GENERATED / f"{_modname}.rst"
    _text = package_page(_modname)
    if not _page.exists() or _page.read_text(encoding="utf-8") != _text:
        _page.write_text(_text, encoding="utf-8")  # unchanged pages keep their mtime
    # the page and the stubs autosummary writes for it ("<currentmodule>.<entry>.rst")
    _pages |= {_page.name} | {
        f"{_modname}.{entry}.rst" for names in package_kinds(_modname).values() for entry in names
    }
# A name dropped from an __all__ leaves its stub behind (autosummary never deletes one):
# an orphan page (a warning, so -W fails) documenting a name that is no longer public.
for _stub in API_GENERATED.glob("*.rst"):
    if _stub.name not in _pages:
        _stub.unlink()

# --- HTML ------------------------------------------------------------------------------
html_theme = "pydata_sphinx_theme"
html_title = "pymc-manidp"
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    "secondary_sidebar_items": ["page-toc"],
}
html_show_sourcelink = False

# --- MathJax, shipped with the site ----------------------------------------------------
# Sphinx loads MathJax from a CDN by default: offline, every formula would be raw TeX.
# .ci/setup (docs) unpacks MathJax from the npm registry into docs/_build/vendor/mathjax
# (not committed); html_static_path copies it into the site's _static/, and mathjax_path
# (relative: to _static/) points there, so the built site is complete offline.
VENDOR = DOCS / "_build" / "vendor"
mathjax_path = "mathjax/es5/tex-mml-chtml.js"
html_static_path: list[str] = [str(VENDOR)] if (VENDOR / mathjax_path).is_file() else []


def check_mathjax(app) -> None:
    """Warn (so -W fails the build) when the local MathJax is missing."""
    if not (VENDOR / mathjax_path).is_file():
        logger.warning(
            "MathJax not found at %s: the site's formulas would not render. Fetch it "
            "with `bash .ci/setup docs` (npm pack mathjax, from the npm registry)",
            VENDOR / mathjax_path,
        )


# --- gallery of the papers' figures ----------------------------------------------------
GALLERY = DOCS / "_generated" / "gallery"


def reproduce_figures(app) -> None:
    """Run ``pymc-manidp reproduce all --quick`` (cached by source hash); write the gallery.

    The figures are those of docs/reproduction.md, drawn by the command line from this
    checkout; ``gallery.md`` includes one generated ``_generated/gallery/<experiment>.md``
    per experiment, under a section that states what the paper shows.
    """
    if os.environ.get("MANIDP_DOCS_GALLERY") == "off":
        # Local iteration on the text (never set by .ci/run): no reproduction run; the
        # gallery's includes are stubs, so the build still resolves them.
        GALLERY.mkdir(parents=True, exist_ok=True)
        for include in re.findall(
            r"_generated/gallery/(\w+)\.md", (DOCS / "gallery.md").read_text()
        ):
            stub = GALLERY / f"{include}.md"
            if not stub.exists():
                stub.write_text("(gallery skipped: MANIDP_DOCS_GALLERY=off)\n", encoding="utf-8")
        return
    cache = DOCS / "_build" / "reproduction" / sitecache.source_digest()
    if not (cache / "done").exists():
        shutil.rmtree(cache.parent, ignore_errors=True)
        cache.mkdir(parents=True)
        env = dict(
            os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
        )
        env["MPLBACKEND"] = "Agg"
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pymc_manidp.cli",
                "reproduce",
                "all",
                "--quick",
                "--out",
                str(cache),
            ],
            check=True,
            env=env,
            stdout=subprocess.DEVNULL,
        )
        (cache / "done").write_text("ok\n")
    GALLERY.mkdir(parents=True, exist_ok=True)
    sections = (DOCS / "gallery.md").read_text(encoding="utf-8")
    for folder in sorted(p for p in cache.iterdir() if p.is_dir()):
        pngs = sorted(folder.glob("*.png"))
        if not pngs:
            continue
        include = f"_generated/gallery/{folder.name}.md"
        if include not in sections:
            # a new experiment must get its section (and the paper's statement) in gallery.md
            logger.warning("docs/gallery.md has no section including %s", include)
        lines = []
        for png in pngs:
            target = GALLERY / folder.name / png.name
            target.parent.mkdir(exist_ok=True)
            if not target.exists() or target.read_bytes() != png.read_bytes():
                shutil.copyfile(png, target)  # unchanged files keep their mtime
            lines += [
                f"```{{figure}} /_generated/gallery/{folder.name}/{png.name}",
                f":alt: {folder.name}: {png.stem}",
                "",
                f"`{folder.name}/{png.name}` (`pymc-manidp reproduce {folder.name} --quick`)",
                "```",
                "",
            ]
        page = GALLERY / f"{folder.name}.md"
        text = "\n".join(lines)
        if not page.exists() or page.read_text(encoding="utf-8") != text:
            page.write_text(text, encoding="utf-8")


# --- cross-references to re-exported names ---------------------------------------------
def documented_names(app) -> dict[int, str]:
    """Map id(object) -> the name under which the API reference documents it."""
    names = {}
    for fullname in app.env.domaindata["py"]["objects"]:
        mod, _, attr = fullname.rpartition(".")
        try:
            obj = getattr(importlib.import_module(mod), attr)
        except (ImportError, AttributeError, ValueError):
            continue
        names.setdefault(id(obj), fullname)
    return names


def resolve_reexports(app, env, node, contnode):
    """Resolve a name by its defining module to where the reference documents it.

    E.g. ``pymc_manidp.privacy.release.Release`` to ``pymc_manidp.privacy.Release``.

    Docstrings may name an object by the module that defines it; the reference documents it
    where users import it from. Only objects the reference documents are resolved, so a
    reference to a private helper still fails the (nitpicky) build.
    """
    if node.get("refdomain") != "py":
        return None
    target = node.get("reftarget", "")
    candidates = [target]
    if node.get("py:module"):
        candidates.append(f"{node['py:module']}.{target}")
    for cand in candidates:
        parts = cand.split(".")
        for i in range(len(parts) - 1, 0, -1):
            try:
                obj = importlib.import_module(".".join(parts[:i]))
            except ImportError:
                continue
            try:
                for attr in parts[i:]:
                    obj = getattr(obj, attr)
            except AttributeError:
                break
            if not hasattr(app, "_manidp_names"):
                app._manidp_names = documented_names(app)
            name = app._manidp_names.get(id(obj))
            if name is None or name == target:
                break
            py = env.get_domain("py")
            return py.resolve_xref(
                env, node["refdoc"], app.builder, node["reftype"], name, node, contnode
            )
    return None


def undocumented_members(app, what, name, obj, options, lines):
    """Warn (so -W fails the build) on a public method, property or constant without a docstring."""
    if any(name == ex or name.startswith(ex + ".") for ex in NUMPYDOC_TEMPORARY_EXCLUDE):
        return
    if what in {"method", "property", "classmethod", "staticmethod", "data"} and not any(
        line.strip() for line in lines
    ):
        logger.warning("public member %s has no docstring", name)


#: PyMC's distribution plumbing (``rv_op``, ``rv_type``): PyMC calls it, users do not.
PYMC_PLUMBING = {"rv_op", "rv_type"}


def skip_plain_attributes(app, what, name, obj, skip, options):
    """Document methods and properties of a class; its data fields belong in its docstring.

    A class-valued attribute is documented only when the class is defined inside its
    owner (a nested class), not when it is an alias of a module-level class.
    """
    if what != "class":
        return None
    if name in PYMC_PLUMBING:
        return True
    if inspect.isclass(obj):
        return "." not in obj.__qualname__ or None
    if not (inspect.isroutine(obj) or isinstance(obj, property)):
        return True
    return None


def setup(app):
    app.connect("builder-inited", check_mathjax)
    app.connect("builder-inited", reproduce_figures)
    app.connect("missing-reference", resolve_reexports)
    app.connect("autodoc-skip-member", skip_plain_attributes)
    # before numpydoc's handler, which appends lines to every docstring
    app.connect("autodoc-process-docstring", undocumented_members, priority=100)
