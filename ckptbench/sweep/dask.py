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
* **The scheduler restarts** (its id changes; the client reconnects, Dask cancels the
  cells in flight, and workers close when their scheduler connection breaks): the cells in
  flight were not measured; they go back to the queue for a worker that joins the new
  scheduler, and stay pending for ``--resume`` when none does (:meth:`_Dispatch.
  follow_scheduler`).
* **A stop signal** (Ctrl-C, SIGTERM) in the submitting process: every worker is asked to
  stop this sweep's cells (``sweep.onworker.stop_cells``: the measurement's process group is stopped
  and the mode in flight kept as interrupted, as in a local sweep), the partial results are
  collected and saved, the futures cancelled, and the signal re-raised with a
  :class:`StopReport` attached as ``err.dask_stop``.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from ckptbench.measure.launch import Interrupted, stop_reason
from ckptbench.results.schema import Case, RunResult, result_from_dict
from ckptbench.sweep.cells import Attempt, cell_error
from ckptbench.sweep.cluster import Cluster, SchedulerLost
from ckptbench.sweep.onworker import plugin_digest, remote_cell, stop_cells

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
    retrying: Callable[..., None] = lambda index, why, *again, **attempts: None,
    poll_s: float = 0.2,
    checks: Mapping[int, PluginChecked | None] | None = None,
) -> str | None:
    """Measure each (index, case) of ``jobs`` on ``cluster``, calling ``starting(index,
    attempt)`` when a cell is submitted, ``retrying(index, why[, again], attempts=...)`` when
    its worker left (or its scheduler restarted: ``again`` says when it is measured again)
    and it goes back in the queue (``attempts``: its tries so far, the lost one last: history,
    not the cell's outcome), and ``done(...)`` when it finished, failed or was lost.

    Returns None when every cell ended, else why the sweep ended early (the scheduler went
    away or restarted, no workers left); cells in flight then were reported to ``done`` as
    lost (not measured, pending, where the scheduler restarted) and cells never started
    were not reported. A stop signal stops the cells in flight
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
                if d.follow_scheduler(alive):  # the client reconnects: its cells held until
                    time.sleep(poll_s)  # it knows whether the scheduler is the same one
                    continue
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
            if d.restarted is not None:  # and no worker joined the new scheduler since
                return (
                    f"the Dask scheduler at {cluster.address} restarted (its id changed) and "
                    "its workers closed with it: start workers again and run the sweep with "
                    "--resume"
                )
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
        # the plug-in's digest a worker's copy must have: the check's, else read once here
        self.digests = {
            i: plugin_digest(c, getattr(checks.get(i), "sources", None)) for i, c in jobs
        }
        self.checks = {i: c.for_workers() for i, c in checks.items() if c is not None}
        self.free: deque[str] = deque(sorted(cluster.workers))
        self.queue: deque[int] = deque(i for i, _ in jobs)
        self.tries: dict[int, list[Attempt]] = {}
        self.running: dict[Any, tuple[int, str, float]] = {}
        self.submitted: list[Any] = []
        self.known = set(cluster.workers)
        self.restarted: str | None = None  # why, while no worker joined a restarted scheduler
        self.after_restart: set[int] = set()  # queued again by a restart: pending, not lost
        self.not_lost: dict[int, int] = {}  # cell -> its attempts a scheduler restart ended

    def submit_to_free(self) -> None:
        """Send queued cells to the free workers, one cell each, pinned to it."""
        while self.queue and self.free:
            worker = self.free.popleft()
            index = self.queue.popleft()
            self.starting(index, len(self.tries.get(index, ())) + 1)
            self.after_restart.discard(index)
            case = self.cases[index]
            digest, at_check = self.digests[index]
            future = self.cluster.client.submit(
                remote_cell,
                self.run_cell,
                case.to_dict(),
                self.token,
                digest,
                self.checks.get(index),
                at_check,
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
        if retry and len(self.tries[index]) - self.not_lost.get(index, 0) < ATTEMPTS:
            self.queue.appendleft(index)
            self.retrying(index, why, attempts=tuple(self.tries[index]))
            return
        self.done(index, None, _lost_message(self.tries[index]), tuple(self.tries[index]), False)

    def follow_scheduler(self, alive: set[str]) -> bool:
        """Whether the scheduler was restarted (its id changed), asked where that may be
        why cells stopped: a cell cancelled when the client lost its connection (once it is
        connected again), a cell's worker gone, or cells waiting with no worker. Dask
        cancelled the cells in flight and their workers closed with the old scheduler: each
        goes back to the front of the queue, not measured, for a worker that joins the new
        one (when none does, it stays pending for ``--resume``); that try is not counted
        among its :data:`ATTEMPTS`. True while the client reconnects (nothing is decided
        then: it is connected again soon, or ``alive()`` gives up); :class:`SchedulerLost`
        when the scheduler does not answer."""
        client = self.cluster.client
        if getattr(client, "status", "running") == "connecting":
            return True
        cut = [f for f in self.running if _connection_lost(f, client)]
        gone = any(w not in alive for _, w, _ in self.running.values())
        idle = self.queue and not self.running and not (set(self.free) & alive)
        if not (cut or gone or idle) or not self.cluster.restarted():
            return False
        why = (f"the Dask scheduler at {self.cluster.address} restarted (its id changed) "
               "while the cell ran: not measured")  # fmt: skip
        self.restarted = why
        for future, (index, worker, t0) in list(self.running.items()):
            del self.running[future]
            with contextlib.suppress(Exception):
                future.cancel()
            attempt = Attempt(worker, self.cluster.host(worker), time.monotonic() - t0, why)
            self.tries.setdefault(index, []).append(attempt)
            self.not_lost[index] = self.not_lost.get(index, 0) + 1
            self.after_restart.add(index)
            self.queue.appendleft(index)
            self.retrying(index, why, "measuring it again if a worker joins the new scheduler",
                          attempts=tuple(self.tries[index]))  # fmt: skip
        return False

    def collect_finished(self, alive: set[str]) -> None:
        """Report the finished cells and free their workers (those still alive); a cell the
        cluster cancelled is lost and retried (one cancelled when the client lost the
        scheduler, once it is connected again to the same one: :meth:`follow_scheduler`)."""
        for future in [f for f in self.running if f.done()]:
            index, worker, t0 = self.running[future]
            if _connection_lost(future, self.cluster.client):
                self.lose(future, f"the connection to the Dask scheduler broke while the cell "
                          f"ran on {worker}", retry=True)  # fmt: skip
                continue
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
                self.restarted = None  # a worker joined (the new scheduler, if it restarted)
        self.free = deque(w for w in self.free if w in alive)
        self.known &= alive  # one that comes back under its address is probed again
        for worker in set(self.cluster.workers) - alive:  # left: the ETA counts who is here
            del self.cluster.workers[worker]

    def report_unretried(self) -> None:
        """Report the queued cells that were lost and have no one left to retry them; those
        a scheduler restart sent back are not measured: pending, for ``--resume``."""
        for index in [i for i in self.queue if self.tries.get(i)]:
            tries = tuple(self.tries[index])
            if index in self.after_restart:
                why = f"{tries[-1].error}; `--resume` measures it"
                self.done(index, None, why, tries, True)
                continue
            self.done(index, None, _lost_message(self.tries[index]), tries, False)


def _connection_lost(future: Any, client: Any) -> bool:
    """A future the client cancelled when it lost its connection to the scheduler (its
    reason; a client still reconnecting where a distributed gives none)."""
    if future.status != "cancelled":
        return False
    try:
        future.result(timeout=5)  # cancelled already: it raises at once
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as err:  # its CancelledError, with the reason where it has one
        reason = getattr(err, "reason", None)
        if reason is not None:
            return reason == "scheduler-connection-lost"
    return getattr(client, "status", "running") == "connecting"


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
         notes=notes)  # fmt: skip
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
        client.sync(client._run, stop_cells, token, int(signum), on_error="ignore",
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
