"""Ratios and statistics computed from raw per-iteration samples (never from other ratios).

Definitions (the numbers ckptbench prints):

* peak of a mode = median over its measured iterations of the exact per-iteration peak RSS;
* overhead of a mode = its peak minus the baseline's peak (what differentiation adds to the
  forward-only floor in an identical fresh process);
* slowdown = median iteration time of checkpointed / median iteration time of normal;
* memory savings = overhead of normal / overhead of checkpointed.
"""

from __future__ import annotations

import contextlib
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ckptbench.analysis import intervals, stability
from ckptbench.results.schema import Case, Mode, ModeResult, Status, pool_rounds
from ckptbench.schedules import get_strategy

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
    """Slots a case's schedule may use (store-all keeps every state, whatever --snaps says)."""
    return get_strategy(case.strategy).effective_snaps(case.steps, case.snaps)


def ratio(num: float | None, den: float | None) -> float | None:
    if num is None or den is None or den <= 0:
        return None
    return num / den


def summarize(
    case: Case,
    modes: Sequence[ModeResult],
    rounds: Sequence[ModeResult] = (),
    other_busy_cores: dict[str, float] | None = None,
    *,
    interrupted_round: int | None = None,
) -> dict[str, Any]:
    """The summary document: stable keys CI scripts rely on, recomputable from raw samples.

    ``modes`` holds one result per mode (rounds pooled); ``rounds`` every (round, mode)
    result, for the estimates with intervals (``ckptbench.analysis.intervals``).

    Keys: ``slowdown`` (with several rounds the geometric mean of the rounds' own
    Hodges-Lehmann ratios, outlier rounds set aside; with one round its Hodges-Lehmann
    ratio), ``slowdown_ci``, ``slowdown_per_round``, ``slowdown_set_aside`` (1-based rounds
    left out of the slowdown as outliers), ``memory_savings``, ``memory_savings_ci``, ``rounds``,
    ``overhead_bytes`` (per mode), ``peak_rss_bytes`` (per mode), ``time_s`` (per mode:
    median/q1/q3/min/max/n), ``phases_s`` (per mode: median executor phase times),
    ``forward_steps``, ``forward_steps_optimal``, ``step_evaluations``,
    ``step_evaluations_optimal``, ``grad_max_rel_err``, ``cpu_share`` (per mode: median CPU
    time / wall time of an iteration; well below 1 means the worker waited for a core; CPU
    devices only), ``peak_device_bytes``, ``device_overhead_bytes``,
    ``device_memory_savings``, ``device_peak_exact`` (GPU devices only),
    ``noise`` (verdicts that make time figures unstable), ``time_unstable``, ``time_cv`` and
    ``peak_spread_bytes`` (per mode: CV of its iteration times, spread of its per-round
    median exact peaks), ``status`` (per mode: from its complete rounds), ``rounds_complete``
    (rounds no interruption cut), ``interrupted_round`` (1-based, or None; the runner passes
    the round it was stopped before when no round was cut), ``ok`` (every mode ok and nothing
    interrupted).
    """
    if not rounds and len({m.mode for m in modes}) < len(modes):
        rounds, modes = modes, pool_by_mode(modes)  # a result's modes, several rounds each
    by_mode = {m.mode: m for m in modes}
    peaks = {m.mode.value: mode_peak_bytes(m) for m in modes}
    base = peaks.get(Mode.BASELINE.value)
    overhead = {k: (None if v is None or base is None else v - base) for k, v in peaks.items()}
    times = {
        m.mode.value: spread([it.wall_time_s for it in m.iterations]).as_dict()
        for m in modes
        if m.ok and m.iterations
    }
    # on a GPU the worker waits for the device by design: CPU time / wall time says nothing
    # about other processes there, so the busy-machine verdict is a CPU-only one
    on_cpu = (case.device) == "cpu"
    cpu_share = {
        m.mode.value: statistics.median(
            it.cpu_time_s / it.wall_time_s for it in m.iterations if it.wall_time_s > 0
        )
        for m in modes
        if on_cpu and m.ok and any(it.wall_time_s > 0 for it in m.iterations)
    }
    normal = by_mode.get(Mode.NORMAL)
    ckpt = by_mode.get(Mode.CHECKPOINTED)
    counters = ckpt.counters if ckpt is not None else {}
    opt = optimum_advances(case, ckpt)
    advanced = counters.get("steps_advanced")
    taped = counters.get("steps_taped")
    estimates = round_estimates(rounds or modes, cpu_share, other_busy_cores)
    cut = [r.round for r in rounds or modes if r.status is Status.INTERRUPTED]
    slowdown = estimates.get("slowdown")
    savings = estimates.get("memory_savings")
    return {
        "slowdown": slowdown.value
        if slowdown
        else ratio(mode_time_s(ckpt) if ckpt else None, mode_time_s(normal) if normal else None),
        "slowdown_ci": slowdown.as_list() if slowdown else None,
        "slowdown_per_round": estimates.get("per_round"),
        "slowdown_set_aside": list(slowdown.outlier_rounds) if slowdown else [],
        "memory_savings": savings.value
        if savings
        else ratio(overhead.get(Mode.NORMAL.value), overhead.get(Mode.CHECKPOINTED.value)),
        "memory_savings_ci": savings.as_list() if savings else None,
        "rounds": estimates["rounds"],
        "noise": estimates["noise"],
        "time_cv": estimates.get("time_cv", {}),
        "peak_spread_bytes": estimates.get("peak_spread_bytes", {}),
        "time_unstable": estimates["time_unstable"],
        "phases_s": {m.mode.value: _median_phases(m) for m in modes if m.ok and _median_phases(m)},
        "overhead_bytes": overhead,
        **_device_figures(modes),
        "peak_rss_bytes": peaks,
        "time_s": times,
        "forward_steps": advanced,
        "forward_steps_optimal": opt,
        "step_evaluations": None if advanced is None or taped is None else advanced + taped,
        "step_evaluations_optimal": None if opt is None else opt + case.steps,
        "grad_max_rel_err": ckpt.grad_max_rel_err if ckpt is not None else None,
        "cpu_share": cpu_share,
        "status": {m.mode.value: m.status.value for m in modes},
        "rounds_complete": len({r.round for r in rounds or modes} - set(cut)),
        "interrupted_round": min(cut) + 1 if cut else interrupted_round,
        "ok": all(m.ok for m in modes) and not cut and interrupted_round is None,
    }


