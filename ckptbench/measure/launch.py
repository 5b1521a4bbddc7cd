"""One fresh worker process: start it, feed it a job, follow its events, stop it.

The worker (``python -P -m ckptbench.measure.worker``) reports on a private pipe; this module reads
that channel, samples the worker's RSS like ``top`` (``measure.RssSampler``), enforces
``--timeout`` (counted from the worker's ready event) and ``--memory-limit``, and keeps every
iteration the worker completed, even when it has to stop it. It never prints and never
computes ratios (see docs/architecture.md, "The worker").

Worker processes never outlive ckptbench: :func:`stop_on_signals` turns SIGTERM/SIGHUP into
:class:`Interrupted`, which stops the worker and carries the partial result; a SIGKILLed
parent is noticed by the worker itself, which then kills its process group and what carries
its token (``orphans.die_with_parent``). Every worker is started
in a session of its own (so a process group of its own, which nothing it starts can
leave for ckptbench's: ``setpgid`` does not cross sessions), and stopping it stops the
whole group, so what a plug-in
spawned (threads keep the worker alive, forked children keep the channel open) never
outlives the mode (a Dask worker's task, off the main thread, is stopped by
:func:`request_stop`); once the worker has reported its result, such leftovers cannot turn a
completed mode into a timeout. What left the group too is found by the worker's token and,
on Linux within :func:`stop_on_signals`, by being reparented to ckptbench
(``ckptbench.measure.orphans``). The worker's stdout goes to ``/dev/null``
(nothing reads it) and its stderr to a temporary file, of which only the last
:data:`STDERR_TAIL_BYTES` are ever read back (:func:`read_tail`). The memory limit holds
whatever ``--sample-interval`` says: beside the sampler, the worker's start-up and
per-iteration exact peaks (VmHWM) and its VmHWM read every 50 ms are compared with it. Side
tasks (plug-in check, device probe, step costs, line profile) run through the same guard
(``ckptbench.measure.tasks``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import ckptbench
from ckptbench import ctrlc
from ckptbench.measure import noise, orphans, senders
from ckptbench.measure import peaks as measure
from ckptbench.measure.follow import (
    ModeEvents,
    Progress,
    RunEvent,
    Stopped,
    interrupted_result,
    mode_outcome,
)
from ckptbench.measure.orphans import WORKER_TOKEN_VAR
from ckptbench.results.schema import Case, Mode, ModeResult, RunResult, Status
from ckptbench.workloads import plugin_paths

__all__ = [
    "STDERR_TAIL_BYTES",
    "WORKER_TOKEN_VAR",
    "Channel",
    "Interrupted",
    "Progress",
    "RunEvent",
    "child_env",
    "default_worker_command",
    "raise_deferred",
    "read_tail",
    "request_stop",
    "run_mode",
    "start_worker",
    "stop_on_signals",
    "stop_reason",
    "stop_worker",
]

TIMELINE_POINTS = 2000
#: How long the runner waits for a stopped worker to exit before SIGKILL.
KILL_GRACE_S = 2.0
#: How much of the end of a worker's stderr is read back: its last lines are what a
#: failure shows (``stderr_tail``, the last line of a task's error), whatever it wrote.
STDERR_TAIL_BYTES = 64 * 1024


class Interrupted(BaseException):
    """ckptbench was asked to stop (SIGTERM, SIGHUP); ``signum`` says which. Re-raised by
    :func:`ckptbench.measure.runner.run_case` with what the stop left: ``result``, the part
    measured (None: nothing yet; its ``saved_as`` says where it was saved when not at the
    path asked for), and ``kept_aside``, the file ``--force`` was replacing, kept. Pickles
    with both (a Dask worker's exception travels)."""

    result: RunResult | None = None
    kept_aside: Path | None = None

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum

    def __reduce__(self):  # the signal, not its name, rebuilds it; then what it carries
        return type(self), (self.signum,), self.__dict__


def stop_reason(err: BaseException) -> str:
    """The signal that stopped ckptbench, by name: ``SIGTERM``, or ``SIGINT (Ctrl-C)``."""
    if isinstance(err, Interrupted):
        return signal.Signals(err.signum).name
    return "SIGINT (Ctrl-C)"


#: While a worker is being started, a stop signal is held back and raised right after,
#: so the runner always has the process in hand to stop it and to save its partial result.
_DEFERRED: dict[str, Any] = {"on": False, "pending": None}


@contextlib.contextmanager
def _signals_deferred() -> Iterator[None]:
    _DEFERRED["on"] = True
    try:
        yield
    finally:
        _DEFERRED["on"] = False


def raise_deferred() -> None:
    """Raise the stop signal held back while a worker was started (call once it is ours), or
    one requested for this thread (:func:`request_stop`), or a Ctrl-C that something
    swallowed (``ckptbench.ctrlc``)."""
    ctrlc.check()
    signum = _DEFERRED["pending"] or _THREAD_STOPS.get(threading.get_ident())
    if signum is not None:
        _DEFERRED["pending"] = None
        raise Interrupted(signum)


#: Stop requests for measurements off the main thread (a Dask worker's task), which no
#: signal reaches: thread id -> signal number (:func:`request_stop`).
_THREAD_STOPS: dict[int, int] = {}


def request_stop(thread_id: int, signum: int | None) -> None:
    """Stop the measurement in thread ``thread_id`` as signal ``signum`` would (None: forget)."""
    if signum is None:
        _THREAD_STOPS.pop(thread_id, None)
    else:
        _THREAD_STOPS[thread_id] = signum


@contextlib.contextmanager
def stop_on_signals() -> Iterator[None]:
    """Within the block, SIGTERM and SIGHUP raise :class:`Interrupted` in the main thread,
    except one this process was started with ignored: ``nohup ckptbench sweep ... &`` asks
    that a closed terminal's SIGHUP not stop it (Python likewise leaves an ignored SIGINT
    ignored). The command line measures within it, so within it, on Linux, this process
    also adopts what its workers orphan, to kill it (``orphans.adopting``), and takes a stop
    signal only from outside its workers: one a worker's code sent fails that worker's mode
    or task instead (``ckptbench.measure.senders``)."""

    def handler(signum: int, frame: Any) -> None:
        if _DEFERRED["on"]:  # starting a worker: raise once its process is ours to stop
            _DEFERRED["pending"] = signum
            return
        raise Interrupted(signum)

    names = ("SIGTERM", "SIGHUP")
    previous = {}
    for name in names:
        sig = getattr(signal, name, None)
        if sig is not None and signal.getsignal(sig) is not signal.SIG_IGN:
            previous[sig] = signal.signal(sig, handler)
    # Ctrl-C too, where Python handles it: a plug-in could send SIGINT as well
    ours = [*previous, *([signal.SIGINT] if callable(signal.getsignal(signal.SIGINT)) else [])]
    try:
        with orphans.adopting(), senders.watching(ours):
            ctrlc.check()  # a Ctrl-C lost before: nothing is measured
            yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def default_worker_command() -> list[str]:
    """``python -P -m measure.worker``: ``-P`` keeps the current folder off ``sys.path``."""
    return [sys.executable, "-P", "-m", "ckptbench.measure.worker"]


def child_env(case: Case) -> dict[str, str]:
    """The worker's environment: pinned BLAS threads, ckptbench importable, and a fresh
    :data:`WORKER_TOKEN_VAR`."""
    env = dict(os.environ)
    env[WORKER_TOKEN_VAR] = uuid.uuid4().hex
    env.update(measure.pinned_thread_env(case.threads))
    root = str(Path(ckptbench.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
    return env


class Channel:
    """Reads the worker's JSON-line events from a pipe without blocking for long."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.buffer = b""
        self.closed = False

    def close(self) -> None:
        os.close(self.fd)

    def read(self, timeout_s: float) -> list[dict[str, Any]]:
        if self.closed:
            time.sleep(timeout_s)
            return []
        ready, _, _ = select.select([self.fd], [], [], timeout_s)
        if not ready:
            return []
        chunk = os.read(self.fd, 65536)
        if not chunk:
            self.closed = True
        self.buffer += chunk
        events = []
        *lines, self.buffer = self.buffer.split(b"\n")
        for line in lines:
            try:
                event = json.loads(line)
            except (json.JSONDecodeError, UnicodeDecodeError):
                continue
            if isinstance(event, dict):
                events.append(event)
        return events

    def drain(self) -> list[dict[str, Any]]:
        """What the exited worker left in the pipe; never waits for a writer it forked."""
        events: list[dict[str, Any]] = []
        for _ in range(1000):
            if self.closed or not select.select([self.fd], [], [], 0)[0]:
                break
            events += self.read(0)
        return events


def stop_worker(proc: subprocess.Popen) -> None:
    """Stop the worker and everything in its process group (what a plug-in forked too):
    SIGTERM, up to :data:`KILL_GRACE_S` for the worker to exit, then SIGKILL to the group,
    so leftovers die even when they ignore SIGTERM. Each signal goes to the worker's pid as
    well, and the SIGKILL to what descended from it when it was stopped: a worker (or its
    child) that moved to another group, ckptbench's own included, is stopped all the same.
    Then SIGKILL to any process still carrying the worker's token, and to every one this
    process adopted from it (a plug-in's daemon that left the group and outlived its
    parent; ``ckptbench.measure.orphans``). Returns once the worker is reaped."""
    descendants = orphans.descendants(proc.pid) if proc.poll() is None else []
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, sig)
        if proc.poll() is None:  # not reaped yet: the pid is still the worker's
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(proc.pid, sig)
        if sig == signal.SIGTERM:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(KILL_GRACE_S)
    orphans.kill_all(descendants)
    proc.wait()
    orphans.kill_carrying(getattr(proc, "ckptbench_env", {}))
    orphans.worker_ended(proc.pid)


def read_tail(file: Any, limit: int = STDERR_TAIL_BYTES) -> str:
    """The last ``limit`` bytes of ``file`` (a worker's stderr) as text, read without
    reading what came before them; a character they cut in two is left out."""
    size = os.fstat(file.fileno()).st_size
    file.seek(max(0, size - limit))
    data = file.read(limit)
    if size > limit:
        data = data.lstrip(bytes(range(0x80, 0xC0)))  # UTF-8 continuation bytes
    return data.decode(errors="replace")


def _vm_hwm_bytes(pid: int) -> int | None:
    """The worker's RSS high-water mark (``/proc/PID/status`` VmHWM), None where unknown."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def run_mode(
    case: Case,
    mode: Mode,
    grad_path: str | None = None,
    *,
    worker: Sequence[str] | None = None,
    round_index: int = 0,
    progress: Progress | None = None,
    costs: dict[str, Any] | None = None,
) -> tuple[ModeResult, dict[str, Any] | None]:
    """Run one mode in a fresh worker process: (what it measured, what the worker reported
    of its process: numpy/BLAS, the user's source files it loaded; ``follow.worker_environment``;
    None where it failed). Never raises for a failed measurement: the status says what happened.

    ``--timeout`` counts from the worker's ``ready`` event (imports and data built); start-up
    has a limit of its own of the same length. A mode stopped by the timeout keeps the
    iterations it completed (status ``timeout``). :class:`Interrupted` and
    ``KeyboardInterrupt`` stop the worker and are re-raised with the partial result attached
    as ``err.partial``.
    """
    trace = case.trace and mode is Mode.CHECKPOINTED and round_index == 0  # the first round's
    fields = {"mode": mode.value, "grad_path": grad_path, "costs": costs, "trace": trace}
    with tempfile.TemporaryFile() as err_file:
        return _supervise(case, mode, fields, err_file, worker, round_index, progress)


def start_worker(
    case: Case, fields: dict[str, Any], worker: Sequence[str] | None, stdout: Any, stderr: Any
) -> tuple[subprocess.Popen, Channel]:
    """Start a worker with a private report pipe and hand it its job: the case, the parent's
    pid, the plug-in folders, and ``fields``. A stop signal arriving meanwhile is held back
    until the caller has the process (:func:`raise_deferred`). OSError if it cannot start.
    Every worker started must be stopped with :func:`stop_worker`."""
    read_fd, write_fd = os.pipe()
    job = {
        "case": case.to_dict(),
        "channel_fd": write_fd,
        "parent_pid": os.getpid(),
        "plugin_paths": list(plugin_paths(case.model)),
        **fields,
    }
    try:
        with _signals_deferred(), orphans.launching() as started:
            env = child_env(case)
            with senders.unblocked():  # the worker starts with no stop signal blocked
                proc = subprocess.Popen(
                    list(worker or default_worker_command()),
                    stdin=subprocess.PIPE,
                    stdout=stdout,
                    stderr=stderr,
                    env=env,
                    pass_fds=(write_fd,),
                    # its own session, so its own group: stopping it stops what it spawned,
                    # and none of it can join ckptbench's group (setpgid stays in a session)
                    start_new_session=True,
                )
            started(proc.pid)
            proc.ckptbench_env = env  # type: ignore[attr-defined]  # its token, for stop_worker
            with contextlib.suppress(BrokenPipeError):
                proc.stdin.write(json.dumps(job).encode())  # type: ignore[union-attr]
                proc.stdin.close()  # type: ignore[union-attr]
    except OSError:
        os.close(read_fd)
        raise
    finally:
        os.close(write_fd)
    return proc, Channel(read_fd)


def _supervise(case, mode, fields, err_file, worker, round_index, progress):
    """Start the worker, feed it the job, follow its events; see :func:`run_mode`."""
    started = time.perf_counter()
    started_unix = time.time()
    probe = noise.BusyProbe.start()
    signalled = senders.count()  # the stop signals its workers sent ckptbench so far
    try:
        proc, channel = start_worker(case, fields, worker, subprocess.DEVNULL, err_file)
    except OSError as err:
        return ModeResult(
            mode=mode, status=Status.CRASHED, error=f"cannot start worker: {err}"
        ), None
    sampler = measure.RssSampler(proc.pid, case.sample_interval_s, case.memory_limit_bytes)
    events = ModeEvents(case, mode, round_index, progress, started)
    timed_out = False
    interrupted = None
    try:
        raise_deferred()
        sampler.start()
        timed_out = _follow(proc, channel, sampler, events)
    except (Interrupted, KeyboardInterrupt) as err:
        interrupted = err
    finally:
        stop_worker(proc)
        if sampler.running:
            sampler.stop()
        channel.close()
    wall = time.perf_counter() - started
    busy = probe.stop()
    err_text = read_tail(err_file)
    common: dict[str, Any] = {
        "mode": mode,
        "round": round_index,
        "sampled_peak_rss_bytes": sampler.peak_rss_bytes or None,
        "sample_count": sampler.sample_count,
        "sampler_cpu_time_s": sampler.cpu_time_s,
        "timeline": tuple(measure.thin_timeline(sampler.timeline, TIMELINE_POINTS)),
        "exit_code": proc.returncode,
        "wall_time_s": wall,
        "warmup": tuple(events.warm),
        "iterations": tuple(events.iters),
        "iterations_planned": case.repeats,
        "started_unix_s": started_unix,
        "other_busy_cores": busy.other_cores,
    }
    if interrupted is not None:
        raise interrupted_result(interrupted, stop_reason(interrupted), events, err_text, common)
    stopped = Stopped(
        sampler.limit_exceeded, sampler.exceeded_rss_bytes, timed_out, proc.returncode, err_text
    )
    result, reported = mode_outcome(case, events, stopped, common)
    if sent := senders.since(signalled):  # a plug-in tried to stop ckptbench: not the user
        error = senders.describe(sent) + (f"; {result.error}" if result.error else "")
        status = Status.FAILED if result.status is Status.OK else result.status
        return dataclasses.replace(result, status=status, error=error), None
    return result, reported


def _follow(proc: subprocess.Popen, channel: Channel, sampler: Any, events: ModeEvents) -> bool:
    """Read the worker's events until it exits, has reported and had its grace time, goes
    over the memory limit or past its deadline; True where the deadline ended it."""
    limit = events.limit
    while True:
        raise_deferred()  # or a stop requested for this thread
        for event in channel.read(0.05):
            events.handle(event)
        if proc.poll() is not None:  # exited: what it wrote is in the pipe already
            for event in channel.drain():
                events.handle(event)
            return False
        if events.report is not None:
            # reported: threads or children it left may not hold the mode back
            if time.perf_counter() - events.reported_at > KILL_GRACE_S:
                return False
            continue
        if limit and not events.over and (hwm := _vm_hwm_bytes(proc.pid)) and hwm > limit:
            events.over.append(hwm)
        if sampler.limit_exceeded or events.over:
            return False
        if events.deadline is not None and time.perf_counter() > events.deadline:
            return True
