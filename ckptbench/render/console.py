"""Consoles and progress displays for the command line (rich). On a terminal: colour and
the terminal's width. Elsewhere (logs, files, CI): plain text, tables fit
:data:`PLAIN_WIDTH` columns and lines are never hard-wrapped."""

from __future__ import annotations

from collections.abc import Callable, Sequence
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


def mode_progress(
    console: Console, modes: Sequence[Mode]
) -> tuple[Callable[[str, Mode, Any], None], Callable[[], None]]:
    """A rich progress display fed by the runner's callback; returns (callback, stop)."""
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    prog = Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        TimeElapsedColumn(),
        console=console,
        transient=False,
        disable=not console.is_terminal,
    )
    tasks = {m: prog.add_task(f"{m.value}: waiting", total=1, start=False) for m in modes}
    prog.start()

    def callback(phase, mode, result):
        task = tasks[mode]
        if phase == "start":
            prog.start_task(task)
            prog.update(task, description=f"{mode.value}: measuring in a fresh worker")
        else:
            prog.update(task, completed=1, description=f"{mode.value}: {result.status.value}")
            if not console.is_terminal:
                console.print(f"{mode.value}: {result.status.value}")

    return callback, prog.stop
