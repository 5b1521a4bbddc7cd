"""One fresh worker process: start it, feed it a job, follow its events, stop it.

The worker (``python -P -m ckptbench.measure.worker``) reports on a private pipe; this module reads
that channel, samples the worker's RSS like ``top`` (``measure.RssSampler``), enforces
``--timeout`` (counted from the worker's ready event) and ``--memory-limit``, and keeps every
iteration the worker completed, even when it has to stop it. It never prints and never
computes ratios (see docs/architecture.md, "The worker").

Worker processes never outlive ckptbench: :func:`stop_on_signals` turns SIGTERM/SIGHUP into
:class:`Interrupted`, which stops the worker and carries the partial result; a SIGKILLed
parent is noticed by the worker itself (see ``measure.worker``). Every worker is started
in a process group of its own, and stopping it stops the whole group, so what a plug-in
spawned (threads keep the worker alive, forked children keep the channel open) never
outlives the mode (a Dask worker's task, off the main thread, is stopped by
:func:`request_stop`); once the worker has reported its result, such leftovers cannot turn a
completed mode into a timeout. The memory limit holds whatever ``--sample-interval`` says:
beside the sampler, the worker's start-up and per-iteration exact peaks (VmHWM) and its
VmHWM read every 50 ms are compared with it. Side tasks (plug-in check, device probe, step
costs, line profile) run through the same guard (``ckptbench.measure.tasks``).
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import ckptbench
from ckptbench.measure import noise
from ckptbench.measure import peaks as measure
from ckptbench.results.schema import Case, Iteration, Mode, ModeResult, Status
from ckptbench.workloads import plugin_paths

__all__ = [
    "Channel",
    "Interrupted",
    "Progress",
    "RunEvent",
    "child_env",
    "default_worker_command",
    "raise_deferred",
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


class Interrupted(BaseException):
    """ckptbench was asked to stop (SIGTERM, SIGHUP); ``signum`` says which."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


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
    one requested for this thread (:func:`request_stop`)."""
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
    """Within the block, SIGTERM and SIGHUP raise :class:`Interrupted` in the main thread."""

    def handler(signum: int, frame: Any) -> None:
        if _DEFERRED["on"]:  # starting a worker: raise once its process is ours to stop
            _DEFERRED["pending"] = signum
            return
        raise Interrupted(signum)

    names = ("SIGTERM", "SIGHUP")
    previous = {}
    for name in names:
        sig = getattr(signal, name, None)
        if sig is not None:
            previous[sig] = signal.signal(sig, handler)
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


@dataclass(frozen=True)
class RunEvent:
    """Progress of a run: a mode starts, an iteration completes, or a mode is done."""

    phase: str  # "start" | "iteration" | "done"
    mode: Mode
    round: int
    rounds: int
    index: int = 0  # iteration index (warm-up included), for "iteration"
    planned: int = 0  # warm-up + repeats
    warmup: bool = False
    result: ModeResult | None = None  # for "done"
    record: Iteration | None = None  # for "iteration": what it measured
    elapsed_s: float = 0.0  # since the worker was started


Progress = Callable[[RunEvent], None]


def default_worker_command() -> list[str]:
    """``python -P -m measure.worker``: ``-P`` keeps the current folder off ``sys.path``."""
    return [sys.executable, "-P", "-m", "ckptbench.measure.worker"]


def child_env(case: Case) -> dict[str, str]:
    """The worker's environment: pinned BLAS threads, ckptbench importable."""
    env = dict(os.environ)
    env.update(measure.pinned_thread_env(case.threads))
    root = str(Path(ckptbench.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
    return env


def _tail(text: str, lines: int = 8) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def _mib(n: int) -> str:
    return f"{n / 2**20:.1f} MiB"


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
    so leftovers die even when they ignore SIGTERM."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(KILL_GRACE_S)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    if proc.poll() is None:
        proc.kill()
        proc.wait()


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


def _iteration(record: dict[str, Any]) -> Iteration:
    return Iteration(**record)


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
    """Run one mode in a fresh worker process: (what it measured, the worker's numpy/BLAS
    description). Never raises for a failed measurement: the status says what happened.

    ``--timeout`` counts from the worker's ``ready`` event (imports and data built); start-up
    has a limit of its own of the same length. A mode stopped by the timeout keeps the
    iterations it completed (status ``timeout``). :class:`Interrupted` and
    ``KeyboardInterrupt`` stop the worker and are re-raised with the partial result attached
    as ``err.partial``.
    """
    trace = case.trace and mode is Mode.CHECKPOINTED and round_index == 0  # the first round's
    fields = {"mode": mode.value, "grad_path": grad_path, "costs": costs, "trace": trace}
    with tempfile.TemporaryFile() as out_file, tempfile.TemporaryFile() as err_file:
        return _supervise(case, mode, fields, (out_file, err_file), worker, round_index, progress)


def start_worker(
    case: Case, fields: dict[str, Any], worker: Sequence[str] | None, stdout: Any, stderr: Any
) -> tuple[subprocess.Popen, Channel]:
    """Start a worker with a private report pipe and hand it its job: the case, the parent's
    pid, the plug-in folders, and ``fields``. A stop signal arriving meanwhile is held back
    until the caller has the process (:func:`raise_deferred`). OSError if it cannot start."""
    read_fd, write_fd = os.pipe()
    job = {
        "case": case.to_dict(),
        "channel_fd": write_fd,
        "parent_pid": os.getpid(),
        "plugin_paths": list(plugin_paths(case.model)),
        **fields,
    }
    try:
        with _signals_deferred():
            proc = subprocess.Popen(
                list(worker or default_worker_command()),
                stdin=subprocess.PIPE,
                stdout=stdout,
                stderr=stderr,
                env=child_env(case),
                pass_fds=(write_fd,),
                process_group=0,  # its own group: stopping it stops what it spawned
            )
            with contextlib.suppress(BrokenPipeError):
                proc.stdin.write(json.dumps(job).encode())  # type: ignore[union-attr]
                proc.stdin.close()  # type: ignore[union-attr]
    except OSError:
        os.close(read_fd)
        raise
    finally:
        os.close(write_fd)
    return proc, Channel(read_fd)


def _supervise(case, mode, fields, files, worker, round_index, progress):
    """Start the worker, feed it the job, follow its events; see :func:`run_mode`."""
    out_file, err_file = files
    planned = case.warmup + case.repeats
    started = time.perf_counter()
    started_unix = time.time()
    probe = noise.BusyProbe.start()
    try:
        proc, channel = start_worker(case, fields, worker, out_file, err_file)
    except OSError as err:
        return ModeResult(
            mode=mode, status=Status.CRASHED, error=f"cannot start worker: {err}"
        ), None
    limit = case.memory_limit_bytes
    sampler = measure.RssSampler(proc.pid, case.sample_interval_s, limit)
    warm: list[Iteration] = []
    iters: list[Iteration] = []
    report: dict[str, Any] | None = None
    timed_out = interrupted = None
    over: list[int] = []  # an exact peak over the memory limit, whatever the sampler saw
    reported_at = 0.0
    deadline = None if case.timeout_s is None else started + case.timeout_s

    def handle(event: dict[str, Any]) -> None:
        nonlocal deadline, report, reported_at
        kind = event.get("event")
        if kind == "ready":
            if case.timeout_s is not None:
                deadline = time.perf_counter() + case.timeout_s
            peak = event.get("startup_peak_rss_bytes")
            if limit and isinstance(peak, int) and peak > limit:
                over.append(peak)
        elif kind == "iteration" and isinstance(event.get("record"), dict):
            with contextlib.suppress(TypeError):
                it = _iteration(event["record"])
                (warm if event.get("warmup") else iters).append(it)
                if limit and isinstance(it.peak_rss_bytes, int) and it.peak_rss_bytes > limit:
                    over.append(it.peak_rss_bytes)
                if progress:
                    progress(
                        RunEvent(
                            "iteration", mode, round_index, case.rounds,
                            index=int(event.get("index", 0)), planned=planned,
                            warmup=bool(event.get("warmup")), record=it,
                            elapsed_s=time.perf_counter() - started,
                        )
                    )  # fmt: skip
        elif kind == "result":
            report, reported_at = event, time.perf_counter()

    try:
        raise_deferred()
        sampler.start()
        while True:
            raise_deferred()  # or a stop requested for this thread
            for event in channel.read(0.05):
                handle(event)
            if proc.poll() is not None:  # exited: what it wrote is in the pipe already
                for event in channel.drain():
                    handle(event)
                break
            if report is not None:
                # reported: threads or children it left may not hold the mode back
                if time.perf_counter() - reported_at > KILL_GRACE_S:
                    break
                continue
            if limit and not over and (hwm := _vm_hwm_bytes(proc.pid)) and hwm > limit:
                over.append(hwm)
            if sampler.limit_exceeded or over:
                break
            if deadline is not None and time.perf_counter() > deadline:
                timed_out = True
                break
    except (Interrupted, KeyboardInterrupt) as err:
        interrupted = err
    finally:
        stop_worker(proc)
        if sampler.running:
            sampler.stop()
        channel.close()
    wall = time.perf_counter() - started
    busy = probe.stop()
    err_file.seek(0)
    err_text = err_file.read().decode(errors="replace")
    common: dict[str, Any] = {
        "mode": mode,
        "round": round_index,
        "sampled_peak_rss_bytes": sampler.peak_rss_bytes or None,
        "sample_count": sampler.sample_count,
        "sampler_cpu_time_s": sampler.cpu_time_s,
        "timeline": tuple(measure.thin_timeline(sampler.timeline, TIMELINE_POINTS)),
        "exit_code": proc.returncode,
        "wall_time_s": wall,
        "warmup": tuple(warm),
        "iterations": tuple(iters),
        "iterations_planned": case.repeats,
        "started_unix_s": started_unix,
        "other_busy_cores": busy.other_cores,
    }

    def failed(status: Status, error: str) -> ModeResult:
        return ModeResult(status=status, error=error, stderr_tail=_tail(err_text), **common)

    kept = f"; {len(iters)} of {case.repeats} measured iterations completed and kept"
    if interrupted is not None:
        partial = failed(Status.INTERRUPTED, f"stopped by {stop_reason(interrupted)}{kept}")
        interrupted.partial = partial  # type: ignore[attr-defined]
        raise interrupted
    if sampler.limit_exceeded or over:
        rss = max([sampler.exceeded_rss_bytes or 0, *over])
        return failed(
            Status.OUT_OF_MEMORY,
            f"RSS {_mib(rss)} exceeded the memory limit of "
            f"{_mib(case.memory_limit_bytes or 0)}; the worker was stopped{kept}",
        ), None
    if timed_out:
        return failed(
            Status.TIMEOUT,
            f"worker exceeded the timeout of {case.timeout_s:g} s and was stopped{kept}",
        ), None
    if report is None:
        return failed(
            Status.CRASHED, f"worker exited with status {proc.returncode} without a result"
        ), None
    if not report.get("ok"):
        return failed(Status.FAILED, str(report.get("error", "worker reported a failure"))), None
    try:
        result = ModeResult.reported(report, **common)
    except (KeyError, TypeError, ValueError) as err:
        return failed(
            Status.CRASHED, f"worker result is malformed ({type(err).__name__}: {err})"
        ), None
    if len(iters) != case.repeats:
        return failed(
            Status.CRASHED,
            f"worker reported {len(iters)} measured iterations, {case.repeats} planned",
        ), None
    return result, report.get("numpy")
