"""CSV: the report's data table (every column, raw values), else each of its tables."""

from __future__ import annotations

from ckptbench.render.formats import Format
from ckptbench.render.formats.model import Data, Report, TableSection
from ckptbench.render.table import Table, to_csv


def render_csv(report: Report, width: int | None = None) -> str:
    """The data tables of ``report`` as CSV; without any, its tables (a blank line between)."""
    data = report.of((Data,))
    tables = [t for d in data for t in (d.value, *d.rows) if isinstance(t, Table)]
    if not tables:
        tables = [s.table for s in report.of((TableSection,))]
    return "\n".join(to_csv(t) for t in tables)


FORMAT = Format(
    "csv", ".csv", render_csv, (Data, TableSection), help="every column, raw values (CSV)"
)
