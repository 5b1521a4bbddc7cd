"""The figures of one cell, typed, computed in one place from its raw samples.

pyperf's shape: a result file stores the raw samples (every iteration of every mode and
round) and the environment; every figure ckptbench prints is computed from them by
:func:`compute` and nowhere else, into a :class:`CellSummary` of
:class:`~ckptbench.results.modefigures.ModeFigures` (one mode's figures, computed there).
``RunResult.summary`` caches it on the result, so run's table and headline, compare,
the HTML report, the plots, the caveats, the gate and ``read_results`` all read one object
with attributes. The ``summary`` a result file holds is this object's :meth:`CellSummary.as_dict`
(the stable keys CI scripts rely on, unchanged); it is written for them and never read back.

Definitions (the numbers ckptbench prints):

* peak of a mode = median over its measured iterations of the exact per-iteration peak RSS;
* overhead of a mode = its peak minus the baseline's peak (what differentiation adds to the
  forward-only floor in an identical fresh process);
* slowdown = checkpointed's times over normal's: the geometric mean of the rounds' own
  Hodges-Lehmann ratios (outlier rounds set aside), with a 95% interval (the pooled median
  times printed beside it divide to a slightly different ratio); none (nor a ``vs_floor``)
  where a mode it divides failed in a round and shows no time (``analysis.summary``);
* memory savings = overhead of normal / overhead of checkpointed, each against its own
  round's baseline, the median over rounds, with a 95% interval (the table's overheads
  pool the rounds, so their ratio can differ slightly where overheads are small);
* recomputation floor = the normal mode's median iteration time plus each evaluation beyond
  the plain gradient's at the forward-only time of its step: the baseline median shared
  among the steps by the plan's forward time per step where the checkpointed mode's plan
  has them and its replay says which steps it recomputes (``floor_basis`` "per-layer
  costs"), else baseline median / steps each ("mean layer";
  :func:`ckptbench.analysis.floor.floor_extra`), where the evaluations are counted whole
  (:func:`ckptbench.analysis.summary.floor_evaluations`: ours, and torch's peers but
  ``torch-selective``); ``floor_note`` says why a peer has none;
  ``vs_floor`` = checkpointed's times over each round's own floor, estimated as the
  slowdown is, with its 95% interval (:func:`ckptbench.analysis.summary.floor_estimate`);
* every overhead carries an interval holding both modes' iteration peaks and where another
  invocation's overhead lands (95%); one within that noise gives no savings figure
  (:mod:`ckptbench.analysis.memnoise`), nor does one not shown (a mode not ok every round).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from ckptbench.analysis import memnoise
from ckptbench.analysis.floor import floor_extra
from ckptbench.analysis.intervals import Estimate
from ckptbench.analysis.memnoise import Overhead
from ckptbench.analysis.stability import Verdict
from ckptbench.analysis.summary import (
    BUSY_CPU_SHARE,
    floor_estimate,
    floor_evaluations,
    mode_time_s,
    optimum_advances,
    pool_by_mode,
    ratio,
    recompute_floor_s,
    round_estimates,
)
from ckptbench.results.document import summary_document
from ckptbench.results.modefigures import (
    Counters,
    MemoryFigures,
    ModeFigures,
    all_device_peaks_exact,
    median_cpu_share,
    mode_figures,
)
from ckptbench.results.modes import (
    MissingRounds,
    Mode,
    Status,
    complete_rounds,
    missing_rounds,
    recorded_stop,
)
from ckptbench.schedules import get_strategy

if TYPE_CHECKING:
    from ckptbench.results.schema import Case, ModeResult

__all__ = [
    "CellSummary",
    "Ratio",
    "compute",
    "other_busy_cores",
    "summary_document",
]


@dataclass(frozen=True)
class Ratio:
    """A ratio of two modes' figures with its 95% interval (None without one)."""

    value: float | None
    low: float | None = None
    high: float | None = None
    rounds: int = 0  # rounds the interval is computed from
    set_aside: tuple[int, ...] = ()  # 1-based rounds left out as outliers
    per_round: tuple[float, ...] | None = None  # each round's own ratio (slowdown)

    @property
    def interval(self) -> tuple[float, float] | None:
        return None if self.low is None or self.high is None else (self.low, self.high)

    @classmethod
    def of(cls, estimate: Estimate | None, fallback: float | None, **extra: Any) -> Ratio:
        if estimate is None:
            return cls(fallback, **extra)
        if not estimate.interval_from_data:  # one iteration a side: a figure, no interval
            return cls(estimate.value, rounds=estimate.n_rounds, **extra)
        e = estimate
        return cls(e.value, e.low, e.high, e.n_rounds, tuple(e.outlier_rounds), **extra)


