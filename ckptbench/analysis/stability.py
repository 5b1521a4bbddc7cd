"""Is a run's time stable enough to quote? pyperf-style noise verdicts.

Per mode the coefficient of variation of its iteration times, the width of the slowdown's
95% interval (``ckptbench.analysis.intervals``), the CPU share of its workers, the cores other
processes kept busy meanwhile (``ckptbench.measure.noise``) and the spread of its exact peaks across
rounds; each threshold below is justified by measurements on this project's 2-core VM. Two
checks say whether the clock itself can be trusted: an iteration timed at 0 s, and a
measuring thread that used more CPU time than the wall time that passed (impossible for one
thread: the clock ran slow).
Numbers only: nothing here prints (docs/architecture.md, "analysis").
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum

from ckptbench.analysis.intervals import Estimate, IntervalError, Round
from ckptbench.analysis.stats import percent_text
from ckptbench.results.units import interval_text

__all__ = [
    "CPU_SHARE_MIN",
    "CV_MAX",
    "HALF_WIDTH_MAX",
    "OTHER_BUSY_CORES_MAX",
    "PEAK_SPREAD_FLOOR_BYTES",
    "PEAK_SPREAD_REL",
    "THREAD_SHARE_MAX",
    "ModeNoise",
    "Verdict",
    "VerdictKind",
    "clock_verdicts",
    "coefficient_of_variation",
    "mode_noise",
    "noise_verdicts",
    "thread_share",
    "time_unstable",
]

#: Coefficient of variation of a mode's iteration times (all rounds pooled, the way pyperf
#: computes it) above which its times are unstable. pyperf warns at 10%. Measured on this
#: 2-core VM, quiet (load 0.2-0.9), lstm 300 steps x 16 snaps, 6 fresh runs x 5 iterations:
#: within one process 0.2-5.9% (baseline), 1.8-9.3% (normal), 0.8-9.4% (checkpointed);
#: pooled over the six processes 2.9%, 6.0%, 6.3%. The main job (1000 steps x 31 snaps, 3
#: fresh runs x 5 iterations, load ~1): within one process 2.0-9.4%, pooled 4.4-6.1%. 10%
#: passes every quiet run and catches a neighbour that takes a core for part of a run.
CV_MAX = 0.10
#: A 95% interval wider than +/-5% of its estimate is too wide to quote (issue 9).
HALF_WIDTH_MAX = 0.05
#: Below this CPU share (CPU time / wall time) the worker was descheduled (analysis.py).
CPU_SHARE_MIN = 0.9
#: The measuring thread's CPU time over the wall time of its iterations (median) above
#: which the clock they were timed with cannot be trusted. One thread cannot use more CPU
#: time than passes, and the worker reads its CPU time inside the wall window, so an honest
#: run stays at or below 1 whatever ``--threads``; the margin is for clock granularity. The
#: process's CPU share cannot be bounded this way: Linux updates a running thread's CPU time
#: at its scheduler tick, so an iteration of 0.3 ms with two BLAS threads read 7.9x and 10.1x
#: here (autograd, --threads 2), honestly. A plug-in dividing ``time.perf_counter`` by 100
#: reads about 100x.
THREAD_SHARE_MAX = 1.1
#: Other processes' CPU use, in cores, above which a run shared its machine: a quarter of a
#: core is 25% of a single-threaded worker's time if the scheduler gave it our core.
OTHER_BUSY_CORES_MAX = 0.25
#: A mode's median peak may differ across rounds by max(this, PEAK_SPREAD_REL x peak).
#: Measured: the exact peak repeats to 0.02-0.05 MiB within a process and to 0.2 MiB across
#: six fresh processes (lstm 300x16: 45.3-45.4, 178.6-178.8, 51.2-51.3 MiB). The main job
#: (1000x31, 3 processes): per-process medians within 0.08 (baseline), 0.52 (normal, 487
#: MiB) and 0.15 MiB (checkpointed). The limit, max(1 MiB, 0.5% of the peak), is about
#: twice to five times the largest spread seen.
PEAK_SPREAD_FLOOR_BYTES = 1 << 20
PEAK_SPREAD_REL = 0.005

# ----------------------------------------------------------------------------- noise


def coefficient_of_variation(values: Sequence[float]) -> float:
    """Sample standard deviation / mean (0 for a single value)."""
    vals = [float(v) for v in values]
    if not vals:
        raise IntervalError("no samples")
    mean = statistics.fmean(vals)
    if len(vals) < 2 or mean == 0:
        return 0.0
    return statistics.stdev(vals) / mean


@dataclass(frozen=True)
class ModeNoise:
    """Spread of one mode over rounds: CV of all iterations pooled (pyperf's figure), CV of
    the per-round medians (process-to-process), and the spread of per-round median peaks."""

    mode: str
    cv: float
    cv_rounds: float
    peak_spread_bytes: int | None
    n_rounds: int
    n_samples: int


def mode_noise(
    times: Sequence[Round], peaks: Sequence[Round] | None = None
) -> dict[str, ModeNoise]:
    """:class:`ModeNoise` for every mode present in all rounds."""
    if not times:
        raise IntervalError("no rounds")
    modes = [m for m in times[0] if all(m in rd for rd in times)]
    out = {}
    for m in modes:
        pooled = [float(v) for rd in times for v in rd[m]]
        medians = [statistics.median(rd[m]) for rd in times]
        spread = None
        if peaks is not None and all(m in rd and rd[m] for rd in peaks):
            pk = [statistics.median(rd[m]) for rd in peaks]
            spread = int(max(pk) - min(pk))
        out[m] = ModeNoise(
            mode=m,
            cv=coefficient_of_variation(pooled),
            cv_rounds=coefficient_of_variation(medians),
            peak_spread_bytes=spread,
            n_rounds=len(times),
            n_samples=len(pooled),
        )
    return out


class VerdictKind(Enum):
    """Why a figure is unstable."""

    HIGH_CV = "high-cv"
    WIDE_INTERVAL = "wide-interval"
    LOW_CPU_SHARE = "low-cpu-share"
    OTHER_PROCESSES = "other-processes"
    PEAK_SPREAD = "peak-spread"  # memory, not time
    ZERO_TIME = "zero-time"  # iterations timed at 0 s: the clock did not move
    CLOCK_SLOW = "clock-slow"  # the measuring thread's CPU time exceeds the wall time


@dataclass(frozen=True)
class Verdict:
    """One reason a figure is unstable, with the measured value and the threshold."""

    kind: VerdictKind
    mode: str | None
    value: float
    threshold: float
    message: str

    @property
    def about_time(self) -> bool:
        return self.kind is not VerdictKind.PEAK_SPREAD

    def as_dict(self) -> dict[str, object]:
        return {
            "kind": self.kind.value,
            "mode": self.mode,
            "value": self.value,
            "threshold": self.threshold,
            "message": self.message,
        }


def noise_verdicts(
    times: Sequence[Round],
    *,
    peaks: Sequence[Round] | None = None,
    slowdown: Estimate | None = None,
    cpu_share: Mapping[str, float] | None = None,
    other_busy_cores: Mapping[str, float] | None = None,
    thread_shares: Mapping[str, float] | None = None,
    cv_max: float = CV_MAX,
    half_width_max: float = HALF_WIDTH_MAX,
    cpu_share_min: float = CPU_SHARE_MIN,
    other_busy_max: float = OTHER_BUSY_CORES_MAX,
    peak_floor_bytes: int = PEAK_SPREAD_FLOOR_BYTES,
    peak_rel: float = PEAK_SPREAD_REL,
) -> tuple[Verdict, ...]:
    """Reasons the time (and memory) figures of a run are unstable; empty when stable.

    ``times``/``peaks``: rounds of per-iteration wall times / exact peaks per mode.
    ``cpu_share``: per mode, the lowest (or median) CPU time / wall time of its iterations.
    ``other_busy_cores``: per mode, the largest :attr:`measure.noise.BusyReading.other_cores`
    seen while its workers ran. ``thread_shares``: per mode, :func:`thread_share` of its
    iterations (:func:`clock_verdicts`). Thresholds default to the module constants
    (documented there).
    """
    out: list[Verdict] = list(clock_verdicts(times, thread_shares))
    for m, nz in mode_noise(times, peaks).items():
        if nz.cv > cv_max:
            out.append(
                Verdict(
                    VerdictKind.HIGH_CV,
                    m,
                    nz.cv,
                    cv_max,
                    f"{m}: iteration times vary by {nz.cv:.1%} (CV > {percent_text(cv_max)})",
                )
            )
        if nz.peak_spread_bytes is not None and peaks is not None:
            peak = statistics.median(float(v) for rd in peaks for v in rd[m])
            limit = max(float(peak_floor_bytes), peak_rel * peak)
            if nz.peak_spread_bytes > limit:
                out.append(
                    Verdict(
                        VerdictKind.PEAK_SPREAD,
                        m,
                        float(nz.peak_spread_bytes),
                        limit,
                        f"{m}: peaks differ across rounds by "
                        f"{nz.peak_spread_bytes / 2**20:.2f} MiB (> {limit / 2**20:.2f} MiB)",
                    )
                )
    if slowdown is not None and slowdown.half_width_rel > half_width_max:
        out.append(
            Verdict(
                VerdictKind.WIDE_INTERVAL,
                None,
                slowdown.half_width_rel,
                half_width_max,
                "slowdown interval ["
                + ", ".join(interval_text(slowdown.low, slowdown.high, 2, center=slowdown.value))
                + "] "
                "is wider than "
                f"+/-{percent_text(half_width_max)} of {slowdown.value:.2f}",
            )
        )
    for m, share in sorted((cpu_share or {}).items()):
        if share < cpu_share_min:
            out.append(
                Verdict(
                    VerdictKind.LOW_CPU_SHARE,
                    m,
                    share,
                    cpu_share_min,
                    f"{m}: the worker got {share:.0%} of a core (< {cpu_share_min:.0%})",
                )
            )
    for m, cores in sorted((other_busy_cores or {}).items()):
        if cores > other_busy_max:
            out.append(
                Verdict(
                    VerdictKind.OTHER_PROCESSES,
                    m,
                    cores,
                    other_busy_max,
                    f"{m}: other processes used {cores:.2f} cores while it ran "
                    f"(> {other_busy_max:.2f})",
                )
            )
    return tuple(out)


def thread_share(pairs: Sequence[tuple[float | None, float]]) -> float | None:
    """The median of (measuring thread's CPU time / wall time) over ``pairs`` of an
    iteration's two times; None when no iteration recorded both (older results)."""
    shares = [cpu / wall for cpu, wall in pairs if cpu is not None and wall > 0]
    return statistics.median(shares) if shares else None


def clock_verdicts(
    times: Sequence[Round],
    thread_shares: Mapping[str, float] | None = None,
    thread_share_max: float = THREAD_SHARE_MAX,
) -> tuple[Verdict, ...]:
    """The reasons the clock a mode was timed with cannot be trusted: iterations timed at
    0 s or less (``value``: their fraction), and a measuring thread that used more CPU time
    than the wall time that passed (``value``: :func:`thread_share`)."""
    out: list[Verdict] = []
    modes = dict.fromkeys(m for rd in times for m in rd)
    for m in modes:
        walls = [float(v) for rd in times for v in rd.get(m, ())]
        still = sum(1 for v in walls if v <= 0)
        if still:
            out.append(
                Verdict(
                    VerdictKind.ZERO_TIME,
                    m,
                    still / len(walls),
                    0.0,
                    f"{m}: {still} of {len(walls)} iterations timed at 0 s: the clock did not "
                    "move, so its times cannot be trusted",
                )
            )
    for m, share in sorted((thread_shares or {}).items()):
        if share > thread_share_max:
            out.append(
                Verdict(
                    VerdictKind.CLOCK_SLOW,
                    m,
                    share,
                    thread_share_max,
                    f"{m}: its measuring thread used {share:.2f}x the wall time in CPU time "
                    f"(one thread cannot exceed 1x): the clock ran slow, so its times cannot "
                    "be trusted",
                )
            )
    return tuple(out)


def time_unstable(verdicts: Sequence[Verdict]) -> bool:
    """True when any verdict concerns time (mark time figures unstable in tables)."""
    return any(v.about_time for v in verdicts)
