"""Ratios and statistics computed from raw per-iteration samples (never from other ratios).

Definitions (the numbers ckptbench prints):

* peak of a mode = median over its measured iterations of the exact per-iteration peak RSS;
* overhead of a mode = its peak minus the baseline's peak (what differentiation adds to the
  forward-only floor in an identical fresh process);
* slowdown = median iteration time of checkpointed / median iteration time of normal;
* memory savings = overhead of normal / overhead of checkpointed.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ckptbench.results import Case, Mode, ModeResult
from ckptbench.revolve import optimal_forward_steps

__all__ = [
    "BUSY_CPU_SHARE",
    "Spread",
    "busy_modes",
    "effective_snaps",
    "mode_peak_bytes",
    "mode_time_s",
    "ratio",
    "spread",
    "summarize",
]

#: Below this CPU share the worker was descheduled for long: its times are not trustworthy.
BUSY_CPU_SHARE = 0.9


@dataclass(frozen=True)
class Spread:
    """Median with interquartile range and min-max of a sample."""

    median: float
    q1: float
    q3: float
    min: float
    max: float
    n: int

    def as_dict(self) -> dict[str, float]:
        return {
            "median": self.median,
            "q1": self.q1,
            "q3": self.q3,
            "min": self.min,
            "max": self.max,
            "n": self.n,
        }


def spread(values: Sequence[float]) -> Spread:
    """Median, quartiles (inclusive method) and range; raises ValueError on an empty sample."""
    vals = sorted(float(v) for v in values)
    if not vals:
        raise ValueError("empty sample")
    if len(vals) == 1:
        q1 = q3 = vals[0]
    else:
        q1, _, q3 = statistics.quantiles(vals, n=4, method="inclusive")
    return Spread(statistics.median(vals), q1, q3, vals[0], vals[-1], len(vals))


def mode_peak_bytes(result: ModeResult) -> int | None:
    """Median exact peak RSS of a mode's measured iterations (None if it has none)."""
    if not result.ok or not result.iterations:
        return None
    return int(statistics.median(it.peak_rss_bytes for it in result.iterations))


def mode_time_s(result: ModeResult) -> float | None:
    if not result.ok or not result.iterations:
        return None
    return statistics.median(it.wall_time_s for it in result.iterations)


def effective_snaps(case: Case) -> int:
    """Slots a case's schedule may use: store-all keeps every state, whatever --snaps says."""
    if case.strategy == "store-all":
        return case.steps
    return min(case.snaps, case.steps)


def ratio(num: float | None, den: float | None) -> float | None:
    if num is None or den is None or den <= 0:
        return None
    return num / den


def summarize(case: Case, modes: Sequence[ModeResult]) -> dict[str, Any]:
    """The summary document: stable keys CI scripts rely on, recomputable from raw samples.

    Keys: ``slowdown``, ``memory_savings``, ``overhead_bytes`` (per mode), ``peak_rss_bytes``
    (per mode), ``time_s`` (per mode: median/q1/q3/min/max/n), ``forward_steps``,
    ``forward_steps_optimal``, ``step_evaluations``, ``step_evaluations_optimal``,
    ``grad_max_rel_err``, ``cpu_share`` (per mode: median CPU time / wall time of an
    iteration; well below 1 means the worker waited for a core), ``status`` (per mode), ``ok``.
    """
    by_mode = {m.mode: m for m in modes}
    peaks = {m.mode.value: mode_peak_bytes(m) for m in modes}
    base = peaks.get(Mode.BASELINE.value)
    overhead = {k: (None if v is None or base is None else v - base) for k, v in peaks.items()}
    times = {
        m.mode.value: spread([it.wall_time_s for it in m.iterations]).as_dict()
        for m in modes
        if m.ok and m.iterations
    }
    cpu_share = {
        m.mode.value: statistics.median(
            it.cpu_time_s / it.wall_time_s for it in m.iterations if it.wall_time_s > 0
        )
        for m in modes
        if m.ok and m.iterations
    }
    normal = by_mode.get(Mode.NORMAL)
    ckpt = by_mode.get(Mode.CHECKPOINTED)
    counters = ckpt.counters if ckpt is not None else {}
    opt = optimal_forward_steps(case.steps, effective_snaps(case))
    advanced = counters.get("steps_advanced")
    taped = counters.get("steps_taped")
    return {
        "slowdown": ratio(
            mode_time_s(ckpt) if ckpt else None, mode_time_s(normal) if normal else None
        ),
        "memory_savings": ratio(
            overhead.get(Mode.NORMAL.value), overhead.get(Mode.CHECKPOINTED.value)
        ),
        "overhead_bytes": overhead,
        "peak_rss_bytes": peaks,
        "time_s": times,
        "forward_steps": advanced,
        "forward_steps_optimal": opt,
        "step_evaluations": None if advanced is None or taped is None else advanced + taped,
        "step_evaluations_optimal": opt + case.steps,
        "grad_max_rel_err": ckpt.grad_max_rel_err if ckpt is not None else None,
        "cpu_share": cpu_share,
        "status": {m.mode.value: m.status.value for m in modes},
        "ok": all(m.ok for m in modes),
    }


def busy_modes(summary: dict[str, Any]) -> dict[str, float]:
    """Modes whose worker got less than :data:`BUSY_CPU_SHARE` of a core while measuring."""
    return {m: v for m, v in summary.get("cpu_share", {}).items() if v < BUSY_CPU_SHARE}