@dataclass(frozen=True)
class CellSummary:
    """Every figure of one cell (one result file), from its raw samples (:func:`compute`)."""

    modes: tuple[ModeFigures, ...]  # one per mode measured, in the order first measured
    slowdown: Ratio
    memory_savings: Ratio
    rounds: int
    rounds_complete: int
    interrupted_round: int | None  # 1-based
    noise: tuple[Verdict, ...]
    time_unstable: bool
    forward_steps: int | None
    forward_steps_optimal: int | None
    step_evaluations: int | None
    step_evaluations_optimal: int | None
    grad_max_rel_err: float | None
    device_memory_savings: float | None = None  # GPU devices only
    device_peak_exact: bool | None = None  # GPU devices only; False: upper bounds
    #: where checkpointed's overhead is within its noise (no savings figure then): the
    #: lower bound normal's and checkpointed's intervals allow, for gates
    memory_savings_bound: float | None = None
    floor_time_s: float | None = None  # the recomputation floor (module doc)
    #: what priced its extra evaluations: "per-layer costs" (the plan's forward time per
    #: step sets each one's share of the baseline) or "mean layer" (baseline / steps each)
    floor_basis: str | None = None
    vs_floor: float | None = None  # checkpointed time / the floor (the module doc)
    #: the same ratio round by round (each round's floor from its own baseline and plain
    #: iterations) with its 95% interval, which also holds ``vs_floor``
    floor_ratio: Ratio | None = None
    #: why a peer has no floor (``StrategySpec.no_floor``), where its checkpointed mode ran
    floor_note: str | None = None
    #: modes the file lacks in some of the case's planned rounds with no stop recorded
    #: (:func:`ckptbench.results.modes.missing_rounds`): their figures come from fewer rounds
    rounds_missing: tuple[MissingRounds, ...] = ()

    def mode(self, mode: Mode) -> ModeFigures:
        """``mode``'s figures; empty ones (status None) when it was not measured."""
        return next((m for m in self.modes if m.mode is mode), ModeFigures(mode, None))

    @property
    def ok(self) -> bool:
        """Every mode ok, no round interrupted and none missing."""
        ok = all(m.ok for m in self.modes) and self.interrupted_round is None
        return ok and not self.rounds_missing

    @property
    def on_device(self) -> bool:
        """A GPU cell: its modes have device peaks."""
        return any(m.peak_device_bytes is not None for m in self.modes)

    @property
    def busy_modes(self) -> dict[str, float]:
        """Modes whose worker got less than ``BUSY_CPU_SHARE`` of a core while measuring."""
        return {
            m.mode.value: m.cpu_share
            for m in self.modes
            if m.cpu_share is not None and m.cpu_share < BUSY_CPU_SHARE
        }

    def as_dict(self) -> dict[str, Any]:
        """The result file's ``summary``: the documented stable keys (README, "Result files")."""
        return summary_document(self)


def other_busy_cores(modes: Sequence[ModeResult]) -> dict[str, float]:
    """Per mode, the most cores other processes kept busy in any of its rounds."""
    busy: dict[str, float] = {}
    for r in modes:
        if r.other_busy_cores is not None:
            busy[r.mode.value] = max(busy.get(r.mode.value, 0.0), r.other_busy_cores)
    return busy


def savings_figure(
    estimate: Estimate | None,
    normal: int | None,
    ckpt: int | None,
    noise: tuple[Overhead | None, Overhead | None] = (None, None),
) -> Ratio:
    """Memory savings: the interval estimate over the rounds, else overhead normal / overhead
    checkpointed; its interval widened to hold both modes' iteration spreads. No figure at
    all where either overhead is within its noise or not shown (``noise``: normal's and
    checkpointed's :class:`ckptbench.analysis.memnoise.Overhead`, None for a mode not ok in
    every round kept: its ok rounds alone would divide an overhead the table does not show)."""
    n, c = noise
    if n is None or c is None or n.below_noise or c.below_noise:
        return Ratio(None)
    figure = Ratio.of(estimate, ratio(normal, ckpt))
    spread_ci = memnoise.savings_interval(n, c)
    if figure.value is None or spread_ci is None:
        return figure
    low, high = spread_ci
    if figure.interval is not None:
        low, high = min(low, figure.interval[0]), max(high, figure.interval[1])
    return replace(figure, low=low, high=high)


def savings_bound(normal: Overhead | None, ckpt: Overhead | None) -> float | None:
    """Normal's lowest overhead over checkpointed's highest, where checkpointed's overhead
    is within its noise but above zero somewhere and normal's is clear of its own."""
    if normal is None or ckpt is None or normal.below_noise or not ckpt.below_noise:
        return None
    return normal.low / ckpt.high if ckpt.high > 0 else None


def slowdown_figure(
    estimate: Estimate | None,
    normal: ModeResult | None,
    ckpt: ModeResult | None,
    per_round: Sequence[float] | None,
) -> Ratio:
    """Slowdown: the estimate over the rounds, else median checkpointed / median normal."""
    fallback = ratio(mode_time_s(ckpt) if ckpt else None, mode_time_s(normal) if normal else None)
    return Ratio.of(estimate, fallback, per_round=None if per_round is None else tuple(per_round))


