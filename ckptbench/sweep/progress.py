"""Progress of a sweep: events with an ETA weighted by what each cell costs.

:func:`cell_cost` estimates the work of a cell's rounds in step evaluations (cells differ a
lot: a uniform cell with few slots can cost 10x a revolve cell), :func:`estimated_seconds`
its wall time with the step costs a planned strategy measures first; :class:`ProgressTracker`
turns the cells done so far into :class:`SweepProgress` events for a callback, weighting
each cell by that one estimate (docs/architecture.md, "sweep").
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from ckptbench.backends.registry import spec as backend_spec
from ckptbench.measure.costwork import costs_units
from ckptbench.results.schema import Case, Mode, ModeResult
from ckptbench.results.units import duration_text
from ckptbench.schedules import get_strategy
from ckptbench.sweep.cells import CellOutcome

__all__ = [
    "Progress",
    "ProgressTracker",
    "SweepProgress",
    "cell_cost",
    "costs_seconds",
    "estimated_seconds",
    "left_out",
    "rounds_seconds",
    "unit_price",
]


@dataclass(frozen=True)
class SweepProgress:
    """A progress event: ``event`` is "cell-start", "mode-start", "mode-iteration",
    "mode-done" or "cell-done".

    ``done``/``total`` count the cells this sweep measures (kept cells excluded) and
    ``running`` the cells in flight (several on a Dask cluster of ``workers``); ``eta_s`` is
    the time per unit of work so far times the work left, work being
    :func:`estimated_seconds` (a planned cell's step costs counted, as in the total said
    before the sweep; None before the first cell finishes). One at a time, the time so far
    is the elapsed time; on ``workers`` > 1 it is the finished cells' own durations, and the
    work left is shared by the workers. "cell-retry" says a cell goes back in the queue
    (``reason``: its Dask worker left); ``attempt`` counts the tries of a starting cell.
    """

    event: str
    case: Case
    done: int
    total: int
    elapsed_s: float
    eta_s: float | None
    mode: Mode | None = None
    mode_result: ModeResult | None = None
    cell: CellOutcome | None = None
    iteration: Any = None  # "mode-iteration": the runner's RunEvent (index, planned, ...)
    running: int = 0
    workers: int = 1
    attempt: int = 1
    reason: str = ""
    again: str = ""  # "cell-retry": when it is measured again (at once where empty)

    def line(self) -> str:
        """One progress line, e.g. ``[3/13] lstm-l1000-s4-uniform-... done (measured) 45 s,
        ETA 12 min``; with several workers ``[2/8 done, 2 running] ...``."""
        if self.workers > 1:
            where = f"[{self.done}/{self.total} done, {self.running} running] {self.case.key}"
        else:
            where = f"[{self.done + (self.event != 'cell-done')}/{self.total}] {self.case.key}"
        if self.event == "cell-start":
            again = f" (attempt {self.attempt})" if self.attempt > 1 else ""
            text = f"{where} started{again}"
        elif self.event == "cell-retry":
            text = f"{where} lost ({self.reason}); {self.again or 'measuring it again'}"
        elif self.event == "mode-iteration" and self.iteration is not None:
            it = self.iteration
            kind = "warm-up" if it.warmup else "iteration"
            rnd = f" round {it.round + 1}" if it.rounds > 1 else ""
            text = f"{where}{rnd} {it.mode.value} {kind} {it.index + 1}/{it.planned}"
        elif self.event in ("mode-start", "mode-done") and self.mode is not None:
            status = f" ({self.mode_result.status.value})" if self.mode_result else ""
            verb = "running" if self.event == "mode-start" else "done"
            text = f"{where} {self.mode.value} {verb}{status}"
        elif self.cell is not None:
            took_s = self.cell.duration_s
            took = f" in {duration_text(took_s)}" if took_s is not None else ""
            ok = "" if self.cell.ok is not False else ", NOT OK"
            text = f"{where} {self.cell.state.value}{ok}{took}"
        else:
            text = f"{where} {self.event}"
        if self.eta_s is not None:
            text += f", ETA {duration_text(self.eta_s)}"
        return text


Progress = Callable[[SweepProgress], None]


def cell_cost(case: Case) -> int:
    """Rough work of measuring a cell, in untaped step evaluations, for the ETA: per
    iteration the baseline's forward sweep (l), the taped sweep and its reverse in normal and
    checkpointed mode (~3l each) and the schedule's recomputation (its planned advances)."""
    return case.rounds * (case.warmup + case.repeats) * (7 * case.steps + _planned_advances(case))


@lru_cache(maxsize=1024)
def _planned_advances_of(strategy: str, steps: int, snaps: int) -> int:
    """Untaped advances of a cell for the ETA, from the strategy registry: exact where a
    closed form or a cheap replay gives them, else a lower bound or one extra sweep."""
    return get_strategy(strategy).estimated_advances(steps, snaps)


