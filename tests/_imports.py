"""Test helpers: which modules a fresh interpreter loads after importing one module, and the
import statements of the package read from its source (for the layout rules)."""

from __future__ import annotations

import ast
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "ckptbench"


def loaded_after_import(module: str, candidates: tuple[str, ...]) -> list[str]:
    """The ``candidates`` present in ``sys.modules`` of a fresh Python after ``import module``."""
    code = f"import sys, {module}; print(','.join(m for m in {candidates!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return [m for m in out.stdout.strip().split(",") if m]


@dataclass(frozen=True)
class ImportEdge:
    """One import statement of a ckptbench module, resolved to the module it loads."""

    importer: str  # dotted name of the importing module
    target: str  # dotted name of the imported module (a submodule when one is named)
    names: tuple[str, ...]  # names taken with ``from target import ...``
    line: int


def _module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def import_edges() -> list[ImportEdge]:
    """Every runtime import (module level or inside functions; not ``if TYPE_CHECKING``)
    of every module of the package, read from the source with ``ast``."""
    modules = {_module_name(p) for p in PACKAGE.rglob("*.py")}
    edges = []
    for path in sorted(PACKAGE.rglob("*.py")):
        importer = _module_name(path)
        tree = ast.parse(path.read_text(encoding="utf-8"))
        skip: set[int] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.If) and _is_type_checking(node):
                skip.update(id(n) for child in node.body for n in ast.walk(child))
        for node in ast.walk(tree):
            if id(node) in skip:
                continue
            if isinstance(node, ast.Import):
                for alias in node.names:
                    edges.append(ImportEdge(importer, alias.name, (), node.lineno))
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                plain = []
                for alias in node.names:
                    sub = f"{node.module}.{alias.name}"
                    if sub in modules:  # "from pkg import submodule"
                        edges.append(ImportEdge(importer, sub, (), node.lineno))
                    else:
                        plain.append(alias.name)
                if plain:
                    edges.append(ImportEdge(importer, node.module, tuple(plain), node.lineno))
    return edges


def package_modules() -> dict[str, Path]:
    return {_module_name(p): p for p in PACKAGE.rglob("*.py")}