def pool_by_mode(results: Sequence[ModeResult]) -> list[ModeResult]:
    """One result per mode, its rounds pooled (``results.pool_rounds``), first-seen order."""
    order: list[Mode] = []
    for r in results:
        if r.mode not in order:
            order.append(r.mode)
    return [
        pool_rounds(tuple(sorted((r for r in results if r.mode is m), key=lambda r: r.round)))
        for m in order
    ]


def optimum_advances(case: Case, ckpt: ModeResult | None) -> int | None:
    """The advances a cell's checkpointed mode should make, from the strategy registry:
    Revolve's t(l, s) for the action streams set by snaps (a lower bound for uniform), the
    plan's own count for ``optimal``, and None for a peer whose schedule is not ours."""
    plan = ckpt.plan if ckpt is not None else None
    return get_strategy(case.strategy).optimum_advances(case.steps, case.snaps, plan)


def _device_figures(modes: Sequence[ModeResult]) -> dict[str, Any]:
    """GPU cases: median device peak per mode (torch's ``max_memory_allocated``, JAX's
    ``peak_bytes_in_use`` with its floor raised), the savings in device memory over the
    baseline's, and whether every peak was exact; empty for CPU cases."""
    peaks = {
        m.mode.value: int(statistics.median(it.peak_device_bytes for it in m.iterations))
        for m in modes
        if m.ok and m.iterations and all(it.peak_device_bytes is not None for it in m.iterations)
    }
    if not peaks:
        return {}
    base = peaks.get(Mode.BASELINE.value)
    over = {k: None if base is None else v - base for k, v in peaks.items()}
    return {
        "peak_device_bytes": peaks,
        "device_overhead_bytes": over,
        "device_memory_savings": ratio(
            over.get(Mode.NORMAL.value), over.get(Mode.CHECKPOINTED.value)
        ),
        "device_peak_exact": all(
            it.device_peak_exact is not False for m in modes for it in m.iterations
        ),
    }


def _median_phases(result: ModeResult) -> dict[str, float]:
    names = sorted({k for it in result.iterations for k in it.phases})
    return {
        k: statistics.median(it.phases[k] for it in result.iterations if k in it.phases)
        for k in names
    }


def round_estimates(
    results: Sequence[ModeResult],
    cpu_share: dict[str, float] | None = None,
    other_busy_cores: dict[str, float] | None = None,
) -> dict[str, Any]:
    """Slowdown and savings estimates with 95% intervals from every (round, mode) result,
    the per-round slowdowns and the noise verdicts (``ckptbench.analysis.intervals``)."""
    by_round: dict[int, dict[str, ModeResult]] = {}
    for r in results:
        if r.ok and r.iterations:
            by_round.setdefault(r.round, {})[r.mode.value] = r
    ordered = [by_round[k] for k in sorted(by_round)]
    times = [{m: [it.wall_time_s for it in r.iterations] for m, r in rd.items()} for rd in ordered]
    peaks = [
        {m: [it.peak_rss_bytes for it in r.iterations] for m, r in rd.items()} for rd in ordered
    ]
    out: dict[str, Any] = {"rounds": len({r.round for r in results}) if results else 0}
    pair = (Mode.NORMAL.value, Mode.CHECKPOINTED.value)
    timed = [t for t in times if all(m in t for m in pair)]
    if timed:
        with contextlib.suppress(intervals.IntervalError):
            out["slowdown"] = intervals.slowdown_estimate(timed)
            out["per_round"] = intervals.round_ratios(timed)
    three = (Mode.BASELINE.value, *pair)
    peaked = [p for p in peaks if all(m in p for m in three)]
    if peaked:
        with contextlib.suppress(intervals.IntervalError):
            out["memory_savings"] = intervals.savings_estimate(peaked)
    verdicts: tuple = ()
    if times:
        verdicts = stability.noise_verdicts(
            times,
            peaks=peaks,
            slowdown=out.get("slowdown"),
            cpu_share=cpu_share,
            other_busy_cores=other_busy_cores,
        )
    out["noise"] = [v.as_dict() for v in verdicts]
    if times:
        noise = stability.mode_noise(times, peaks)
        out["time_cv"] = {m: n.cv for m, n in noise.items()}
        out["peak_spread_bytes"] = {m: n.peak_spread_bytes for m, n in noise.items()}
    out["time_unstable"] = stability.time_unstable(verdicts)
    return out


def busy_modes(summary: dict[str, Any]) -> dict[str, float]:
    """Modes whose worker got less than :data:`BUSY_CPU_SHARE` of a core while measuring."""
    return {m: v for m, v in summary.get("cpu_share", {}).items() if v < BUSY_CPU_SHARE}
