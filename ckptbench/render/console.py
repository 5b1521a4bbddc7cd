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


def mode_progress(console: Console, modes: Sequence[Mode], case: Any):
    """Progress fed by the runner's events: a live display in a terminal, else one line per
    finished mode. Returns (callback, stop)."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    prog = Progress(
        TextColumn("{task.description}"),
        BarColumn(bar_width=20),
        TextColumn("{task.completed}/{task.total}"),
        TimeElapsedColumn(),
        console=console,
        transient=False,
        disable=not console.is_terminal,
    )
    planned = case.warmup + case.repeats
    tasks = {}
    for k in range(case.rounds):
        for m in modes:
            label = m.value if case.rounds == 1 else f"round {k + 1} {m.value}"
            tasks[k, m] = prog.add_task(f"{label}: waiting", total=planned, start=False)
    prog.start()

    def callback(event):
        task = tasks[event.round, event.mode]
        label = (
            event.mode.value if case.rounds == 1 else f"round {event.round + 1} {event.mode.value}"
        )
        if event.phase == "start":
            prog.start_task(task)
            prog.update(task, description=f"{label}: starting a fresh worker")
        elif event.phase == "iteration":
            kind = "warm-up" if event.warmup else "iteration"
            prog.update(task, completed=event.index + 1, description=f"{label}: {kind}")
        else:
            prog.update(
                task, completed=planned, description=f"{label}: {event.result.status.value}"
            )
            if not console.is_terminal:
                console.print(f"{label}: {event.result.status.value}", highlight=False)

    return callback, prog.stop
