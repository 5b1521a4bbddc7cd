"""Ratios and statistics computed from raw per-iteration samples (never from other ratios):
the building blocks of :func:`ckptbench.results.summary.compute`, the one place a cell's
figures are computed.

Definitions (the numbers ckptbench prints):

* peak of a mode = median over its measured iterations of the exact per-iteration peak RSS;
* overhead of a mode = its peak minus the baseline's peak (what differentiation adds to the
  forward-only floor in an identical fresh process);
* slowdown = checkpointed time / normal time: each round's Hodges-Lehmann ratio, their
  geometric mean (:func:`round_estimates`; the median times' ratio only where no round
  gives one);
* memory savings = overhead of normal / overhead of checkpointed, each round against its
  own baseline, the median over rounds (:func:`round_estimates`).

A ratio of times comes only from modes measured ok in every round given (a round cut by a
stop aside): a mode that failed in one round shows no time, and its other rounds alone would
leave out the round it failed in (a timeout is a slow round) — :func:`failed_modes`.
"""

from __future__ import annotations

import contextlib
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ckptbench.analysis import intervals, stability
from ckptbench.results.modes import Mode, Status, pool_rounds
from ckptbench.schedules import get_strategy

if TYPE_CHECKING:
    from ckptbench.results.schema import Case, ModeResult

__all__ = [
    "BUSY_CPU_SHARE",
    "Spread",
    "effective_snaps",
    "failed_modes",
    "floor_estimate",
    "floor_evaluations",
    "mode_peak_bytes",
    "mode_time_s",
    "optimum_advances",
    "pool_by_mode",
    "ratio",
    "recompute_floor_s",
    "round_estimates",
    "spread",
]

#: Below this CPU share the worker was descheduled for long: its times are not trustworthy.
BUSY_CPU_SHARE = 0.9


@dataclass(frozen=True)
class Spread:
    """Median with interquartile range and min-max of a sample."""

    median: float
    q1: float
    q3: float
    min: float
    max: float
    n: int

    def as_dict(self) -> dict[str, float]:
        return {
            "median": self.median,
            "q1": self.q1,
            "q3": self.q3,
            "min": self.min,
            "max": self.max,
            "n": self.n,
        }


def spread(values: Sequence[float]) -> Spread:
    """Median, quartiles (inclusive method) and range; raises ValueError on an empty sample."""
    vals = sorted(float(v) for v in values)
    if not vals:
        raise ValueError("empty sample")
    if len(vals) == 1:
        q1 = q3 = vals[0]
    else:
        q1, _, q3 = statistics.quantiles(vals, n=4, method="inclusive")
    return Spread(statistics.median(vals), q1, q3, vals[0], vals[-1], len(vals))


def mode_peak_bytes(result: ModeResult) -> int | None:
    """Median exact peak RSS of a mode's measured iterations (None if it has none)."""
    if not result.ok or not result.iterations:
        return None
    return int(statistics.median(it.peak_rss_bytes for it in result.iterations))


def mode_time_s(result: ModeResult) -> float | None:
    if not result.ok or not result.iterations:
        return None
    return statistics.median(it.wall_time_s for it in result.iterations)


def effective_snaps(case: Case) -> int:
    """Slots a case's schedule may use (store-all keeps every state, whatever --snaps says)."""
    return get_strategy(case.strategy).effective_snaps(case.steps, case.snaps)


def ratio(num: float | None, den: float | None) -> float | None:
    if num is None or den is None or den <= 0:
        return None
    return num / den


def recompute_floor_s(
    baseline_s: float | None, plain_s: float | None, extra_steps: float | None, steps: int
) -> float | None:
    """The recomputation floor: the plain gradient's time plus ``extra_steps`` evaluations
    at the forward-only time per step (``baseline_s / steps``): the extra evaluations in mean
    steps, each priced at its own step's share of the baseline where the run has per-step
    costs (:func:`ckptbench.analysis.floor.floor_extra`); None unless all three are known.
    An estimate of what a schedule's recomputations cost with no executor overhead, not a
    bound (a recomputed step may run faster than a forward one)."""
    if baseline_s is None or plain_s is None or extra_steps is None or steps <= 0:
        return None
    return plain_s + extra_steps * baseline_s / steps


def floor_evaluations(strategy: str, counters: Mapping[str, Any]) -> int | None:
    """The step evaluations of one checkpointed gradient that the recomputation floor
    prices, from its mode's ``counters``: our executor's advances + taped steps; a peer's
    counted step (or layer) calls (``step_calls``: torch's, each a whole evaluation, the
    recomputation's too); None for a peer that says why not (``StrategySpec.no_floor``: the
    JAX peers count nothing, ``torch-selective`` recomputes parts of a layer) or a count
    not recorded."""
    spec = get_strategy(strategy)
    if spec.ours:
        counted = (counters.get("steps_advanced"), counters.get("steps_taped"))
        return None if None in counted else sum(counted)
    return None if spec.no_floor is not None else counters.get("step_calls")


def pool_by_mode(results: Sequence[ModeResult]) -> list[ModeResult]:
    """One result per mode, its rounds pooled (``results.pool_rounds``), first-seen order."""
    order: list[Mode] = []
    for r in results:
        if r.mode not in order:
            order.append(r.mode)
    return [
        pool_rounds(tuple(sorted((r for r in results if r.mode is m), key=lambda r: r.round)))
        for m in order
    ]


