"""What ``ckptbench profile`` shows: the source lines that hold the most memory in one
gradient, from memory_profiler's line profiler (``ckptbench.measure.lineprofile``). Returns a
report (:func:`profile_report`, for any ``--format``), its table
(:mod:`ckptbench.render.table`) and strings; never prints."""

from __future__ import annotations

from typing import Any

from ckptbench.render.formats.model import Data, Prose, Report, TableSection
from ckptbench.render.table import Column, Table

__all__ = ["PROFILE_SECTIONS", "profile_lines", "profile_report", "profile_rows", "profile_table"]

#: The section kinds of :func:`profile_report`: its ``--format`` choices (``run``'s kinds).
PROFILE_SECTIONS = (TableSection, Prose, Data)


def _mib(value: Any, _record: dict[str, Any]) -> str:
    return "-" if value is None else f"{value:+,.2f}"


def _source(value: Any, _record: dict[str, Any]) -> str:
    """A source line whole (markdown, HTML, a wide terminal: nothing to fit)."""
    return str(value or "")


def _source_cut(value: Any, _record: dict[str, Any]) -> str:
    """A source line cut to 56 characters, for a text table the width is short for."""
    text = str(value or "")
    return text if len(text) <= 56 else text[:55] + "…"


def profile_table(doc: dict[str, Any], top: int) -> Table:
    """The ``top`` lines by absolute increment, largest first (every row in CSV/JSON)."""
    rows = sorted(doc.get("rows", []), key=lambda r: -abs(r["increment_mib"]))[:top]
    records = tuple(
        {
            "where": f"{r['file']}:{r['line']}",
            "function": r["function"],
            "increment_mib": r["increment_mib"],
            "occurrences": r["occurrences"],
            "source": r["source"].strip(),
        }
        for r in rows
    )
    columns = (
        Column("where", "file:line", align="left"),
        Column("function", "function", align="left", priority=3),
        Column("increment_mib", "increment MiB", _mib),
        Column("occurrences", "runs"),
        Column(
            "source",
            "source",
            _source,
            align="left",
            priority=2,
            narrow=_source_cut,
            narrow_drops="the end of long lines",
        ),
    )
    legend = (  # what the figures are, as run's table says its columns
        "increment MiB: the change in traced memory (tracemalloc) while the line ran, summed "
        "over its runs (negative: it freed more than it allocated, e.g. a tape or state "
        "released); runs: how often it ran",
    )
    return Table(f"memory by line, top {len(records)} of {len(doc.get('rows', []))}", columns,
                 records, notes=legend)  # fmt: skip


def profile_lines(doc: dict[str, Any]) -> list[str]:
    """The totals below the table: peak and end of traced memory."""
    peak, end = doc.get("peak_traced_mib"), doc.get("end_traced_mib")
    lines = []
    if peak is not None:
        lines.append(
            f"traced memory (tracemalloc) during the profiled gradient: peak {peak:,.2f} MiB"
            + ("" if end is None else f", {end:,.2f} MiB still held at its end")
        )
    return lines


def profile_rows(doc: dict[str, Any]) -> Table:
    """Every row of the profile, raw values, in the profiler's order (CSV's rows)."""
    keys = ("file", "line", "function", "increment_mib", "mem_usage_mib", "occurrences", "source")
    records = tuple({k: r.get(k) for k in keys} for r in doc.get("rows", []))
    return Table("memory by line", tuple(Column(k, k) for k in keys), records)


def profile_report(doc: dict[str, Any], top: int) -> Report:
    """The ``top`` lines' table and the totals below it (text, markdown, HTML), and the
    profile's document (``--format json``, as ``profile --json`` has always printed it;
    CSV: every row, raw)."""
    table = profile_table(doc, top)
    sections: list[Any] = [TableSection(table, heading=table.title)]  # text: its own title
    if lines := profile_lines(doc):
        sections.append(Prose(tuple(lines)))
    sections.append(Data(doc, rows=(profile_rows(doc),)))
    what = ", ".join(f"{doc[k]}" for k in ("model", "mode") if doc.get(k))
    return Report("ckptbench profile" + (f": {what}" if what else ""), tuple(sections))
