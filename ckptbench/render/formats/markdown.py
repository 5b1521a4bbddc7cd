"""Markdown (GitHub): a heading per table, its notes below it, lists as bullets, the gate's
verdicts as a CI job summary."""

from __future__ import annotations

from ckptbench.render.formats import Format
from ckptbench.render.formats.model import Prose, Report, TableSection, Verdicts
from ckptbench.render.table import md_text, shown_notes, to_markdown


def _table(s: TableSection) -> str:
    parts = [f"## {s.heading}"] if s.heading else []
    parts += [to_markdown(s.table), *(f"\n{md_text(n)}" for n in shown_notes(s.table) if s.notes)]
    return "\n".join(parts)


def _prose(p: Prose) -> str:
    parts = [f"## {p.heading}", ""] if p.heading else []
    body = [md_text(x) for x in p.lines] or [md_text(f"{k}: {v}") for k, v in p.pairs]
    parts += [f"- {line}" for line in body] if p.style == "list" else body
    return "\n".join(parts)


def render_markdown(report: Report, width: int | None = None) -> str:
    """Each section as markdown, a blank line between them."""
    from ckptbench.render.verdicts import check_markdown

    parts = []
    for s in report.of(FORMAT.sections):
        if isinstance(s, TableSection):
            parts.append(_table(s))
        elif isinstance(s, Prose):
            parts.append(_prose(s))
        elif isinstance(s, Verdicts):
            parts.append(check_markdown(s.report).rstrip("\n"))
    return "\n\n".join(parts) + "\n"


FORMAT = Format(
    "markdown",
    ".md",
    render_markdown,
    (TableSection, Prose, Verdicts),
    help="GitHub markdown (a README, a CI job summary)",
)
