"""A run's result file while the run measures it: saved after every mode, reading as
unfinished until the run's last save, and what a stopped run leaves in it.

Every save is atomic (:func:`ckptbench.results.schema.save_or_beside`). A file saved mid-run
reads as a run stopped there (the next mode ``interrupted``, ``environment.interrupted.by``
:data:`UNFINISHED`, ``environment.finished`` false) until the last save, so a run killed
outright never leaves a file that reads as finished; a run stopped by a signal records by
what and in which round (:func:`record_interruption`); the last save records how many
rounds the run measured and why no more (:meth:`Recording.finish`), so a file with fewer
rounds than planned tells a run that stopped early by design (``--precision``) from one
whose rounds went missing (``results.modes.missing_rounds``). With ``--force`` the file
being replaced is moved aside (``NAME.<UTC time>.replaced``) until the run's last save, so
an interrupted rerun loses nothing. A save that fails at the path asked for goes beside it,
and the result says where and why (``RunResult.saved_as``, on every snapshot from then on,
the partial one a stop carries included). No printing: the CLI is told through callbacks.
"""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import ckptbench
from ckptbench.measure.launch import stop_reason
from ckptbench.results.schema import (
    UNFINISHED,
    Case,
    Mode,
    ModeResult,
    RunResult,
    SavedAs,
    Status,
    move_aside,
    move_over_nothing,
    save_or_beside,
)

__all__ = ["UNFINISHED", "Recording", "record_interruption", "round_order"]


def round_order(modes: Sequence[Mode], round_index: int) -> tuple[Mode, ...]:
    """Round k measures the modes rotated by k: every mode goes first equally often."""
    k = round_index % len(modes) if modes else 0
    return tuple(modes[k:]) + tuple(modes[:k])


class Recording:
    """A run's result as it grows: the modes measured so far, the environment, the rounds
    planned and started, the modes out of memory (mode -> 1-based round it first exceeded
    the limit), and where the result is saved (see
    :func:`ckptbench.measure.runner.run_case`): ``saved_as``, where and why when not at
    ``out_path``; ``saved_elsewhere(path, why)``, an optional notice at the moment it is."""

    def __init__(self, case: Case, env: dict[str, Any], out_path, replace_out,
                 saved_elsewhere=None):  # fmt: skip
        self.case, self.env = case, env
        self.host = socket.gethostname()
        self.created = datetime.now(UTC).isoformat(timespec="seconds")
        self.results: list[ModeResult] = []
        self.out_of_memory: dict[str, int] = {}
        self.ran = case.rounds  # rounds planned so far (more with ``precision``)
        self.round_starts: list[float] = []
        self.where = Path(out_path) if out_path is not None else None
        self.saved, self.replace_out, self.saved_elsewhere = False, replace_out, saved_elsewhere
        #: the file ``--force`` replaces, moved aside until this run's last save at ``out``
        self.aside: Path | None = None
        self.out = self.where
        self.saved_as: SavedAs | None = None  # where, when not at ``out``, and why

    def snapshot(self) -> RunResult:  # its figures: RunResult.summary, from these modes
        case = self.case
        return RunResult(
            case=case if self.ran == case.rounds else replace(case, rounds=self.ran),
            modes=tuple(self.results),
            environment=self.env,
            created=self.created,
            host=self.host,
            tool_version=ckptbench.__version__,
            saved_as=self.saved_as,
        )

    def save(self, unfinished: tuple[int, Mode | None] | None = None) -> None:
        """Save the result so far. ``unfinished`` (round, next mode; None between rounds):
        saved mid-run, the file reads as a run stopped there, the next mode interrupted
        before it started, as a stopped run's file does, until the run's last save."""
        if self.where is None:
            return
        if not self.saved and self.replace_out and self.where.is_file():
            with contextlib.suppress(OSError):  # kept (and --force honoured) as before
                self.aside = move_aside(self.where, "replaced")  # never over a kept file
        doc = self.snapshot()
        if unfinished is not None and "interrupted" not in self.env:
            k, mode = unfinished
            cut = {"by": UNFINISHED, "round": k + 1}
            modes = doc.modes
            if mode is not None:
                modes += (ModeResult(mode=mode, status=Status.INTERRUPTED, error=UNFINISHED,
                                     round=k, iterations_planned=self.case.repeats),)  # fmt: skip
            env = {**self.env, "interrupted": cut, "finished": False}
            doc = replace(doc, modes=modes, environment=env)
        at, why = save_or_beside(doc, self.where, replace=self.saved or self.replace_out)
        if why is not None:
            if self.saved and self.where.is_file():  # this run's own earlier, partial save
                with contextlib.suppress(OSError):  # would read as a finished result there
                    self.where.unlink()
                    why += "; the partial result saved there earlier is removed"
            if self.aside is not None and not self.where.exists():  # --force: put it back
                with contextlib.suppress(OSError):  # not over one that appeared meanwhile
                    move_over_nothing(self.aside, self.where)
                    self.aside = None
                    why += "; the result it was to replace is left in place"
            self.where, self.saved_as = at, SavedAs(at, why)
            if self.saved_elsewhere is not None:
                self.saved_elsewhere(str(at), why)
        self.saved = True

    def finish(self, rounds: int, modes: int, precise: bool) -> None:
        """The run's last save, after ``rounds`` rounds of its ``modes`` modes (``precise``:
        with ``--precision``): ``environment.finished`` says how many rounds it ran and why
        no more (``results.modes.finished_record``), and ``--precision``'s record how it
        stopped where the loop, not it, ended the run."""
        prec = self.env.get("precision") if precise else None
        why = "planned"
        if len(self.out_of_memory) == modes:  # every mode skipped: a round measures nothing
            why = "out-of-memory"
        elif isinstance(prec, dict) and prec.get("stopped") != "running":
            why = str(prec.get("stopped"))
        elif isinstance(prec, dict):  # it would have gone on: the plug-in's source changed
            why = "plugin-changed"
        if isinstance(prec, dict) and why in ("out-of-memory", "plugin-changed"):
            prec.update(rounds=rounds, stopped=why)
        self.env["finished"] = {"rounds": rounds, "why": why}
        if self.results:
            self.save()


def record_interruption(rec: Recording, err: BaseException, modes: Sequence[Mode]) -> None:
    """Save what a stopped run measured: the partial mode (or, stopped between modes, the
    next one as interrupted before it started) and, in the environment, by what and in
    which round it was stopped. Nothing measured yet: no file (a result needs a mode)."""
    results, out_of_memory = rec.results, rec.out_of_memory
    partial = getattr(err, "partial", None)
    done = {(r.round, r.mode) for r in results}
    pending = [
        (k, m)
        for k in range(len(rec.round_starts))
        for m in round_order(modes, k)
        if (k, m) not in done and not (m.value in out_of_memory and k >= out_of_memory[m.value])
    ]
    if partial is None and results and pending:
        k, mode = pending[0]  # stopped between modes: say so in the file
        why = f"stopped by {stop_reason(err)} before this mode started"
        partial = ModeResult(mode=mode, status=Status.INTERRUPTED, error=why, round=k,
                             iterations_planned=rec.case.repeats)  # fmt: skip
    rec.env["finished"] = False
    rec.env["interrupted"] = {
        "by": stop_reason(err),
        "round": (partial.round if partial is not None else len(rec.round_starts)) + 1,
    }
    if partial is not None:
        results.append(partial)
    if results:
        rec.save()
