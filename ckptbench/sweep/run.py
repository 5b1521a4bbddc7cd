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
  (repeats, warmup, threads, sample interval) is a *conflict*: reported, left untouched and
  not re-measured, because it was not written by an interrupted sweep (writes are atomic)
  and may be someone's data; delete it to measure the cell again. Saved cells whose
  measurement failed are kept unless ``retry_failed=True``.
* **Failures** never stop a sweep: a failed measurement is saved like any other result; a
  cell runner that raises is recorded in the manifest (no file, so ``--resume`` retries it).
* **Dask** (``dask_address``): cells go to an existing ``distributed`` cluster, at most one
  cell in flight per worker at any time (the client pins each cell to a free worker, whatever
  its thread count), so measurements on one worker never overlap. Run one worker per host
  (``dask worker ADDR --nworkers 1 --nthreads 1``) so cells on one machine don't disturb
  each other either. The address, the scheduler and every worker (ckptbench version,
  Python, backends) are checked before the folder is created; a cell whose worker leaves is
  measured again once on another worker (the manifest keeps both attempts); a scheduler
  that goes away ends the sweep early (:attr:`SweepOutcome.ended_early`, exit 1, cells in
  flight marked); a stop signal stops the cells on the workers and saves their modes in
  flight as interrupted (``ckptbench.sweep.dask``, docs/cluster.md). ``distributed`` is
  imported only on this path.

This module never prints: progress goes to a callback; the outcome is returned.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable, Iterable
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import ckptbench
from ckptbench.results.schema import (
    MODES,
    SETTINGS_FIELDS,
    Case,
    RunResult,
    save_or_beside,
)
from ckptbench.results.store import (
    MANIFEST_KIND,
    MANIFEST_NAME,
    StoreError,
    cell_path,
    load_result,
    locked_folder,
    open_folder,
    read_manifest,
    write_manifest,
)
from ckptbench.sweep.cells import Attempt, CellOutcome, CellState, SweepOutcome
from ckptbench.sweep.config import SweepConfig
from ckptbench.sweep.progress import Progress, ProgressTracker, SweepProgress, cell_cost

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
    "first_error",
    "one_line",
    "run_sweep",
    "saved_outcome",
]

RunCell = Callable[..., RunResult]  # run_cell(case, *, out_path=..., progress=...)


class SweepError(ValueError):
    """The sweep cannot start (existing results without --resume, no Dask workers, ...)."""


def one_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0]}" if text else type(err).__name__


def _settings_diff(saved: Case, wanted: Case) -> str:
    diffs = [
        f"{name} {getattr(saved, name)!r} vs {getattr(wanted, name)!r}"
        for name in SETTINGS_FIELDS
        if getattr(saved, name) != getattr(wanted, name)
    ]
    if saved.key != wanted.key:
        diffs.insert(0, f"case {saved.key} vs {wanted.key}")
    return ", ".join(diffs)


def _complete(result: RunResult) -> bool:
    """The runner measures every mode and saves after each: fewer modes means interrupted."""
    return {m.mode for m in result.modes} >= set(MODES)


# --------------------------------------------------------------------------- preflight


def _remove_stale_temp_files(out_dir: Path, names: Iterable[str]) -> None:
    """write_atomic's temp files (".NAME.*.tmp") left by a kill mid-write: never results."""
    for name in names:
        for tmp in out_dir.glob(f".{name}.*.tmp"):
            tmp.unlink(missing_ok=True)


def _check_manifest(out_dir: Path, name: str) -> None:
    path = out_dir / MANIFEST_NAME
    if not path.exists():
        return
    try:
        data = read_manifest(path)
    except StoreError:
        raise SweepError(
            f"{path}: unreadable sweep manifest; move it away or use another --out"
        ) from None
    if data is None:
        raise SweepError(
            f"{path}: is not a sweep manifest (a result?); move it away or use another --out"
        )
    config = data.get("config")
    other = config.get("name") if isinstance(config, dict) else None
    if other != name:
        raise SweepError(
            f"{out_dir} holds sweep {other!r}, not {name!r}: use another --out for this config"
        )


def _previous(out_dir: Path) -> dict[str, Any]:
    """The manifest a resumed sweep finds in ``out_dir`` ({} when none)."""
    try:
        return read_manifest(out_dir / MANIFEST_NAME) or {}
    except StoreError:
        return {}


