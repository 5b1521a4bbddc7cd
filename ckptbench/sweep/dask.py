"""The Dask backend of ``ckptbench sweep``: cells on an existing ``distributed`` cluster.

At most one cell is in flight per worker at any time (the client pins each cell to a free
worker, whatever its thread count), so measurements on one worker never overlap. Run one
worker per host (``dask worker ADDR --nworkers 1 --nthreads 1``) so cells on one machine
don't disturb each other either. Each result records the host and worker it ran on; the
submitting process saves results as they complete (docs/architecture.md, "sweep";
docs/cluster.md for users).

What happens when something goes away (docs/cluster.md):

* **Before anything is written** (``sweep.cluster.connect``): the address is parsed, the
  scheduler reached, and every worker asked for its ckptbench, Python and backends; a
  worker that cannot run the sweep's cells is refused by name. Workers that join later
  are asked the same and not used when they cannot.
* **A worker leaves mid-cell**: the cell is measured again on another worker, once
  (:data:`ATTEMPTS`); each attempt is recorded (:class:`Attempt`), and a cell whose every
  attempt was lost is reported with the cause.
* **The scheduler goes away**: :func:`run_dask` returns why, after reporting the cells in
  flight as lost; cells never started stay pending for ``--resume``.
* **A stop signal** (Ctrl-C, SIGTERM) in the submitting process: every worker is asked to
  stop this sweep's cells (:func:`_stop_cells`: the measurement's process group is stopped
  and the mode in flight kept as interrupted, as in a local sweep), the partial results are
  collected and saved, the futures cancelled, and the signal re-raised with a
  :class:`StopReport` attached as ``err.dask_stop``.
"""

from __future__ import annotations

import contextlib
import signal
import socket
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from ckptbench.measure.launch import Interrupted, request_stop, stop_reason
from ckptbench.results.schema import Case, RunResult, result_from_dict, result_to_dict
from ckptbench.sweep.cells import Attempt, cell_error
from ckptbench.sweep.cluster import Cluster, SchedulerLost

if TYPE_CHECKING:
    from ckptbench.measure.tasks import PluginChecked

__all__ = ["ATTEMPTS", "REJOIN_WAIT_S", "STOP_WAIT_S", "Done", "StopReport", "run_dask"]

#: How long a stopped sweep waits for the workers to stop its cells and send what they kept.
STOP_WAIT_S = 15.0
#: With cells queued and no worker left, wait this long (at most the connect timeout) for
#: one to join before the sweep ends: a nanny restarts a killed worker in about a second.
REJOIN_WAIT_S = 10.0
#: A cell whose worker leaves mid-cell is measured again on another worker, up to this
#: many attempts in all.
ATTEMPTS = 2

RunCell = Callable[..., RunResult]


@dataclass(frozen=True)
class StopReport:
    """What a stopped Dask sweep did with its cells in flight (for the CLI's message)."""

    reason: str  # "SIGINT (Ctrl-C)", "SIGTERM", ...
    saved: tuple[str, ...] = ()  # keys of cells whose measured part was saved as interrupted
    empty: tuple[str, ...] = ()  # keys stopped before their first mode (nothing to save)
    unconfirmed: tuple[tuple[str, str], ...] = ()  # (key, worker) that did not confirm


#: done(index, result or None, error or None, attempts (the last is this one), interrupted,
#: raw, state): ``raw``, a document a worker returned that does not read as a result, to
#: keep; ``state``, a failed cell's (``invalid`` where no plan exists as configured)
Done = Callable[..., None]


# --------------------------------------------------------------------------- on a worker

_CELLS: dict[str, set[int]] = {}  # sweep token -> threads measuring its cells here
_STOPPED: dict[str, int] = {}  # sweep token -> the signal its submitter got


