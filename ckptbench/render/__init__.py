"""Everything ckptbench shows: formatting of bytes, ratios and times, tables (one model, one
exporter per format), the gate's verdicts, plots and the HTML report. The only package that
imports rich or matplotlib, each lazily where it is needed (pandas: here and in
``ckptbench.frame``, the reading side); only the command line calls it
(docs/architecture.md, "render").
"""

from __future__ import annotations

from ckptbench.render.caveats import grouped_warning_lines, warning_lines
from ckptbench.render.cells import (
    cells_table,
    delta_table,
    rule_text,
    unmatched_lines,
)
from ckptbench.render.compare import compare_report, render
from ckptbench.render.format import (
    cell_labels,
    fmt_bytes,
    fmt_ratio,
    fmt_time,
    fmt_time_spread,
)
from ckptbench.render.plots import (
    cell_family,
    family_titles,
    figure_png,
    plot_evaluations,
    plot_timeline,
    plot_tradeoff,
)
from ckptbench.render.run import (
    explain_lines,
    failure_lines,
    headline,
    limit_outcome,
    run_table,
)
from ckptbench.render.schedule import closed_form_table, plan_table, schedule_table
from ckptbench.render.table import Column, Table, to_csv, to_html, to_markdown, to_text
from ckptbench.render.verdicts import check_junit, check_markdown, check_text

__all__ = [
    "Column",
    "Table",
    "cell_family",
    "cell_labels",
    "cells_table",
    "check_junit",
    "check_markdown",
    "check_text",
    "closed_form_table",
    "compare_report",
    "delta_table",
    "explain_lines",
    "failure_lines",
    "family_titles",
    "figure_png",
    "fmt_bytes",
    "fmt_ratio",
    "fmt_time",
    "fmt_time_spread",
    "grouped_warning_lines",
    "headline",
    "limit_outcome",
    "plan_table",
    "plot_evaluations",
    "plot_timeline",
    "plot_tradeoff",
    "render",
    "rule_text",
    "run_table",
    "schedule_table",
    "to_csv",
    "to_html",
    "to_markdown",
    "to_text",
    "unmatched_lines",
    "warning_lines",
]
