"""What ``ckptbench sweep --dry-run`` shows: every cell of a config, its rough time and what
a sweep into ``--out`` would do with it (measure it, keep a complete result, or leave a
conflicting file alone), from the same plan the sweep makes (``sweep.preflight.plan_cells``).
Returns a table (:mod:`ckptbench.render.table`); never prints."""

from __future__ import annotations

import math
from collections.abc import Sequence

from ckptbench.render.format import cell_labels, fmt_duration
from ckptbench.render.table import Column, Table
from ckptbench.results.units import count_text
from ckptbench.sweep.cells import CellOutcome, CellState

__all__ = [
    "cell_action",
    "conflict_lines",
    "dry_run_table",
    "estimate_text",
    "remeasure_lines",
    "shown_estimate",
    "total_estimate",
]


def shown_estimate(seconds: float) -> float:
    """A cell's rough time as the table shows it: to a tenth of a second below 10 s (a cell
    of 1.6 s is not '2 s'), else to the second, from an hour to the minute
    (:func:`ckptbench.render.format.fmt_duration`)."""
    if not math.isfinite(seconds):  # said as it is ('over 1,000 years'), never rounded
        return seconds
    if round(seconds, 1) < 10:
        return round(seconds, 1)
    return float(round(seconds)) if seconds < 3600 else 60.0 * round(seconds / 60)


def estimate_text(seconds: float) -> str:
    """'1.6 s', '12 s', '4 min 30 s': :func:`shown_estimate`'s value ('0 s': nothing)."""
    shown = shown_estimate(seconds)
    if shown == 0:
        return "0 s"
    return f"{shown:.1f} s" if shown < 10 else fmt_duration(shown)


def total_estimate(estimates_s: Sequence[float]) -> str:
    """How long the cells ``estimates_s`` take, as every line of ``sweep`` says it (its
    start line, its question before a large sweep, ``--dry-run``'s total): 'roughly 3.2 s',
    the sum of the values the dry run's table shows, so that its figures add up (2 x
    '1.6 s' is 'roughly 3.2 s', not 3 s)."""
    return "roughly " + estimate_text(sum(shown_estimate(s) for s in estimates_s))


def cell_action(cell: CellOutcome, measured: bool) -> str:
    """What the sweep does with one cell: 'measure', 'measure again (...)' (why:
    :func:`remeasure_lines`), 'keep (...)' or 'conflict: ...' (the reason:
    :func:`conflict_lines`)."""
    if cell.state is CellState.CONFLICT:
        return "conflict: left alone (why: below)"
    if cell.state is CellState.INVALID:
        return "skip: cannot be measured as configured (change the config)"
    if cell.state is CellState.KEPT:
        return (
            "keep (measured OK)"
            if cell.ok
            else ("keep (a failed measurement; --retry-failed measures it again)")
        )
    if measured and cell.path.exists():
        return "measure again (the old file kept aside; why: below)"
    return "measure"


def dry_run_table(
    cells: Sequence[CellOutcome], to_run: Sequence[int], estimates_s: Sequence[float]
) -> Table:
    """One row per cell, in the config's order; a cell's estimate only where it is measured."""
    labels = cell_labels([c.case for c in cells])
    run = set(to_run)
    records = tuple(
        {
            "cell": label,
            "file": cell.path.name,
            "estimate_s": estimates_s[i] if i in run else None,
            "action": cell_action(cell, i in run),
        }
        for i, (cell, label) in enumerate(zip(cells, labels, strict=True))
    )
    columns = (
        Column("cell", "cell", align="left"),
        Column("estimate_s", "roughly", lambda v, _r: "-" if v is None else estimate_text(v)),
        Column("action", "what a sweep does", align="left"),
        Column("file", "file", align="left", priority=3),
    )
    title = f"{count_text(len(records), 'cell')}, {len(run)} to measure (dry run)"
    return Table(title, columns, records)


def conflict_lines(cells: Sequence[CellOutcome]) -> list[str]:
    """Why each conflicting cell is left alone, one line each (the sweep's own words)."""
    return [f"conflict: {c.error}" for c in cells if c.state is CellState.CONFLICT]


def remeasure_lines(cells: Sequence[CellOutcome], to_run: Sequence[int]) -> list[str]:
    """Why each cell whose file is there is measured again, one line each, in the words
    ``--resume`` says it (``sweep.preflight.remeasure_reason``): 'measure again: KEY:
    incomplete: normal: 1 of 2 planned rounds (round 2 missing)'."""
    again = [cells[i] for i in to_run if cells[i].path.exists()]
    return [
        f"measure again: {c.key}: {c.remeasure_reason or 'incomplete or failed'}" for c in again
    ]
