"""Interval methods the estimates use (:mod:`ckptbench.analysis.intervals`), each from its paper.

* :func:`rank_interval` -- Bauer's distribution-free interval for a shift (Bauer,
  "Constructing confidence sets using rank statistics", JASA 67, 1972: the Mann-Whitney
  test inverted), stratified over rounds, from the exact null of the summed U statistics
  (:func:`u_null_distribution`);
* :func:`student_interval` -- Student's two-sample t interval of a ratio on the log scale;
* :func:`t_interval` -- Student's one-sample t interval of a mean;
* :func:`welch_half_width` -- a t half-width for a sum of means with Welch-Satterthwaite
  degrees of freedom.

Pure functions of numbers: no I/O, no random numbers.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

import numpy as np

__all__ = [
    "rank_interval",
    "student_interval",
    "t_interval",
    "u_null_distribution",
    "welch_half_width",
]


def u_null_distribution(m: int, n: int) -> np.ndarray:
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


def rank_interval(
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
            dist = np.convolve(dist, u_null_distribution(m, n))
        cdf = np.cumsum(dist)
        # coverage of [D_(k), D_(N+1-k)] is 1 - 2 P(S <= k-1); the largest k that keeps it
        k = int(np.searchsorted(cdf, alpha / 2 + 1e-12, side="right"))
    if k < 1:
        return None
    d = np.sort(values)
    return float(d[k - 1]), float(d[d.size - k])


def student_interval(x: np.ndarray, y: np.ndarray, confidence: float) -> tuple[float, float] | None:
    """Student's two-sample t interval of the ratio x / y on the log scale (pooled variance,
    n + m - 2 degrees of freedom); None with fewer than three values in all, or no spread
    among them (three equal times say nothing of the next)."""
    lx, ly = np.log(x), np.log(y)
    df = lx.size + ly.size - 2
    if df < 1:
        return None
    from scipy.stats import t

    centre = float(lx.mean() - ly.mean())
    var = (float(((lx - lx.mean()) ** 2).sum()) + float(((ly - ly.mean()) ** 2).sum())) / df
    if var == 0:
        return None
    half = float(t.ppf(0.5 + confidence / 2, df)) * math.sqrt(var * (1 / lx.size + 1 / ly.size))
    return math.exp(centre - half), math.exp(centre + half)


def t_interval(values: Sequence[float], confidence: float) -> tuple[float, float] | None:
    """Student's t interval of the mean of ``values`` (n - 1 degrees of freedom); None with
    fewer than two values or none apart."""
    n = len(values)
    if n < 2 or statistics.stdev(values) == 0:
        return None  # nothing to widen (and exp(log(x)) may round x by an ulp)
    from scipy.stats import t

    mean = statistics.fmean(values)
    half = t.ppf(0.5 + confidence / 2, n - 1) * statistics.stdev(values) / math.sqrt(n)
    return mean - half, mean + half


def welch_half_width(parts: Sequence[tuple[float, float]], confidence: float) -> float:
    """Half-width of a ``confidence`` t interval for a sum or difference of means: each part
    ``(variance of its mean, degrees of freedom)``, Welch-Satterthwaite degrees of freedom
    (Welch, "The generalization of 'Student's' problem ...", Biometrika 34, 1947); 0 when
    the variances sum to 0."""
    var = sum(v for v, _ in parts)
    if var <= 0:
        return 0.0
    from scipy.stats import t

    df = var**2 / sum(v**2 / d for v, d in parts)
    return float(t.ppf(0.5 + confidence / 2, df)) * math.sqrt(var)
