"""Run every cell of a sweep config, saving each result the moment it is measured.

Layout of an output folder::

    OUT/<case.key>.json     one RunResult per cell (atomic writes: complete or absent)
    OUT/sweep.json          the manifest: the config, every cell's state, file, host, error

Semantics (what ``ckptbench sweep`` promises):

* **Fresh sweep** (``resume=False``): refuses to start when OUT already holds a result of one
  of its cells, rather than overwriting measurements (:class:`SweepError`).
* **Resume** (``resume=True``): a cell whose file parses, covers all three modes and was
  measured with the same settings is *kept*; a cell with no file, or a partial file (the
  runner saves after every mode, so a kill mid-cell leaves one), is measured. A file that
  does not parse, belongs to another schema version or was measured with other settings
  (repeats, warmup, threads, sample interval) or another version of its plug-in's source
  (its SHA-256) is a *conflict*: reported, left untouched and
  not re-measured, because it was not written by an interrupted sweep (writes are atomic)
  and may be someone's data; delete it to measure the cell again. Saved cells whose
  measurement failed are kept unless ``retry_failed=True``.
* **Failures** never stop a sweep: a failed measurement is saved like any other result; a
  cell runner that raises is recorded in the manifest (no file, so ``--resume`` retries it),
  unless no plan exists for the cell as configured (``PlanError``: state ``invalid``, a
  config error that ``--resume`` does not retry).
* **Dask** (``dask_address``): cells go to an existing ``distributed`` cluster, at most one
  cell in flight per worker at any time (the client pins each cell to a free worker, whatever
  its thread count), so measurements on one worker never overlap. Run one worker per host
  (``dask worker ADDR --nworkers 1 --nthreads 1``) so cells on one machine don't disturb
  each other either. The address, the scheduler and every worker (ckptbench version,
  Python, backends) are checked before the folder is created; a cell whose worker leaves is
  measured again once on another worker (the manifest keeps both attempts); a scheduler
  that goes away ends the sweep early (:attr:`SweepOutcome.ended_early`, exit 1, cells in
  flight marked), one that restarts (its id changed) leaves them pending unless a worker
  joins it; a stop signal stops the cells on the workers and saves their modes in
  flight as interrupted (``ckptbench.sweep.dask``, docs/cluster.md). ``distributed`` is
  imported only on this path.

This module never prints: progress goes to a callback; the outcome is returned.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import ckptbench
from ckptbench.results.folderlocks import locked_folder
from ckptbench.results.schema import RunResult
from ckptbench.results.store import (
    MANIFEST_KIND,
    MANIFEST_NAME,
    cell_path,
    open_folder,
    write_manifest,
)
from ckptbench.sweep.cells import (
    Attempt,
    CellOutcome,
    CellState,
    SweepOutcome,
    cell_error,
    one_line,
)
from ckptbench.sweep.config import SweepConfig
from ckptbench.sweep.preflight import (
    SweepError,
    check_manifest,
    plan_cells,
    previous_manifest,
    remove_stale_temp_files,
)
from ckptbench.sweep.progress import Progress, ProgressTracker, SweepProgress, cell_cost
from ckptbench.sweep.saving import keep_unreadable, saved_outcome, set_aside, stopped_outcome

if TYPE_CHECKING:
    from ckptbench.measure.sources import PluginKey
    from ckptbench.measure.tasks import PluginChecked

__all__ = [
    "MANIFEST_KIND",
    "MANIFEST_NAME",
    "CellOutcome",
    "CellState",
    "SweepError",
    "SweepOutcome",
    "SweepProgress",
    "cell_cost",
    "cell_path",
    "default_run_cell",
    "one_line",
    "run_sweep",
]

RunCell = Callable[..., RunResult]  # run_cell(case, *, out_path=..., progress=...)


def _write_manifest(
    config: SweepConfig, out_dir: Path, cells: list[CellOutcome], started: str | list[str]
) -> Path:
    """``started``: when the sweep started, or that and when each ``--resume`` started."""
    resumed = started[1:] if isinstance(started, list) else []
    started = started[0] if isinstance(started, list) else started
    doc = {
        "tool_version": ckptbench.__version__,
        "config": {
            "name": config.name,
            "source": config.source,
            # where the config is from the folder, so `check` finds it from any directory
            "path_from_folder": _path_from(out_dir, config.source),
            "description": config.description,
            "expect": config.expect.as_dict(),
            "expect_by_strategy": {k: v.as_dict() for k, v in config.expect_by_strategy.items()},
        },
        "started": started,
        "resumed": resumed,
        "updated": datetime.now(UTC).isoformat(timespec="seconds"),
        "cells": [c.to_dict() for c in cells],
    }
    return write_manifest(out_dir, doc)


def _path_from(folder: Path, source: str) -> str | None:
    """``source`` (a config file as typed) relative to ``folder``; None for a config that
    is no file (a string parsed in a test) or on another drive."""
    path = Path(source)
    if not path.is_file():
        return None
    try:
        return os.path.relpath(path.resolve(), folder.resolve())
    except ValueError:
        return None


# --------------------------------------------------------------------------- the sweep


def default_run_cell() -> RunCell:
    from ckptbench.measure.runner import run_case

    return run_case


def run_sweep(
    config: SweepConfig,
    out_dir: str | os.PathLike[str],
    *,
    resume: bool = False,
    run_cell: RunCell | None = None,
    progress: Progress | None = None,
    dask_address: str | None = None,
    retry_failed: bool = False,
    dask_timeout_s: float | None = None,
    plugin_checks: Mapping[PluginKey, PluginChecked] | None = None,
) -> SweepOutcome:
    """Measure every cell of ``config`` into ``out_dir`` (see the module docstring).

    ``run_cell(case, out_path=PATH|None, progress=CALLBACK|None) -> RunResult`` measures one
    cell; the default is :func:`measure.runner.run_case`. A result that says it was saved
    elsewhere than ``out_path`` (``RunResult.saved_as``, as ``run_case`` returns it, and on
    a stop the partial ``err.result``) is not saved a second time: the cell's outcome names
    that file. One that says nothing is saved at its path by the sweep. Raises
    :class:`SweepError` before measuring anything when the folder holds results of this
    sweep and ``resume`` is False, holds another sweep, or the Dask cluster cannot run the
    cells; with Dask, nothing is written before the scheduler and its workers were checked
    (within ``dask_timeout_s``, default ``sweep.cluster.CONNECT_TIMEOUT_S``).

    ``plugin_checks``: each plug-in check's outcome (``tasks.checked_plugins``, by
    ``sources.plugin_key``), given to every cell of that plug-in, here or on a Dask worker,
    as ``run`` gives its own to ``run_case`` (``PluginChecked.run_options``): its watch of
    the plug-in's files starts at the check, and it records the dtypes of the loss and of
    what the loss gets.
    """
    if dask_address is None:
        out = open_folder(out_dir)
        with locked_folder(out):
            return _run_locked(config, out, resume, run_cell, progress, None, retry_failed,
                               plugin_checks or {})  # fmt: skip
    from ckptbench.sweep.cluster import CONNECT_TIMEOUT_S, DaskError, connect

    try:
        cluster = connect(dask_address, config.cases, dask_timeout_s or CONNECT_TIMEOUT_S)
    except DaskError as err:
        raise SweepError(str(err)) from None
    with cluster:
        out = open_folder(out_dir)
        with locked_folder(out):
            return _run_locked(config, out, resume, run_cell, progress, cluster, retry_failed,
                               plugin_checks or {})  # fmt: skip


def _run_locked(config, out, resume, run_cell, progress, cluster, retry_failed, checked):
    """:func:`run_sweep` once the folder's lock is held (and the cluster, if any, checked)."""
    check_manifest(out, config.name)
    remove_stale_temp_files(out, [MANIFEST_NAME, *(f"{c.key}.json" for c in config.cases)])
    previous = previous_manifest(out) if resume else {}
    cells, to_run = plan_cells(config, out, resume, retry_failed)
    book = _SweepBook(config, out, cells, _start_times(previous), progress, to_run, cluster,
                      checked)  # fmt: skip
    ended_early = None
    if cluster is None:
        _run_here(book, run_cell or default_run_cell(), to_run)
    else:
        from ckptbench.sweep.dask import run_dask

        jobs = [(i, cells[i].case) for i in to_run]
        checks = {i: c for i, case in jobs if (c := book.checked_of(case)) is not None}
        given = {"checks": checks} if checks else {}  # built-ins only: nothing to give
        ended_early = run_dask(cluster, run_cell, jobs, book.starting, book.done, book.retrying,
                               **given)  # fmt: skip
    return SweepOutcome(
        name=config.name,
        out_dir=out,
        manifest_path=book.manifest,
        cells=tuple(book.cells),
        elapsed_s=time.monotonic() - book.clock0,
        notes=(*book.notes, *book.worker_notes()),
        ended_early=ended_early,
        manifest_error=book.manifest_error,
    )


