"""Statistics of before/after samples: the run's ratio estimate with its interval for times,
a tolerance with a floor for memory. Numbers only (scipy is imported when an interval is).

**Memory** of a mode is its median exact per-iteration peak; for normal and checkpointed the
compared figure is the overhead over baseline (what differentiation adds), for baseline the
peak itself. A memory change counts when ``|after - before| > max(tolerance * before,
floor)``: peaks are stable to ~0.03 MiB from process to process (docs/architecture.md,
"Noise"), so a 5% tolerance with a 256 KiB floor (about 8 standard deviations) never fires
on noise yet sees a +20% regression of a 2 MiB overhead.

**Time** is judged per mode: the change is the ratio after / before of one mode's
iteration times with its 95% interval, and it counts only when the whole interval lies
beyond the tolerance -- above ``1 + tolerance`` (slower) or below ``1 / (1 + tolerance)``
(faster). The replicates are worker processes (every round of every pooled file):

* with two processes or more on either side (2 vs 2, 2 vs 1, 1 vs 2, n vs m): each
  process's median iteration, on the log scale, outlier processes set aside by the rounds'
  rule (from four processes a side); the ratio is that of the sides' geometric means of
  those medians (the two times :class:`TimeChange` holds, divided), with Welch's t interval
  (Welch, Biometrika 34, 1947) where both sides have two processes or more, and Student's
  two-sample t (pooled variance, n + m - 2 degrees of freedom) where one side has one, so a
  whole process running slow is in the spread. Until 2026-11-30 a side with one process
  pooled every iteration of both sides, so adding a second invocation to one side changed
  nothing and a second to the other switched the method;
* with one process a side (1 vs 1): the run's one-round method on each side's iterations:
  the Hodges-Lehmann ratio (the median of every after/before iteration pair's ratio, which
  can differ from the sides' median iterations divided) with Bauer's rank interval, or
  Student's t on the log iteration times where the iterations are too few for it (3 vs 3).

Both are widened by the between-invocation spread of each side (two invocations), in
quadrature. An A/A rerun then stays "no change", and a 1.5x slowdown is "slower" at a
25% tolerance once the interval clears 1.25; one process a side with 3 iterations rarely
clears it, so ``check`` says how many processes each side had.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ckptbench.analysis import intervals
from ckptbench.analysis.interval_methods import student_interval

__all__ = [
    "MEMORY_FLOOR_BYTES",
    "MEMORY_TOLERANCE",
    "MIN_EFFECT",
    "MemoryDelta",
    "TimeChange",
    "figure_apart",
    "memory_delta",
    "percent_text",
    "time_change",
]

MIN_EFFECT = 0.10
MEMORY_TOLERANCE = 0.05
MEMORY_FLOOR_BYTES = 256 * 1024


@dataclass(frozen=True)
class TimeChange:
    """One mode's time before and after: the ratio after/before with its 95% interval, and
    the verdict at ``tolerance``. The times are what the ratio divides where a side has two
    worker processes or more (:attr:`by_process`): the geometric mean of the kept processes'
    median iterations, so after / before is the ratio; with one process a side, each side's
    median iteration, and the ratio is the median of the iteration pairs' ratios (which can
    differ from the two divided)."""

    before_median_s: float
    after_median_s: float
    ratio: float  # after / before (the estimate)
    low: float
    high: float
    tolerance: float
    method: str
    n_before: int  # iterations
    n_after: int
    processes_before: int = 1  # worker processes (rounds of every pooled file)
    processes_after: int = 1

    @property
    def by_process(self) -> bool:
        """Whether the processes were the replicates (two or more on either side), not the
        iterations (one process a side)."""
        return max(self.processes_before, self.processes_after) >= 2

    @property
    def change(self) -> float:
        return self.ratio - 1.0

    @property
    def verdict(self) -> str:
        if math.isinf(self.high):  # no interval from the data: one iteration a side
            return "cannot tell"
        if self.low > 1.0 + self.tolerance:
            return "slower"
        if self.high < 1.0 / (1.0 + self.tolerance):
            return "faster"
        return "no change"

    @property
    def significant(self) -> bool:
        return self.verdict in ("slower", "faster")


def _processes(samples: Sequence[Sequence[float]], side: str) -> list[list[float]]:
    out = [[float(x) for x in p] for p in samples if len(p)]
    for p in out:
        if not all(math.isfinite(x) and x > 0 for x in p):
            raise ValueError(f"{side}: times must be positive finite numbers")
    return out


def _by_process(b: list[list[float]], a: list[list[float]]):
    """The ratio of the sides' geometric means of their kept processes' median iterations,
    its interval (Welch's t with two processes or more a side, else Student's pooled t),
    the method's words and the two geometric means (module doc)."""
    logs = []
    for side in (b, a):
        med = [math.log(statistics.median(p)) for p in side]
        aside = intervals.outlier_rounds(med)
        logs.append([v for i, v in enumerate(med) if i not in aside])
    lb, la = logs
    mb, ma = statistics.fmean(lb), statistics.fmean(la)
    ratio = math.exp(ma - mb)
    if len(lb) >= 2 and len(la) >= 2:
        half = intervals.welch_half_width(
            [(statistics.variance(v) / len(v), len(v) - 1) for v in logs], intervals.CONFIDENCE
        )
        lo, hi = (math.exp(ma - mb - half), math.exp(ma - mb + half)) if half else (ratio, ratio)
        how = "Welch t"
    else:
        student = student_interval(np.exp(la), np.exp(lb), intervals.CONFIDENCE)
        lo, hi = (min(ratio, student[0]), max(ratio, student[1])) if student else (ratio, ratio)
        how = "Student's t (pooled variance: one side has one process)"
    method = (
        f"{how} over processes ({len(lb)} vs {len(la)} kept) on log median times: "
        "geometric means divided"
    )
    return ratio, lo, hi, method, (math.exp(mb), math.exp(ma))


