"""Memory figures with their own noise: the spread of a mode's iteration peaks, an overhead
interval that holds both modes' spreads and where the next invocation's overhead lands, and
the savings those intervals allow.

Definitions (bytes; every measured iteration of every round of a mode counts):

* a mode's peak spread = its highest minus its lowest exact iteration peak;
* overhead of a mode = median peak minus the baseline's median peak (the figure
  :func:`ckptbench.results.summary.compute` has always printed);
* its interval is the union of two: the *spread* interval ``[lowest peak - highest
  baseline peak, highest peak - lowest baseline peak]``, which holds both modes' spreads,
  and the *rerun* interval, where another invocation of the same cell, with as many
  iterations, puts its overhead 95% of the time: ``value ± t(0.975, df) * sqrt(2 * pi/2 *
  (s_mode**2 / n_mode + s_base**2 / n_base))`` (``s``: the standard deviation of a mode's
  iteration peaks, ``n`` their count, pi/2 the variance of a median over a mean's, df by
  Welch-Satterthwaite), with, in quadrature, the offset between two invocations that no
  run's iterations see (:data:`DRIFT_HALFWIDTH_BYTES`, 0.28 MiB: a single-round overhead of
  +0.301 [0.284, 0.318] MiB had excluded the 0.324 and 0.348 MiB of the cell's two
  previous invocations). Every iteration counts as one sample, whichever worker ran it, as
  pyperf counts the values of all its processes: on torch Revolve's checkpointed peaks
  move by as much inside one worker as between workers (docs/results/torch-memory.md), so
  a cell measured in two workers cannot bracket the next invocation with its spread alone.
  Where workers differ (torch's 64 MiB plan: a worker can stay on one level) this
  understates the noise; more rounds help there;
* its noise is half the interval's width (``±X``); an overhead is *below noise* when its
  interval reaches zero, or when the overhead is no larger than its noise: it is then
  printed as ``< noise (±X MiB)``, never as a number, and no savings ratio is computed
  from it;
* memory savings interval = ``[normal low / checkpointed high, normal high / checkpointed
  low]``, only when neither overhead is below noise.

The two levels (iterations inside an invocation, invocations of a cell) are Kalibera and
Jones's ("Rigorous Benchmarking in Reasonable Time", ISMM 2013); the degrees of freedom
are Welch's ("The generalization of 'Student's' problem when several different population
variances are involved", Biometrika 34, 1947).

Before issue 28 the torch baseline's iterations moved by 40-120 MiB (the allocator; see
docs/results/torch-memory.md), which printed a negative overhead and a 1326x saving for a
strategy whose overhead was smaller than that motion.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist, median, stdev

from ckptbench.analysis.intervals import INVOCATION_SD_OVERHEAD_BYTES, welch_half_width

__all__ = [
    "CONFIDENCE",
    "DRIFT_HALFWIDTH_BYTES",
    "Overhead",
    "PeakRange",
    "overhead",
    "peak_range",
    "rerun_halfwidth",
    "savings_interval",
]

#: The rerun interval's confidence (every interval ckptbench prints is a 95% one).
CONFIDENCE = 0.95
#: Variance of a sample median over that of a sample mean (normal samples, large n).
MEDIAN_VARIANCE = math.pi / 2
#: Where another invocation's offset puts its overhead beside this one's, 95% of the time:
#: each invocation sits INVOCATION_SD_OVERHEAD_BYTES (measured) off, which no run's own
#: iterations see; z * sqrt(2) * sd, about 0.28 MiB.
DRIFT_HALFWIDTH_BYTES = (
    NormalDist().inv_cdf(0.5 + CONFIDENCE / 2) * math.sqrt(2.0) * INVOCATION_SD_OVERHEAD_BYTES
)


@dataclass(frozen=True)
class PeakRange:
    """The exact iteration peaks of one mode: median, lowest, highest (bytes), count, and
    their standard deviation (bytes; 0 for one peak)."""

    median: float
    low: int
    high: int
    n: int
    sd: float = 0.0

    @property
    def spread(self) -> int:
        """Highest minus lowest iteration peak (bytes)."""
        return self.high - self.low

    def as_dict(self) -> dict[str, float]:
        return {
            "median": self.median,
            "low": self.low,
            "high": self.high,
            "n": self.n,
            "sd": self.sd,
        }


def peak_range(peaks: Sequence[int]) -> PeakRange | None:
    """The :class:`PeakRange` of a mode's iteration peaks; None for no peaks."""
    vals = [int(p) for p in peaks]
    if not vals:
        return None
    sd = stdev(vals) if len(vals) > 1 else 0.0
    return PeakRange(median(vals), min(vals), max(vals), len(vals), sd)


@dataclass(frozen=True)
class Overhead:
    """A mode's overhead over the baseline with its interval (bytes): the union of the
    spread interval and the rerun interval (see the module's docstring)."""

    value: float  # median peak minus the baseline's median peak
    low: float  # min(lowest peak minus the baseline's highest, value - rerun)
    high: float  # max(highest peak minus the baseline's lowest, value + rerun)
    rerun: float = 0.0  # half-width of the rerun interval (0: fewer than two peaks)

    @property
    def noise(self) -> float:
        """Half the interval's width: the ``±X`` of ``< noise (±X MiB)``."""
        return (self.high - self.low) / 2

    @property
    def below_noise(self) -> bool:
        """The interval reaches zero, or the overhead is no larger than its noise."""
        return self.low <= 0 or self.value <= self.noise

    def as_dict(self) -> dict[str, float | bool]:
        return {
            "value": self.value,
            "low": self.low,
            "high": self.high,
            "noise": self.noise,
            "below_noise": self.below_noise,
            "rerun": self.rerun,
        }


def rerun_halfwidth(mode: PeakRange, baseline: PeakRange, confidence: float = CONFIDENCE) -> float:
    """Half-width of the interval around ``mode``'s overhead in which another invocation
    with as many iterations puts its overhead (``confidence``, default 95%): ``t * sqrt(2 *
    pi/2 * (s_m**2 / n_m + s_b**2 / n_b))``, Welch-Satterthwaite degrees of freedom. A mode
    with fewer than two peaks adds nothing (its spread is unknown); 0 when neither has two."""
    parts = [(r.sd**2 / r.n, r.n - 1) for r in (mode, baseline) if r.n > 1 and r.sd > 0]
    return welch_half_width(parts, confidence) * math.sqrt(2 * MEDIAN_VARIANCE)


def overhead(mode: PeakRange | None, baseline: PeakRange | None) -> Overhead | None:
    """``mode``'s :class:`Overhead` over ``baseline``; None when either has no peaks."""
    if mode is None or baseline is None:
        return None
    value = mode.median - baseline.median
    rerun = math.hypot(rerun_halfwidth(mode, baseline), DRIFT_HALFWIDTH_BYTES)
    return Overhead(
        value=value,
        low=min(mode.low - baseline.high, value - rerun),
        high=max(mode.high - baseline.low, value + rerun),
        rerun=rerun,
    )


def savings_interval(normal: Overhead | None, ckpt: Overhead | None) -> list[float] | None:
    """``[low, high]`` of normal's overhead over checkpointed's, both spreads included;
    None when either overhead is missing or below its noise (no ratio is honest then)."""
    if normal is None or ckpt is None or normal.below_noise or ckpt.below_noise:
        return None
    return [normal.low / ckpt.high, normal.high / ckpt.low]