def _start_times(previous: dict[str, Any]) -> list[str]:
    """When this sweep started; a resumed one keeps when it first started and when each
    earlier ``--resume`` did."""
    now = datetime.now(UTC).isoformat(timespec="seconds")
    first = previous.get("started")
    if not isinstance(first, str):
        return [now]
    return [first, *(r for r in previous.get("resumed") or () if isinstance(r, str)), now]


class _SweepBook:
    """A running sweep's cells and its manifest, kept in step: every change of a cell's
    state is written to the manifest at once and reported to the progress tracker; the
    notes for the sweep's summary (results moved aside) are collected here."""

    def __init__(self, config, out, cells, started, progress, to_run, cluster, checked) -> None:
        self.config, self.out, self.cells, self.started = config, out, cells, started
        self.cluster = cluster
        self.checked: Mapping[PluginKey, PluginChecked] = checked  # by sources.plugin_key
        self.notes: list[str] = []
        #: the cells whose file this sweep replaces, and why (``preflight.remeasure_reason``)
        self.again = {i: cells[i].remeasure_reason or "" for i in to_run if cells[i].path.exists()}
        #: what each cell to run came with: the tries an earlier sweep recorded, and why it is
        #: measured again (a Dask retry adds its lost try and says so until the cell ends)
        self.before = {i: (cells[i].attempts, cells[i].remeasure_reason) for i in to_run}
        self.said: dict[str, list[str]] = {}  # what Dask workers said of cells -> the cells
        self.manifest_error: str | None = None
        self.manifest = _write_manifest(config, out, cells, started)  # at start: it must work
        self.clock0 = time.monotonic()
        workers = len(cluster.workers) if cluster is not None else 1
        self.state = ProgressTracker(
            progress, [cells[i].case for i in to_run], self.clock0, workers
        )

    def checked_of(self, case) -> PluginChecked | None:
        """What the check of this cell's plug-in found (None: a built-in)."""
        from ckptbench.measure.sources import plugin_key

        return self.checked.get(plugin_key(case))

    def write(self) -> None:
        """The manifest, rewritten; where the folder stops taking it (read-only, full) the
        sweep goes on, every result saved (beside, if need be) and said, and the summary
        says the manifest is stale (exit 1), never a traceback that loses the cells in
        flight."""
        try:
            _write_manifest(self.config, self.out, self.cells, self.started)
        except (OSError, ValueError) as err:  # StoreError, TargetError: not ours to replace
            if self.manifest_error is None:
                why = getattr(err, "strerror", None) or err
                self.manifest_error = (
                    f"{self.manifest} could not be updated ({why}): it lists the cells as they "
                    "were before; the lines above say where each result went"
                )

    def finished(self, index: int, outcome: CellOutcome) -> None:
        self.cells[index] = outcome
        self.write()
        self.state.cell_done(outcome)

    def starting(self, index: int, attempt: int = 1) -> None:
        self.cells[index] = replace(self.cells[index], state=CellState.RUNNING)
        self.write()
        if self.cluster is not None:  # workers join and leave: progress and ETA follow them
            self.state.workers = max(1, len(self.cluster.workers))
        self.state.cell_start(self.cells[index].case, attempt)

    def stopped(self, index: int, err: BaseException, duration: float = 0.0) -> None:
        """A stop signal during a local cell: record the part it saved, the cell pending
        again so that ``--resume`` measures it (or that it is pending, when no mode was
        measured)."""
        partial = getattr(err, "result", None)  # its saved_as: saved beside its path
        saved_at = partial.saved_as if isinstance(partial, RunResult) else None
        if partial is not None and partial.modes and (saved_at or self.cells[index].path.exists()):
            saved = saved_outcome(self.cells[index], partial, duration)
            how = f"stopped by {_stop_name(err)}"
            if saved.state is CellState.ERROR:  # its part beside its path, said where
                saved = replace(saved, error=f"{how}; {saved.error}")
            self.cells[index] = stopped_outcome(saved, partial, how)
        else:  # stopped before a mode was measured: nothing saved, not running
            why = f"stopped by {_stop_name(err)} before its first mode"
            self.cells[index] = replace(self.cells[index], state=CellState.PENDING, error=why)
        self.write()

    def done(self, index: int, result: RunResult | None, error: str | None,
             attempts: tuple[Attempt, ...], interrupted: bool,
             raw: Any = None, state: CellState | None = None,
             notes: tuple[str, ...] = ()) -> None:  # fmt: skip
        """A Dask cell ended: saved (its partial or earlier file set aside), or not (an
        error unless ``state`` says); ``raw``, a foreign document its worker returned, kept;
        ``notes``, what its worker said of it (files of the check it does not have), for
        the sweep's summary, once per worker (:meth:`worker_notes`). The tries an earlier
        sweep of this folder recorded come first (``--resume``)."""
        for note in notes:
            self.said.setdefault(note, []).append(self.cells[index].key)
        last = attempts[-1] if attempts else Attempt("")
        earlier, reason = self.before.get(index, (self.cells[index].attempts, None))
        attempts = (*earlier, *attempts)  # a retried cell's lost tries are among these
        if raw is not None:
            error = f"{error}; {keep_unreadable(self.cells[index], raw)}"
        if result is not None:
            # a partial file (or one that appeared) aside; where it cannot be, never replaced
            stuck = set_aside(self.cells[index], self.notes, self.again.get(index))
            outcome = saved_outcome(self.cells[index], result, last.duration_s or 0.0,
                                    last.worker, attempts, replace_file=stuck is None)  # fmt: skip
            if interrupted:  # the part measured before the stop: pending again, as locally
                outcome = stopped_outcome(outcome, result, last.error or "stopped")
        else:
            outcome = replace(
                self.cells[index],
                state=CellState.PENDING if interrupted else (state or CellState.ERROR),
                error=error,
                host=last.host,
                worker=last.worker,
                duration_s=last.duration_s,
                attempts=attempts,
                remeasure_reason=reason,  # no longer retrying: its outcome is its error
            )
        self.finished(index, outcome)

    def worker_notes(self) -> list[str]:
        """What Dask workers said of their cells, each once (a note names its worker), with
        the cells it concerns; every result keeps its own in ``environment.dask.notes``."""
        out = []
        for note, keys in self.said.items():
            more = f" and {len(keys) - 1} more cell(s) measured there" if len(keys) > 1 else ""
            out.append(f"{keys[0]}{more}: {note}")
        return out

    def retrying(self, index: int, why: str, again: str = "", attempts=()) -> None:
        """A Dask cell whose try was lost (its worker left, its scheduler restarted), queued
        again: pending, not failed, as it may well succeed. The lost try is kept in its
        ``attempts`` (``attempts``: its tries in this sweep) and why it is measured again in
        ``remeasure_reason``; its ``error`` stays empty, for its final outcome alone."""
        earlier, reason = self.before.get(index, (self.cells[index].attempts, None))
        n = len(attempts) or 1
        retry = f"retrying: attempt {n} lost ({why}); {again or 'measuring it again'}"
        self.cells[index] = replace(
            self.cells[index],
            state=CellState.PENDING,
            error=None,
            attempts=(*earlier, *attempts),
            remeasure_reason=f"{reason}; {retry}" if reason else retry,
        )
        self.write()
        self.state.cell_retry(self.cells[index].case, why, again)


