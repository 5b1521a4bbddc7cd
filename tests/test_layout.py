"""The layout rules of docs/architecture.md, read from the source: only ``render`` imports
rich or matplotlib, pandas only on the reading side (``render`` and ``frame``; never the
measuring side), and only the command line calls ``render``; no import cycles; no private
name imported across modules; the numbers-only modules load no heavy library."""

from __future__ import annotations

import pytest
from _frameworks import needs
from _imports import import_edges, loaded_after_import, package_modules

HEAVY = ("rich", "pandas", "matplotlib")
#: Modules over the size rule, and why (see docs/architecture.md, "Size").
LONG_MODULES = {
    "ckptbench.measure.peaks": "the measurement protocol, kept in one place",
    "ckptbench.results.schema": "the schema: Case with its validation, and every result dataclass",
    "ckptbench.schedules": "the schedules and their closed forms, kept with their proofs",
}
MAX_LINES = 460  # about 450


def _in(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


#: The reading side: the only modules that may import pandas.
READING_SIDE = ("ckptbench.render", "ckptbench.frame")
#: The measuring side (and the gate): pandas never loads there, not even indirectly.
MEASURING_SIDE = (
    "ckptbench.measure.peaks",
    "ckptbench.measure.worker",
    "ckptbench.measure.launch",
    "ckptbench.measure.runner",
    "ckptbench.analysis.gate",
    "ckptbench.backends",
    "ckptbench.backends.autograd.binding",
    pytest.param(
        "ckptbench.backends.torch.binding",
        marks=needs("torch"),
    ),
    "ckptbench",
)


def test_only_render_imports_rich_matplotlib_and_pandas_only_the_reading_side() -> None:
    bad = [
        f"{e.importer}:{e.line} imports {e.target}"
        for e in import_edges()
        if (
            e.target.split(".")[0] in ("rich", "matplotlib")
            and not _in(e.importer, "ckptbench.render")
        )
        or (
            e.target.split(".")[0] == "pandas"
            and not any(_in(e.importer, side) for side in READING_SIDE)
        )
    ]
    assert bad == []


@pytest.mark.parametrize("module", MEASURING_SIDE)
def test_the_measuring_side_never_loads_pandas(module: str) -> None:
    assert loaded_after_import(module, ("pandas",)) == []


def test_only_the_command_line_calls_render() -> None:
    bad = [
        f"{e.importer}:{e.line} imports {e.target}"
        for e in import_edges()
        if _in(e.target, "ckptbench.render")
        and not (_in(e.importer, "ckptbench.render") or _in(e.importer, "ckptbench.cli"))
    ]
    assert bad == []


def test_no_import_cycles() -> None:
    modules = package_modules()
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for e in import_edges():
        if e.target in modules and e.target != e.importer:
            graph[e.importer].add(e.target)
    state: dict[str, int] = {}
    cycles: list[list[str]] = []

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycles.append([*path[path.index(nxt) :], nxt])
            elif nxt not in state:
                visit(nxt, [*path, nxt])
        state[node] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m, [m])
    assert cycles == []


def test_no_private_name_is_imported_across_modules() -> None:
    bad = [
        f"{e.importer}:{e.line} takes {name} from {e.target}"
        for e in import_edges()
        for name in e.names
        if name.startswith("_") and not name.startswith("__") and e.target != e.importer
    ]
    assert bad == []


@pytest.mark.parametrize(
    "module",
    [
        "ckptbench.analysis.gate",
        "ckptbench.sweep.run",
        "ckptbench.results.store",
        "ckptbench.analysis",
    ],
)
def test_numbers_only_modules_load_no_rendering_library(module: str) -> None:
    assert loaded_after_import(module, (*HEAVY, "click", "distributed")) == []


def test_modules_stay_small() -> None:
    long = {
        name: len(path.read_text(encoding="utf-8").splitlines())
        for name, path in package_modules().items()
    }
    over = {n: lines for n, lines in long.items() if lines > MAX_LINES and n not in LONG_MODULES}
    assert over == {}


#: Functions whose body is over :data:`MAX_FUNCTION_LINES`, still to be split (the house
#: task's size rule): each entry may only shrink or go, and no other function may join it.
LONG_FUNCTIONS: dict[str, int] = {}
MAX_FUNCTION_LINES = 80


def test_no_new_function_is_over_80_lines() -> None:
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    over = {}
    for path in sorted((root / "ckptbench").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                body = node.end_lineno - node.body[0].lineno + 1
                if body > MAX_FUNCTION_LINES:
                    over[f"{path.relative_to(root).as_posix()}:{node.name}"] = body
    grown = {k: v for k, v in over.items() if v > LONG_FUNCTIONS.get(k, MAX_FUNCTION_LINES)}
    assert grown == {}