def compute(
    case: Case, modes: Sequence[ModeResult], environment: Mapping[str, Any] | None = None
) -> CellSummary:
    """THE one computation of a cell's figures, from the raw samples of ``modes`` (every
    (round, mode) result of a run, or one result per mode), the case and the environment:
    peaks, overheads, time spreads, CPU shares, phases, device figures, the slowdown and
    savings estimates with intervals, the noise verdicts (the busy cores are taken from the
    modes themselves), the evaluation counts, the gradient error and the round ckptbench was
    stopped in (or before: the environment's ``interrupted``, when no round was cut). The
    figures of a stopped run come from its complete rounds alone, where it has one
    (:func:`ckptbench.results.modes.complete_rounds`); ``rounds`` counts every round started."""
    started = {r.round for r in modes}
    rounds = list(complete_rounds(modes))
    pooled = pool_by_mode(rounds)
    by_mode = {m.mode: m for m in pooled}
    # on a GPU the worker waits for the device by design: CPU time / wall time says nothing
    # about other processes there, so the busy-machine verdict is a CPU-only one
    on_cpu = case.device == "cpu"
    cpu_share = {
        m.mode.value: median_cpu_share(m)
        for m in pooled
        if on_cpu and m.ok and any(it.wall_time_s > 0 for it in m.iterations)
    }
    estimates = round_estimates(rounds, cpu_share, other_busy_cores(rounds))
    mem = MemoryFigures.of(pooled)
    device, noise = mem.device, mem.noise
    figures = tuple(
        mode_figures(m, mem, cpu_share, estimates, case.memory_limit_bytes) for m in pooled
    )
    normal, ckpt = by_mode.get(Mode.NORMAL), by_mode.get(Mode.CHECKPOINTED)
    counts = Counters.of(ckpt.counters if ckpt is not None else {})
    opt = optimum_advances(case, ckpt)
    cut = [r.round for r in modes if r.status is Status.INTERRUPTED]
    over = {f.mode: f.overhead_bytes for f in figures}
    evaluations = floor_evaluations(case.strategy, ckpt.counters if ckpt is not None else {})
    extra = floor_extra(evaluations, case.steps, ckpt.plan if ckpt is not None else None)
    extra_steps = extra.steps if extra is not None else None
    base = by_mode.get(Mode.BASELINE)
    floor = recompute_floor_s(
        mode_time_s(base) if base else None,
        mode_time_s(normal) if normal else None,
        extra_steps,
        case.steps,
    )
    dover = {f.mode: f.device_overhead_bytes for f in figures}
    floor_est = floor_estimate(rounds, extra_steps, case.steps)
    whole = ratio(mode_time_s(ckpt) if ckpt else None, floor)  # no round had all 3 modes
    vs_floor = floor_est.value if floor_est is not None and floor is not None else whole
    return CellSummary(
        modes=figures,
        slowdown=slowdown_figure(
            estimates.get("slowdown"), normal, ckpt, estimates.get("per_round")
        ),
        memory_savings=savings_figure(
            estimates.get("memory_savings"),
            over.get(Mode.NORMAL),
            over.get(Mode.CHECKPOINTED),
            (noise.get(Mode.NORMAL), noise.get(Mode.CHECKPOINTED)),
        ),
        memory_savings_bound=savings_bound(noise.get(Mode.NORMAL), noise.get(Mode.CHECKPOINTED)),
        rounds=len(started),
        rounds_complete=len(started - set(cut)),
        interrupted_round=min(cut) + 1 if cut else _stopped_before(modes, environment),
        noise=estimates["noise"],
        time_unstable=estimates["time_unstable"],
        forward_steps=counts.steps_advanced,
        forward_steps_optimal=opt,
        step_evaluations=evaluations,
        step_evaluations_optimal=None if opt is None else opt + case.steps,
        grad_max_rel_err=ckpt.grad_max_rel_err if ckpt is not None else None,
        device_memory_savings=ratio(dover.get(Mode.NORMAL), dover.get(Mode.CHECKPOINTED))
        if device
        else None,
        device_peak_exact=all_device_peaks_exact(pooled) if device else None,
        floor_time_s=floor,
        floor_basis=extra.basis if floor is not None and extra is not None else None,
        vs_floor=vs_floor,
        floor_ratio=_floor_ratio(floor_est, vs_floor),
        floor_note=get_strategy(case.strategy).no_floor if ckpt is not None else None,
        rounds_missing=missing_rounds(modes, case.rounds, environment),
    )


def _floor_ratio(estimate: Estimate | None, vs_floor: float | None) -> Ratio | None:
    """The rounds' floor ratios and their interval (``vs_floor`` is the estimate's value)."""
    if estimate is None or vs_floor is None:
        return None
    return Ratio.of(estimate, None, per_round=tuple(estimate.per_round))


def _stopped_before(
    modes: Sequence[ModeResult], environment: Mapping[str, Any] | None
) -> int | None:
    return (recorded_stop(modes, environment) or {}).get("round")
