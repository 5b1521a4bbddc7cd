"""One table model and one small exporter per format (the design of hyperfine's exports).

A :class:`Table` holds raw records (numbers in bytes and seconds, None when missing) and
the columns that show them. Exporters:

* :func:`to_text` — aligned plain text that fits a width: columns of lower priority are
  left out (and named in a note) until the table fits, and a long label column may give
  way to row numbers with a legend below; a cell is never cut or wrapped; a key-value
  table puts each value under its key rather than leave its values out;
* :func:`to_markdown` — a GitHub table of the displayed columns;
* :func:`to_csv` — every column, raw values, machine-readable;
* :func:`to_html` — an HTML table of the displayed columns;
* the table is also a rich renderable: printed on a console it takes the console's width.
"""

from __future__ import annotations

import csv
import html
import io
import math
import re
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

__all__ = [
    "Column",
    "Table",
    "md_cell",
    "md_text",
    "shown_notes",
    "to_csv",
    "to_html",
    "to_markdown",
    "to_text",
]

Formatter = Callable[[Any, dict[str, Any]], str]


@dataclass(frozen=True)
class Column:
    """``key`` names the raw value in each record (the CSV/JSON header); ``header`` and
    ``fmt`` show it. ``priority`` 1 is always shown, higher numbers are left out first when
    the width is short, 0 is never shown (CSV/JSON only)."""

    key: str
    header: str = ""
    fmt: Formatter | None = None
    align: str = "right"
    priority: int = 1
    narrow: Formatter | None = None  # a shorter text for when the width is short
    narrow_priority: int = 3  # when to use it: before the columns of this priority go
    #: what the narrow text leaves out ('their intervals'), named under the table when used
    narrow_drops: str = ""
    #: a label column that, after its narrow text, may show row numbers ('#3') with each
    #: row's text in a legend under the table, before the columns of this priority go
    #: (0: never)
    number_priority: int = 0
    #: a priority-1 column left out only after every other (a failed cell's status, which
    #: says why its figures read '-')
    keep: bool = False

    def value(self, record: dict[str, Any]) -> Any:
        return record.get(self.key)

    def text(self, record: dict[str, Any]) -> str:
        value = record.get(self.key)
        if self.fmt is not None:
            return self.fmt(value, record)
        if value is None or (isinstance(value, float) and math.isnan(value)):
            return "-"
        return str(value)


@dataclass(frozen=True)
class Table:
    title: str
    columns: tuple[Column, ...]
    records: tuple[dict[str, Any], ...]
    notes: tuple[str, ...] = ()
    show_header: bool = True
    styles: dict[str, str] = field(default_factory=dict)  # cell text -> rich style
    #: a key-value table (first column the key): where its columns do not fit the width,
    #: each row's other cells go on lines of their own under its key, indented, instead of
    #: a column being left out: a key-value table never drops its values
    stack: bool = False
    #: what columns mean, each entry (the keys of the columns it explains, its text): said
    #: in one line after the notes, only the entries of columns shown (a column left out at
    #: a terminal's width is named as such, not explained)
    legend: tuple[tuple[tuple[str, ...], str], ...] = ()

    @property
    def shown(self) -> tuple[Column, ...]:
        return tuple(c for c in self.columns if c.priority >= 1)

    def __rich_console__(self, console: Any, options: Any) -> Any:
        """Title and notes wrap like prose; the grid never wraps and fits the width."""
        from rich.text import Text

        grid, notes = _grid(self, options.max_width)
        if self.title:
            yield Text(self.title)
        text = Text("\n".join(grid), no_wrap=True, overflow="ignore")
        if self.show_header and grid:
            text.stylize("bold", 0, len(grid[0]))
        for word, style in self.styles.items():
            text.highlight_words([word], style)
        yield text
        for note in notes:
            yield Text(note)


@dataclass(frozen=True)
class _Numbered:
    """A label column shown as row numbers: ``texts`` are its rows' texts, for the legend."""

    column: Column
    texts: tuple[str, ...]