#: Seconds per unit of :func:`cell_cost` for the reference LSTM (hidden 256, batch 16, input
#: 32), calibrated on the main job here: ~45 s for 4 iterations of 3 modes, ~38 000 units.
SECONDS_PER_UNIT = 0.001
_REFERENCE_FLOPS = 2 * 16 * (32 + 256) * 4 * 256
#: On an accelerator a step of these sizes costs its kernel launches, not its matmul work,
#: so the units are not scaled by FLOPs. Measured on one H200 (docs/results/gpu.md): a
#: forward-only step 16 µs (JAX, hidden 256) to 160 µs (torch, hidden 1024), ~230 µs a unit
#: in a taped step with its reverse; a worker's start-up (framework import, device context)
#: ~10 s. One round of torch Revolve-31 at hidden 1024 x batch 64 took 35 s (run 7).
ACCELERATOR_SECONDS_PER_UNIT = 0.0002
_ACCELERATOR_START_S = 10.0


def unit_price(case: Case) -> tuple[float, float]:
    """(seconds per unit of :func:`cell_cost`, a worker's start-up in seconds): on the CPU
    scaled from the reference LSTM step by the step's matmul work, on an accelerator by step
    count alone."""
    if case.device == "cpu":
        flops = 2 * case.batch * (case.input + case.hidden) * 4 * case.hidden
        per_unit = SECONDS_PER_UNIT * max(flops / _REFERENCE_FLOPS, 0.05)
        return per_unit, backend_spec(case.backend).worker_start_s
    return ACCELERATOR_SECONDS_PER_UNIT, _ACCELERATOR_START_S


def rounds_seconds(case: Case) -> float:
    """A rough wall time of the cell's rounds (:func:`unit_price`): its :func:`cell_cost`
    and every worker's start-up."""
    per_unit, start_s = unit_price(case)
    return cell_cost(case) * per_unit + start_s * case.rounds * 3


def costs_seconds(case: Case) -> float:
    """A rough wall time of the step-cost measurement a planned strategy's cell runs before
    its rounds, in a worker of its own (``measure.runner``; none for another strategy): its
    step evaluations (``measure.costwork.costs_units``, per layer on a built-in chain) at
    the price of the cell's and one more worker's start-up. What no estimate knows ahead
    (JAX's compilations) is its backend's ``costs_work.unknown``."""
    if not get_strategy(case.strategy).planned:
        return 0.0
    from ckptbench.workloads import BUILTIN_CHAINS

    per_unit, start_s = unit_price(case)
    whole = case.device != "cpu" or case.executor_used not in (None, "engine")
    units = costs_units(
        backend_spec(case.backend).costs_work, case.steps, chain=case.model in BUILTIN_CHAINS,
        step_s=per_unit, whole_gradient=whole,
    )  # fmt: skip
    return units * per_unit + start_s


def estimated_seconds(case: Case) -> float:
    """A rough wall time for measuring a cell (for the confirmation of large sweeps, the
    dry run; not a prediction): its step costs where its strategy plans
    (:func:`costs_seconds`), then its rounds (:func:`rounds_seconds`)."""
    return costs_seconds(case) + rounds_seconds(case)


def left_out(cases: list[Case]) -> str:
    """What the estimates of ``cases`` leave out, said after their total: ' plus JAX's
    compilations' where a planned cell's step costs compile (``costs_work.unknown``)."""
    parts = dict.fromkeys(
        backend_spec(c.backend).costs_work.unknown
        for c in cases
        if get_strategy(c.strategy).planned
    )
    return "".join(f" plus {part}" for part in parts if part)


def _planned_advances(case: Case) -> int:
    return _planned_advances_of(case.strategy, case.steps, min(case.snaps, case.steps))


class ProgressTracker:
    """Progress events with an ETA weighted by :func:`estimated_seconds`, the estimate the
    sweep's up-front total adds up (cells differ a lot: a uniform cell with few slots can
    cost 10x a revolve cell, and a planned cell measures its step costs first)."""

    def __init__(
        self, callback: Progress | None, cases: list[Case], clock0: float, workers: int = 1
    ) -> None:
        self.callback = callback
        self.total = len(cases)
        self.done = 0
        self.running = 0
        self.workers = max(1, workers)
        self.clock0 = clock0
        self.cost_total = sum(estimated_seconds(c) for c in cases) if callback else 0.0
        self.cost_done = 0.0
        self.busy_s = 0.0  # the finished cells' own durations

    def eta(self, elapsed: float) -> float | None:
        if not self.cost_done:
            return None
        left = self.cost_total - self.cost_done
        if self.workers == 1:
            return elapsed / self.cost_done * left
        share = max(1, min(self.workers, self.total - self.done))
        return self.busy_s / self.cost_done * left / share

    def emit(self, event: str, case: Case, **extra: Any) -> None:
        if self.callback is None:
            return
        elapsed = time.monotonic() - self.clock0
        self.callback(
            SweepProgress(
                event=event,
                case=case,
                done=self.done,
                total=self.total,
                elapsed_s=elapsed,
                eta_s=self.eta(elapsed),
                running=self.running,
                workers=self.workers,
                **extra,
            )
        )

    def cell_start(self, case: Case, attempt: int = 1) -> None:
        self.running += 1
        self.emit("cell-start", case, attempt=attempt)

    def cell_retry(self, case: Case, reason: str, again: str = "") -> None:
        self.running = max(0, self.running - 1)
        self.emit("cell-retry", case, reason=reason, again=again)

    def cell_done(self, outcome: CellOutcome) -> None:
        self.done += 1
        self.running = max(0, self.running - 1)
        if self.callback is not None:
            self.cost_done += estimated_seconds(outcome.case)
            self.busy_s += outcome.duration_s or 0.0
        self.emit("cell-done", outcome.case, cell=outcome)
