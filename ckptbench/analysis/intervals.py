"""Estimates with 95% intervals from interleaved rounds, and the noise verdicts on them.

Input: a run measured in rounds. Each round ran every mode in its own fresh worker process
and kept the raw per-iteration times (and exact peaks) of each mode, so a round is a mapping
``mode name -> per-iteration values``. Everything here is computed from those raw values.

**Slowdown** (checkpointed / normal time). Times are modelled on the log scale as

    log t[r, mode, i] = mu[mode] + a[r] + b[r, mode] + e[r, mode, i]

with a[r] a drift shared by the modes of round r (a slow minute on a shared machine),
b[r, mode] a per-process effect (memory layout, frequency, neighbours while that process
ran) and e an iteration's noise. The log slowdown is mu[checkpointed] - mu[normal].

* Each round's own ratio is the Hodges-Lehmann estimate (Hodges & Lehmann, Ann. Math.
  Stat. 34, 1963) of its shift on the log scale: the median of the round's pairwise
  ratios t[r, ckpt, i] / t[r, normal, j]. Pairing inside a round cancels a[r]; the median
  ignores an outlier iteration; a noiseless 1.30 comes back as exactly 1.30.
* **Several rounds** (the default): the rounds are the replicates, because b[r, mode]
  (one process's median time moves by several percent between fresh processes while its
  iterations agree to 2-6%) is the larger error and only rounds see it. A round that
  the others call an outlier (externally studentized residual beyond its Bonferroni t
  bound, Cook & Weisberg 1982: a neighbour that took the core for one process) is set
  aside and named in ``method`` and ``outlier_rounds``: at most
  a third of the rounds, and only from 4 rounds on. The estimate is the geometric mean of
  the kept rounds' ratios and the interval the Student t interval of that mean
  (n_kept - 1 degrees of freedom) -- the interval of the *estimate*, as pyperf quotes a
  mean with its spread over processes. The former interval, the hull of this t interval
  and Bauer's rank interval of the pooled median, was the range of the ratios with six
  rounds of one iteration: one slow round set a bound (issue 16: half-widths up to 18.5%
  while repeated runs agreed to +/-1%).
* **One round**: the Hodges-Lehmann ratio with Bauer's rank interval (Bauer, JASA 67,
  1972: the Mann-Whitney test inverted; endpoints are order statistics of the pairwise
  ratios), exact for iteration noise but blind to b. Where the iterations are too few for
  it (the whole range of 3 against 3 covers 90%, of 9 against 1 80%), Student's two-sample
  t interval on the log times (pooled variance, n + m - 2 degrees of freedom); until
  2026-11-29 the range itself, called 95%. One iteration a side measures no spread: the
  estimate then has no interval from the data (``interval_from_data`` False; the figures
  print no interval, a gate cannot call it slower, and pooling leaves it out).
* Both are widened, in quadrature on the log scale, by :data:`INVOCATION_SD_TIME`, the
  spread between invocations that no run sees in its own rounds (measured; see there).
  A bootstrap over 3-6 rounds was rejected: three rounds have ten distinct resamples, and
  percentile intervals from so few units cover well below their nominal level (Efron &
  Tibshirani 1993, ch. 13). The methods here are deterministic: no random numbers at all.
  tests/test_intervals.py checks coverage (>= 90%) and width (at most about twice the
  spread of repeated estimates) on simulated runs with per-process noise, per-invocation
  offsets and outlier rounds.

**Memory savings** ((normal - baseline) / (checkpointed - baseline) peak). Per round, from
the median peak of each mode in that round; the estimate is the median over rounds; the
interval is a t interval over rounds on log savings (rounds are the replicates, as for
time). With a single round it is the range that round's iterations allow (savings rise with
the normal and baseline peaks and fall with the checkpointed one): a worst case, not a 95%
interval, and said so in ``method``. Peaks repeat to well under 1 MiB across processes, so
the interval is narrow.

**Noise verdicts**, like pyperf's warnings: see :func:`noise_verdicts` for the checks and
the measurements behind their thresholds. See ``docs/architecture.md`` for where rounds are
run (runner) and where these figures are stored (the result's summary).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ckptbench.analysis.interval_methods import (
    rank_interval,
    student_interval,
    t_interval,
    welch_half_width,
)

__all__ = [
    "CONFIDENCE",
    "INVOCATION_SD_OVERHEAD_BYTES",
    "INVOCATION_SD_TIME",
    "OUTLIER_ALPHA",
    "Estimate",
    "IntervalError",
    "differs",
    "outlier_rounds",
    "ratio_estimate",
    "savings_estimate",
    "slowdown_estimate",
    "t_interval",
    "welch_half_width",
    "widen",
]

CONFIDENCE = 0.95
#: Standard deviation of the slowdown between invocations that no run can see in its own
#: rounds (log scale, i.e. relative): the issue-16 measurement, four default runs of the
#: main job in a row on a quiet machine, gave 1.220, 1.229, 1.214, 1.218 (sd 0.53%; that sd
#: includes each run's own sampling error, so it bounds this one from above).
INVOCATION_SD_TIME = 0.005
#: Standard deviation of a mode's overhead over the baseline between invocations that no
#: run sees in its rounds (bytes). Measured (issue 16): the main job's checkpointed overhead
#: was 5.61-5.65 MiB in some invocations and 5.79-5.85 MiB in others on one machine (a
#: 0.2 MiB gap); lstm 300 x 16, three invocations of an installed package: 4.94, 5.02,
#: 4.94 MiB, and a source checkout once ``runner.compile_package`` gave it bytecode: 5.07
#: MiB (without bytecode it was 4.48 MiB: the gap that fix removes). 0.1 MiB: half the
#: largest gap between invocations.
INVOCATION_SD_OVERHEAD_BYTES = 0.1 * 2**20
#: Chance that a run without outlier rounds sets one aside (:func:`outlier_rounds`).
OUTLIER_ALPHA = 0.05
#: Smallest spread of the other rounds' log ratios the outlier test assumes (0.5%), so
#: rounds that agree to a few hundredths of a percent do not make a 1% round an outlier.
OUTLIER_SCALE_FLOOR = 0.005

Round = Mapping[str, Sequence[float]]


class IntervalError(ValueError):
    """The samples cannot give the requested estimate (missing mode, empty, non-positive)."""


@dataclass(frozen=True)
class Estimate:
    """A ratio with its interval: ``low <= value <= high``."""

    value: float
    low: float
    high: float
    method: str
    n_rounds: int
    n_samples: int  # raw values used (iterations of both modes, all rounds)
    outlier_rounds: tuple[int, ...] = ()  # 1-based rounds set aside as outliers
    #: each round's own ratio, set aside or not (time: its Hodges-Lehmann ratio, the one the
    #: estimate averages)
    per_round: tuple[float, ...] = ()
    #: False where the data measured no spread (one round of one iteration a side): the
    #: interval is then the between-invocation sd alone, not a 95% interval
    interval_from_data: bool = True

    @property
    def half_width_rel(self) -> float:
        """Largest distance from the estimate to an end of the interval, relative to it."""
        return max(self.high / self.value - 1.0, 1.0 - self.low / self.value)

    def contains(self, x: float) -> bool:
        return self.low <= x <= self.high

    def as_list(self) -> list[float]:
        """``[low, high]``, for the JSON summary (``slowdown_ci``, ``memory_savings_ci``)."""
        return [self.low, self.high]


# ------------------------------------------------------------------- slowdown (time ratio)


def _positive(values: Sequence[float], what: str) -> np.ndarray:
    arr = np.asarray([float(v) for v in values], dtype=float)
    if arr.size == 0:
        raise IntervalError(f"{what}: no samples")
    if not np.all(np.isfinite(arr)) or np.any(arr <= 0):
        raise IntervalError(f"{what}: samples must be positive finite numbers")
    return arr


def _mode(round_: Round, mode: str, r: int) -> Sequence[float]:
    try:
        return round_[mode]
    except KeyError:
        raise IntervalError(f"round {r + 1} has no {mode!r} samples") from None


def outlier_rounds(logs: Sequence[float]) -> tuple[int, ...]:
    """Indices of the rounds set aside as outliers, by the externally studentized residual
    with a Bonferroni bound (Cook & Weisberg, "Residuals and Influence in Regression", 1982,
    ch. 2): round i is an outlier when |x_i - mean(others)| / (sd(others) sqrt(1 + 1/m))
    exceeds the t quantile 1 - alpha / (2 n) with m - 1 degrees of freedom (m = n - 1
    others). Under normal noise that statistic is exactly t-distributed, so a run with no
    outlier loses a round with probability at most :data:`OUTLIER_ALPHA`. Repeated on the
    kept rounds while one is found, never leaving fewer than 3 nor setting aside more than
    a third; sd(others) is floored at :data:`OUTLIER_SCALE_FLOOR`."""
    from scipy.stats import t

    n = len(logs)
    kept = list(range(n))
    out: list[int] = []
    while len(kept) >= 4 and len(out) < n // 3:
        worst, stat = -1, -1.0
        for i in kept:
            others = [logs[j] for j in kept if j != i]
            sd = max(statistics.stdev(others), OUTLIER_SCALE_FLOOR)
            z = abs(logs[i] - statistics.fmean(others)) / (sd * math.sqrt(1 + 1 / len(others)))
            if z > stat:
                worst, stat = i, z
        if stat <= t.ppf(1 - OUTLIER_ALPHA / (2 * len(kept)), len(kept) - 2):
            break
        out.append(worst)
        kept.remove(worst)
    return tuple(sorted(out))


def _normal_quantile(p: float) -> float:
    return statistics.NormalDist().inv_cdf(p)


def widen(low: float, high: float, centre: float, sd: float, confidence: float):
    """Add a between-invocation standard deviation ``sd`` (log scale) to both half-widths of
    ``[low, high]`` around ``centre`` in quadrature: the variance of an estimate is the
    within-run variance the interval measured plus the invocation's own offset."""
    if sd <= 0:
        return low, high
    z = _normal_quantile(0.5 + confidence / 2) * sd
    lo_half = math.hypot(math.log(centre) - math.log(low), z)
    hi_half = math.hypot(math.log(high) - math.log(centre), z)
    return math.exp(math.log(centre) - lo_half), math.exp(math.log(centre) + hi_half)