def _remote_cell(
    run_cell: RunCell | None, case_data: dict[str, Any], token: str = "",
    plugin_sha256: str | None = None, checked: PluginChecked | None = None,
) -> dict:  # fmt: skip
    """Runs on a Dask worker: measure one cell, return its JSON document (same schema) and
    the worker's address; a stop (:func:`_stop_cells`) returns the part measured so far.
    A plug-in cell first checks that the worker reads the plug-in the submitter checked
    (``plugin_sha256``): a relative path resolves from each worker's own folder. It gets
    what the check found (``checked``, as ``PluginChecked.for_workers`` sends it), as in
    ``run``: its watch of the plug-in's files starts at the check, one that differs here
    failing the first mode, and it records the dtypes of the loss and of what it gets.
    The check's files this worker does not have are returned as ``not_found`` (the
    cell's note)."""
    try:
        from distributed import get_worker

        address = get_worker().address
    except (ImportError, ValueError):  # pragma: no cover - always on a worker here
        address = ""
    case = Case.from_dict(case_data)
    if plugin_sha256 is not None:
        _same_plugin(case.model, plugin_sha256, address)
    given: dict[str, Any] = {}
    missing: tuple[str, ...] = ()
    if checked is not None:
        found = None
        if checked.sources is not None:
            found, missing = checked.sources.found_here()
        given = checked.run_options(found)
    thread = threading.get_ident()
    _CELLS.setdefault(token, set()).add(thread)
    try:
        if token in _STOPPED:
            raise Interrupted(_STOPPED[token])
        if run_cell is None:
            from ckptbench.measure.runner import run_case as run_cell
        result = run_cell(case, out_path=None, progress=None, **given)
    except (Interrupted, KeyboardInterrupt) as err:
        partial = getattr(err, "result", None)
        doc = None
        if isinstance(partial, RunResult) and partial.modes:
            doc = result_to_dict(_with_host(partial))
        return {"result": doc, "worker": address, "interrupted": stop_reason(err),
                "not_found": list(missing)}  # fmt: skip
    finally:
        _CELLS.get(token, set()).discard(thread)
        request_stop(thread, None)
    return {"result": result_to_dict(_with_host(result)), "worker": address,
            "not_found": list(missing)}  # fmt: skip


def plugin_digest(case: Case) -> str | None:
    """The SHA-256 of a plug-in cell's source as the submitting machine reads it (None: a
    built-in, or a module it cannot find; the worker's own check then decides)."""
    if ":" not in case.model:
        return None
    from ckptbench.workloads import plugin_provenance  # reads the file, never imports it

    return (plugin_provenance(case.model) or {}).get("sha256")


def _same_plugin(model: str, expected: str, worker: str) -> None:
    """On the worker: RuntimeError (the cell's error, reported, nothing measured) unless its
    plug-in source has the SHA-256 the submitter read."""
    from ckptbench.workloads import plugin_provenance

    here = plugin_provenance(model) or {}
    got = here.get("sha256")
    if got == expected:
        return
    seen = (
        f"reads {here.get('path', model)} with SHA-256 {got[:12]}"
        if got
        else ("cannot find or read it")
    )
    raise RuntimeError(
        f"worker {worker or '?'} {seen}, the submitting machine {expected[:12]}: not measured "
        "(a relative plug-in path resolves from each worker's folder; start the workers "
        "there, or give an installed module)"
    )


def _with_host(result: RunResult) -> RunResult:
    return result if result.host else replace(result, host=socket.gethostname())


def _stop_cells(token: str, signum: int) -> int:
    """Runs on each worker (``Client.run``): stop every cell of sweep ``token`` there, now
    and when one starts later; how many were running."""
    _STOPPED[token] = signum
    threads = list(_CELLS.get(token, ()))
    for thread in threads:
        request_stop(thread, signum)
    return len(threads)


# --------------------------------------------------------------------------- the loop


