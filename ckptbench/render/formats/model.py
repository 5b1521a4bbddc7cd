"""The report model every format renders: a title and sections (hyperfine's exporters, one
model for every command).

* :class:`TableSection` — a :class:`~ckptbench.render.table.Table` with the heading it
  goes under (markdown, HTML), an optional sentence before it and CSS classes per row;
* :class:`Prose` — lines of text: plain, a bulleted list, notes or definitions;
* :class:`Verdicts` — the gate's verdicts (:class:`~ckptbench.analysis.gate.GateReport`);
* :class:`Figure` — plots, drawn only by a format that shows pictures;
* :class:`Data` — the machine-readable document of the report (a table for CSV, a JSON
  value), shown only by the machine-readable formats.

A report is built by its command's module in ``render`` (``render.run``,
``render.compare``, ``render.verdicts``); formats never know which command built it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ckptbench.render.table import Table

__all__ = ["Data", "Figure", "Prose", "Report", "Section", "TableSection", "Verdicts"]


@dataclass(frozen=True)
class TableSection:
    """A table under ``heading`` (markdown, HTML; plain text shows the table's own title)."""

    table: Table
    heading: str = ""
    intro: str = ""  # a sentence before the table
    row_classes: tuple[str, ...] = ()  # HTML: one CSS class per record ("" for none)
    notes: bool = True  # the table's notes below it (plain text always shows them)
    #: plain text: only the first and last rows, this many in all, and how many were left
    #: out (0: every row; the other formats always show every row)
    text_rows: int = 0


@dataclass(frozen=True)
class Prose:
    """Lines of text. ``style``: ``plain`` (one paragraph per line), ``list`` (bullets),
    ``note`` (small print), ``definitions`` (``term: value`` pairs in ``pairs``).
    ``hang`` indents the wrapped continuation lines in plain text; ``css`` is an HTML class
    for the list."""

    lines: tuple[str, ...] = ()
    heading: str = ""
    style: str = "plain"
    hang: bool = False
    css: str = ""
    pairs: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Verdicts:
    """The gate's verdicts; ``quiet`` shows only the failures in plain text; ``expect_only``
    leaves out the status checks (the HTML report's [expect] block)."""

    report: Any  # ckptbench.analysis.gate.GateReport
    quiet: bool = False
    expect_only: bool = False


@dataclass(frozen=True)
class Figure:
    """Plots under ``heading``: ``images`` are (make, alt text), ``make`` returns a
    matplotlib figure, called only by a format that shows pictures."""

    heading: str
    images: tuple[tuple[Callable[[], Any], str], ...]
    note: str = ""


@dataclass(frozen=True)
class Data:
    """The report's machine-readable content: a :class:`Table` (CSV rows, JSON records) or
    a JSON value (``run``'s result document, ``plan``'s costs and rows); ``rows``: the
    tables CSV writes for a JSON value (raw numbers, never display text)."""

    value: Any
    rows: tuple[Any, ...] = ()  # Tables


Section = TableSection | Prose | Verdicts | Figure | Data


@dataclass(frozen=True)
class Report:
    """What a command shows: a title (the HTML page's) and its sections, in order."""

    title: str
    sections: tuple[Section, ...]

    def of(self, kinds: Sequence[type]) -> list[Section]:
        """The sections of the given kinds, in order."""
        return [s for s in self.sections if isinstance(s, tuple(kinds))]
