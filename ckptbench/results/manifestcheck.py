"""The shape of a sweep manifest (``OUT/sweep.json``) read back: what ``check``, ``compare``
and a resumed sweep rely on, checked before any of it is used, so a damaged manifest is
one line naming the field, never a traceback, and never a path outside its folder. Pure:
no I/O."""

from __future__ import annotations

import math
from typing import Any

from ckptbench.results.schema import unsupported_version
from ckptbench.schedules import STRATEGIES
from ckptbench.sweep.cells import CellState

__all__ = ["MANIFEST_VERSION", "manifest_problem"]

#: The manifest layout this ckptbench writes and reads (a newer one may mean other things).
MANIFEST_VERSION = 1

#: The [expect] thresholds recorded in a manifest's config, by kind of value.
_POSITIVE = ("memory_savings_min", "slowdown_max", "grad_max_rel_err_max")
_FLAGS = ("forward_steps_exact",)
#: The states a sweep records of a cell.
_STATES = tuple(state.value for state in CellState)


def manifest_problem(data: dict[str, Any]) -> str | None:
    """What is wrong with a manifest document's fields ("cells[2].file is not a file name in
    its folder"), or None: ``manifest_version`` this ckptbench's, ``cells`` a list of objects
    whose ``file`` is a plain file name and ``key`` a string; ``config`` an object whose
    ``expect`` (and each ``expect_by_strategy`` table) holds positive finite numbers and
    true/false flags."""
    version = data.get("manifest_version")
    if type(version) is not int or version != MANIFEST_VERSION:
        return unsupported_version("manifest_version", version, MANIFEST_VERSION)
    cells = data.get("cells", [])
    if not isinstance(cells, list):
        return f"cells is {_kind(cells)}, not a list"
    for i, cell in enumerate(cells):
        if not isinstance(cell, dict):
            return f"cells[{i}] is {_kind(cell)}, not an object"
        name = cell.get("file")
        if name is not None and not _plain_name(name):
            return f"cells[{i}].file is not a file name in its folder ({_short(name)})"
        if not isinstance(cell.get("key", ""), str):
            return f"cells[{i}].key is {_kind(cell['key'])}, not a string"
        if not cell.get("key", "").isprintable():  # printed in check's lines: one line each
            return f"cells[{i}].key must be printable text on one line, got {_short(cell['key'])}"
        if "state" in cell and cell["state"] not in _STATES:
            return (f"cells[{i}].state is {_short(cell['state'])}, not a cell state ckptbench "
                    f"knows ({', '.join(_STATES)})")  # fmt: skip
    config = data.get("config", {})
    if not isinstance(config, dict):
        return f"config is {_kind(config)}, not an object"
    tables = {"expect": config.get("expect", {})}
    by_strategy = config.get("expect_by_strategy", {})
    if not isinstance(by_strategy, dict):
        return f"config.expect_by_strategy is {_kind(by_strategy)}, not an object"
    if (unknown := next((k for k in by_strategy if k not in STRATEGIES), None)) is not None:
        return (f"config.expect_by_strategy has a table of an unknown strategy, "
                f"{_short(unknown)} (choose from {', '.join(STRATEGIES)})")  # fmt: skip
    tables |= {f"expect_by_strategy.{k}": v for k, v in by_strategy.items()}
    for where, table in tables.items():
        if not isinstance(table, dict):
            return f"config.{where} is {_kind(table)}, not an object"
        for key, value in table.items():
            if (problem := _threshold_problem(key, value)) is not None:
                return f"config.{where}.{key} {problem}"
    return None


def _threshold_problem(key: str, value: Any) -> str | None:
    if key in _FLAGS:
        return None if isinstance(value, bool) else f"is {_short(value)}, not true/false"
    if key in _POSITIVE:
        if value is None:
            return None
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        if not number or not (math.isfinite(value) and value > 0):
            return f"is {_short(value)}, not a positive number"
        return None
    return "is not a threshold ckptbench knows"


def _plain_name(name: Any) -> bool:
    return (
        isinstance(name, str)
        and name not in ("", ".", "..")
        and "/" not in name
        and "\\" not in name
        and "\0" not in name
        and name.isprintable()  # named in one line; ckptbench's own names are
    )


def _kind(value: Any) -> str:
    kinds = {list: "a list", dict: "an object", str: "a string", bool: "true/false"}
    return "null" if value is None else kinds.get(type(value), "a number")


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
