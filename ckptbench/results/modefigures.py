"""One mode's figures, its rounds pooled: peak and overhead (with the range of its
iteration peaks and the interval of its overhead), iteration times, CPU share, executor
phases, device peaks, and the executor's counters and plan, typed.

The per-mode half of :func:`ckptbench.results.summary.compute`, which adds what divides
one mode's figures by another's (slowdown, savings, the recomputation floor); the
definitions of every figure are that module's docstring.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ckptbench.analysis import memnoise
from ckptbench.analysis.memnoise import Overhead, PeakRange
from ckptbench.analysis.summary import Spread, mode_peak_bytes, spread
from ckptbench.results.modes import Mode, Status

if TYPE_CHECKING:
    from ckptbench.results.schema import ModeResult

__all__ = [
    "Counters",
    "MemoryFigures",
    "ModeFigures",
    "PlanFigures",
    "all_device_peaks_exact",
    "median_cpu_share",
    "mode_figures",
]


@dataclass(frozen=True)
class Counters:
    """The executor's counters of a mode (``ModeResult.counters``), None where not counted."""

    step_calls: int | None = None  # step evaluations (advances + taped steps)
    steps_advanced: int | None = None
    steps_taped: int | None = None
    peak_stored_bytes: int | None = None  # the bytes our schedule stored at most
    # JAX: RSS after the compile minus before (a difference: may be negative)
    program_rss_bytes: int | None = None
    compile_time_ns: int | None = None  # JAX

    @classmethod
    def of(cls, counters: Mapping[str, Any]) -> Counters:
        return cls(**{k: counters.get(k) for k in cls.__dataclass_fields__})

    @property
    def compile_time_s(self) -> float | None:
        return None if self.compile_time_ns is None else self.compile_time_ns / 1e9


@dataclass(frozen=True)
class PlanFigures:
    """What a planned schedule (strategy ``optimal``) predicted (``ModeResult.plan``)."""

    predicted_time_s: float | None = None
    peak_bytes: int | None = None

    @classmethod
    def of(cls, plan: Mapping[str, Any]) -> PlanFigures:
        return cls(plan.get("predicted_time_s"), plan.get("peak_bytes"))


@dataclass(frozen=True)
class ModeFigures:
    """One mode's figures, its rounds pooled; None (empty) where it has none."""

    mode: Mode
    status: Status | None  # None: not measured
    peak_rss_bytes: int | None = None
    overhead_bytes: int | None = None
    #: iteration time (s): a mode ok in every round kept, as its peak; None otherwise
    time: Spread | None = None
    cpu_share: float | None = None  # CPU time / wall time of an iteration (CPU devices)
    phases_s: Mapping[str, float] = field(default_factory=dict)  # executor phase medians
    peak_device_bytes: int | None = None  # GPU devices only
    device_overhead_bytes: int | None = None
    time_cv: float | None = None  # CV of its iteration times, None when not in every round
    peak_spread_bytes: int | None = None  # spread of its per-round median exact peaks
    #: every measured iteration's exact peak, rounds pooled (median, low, high, n)
    peak_range: PeakRange | None = None
    #: overhead with its interval: both modes' spreads and a rerun's (normal, checkpointed)
    overhead_interval: Overhead | None = None
    counters: Counters = Counters()
    plan: PlanFigures = PlanFigures()
    #: a mode stopped at --memory-limit: its peak and overhead are more than these (the
    #: limit, and the limit less the baseline's peak); None for every other mode
    peak_above_bytes: int | None = None
    overhead_above_bytes: int | None = None

    @property
    def ok(self) -> bool:
        return self.status is Status.OK


