"""What happened to each cell of a sweep: its state and outcome (shared by the sweep and its
progress display, which must not import each other; docs/architecture.md)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

from ckptbench.results.schema import Case

__all__ = ["CellOutcome", "CellState"]


class CellState(Enum):
    MEASURED = "measured"  # measured in this sweep (the result may still have failed modes)
    KEPT = "kept"  # resume: a complete result was already in the folder
    ERROR = "error"  # the cell runner raised; no file written
    CONFLICT = "conflict"  # resume: unreadable/foreign file or other settings; left alone
    PENDING = "pending"  # manifest only: not reached yet
    RUNNING = "running"  # manifest only: being measured (seen after a kill)


@dataclass(frozen=True)
class CellOutcome:
    """What happened to one cell."""

    case: Case
    path: Path
    state: CellState
    ok: bool | None = None  # every mode measured OK (None: no result)
    host: str = ""
    worker: str = ""  # Dask worker address, when run on Dask
    error: str | None = None
    duration_s: float | None = None

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
            "duration_s": self.duration_s,
            "case": self.case.to_dict(),
        }
