"""Memory figures with their own noise: the spread of a mode's iteration peaks, an overhead
interval that holds both modes' spreads, and the savings those intervals allow.

Definitions (bytes; every iteration of every round of a mode counts):

* a mode's peak spread = its highest minus its lowest exact iteration peak;
* overhead of a mode = median peak minus the baseline's median peak (the figure
  :func:`ckptbench.results.summary.compute` has always printed), with the interval
  ``[lowest peak - highest baseline peak, highest peak - lowest baseline peak]``, which
  includes both modes' spreads; its noise is half that interval's width (``±X``);
* an overhead is *below noise* when its interval reaches zero, or when the overhead is no
  larger than its noise: it is then printed as ``< noise (±X MiB)``, never as a number,
  and no savings ratio is computed from it;
* memory savings interval = ``[normal low / checkpointed high, normal high / checkpointed
  low]``, only when neither overhead is below noise.

Before issue 28 the torch baseline's iterations moved by 40-120 MiB (the allocator; see
docs/results/torch-memory.md), which printed a negative overhead and a 1326x saving for a
strategy whose overhead was smaller than that motion.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from statistics import median

__all__ = ["Overhead", "PeakRange", "overhead", "peak_range", "savings_interval"]


@dataclass(frozen=True)
class PeakRange:
    """The exact iteration peaks of one mode: median, lowest, highest (bytes), count."""

    median: float
    low: int
    high: int
    n: int

    @property
    def spread(self) -> int:
        """Highest minus lowest iteration peak (bytes)."""
        return self.high - self.low

    def as_dict(self) -> dict[str, float]:
        return {"median": self.median, "low": self.low, "high": self.high, "n": self.n}


def peak_range(peaks: Sequence[int]) -> PeakRange | None:
    """The :class:`PeakRange` of a mode's iteration peaks; None for no peaks."""
    vals = [int(p) for p in peaks]
    if not vals:
        return None
    return PeakRange(median(vals), min(vals), max(vals), len(vals))


@dataclass(frozen=True)
class Overhead:
    """A mode's overhead over the baseline with the interval both spreads allow (bytes)."""

    value: float  # median peak minus the baseline's median peak
    low: float  # lowest peak minus the baseline's highest
    high: float  # highest peak minus the baseline's lowest

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
        }


def overhead(mode: PeakRange | None, baseline: PeakRange | None) -> Overhead | None:
    """``mode``'s :class:`Overhead` over ``baseline``; None when either has no peaks."""
    if mode is None or baseline is None:
        return None
    return Overhead(
        value=mode.median - baseline.median,
        low=mode.low - baseline.high,
        high=mode.high - baseline.low,
    )


def savings_interval(normal: Overhead | None, ckpt: Overhead | None) -> list[float] | None:
    """``[low, high]`` of normal's overhead over checkpointed's, both spreads included;
    None when either overhead is missing or below its noise (no ratio is honest then)."""
    if normal is None or ckpt is None or normal.below_noise or ckpt.below_noise:
        return None
    return [normal.low / ckpt.high, normal.high / ckpt.low]