def _plan(
    config: SweepConfig, out_dir: Path, resume: bool, retry_failed: bool
) -> tuple[list[CellOutcome], list[int]]:
    """Initial outcome of every cell and the indexes of the cells to measure."""
    before = {c.get("key"): c for c in _previous(out_dir).get("cells") or () if isinstance(c, dict)}
    cells: list[CellOutcome] = []
    to_run: list[int] = []
    existing: list[Path] = []
    for index, case in enumerate(config.cases):
        path = cell_path(out_dir, case)
        pending = CellOutcome(case, path, CellState.PENDING)
        if not path.exists():
            cells.append(pending)
            to_run.append(index)
            continue
        if not resume:
            existing.append(path)
            cells.append(pending)
            continue
        try:
            saved = load_result(path)
        except ValueError as err:
            cells.append(CellOutcome(case, path, CellState.CONFLICT, error=str(err)))
            continue
        diff = _settings_diff(saved.case, case)
        if diff:
            msg = f"{path}: measured with other settings ({diff}); delete it to re-measure"
            cells.append(CellOutcome(case, path, CellState.CONFLICT, error=msg))
        elif not _complete(saved) or (retry_failed and not saved.ok):
            cells.append(pending)
            to_run.append(index)
        else:
            kept = CellOutcome(case, path, CellState.KEPT, ok=saved.ok, host=saved.host)
            cells.append(kept.with_record(before.get(case.key)))
    if existing:
        raise SweepError(
            f"{out_dir} already holds {len(existing)} result(s) of this sweep (e.g. "
            f"{existing[0].name}): pass --resume to keep them and measure the rest, "
            "or use another --out"
        )
    return cells, to_run


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
) -> SweepOutcome:
    """Measure every cell of ``config`` into ``out_dir`` (see the module docstring).

    ``run_cell(case, out_path=PATH|None, progress=CALLBACK|None) -> RunResult`` measures one
    cell; the default is :func:`measure.runner.run_case`. Raises :class:`SweepError` before
    measuring anything when the folder holds results of this sweep and ``resume`` is False,
    holds another sweep, or the Dask cluster cannot run the cells; with Dask, nothing is
    written before the scheduler and its workers were checked (within ``dask_timeout_s``,
    default ``sweep.cluster.CONNECT_TIMEOUT_S``).
    """
    if dask_address is None:
        out = open_folder(out_dir)
        with locked_folder(out):
            return _run_locked(config, out, resume, run_cell, progress, None, retry_failed)
    from ckptbench.sweep.cluster import CONNECT_TIMEOUT_S, DaskError, connect

    try:
        cluster = connect(dask_address, config.cases, dask_timeout_s or CONNECT_TIMEOUT_S)
    except DaskError as err:
        raise SweepError(str(err)) from None
    with cluster:
        out = open_folder(out_dir)
        with locked_folder(out):
            return _run_locked(config, out, resume, run_cell, progress, cluster, retry_failed)


def _run_locked(config, out, resume, run_cell, progress, cluster, retry_failed):
    """:func:`run_sweep` once the folder's lock is held (and the cluster, if any, checked)."""
    _check_manifest(out, config.name)
    _remove_stale_temp_files(out, [MANIFEST_NAME, *(f"{c.key}.json" for c in config.cases)])
    previous = _previous(out) if resume else {}
    cells, to_run = _plan(config, out, resume, retry_failed)
    remeasure = {i for i in to_run if cells[i].path.exists()}  # files this sweep replaces
    notes: list[str] = []
    now = datetime.now(UTC).isoformat(timespec="seconds")
    first = previous.get("started")
    started: list[str] = [now]
    if isinstance(first, str):  # a resumed sweep keeps when it first started
        started = [first, *(r for r in previous.get("resumed") or () if isinstance(r, str)), now]
    manifest = _write_manifest(config, out, cells, started)
    clock0 = time.monotonic()
    workers = len(cluster.workers) if cluster is not None else 1
    state = ProgressTracker(progress, [cells[i].case for i in to_run], clock0, workers)

    def finished(index: int, outcome: CellOutcome) -> None:
        cells[index] = outcome
        _write_manifest(config, out, cells, started)
        state.cell_done(outcome)

    def starting(index: int, attempt: int = 1) -> None:
        cells[index] = replace(cells[index], state=CellState.RUNNING)
        _write_manifest(config, out, cells, started)
        if cluster is not None:  # workers join and leave: progress and ETA follow them
            state.workers = max(1, len(cluster.workers))
        state.cell_start(cells[index].case, attempt)

    ended_early = None
    if cluster is None:
        runner = run_cell or default_run_cell()
        for index in to_run:
            starting(index)
            try:
                outcome = _run_local(runner, cells[index], state, index in remeasure, notes)
            except BaseException as err:  # a stop signal: record the saved part, then stop
                partial = getattr(err, "result", None)
                if partial is not None and partial.modes and cells[index].path.exists():
                    cells[index] = saved_outcome(cells[index], partial, 0.0)
                else:  # stopped before a mode was measured: nothing saved, not running
                    why = f"stopped by {_stop_name(err)} before its first mode"
                    cells[index] = replace(cells[index], state=CellState.PENDING, error=why)
                _write_manifest(config, out, cells, started)
                raise
            finished(index, outcome)
    else:
        from ckptbench.sweep.dask import run_dask

        def done(index: int, result: RunResult | None, error: str | None,
                 attempts: tuple[Attempt, ...], interrupted: bool) -> None:  # fmt: skip
            last = attempts[-1] if attempts else Attempt("")
            if result is not None:
                _set_aside(cells[index], notes)  # a partial file (or one that appeared)
                outcome = saved_outcome(cells[index], result, last.duration_s or 0.0,
                                        last.worker, attempts)  # fmt: skip
            else:
                outcome = replace(
                    cells[index],
                    state=CellState.PENDING if interrupted else CellState.ERROR,
                    error=error,
                    host=last.host,
                    worker=last.worker,
                    duration_s=last.duration_s,
                    attempts=attempts,
                )
            finished(index, outcome)

        def retrying(index: int, why: str) -> None:  # back in the queue: not running
            cells[index] = replace(cells[index], state=CellState.PENDING, error=why)
            _write_manifest(config, out, cells, started)
            state.cell_retry(cells[index].case, why)

        jobs = [(i, cells[i].case) for i in to_run]
        ended_early = run_dask(cluster, run_cell, jobs, starting, done, retrying)
    return SweepOutcome(
        name=config.name,
        out_dir=out,
        manifest_path=manifest,
        cells=tuple(cells),
        elapsed_s=time.monotonic() - clock0,
        notes=tuple(notes),
        ended_early=ended_early,
    )


