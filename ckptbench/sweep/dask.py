"""The Dask backend of ``ckptbench sweep``: cells on an existing ``distributed`` cluster.

At most one cell is in flight per worker at any time (the client pins each cell to a free
worker, whatever its thread count), so measurements on one worker never overlap. Run one
worker per host (``dask worker ADDR --nworkers 1 --nthreads 1``) so cells on one machine
don't disturb each other either. Each result records the host it ran on; the submitting
process saves results as they complete (docs/architecture.md, "sweep").
"""

from __future__ import annotations

import socket
import time
from collections import deque
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from ckptbench.results.schema import Case, RunResult, result_from_dict, result_to_dict

__all__ = ["DaskError", "Done", "run_dask"]

RunCell = Callable[..., RunResult]
#: done(index, result or None, error or None, worker address, duration in seconds)
Done = Callable[[int, RunResult | None, str | None, str, float], None]


class DaskError(ValueError):
    """The cluster cannot run the sweep (not installed, unreachable, no workers)."""


def _one_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0]}" if text else type(err).__name__


def _remote_cell(run_cell: RunCell | None, case_data: dict[str, Any]) -> dict[str, Any]:
    """Runs on a Dask worker: measure one cell, return its JSON document (same schema)."""
    case = Case.from_dict(case_data)
    if run_cell is None:
        from ckptbench.measure.runner import run_case as run_cell
    result = run_cell(case, out_path=None, progress=None)
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


def run_dask(
    address: str,
    run_cell: RunCell | None,
    jobs: list[tuple[int, Case]],
    starting: Callable[[int], None],
    done: Done,
    poll_s: float = 0.2,
) -> None:
    """Measure each (index, case) of ``jobs`` on the cluster at ``address``, calling
    ``starting(index)`` when a cell is submitted and ``done(...)`` when it finished, failed
    or its worker left. Raises :class:`DaskError` when the cluster cannot be used."""
    try:
        from distributed import Client
    except ImportError:
        raise DaskError(
            "--dask needs the optional dependency: pip install 'ckptbench[dask]'"
        ) from None
    try:
        client = Client(address, set_as_default=False, timeout="20s")
    except (OSError, TimeoutError) as err:
        raise DaskError(f"cannot connect to Dask scheduler {address}: {_one_line(err)}") from None
    try:
        known = set(_worker_addresses(client))
        cases = dict(jobs)
        if not known and jobs:
            raise DaskError(f"Dask scheduler {address} has no workers")
        free: deque[str] = deque(sorted(known))
        queue: deque[int] = deque(i for i, _ in jobs)
        running: dict[Any, tuple[int, str, float]] = {}  # future -> (cell, worker, start)
        while queue or running:
            while queue and free:
                worker = free.popleft()
                index = queue.popleft()
                starting(index)
                future = client.submit(
                    _remote_cell,
                    run_cell,
                    cases[index].to_dict(),
                    key=f"ckptbench-{cases[index].key}-{time.time_ns()}",
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
                _collect(future, index, cases[index], worker, time.monotonic() - t0, done)
                if worker in alive:
                    free.append(worker)
            for future, (index, worker, t0) in list(running.items()):
                if worker not in alive:  # pinned to a worker that left: it would never run
                    future.cancel()
                    del running[future]
                    err = f"Dask worker {worker} left before the cell finished"
                    done(index, None, err, worker, time.monotonic() - t0)
            busy = {w for _, w, _ in running.values()}
            for worker in sorted(alive - known):
                known.add(worker)
                if worker not in busy:
                    free.append(worker)
            free = deque(w for w in free if w in alive)
            if queue and not free and not running:
                raise DaskError(f"Dask scheduler {address} has no workers left")
    finally:
        client.close()


def _collect(future: Any, index: int, case: Case, worker: str, duration: float, done: Done) -> None:
    try:
        payload = future.result()
        result = result_from_dict(payload["result"], f"Dask result of {case.key}")
    except Exception as err:  # the remote cell raised, or returned something foreign
        done(index, None, _one_line(err), worker, duration)
        return
    done(index, result, None, payload.get("worker") or worker, duration)
