"""What happened to each cell of a sweep: its state, outcome and attempts, and the sweep's
outcome (shared by the sweep and its progress display, which must not import each other;
docs/architecture.md)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import Enum
from pathlib import Path
from typing import Any

from ckptbench.results.schema import Case
from ckptbench.results.units import count_text

__all__ = ["Attempt", "CellOutcome", "CellState", "SweepOutcome", "cell_error", "one_line"]


class CellState(Enum):
    MEASURED = "measured"  # measured in this sweep (the result may still have failed modes)
    KEPT = "kept"  # resume: a complete result was already in the folder
    ERROR = "error"  # the cell runner raised; no file written
    CONFLICT = "conflict"  # resume: unreadable/foreign file or other settings; left alone
    PENDING = "pending"  # manifest only: not reached yet
    RUNNING = "running"  # manifest only: being measured (seen after a kill)
    INVALID = "invalid"  # no plan exists for the cell as configured: the config must change


def one_line(err: BaseException) -> str:
    """'ValueError: its first line': an error a cell's runner raised, as the manifest keeps it."""
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0]}" if text else type(err).__name__


def cell_error(err: Exception) -> tuple[CellState, str]:
    """The state and error of a cell whose runner raised ``err``: a plan that cannot exist
    as configured (a budget below the least, a plan too large: ``PlanError``) or a memory
    limit no worker starts under (``follow.LimitBelowStart``) is the config's error, never
    retried by ``--resume``; anything else an error to retry."""
    from ckptbench.measure.follow import LimitBelowStart
    from ckptbench.schedules.optimal import PlanError

    if isinstance(err, (PlanError, LimitBelowStart)):
        first = (str(err).strip().splitlines() or ["no plan"])[0]
        return CellState.INVALID, f"config error: {first}; change the config to measure it"
    return CellState.ERROR, one_line(err)


@dataclass(frozen=True)
class Attempt:
    """One try at a cell on one Dask worker; ``error`` None: this attempt gave the result
    (a cell whose worker left is measured again elsewhere, and both tries are kept)."""

    worker: str
    host: str = ""
    duration_s: float | None = None
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "worker": self.worker,
            "host": self.host,
            "duration_s": self.duration_s,
            "error": self.error,
        }

    @classmethod
    def from_dict(cls, data: Any) -> Attempt | None:
        """An attempt recorded in a manifest; None for anything else."""
        if not isinstance(data, dict) or not isinstance(data.get("worker"), str):
            return None
        duration, error = data.get("duration_s"), data.get("error")
        return cls(
            worker=data["worker"],
            host=str(data.get("host") or ""),
            duration_s=float(duration) if isinstance(duration, (int, float)) else None,
            error=error if isinstance(error, str) else None,
        )


@dataclass(frozen=True)
class CellOutcome:
    """What happened to one cell. ``remeasure_reason``: why ``--resume`` measures a cell
    whose file reads back again (``preflight.remeasure_reason``), while it waits or runs; a
    cell measured, failed or lost has none (its ``error`` says what went wrong)."""

    case: Case
    path: Path
    state: CellState
    ok: bool | None = None  # every mode measured OK (None: no result)
    host: str = ""
    worker: str = ""  # Dask worker address, when run on Dask
    error: str | None = None
    duration_s: float | None = None
    attempts: tuple[Attempt, ...] = ()  # Dask: every try, in order (the last one counts)
    remeasure_reason: str | None = None

    @property
    def key(self) -> str:
        return self.case.key

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "file": self.path.name,
            "state": self.state.value,
            "ok": self.ok,
            "host": self.host,
            "worker": self.worker,
            "error": self.error,
            "remeasure_reason": (
                self.remeasure_reason
                if self.state in (CellState.PENDING, CellState.RUNNING)
                else None
            ),
            "duration_s": self.duration_s,
            "attempts": [a.to_dict() for a in self.attempts],
            "case": self.case.to_dict(),
        }

    def with_record(self, entry: Any) -> CellOutcome:
        """A kept cell with the worker, host, duration and attempts that an earlier
        manifest ``entry`` recorded for it (``--resume`` keeps who measured what)."""
        if not isinstance(entry, dict) or entry.get("key") != self.key:
            return self
        duration = entry.get("duration_s")
        attempts = [Attempt.from_dict(a) for a in entry.get("attempts") or ()]
        worker = entry.get("worker")
        return replace(
            self,
            host=self.host or str(entry.get("host") or ""),
            worker=worker if isinstance(worker, str) else self.worker,
            duration_s=float(duration) if isinstance(duration, (int, float)) else None,
            attempts=tuple(a for a in attempts if a is not None),
        )


