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
  each other either. Workers need ckptbench installed. Each result records the host it ran
  on; the submitting process saves results as they complete. ``distributed`` is imported
  only on this path.

This module never prints: progress goes to a callback; the outcome is returned.
"""

from __future__ import annotations

import json
import os
import socket
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from enum import Enum
from functools import lru_cache
from pathlib import Path
from typing import Any

import ckptbench
from ckptbench.config import SweepConfig
from ckptbench.results import (
    MODES,
    SETTINGS_FIELDS,
    Case,
    Mode,
    ModeResult,
    RunResult,
    load_result,
    result_from_dict,
    result_to_dict,
    save_result,
    write_atomic,
)
from ckptbench.revolve import make_schedule, replay

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
    "run_sweep",
]

MANIFEST_NAME = "sweep.json"
MANIFEST_KIND = "ckptbench-sweep"
MANIFEST_VERSION = 1
#: Case fields that change what is measured without being part of case.key.

RunCell = Callable[..., RunResult]  # run_cell(case, *, out_path=..., progress=...)


class SweepError(ValueError):
    """The sweep cannot start (existing results without --resume, no Dask workers, ...)."""


class CellState(Enum):
    MEASURED = "measured"  # measured in this sweep (the result may still have failed modes)
    KEPT = "kept"  # resume: a complete result was already in the folder
    ERROR = "error"  # the cell runner raised; no file written
    CONFLICT = "conflict"  # resume: unreadable/foreign file or other settings; left alone
    PENDING = "pending"  # manifest only: not reached yet
    RUNNING = "running"  # manifest only: being measured (seen after a kill)


@dataclass(frozen=True)
class CellOutcome:
    """What happened to one cell."""

    case: Case
    path: Path
    state: CellState
    ok: bool | None = None  # every mode measured OK (None: no result)
    host: str = ""
    worker: str = ""  # Dask worker address, when run on Dask
    error: str | None = None
    duration_s: float | None = None

    @property
    def key(self) -> str:
        return self.case.key

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "file": self.path.name,
            "state": self.state.value,
            "ok": self.ok,
            "host": self.host,
            "worker": self.worker,
            "error": self.error,
            "duration_s": self.duration_s,
            "case": self.case.to_dict(),
        }


@dataclass(frozen=True)
class SweepOutcome:
    """Every cell's outcome, in config order, and where the results are."""

    name: str
    out_dir: Path
    manifest_path: Path
    cells: tuple[CellOutcome, ...]
    elapsed_s: float

    def _where(self, *states: CellState) -> tuple[CellOutcome, ...]:
        return tuple(c for c in self.cells if c.state in states)

    @property
    def measured(self) -> tuple[CellOutcome, ...]:
        return self._where(CellState.MEASURED)

    @property
    def kept(self) -> tuple[CellOutcome, ...]:
        return self._where(CellState.KEPT)

    @property
    def errors(self) -> tuple[CellOutcome, ...]:
        return self._where(CellState.ERROR)

    @property
    def conflicts(self) -> tuple[CellOutcome, ...]:
        return self._where(CellState.CONFLICT)

    @property
    def failed(self) -> tuple[CellOutcome, ...]:
        """Cells with a saved result in which some mode did not measure OK."""
        return tuple(c for c in self.cells if c.ok is False)

    @property
    def result_paths(self) -> tuple[Path, ...]:
        return tuple(c.path for c in self.cells if c.state in (CellState.MEASURED, CellState.KEPT))

    @property
    def exit_code(self) -> int:
        """0: every cell measured OK; 1: a failed measurement or a cell runner error;
        2: conflicting files in the folder (an input problem; nothing was overwritten)."""
        if self.conflicts:
            return 2
        if self.errors or self.failed:
            return 1
        return 0

    def summary_lines(self) -> list[str]:
        """What a user reads at the end: counts, then one line per problem cell."""
        counts = [
            f"{len(self.measured)} measured",
            f"{len(self.kept)} kept",
            f"{len(self.failed)} failed",
            f"{len(self.errors)} errors",
            f"{len(self.conflicts)} conflicts",
        ]
        lines = [
            f"sweep {self.name}: {len(self.cells)} cells, {', '.join(counts)} "
            f"in {self.elapsed_s:.0f} s; results in {self.out_dir}"
        ]
        for c in self.cells:
            if c.ok is False or c.state in (CellState.ERROR, CellState.CONFLICT):
                lines.append(f"{c.state.value} {c.key}: {c.error or 'not ok'}")
        return lines


