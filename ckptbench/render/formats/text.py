"""Plain text for a terminal: tables fit the width (columns left out and named, never a
value cut), prose wrapped at it, the gate's verdicts one line each."""

from __future__ import annotations

import dataclasses
import textwrap

from ckptbench.render.formats import Format
from ckptbench.render.formats.model import Prose, Report, TableSection, Verdicts
from ckptbench.render.table import Table, to_text


def _prose(p: Prose, width: int | None) -> str:
    lines = [f"{p.heading}:"] if p.heading else []
    body = list(p.lines) or [f"{k}: {v}" for k, v in p.pairs]
    if width:
        indent = "    " if p.hang else ""
        body = [
            textwrap.fill(line, width, subsequent_indent=indent, break_long_words=False)
            for line in body
        ]
    return "\n".join(lines + body)


def _rows(s: TableSection) -> Table:
    """The section's table, cut to its first and last rows where it asks (``text_rows``)."""
    table, n = s.table, s.text_rows
    if not n or len(table.records) <= n:
        return table
    head, tail = table.records[: n - n // 4], table.records[len(table.records) - n // 4 :]
    left = len(table.records) - len(head) - len(tail)
    note = (
        f"{left} of {len(table.records)} rows left out here, after the first {len(head)}; "
        "every row: --format markdown, csv or json, and the result file"
    )
    return dataclasses.replace(table, records=(*head, *tail), notes=(*table.notes, note))


def render_text(report: Report, width: int | None = None) -> str:
    """Each section as text, a blank line between them."""
    from ckptbench.render.verdicts import check_text

    parts = []
    for s in report.of(FORMAT.sections):
        if isinstance(s, TableSection):
            parts.append(to_text(_rows(s), width))
        elif isinstance(s, Prose):
            parts.append(_prose(s, width))
        elif isinstance(s, Verdicts):
            parts.append(check_text(s.report, quiet=s.quiet).rstrip("\n"))
    return "\n\n".join(parts) + "\n"


def show_text(report: Report, console) -> None:
    """Print on a rich console: tables take its width and colours, prose is not highlighted."""
    from ckptbench.render.verdicts import check_text

    for s in report.of(FORMAT.sections):
        if isinstance(s, TableSection):
            console.print(_rows(s))
        elif isinstance(s, Prose):
            for line in s.lines:
                console.print(line, highlight=False, markup=False)  # '[torch]' is a word
        elif isinstance(s, Verdicts):
            console.print(
                check_text(s.report, quiet=s.quiet), highlight=False, markup=False, end=""
            )


FORMAT = Format(
    "text",
    ".txt",
    render_text,
    (TableSection, Prose, Verdicts),
    aliases=("table",),
    help="plain text that fits the terminal",
    show=show_text,
)