@contextlib.contextmanager
def _signals_held() -> Iterator[None]:
    """While a stopped sweep collects its cells, a second Ctrl-C or SIGTERM waits (the
    stop is bounded by :data:`STOP_WAIT_S`)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {}
    for name in ("SIGINT", "SIGTERM", "SIGHUP"):
        sig = getattr(signal, name, None)
        if sig is not None:
            previous[sig] = signal.signal(sig, lambda *_: None)
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def run_dask(
    cluster: Cluster,
    run_cell: RunCell | None,
    jobs: list[tuple[int, Case]],
    starting: Callable[[int, int], None],
    done: Done,
    retrying: Callable[[int, str], None] = lambda index, why: None,
    poll_s: float = 0.2,
    checks: Mapping[int, PluginChecked | None] | None = None,
) -> str | None:
    """Measure each (index, case) of ``jobs`` on ``cluster``, calling ``starting(index,
    attempt)`` when a cell is submitted, ``retrying(index, why)`` when its worker left and
    it goes back in the queue, and ``done(...)`` when it finished, failed or was lost.

    Returns None when every cell ended, else why the sweep ended early (the scheduler went
    away, no workers left); cells in flight then were reported to ``done`` as lost and
    cells never started were not reported. A stop signal stops the cells in flight
    (module docstring) and is re-raised with ``err.dask_stop``. ``checks``: by index, what
    its plug-in's check found, given to the cell on its worker as ``run`` gives it."""
    d = _Dispatch(cluster, run_cell, jobs, starting, done, retrying, checks or {})
    idle_since = None  # when cells last waited with no worker free or running
    try:
        while d.queue or d.running:
            d.submit_to_free()
            if not any(f.done() for f in d.running):
                time.sleep(poll_s)
            try:
                alive = cluster.alive()
            except SchedulerLost as err:
                for future in list(d.running):
                    d.lose(future, "the Dask scheduler went away while the cell ran", False)
                return f"the Dask scheduler {cluster.address} went away ({err})"
            d.collect_finished(alive)
            d.drop_departed(alive)
            d.follow_workers(alive)
            if not (d.queue and not d.free and not d.running):
                idle_since = None
                continue
            idle_since = idle_since if idle_since is not None else time.monotonic()
            if time.monotonic() - idle_since < min(cluster.timeout_s, REJOIN_WAIT_S):
                continue  # a nanny restarts its killed worker within a few seconds
            d.report_unretried()
            refused = f"; refused: {_refused(cluster)}" if cluster.refused else ""
            return f"Dask scheduler {cluster.address} has no workers left{refused}"
    except BaseException as err:
        if not isinstance(err, (Interrupted, KeyboardInterrupt)):
            raise
        with _signals_held():
            report = _stop(cluster, d.token, err, d.running, d.submitted, d.cases, d.tries, done)
        err.dask_stop = report  # type: ignore[attr-defined]
        raise
    return None


