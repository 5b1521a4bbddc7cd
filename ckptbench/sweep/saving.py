"""Where a sweep's measured cell goes, and what its outcome says: the result saved at the
cell's path or, where that fails, beside it and said (never lost); a partial or failed
cell's earlier file moved aside before it is measured again; a document a Dask worker
returned that does not read back kept beside the cell's file; the part a stop signal cut,
saved, its cell pending again so that ``--resume`` measures it.

Every write is atomic and none goes over a file a sweep did not mean to replace
(:func:`ckptbench.results.schema.save_or_beside`, :func:`~ckptbench.results.schema.move_aside`).
Used by the sweep's bookkeeping (:mod:`ckptbench.sweep.run`), locally and with Dask alike.
"""

from __future__ import annotations

import json
import os
import socket
from dataclasses import replace
from typing import Any

from ckptbench.results.schema import (
    RunResult,
    move_aside,
    names_beside,
    save_or_beside,
    write_atomic,
)
from ckptbench.sweep.cells import Attempt, CellOutcome, CellState, one_line

__all__ = ["first_error", "keep_unreadable", "saved_outcome", "set_aside", "stopped_outcome"]


def saved_outcome(
    pending: CellOutcome,
    result: RunResult,
    duration: float,
    worker: str = "",
    attempts: tuple[Attempt, ...] = (),
    replace_file: bool = True,
) -> CellOutcome:
    """A measured cell's outcome, its result saved at its path (``replace_file``: over a file
    there) or, where that fails, beside it and said. A result whose ``saved_as`` names a
    file (``run_case`` could not save it at its path and saved it there instead) is said,
    not saved again (a second copy the summary would not name, or a file that appeared at
    its path replaced)."""
    if result.case.key != pending.case.key:
        return replace(
            pending,
            state=CellState.ERROR,
            error=f"cell runner returned a result for {result.case.key}",
            duration_s=duration,
        )
    if not result.host:
        result = replace(result, host=socket.gethostname())
    if result.saved_as is not None:  # the runner's own save, beside the path
        at, why = result.saved_as.path, result.saved_as.why
    else:
        at, why = save_or_beside(result, pending.path, replace=replace_file)
    if why is not None:  # measured, but not saved where the manifest expects it: never lost
        state, error = CellState.ERROR, f"measured, but saved as {at} ({why})"
    else:
        state, error = CellState.MEASURED, None if result.ok else first_error(result)
    return replace(
        pending,
        state=state,
        ok=result.ok,
        host=result.host,
        worker=worker,
        error=error,
        duration_s=duration,
        attempts=attempts,
        remeasure_reason=None,  # measured: the file it re-measured is said in the notes
    )


def stopped_outcome(outcome: CellOutcome, result: RunResult, how: str) -> CellOutcome:
    """A cell a stop signal cut, its modes measured so far saved: pending again, so that
    ``--resume`` measures it (its partial file moved aside, kept), and its error says so. A
    part saved beside its path stays an error that says where."""
    if outcome.state is not CellState.MEASURED:
        return outcome
    cut = result.interruption or "interrupted"
    return replace(
        outcome,
        state=CellState.PENDING,
        error=f"{cut} ({how}); the modes measured so far are saved in {outcome.path.name}; "
        "`--resume` measures the cell again",
    )


def first_error(result: RunResult) -> str:
    """A measured cell's error: its first mode not ok, its status and why."""
    for m in result.modes:
        if not m.ok:
            return f"{m.mode.value}: {m.status.value}" + (f" ({m.error})" if m.error else "")
    return "not ok"


def keep_unreadable(pending: CellOutcome, raw: Any) -> str:
    """Write ``raw`` beside the cell's file (a new name, never over one); where it went."""
    try:
        text = json.dumps(raw, default=str) + "\n"
        for kept in names_beside(pending.path, "unreadable"):  # never over a file kept there
            if not os.path.lexists(kept):
                write_atomic(kept, text, replace=False)
                return f"what it returned is kept in {kept.name}"
        raise FileExistsError(f"{pending.path.name}: every name beside it is taken")
    except (OSError, TypeError, ValueError) as err:
        return f"what it returned could not be kept ({one_line(err)})"


def set_aside(pending: CellOutcome, notes: list[str] | None, why: str | None = None) -> str | None:
    """Re-measuring a partial or failed cell: keep its old file beside the new one, and say
    so in ``notes`` in one line, with ``why`` it is measured again ('incomplete: normal: 1 of
    2 planned rounds (round 2 missing)', said after 'measured again: '); why it could not be
    moved (the folder went read-only), else None."""
    if pending.path.exists():
        try:  # never over a file kept there before (the clock can give a name twice)
            aside = move_aside(pending.path, "replaced")
        except OSError as err:
            return f"its earlier result could not be moved aside ({err.strerror or err})"
        if notes is not None:
            said = f"measured again: {why}; " if why else ""
            notes.append(f"{pending.key}: {said}its earlier result was moved to {aside.name}")
    return None
