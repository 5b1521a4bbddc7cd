"""``ckptbench compare`` in every format: the cells table and, with a reference, the
before -> after table, as plain text, markdown, CSV or the HTML report."""

from __future__ import annotations

import textwrap

from ckptbench.analysis import Comparison
from ckptbench.render.caveats import grouped_warning_lines
from ckptbench.render.cells import (
    cells_table,
    csv_columns,
    delta_table,
    invocations_table,
    rule_text,
    unmatched_lines,
)
from ckptbench.render.format import cell_labels
from ckptbench.render.table import to_csv, to_markdown, to_text

__all__ = ["FORMATS", "render"]

FORMATS = ("table", "markdown", "csv", "html")


def render(comparison: Comparison, fmt: str = "table", width: int | None = 120) -> str:
    """The comparison as ``table`` (plain text no wider than ``width`` where possible),
    ``markdown``, ``csv`` or ``html`` (needs matplotlib: see :mod:`ckptbench.render.html`)."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r} (choose from {', '.join(FORMATS)})")
    if fmt == "csv":
        if comparison.has_before:
            return to_csv(csv_columns(delta_table(comparison)))
        from ckptbench.frame import cells_frame

        return cells_frame(comparison.after).to_csv(index=False)
    if fmt == "html":
        from ckptbench.render.html import render_html

        return render_html(comparison)
    cells = cells_table(comparison.after)
    labels = cell_labels([r.case for r in comparison.after])
    warnings = grouped_warning_lines(comparison.after, labels)
    pooled = invocations_table(comparison.after)
    if fmt == "table":
        parts = [to_text(cells, width)]
        if pooled is not None:
            parts += ["", to_text(pooled, width)]
        if warnings:
            if width:
                warnings = [
                    textwrap.fill(w, width, subsequent_indent="    ", break_long_words=False)
                    for w in warnings
                ]
            parts += ["", "Warnings:", *warnings]
    else:
        parts = ["## Cells", to_markdown(cells), *(f"\n{n}" for n in cells.notes)]
        if pooled is not None:
            parts += ["", "## Invocations of one cell", to_markdown(pooled),
                      *(f"\n{n}" for n in pooled.notes)]  # fmt: skip
        if warnings:
            parts += ["", "## Warnings", "", *(f"- {w}" for w in warnings)]
    if comparison.has_before:
        deltas = delta_table(comparison)
        if fmt == "table":
            parts += ["", to_text(deltas, width)]
        else:
            parts += ["", "## Before → after", to_markdown(deltas)]
        prose = [rule_text(comparison), *unmatched_lines(comparison)]
        if fmt == "table" and width:
            prose = [textwrap.fill(p, width, break_long_words=False) for p in prose]
        parts += ["", *prose]
    return "\n".join(parts) + "\n"
