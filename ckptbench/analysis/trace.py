"""The trace's numbers (``run --trace``): the slack allowed above the plan, and the actions
whose measured memory exceeds their planned bytes by more than it (see docs/trace.md).

A plan counts what a schedule stores: snapshots, kept tapes, the tape of a turn. The
measured memory of an action (bytes above the trace's start, the heap trimmed before it)
also holds what no schedule stores and every gradient has. With G the gradient's bytes
(every parameter's cotangent, accumulated through the reverse sweep; the worker counts its
elements) and T one step's tape (the plan's declared tape of that step, and the largest
one in A; where the strategy declares none, as Revolve, equal segments and store-all do,
normal mode's overhead over the baseline divided by the steps: an average, which a chain
of uneven layers exceeds at its large ones), an action may exceed its planned bytes by

* G, the accumulated gradient, everywhere;
* at a reverse (FIRSTURN, YOUTURN, REVERSE) also G + T: the step's own parameter
  cotangent before it is added, and the cotangents of its tape's values; a turn of a
  strategy that declares no tape adds T for the tape itself;
* the allocator's slack per step, A = G/2 + 2 T + 512 KiB: what glibc's heap and torch's
  CPU allocator keep of the pieces of a reverse step that ``malloc_trim`` cannot return.

A was fitted on measured traces (docs/trace.md: lstm and rnn, autograd and torch, revolve
and optimal, 50-200 steps, hidden 64-256; 2026-11-27, a shared 2-core VM): with it the most
any action used of its slack was 51-89% per run. Without T (a strategy declaring no tape
and no normal mode measured) nothing is judged, and the note says so.

Numbers only: no rendering, no pandas.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ckptbench.results.schema import DTYPE_BYTES

__all__ = [
    "ALLOCATOR_FLOOR_BYTES",
    "OVER_SLACK",
    "TraceSlack",
    "over_slack",
    "trace_of",
    "trace_slack",
    "trace_warnings",
]

#: The allocator's slack per step: A = G * ALLOCATOR_G + T * ALLOCATOR_T + ALLOCATOR_FLOOR.
ALLOCATOR_G = 0.5
ALLOCATOR_T = 2
ALLOCATOR_FLOOR_BYTES = 512 << 10

_REVERSES = ("FIRSTURN", "YOUTURN", "REVERSE")


@dataclass(frozen=True)
class TraceSlack:
    """What the measured memory of an action may exceed its planned bytes by."""

    gradient_bytes: int  # G
    tape_bytes: int | None  # T (None: unknown, nothing judged); the largest where per step
    tape_declared: bool  # the plan declares its tapes (its turns count them already)
    step_tapes: tuple[int, ...] = ()  # a plan's tape of each step (layers differ), if any

    @property
    def allocator_bytes(self) -> int:
        """A, the allocator's slack per step (T unknown counts 0)."""
        tape = self.tape_bytes or 0
        return int(ALLOCATOR_G * self.gradient_bytes + ALLOCATOR_T * tape) + ALLOCATOR_FLOOR_BYTES

    def of(self, row: dict[str, Any]) -> int | None:
        """The slack of one row (None: not judged)."""
        if self.tape_bytes is None:
            return None
        g, t, kind = self.gradient_bytes, self.tape_bytes, row.get("kind")
        step = row.get("step")
        if self.step_tapes and isinstance(step, int) and 0 <= step < len(self.step_tapes):
            t = self.step_tapes[step]
        extra = 0
        if kind in _REVERSES:
            extra = g + t  # the step's own parameter cotangent, its tape's cotangents
            if kind != "REVERSE" and not self.tape_declared:
                extra += t  # the turn's tape, which the plan does not count
        return g + self.allocator_bytes + extra

    def describe(self) -> str:
        if self.tape_bytes is None:
            return (
                "not judged: the strategy declares no tape bytes and no normal mode was "
                "measured, so one step's tape (T) is unknown"
            )
        where = "declared by the plan" if self.tape_declared else "normal's overhead / steps"
        return (
            f"slack above the plan: G {_mib(self.gradient_bytes)} (the gradient) everywhere, "
            f"+ G + T at a reverse (+ T more at a turn whose tape the plan does not count), "
            f"+ A {_mib(self.allocator_bytes)} (G/2 + 2 T + 0.5 MiB); T "
            f"{_mib(self.tape_bytes)} ({where})"
        )


def _mib(value: int | None) -> str:
    return "-" if value is None else f"{value / 2**20:.2f} MiB"


def trace_of(result: Any) -> tuple[Any, dict[str, Any]] | None:
    """(the checkpointed mode, its trace section with rows) of a result, or None."""
    for mode in result.modes:
        trace = getattr(mode, "trace", None)
        if trace and trace.get("rows"):
            return mode, trace
    return None


def trace_slack(result: Any) -> TraceSlack | None:
    """The slack of ``result``'s trace (None without one)."""
    found = trace_of(result)
    if found is None:
        return None
    mode, trace = found
    case = result.case
    grad = int(trace.get("gradient_elements") or 0) * DTYPE_BYTES.get(case.dtype, 8)
    planned = ((mode.plan or {}).get("costs") or {}).get("tape_bytes")
    per_step = tuple(int(b) for b in planned) if isinstance(planned, list) else ()
    declared = max(per_step, default=0) or int((mode.counters or {}).get("tape_bytes") or 0)
    tape = declared or None
    if not declared:
        normal = _normal_overhead(result)
        tape = None if normal is None else max(0, normal) // max(1, case.steps)
    return TraceSlack(grad, tape, bool(declared), per_step)


def _normal_overhead(result: Any) -> int | None:
    from ckptbench.results.modes import Mode

    figures = result.summary.mode(Mode.NORMAL)
    return figures.overhead_bytes if figures.ok else None


def over_slack(rows: list[dict[str, Any]], slack: TraceSlack) -> list[dict[str, Any]]:
    """The rows whose measured bytes exceed planned + slack (judged rows only)."""
    over = []
    for row in rows:
        allowed = slack.of(row)
        measured = row.get("measured_bytes")
        if (
            allowed is not None
            and measured is not None
            and measured > row["planned_bytes"] + allowed
        ):
            over.append(row)
    return over


#: The caveat a trace above its slack shows (run's warnings, the HTML report's).
OVER_SLACK = "the traced memory exceeded the plan by more than the slack (docs/trace.md)"


def trace_warnings(result: Any) -> list[str]:
    """Where a result's trace exceeds its slack: one detail naming the step (layer) with the
    largest excess, and how many actions were over (empty when none or no trace)."""
    slack = trace_slack(result)
    if slack is None:
        return []
    _, trace = trace_of(result)  # type: ignore[misc]
    over = over_slack(trace["rows"], slack)
    if not over:
        return []
    first = max(over, key=lambda r: r["measured_bytes"] - r["planned_bytes"])
    excess = first["measured_bytes"] - first["planned_bytes"]
    where = first.get("layer") or f"action {first['index']}"
    return [
        f"{len(over)} of {len(trace['rows'])} actions; the most at {where} (action "
        f"{first['index']}, {first['kind']}): {_mib(excess)} above the plan, slack "
        f"{_mib(slack.of(first))}"
    ]