def _numbered(col: Column, records: Sequence[dict[str, Any]]) -> tuple[Column, _Numbered]:
    """``col`` showing '#1', '#2', ... by its text, numbered in order of first appearance:
    rows with one text (a cell's three modes) share its number, and the legend names each
    text once."""
    texts = tuple(dict.fromkeys(col.text(r) for r in records))
    number = {text: i for i, text in enumerate(texts, 1)}
    shown = replace(
        col, fmt=lambda _v, r: f"#{number[col.text(r)]}", narrow=None, number_priority=0
    )
    return shown, _Numbered(col, texts)


def _fit(
    table: Table, width: int | None
) -> tuple[list[Column], list[Column], list[_Numbered], list[Column]]:
    """The columns that fit ``width``, those left out, a label column shown as row numbers (its
    legend), and the columns shown in their narrow text. Steps, cheapest first: use a column's
    narrow text, then a label column's row numbers, or leave out the column with the highest
    priority number; when only priority-1 columns are left, the rightmost (never the first; one
    marked ``keep`` after the others). Then a column left out comes back where a later step
    made room for it. A value is never cut: its column
    is whole, numbered with a legend, or left out and named."""
    cols = list(table.shown)
    dropped: list[Column] = []
    numbered: list[_Numbered] = []
    shortened: list[Column] = []  # shown in their narrow text, which leaves something out
    if width is None:
        return cols, dropped, numbered, shortened

    def total(cs: list[Column]) -> int:
        widths = [
            max(
                [
                    _cells(c.header) if table.show_header else 0,
                    *(_cells(c.text(r)) for r in table.records),
                ]
            )
            for c in cs
        ]
        return sum(widths) + 2 * (len(cs) - 1)

    while total(cols) > width:
        steps = [(c.priority, 0, c) for c in cols if c.priority > 1]
        steps += [(c.narrow_priority, 2, c) for c in cols if c.narrow is not None]
        steps += [
            (c.number_priority, 1, c)
            for c in cols
            if c.number_priority and c.narrow is None and table.records
        ]
        if not steps and len(cols) > 1:  # still too wide: the rightmost goes, named, never cut
            last = [c for c in cols[1:] if not c.keep] or cols[1:]
            steps = [(1, 0, last[-1])]
        if not steps:
            break
        _, how, col = max(steps, key=lambda s: (s[0], s[1], cols.index(s[2])))
        i = cols.index(col)
        if how == 2:
            if col.narrow_drops and any(col.narrow(col.value(r), r) != col.text(r)
                                        for r in table.records):  # fmt: skip
                shortened.append(col)
            cols[i] = replace(col, fmt=col.narrow, narrow=None)
        elif how == 1:
            cols[i], legend = _numbered(col, table.records)
            numbered.append(legend)
        else:
            dropped.append(cols.pop(i))
    # a later step (a narrow text, row numbers) may have made room for a column left out
    # before it: the most important come back first, in their places
    order = {c.key: k for k, c in enumerate(table.shown)}
    for col in reversed(list(dropped)):
        trial = sorted([*cols, col], key=lambda c: order[c.key])
        if total(trial) <= width:
            cols = trial
            dropped.remove(col)
    gone = {c.key for c in dropped}  # narrowed or numbered, then left out: named once, as out
    numbered = [n for n in numbered if n.column.key not in gone]
    return cols, dropped, numbered, [c for c in shortened if c.key not in gone]


def _legend(table: Table, cols: Sequence[Column]) -> list[str]:
    """The legend's line: the entries of the columns in ``cols``, joined ([] for none)."""
    keys = {c.key for c in cols}
    said = [text for explains, text in table.legend if keys.intersection(explains)]
    return ["; ".join(said)] if said else []


def shown_notes(table: Table) -> list[str]:
    """The notes under a table shown whole (markdown, HTML): its notes and the legend of
    its shown columns."""
    return [*table.notes, *_legend(table, table.shown)]


def _cells(text: str) -> int:
    """The terminal cells ``text`` takes (a wide character, '層', takes two): what aligns
    a column, where ``len`` would shift every cell after such a name."""
    from rich.cells import cell_len

    return cell_len(text)