@dataclass(frozen=True)
class SweepProgress:
    """A progress event: ``event`` is "cell-start", "mode-start", "mode-done" or "cell-done".

    ``done``/``total`` count the cells this sweep measures (kept cells excluded); ``eta_s``
    is the elapsed time scaled by the work left over the work done, work being
    :func:`cell_cost` (None before the first cell finishes); with Dask the elapsed time
    already reflects the cluster's parallelism.
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

    def line(self) -> str:
        """One progress line, e.g. ``[3/13] lstm-l1000-s4-uniform-... done (measured) 45 s,
        ETA 12 min``."""
        where = f"[{self.done + (self.event != 'cell-done')}/{self.total}] {self.case.key}"
        if self.event == "cell-start":
            text = f"{where} started"
        elif self.event in ("mode-start", "mode-done") and self.mode is not None:
            status = f" ({self.mode_result.status.value})" if self.mode_result else ""
            verb = "running" if self.event == "mode-start" else "done"
            text = f"{where} {self.mode.value} {verb}{status}"
        elif self.cell is not None:
            took = f" in {self.cell.duration_s:.0f} s" if self.cell.duration_s is not None else ""
            ok = "" if self.cell.ok is not False else ", NOT OK"
            text = f"{where} {self.cell.state.value}{ok}{took}"
        else:
            text = f"{where} {self.event}"
        if self.eta_s is not None:
            text += f", ETA {_duration(self.eta_s)}"
        return text


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


Progress = Callable[[SweepProgress], None]


def cell_path(out_dir: str | os.PathLike[str], case: Case) -> Path:
    """The result file of one cell: ``OUT/<case.key>.json``."""
    return Path(out_dir) / f"{case.key}.json"


def _one_line(err: BaseException) -> str:
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
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        raise SweepError(
            f"{path}: unreadable sweep manifest; move it away or use another --out"
        ) from None
    other = data.get("config", {}).get("name") if isinstance(data, dict) else None
    if other != name:
        raise SweepError(
            f"{out_dir} holds sweep {other!r}, not {name!r}: use another --out for this config"
        )


def _plan(
    config: SweepConfig, out_dir: Path, resume: bool, retry_failed: bool
) -> tuple[list[CellOutcome], list[int]]:
    """Initial outcome of every cell and the indexes of the cells to measure."""
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
            cells.append(CellOutcome(case, path, CellState.KEPT, ok=saved.ok, host=saved.host))
    if existing:
        raise SweepError(
            f"{out_dir} already holds {len(existing)} result(s) of this sweep (e.g. "
            f"{existing[0].name}): pass --resume to keep them and measure the rest, "
            "or use another --out"
        )
    return cells, to_run


def _write_manifest(
    config: SweepConfig, out_dir: Path, cells: list[CellOutcome], started: str
) -> Path:
    path = out_dir / MANIFEST_NAME
    doc = {
        "kind": MANIFEST_KIND,
        "manifest_version": MANIFEST_VERSION,
        "tool_version": ckptbench.__version__,
        "config": {
            "name": config.name,
            "source": config.source,
            "description": config.description,
            "expect": config.expect.as_dict(),
            "expect_by_strategy": {k: v.as_dict() for k, v in config.expect_by_strategy.items()},
        },
        "started": started,
        "updated": datetime.now(UTC).isoformat(timespec="seconds"),
        "cells": [c.to_dict() for c in cells],
    }
    write_atomic(path, json.dumps(doc, indent=1) + "\n")
    return path


# --------------------------------------------------------------------------- the sweep


def _default_run_cell() -> RunCell:
    from ckptbench.runner import run_case

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
) -> SweepOutcome:
    """Measure every cell of ``config`` into ``out_dir`` (see the module docstring).

    ``run_cell(case, out_path=PATH|None, progress=CALLBACK|None) -> RunResult`` measures one
    cell; the default is :func:`ckptbench.runner.run_case`. Raises :class:`SweepError` before
    measuring anything when the folder holds results of this sweep and ``resume`` is False,
    holds another sweep, or the Dask cluster has no workers.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    _check_manifest(out, config.name)
    _remove_stale_temp_files(out, [MANIFEST_NAME, *(f"{c.key}.json" for c in config.cases)])
    cells, to_run = _plan(config, out, resume, retry_failed)
    started = datetime.now(UTC).isoformat(timespec="seconds")
    manifest = _write_manifest(config, out, cells, started)
    clock0 = time.monotonic()
    state = _Progress(progress, [cells[i].case for i in to_run], clock0)

    def finished(index: int, outcome: CellOutcome) -> None:
        cells[index] = outcome
        _write_manifest(config, out, cells, started)
        state.cell_done(outcome)

    def starting(index: int) -> None:
        cells[index] = replace(cells[index], state=CellState.RUNNING)
        _write_manifest(config, out, cells, started)
        state.emit("cell-start", cells[index].case)

    if dask_address is None:
        runner = run_cell or _default_run_cell()
        for index in to_run:
            starting(index)
            finished(index, _run_local(runner, cells[index], state))
    else:
        _run_dask(dask_address, run_cell, cells, to_run, starting, finished)
    return SweepOutcome(
        name=config.name,
        out_dir=out,
        manifest_path=manifest,
        cells=tuple(cells),
        elapsed_s=time.monotonic() - clock0,
    )


