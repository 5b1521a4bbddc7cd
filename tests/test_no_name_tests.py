"""No code outside the registries decides by a strategy's or a backend's name.

A strategy answers for itself (``StrategySpec``: ``uses_snaps``, ``closed_form``,
``planned``, ``fits_budget``, ``reference``, ``setting``, ``actions_for``) and a backend
for itself (``BackendSpec``); a comparison such as ``case.strategy == "optimal"`` or
``backend == "autograd"`` outside them re-derives one of those properties by name, and a
newly registered strategy or backend would silently miss that branch. This test reads every
module of the package with ``ast`` and fails on any comparison (``==``, ``!=``, ``in``,
``not in``, a ``match`` case) with a registered name, except in the registries themselves:
``schedules/__init__.py``, the family modules that declare specs, and the backends'
``backends/<name>/__init__.py`` specs.
"""

from __future__ import annotations

import ast
from pathlib import Path

from ckptbench.backends import registry
from ckptbench.schedules import STRATEGIES

PACKAGE = Path(__file__).resolve().parent.parent / "ckptbench"

#: Where names are declared: the registries and the modules holding the specs.
REGISTRIES = (
    "schedules/__init__.py",
    "schedules/strategy.py",
    "schedules/revolve.py",
    "schedules/uniform.py",
    "schedules/storeall.py",
    "schedules/peers.py",
    "schedules/optimal/__init__.py",
    "backends/registry.py",
    "backends/*/__init__.py",
)

#: Backend-name comparisons the house task (issue 24, item 1) still removes, as
#: (module path, the line's code). Delete an entry when its line goes; none may be added.
PENDING: set[tuple[str, str]] = {}


def _names() -> set[str]:
    return set(STRATEGIES) | set(registry.BACKENDS) | {"autograd", "torch", "jax"}


def _declares(rel: str) -> bool:
    return any(Path(rel).match(pattern) for pattern in REGISTRIES)


def _constants(node: ast.AST) -> list[str]:
    """The string constants a comparison operand holds (itself, or a literal collection's)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [s for elt in node.elts for s in _constants(elt)]
    return []


def _compared(tree: ast.AST, names: set[str]) -> list[tuple[int, str]]:
    hits = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            found = {s for op in operands for s in _constants(op)} & names
        elif isinstance(node, ast.match_case):
            found = {s for n in ast.walk(node.pattern) for s in _constants(n)} & names
        else:
            continue
        hits += [
            (node.lineno if hasattr(node, "lineno") else node.pattern.lineno, s) for s in found
        ]
    return hits


def name_comparisons() -> list[tuple[str, int, str, str]]:
    """(module path, line, name, the line's code) of every comparison with a registered name
    outside the registries."""
    names = _names()
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if _declares(rel):
            continue
        source = path.read_text(encoding="utf-8")
        lines = source.splitlines()
        for line, name in _compared(ast.parse(source), names):
            out.append((rel, line, name, lines[line - 1].strip()))
    return sorted(out)


def test_no_comparison_with_a_strategy_or_backend_name_outside_the_registries() -> None:
    hits = [
        f"ckptbench/{rel}:{line} compares with {name!r}: {code}"
        for rel, line, name, code in name_comparisons()
        if (rel, code) not in PENDING
    ]
    assert hits == []


def test_the_check_sees_a_name_comparison(tmp_path) -> None:
    """The reader finds the shapes it is meant to find (and not a plain string)."""
    code = (
        "a = x == 'optimal'\n"
        "b = 'store-all' != y\n"
        "c = z in ('revolve', 'w')\n"
        "d = 'autograd'\n"
        "match q:\n    case 'jax':\n        pass\n"
    )
    hits = sorted(_compared(ast.parse(code), _names()))
    assert hits == [(1, "optimal"), (2, "store-all"), (3, "revolve"), (6, "jax")]
