"""The measured process: ``python -P -m ckptbench.measure.worker`` runs one (case, mode).

Protocol (see docs/architecture.md, "The worker"): the parent writes one job document to
stdin, ``{"case": {...}, "mode": "normal", "grad_path": str|null, "channel_fd": int,
"parent_pid": int, "plugin_paths": [str]}``. The worker reports on the inherited pipe
``channel_fd``, never on stdout, so a plug-in that prints (even JSON) cannot forge a result.
Every report is one JSON line with an ``event``:

* ``ready`` — imports done and data built; the parent's ``--timeout`` starts here;
* ``iteration`` — one warm-up or measured iteration (``warmup``: bool, ``record``: {...});
* ``result`` — the final report (``ok`` true, or false with ``error``); a job with
  ``"trace": true`` adds ``trace``, one more iteration recorded action by action after the
  measured ones (``ckptbench.measure.trace``); an ok one lists ``user_files``, the source
  files of the user's own modules loaded (``user_files``, read after the measurement), which
  the parent hashes between modes (``ckptbench.measure.sources``).

A job with a ``task`` runs a side task instead (``ckptbench.measure.tasks``): ``"costs"``
measures the step costs the planner needs (``ckptbench.measure.stepcosts``, reported as
``costs_report``), ``"check"`` runs the plug-in's protocol once on the case's backend
(``ckptbench.workloads.check``: ``init``, one ``step``, ``post``, ``loss`` and their gradient;
reported as ``problem``, ``sizes`` and ``notes``, with ``user_files`` and their SHA-256,
``user_sha256``, where the runner's watch of them starts), ``"device"`` asks the case's
framework whether it can compute on the case's device (``registry.device_problem``;
``missing``: why the framework cannot be imported, ``require.MissingPackageError``'s line),
``"profile"`` profiles one gradient line by line (``ckptbench.measure.lineprofile``). Whatever a
plug-in raises at import, ``SystemExit`` and ``KeyboardInterrupt`` included, is reported as
one ``result`` event; after it the worker exits at once (``os._exit``), so threads a plug-in
left running cannot keep it alive. The ``ready`` event carries the start-up peak
(``startup_peak_rss_bytes``, VmHWM before the first reset) for the memory limit.

The worker is started with ``-P``, so the current folder never shadows an installed module;
plug-in folders the parent resolved are appended to the *end* of ``sys.path``. It dies with
its parent, and takes what it started along (``orphans.die_with_parent``): a watchdog
thread polling the parent's pid kills the processes carrying the worker's token and the
worker's process group; on Linux ``PR_SET_PDEATHSIG`` arms a SIGALRM backstop for a
watchdog that cannot run.

Before the case's gradient is built, a backend that asks for it (torch) runs a miniature of
the case once in every mode (``ckptbench.measure.priming``), so each mode's measured
iterations start with the same library code resident. Per iteration: ``malloc_trim(0)``,
reset VmHWM through ``/proc/self/clear_refs``, run loss + gradient, read VmHWM. Its wall,
process and measuring-thread CPU times are read from ``ckptbench.engine.clock``, imported
before any plug-in: a plug-in that replaces
``time.perf_counter`` does not move them. The worker imports only the backend it measures
(no pandas, rich or click, and no torch for autograd cases nor autograd for torch cases).
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from ckptbench.backends import Built, registry
from ckptbench.backends.require import MissingPackageError
from ckptbench.engine import clock
from ckptbench.measure import orphans
from ckptbench.measure import peaks as measure
from ckptbench.measure.priming import prime
from ckptbench.results.schema import Case, Mode

#: How often the watchdog checks that the parent is still alive.
PARENT_POLL_S = 0.5
#: At most this many of the user's own source files are reported (``user_files``).
MAX_USER_FILES = 64


def build(case: Case, mode: Mode, costs: dict[str, Any] | None = None) -> Built:
    """The gradient of ``case`` in ``mode`` on the case's backend (``costs``: the measured
    step costs strategy ``optimal`` plans with), through the backend registry."""
    return registry.build(case, mode, costs)


def _iteration(meter: measure.PeakMeter, built: Built) -> tuple[dict[str, Any], Any]:
    device = built.device_meter.measure() if built.device_meter is not None else None
    # the device window opens first: what it allocates to read an exact device peak (see
    # ckptbench.backends.jax.device) happens before the host's peak is reset
    with device or contextlib.nullcontext() as dwin, meter.measure() as window:
        # ckptbench's clocks, bound before a plug-in loaded (engine/clock.py); the thread's
        # CPU time is read inside the wall window, so it can never exceed it honestly
        t0, c0, h0 = clock.perf_counter(), clock.process_time(), clock.thread_time()
        value = built.gradient(built.params)  # synchronises a CUDA device before returning
        h1, c1, t1 = clock.thread_time(), clock.process_time(), clock.perf_counter()
    r = window.reading
    record = {
        "wall_time_s": t1 - t0,
        "cpu_time_s": c1 - c0,
        "thread_cpu_time_s": h1 - h0,
        "peak_rss_bytes": r.peak_rss_bytes,
        "start_rss_bytes": r.start_rss_bytes,
    }
    if dwin is not None and dwin.reading is not None:  # device memory beside host RSS
        record["peak_device_bytes"] = dwin.reading.peak_device_bytes
        record["start_device_bytes"] = dwin.reading.start_device_bytes
        record["device_peak_exact"] = bool(getattr(dwin.reading, "peak_exact", True))
    return record, value


def run_job(job: dict[str, Any], emit: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    """Run one job, emitting ``ready`` and ``iteration`` events; returns the final report."""
    case = Case.from_dict(job["case"])
    mode = Mode(job["mode"])
    for path in job.get("plugin_paths") or ():
        if path not in sys.path:
            sys.path.append(path)  # at the end: never shadows an installed module
    task = job.get("task")
    if task == "costs":
        return _measure_costs(case, emit)
    if task is not None:
        return _side_task(task, case, job)
    prime(case)  # every mode's code resident before this mode's data is built
    built = build(case, mode, job.get("costs"))
    meter = measure.PeakMeter()
    measure.trim_heap()
    rss_anon = measure.read_rss_anon_bytes() if meter.method == "vmhwm" else None
    startup_peak = measure.read_peak_bytes() if meter.method == "vmhwm" else None
    emit({"event": "ready", "planned": case.warmup + case.repeats, "warmup": case.warmup,
          "startup_peak_rss_bytes": startup_peak})  # fmt: skip
    value = None
    phases: dict[str, float] = {}
    for n in range(case.warmup + case.repeats):
        value = None  # drop the previous gradient before measuring the next iteration
        built.calls[0] = 0
        record, value = _iteration(meter, built)
        if n >= case.warmup:
            record["phases"] = built.phases()
            phases = record["phases"]
        emit({"event": "iteration", "warmup": n < case.warmup, "index": n, "record": record})
    loss, grad = value
    grad_path = job.get("grad_path")
    if grad_path:
        import numpy as np

        np.save(grad_path, built.flatten(grad))
    counters = {"step_calls": built.calls[0], **built.counters()}
    size = int(built.flatten(grad).size) if job.get("trace") else 0
    value = grad = None
    trace = _trace(built, size, case.device == "cpu") if job.get("trace") else None
    return {
        **({"trace": trace} if trace is not None else {}),
        "ok": True,
        "mode": mode.value,
        "peak_method": meter.method,
        "baseline_rss_anon_bytes": rss_anon,
        "counters": counters,
        "phases": phases,
        "plan": built.plan(),
        "loss": float(loss),
        "numpy": {
            **measure.numpy_environment(),
            **measure.framework_versions(registry.spec(case.backend).distributions),
        },
        "cpu_affinity": measure.cpu_affinity(),  # after the backend's set-up (JAX pins one)
        **user_files(),  # after the measurement: the plug-in's modules are all loaded
    }


def user_files() -> dict[str, Any]:
    """The source files of the modules loaded here that are the user's own code (the
    plug-in's file and what it imported from the user's folders): outside the Python
    installation (``sys.prefix``, ``sys.base_prefix``, site- and dist-packages, the
    standard library) and outside ckptbench itself, sorted, at most ``MAX_USER_FILES``
    (``user_files_total`` counts them all). The parent hashes them between modes."""
    own = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))  # ckptbench/
    outside = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix,
               sys.base_exec_prefix, own)}  # fmt: skip
    found = set()
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        if not isinstance(path, str) or not os.path.isfile(path):
            continue
        real = os.path.realpath(path)
        parts = real.split(os.sep)
        if "site-packages" in parts or "dist-packages" in parts:
            continue
        if not any(real == top or real.startswith(os.path.join(top, "")) for top in outside):
            found.add(real)
    files = sorted(found)
    return {"user_files": files[:MAX_USER_FILES], "user_files_total": len(files)}


def hashed_user_files() -> dict[str, Any]:
    """:func:`user_files` with each one's SHA-256 (``user_sha256``: {path: digest or None},
    ``sources.file_digest``), read here right after the plug-in check, as close as can be
    to when they were loaded: the runner's watch starts from them, so a file edited after
    the check fails the first mode measured with it (``ckptbench.measure.sources``)."""
    from ckptbench.measure.sources import file_digest

    files = user_files()
    return {**files, "user_sha256": {f: file_digest(f) for f in files["user_files"]}}


def _trace(built: Built, gradient_elements: int, host: bool) -> dict[str, Any]:
    """``run --trace``: one more iteration, recorded action by action (measure/trace.py);
    ``host``: the case runs on the CPU (its actions are timed)."""
    from ckptbench.measure.trace import traced_iteration

    return {**traced_iteration(built, timed=host), "gradient_elements": gradient_elements}


def _measure_costs(case: Case, emit: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    """The step costs the planner needs, measured in this fresh process on the case's
    backend (``ckptbench.measure.stepcosts`` through the registry)."""
    emit({"event": "ready", "planned": 0, "warmup": 0})
    return {"ok": True, "costs_report": registry.measure_costs(case)}


def _side_task(task: str, case: Case, job: dict[str, Any]) -> dict[str, Any]:
    """The plug-in check, the CUDA probe or the line profile (module doc)."""
    if task == "check":
        from ckptbench.workloads.check import check_workload

        return {"ok": True, **check_workload(case, job.get("given_sizes")), **hashed_user_files()}
    if task == "device":  # a framework that cannot be imported is said as such
        try:
            return {"ok": True, "problem": registry.device_problem(case)}
        except MissingPackageError as err:
            return {"ok": True, "problem": None, "missing": str(err)}
    if task == "profile":
        from ckptbench.measure.lineprofile import profile_job

        return profile_job(job.get("profile"))
    raise ValueError(f"unknown task {task!r}")


def _open_channel(job: dict[str, Any]) -> IO[str]:
    fd = job.get("channel_fd")
    if isinstance(fd, int):
        return os.fdopen(fd, "w", encoding="utf-8", closefd=True)
    return sys.stdout  # run by hand: report on stdout


def main() -> int:
    channel: IO[str] = sys.stdout

    def emit(event: dict[str, Any]) -> None:
        channel.write(json.dumps(event) + "\n")
        channel.flush()

    try:
        job = json.loads(sys.stdin.read())
        if job.get("parent_pid"):  # dies with it, and what it started too
            orphans.die_with_parent(job["parent_pid"], PARENT_POLL_S)
        channel = _open_channel(job)
        report = run_job(job, emit)
    except BaseException as err:  # a plug-in's exit or ^C is a failure too
        lines = str(err).strip().splitlines()
        msg = f"{type(err).__name__}: {lines[0]}" if lines else type(err).__name__
        if isinstance(err, SystemExit):
            msg = f"SystemExit({err.code!r}) raised while running the job (a plug-in exited?)"
        elif not isinstance(err, Exception):
            msg = f"{msg} raised while running the job, though no signal came from ckptbench"
        place = _plugin_place(err)
        if place:
            msg = f"{msg} (at {place})"
        sys.stderr.write(_relative("".join(traceback.format_exception(err))))
        with contextlib.suppress(OSError, ValueError):
            emit({"event": "result", "ok": False, "error": msg})
        return 1
    emit({"event": "result", **report})
    return 0


def _relative(text: str) -> str:
    """``text`` with paths below the current folder or ckptbench's checkout made relative:
    the stderr tail a result keeps never holds this machine's absolute paths."""
    root = str(Path(__file__).resolve().parents[2])
    for folder in sorted({os.getcwd(), str(Path.cwd().resolve()), root}, key=len, reverse=True):
        text = text.replace(os.path.join(folder, ""), "")
    return text


def _plugin_place(err: BaseException) -> str | None:
    """``file.py:LINE`` of a plug-in's own code where ``err`` was raised, or None."""
    try:
        from ckptbench.workloads.tracebacks import where

        return where(err)
    except Exception:  # the report must go out whatever happens here
        return None


def _exit_now(code: int) -> None:
    """Exit without waiting for threads a plug-in left running (the result is sent)."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(code)


if __name__ == "__main__":
    _exit_now(main())
