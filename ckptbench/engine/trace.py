"""What a checkpointed schedule did, action by action (``ckptbench run --trace``).

A :class:`TraceRecorder` set on an engine loop (``EngineLoop.recorder``) is handed every
action of the next calls by the interpreter, after the action ran (FIRSTURN once its
reverse is done, in the reverse sweep). While the schedule runs it keeps three integers per
action in arrays allocated once, at the first action: the planned bytes (the engine's
declared live bytes, exactly as :func:`ckptbench.schedules.replay_bytes` counts them with
``per_action``) and, when a meter is given, the host and device memory measured in that
action. Its own bookkeeping happens after the meter has read an action and before the
next action's window opens, and keeps no Python object per action, so the trace does not
measure itself (a dict per action did: about 0.5 KiB each, 2 MiB over a 1000-step Revolve).
A ``timed`` recorder also keeps each action's seconds (the interpreter's host clock) and
each step's seconds inside ADVANCEs, which it asks the interpreter to run step by step.

:attr:`TraceRecorder.rows` then describes every action from the same action stream: its
index, kind, step and the step's label (``step i`` unless a workload names its layers), what
was stored, freed, taped or recomputed, its seconds and, where the loop runs a plan, the
seconds its costs predict; :attr:`TraceRecorder.layers` sums them per step
(:mod:`ckptbench.engine.trace_time`). Pure: the meter (``ckptbench.measure.trace``) is
the only thing that reads memory.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from ckptbench.engine.trace_time import layer_times, predicted_seconds
from ckptbench.schedules import ActionKind

__all__ = ["TraceMeter", "TraceRecorder", "describe", "step_label"]

_ADVANCE, _TAKESHOT, _TAPE = ActionKind.ADVANCE, ActionKind.TAKESHOT, ActionKind.TAPE
_FIRSTURN, _YOUTURN, _REVERSE = ActionKind.FIRSTURN, ActionKind.YOUTURN, ActionKind.REVERSE
_NONE = -1  # no reading in the arrays


def step_label(step: int) -> str:
    """The default label of step ``step`` (a layer chain names its layers instead)."""
    return f"step {step}"


class TraceMeter(Protocol):
    """Reads the memory of the action that just ran; ``restart`` opens the next window."""

    def read(self) -> tuple[int, int | None]:
        """(host bytes above the trace's start, device bytes above it or None)."""

    def restart(self) -> None:
        """Open the next action's window."""


class TraceRecorder:
    """The actions of one call (the last one it was set on), as :attr:`rows`."""

    def __init__(
        self,
        meter: TraceMeter | None = None,
        label: Callable[[int], str] = step_label,
        *,
        timed: bool = True,
    ) -> None:
        self.meter = meter
        self.label = label
        self.schedule: Any = None
        self.count = 0
        self.planned = self.host = self.device = array("q")
        #: Whether actions are timed (host clock; False: their ``measured_s`` is None).
        self.timed = timed
        self.seconds = self.advance_seconds = array("d")
        #: The interpreter times each step of an ADVANCE alone when this is set.
        self.step_timer = self.advance_step if timed else None

    def record(
        self, run: Any, index: int, act: Any, planned_bytes: int, seconds: float = 0.0
    ) -> None:
        """Called by the interpreter after action ``index`` (``act``) of ``run``, which
        took ``seconds`` (host clock, the recorder's own work excluded)."""
        host, device = self.meter.read() if self.meter is not None else (None, None)
        if index == 0 or self.schedule is None:
            self._allocate(run.schedule)
        if index < len(self.planned):
            self.planned[index] = planned_bytes
            self.host[index] = _NONE if host is None else host
            self.device[index] = _NONE if device is None else device
            self.seconds[index] = seconds
            self.count = index + 1
        if self.meter is not None:
            self.meter.restart()

    def advance_step(self, step: int, seconds: float) -> None:
        """Step ``step`` of an ADVANCE took ``seconds`` (the interpreter's handler)."""
        if step < len(self.advance_seconds):
            self.advance_seconds[step] += seconds

    def _allocate(self, schedule: Any) -> None:
        self.schedule = schedule
        n = sum(1 for _ in schedule.actions())
        self.planned, self.host, self.device = (array("q", bytes(8 * n)) for _ in range(3))
        self.seconds = array("d", bytes(8 * n))
        self.advance_seconds = array("d", bytes(8 * schedule.steps))
        self.count = 0

    def _costs(self) -> Any:
        """The costs the schedule's plan was made from (None: no plan, no prediction)."""
        return getattr(getattr(self.schedule, "plan", None), "costs", None)

    @property
    def rows(self) -> list[dict[str, Any]]:
        """One JSON-ready dict per recorded action (after the call)."""
        if self.schedule is None:
            return []
        acts = list(self.schedule.actions())[: self.count]
        rows = describe(acts, self.label)
        costs = self._costs()
        predicted = predicted_seconds(acts, costs, self.schedule.steps) if costs else None
        for i, row in enumerate(rows):
            row["planned_bytes"] = int(self.planned[i])
            row["measured_bytes"] = None if self.host[i] == _NONE else int(self.host[i])
            if self.device[i] != _NONE:
                row["device_bytes"] = int(self.device[i])
            row["measured_s"] = float(self.seconds[i]) if self.timed else None
            if predicted is not None:
                row["predicted_s"] = predicted[i]
        return rows

    @property
    def layers(self) -> list[dict[str, Any]]:
        """Per step (layer): predicted and measured seconds (``engine.trace_time``)."""
        if self.schedule is None or self.count == 0:
            return []
        acts = list(self.schedule.actions())[: self.count]
        timed = self.timed
        return layer_times(
            acts,
            self.seconds if timed else None,
            self.advance_seconds if timed else None,
            self._costs(),
            self.schedule.steps,
            self.label,
        )


def describe(actions: Iterable[Any], label: Callable[[int], str] = step_label) -> list[dict]:
    """What each action of a stream did, as the engine runs it: ``index``, ``kind``,
    ``step``, ``layer`` (the step's label; a range for ADVANCE), ``stored`` (a state put in
    a slot), ``freed`` (states no action needs again, a slot overwritten, a kept tape
    reversed), ``taped`` and ``recomputed`` (an ADVANCE after the first sweep)."""
    slots: dict[int, int] = {}  # slot -> step of the live state it holds
    rows, reversing = [], False
    for index, act in enumerate(actions):
        kind = act.kind
        stored, freed, taped, recomputed = "", [], "", ""
        if kind is _TAKESHOT:
            if act.slot in slots:
                freed.append(f"x_{slots[act.slot]} (slot {act.slot})")
            slots[act.slot] = act.step
            stored = f"x_{act.step} (slot {act.slot})"
        elif kind is _TAPE:
            taped = f"step {act.step} (kept)"
        elif kind is _FIRSTURN or kind is _YOUTURN or kind is _REVERSE:
            if kind is _REVERSE:
                freed.append(f"tape {act.step}")
            else:
                taped = f"step {act.step} (reversed)"
            for k in [k for k, st in slots.items() if st == act.step]:
                freed.append(f"x_{act.step} (slot {k})")
                del slots[k]
        elif kind is _ADVANCE and reversing:
            n = act.stop - act.start
            recomputed = f"{n} step{'s' if n > 1 else ''} ({act.start}..{act.stop - 1})"
        rows.append({
            "index": index,
            "kind": kind.name,
            "step": act.start if kind is _ADVANCE else act.step,
            "layer": _layer(act, label),
            "stored": stored,
            "freed": ", ".join(freed),
            "taped": taped,
            "recomputed": recomputed,
        })  # fmt: skip
        reversing = reversing or kind is _FIRSTURN
    return rows


def _layer(act: Any, label: Callable[[int], str]) -> str:
    if act.kind is _ADVANCE:
        first, last = act.start, act.stop - 1
        return label(first) if first == last else f"{label(first)} .. {label(last)}"
    return "" if act.step is None else label(act.step)