def ratio_estimate(
    rounds: Sequence[tuple[Sequence[float], Sequence[float]]],
    confidence: float = CONFIDENCE,
    invocation_sd: float = INVOCATION_SD_TIME,
) -> Estimate:
    """Ratio numerator/denominator of paired samples, one ``(numerator, denominator)`` pair
    of per-iteration samples per round (module doc): with one round the Hodges-Lehmann ratio
    and Bauer's rank interval; with more, the geometric mean of the rounds' own
    Hodges-Lehmann ratios, outlier rounds set aside, with a t interval over the rounds. Both
    are widened by ``invocation_sd`` (relative, log scale) in quadrature.
    """
    if not rounds:
        raise IntervalError("no rounds")
    if not 0 < confidence < 1:
        raise IntervalError(f"confidence must be in (0, 1), got {confidence}")
    if not 0 <= invocation_sd < 1:
        raise IntervalError(f"invocation_sd must be in [0, 1), got {invocation_sd}")
    ratios, per_round, sizes = [], [], []
    n_samples = 0
    for r, (num, den) in enumerate(rounds):
        x = _positive(num, f"round {r + 1} numerator")
        y = _positive(den, f"round {r + 1} denominator")
        # Order statistics and medians are taken of the pairwise ratios: they are exp() of
        # the log differences' (exp is monotone), and a noiseless 1.30 then comes back as
        # exactly 1.30, not exp(log(1.3)) one ulp off.
        pairwise = (x[:, None] / y[None, :]).ravel()
        ratios.append(pairwise)
        per_round.append(float(np.median(pairwise)))
        sizes.append((x.size, y.size))
        n_samples += x.size + y.size
    floor = f"; widened by a between-invocation sd of {invocation_sd:.1%}" if invocation_sd else ""
    if len(rounds) == 1:
        pooled = ratios[0]
        value = float(np.median(pooled))
        rank = rank_interval(pooled, sizes, confidence)
        student = None if rank is not None else student_interval(x, y, confidence)
        if rank is not None:
            lo, hi = min(value, rank[0]), max(value, rank[1])
            how = "Bauer rank interval"
        elif student is not None:
            lo, hi = min(value, student[0]), max(value, student[1])
            how = "Student's t on log times (too few iterations for a rank interval)"
        else:
            lo = hi = value
            how = "no interval: the iterations measure no spread (one a side, or all equal)"
        lo, hi = widen(lo, hi, value, invocation_sd, confidence)
        method = f"one round: Hodges-Lehmann on log times; {how}{floor}"
        return Estimate(value, lo, hi, method, 1, n_samples, per_round=(value,),
                        interval_from_data=rank is not None or student is not None)  # fmt: skip
    logs = [math.log(v) for v in per_round]
    aside = outlier_rounds(logs)
    kept = [v for i, v in enumerate(logs) if i not in aside]
    kept_ratios = [v for i, v in enumerate(per_round) if i not in aside]
    centre = statistics.fmean(kept)
    value = kept_ratios[0] if len(set(kept_ratios)) == 1 else math.exp(centre)
    lo = hi = value
    tint = t_interval(kept, confidence)
    if tint is not None:
        lo, hi = min(lo, math.exp(tint[0])), max(hi, math.exp(tint[1]))
    lo, hi = widen(lo, hi, value, invocation_sd, confidence)
    set_aside = ""
    if aside:
        named = ", ".join(f"{i + 1} ({per_round[i]:.3f})" for i in aside)
        set_aside = f"; outlier round(s) set aside: {named}"
    method = (
        f"geometric mean of {len(kept)} rounds' Hodges-Lehmann ratios; t over rounds"
        f"{set_aside}{floor}"
    )
    return Estimate(
        value=value,
        low=lo,
        high=hi,
        method=method,
        n_rounds=len(rounds),
        n_samples=n_samples,
        outlier_rounds=tuple(i + 1 for i in aside),
        per_round=tuple(per_round),
    )