def optimum_advances(case: Case, ckpt: ModeResult | None) -> int | None:
    """The advances a cell's checkpointed mode should make, from the strategy registry:
    Revolve's t(l, s) for the action streams set by snaps (a lower bound for uniform), the
    plan's own count for ``optimal``, and None for a peer whose schedule is not ours."""
    plan = ckpt.plan if ckpt is not None else None
    return get_strategy(case.strategy).optimum_advances(case.steps, case.snaps, plan)


def failed_modes(results: Sequence[ModeResult]) -> set[str]:
    """The modes that did not measure ok in some round of ``results`` (a round cut by a stop
    aside: a mode's figures come from the rounds it completed, ``pool_rounds``). Their time
    is shown nowhere, so no ratio of times divides them."""
    return {r.mode.value for r in results if not r.ok and r.status is not Status.INTERRUPTED}


def _by_round(results: Sequence[ModeResult]) -> list[dict[str, ModeResult]]:
    """The ok results with iterations, one mapping mode name -> result per round, in order."""
    by_round: dict[int, dict[str, ModeResult]] = {}
    for r in results:
        if r.ok and r.iterations:
            by_round.setdefault(r.round, {})[r.mode.value] = r
    return [by_round[k] for k in sorted(by_round)]


def floor_estimate(
    results: Sequence[ModeResult], extra_steps: float | None, steps: int
) -> intervals.Estimate | None:
    """Checkpointed time / the recomputation floor with a 95% interval over the rounds
    (:func:`ckptbench.analysis.intervals.ratio_estimate`): in each round that measured all
    three modes, every plain iteration plus that round's extra evaluations (``extra_steps``,
    in mean steps: :func:`ckptbench.analysis.floor.floor_extra`) at its own forward-only
    step (the baseline's median / ``steps``) is one floor sample; None without such a round
    or a count of evaluations, or where a mode failed in a round
    (:func:`failed_modes`). A fresh worker can run every step 1.6x slower than the next one
    (a GPU host, 2026-11-28), so the floor is priced round by round."""
    three = (Mode.BASELINE.value, Mode.NORMAL.value, Mode.CHECKPOINTED.value)
    if extra_steps is None or steps <= 0 or failed_modes(results) & set(three):
        return None
    pairs = []
    for rd in _by_round(results):
        if all(m in rd for m in three):
            base, plain, ckpt = (rd[m].iterations for m in three)
            extra_s = extra_steps * statistics.median(it.wall_time_s for it in base) / steps
            pairs.append(
                ([it.wall_time_s for it in ckpt], [it.wall_time_s + extra_s for it in plain])
            )
    if not pairs:
        return None
    try:
        return intervals.ratio_estimate(pairs)
    except intervals.IntervalError:
        return None


def round_estimates(
    results: Sequence[ModeResult],
    cpu_share: dict[str, float] | None = None,
    other_busy_cores: dict[str, float] | None = None,
) -> dict[str, Any]:
    """Slowdown and savings estimates with 95% intervals from every (round, mode) result,
    the per-round slowdowns and the noise verdicts (``ckptbench.analysis.intervals``). No
    slowdown where normal or checkpointed failed in a round (:func:`failed_modes`)."""
    ordered = _by_round(results)
    times = [{m: [it.wall_time_s for it in r.iterations] for m, r in rd.items()} for rd in ordered]
    peaks = [
        {m: [it.peak_rss_bytes for it in r.iterations] for m, r in rd.items()} for rd in ordered
    ]
    out: dict[str, Any] = {"rounds": len({r.round for r in results}) if results else 0}
    pair = (Mode.NORMAL.value, Mode.CHECKPOINTED.value)
    timed = [t for t in times if all(m in t for m in pair)]
    if failed_modes(results) & set(pair):
        timed = []
    if timed:
        with contextlib.suppress(intervals.IntervalError):
            out["slowdown"] = intervals.slowdown_estimate(timed)
            out["per_round"] = list(out["slowdown"].per_round)
    three = (Mode.BASELINE.value, *pair)
    peaked = [p for p in peaks if all(m in p for m in three)]
    if peaked:
        with contextlib.suppress(intervals.IntervalError):
            out["memory_savings"] = intervals.savings_estimate(peaked)
    verdicts: tuple = ()
    if times:
        verdicts = stability.noise_verdicts(
            times,
            peaks=peaks,
            slowdown=out.get("slowdown"),
            cpu_share=cpu_share,
            other_busy_cores=other_busy_cores,
            thread_shares=_thread_shares(ordered),
        )
    out["noise"] = tuple(verdicts)
    if times:
        noise = stability.mode_noise(times, peaks)
        out["time_cv"] = {m: n.cv for m, n in noise.items()}
        out["peak_spread_bytes"] = {m: n.peak_spread_bytes for m, n in noise.items()}
    out["time_unstable"] = stability.time_unstable(verdicts)
    return out


def _thread_shares(ordered: Sequence[dict[str, ModeResult]]) -> dict[str, float]:
    """Per mode, the measuring thread's CPU time over wall time of its iterations
    (``stability.thread_share``; modes whose iterations did not record it left out)."""
    pairs: dict[str, list[tuple[float | None, float]]] = {}
    for rd in ordered:
        for m, r in rd.items():
            pairs.setdefault(m, []).extend(
                (it.thread_cpu_time_s, it.wall_time_s) for it in r.iterations
            )
    shares = {m: stability.thread_share(p) for m, p in pairs.items()}
    return {m: s for m, s in shares.items() if s is not None}
