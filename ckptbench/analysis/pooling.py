"""One cell measured by several invocations: their estimates pooled, drift between them included.

A run's interval describes that invocation: its rounds see the noise between fresh
processes, but not what moves between invocations (a shared host's memory bandwidth over
the next ten minutes, a neighbour that came and went). On a quiet machine that part is
small; on the 2-core AMD EPYC VM of this round it was not: three `--precision 5%` runs of
the main job in a row gave 1.364x, 1.366x and 1.248x, each with a +/-4.8-4.9% interval, and
plain autograd's median time moved from 4.50 to 5.07 s between them while the checkpointed
one stayed. No single run can see that; several runs of one cell can.

:func:`pooled_estimate` is the random-effects model of meta-analysis on the log scale: run
i reports ``y_i = log(value_i)`` with a within-run standard error ``s_i`` (read back from
its 95% interval), and ``y_i = mu + u_i + e_i`` with ``u_i ~ N(0, tau^2)`` the invocation's
own offset. ``tau^2`` is DerSimonian & Laird's moment estimate (Controlled Clinical Trials
7, 1986); the pooled ``mu`` weighs each run by ``1 / (s_i^2 + tau^2)``; its interval is the
Hartung-Knapp t interval with k - 1 degrees of freedom (Hartung & Knapp, Stat. Med. 20,
2001) whose variance is never taken below the usual one (the modification of Röver et
al., BMC Med. Res. Methodol. 15, 2015): with few studies it keeps its coverage where the
plain DerSimonian-Laird interval falls well short (IntHout et al., BMC Med. Res.
Methodol. 14, 2014). ``tau`` is reported: the between-invocation
spread of this cell on this host.

``tests/test_pooling.py`` simulates invocations with known offsets and checks coverage.
Pure: no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from ckptbench.analysis.intervals import CONFIDENCE, Estimate, IntervalError

__all__ = ["Pooled", "pooled_estimate"]


@dataclass(frozen=True)
class Pooled:
    """Several invocations' estimates of one ratio, pooled (module doc)."""

    estimate: Estimate  # value, low, high of the pooled ratio
    tau: float  # between-invocation standard deviation, log scale (relative)
    invocations: int


def _standard_error(e: Estimate, confidence: float) -> float:
    """A run's within-run standard error on the log scale, read back from its interval with
    the quantile that made it: Student's t over its rounds (n - 1 degrees of freedom) for a
    run of several rounds, the normal one for one round. Read back with the normal quantile,
    a 3-round interval (t = 4.30) gave a standard error 2.2 times too large, and two such
    runs pooled to 5.4x [0.3, 89.7] from 5.1x and 5.7x."""
    from scipy.stats import norm, t

    tail = 0.5 + confidence / 2
    q = float(t.ppf(tail, e.n_rounds - 1) if e.n_rounds >= 2 else norm.ppf(tail))
    half = (math.log(e.high) - math.log(e.low)) / 2
    return max(half / q, 1e-12)


def pooled_estimate(estimates: Sequence[Estimate], confidence: float = CONFIDENCE) -> Pooled:
    """The random-effects pooled ratio of several invocations' estimates (module doc).

    Raises :class:`IntervalError` for fewer than two estimates or a non-positive one.
    """
    from scipy.stats import t

    k = len(estimates)
    if k < 2:
        raise IntervalError("pooling needs the estimates of at least two invocations")
    if any(not (0 < e.low <= e.value <= e.high < math.inf) for e in estimates):
        raise IntervalError("pooling needs positive, finite estimates with their intervals")
    y = [math.log(e.value) for e in estimates]
    var = [_standard_error(e, confidence) ** 2 for e in estimates]
    w = [1 / v for v in var]
    sw = sum(w)
    mean_fixed = sum(wi * yi for wi, yi in zip(w, y, strict=True)) / sw
    q = sum(wi * (yi - mean_fixed) ** 2 for wi, yi in zip(w, y, strict=True))
    c = sw - sum(wi * wi for wi in w) / sw
    tau2 = max(0.0, (q - (k - 1)) / c) if c > 0 else 0.0
    ws = [1 / (v + tau2) for v in var]
    sws = sum(ws)
    mu = sum(wi * yi for wi, yi in zip(ws, y, strict=True)) / sws
    hk = sum(wi * (yi - mu) ** 2 for wi, yi in zip(ws, y, strict=True)) / ((k - 1) * sws)
    half = float(t.ppf(0.5 + confidence / 2, k - 1)) * math.sqrt(max(hk, 1 / sws))
    method = (
        f"random effects over {k} invocations (DerSimonian-Laird tau {math.sqrt(tau2):.1%}, "
        f"Hartung-Knapp t interval, {k - 1} df)"
    )
    pooled = Estimate(
        value=math.exp(mu),
        low=math.exp(mu - half),
        high=math.exp(mu + half),
        method=method,
        n_rounds=sum(e.n_rounds for e in estimates),
        n_samples=sum(e.n_samples for e in estimates),
    )
    return Pooled(pooled, math.sqrt(tau2), k)
