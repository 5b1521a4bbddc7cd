"""JSON: the report's document (``run``'s result, ``plan``'s costs and rows, a table's
records), else its tables as records and the gate's verdicts as objects."""

from __future__ import annotations

import json
import math
from typing import Any

from ckptbench.render.formats import Format
from ckptbench.render.formats.model import Data, Report, TableSection, Verdicts
from ckptbench.render.table import Table
from ckptbench.render.verdicts import gate_rule


def _plain(value: Any) -> Any:
    if isinstance(value, float) and math.isnan(value):
        return None
    if hasattr(value, "item") and not isinstance(value, (list, dict, str)):
        return value.item()  # a numpy scalar
    return value


def _records(table: Table) -> list[dict[str, Any]]:
    return [{c.key: _plain(r.get(c.key)) for c in table.columns} for r in table.records]


def _verdicts(v: Verdicts) -> dict[str, Any]:
    r = v.report
    return {
        "headline": r.headline,
        "exit_code": r.exit_code,
        "checks": [
            {
                "cell": line.key,
                "host": line.host,
                "check": line.check,
                "passed": line.passed,
                "detail": line.detail,
            }
            for line in r.lines
        ],
        "limits": list(r.sources),  # where the limits come from, as the text prints them
        "rule": gate_rule(r) or None,  # the time gate's rule, with a reference
        "notes": list(r.notes),
    }


def render_json(report: Report, width: int | None = None) -> str:
    """One JSON value: the data document when the report has one (a table as its records;
    several as a list), else ``{"title": ..., "tables": {...}, "verdicts": ...}``."""
    data = [d.value for d in report.of((Data,))]
    if data:
        values = [_records(v) if isinstance(v, Table) else v for v in data]
        return json.dumps(values[0] if len(values) == 1 else values, indent=1)
    doc: dict[str, Any] = {"title": report.title}
    tables = report.of((TableSection,))
    if tables:
        doc["tables"] = {s.heading or s.table.title: _records(s.table) for s in tables}
    verdicts = report.of((Verdicts,))
    if verdicts:
        doc["verdicts"] = _verdicts(verdicts[0])
    return json.dumps(doc, indent=1)


FORMAT = Format(
    "json", ".json", render_json, (Data, TableSection, Verdicts), help="one JSON document"
)