def _stop_name(err: BaseException) -> str:
    from ckptbench.measure.launch import stop_reason

    return stop_reason(err)


def saved_outcome(
    pending: CellOutcome,
    result: RunResult,
    duration: float,
    worker: str = "",
    attempts: tuple[Attempt, ...] = (),
) -> CellOutcome:
    if result.case.key != pending.case.key:
        return replace(
            pending,
            state=CellState.ERROR,
            error=f"cell runner returned a result for {result.case.key}",
            duration_s=duration,
        )
    if not result.host:
        result = replace(result, host=socket.gethostname())
    at, why = save_or_beside(result, pending.path, replace=True)
    if why is not None:  # measured, but not saved where the manifest expects it: never lost
        return replace(
            pending,
            state=CellState.ERROR,
            ok=result.ok,
            host=result.host,
            worker=worker,
            error=f"measured, but saved as {at} ({why})",
            duration_s=duration,
            attempts=attempts,
        )
    return replace(
        pending,
        state=CellState.MEASURED,
        ok=result.ok,
        host=result.host,
        worker=worker,
        error=None if result.ok else first_error(result),
        duration_s=duration,
        attempts=attempts,
    )


def first_error(result: RunResult) -> str:
    for m in result.modes:
        if not m.ok:
            return f"{m.mode.value}: {m.status.value}" + (f" ({m.error})" if m.error else "")
    return "not ok"


def _set_aside(pending: CellOutcome, notes: list[str] | None) -> None:
    """Re-measuring a partial or failed cell: keep its old file beside the new one, and say
    so in ``notes``."""
    if pending.path.exists():
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%f")
        aside = pending.path.with_name(f"{pending.path.name}.{stamp}.replaced")
        pending.path.rename(aside)
        if notes is not None:
            notes.append(f"{pending.key}: its earlier result was moved to {aside.name}")


def _run_local(
    run_cell: RunCell,
    pending: CellOutcome,
    state: ProgressTracker,
    remeasure: bool = False,
    notes: list[str] | None = None,
) -> CellOutcome:
    """Measure one cell. Its file is moved aside only when the plan re-measures it (a
    failed or partial result, ``remeasure``), and said; a file that appeared there while
    the sweep ran was not written by it: it is kept and the cell is an error."""
    case = pending.case

    def on_mode(event: Any) -> None:
        if event.phase in ("start", "done"):
            state.emit(f"mode-{event.phase}", case, mode=event.mode, mode_result=event.result)
        else:
            state.emit("mode-iteration", case, mode=event.mode, iteration=event)

    t0 = time.monotonic()
    if pending.path.exists() and not remeasure:
        return replace(
            pending,
            state=CellState.ERROR,
            error=f"{pending.path.name} appeared while the sweep ran (not written by it); "
            "kept it and did not measure this cell",
        )
    _set_aside(pending, notes)
    try:
        result = run_cell(case, out_path=pending.path, progress=on_mode)
    except Exception as err:  # a harness bug in one cell must not lose the sweep
        return replace(
            pending,
            state=CellState.ERROR,
            error=one_line(err),
            duration_s=time.monotonic() - t0,
        )
    return saved_outcome(pending, result, time.monotonic() - t0)
