"""A cell's summary as a result file stores it (``CellSummary.as_dict``): the documented
stable keys CI scripts read (docs/usage.md, "Result files"), written from the typed summary
(:mod:`ckptbench.results.summary`) and never read back."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ckptbench.results.summary import CellSummary

__all__ = ["summary_document"]


def summary_document(s: CellSummary) -> dict[str, Any]:
    """The ``summary`` of a result file, in its documented layout (``CellSummary.as_dict``)."""
    modes = s.modes
    noise = [m for m in modes if m.time_cv is not None]
    doc: dict[str, Any] = {
        "slowdown": s.slowdown.value,
        "slowdown_ci": list(s.slowdown.interval) if s.slowdown.interval else None,
        "slowdown_per_round": None if s.slowdown.per_round is None else list(s.slowdown.per_round),
        "slowdown_set_aside": list(s.slowdown.set_aside),
        "memory_savings": s.memory_savings.value,
        "memory_savings_ci": list(s.memory_savings.interval) if s.memory_savings.interval else None,
        "rounds": s.rounds,
        "noise": [v.as_dict() for v in s.noise],
        "time_cv": {m.mode.value: m.time_cv for m in noise},
        "peak_spread_bytes": {m.mode.value: m.peak_spread_bytes for m in noise},
        "time_unstable": s.time_unstable,
        "phases_s": {m.mode.value: dict(m.phases_s) for m in modes if m.phases_s},
        "overhead_bytes": {m.mode.value: m.overhead_bytes for m in modes},
        "overhead_interval_bytes": {
            m.mode.value: m.overhead_interval.as_dict() for m in modes if m.overhead_interval
        },
        "peak_range_bytes": {m.mode.value: m.peak_range.as_dict() for m in modes if m.peak_range},
        "memory_savings_bound": s.memory_savings_bound,
        # modes stopped at --memory-limit: their overhead is more than this
        "overhead_above_bytes": {
            m.mode.value: m.overhead_above_bytes
            for m in modes
            if m.overhead_above_bytes is not None
        },
        "floor_time_s": s.floor_time_s,
        "floor_basis": s.floor_basis,  # "per-layer costs" or "mean layer"
        "vs_floor": s.vs_floor,
        "vs_floor_ci": list(s.floor_ratio.interval)
        if s.floor_ratio and s.floor_ratio.interval
        else None,
        "vs_floor_per_round": list(s.floor_ratio.per_round or ()) if s.floor_ratio else None,
        "floor_note": s.floor_note,  # why a peer has no floor
    }
    if s.on_device:
        device = [m for m in modes if m.peak_device_bytes is not None]
        doc["peak_device_bytes"] = {m.mode.value: m.peak_device_bytes for m in device}
        doc["device_overhead_bytes"] = {m.mode.value: m.device_overhead_bytes for m in device}
        doc["device_memory_savings"] = s.device_memory_savings
        doc["device_peak_exact"] = s.device_peak_exact
    return doc | {
        "peak_rss_bytes": {m.mode.value: m.peak_rss_bytes for m in modes},
        "time_s": {m.mode.value: m.time.as_dict() for m in modes if m.time is not None},
        "forward_steps": s.forward_steps,
        "forward_steps_optimal": s.forward_steps_optimal,
        "step_evaluations": s.step_evaluations,
        "step_evaluations_optimal": s.step_evaluations_optimal,
        "grad_max_rel_err": s.grad_max_rel_err,
        "cpu_share": {m.mode.value: m.cpu_share for m in modes if m.cpu_share is not None},
        "status": {m.mode.value: m.status.value for m in modes if m.status is not None},
        "rounds_complete": s.rounds_complete,
        "interrupted_round": s.interrupted_round,
        "ok": s.ok,
    }