@dataclass(frozen=True)
class SweepOutcome:
    """Every cell's outcome, in config order, and where the results are."""

    name: str
    out_dir: Path
    manifest_path: Path
    cells: tuple[CellOutcome, ...]
    elapsed_s: float
    notes: tuple[str, ...] = ()  # e.g. an earlier result moved aside to re-measure its cell
    ended_early: str | None = None  # why the sweep stopped before every cell was tried
    manifest_error: str | None = None  # the manifest could not be updated (its last state)

    def _where(self, *states: CellState) -> tuple[CellOutcome, ...]:
        return tuple(c for c in self.cells if c.state in states)

    @property
    def measured(self) -> tuple[CellOutcome, ...]:
        return self._where(CellState.MEASURED)

    @property
    def kept(self) -> tuple[CellOutcome, ...]:
        return self._where(CellState.KEPT)

    @property
    def errors(self) -> tuple[CellOutcome, ...]:
        return self._where(CellState.ERROR)

    @property
    def invalid(self) -> tuple[CellOutcome, ...]:
        """Cells no plan exists for as configured (``--resume`` does not retry them)."""
        return self._where(CellState.INVALID)

    @property
    def conflicts(self) -> tuple[CellOutcome, ...]:
        return self._where(CellState.CONFLICT)

    @property
    def failed(self) -> tuple[CellOutcome, ...]:
        """Cells with a saved result in which some mode did not measure OK."""
        return tuple(c for c in self.cells if c.ok is False)

    @property
    def result_paths(self) -> tuple[Path, ...]:
        return tuple(c.path for c in self.cells if c.state in (CellState.MEASURED, CellState.KEPT))

    @property
    def pending(self) -> tuple[CellOutcome, ...]:
        """Cells never tried (a sweep that ended early) or stopped before a mode."""
        return self._where(CellState.PENDING, CellState.RUNNING)

    @property
    def exit_code(self) -> int:
        """0: every cell measured OK; 1: a failed measurement, a cell runner error or a lost
        cell, or a sweep that ended early (``--resume`` continues it); 2: conflicting files
        in the folder (an input problem; nothing was overwritten), or cells that cannot be
        measured as configured and no other failure (a config error)."""
        if self.conflicts:
            return 2
        if self.errors or self.failed or self.ended_early or self.pending or self.manifest_error:
            return 1
        return 2 if self.invalid else 0

    @property
    def resumable(self) -> bool:
        """``--resume`` would measure something: an error, a lost or an untried cell."""
        return bool(self.errors or self.pending)

    def summary_lines(self) -> list[str]:
        """What a user reads at the end: counts, then one line per problem cell."""
        counts = [
            f"{len(self.measured)} measured",
            f"{len(self.kept)} kept",
            f"{len(self.failed)} failed",
            f"{len(self.errors)} errors",
            f"{len(self.conflicts)} conflicts",
        ]
        if self.pending:
            counts.append(f"{len(self.pending)} not measured")
        if self.invalid:
            counts.append(f"{len(self.invalid)} config errors")
        lines = [
            f"sweep {self.name}: {count_text(len(self.cells), 'cell')}, {', '.join(counts)} "
            f"in {self.elapsed_s:.0f} s; results in {self.out_dir}"
        ]
        if self.ended_early:
            lines.insert(0, f"sweep {self.name} ended early: {self.ended_early}")
        for c in self.cells:
            if c.ok is False or c.state in (CellState.ERROR, CellState.CONFLICT, CellState.INVALID):
                lines.append(f"{c.state.value} {c.key}: {c.error or 'not ok'}")
        if self.manifest_error:
            lines.append(f"error {self.manifest_error}")
        return lines + [f"note {n}" for n in self.notes]
