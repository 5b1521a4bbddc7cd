"""Statistics of before/after samples: a rank test with a minimum effect for times, a
tolerance with a floor for memory. Numbers only (stdlib; scipy is imported when a test runs).

**Memory** of a mode is its median exact per-iteration peak; for normal and checkpointed the
compared figure is the overhead over baseline (what differentiation adds), for baseline the
peak itself. A memory change counts when ``|after - before| > max(tolerance * before,
floor)``: peaks are stable to ~0.03 MiB from process to process (docs/architecture.md,
"Noise"), so a 5% tolerance with a 256 KiB floor (about 8 standard deviations) never fires
on noise yet sees a +20% regression of a 2 MiB overhead.

**Time** is compared per mode on the raw per-iteration wall times (warm-ups excluded) with a
two-sided Mann-Whitney U test (Mann & Whitney 1947) *and* a minimum effect (default 10%
change of the median). A change is significant only when both hold:

* when the samples are large enough for the rank test to reach ``alpha`` (0.05), it must:
  ``p <= alpha`` and ``|median ratio - 1| >= min_effect``;
* with fewer samples (3 vs 3 repeats: the smallest two-sided p is 2/C(6,3) = 0.1, and 3 vs 4
  gives 0.057) the rank test alone can never be significant, so we require instead that the
  two samples be *separated by the minimum effect*: every sample of the slower side at least
  ``min_effect`` above every sample of the faster side. With iteration noise of 10% CV this
  flags an A/A pair ~1% of the time and a 1.5x slowdown ~90% of the time (25% CV: ~4% and
  ~35%; more repeats help, see the tests).

The rank test treats iterations as independent. A whole process running slow (frequency
scaling, a noisy neighbour) shifts all of its iterations together; the minimum effect is the
guard against that, and pooling reruns (several files per cell) puts such shifts into the
samples. This is why ``check`` never gates on time unless asked.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "ALPHA",
    "MEMORY_FLOOR_BYTES",
    "MEMORY_TOLERANCE",
    "MIN_EFFECT",
    "MemoryDelta",
    "TimeTest",
    "memory_delta",
    "p_floor",
    "time_test",
]

ALPHA = 0.05
MIN_EFFECT = 0.10
MEMORY_TOLERANCE = 0.05
MEMORY_FLOOR_BYTES = 256 * 1024


def p_floor(n1: int, n2: int) -> float:
    """Smallest two-sided p-value an exact Mann-Whitney test can give for n1 vs n2."""
    return min(1.0, 2 / math.comb(n1 + n2, n1))


@dataclass(frozen=True)
class TimeTest:
    """Before/after iteration times of one mode: effect, rank test and the verdict."""

    before_median_s: float
    after_median_s: float
    change: float  # after/before - 1 (medians)
    p_value: float
    p_floor: float  # the smallest p these sample sizes allow
    n_before: int
    n_after: int
    significant: bool
    rule: str  # which criterion decided (see the module docstring)
    processes_before: int = 1  # worker processes whose iterations were pooled
    processes_after: int = 1

    @property
    def verdict(self) -> str:
        if not self.significant:
            return "no change"
        return "slower" if self.change > 0 else "faster"


def time_test(
    before: Sequence[float],
    after: Sequence[float],
    *,
    min_effect: float = MIN_EFFECT,
    alpha: float = ALPHA,
) -> TimeTest | None:
    """Significance of a change in iteration times (None with fewer than 2 samples a side)."""
    a = [float(x) for x in before]
    b = [float(x) for x in after]
    if len(a) < 2 or len(b) < 2:
        return None
    from scipy.stats import mannwhitneyu

    ma, mb = statistics.median(a), statistics.median(b)
    change = mb / ma - 1 if ma > 0 else math.inf
    p = float(mannwhitneyu(a, b, alternative="two-sided").pvalue)
    floor = p_floor(len(a), len(b))
    big_enough = abs(change) >= min_effect
    if floor <= alpha:
        significant = p <= alpha and big_enough
        rule = f"rank test p<={alpha:g} and |change|>={min_effect:.0%}"
    else:
        low, high = (a, b) if change > 0 else (b, a)
        significant = big_enough and min(high) >= max(low) * (1 + min_effect)
        rule = f"n too small for p<={alpha:g} (min p {floor:.3g}): separated by >={min_effect:.0%}"
    return TimeTest(ma, mb, change, p, floor, len(a), len(b), significant, rule)


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


def memory_delta(
    before: int,
    after: int,
    *,
    tolerance: float = MEMORY_TOLERANCE,
    floor_bytes: int = MEMORY_FLOOR_BYTES,
) -> MemoryDelta:
    return MemoryDelta(int(before), int(after), tolerance, int(floor_bytes))
