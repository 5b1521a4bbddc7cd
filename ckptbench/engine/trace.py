"""What a checkpointed schedule did, action by action (``ckptbench run --trace``).

A :class:`TraceRecorder` set on an engine loop (``EngineLoop.recorder``) is handed every
action of the next calls by the interpreter, after the action ran (FIRSTURN once its
reverse is done, in the reverse sweep). It keeps one row per action: its index in the
stream, kind, step and the step's label (``step i`` unless a workload names its layers),
what was stored, freed, taped or recomputed, the planned bytes (the engine's declared live
bytes, exactly as :func:`ckptbench.schedules.replay_bytes` counts them with
``per_action``) and, when a meter is given, the memory measured in that action. Pure: the
meter (``ckptbench.measure.trace``) is the only thing that reads memory.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from ckptbench.schedules import ActionKind

__all__ = ["TraceMeter", "TraceRecorder", "step_label"]

_ADVANCE, _TAPE = ActionKind.ADVANCE, ActionKind.TAPE
_FIRSTURN, _YOUTURN = ActionKind.FIRSTURN, ActionKind.YOUTURN


def step_label(step: int) -> str:
    """The default label of step ``step`` (a layer chain names its layers instead)."""
    return f"step {step}"


class TraceMeter(Protocol):
    """Reads the memory of the action that just ran and starts the next action's window."""

    def read(self) -> tuple[int, int | None]:
        """(host bytes above the trace's start, device bytes above it or None)."""


class TraceRecorder:
    """One row per action of the calls it is set on (``rows``: JSON-ready dicts)."""

    def __init__(
        self, meter: TraceMeter | None = None, label: Callable[[int], str] = step_label
    ) -> None:
        self.meter = meter
        self.label = label
        self.rows: list[dict[str, Any]] = []
        self._slots: dict[int, int] = {}  # slot -> step, after the previous action
        self._tapes: set[int] = set()
        self._reversing = False

    def record(self, run: Any, index: int, act: Any, planned_bytes: int) -> None:
        """Called by the interpreter after action ``index`` (``act``) of ``run``."""
        host, device = self.meter.read() if self.meter is not None else (None, None)
        slots = {k: held[0] for k, held in run.slots.items()}
        tapes = set(run.tapes)
        stored = [f"x_{st} (slot {k})" for k, st in slots.items() if self._slots.get(k) != st]
        freed = [f"x_{st} (slot {k})" for k, st in self._slots.items() if slots.get(k) != st]
        freed += [f"tape {i}" for i in sorted(self._tapes - tapes)]
        self._slots, self._tapes = slots, tapes
        row = {
            "index": index,
            "kind": act.kind.name,
            "step": act.start if act.kind is _ADVANCE else act.step,
            "layer": self._layer(act),
            "stored": ", ".join(stored),
            "freed": ", ".join(freed),
            "taped": self._taped(act),
            "recomputed": self._recomputed(act),
            "planned_bytes": int(planned_bytes),
            "measured_bytes": host,
        }
        if device is not None:
            row["device_bytes"] = device
        self.rows.append(row)
        if act.kind is _FIRSTURN:
            self._reversing = True

    def _layer(self, act: Any) -> str:
        if act.kind is _ADVANCE:
            first, last = act.start, act.stop - 1
            return (
                self.label(first) if first == last else f"{self.label(first)} .. {self.label(last)}"
            )
        return "" if act.step is None else self.label(act.step)

    def _taped(self, act: Any) -> str:
        if act.kind is _TAPE:
            return f"step {act.step} (kept)"
        if act.kind is _FIRSTURN or act.kind is _YOUTURN:
            return f"step {act.step} (reversed)"
        return ""

    def _recomputed(self, act: Any) -> str:
        if act.kind is not _ADVANCE or not self._reversing:
            return ""
        n = act.stop - act.start
        return f"{n} step{'s' if n > 1 else ''} ({act.start}..{act.stop - 1})"