class _Dispatch:
    """The state of :func:`run_dask`'s loop: the cells queued, the free workers, the futures
    running (future -> (cell, worker, start)) and every one submitted, each cell's attempts,
    and the workers known to be alive; its methods are the loop's steps."""

    def __init__(
        self, cluster: Cluster, run_cell: RunCell | None, jobs: list[tuple[int, Case]],
        starting: Callable[[int, int], None], done: Done, retrying: Callable[[int, str], None],
        checks: Mapping[int, PluginChecked | None],
    ) -> None:  # fmt: skip
        self.cluster, self.run_cell = cluster, run_cell
        self.starting, self.done, self.retrying = starting, done, retrying
        self.token = uuid.uuid4().hex[:12]
        self.cases = dict(jobs)
        self.digests = {i: plugin_digest(c) for i, c in jobs}  # read once, here
        self.checks = {i: c.for_workers() for i, c in checks.items() if c is not None}
        self.free: deque[str] = deque(sorted(cluster.workers))
        self.queue: deque[int] = deque(i for i, _ in jobs)
        self.tries: dict[int, list[Attempt]] = {}
        self.running: dict[Any, tuple[int, str, float]] = {}
        self.submitted: list[Any] = []
        self.known = set(cluster.workers)

    def submit_to_free(self) -> None:
        """Send queued cells to the free workers, one cell each, pinned to it."""
        while self.queue and self.free:
            worker = self.free.popleft()
            index = self.queue.popleft()
            self.starting(index, len(self.tries.get(index, ())) + 1)
            case = self.cases[index]
            future = self.cluster.client.submit(
                _remote_cell,
                self.run_cell,
                case.to_dict(),
                self.token,
                self.digests.get(index),
                self.checks.get(index),
                key=f"ckptbench-{case.key}-{time.time_ns()}",
                workers=[worker],
                allow_other_workers=False,
                pure=False,
                retries=0,
            )
            self.submitted.append(future)
            self.running[future] = (index, worker, time.monotonic())

    def lose(self, future: Any, why: str, retry: bool) -> None:
        """A running cell was lost: queue it again (``retry``, attempts left) or report it."""
        index, worker, t0 = self.running.pop(future)
        with contextlib.suppress(Exception):
            future.cancel()
        attempt = Attempt(worker, self.cluster.host(worker), time.monotonic() - t0, why)
        self.tries.setdefault(index, []).append(attempt)
        if retry and len(self.tries[index]) < ATTEMPTS:
            self.queue.appendleft(index)
            self.retrying(index, why)
            return
        self.done(index, None, _lost_message(self.tries[index]), tuple(self.tries[index]), False)

    def collect_finished(self, alive: set[str]) -> None:
        """Report the finished cells and free their workers (those still alive); a cell the
        cluster cancelled is lost and retried."""
        for future in [f for f in self.running if f.done()]:
            index, worker, t0 = self.running[future]
            if future.status == "cancelled":  # not by us: the cluster dropped it
                self.lose(future, f"Dask cancelled the cell on {worker}", retry=True)
                continue
            del self.running[future]
            _collect(future, index, self.cases[index], worker, time.monotonic() - t0,
                     self.cluster, self.tries, self.done)  # fmt: skip
            if worker in alive:
                self.free.append(worker)

    def drop_departed(self, alive: set[str]) -> None:
        """A cell pinned to a worker that left would never run: lost, retried elsewhere."""
        for future, (_, worker, _) in list(self.running.items()):
            if worker not in alive:
                self.lose(future, f"Dask worker {worker} left before the cell finished", True)

    def follow_workers(self, alive: set[str]) -> None:
        """Admit workers that joined (when they can run the sweep), forget those that left."""
        busy = {w for _, w, _ in self.running.values()}
        for worker in sorted(alive - self.known):
            self.known.add(worker)
            if worker not in busy and self.cluster.admit(worker):
                self.free.append(worker)
        self.free = deque(w for w in self.free if w in alive)
        self.known &= alive  # one that comes back under its address is probed again
        for worker in set(self.cluster.workers) - alive:  # left: the ETA counts who is here
            del self.cluster.workers[worker]

    def report_unretried(self) -> None:
        """Report the queued cells that were lost and have no one left to retry them."""
        for index in [i for i in self.queue if self.tries.get(i)]:
            tries = tuple(self.tries[index])
            self.done(index, None, _lost_message(self.tries[index]), tries, False)


def _refused(cluster: Cluster) -> str:
    return "; ".join(f"{w}: {why}" for w, why in sorted(cluster.refused.items()))


def _lost_message(attempts: list[Attempt]) -> str:
    last = attempts[-1].error or "lost"
    if len(attempts) == 1:
        return f"{last}; `--resume` measures it again"
    workers = ", ".join(a.worker for a in attempts)
    return f"{last} (lost {len(attempts)} times: {workers}); `--resume` measures it again"


