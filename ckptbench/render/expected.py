"""What a checkpointed gradient should have cost, beside what it cost: a planned
schedule's predicted time (``schedules.optimal``, after Beaumont et al. 2019) and the
recomputation floor (``results.summary``: the plain gradient plus each extra evaluation at
its layer's forward-only time, or the mean step's). Returns strings; never prints."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ckptbench.analysis.floor import PER_LAYER
from ckptbench.analysis.stats import figure_apart
from ckptbench.render.format import (
    fmt_bytes,
    fmt_interval,
    fmt_overhead,
    fmt_per_step,
    fmt_size,
    fmt_time,
)
from ckptbench.results.schema import Mode, RunResult
from ckptbench.workloads.registry import builtin

if TYPE_CHECKING:
    from ckptbench.results.summary import Ratio

__all__ = ["floor_line", "plan_line"]


def plan_line(result: RunResult) -> str | None:
    """A planned schedule's prediction beside the measurement: the median iteration (the
    table's figure) and the fastest one. The plan prices each step at the fastest of its
    cost samples (``measure.stepcosts``), so on a noisy host the fastest iteration is the
    like-for-like figure: GPU run 8 (docs/gpu.md) read +19% at the median, -2% fastest."""
    s = result.summary
    ckpt = s.mode(Mode.CHECKPOINTED)
    predicted = ckpt.plan.predicted_time_s
    if not predicted or ckpt.time is None:
        return None
    wall, best = ckpt.time.median, ckpt.time.min
    # a GPU: the plan's bytes are stored there
    if s.on_device:
        over = fmt_bytes(ckpt.device_overhead_bytes, signed=True)
    else:
        over = fmt_overhead(ckpt.overhead_interval)
    where = "device " if s.on_device else ""
    fastest = (
        f"; fastest iteration {best:.3g} s, {best / predicted - 1:+.0%}" if best < wall else ""
    )
    kept_all = (  # a budget that holds every tape: nothing to checkpoint
        "; the budget holds every step's tape, so the plan recomputes nothing: it is the plain "
        "gradient (a smaller --budget checkpoints)"
        if ckpt.counters.steps_advanced == 0
        else ""
    )
    return (
        f"plan: predicted {predicted:.3g} s and {fmt_size(ckpt.plan.peak_bytes)} "
        f"stored; measured {wall:.3g} s ({wall / predicted - 1:+.0%}{fastest}), "
        f"{fmt_size(ckpt.counters.peak_stored_bytes)} stored by the executor"
        f"{_states_unlike_costs(result)}, {where}overhead {over} over baseline{kept_all}"
    )


def _states_unlike_costs(result: RunResult) -> str:
    """Where the costs planned with size the first state unlike the state the checkpointed
    worker really started from (a ``--costs`` file of other sizes, another model or dtype):
    the executor counts a snapshot at the costs' bytes, so its stored bytes (and the plan's)
    follow the costs, not the states. Empty when they agree or either is unknown."""
    from ckptbench.schedules.optimal import Costs

    for m in result.modes:
        real, doc = m.counters.get("state_bytes"), m.plan.get("costs")
        if m.mode is not Mode.CHECKPOINTED or not m.ok or real is None or doc is None:
            continue
        try:
            planned = Costs.from_dict(doc).per_step(result.case.steps)[2][0]
        except (ValueError, IndexError):
            return ""
        if planned != real:
            return (
                f" as the costs size its states, not as they are (the first state: "
                f"{fmt_size(planned)} in the costs, {fmt_size(real)} here)"
            )
        return ""
    return ""


def floor_line(result: RunResult) -> str | None:
    """The recomputation floor beside the measurement (``results.summary``'s definition),
    or why a peer has none (``floor_note``: its evaluations uncounted or not whole). Says
    what priced the extra evaluations (``floor_basis``): the plan's per-layer costs, with
    the mean layer's floor beside it, or the mean layer (the forward-only time per step),
    which a built-in recurrence, whose steps are alike and no layers, says as 'every step
    alike'."""
    s, steps = result.summary, result.case.steps
    floor, ev = s.floor_time_s, s.step_evaluations
    base = s.mode(Mode.BASELINE).time
    plain = s.mode(Mode.NORMAL).time
    if s.floor_note is not None and s.mode(Mode.CHECKPOINTED).time is not None:
        return f"recomputation floor: none for {result.case.strategy}: {s.floor_note}"
    if floor is None or s.vs_floor is None or ev is None or base is None or plain is None:
        return None
    extra, step = max(ev - steps, 0), base.median / steps
    if s.floor_basis == PER_LAYER:
        priced = (
            f"{extra} extra evaluations, {fmt_time(floor - plain.median)} at their layers' "
            f"shares of the forward-only time; the floor at the mean layer's "
            f"{fmt_per_step(step)} each: "
            f"{fmt_time(plain.median + extra * step)}"
        )
    else:
        priced = f"{extra} extra evaluations x {fmt_per_step(step)}, the forward-only step"
    return (
        f"recomputation floor: {fmt_time(floor)} ({_basis(result)}: plain "
        f"{fmt_time(plain.median)} + {priced}); checkpointed "
        f"{fmt_time(s.mode(Mode.CHECKPOINTED).time.median)}, "
        f"{figure_apart(s.vs_floor, 1.0)}x the floor{_rounds(s.floor_ratio)}"
        + (
            " (below it: its taped steps cost less than the plain gradient, or a recomputed "
            "step less than a forward-only one; the floor is an estimate)"
            if s.vs_floor < 1
            else ""
        )
    )


def _basis(result: RunResult) -> str:
    """The floor's basis as the line says it: ``floor_basis``, but 'every step alike' for a
    built-in recurrence (the RNN, the LSTM), where 'mean layer' named layers it has not."""
    entry = builtin(result.case.model)
    if result.summary.floor_basis == PER_LAYER or entry is None or entry.chain:
        return str(result.summary.floor_basis)
    return "every step alike"


def _rounds(r: Ratio | None) -> str:
    """`` [low, high] (rounds 1.09x, 1.00x)``: the floor ratio's interval (compare's ``vs
    floor [95%]``, one round's too) and, with two rounds or more, each round's (each round's
    floor from its own workers)."""
    if r is None or r.interval is None:
        return ""
    shown = f" {fmt_interval(r.low, r.high, center=r.value)}"
    if r.rounds < 2 or not r.per_round:
        return shown
    rounds = ", ".join(f"{v:.2f}x" for v in r.per_round)
    return f"{shown} (rounds {rounds})"