def time_change(
    before: Sequence[Sequence[float]],
    after: Sequence[Sequence[float]],
    *,
    tolerance: float = MIN_EFFECT,
    invocation_sd: float = intervals.INVOCATION_SD_TIME,
) -> TimeChange | None:
    """The change of one mode's time, ``before`` and ``after`` given as per-process lists of
    iteration times (module doc). None when a side has no iteration."""
    b, a = _processes(before, "before"), _processes(after, "after")
    if not b or not a:
        return None
    flat_b, flat_a = [x for p in b for x in p], [x for p in a for x in p]
    both = math.sqrt(2.0) * invocation_sd  # two invocations, one offset each
    if len(b) >= 2 or len(a) >= 2:
        ratio, lo, hi, method, typical = _by_process(b, a)
        lo, hi = intervals.widen(lo, hi, ratio, both, intervals.CONFIDENCE)
    else:
        est = intervals.ratio_estimate([(flat_a, flat_b)], invocation_sd=both)
        ratio, lo, hi, method = est.value, est.low, est.high, est.method
        if not est.interval_from_data:  # one iteration a side: it cannot tell any change
            lo, hi = 0.0, math.inf
        typical = statistics.median(flat_b), statistics.median(flat_a)
    return TimeChange(
        before_median_s=typical[0],
        after_median_s=typical[1],
        ratio=ratio,
        low=lo,
        high=hi,
        tolerance=tolerance,
        method=method,
        n_before=len(flat_b),
        n_after=len(flat_a),
        processes_before=len(b),
        processes_after=len(a),
    )


@dataclass(frozen=True)
class MemoryDelta:
    """Before/after memory of one mode (overhead over baseline, or the baseline's peak)."""

    before_bytes: int
    after_bytes: int
    tolerance: float
    floor_bytes: int

    @property
    def delta_bytes(self) -> int:
        return self.after_bytes - self.before_bytes

    @property
    def delta_rel(self) -> float | None:
        return self.delta_bytes / self.before_bytes if self.before_bytes > 0 else None

    @property
    def limit_bytes(self) -> float:
        """Largest change counted as noise: max(tolerance * before, floor)."""
        return max(self.tolerance * abs(self.before_bytes), self.floor_bytes)

    @property
    def changed(self) -> bool:
        return abs(self.delta_bytes) > self.limit_bytes

    @property
    def regressed(self) -> bool:
        return self.delta_bytes > self.limit_bytes


def percent_text(fraction: float) -> str:
    """A tolerance or threshold as given: '5%', '2.5%', '12.5%' (up to four significant
    digits; a limit of 2.5% never reads '2%')."""
    return f"{fraction * 100:.4g}%"


def memory_delta(
    before: int,
    after: int,
    *,
    tolerance: float = MEMORY_TOLERANCE,
    floor_bytes: int = MEMORY_FLOOR_BYTES,
) -> MemoryDelta:
    return MemoryDelta(int(before), int(after), tolerance, int(floor_bytes))


def figure_apart(v: float, limit: float, style: str = "f") -> str:
    """``v`` to two decimals (``style`` "e": two in exponent form), or as many more as keep
    it apart from ``limit``: a gate line must never print a missed threshold as met (1.4646
    against 1.46 read '1.46x, need <= 1.46x')."""
    d = 2
    while d < 12 and v != limit and float(f"{v:.{d}{style}}") == float(f"{limit:.{d}{style}}"):
        d += 1
    return f"{v:.{d}{style}}"
