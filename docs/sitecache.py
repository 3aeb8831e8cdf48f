"""Where the site keeps what it computes, keyed by the package's code.

Shared by docs/conf.py and tests/test_notebooks.py: the notebook tests store executed
notebooks in :func:`jupyter_cache`, the docs build reads them from there. The key is a
hash of the package's code (docstrings left out) and data, so a change of the code gives
a fresh cache (the notebooks run again) while a docstring edit keeps it.
"""

from __future__ import annotations

import ast
import hashlib
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent


def code_without_docstrings(source: str) -> str:
    """The module's syntax tree without docstrings: docstring edits keep the figures."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (
            isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
            and body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            node.body = body[1:] or [ast.Pass()]
    return ast.dump(tree)


def source_digest() -> str:
    """A hash of the package's code and data: the reproduction is redone when it changes."""
    h = hashlib.sha256()
    pkg = ROOT / "pymc_manidp"
    for path in sorted(p for p in pkg.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        h.update(path.relative_to(pkg).as_posix().encode())
        if path.suffix == ".py":
            h.update(code_without_docstrings(path.read_text(encoding="utf-8")).encode())
        else:
            h.update(path.read_bytes())
    return h.hexdigest()[:16]


def jupyter_cache() -> Path:
    """The jupyter-cache folder of the current code: ``docs/_build/.jupyter_cache/<digest>``."""
    return DOCS / "_build" / ".jupyter_cache" / source_digest()