def _grid(table: Table, width: int | None) -> tuple[list[str], list[str]]:
    """The aligned lines of the table (header, rule, rows) and its notes."""
    cols, dropped, numbered, shortened = _fit(table, width)
    if table.stack and dropped:
        key, *rest = table.shown
        out = []
        for r in table.records:
            out += [key.text(r), *("  " + c.text(r) for c in rest)]
        return out, shown_notes(table)
    rows = [[c.text(r) for c in cols] for r in table.records]
    heads = [c.header for c in cols]
    widths = [
        max([_cells(h) if table.show_header else 0, *(_cells(r[i]) for r in rows)])
        for i, h in enumerate(heads)
    ]

    def line(cells: list[str]) -> str:
        out = []
        for c, w, col in zip(cells, widths, cols, strict=True):
            gap = " " * max(0, w - _cells(c))  # on-screen cells: a wide character takes two
            out.append(gap + c if col.align == "right" else c + gap)
        return "  ".join(out).rstrip()

    out = []
    if table.show_header:
        out += [line(heads), "  ".join("-" * w for w in widths)]
    out += [line(r) for r in rows]
    notes = [
        f"{n.column.header or n.column.key} #{i}: {text}"
        for n in numbered
        for i, text in enumerate(n.texts, 1)
    ]
    notes += [*table.notes, *_legend(table, cols)]
    if dropped:
        notes.append("not shown at this width: " + ", ".join(c.header for c in dropped))
    for drops in dict.fromkeys(c.narrow_drops for c in shortened):
        heads = ", ".join(
            c.header for c in table.shown if c in shortened and c.narrow_drops == drops
        )
        notes.append(f"shown without {drops} at this width: {heads}")
    return out, notes


def to_text(table: Table, width: int | None = None) -> str:
    """Aligned plain text whose grid is no wider than ``width`` where leaving out columns
    can do it; the title and notes are wrapped at ``width`` like prose."""
    grid, notes = _grid(table, width)

    def prose(text: str) -> list[str]:
        if not width or len(text) <= width:
            return [text]
        return textwrap.wrap(text, width, break_long_words=False, break_on_hyphens=False)

    out = prose(table.title) if table.title else []
    out += grid
    for note in notes:
        out += prose(note)
    return "\n".join(out)


#: What markdown would read as more than text, anywhere in a line: a backslash (it would
#: escape the next character, ours too), ``<`` (every HTML tag, comment and autolink starts
#: with it), ``&`` where it starts something like an entity (``&lt;``, ``&#60;``), a
#: backtick (a code span, which would show our escapes as backslashes), a ``]`` that ends a
#: link's or an image's text (``](``, ``][``: ``![x](http://...)`` loads an image), and a
#: ``*`` or ``_`` that could open emphasis (followed by a non-blank; ``_`` not inside a
#: word: ``my_model`` and ``0.02*`` read as themselves), and a ``~`` that could open
#: GitHub's strikethrough (followed by a non-blank, and only before a ``~`` that could
#: close it: ``~/runs/a.json`` reads as itself).
_MD_INLINE = re.compile(
    r"[\\<`]|&(?=#?[0-9A-Za-z]+;)|\](?=[(\[])|\*(?=\S)|(?<![^\W_])_(?=\S)|~(?=\S)"
)
#: A ``~`` that could close a strikethrough: after a non-blank.
_MD_TILDE_CLOSE = re.compile(r"(?<=\S)~")
#: First on a line (after blanks), what would start a block: ``>`` a block quote, ``-``,
#: ``+`` or ``*`` and a blank a list item (our "* time figures marked * are unstable"
#: read as a nested list, its '*' gone), ``#`` a heading, a line of ``-`` or ``=`` a rule
#: or a heading's underline, ``[`` a link's definition (the line gone), ``1.`` or ``1)``
#: a numbered item; elsewhere they are text.
_MD_BLOCK = re.compile(
    r"^([ \t]*)(?:(>|\[|[-+*](?=[ \t]|$)|#{1,6}(?=[ \t]|$)|[-=](?=[-= \t]*$))"
    r"|(\d{1,9})(?=[.)]([ \t]|$)))",
    re.MULTILINE,
)


