"""Estimates with 95% intervals from interleaved rounds, and the noise verdicts on them.

Input: a run measured in rounds. Each round ran every mode in its own fresh worker process
and kept the raw per-iteration times (and exact peaks) of each mode, so a round is a mapping
``mode name -> per-iteration values``. Everything here is computed from those raw values.

**Slowdown** (checkpointed / normal time). Times are modelled on the log scale as

    log t[r, mode, i] = mu[mode] + a[r] + b[r, mode] + e[r, mode, i]

with a[r] a drift shared by the modes of round r (a slow minute on a shared machine),
b[r, mode] a per-process effect (memory layout, frequency, neighbours while that process
ran) and e an iteration's noise. The log slowdown is mu[checkpointed] - mu[normal].

* Point estimate: the stratified Hodges-Lehmann estimator (Hodges & Lehmann, Ann. Math.
  Stat. 34, 1963): the median, pooled over rounds, of the within-round pairwise differences
  log t[r, ckpt, i] - log t[r, normal, j]. Pairing inside a round cancels a[r]; the median
  ignores an outlier iteration. exp() of it is a ratio; for a noiseless 1.30 it is 1.30.
* Interval: the hull of two 95% intervals, because iterations and processes are different
  sources of error and neither interval alone sees both:
  1. a rank interval for the shift (Bauer, JASA 67, 1972: the Mann-Whitney test inverted;
     its endpoints are order statistics of the pairwise differences), stratified by round:
     the statistic is the sum over rounds of each round's Mann-Whitney U, whose exact null
     distribution is the convolution of the per-round ones (van Elteren, Bull. ISI 37,
     1960, with equal weights). It is exact for iteration noise but blind to b[r, mode];
  2. a two-stage (summary-statistics) t interval over rounds: each round's own HL log ratio
     is one observation, Student t with n_rounds - 1 degrees of freedom. It sees the
     process-to-process variation b, which dominates on this machine (one process's median
     time moves by 10% between fresh processes while its iterations agree to 2-6%).
  With one round only the rank interval exists. A bootstrap over 3-5 rounds was rejected:
  three rounds have ten distinct resamples, and percentile intervals from so few units
  cover well below their nominal level (Efron & Tibshirani 1993, ch. 13). The methods here
  are deterministic: no random numbers at all.

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

__all__ = [
    "CONFIDENCE",
    "Estimate",
    "IntervalError",
    "differs",
    "ratio_estimate",
    "round_ratios",
    "savings_estimate",
    "slowdown_estimate",
]

CONFIDENCE = 0.95

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


def _u_null(m: int, n: int) -> np.ndarray:
    """Exact null distribution of the Mann-Whitney U for sizes (m, n): P(U = 0..m*n).

    Recurrence on the last observation of the pooled order: it belongs to the first sample
    (probability m/(m+n)) and exceeds all n of the second, or to the second.
    """
    table = [[np.ones(1) for _ in range(n + 1)] for _ in range(m + 1)]
    for a in range(1, m + 1):
        for b in range(1, n + 1):
            p = np.zeros(a * b + 1)
            p[b:] += a / (a + b) * table[a - 1][b]
            p[: a * (b - 1) + 1] += b / (a + b) * table[a][b - 1]
            table[a][b] = p
    return table[m][n]


def _rank_interval(
    values: np.ndarray, sizes: Sequence[tuple[int, int]], confidence: float
) -> tuple[float, float] | None:
    """Bauer's interval for a shift, stratified: order statistics k and N+1-k of the pooled
    within-round differences (or of any monotone function of them, e.g. the ratios), with
    k from the exact null of the summed U statistics. None when even the full range covers
    less than ``confidence`` (too few iterations)."""
    alpha = 1.0 - confidence
    if sum(m * n for m, n in sizes) > 20000:  # normal approximation for large samples
        mean = sum(m * n for m, n in sizes) / 2
        var = sum(m * n * (m + n + 1) for m, n in sizes) / 12
        from scipy.stats import norm

        k = math.floor(mean - norm.ppf(1 - alpha / 2) * math.sqrt(var))
    else:
        dist = np.ones(1)
        for m, n in sizes:
            dist = np.convolve(dist, _u_null(m, n))
        cdf = np.cumsum(dist)
        # coverage of [D_(k), D_(N+1-k)] is 1 - 2 P(S <= k-1); the largest k that keeps it
        k = int(np.searchsorted(cdf, alpha / 2 + 1e-12, side="right"))
    if k < 1:
        return None
    d = np.sort(values)
    return float(d[k - 1]), float(d[d.size - k])


def _t_interval(values: Sequence[float], confidence: float) -> tuple[float, float] | None:
    n = len(values)
    if n < 2 or statistics.stdev(values) == 0:
        return None  # nothing to widen (and exp(log(x)) may round x by an ulp)
    from scipy.stats import t

    mean = statistics.fmean(values)
    half = t.ppf(0.5 + confidence / 2, n - 1) * statistics.stdev(values) / math.sqrt(n)
    return mean - half, mean + half


def ratio_estimate(
    rounds: Sequence[tuple[Sequence[float], Sequence[float]]],
    confidence: float = CONFIDENCE,
) -> Estimate:
    """Ratio numerator/denominator of paired samples, one ``(numerator, denominator)`` pair
    of per-iteration samples per round: stratified Hodges-Lehmann on log values with the
    hull of the stratified Bauer rank interval and the t interval over rounds (module doc).
    """
    if not rounds:
        raise IntervalError("no rounds")
    if not 0 < confidence < 1:
        raise IntervalError(f"confidence must be in (0, 1), got {confidence}")
    ratios, per_round, sizes = [], [], []
    n_samples = 0
    for r, (num, den) in enumerate(rounds):
        x = _positive(num, f"round {r + 1} numerator")
        y = _positive(den, f"round {r + 1} denominator")
        a, b = np.log(x), np.log(y)
        d = (a[:, None] - b[None, :]).ravel()
        ratios.append((x[:, None] / y[None, :]).ravel())
        per_round.append(float(np.median(d)))
        sizes.append((a.size, b.size))
        n_samples += a.size + b.size
    # Order statistics and medians are taken of the pairwise ratios: they are exp() of the
    # log differences' (exp is monotone), and a noiseless 1.30 then comes back as exactly
    # 1.30, not exp(log(1.3)) one ulp off. The t interval works on the log scale.
    pairwise = np.concatenate(ratios)
    value = float(np.median(pairwise))
    lo = hi = value
    methods = []
    rank = _rank_interval(pairwise, sizes, confidence)
    if rank is not None:
        lo, hi = min(lo, rank[0]), max(hi, rank[1])
        methods.append("Bauer rank interval stratified by round")
    else:
        lo, hi = min(lo, float(pairwise.min())), max(hi, float(pairwise.max()))
        methods.append("range of pairwise ratios (too few iterations for a rank interval)")
    tint = _t_interval(per_round, confidence)
    if tint is not None:
        lo, hi = min(lo, math.exp(tint[0])), max(hi, math.exp(tint[1]))
        methods.append(f"t over {len(rounds)} rounds")
    method = "stratified Hodges-Lehmann on log times; hull of " + " and ".join(methods)
    return Estimate(
        value=value,
        low=lo,
        high=hi,
        method=method,
        n_rounds=len(rounds),
        n_samples=n_samples,
    )


def slowdown_estimate(
    rounds: Sequence[Round],
    numerator: str = "checkpointed",
    denominator: str = "normal",
    confidence: float = CONFIDENCE,
) -> Estimate:
    """Slowdown (numerator time / denominator time) from rounds of per-iteration wall times,
    each round a mapping mode name -> times (see :func:`ratio_estimate`)."""
    pairs = [(_mode(rd, numerator, r), _mode(rd, denominator, r)) for r, rd in enumerate(rounds)]
    return ratio_estimate(pairs, confidence)


def round_ratios(
    rounds: Sequence[Round], numerator: str = "checkpointed", denominator: str = "normal"
) -> list[float]:
    """Per-round slowdown as a ratio of that round's medians (what a table shows per round)."""
    out = []
    for r, rd in enumerate(rounds):
        num = _positive(_mode(rd, numerator, r), f"round {r + 1} {numerator}")
        den = _positive(_mode(rd, denominator, r), f"round {r + 1} {denominator}")
        out.append(float(np.median(num) / np.median(den)))
    return out


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
        tint = _t_interval([math.log(v) for v in values], confidence)
        if tint is not None:
            lo, hi = min(lo, math.exp(tint[0])), max(hi, math.exp(tint[1]))
    return Estimate(value, lo, hi, method, len(rounds), n_samples)
