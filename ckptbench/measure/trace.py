"""The traced iteration of ``run --trace``, inside the measured worker (see docs/trace.md).

After the measured iterations, the worker runs the checkpointed gradient once more with a
:class:`ckptbench.engine.trace.TraceRecorder` set on its engine loop, so the measured
figures never include the recorder's cost. Every action is a window of its own:

* host memory (Linux): before the window ``malloc_trim(0)`` and a reset of ``VmHWM``
  (``/proc/self/clear_refs``, O(1)); after it ``VmHWM`` from ``/proc/self/status``: the
  action's peak RSS, minus the RSS when the trace started. Trimming before every action
  is what lets the curve fall when the plan frees a snapshot or a tape (glibc would keep
  the pages resident otherwise). Where ``clear_refs`` is missing the reading is the
  current RSS from ``/proc/self/statm`` (or psutil) after the action, not its peak.
* device memory: a backend's device meter may give ``trace_window()``, an object with
  ``start()`` and ``read()`` (the peak since the last read, in bytes above the start);
  torch's CUDA meter does (``max_memory_allocated`` with ``reset_peak_memory_stats``, no
  synchronisation: the caching allocator counts on the host). JAX's has none yet: XLA's
  allocator keeps one peak per process (see ``backends/jax/device.py``); a ``trace_window``
  there would read ``bytes_in_use`` after each action. Without one the column is absent.

Time: a second traced iteration, without the memory windows (whose heap trims make every
action fault its pages in again), times each action with the host clock
(``time.perf_counter``, bound before a plug-in loads: ``engine/clock.py``) in the
interpreter, and each step of an ADVANCE alone, so every step (layer) has a measured time
beside the time its plan's costs predict (``engine/trace_time.py``). On an accelerator the
times are left out (the host clock would time asynchronous launches).

Imports only the standard library, psutil (through ``peaks``) and the engine's recorder.
"""

from __future__ import annotations

import os
from typing import Any

from ckptbench.engine import clock
from ckptbench.engine.trace import TraceRecorder, step_label
from ckptbench.measure import peaks

__all__ = ["TRACE_NOTE", "UNTIMED_NOTE", "HostTraceMeter", "traced_iteration"]

#: Said with every trace: the trace is never part of the measured figures.
TRACE_NOTE = (
    "one extra traced iteration after the measured ones (each action trimmed and read "
    "alone), then one timing each action; the measured figures do not include it or the "
    "timed one"
)

#: Why a trace on an accelerator has no times.
UNTIMED_NOTE = (
    "times left out: on an accelerator the host clock times the launches, not the work, "
    "and the traced iteration is not synchronised per action"
)

_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def read_statm_rss_bytes() -> int:
    """Current RSS from ``/proc/self/statm`` (one short read), psutil elsewhere."""
    try:
        with open("/proc/self/statm", "rb") as fh:
            return int(fh.read().split()[1]) * _PAGE
    except (OSError, IndexError, ValueError):
        import psutil

        return int(psutil.Process().memory_info().rss)


class HostTraceMeter:
    """Per-action host readings (bytes above the start) and an optional device window."""

    def __init__(self, device: Any = None) -> None:
        self.method = "vmhwm-per-action" if peaks.peak_method() == "vmhwm" else "rss-after"
        self.device = device
        self.start_rss_bytes = 0
        self.start_device_bytes: int | None = None

    def start(self) -> None:
        """Open the first window: trim, remember the RSS, reset the peak."""
        peaks.trim_heap()
        self.start_rss_bytes = read_statm_rss_bytes()
        if self.device is not None:
            self.start_device_bytes = self.device.start()
        self.restart()

    def restart(self) -> None:
        """Open the next action's window: trim the heap, reset the peak."""
        peaks.trim_heap()
        if self.method == "vmhwm-per-action":
            peaks.reset_peak()

    def read(self) -> tuple[int, int | None]:
        """The window just closed, in bytes above the start (never negative)."""
        if self.method == "vmhwm-per-action":
            now = peaks.read_peak_bytes()
        else:
            now = read_statm_rss_bytes()
        device = self.device.read() if self.device is not None else None
        return max(0, now - self.start_rss_bytes), device


def traced_iteration(built: Any, timed: bool = True) -> dict[str, Any]:
    """Two more gradients of ``built`` with a recorder set on its engine loop: the first
    reads memory action by action, the second (``timed``) times them, without the memory
    windows (their heap trims make every action fault its pages in again: 2-4x slower).
    The trace section of the worker's result (``rows``, ``layers``: predicted vs measured
    seconds per step, how memory was read, the start figures), or ``{"unavailable": why}``
    where the mode runs no engine loop. ``timed`` False (an accelerator, where the host
    clock would time launches): no timed pass, and ``time_note`` says so."""
    window = getattr(built.device_meter, "trace_window", None)
    meter = HostTraceMeter(window() if window is not None else None)
    timed = timed and meter.device is None
    label = getattr(built, "step_label", None) or step_label
    recorder = TraceRecorder(meter, label, timed=False)
    if not built.trace(recorder):
        return {
            "unavailable": "this executor does not run the schedule action by action in "
            "Python (a compiled or framework-owned loop): nothing to trace"
        }
    timer = TraceRecorder(None, label) if timed else recorder
    try:
        meter.start()
        wall = _gradient_time(built)
        timed_wall = None
        if timed:
            built.trace(timer)
            timed_wall = _gradient_time(built)
    finally:
        built.trace(None)
    rows = recorder.rows
    if timed:
        for row, times in zip(rows, timer.rows, strict=True):
            row["measured_s"] = times["measured_s"]
    return {
        "rows": rows,
        "layers": timer.layers,
        "time_method": "perf-counter-per-action" if timed else None,
        **({"timed_wall_time_s": timed_wall} if timed else {"time_note": UNTIMED_NOTE}),
        "method": meter.method,
        "device_method": getattr(meter.device, "method", None),
        "start_rss_bytes": meter.start_rss_bytes,
        "start_device_bytes": meter.start_device_bytes,
        "wall_time_s": wall,
        "note": TRACE_NOTE,
    }


def _gradient_time(built: Any) -> float:
    t0 = clock.perf_counter()
    built.gradient(built.params)
    return clock.perf_counter() - t0
