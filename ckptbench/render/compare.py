"""``ckptbench compare`` as a report (:class:`~ckptbench.render.formats.model.Report`):
the cells table and, with a reference, the before -> after table, the warnings and the
cells a sweep manifest lists without a file; for a page format (HTML) the full report of
:func:`ckptbench.render.html.page_sections`. Any format of the registry renders it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

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
from ckptbench.render.format import cell_labels, told_apart
from ckptbench.render.formats import get_format, names_for
from ckptbench.render.formats.model import (
    Data,
    Figure,
    Prose,
    Report,
    Section,
    TableSection,
)
from ckptbench.render.table import Column, Table

__all__ = [
    "SECTIONS",
    "compare_report",
    "format_names",
    "missing_lead",
    "render",
    "set_aside_counts",
    "set_aside_groups",
]

#: The section kinds a comparison's report is made of (its formats: ``format_names``). The
#: [expect] verdicts join them on the HTML page only, so a format that shows nothing but
#: verdicts (junit) would have nothing to render and is no choice here.
SECTIONS = (TableSection, Prose, Figure, Data)


def format_names() -> list[str]:
    """The formats ``compare --format`` accepts (the registry's, with their aliases)."""
    return names_for(SECTIONS)


def _data(comparison: Comparison) -> Table:
    """The machine-readable table: the before -> after rows with a reference (and a row for
    each cell measured on one side only), else one row per result file
    (``frame.cells_frame``)."""
    if comparison.has_before:
        return _with_unpaired(csv_columns(delta_table(comparison)), comparison)
    from ckptbench.frame import cells_frame

    frame = cells_frame(comparison.after)
    records = tuple(
        {k: (None if _missing_value(v) else v) for k, v in row.items()}
        for row in frame.to_dict("records")
    )
    return Table("cells", tuple(Column(str(c)) for c in frame.columns), records)


def _with_unpaired(table: Table, comparison: Comparison) -> Table:
    """``table`` with a row per cell measured on one side only: its key and host, verdict
    "only before" or "only after", no mode and no figures (the text formats list them
    under the table; CSV and JSON readers see them as rows with the same keys)."""
    rows = [
        {c.key: None for c in table.columns} | {"key": key, "host": host, "verdict": verdict}
        for verdict, cells in (
            ("only before", comparison.only_before),
            ("only after", comparison.only_after),
        )
        for key, host in cells
    ]
    return replace(table, records=(*table.records, *rows))


def _missing_value(value: Any) -> bool:
    try:
        return bool(value != value) or value is None or str(value) == "<NA>"
    except (TypeError, ValueError):
        return False


def missing_lead(missing: Sequence[tuple[str, str]]) -> str:
    """The line above the cells a sweep manifest lists without a result file
    (``store.missing_cells``): what ``check`` and ``sweep --resume`` do with them; a cell
    no plan exists for as configured (state ``invalid``) is never measured again."""
    invalid = sum(" (state invalid" in what for _, what in missing)
    resume = (
        "`sweep --resume` measures them"
        if not invalid
        else "`sweep --resume` measures those not `invalid`"
        if invalid < len(missing)
        else "`sweep --resume` does not measure them: no plan exists as configured"
    )
    return (
        f"{len(missing)} cell(s) listed in the sweep manifest have no result file (not in "
        f"the tables; `ckptbench check` fails them, {resume}):"
    )


def _missing(missing: Sequence[tuple[str, str]]) -> list[Section]:
    if not missing:
        return []
    items = (missing_lead(missing), *(f"{key}: {what}" for key, what in missing))
    return [Prose(items, "Missing cells", "list")]


#: The cells a folder read set aside (``store.load_readable``), by the check ``check``
#: fails them on: the section's title and what its lead says of them.
_SET_ASIDE = {
    "readable": ("Unreadable cells", "{n} cell file(s) could not be read"),
    "filed": ("Misfiled cells", "{n} cell file(s) are misfiled: they hold another cell's result"),
    "unique": (
        "Copied measurements",
        "{n} measurement(s) are copied into several files; none is picked",
    ),
}


def _kinds(set_aside: Sequence[Any]) -> list[tuple[str, str, list[str]]]:
    """(title, what is said of them, problems) of each kind of cell in ``set_aside``."""
    groups: dict[str, list[str]] = {}
    for cell in set_aside:
        groups.setdefault(cell.check, []).append(cell.problem)
    out = []
    for check, problems in groups.items():
        title, said = _SET_ASIDE.get(check, ("Cells set aside", "{n} cell(s) set aside"))
        out.append((title, said.format(n=len(problems)), problems))
    return out


def set_aside_groups(set_aside: Sequence[Any]) -> list[tuple[str, tuple[str, ...]]]:
    """(title, lines) of each kind of cell a folder read set aside (``store.CellProblem``:
    its ``check`` and one-line ``problem``): a lead, then one line each. The other cells
    are shown, these are not; ``check`` fails them."""
    lead = "(not in the tables; `ckptbench check` fails them):"
    return [(title, (f"{said} {lead}", *problems)) for title, said, problems in _kinds(set_aside)]


def set_aside_counts(set_aside: Sequence[Any]) -> str:
    """'2 cell file(s) could not be read; 1 ...': what the leads say, in one line."""
    return "; ".join(said for _, said, _ in _kinds(set_aside))


def _set_aside(set_aside: Sequence[Any]) -> list[Section]:
    groups = set_aside_groups(set_aside)
    return [Prose(lines, title, "list", css="warn") for title, lines in groups]


def compare_report(
    comparison: Comparison,
    *,
    page: bool = False,
    verdicts: Any = None,
    missing: Sequence[tuple[str, str]] = (),
    set_aside: Sequence[Any] = (),
) -> Report:
    """The report of ``comparison``; ``page``: the full page (summary, provenance, the
    ``verdicts`` of [expect], plots) that a page format such as HTML shows; ``set_aside``:
    the cells a folder read set aside (``store.CellProblem``), named after the summary."""
    if page:
        from ckptbench.render.html import page_sections

        sections = page_sections(comparison, verdicts, missing=missing)
        sections[1:1] = _set_aside(set_aside)
        return Report("ckptbench report", (*sections, Data(_data(comparison))))
    results = comparison.after
    table = cells_table(results)
    sections: list[Section] = [TableSection(table, "Cells")]
    pooled = invocations_table(results)
    if pooled is not None:
        sections.append(TableSection(pooled, "Invocations of one cell"))
    labels = told_apart(cell_labels([r.case for r in results]), results)
    warnings = grouped_warning_lines(results, labels)
    if warnings:
        sections.append(Prose(tuple(warnings), "Warnings", "list", hang=True))
    if comparison.has_before:
        sections.append(TableSection(delta_table(comparison), "Before → after"))
        sections.append(Prose((rule_text(comparison), *unmatched_lines(comparison))))
    sections += _missing(missing) + _set_aside(set_aside)
    return Report("ckptbench compare", (*sections, Data(_data(comparison))))


def render(
    comparison: Comparison,
    fmt: str = "text",
    width: int | None = 120,
    *,
    verdicts: Any = None,
    missing: Sequence[tuple[str, str]] = (),
    set_aside: Sequence[Any] = (),
) -> str:
    """The comparison in the format ``fmt`` of the registry (``render.formats``): ``text``
    (or ``table``: plain text no wider than ``width`` where possible), ``markdown``,
    ``csv``, ``json``, ``html`` (needs matplotlib), or any registered one."""
    f = get_format(fmt)
    report = compare_report(
        comparison, page=f.page, verdicts=verdicts, missing=missing, set_aside=set_aside
    )
    return f.render(report, width)