def cell_cost(case: Case) -> int:
    """Rough work of measuring a cell, in untaped step evaluations, for the ETA: per
    iteration the baseline's forward sweep (l), the taped sweep and its reverse in normal and
    checkpointed mode (~3l each) and the schedule's recomputation (its planned advances)."""
    return (case.warmup + case.repeats) * (7 * case.steps + _planned_advances(case))


@lru_cache(maxsize=1024)
def _planned_advances_of(strategy: str, steps: int, snaps: int) -> int:
    try:
        return replay(make_schedule(strategy, steps, snaps), steps, snaps).advances
    except ValueError:  # pragma: no cover - Case validation makes every schedule valid
        return steps


def _planned_advances(case: Case) -> int:
    return _planned_advances_of(case.strategy, case.steps, min(case.snaps, case.steps))


class _Progress:
    """Progress events with an ETA weighted by :func:`cell_cost` (cells differ a lot: a
    uniform cell with few slots can cost 10x a revolve cell)."""

    def __init__(self, callback: Progress | None, cases: list[Case], clock0: float) -> None:
        self.callback = callback
        self.total = len(cases)
        self.done = 0
        self.clock0 = clock0
        self.cost_total = sum(cell_cost(c) for c in cases) if callback else 0
        self.cost_done = 0

    def emit(self, event: str, case: Case, **extra: Any) -> None:
        if self.callback is None:
            return
        elapsed = time.monotonic() - self.clock0
        eta = None
        if self.cost_done:
            eta = elapsed / self.cost_done * (self.cost_total - self.cost_done)
        self.callback(
            SweepProgress(
                event=event,
                case=case,
                done=self.done,
                total=self.total,
                elapsed_s=elapsed,
                eta_s=eta,
                **extra,
            )
        )

    def cell_done(self, outcome: CellOutcome) -> None:
        self.done += 1
        if self.callback is not None:
            self.cost_done += cell_cost(outcome.case)
        self.emit("cell-done", outcome.case, cell=outcome)