def _collect(
    future: Any, index: int, case: Case, worker: str, duration: float, cluster: Cluster,
    tries: dict[int, list[Attempt]], done: Done,
) -> RunResult | None:  # fmt: skip
    """Report a finished future to ``done``; the result it brought, if any."""
    payload = doc = None
    try:
        payload = future.result()
        doc = payload["result"]
        result = None if doc is None else result_from_dict(doc, f"Dask result of {case.key}")
        if result is not None and result.case.key != case.key:  # kept beside, never saved
            raise ValueError(f"its worker returned a result for another cell, {result.case.key}")
    except Exception as err:  # the remote cell raised, or returned something foreign
        state, why = cell_error(err)  # a plan the config makes impossible: never retried
        attempt = Attempt(worker, cluster.host(worker), duration, why)
        tries.setdefault(index, []).append(attempt)
        # a measurement that does not read back is kept as it came, never dropped
        raw = doc if doc is not None else payload  # a list, a string: kept all the same
        done(index, None, attempt.error, tuple(tries[index]), False, raw=raw, state=state)
        return None
    worker = payload.get("worker") or worker
    interrupted = payload.get("interrupted")
    host = result.host if result is not None else cluster.host(worker)
    error = None if interrupted is None else f"stopped by {interrupted}"
    if interrupted is not None and result is None:
        error += " before its first mode; nothing measured"
    attempt = Attempt(worker, host, duration, error)
    tries.setdefault(index, []).append(attempt)
    attempts = tuple(tries[index])
    notes = _not_found_notes(payload.get("not_found"), worker)
    if result is not None:  # the result records the worker that measured it and every attempt
        dask = {"worker": worker, "attempts": [a.to_dict() for a in attempts]}
        dask.update({"notes": list(notes)} if notes else {})
        result = replace(result, environment={**result.environment, "dask": dask})
    done(index, result, error if result is None else None, attempts, bool(interrupted),
         notes=tuple(f"{case.key}: {n}" for n in notes))  # fmt: skip
    return result


def _not_found_notes(missing: Any, worker: str) -> tuple[str, ...]:
    """What a cell says of the files its plug-in's check loaded that its worker does not
    have (``not_found``, as sent: relative to the submitting folder where under it)."""
    if not isinstance(missing, list) or not missing:
        return ()
    names = ", ".join(str(m) for m in missing)
    return (
        f"Dask worker {worker} has no {names}, which the plug-in check loaded here: the "
        "watch of the files the plug-in imports started at the worker's first report, not "
        "at the check (an edit between the two goes unseen)",
    )


def _stop(
    cluster: Cluster, token: str, err: BaseException, running: dict[Any, tuple[int, str, float]],
    submitted: list[Any], cases: dict[int, Case], tries: dict[int, list[Attempt]], done: Done,
) -> StopReport:  # fmt: skip
    """Stop this sweep's cells on every worker, save what they kept, cancel the rest."""
    signum = getattr(err, "signum", signal.SIGINT)
    client = cluster.client
    deadline = time.monotonic() + STOP_WAIT_S  # the whole stop, the request to workers too
    with contextlib.suppress(Exception):  # a frozen worker holds the request to its timeout
        client.sync(client._run, _stop_cells, token, int(signum), on_error="ignore",
                    callback_timeout=min(cluster.timeout_s, STOP_WAIT_S))  # fmt: skip
    while any(not f.done() for f in running) and time.monotonic() < deadline:
        time.sleep(0.05)
    saved, empty, unconfirmed = [], [], []
    for future, (index, worker, t0) in running.items():
        key = cases[index].key
        if future.done() and future.status == "finished":
            got = _collect(future, index, cases[index], worker, time.monotonic() - t0, cluster,
                           tries, done)  # fmt: skip
            (saved if got is not None else empty).append(key)
            continue
        why = (
            f"stopped by {stop_reason(err)}; worker {worker} did not confirm within "
            f"{STOP_WAIT_S:g} s"
        )
        attempt = Attempt(worker, cluster.host(worker), time.monotonic() - t0, why)
        tries.setdefault(index, []).append(attempt)
        done(index, None, why, tuple(tries[index]), True)
        unconfirmed.append((key, worker))
    with contextlib.suppress(Exception):
        client.cancel(submitted)
    return StopReport(stop_reason(err), tuple(saved), tuple(empty), tuple(unconfirmed))
