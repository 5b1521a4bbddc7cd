"""Consoles and progress displays for the command line (rich). On a terminal: colour and
the terminal's width. Elsewhere (logs, files, CI): plain text, tables fit
:data:`PLAIN_WIDTH` columns and lines are never hard-wrapped."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.console import Console

from ckptbench.results import Mode

__all__ = ["PLAIN_WIDTH", "mode_progress", "stderr_console", "stdout_console"]

#: Width of tables when stdout is not a terminal.
PLAIN_WIDTH = 120


def stdout_console() -> Console:
    """Results: the terminal's width, or 120 plain columns when piped."""
    console = Console()
    if console.is_terminal:
        return console
    return Console(width=PLAIN_WIDTH, no_color=True, highlight=False, soft_wrap=True)


def stderr_console() -> Console:
    """Progress, warnings and failures; lines are not wrapped when stderr is a log."""
    console = Console(stderr=True)
    if console.is_terminal:
        return console
    return Console(stderr=True, soft_wrap=True, no_color=True, highlight=False)


def _eta(event: Any) -> str:
    done = event.index + 1
    left = event.planned - done
    if done <= 0 or left <= 0:
        return ""
    return f", ETA {event.elapsed_s / done * left:.0f} s"


def mode_progress(
    console: Console,
    modes: Sequence[Mode],
    case: Any,
    *,
    quiet: bool = False,
    verbose: bool = False,
    lines: bool = False,
):
    """Progress fed by the runner's events; returns (callback, stop).

    In a terminal a live bar per (round, mode) with iteration k of n; elsewhere one line per
    finished mode. ``lines`` (``--progress``) prints one line per iteration with the elapsed
    time and an ETA even when not a terminal; ``verbose`` adds each iteration's time and
    exact peak; ``quiet`` shows nothing. A (round, mode) the runner skips after the mode ran
    out of memory shows as skipped on its bar; the run's warnings say it once.
    """
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    live = console.is_terminal and not quiet and not lines
    prog = Progress(
        TextColumn("{task.description}"),
        BarColumn(bar_width=20),
        TextColumn("{task.completed}/{task.total}"),
        TimeElapsedColumn(),
        console=console,
        transient=False,
        disable=not live,
    )
    planned = case.warmup + case.repeats
    tasks = {}

    def label_of(round_index: int, mode: Mode) -> str:
        if case.rounds == 1 and round_index == 0:
            return mode.value
        return f"round {round_index + 1} {mode.value}"

    for k in range(case.rounds):
        for m in modes:
            tasks[k, m] = prog.add_task(f"{label_of(k, m)}: waiting", total=planned, start=False)
    prog.start()

    def say(text: str) -> None:
        if not quiet:
            console.print(text, highlight=False)

    def callback(event):
        if (event.round, event.mode) not in tasks:  # a round added by --precision
            for m in modes:
                tasks[event.round, m] = prog.add_task(
                    f"{label_of(event.round, m)}: waiting", total=planned, start=False
                )
        task = tasks[event.round, event.mode]
        label = label_of(event.round, event.mode)
        if event.phase == "skip":  # out of memory in an earlier round: the run's warning says so
            prog.update(task, description=f"{label}: skipped (out of memory before)")
        elif event.phase == "start":
            prog.start_task(task)
            prog.update(task, description=f"{label}: starting a fresh worker")
        elif event.phase == "iteration":
            kind = "warm-up" if event.warmup else "iteration"
            prog.update(task, completed=event.index + 1, description=f"{label}: {kind}")
            if lines or verbose:
                rec = event.record
                detail = (
                    f": {rec.wall_time_s:.3f} s, exact peak {rec.peak_rss_bytes / 2**20:.1f} MiB"
                    if verbose and rec is not None
                    else ""
                )
                say(
                    f"{label}: {kind} {event.index + 1}/{event.planned}{detail}, elapsed "
                    f"{event.elapsed_s:.0f} s{_eta(event)}"
                )
        else:
            status = event.result.status.value
            prog.update(task, completed=planned, description=f"{label}: {status}")
            if not live:
                say(f"{label}: {status}")

    return callback, prog.stop