def _saved_outcome(
    pending: CellOutcome, result: RunResult, duration: float, worker: str = ""
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
    save_result(result, pending.path)
    return replace(
        pending,
        state=CellState.MEASURED,
        ok=result.ok,
        host=result.host,
        worker=worker,
        error=None if result.ok else _first_error(result),
        duration_s=duration,
    )


def _first_error(result: RunResult) -> str:
    for m in result.modes:
        if not m.ok:
            return f"{m.mode.value}: {m.status.value}" + (f" ({m.error})" if m.error else "")
    return "not ok"


def _run_local(run_cell: RunCell, pending: CellOutcome, state: _Progress) -> CellOutcome:
    case = pending.case

    def on_mode(event: Any) -> None:
        if event.phase in ("start", "done"):
            state.emit(f"mode-{event.phase}", case, mode=event.mode, mode_result=event.result)

    t0 = time.monotonic()
    if pending.path.exists():  # re-measuring a failed cell: keep the old file beside it
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%f")
        pending.path.rename(pending.path.with_name(f"{pending.path.name}.{stamp}.replaced"))
    try:
        result = run_cell(case, out_path=pending.path, progress=on_mode)
    except Exception as err:  # a harness bug in one cell must not lose the sweep
        return replace(
            pending,
            state=CellState.ERROR,
            error=_one_line(err),
            duration_s=time.monotonic() - t0,
        )
    return _saved_outcome(pending, result, time.monotonic() - t0)


# --------------------------------------------------------------------------- Dask


def _remote_cell(run_cell: RunCell | None, case_data: dict[str, Any]) -> dict[str, Any]:
    """Runs on a Dask worker: measure one cell, return its JSON document (same schema)."""
    case = Case.from_dict(case_data)
    runner = run_cell or _default_run_cell()
    result = runner(case, out_path=None, progress=None)
    if not result.host:
        result = replace(result, host=socket.gethostname())
    try:
        from distributed import get_worker

        address = get_worker().address
    except (ImportError, ValueError):  # pragma: no cover - always on a worker here
        address = ""
    return {"result": result_to_dict(result), "worker": address}


def _worker_addresses(client: Any) -> list[str]:
    """Addresses of the workers connected now. ``Client.nthreads()`` asks the scheduler;
    ``Client.scheduler_info()`` is not used: a background refresh can overwrite its cached
    identity with a truncated worker list, which would look like workers leaving."""
    return sorted(client.nthreads())


def _run_dask(
    address: str,
    run_cell: RunCell | None,
    cells: list[CellOutcome],
    to_run: list[int],
    starting: Callable[[int], None],
    finished: Callable[[int, CellOutcome], None],
    poll_s: float = 0.2,
) -> None:
    try:
        from distributed import Client
    except ImportError:
        raise SweepError(
            "--dask needs the optional dependency: pip install 'ckptbench[dask]'"
        ) from None
    try:
        client = Client(address, set_as_default=False, timeout="20s")
    except (OSError, TimeoutError) as err:
        raise SweepError(f"cannot connect to Dask scheduler {address}: {_one_line(err)}") from None
    try:
        known = set(_worker_addresses(client))
        if not known and to_run:
            raise SweepError(f"Dask scheduler {address} has no workers")
        free: deque[str] = deque(sorted(known))
        queue: deque[int] = deque(to_run)
        running: dict[Any, tuple[int, str, float]] = {}  # future -> (cell, worker, start)
        while queue or running:
            while queue and free:
                worker = free.popleft()
                index = queue.popleft()
                starting(index)
                future = client.submit(
                    _remote_cell,
                    run_cell,
                    cells[index].case.to_dict(),
                    key=f"ckptbench-{cells[index].key}-{time.time_ns()}",
                    workers=[worker],
                    allow_other_workers=False,
                    pure=False,
                    retries=0,
                )
                running[future] = (index, worker, time.monotonic())
            if not any(f.done() for f in running):
                time.sleep(poll_s)
            alive = set(_worker_addresses(client))
            for future in [f for f in running if f.done()]:
                index, worker, t0 = running.pop(future)
                finished(index, _collect(future, cells[index], worker, time.monotonic() - t0))
                if worker in alive:
                    free.append(worker)
            for future, (index, worker, t0) in list(running.items()):
                if worker not in alive:  # pinned to a worker that left: it would never run
                    future.cancel()
                    del running[future]
                    err = f"Dask worker {worker} left before the cell finished"
                    finished(
                        index,
                        replace(
                            cells[index],
                            state=CellState.ERROR,
                            error=err,
                            worker=worker,
                            duration_s=time.monotonic() - t0,
                        ),
                    )
            busy = {w for _, w, _ in running.values()}
            for worker in sorted(alive - known):
                known.add(worker)
                if worker not in busy:
                    free.append(worker)
            free = deque(w for w in free if w in alive)
            if queue and not free and not running:
                raise SweepError(f"Dask scheduler {address} has no workers left")
    finally:
        client.close()


def _collect(future: Any, pending: CellOutcome, worker: str, duration: float) -> CellOutcome:
    try:
        payload = future.result()
        result = result_from_dict(payload["result"], f"Dask result of {pending.key}")
    except Exception as err:  # the remote cell raised, or returned something foreign
        return replace(
            pending,
            state=CellState.ERROR,
            error=_one_line(err),
            worker=worker,
            duration_s=duration,
        )
    return _saved_outcome(pending, result, duration, payload.get("worker") or worker)