def _md_inline(text: str) -> str:
    close = max((m.start() for m in _MD_TILDE_CLOSE.finditer(text)), default=-1)

    def escaped(m: re.Match[str]) -> str:
        tilde_alone = m.group() == "~" and m.start() >= close  # nothing after can close it
        return m.group() if tilde_alone else "\\" + m.group()

    return _MD_INLINE.sub(escaped, text)


def _md_indented(text: str) -> str:
    """A line indented 4 columns or more where a block starts (the first line, or one
    after a blank line) would be an indented code block, which shows our escapes as
    backslashes: the blank that reaches the fourth column is written as a character
    reference (``   &#32;x``, ``&#9;x`` for a tab), so the line is a paragraph's."""
    lines = text.split("\n")
    for i, line in enumerate(lines):
        starts = i == 0 or not lines[i - 1].strip(" \t")
        if not starts or not line.strip(" \t"):
            continue
        column = 0
        for k, char in enumerate(line[:4]):  # a tab goes to the next multiple of 4
            column = column + 4 - column % 4 if char == "\t" else column + (char == " ")
            if char not in " \t":
                break
            if column >= 4:
                lines[i] = line[:k] + ("&#9;" if char == "\t" else "&#32;") + line[k + 1 :]
                break
    return "\n".join(lines)


def _md_block(m: re.Match[str]) -> str:
    lead, mark, number = m.group(1), m.group(2), m.group(3)
    return f"{lead}\\{mark}" if mark is not None else f"{lead}{number}\\"


def md_text(text: str) -> str:
    """``text`` as markdown shows it, never as HTML nor as markup, with CommonMark's
    backslash escapes (which GitHub renders as the character itself): every backslash,
    ``<`` and backtick, an ``&`` that would start an entity, what would make a link, an
    image, emphasis or strikethrough, a mark that would start a block quote, list or
    heading, an indent that would start a code block. A host or
    file name edited to ``<script>`` or ``![x](http://...)`` reaches a CI job summary as
    text, and "need >= 25x" reads as itself in the raw markdown too (not ``&gt;``)."""
    return _md_indented(_MD_BLOCK.sub(_md_block, _md_inline(text)))


def md_cell(text: str) -> str:
    """``text`` as one markdown table cell (inline only: no block there): as
    :func:`md_text`, its pipes escaped, its lines joined."""
    return " ".join(_md_inline(text).replace("|", "\\|").splitlines())


def to_markdown(table: Table) -> str:
    esc = md_cell
    cols = table.shown
    out = []
    if table.show_header:
        out.append("| " + " | ".join(esc(c.header) for c in cols) + " |")
    else:
        out.append("| " + " | ".join(" " for _ in cols) + " |")
    out.append("|" + "|".join("---:" if c.align == "right" else "---" for c in cols) + "|")
    out.extend("| " + " | ".join(esc(c.text(r)) for c in cols) + " |" for r in table.records)
    return "\n".join(out)


def _raw(value: Any) -> Any:
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def to_csv(table: Table) -> str:
    """Every column's raw values; a missing value is an empty field."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow([c.key for c in table.columns])
    for r in table.records:
        writer.writerow(["" if _raw(r.get(c.key)) is None else r.get(c.key) for c in table.columns])
    return buf.getvalue()


def to_html(table: Table, row_classes: Sequence[str] | None = None) -> str:
    cols = table.shown
    out = ["<table>"]
    if table.show_header:
        out.append("<tr>" + "".join(f"<th>{html.escape(c.header)}</th>" for c in cols) + "</tr>")
    for i, r in enumerate(table.records):
        cls = f' class="{row_classes[i]}"' if row_classes and row_classes[i] else ""
        cells = "".join(
            f'<td class="{"l" if c.align == "left" else "r"}">{html.escape(c.text(r))}</td>'
            for c in cols
        )
        out.append(f"<tr{cls}>{cells}</tr>")
    out.append("</table>")
    return "\n".join(out)