@dataclass(frozen=True)
class MemoryFigures:
    """Per mode: the exact peak (median over iterations), the device peak (GPU cells), the
    range of its iteration peaks and, beside the baseline's, its overhead's interval."""

    peaks: dict[Mode, int | None]
    device: dict[Mode, int]
    ranges: dict[Mode, PeakRange]
    noise: dict[Mode, Overhead]

    @classmethod
    def of(cls, pooled: Sequence[ModeResult]) -> MemoryFigures:
        ranges = {
            m.mode: memnoise.peak_range([it.peak_rss_bytes for it in m.iterations])
            for m in pooled
            if m.ok
        }
        noise = {
            k: memnoise.overhead(r, ranges.get(Mode.BASELINE))
            for k, r in ranges.items()
            if k is not Mode.BASELINE
        }
        peaks = {m.mode: mode_peak_bytes(m) for m in pooled}
        return cls(peaks, _device_peaks(pooled), ranges, noise)


def mode_figures(
    m: ModeResult,
    mem: MemoryFigures,
    cpu_share: dict[str, float],
    estimates: dict[str, Any],
    limit: int | None,
) -> ModeFigures:
    """One mode's figures from its pooled result, the cell's memory figures, the CPU shares,
    the round estimates (time CV and peak spread) and the case's memory limit (the lower
    bounds of a mode stopped there)."""
    cv, pspread = estimates.get("time_cv", {}), estimates.get("peak_spread_bytes", {})
    stopped = limit if m.status is Status.OUT_OF_MEMORY else None
    above = _minus(stopped, mem.peaks.get(Mode.BASELINE))
    return ModeFigures(
        mode=m.mode,
        status=m.status,
        peak_rss_bytes=mem.peaks[m.mode],
        overhead_bytes=_minus(mem.peaks[m.mode], mem.peaks.get(Mode.BASELINE)),
        time=_times(m) if _timed(m) else None,
        cpu_share=cpu_share.get(m.mode.value),
        phases_s=_median_phases(m) if m.ok else {},
        peak_device_bytes=mem.device.get(m.mode),
        device_overhead_bytes=_minus(mem.device.get(m.mode), mem.device.get(Mode.BASELINE)),
        time_cv=cv.get(m.mode.value),
        peak_spread_bytes=pspread.get(m.mode.value),
        peak_range=mem.ranges.get(m.mode),
        overhead_interval=mem.noise.get(m.mode),
        counters=Counters.of(m.counters),
        plan=PlanFigures.of(m.plan),
        peak_above_bytes=stopped,
        overhead_above_bytes=above if above is not None and above > 0 else None,
    )


def all_device_peaks_exact(modes: Sequence[ModeResult]) -> bool:
    """Every iteration's device peak read exactly (none an upper bound: ``device_peak_exact``)."""
    return all(it.device_peak_exact is not False for m in modes for it in m.iterations)


def _times(m: ModeResult) -> Spread:
    return spread([it.wall_time_s for it in m.iterations])


def _timed(m: ModeResult) -> bool:
    return m.ok and bool(m.iterations)


def _minus(value: int | None, base: int | None) -> int | None:
    return None if value is None or base is None else value - base


def median_cpu_share(m: ModeResult) -> float:
    """CPU time / wall time of ``m``'s iterations, the median (iterations of 0 s left out)."""
    return statistics.median(
        it.cpu_time_s / it.wall_time_s for it in m.iterations if it.wall_time_s > 0
    )


def _device_peaks(modes: Sequence[ModeResult]) -> dict[Mode, int]:
    """GPU cases: median device peak per mode (torch's ``max_memory_allocated``, JAX's
    ``peak_bytes_in_use`` with its floor raised); empty for CPU cases."""
    return {
        m.mode: int(statistics.median(it.peak_device_bytes for it in m.iterations))
        for m in modes
        if _timed(m) and all(it.peak_device_bytes is not None for it in m.iterations)
    }


def _median_phases(result: ModeResult) -> dict[str, float]:
    names = sorted({k for it in result.iterations for k in it.phases})
    return {
        k: statistics.median(it.phases[k] for it in result.iterations if k in it.phases)
        for k in names
    }