def slowdown_estimate(
    rounds: Sequence[Round],
    numerator: str = "checkpointed",
    denominator: str = "normal",
    confidence: float = CONFIDENCE,
    invocation_sd: float = INVOCATION_SD_TIME,
) -> Estimate:
    """Slowdown (numerator time / denominator time) from rounds of per-iteration wall times,
    each round a mapping mode name -> times (see :func:`ratio_estimate`)."""
    pairs = [(_mode(rd, numerator, r), _mode(rd, denominator, r)) for r, rd in enumerate(rounds)]
    return ratio_estimate(pairs, confidence, invocation_sd)


def differs(estimate: Estimate, null: float = 1.0) -> bool:
    """True when the interval excludes ``null`` (an A/A comparison should give False)."""
    return not estimate.contains(null)


# ------------------------------------------------------------------------ memory savings


def savings_estimate(
    rounds: Sequence[Round],
    baseline: str = "baseline",
    normal: str = "normal",
    checkpointed: str = "checkpointed",
    confidence: float = CONFIDENCE,
    invocation_sd_bytes: float = INVOCATION_SD_OVERHEAD_BYTES,
) -> Estimate:
    """Memory savings (normal - baseline) / (checkpointed - baseline) from rounds of exact
    per-iteration peaks (bytes); see the module doc for the interval."""
    if not rounds:
        raise IntervalError("no rounds")
    values, lows, highs, n_samples = [], [], [], 0
    for r, rd in enumerate(rounds):
        b = _positive(_mode(rd, baseline, r), f"round {r + 1} {baseline}")
        n = _positive(_mode(rd, normal, r), f"round {r + 1} {normal}")
        c = _positive(_mode(rd, checkpointed, r), f"round {r + 1} {checkpointed}")
        n_samples += b.size + n.size + c.size
        base = float(np.median(b))
        over_c = float(np.median(c)) - base
        if over_c <= 0 or float(np.median(n)) - base <= 0:
            raise IntervalError(
                f"round {r + 1}: a mode's peak is not above the baseline's; no savings ratio"
            )
        values.append((float(np.median(n)) - base) / over_c)
        lo_den = float(c.max() - b.min())
        hi_den = float(c.min() - b.max())
        lows.append((float(n.min()) - float(b.min())) / lo_den)
        highs.append((float(n.max()) - float(b.max())) / hi_den if hi_den > 0 else math.inf)
    value = float(statistics.median(values))
    if len(rounds) == 1:
        lo, hi = min(value, lows[0]), max(value, highs[0])
        method = "one round: the range its iterations allow"
    else:
        lo = hi = value
        method = f"median over rounds; t over {len(rounds)} rounds on log savings"
        tint = t_interval([math.log(v) for v in values], confidence)
        if tint is not None:
            lo, hi = min(lo, math.exp(tint[0])), max(hi, math.exp(tint[1]))
    if invocation_sd_bytes > 0 and math.isfinite(hi):
        # each overhead may sit invocation_sd_bytes off in another invocation: the relative
        # sd of their ratio, added in quadrature on the log scale
        over_n, over_c = [], []
        for rd in rounds:
            base = float(np.median(rd[baseline]))
            over_n.append(float(np.median(rd[normal])) - base)
            over_c.append(float(np.median(rd[checkpointed])) - base)
        rel = math.hypot(
            invocation_sd_bytes / statistics.median(over_n),
            invocation_sd_bytes / statistics.median(over_c),
        )
        lo, hi = widen(lo, hi, value, rel, confidence)
        method += (
            f"; widened by a between-invocation sd of {invocation_sd_bytes / 2**20:.2f} MiB "
            "per overhead"
        )
    return Estimate(value, lo, hi, method, len(rounds), n_samples)
