"""One mode's worker followed: its events kept as they arrive (:class:`ModeEvents`), and
what they add up to when it has stopped (:func:`mode_outcome`). The process itself, its
pipe and its limits are :mod:`ckptbench.measure.launch`'s; nothing here starts, stops or
waits for a process."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ckptbench.results.schema import Case, Iteration, Mode, ModeResult, Status
from ckptbench.results.units import size_text

__all__ = [
    "WHILE_STARTING",
    "LimitBelowStart",
    "ModeEvents",
    "Progress",
    "RunEvent",
    "Stopped",
    "interrupted_result",
    "limit_below_start",
    "mode_outcome",
    "worker_environment",
]


@dataclass(frozen=True)
class RunEvent:
    """Progress of a run: a mode starts, an iteration completes, or a mode is done."""

    phase: str  # "start" | "iteration" | "done"
    mode: Mode
    round: int
    rounds: int
    index: int = 0  # iteration index (warm-up included), for "iteration"
    planned: int = 0  # warm-up + repeats
    warmup: bool = False
    result: ModeResult | None = None  # for "done"
    record: Iteration | None = None  # for "iteration": what it measured
    elapsed_s: float = 0.0  # since the worker was started


Progress = Callable[[RunEvent], None]


def _tail(text: str, lines: int = 8) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


class ModeEvents:
    """What one mode's worker has reported so far: its warm-up and measured iterations, its
    result event (and when it came), every exact peak over the memory limit, and the
    deadline (``--timeout``, counted again from the worker's ``ready``)."""

    def __init__(
        self, case: Case, mode: Mode, round_index: int, progress: Progress | None, started: float
    ) -> None:
        self.case, self.mode, self.round_index = case, mode, round_index
        self.progress, self.started = progress, started
        self.limit = case.memory_limit_bytes
        self.warm: list[Iteration] = []
        self.iters: list[Iteration] = []
        self.report: dict[str, Any] | None = None
        self.reported_at = 0.0
        self.over: list[int] = []  # an exact peak over the memory limit, whatever was sampled
        self.ready = False  # the worker has built its gradient and said so
        self.deadline = None if case.timeout_s is None else started + case.timeout_s

    def kept(self) -> str:
        """The end of a stopped mode's error: how many measured iterations it kept."""
        return f"; {len(self.iters)} of {self.case.repeats} measured iterations completed and kept"

    def note_peak(self, peak: Any) -> None:
        """Keep ``peak`` (bytes) where it is over the memory limit."""
        if self.limit and isinstance(peak, int) and peak > self.limit:
            self.over.append(peak)

    def handle(self, event: dict[str, Any]) -> None:
        """Take one event of the worker's channel (unknown or malformed ones are ignored)."""
        kind = event.get("event")
        if kind == "ready":
            self.ready = True
            if self.case.timeout_s is not None:
                self.deadline = time.perf_counter() + self.case.timeout_s
            self.note_peak(event.get("startup_peak_rss_bytes"))
        elif kind == "iteration" and isinstance(event.get("record"), dict):
            with contextlib.suppress(TypeError):
                self._iteration(event, Iteration(**event["record"]))
        elif kind == "result":
            self.report, self.reported_at = event, time.perf_counter()

    def _iteration(self, event: dict[str, Any], it: Iteration) -> None:
        (self.warm if event.get("warmup") else self.iters).append(it)
        self.note_peak(it.peak_rss_bytes)
        if self.progress:
            case = self.case
            self.progress(
                RunEvent(
                    "iteration", self.mode, self.round_index, case.rounds,
                    index=int(event.get("index", 0)), planned=case.warmup + case.repeats,
                    warmup=bool(event.get("warmup")), record=it,
                    elapsed_s=time.perf_counter() - self.started,
                )
            )  # fmt: skip


@dataclass(frozen=True)
class Stopped:
    """How a mode's worker came to stop, as the launcher saw it."""

    sampled_over_limit: bool  # the RSS sampler saw the memory limit exceeded
    sampled_rss: int | None  # the RSS it saw then
    timed_out: bool
    returncode: int | None
    stderr: str


#: How an out-of-memory mode's error says its worker was stopped before its ready event.
WHILE_STARTING = " while starting, before its first iteration"


class LimitBelowStart(ValueError):
    """The run's first worker went over ``--memory-limit`` before its first iteration: every
    mode's worker starts the same way (the interpreter, the framework, the workload's
    arrays), so no mode can be measured under that limit, and the run stops there, as
    hyperfine stops at a command whose first run fails. Nothing is saved; ``run`` exits 2,
    a sweep's cell is a config error (``sweep.cells.cell_error``)."""


def limit_below_start(case: Case, result: ModeResult) -> LimitBelowStart | None:
    """The :class:`LimitBelowStart` of a run whose first mode gave ``result``, or None where
    that worker reached its first iteration (or did not run out of memory)."""
    error = result.error or ""
    if result.status is not Status.OUT_OF_MEMORY or WHILE_STARTING not in error:
        return None
    return LimitBelowStart(
        f"--memory-limit {size_text(case.memory_limit_bytes or 0)} is below what a worker "
        f"holds before measuring: the first one ({result.mode.value}) was stopped while "
        f"starting ({error.split(';')[0]}), and every mode's worker starts the same way, so "
        "none can be measured under it; nothing measured, no file written; give more than "
        "an idle worker's peak (the baseline's exact peak, in a run without --memory-limit)"
    )


def mode_outcome(
    case: Case, events: ModeEvents, stopped: Stopped, common: dict[str, Any]
) -> tuple[ModeResult, dict[str, Any] | None]:
    """The mode's result from what its worker reported and how it stopped, in this order:
    out of memory, timeout, crashed without a result, failed, a malformed result or one
    with other than the planned iterations (crashed), else ok; with what the worker
    reported of its process where ok (:func:`worker_environment`). ``common`` holds the
    fields every outcome keeps."""
    iters, report = events.iters, events.report

    def failed(status: Status, error: str) -> tuple[ModeResult, None]:
        tail = _tail(stopped.stderr)
        return ModeResult(status=status, error=error, stderr_tail=tail, **common), None

    kept = events.kept()
    if stopped.sampled_over_limit or events.over:
        rss = max([stopped.sampled_rss or 0, *events.over])
        # before "ready": the interpreter, the framework or the workload's arrays alone
        when = "" if events.ready else WHILE_STARTING
        got, limit = size_text(rss), size_text(case.memory_limit_bytes or 0)
        if got == limit:  # 10.0 MiB over a limit of 10.0 MiB: the bytes tell them apart
            got, limit = f"{rss:,} B", f"{case.memory_limit_bytes or 0:,} B"
        return failed(
            Status.OUT_OF_MEMORY,
            f"RSS {got} exceeded the memory limit of {limit}; the worker was stopped{when}{kept}",
        )  # size_text: a 1 KiB limit is not "0.0 MiB"
    if stopped.timed_out:
        return failed(
            Status.TIMEOUT,
            f"worker exceeded the timeout of {case.timeout_s:g} s and was stopped{kept}",
        )
    if report is None:
        return failed(
            Status.CRASHED, f"worker exited with status {stopped.returncode} without a result"
        )
    if not report.get("ok"):
        return failed(Status.FAILED, str(report.get("error", "worker reported a failure")))
    try:
        result = ModeResult.reported(report, **common)
    except (KeyError, TypeError, ValueError) as err:
        return failed(Status.CRASHED, f"worker result is malformed ({type(err).__name__}: {err})")
    if len(iters) != case.repeats:
        return failed(
            Status.CRASHED,
            f"worker reported {len(iters)} measured iterations, {case.repeats} planned",
        )
    return result, worker_environment(report)


def worker_environment(report: dict[str, Any]) -> dict[str, Any]:
    """What an ok worker reported of its process: ``numpy`` (its numpy/BLAS and framework
    versions) and ``user_files`` (the user's own source files it loaded, at most
    ``worker.MAX_USER_FILES``, of ``user_files_total``), where reported."""
    files = report.get("user_files")
    files = [f for f in files if isinstance(f, str)] if isinstance(files, list) else None
    total = report.get("user_files_total")
    return {
        "numpy": report.get("numpy"),
        "user_files": files,
        "user_files_total": total if isinstance(total, int) else len(files or ()),
    }


def interrupted_result(
    err: BaseException, reason: str, events: ModeEvents, stderr: str, common: dict[str, Any]
) -> BaseException:
    """``err`` (a stop signal) with the mode's partial result attached as ``err.partial``:
    status interrupted, the iterations it completed kept."""
    err.partial = ModeResult(  # type: ignore[attr-defined]
        status=Status.INTERRUPTED,
        error=f"stopped by {reason}{events.kept()}",
        stderr_tail=_tail(stderr),
        **common,
    )
    return err