def _run_here(book: _SweepBook, runner: RunCell, to_run: list[int]) -> None:
    """Measure the cells ``to_run`` one after another in this process's workers."""
    for index in to_run:
        book.starting(index)
        t0 = time.monotonic()
        try:
            outcome = _run_local(runner, book.cells[index], book.state, book.again.get(index),
                                 book.notes, book.checked_of(book.cells[index].case))  # fmt: skip
        except BaseException as err:  # a stop signal: record the saved part, then stop
            book.stopped(index, err, time.monotonic() - t0)
            raise
        book.finished(index, outcome)


def _stop_name(err: BaseException) -> str:
    from ckptbench.measure.launch import stop_reason

    return stop_reason(err)


def _run_local(
    run_cell: RunCell,
    pending: CellOutcome,
    state: ProgressTracker,
    remeasure: str | None = None,
    notes: list[str] | None = None,
    checked: PluginChecked | None = None,
) -> CellOutcome:
    """Measure one cell. Its file is moved aside only when the plan re-measures it (a
    failed or incomplete result, ``remeasure``: why), and said; a file that appeared there while
    the sweep ran was not written by it: it is kept and the cell is an error. ``checked``:
    what its plug-in's check found, given to ``run_cell`` as ``run`` gives it
    (``PluginChecked.run_options``: where the cell's watch of the plug-in's files starts,
    the dtypes of the loss and of what it gets)."""
    case = pending.case

    def on_mode(event: Any) -> None:
        if event.phase in ("start", "done"):
            state.emit(f"mode-{event.phase}", case, mode=event.mode, mode_result=event.result)
        else:
            state.emit("mode-iteration", case, mode=event.mode, iteration=event)

    t0 = time.monotonic()
    if pending.path.exists() and remeasure is None:
        return replace(
            pending,
            state=CellState.ERROR,
            error=f"{pending.path.name} appeared while the sweep ran (not written by it); "
            "kept it and did not measure this cell",
        )
    if (stuck := set_aside(pending, notes, remeasure)) is not None:  # nothing measured or lost
        return replace(pending, state=CellState.ERROR, error=f"{stuck}; not measured")
    given = {} if checked is None else checked.run_options()
    try:
        result = run_cell(case, out_path=pending.path, progress=on_mode, **given)
    except Exception as err:  # a harness bug in one cell must not lose the sweep
        state, why = cell_error(err)  # or a plan the config makes impossible
        return replace(pending, state=state, error=why, duration_s=time.monotonic() - t0)
    # saved beside its path by the runner (result.saved_as): said, never saved a second time
    return saved_outcome(pending, result, time.monotonic() - t0)
