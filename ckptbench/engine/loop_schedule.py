"""A checkpointed loop's schedule: the strategy's action stream and the bytes it declares.

:func:`loop_schedule` validates a loop's arguments (steps, snaps, strategy, or a plan made
before the loop by :func:`ckptbench.schedules.plan_from`) with the same one-line errors on
every backend; :class:`LoopSchedule` is what the interpreter
(:mod:`ckptbench.engine.interpreter`) runs: binomial Revolve (Griewank & Walther,
"Algorithm 799: Revolve", ACM TOMS 26(1), 2000), equal segments, store-all, or a budget
planner's plan (Beaumont et al., "Optimal checkpointing for heterogeneous chains", 2019)
with its per-step tape and state bytes. Pure: no arrays, no I/O.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ckptbench.engine.steps import StepOps
from ckptbench.schedules import (
    OPTIMAL,
    REVOLVE,
    Action,
    StrategySpec,
    check_int,
    get_strategy,
)

__all__ = ["LoopSchedule", "loop_schedule"]


@dataclass(frozen=True)
class LoopSchedule:
    """What a checkpointed loop runs: the strategy's action stream and its declared bytes."""

    steps: int
    snaps: int
    strategy: StrategySpec
    plan: Any = None  # the plan a planned strategy runs (its ``actions()``, ``summary()``)
    tape_bytes: tuple[int, ...] = ()  # declared bytes of each step's tape
    #: declared bytes of each state x_i (a plan's costs); empty: each stored state's own bytes
    state_bytes: tuple[int, ...] = ()

    def actions(self) -> Iterator[Action]:
        """A fresh action stream (the engine asks once per first sweep): the strategy's,
        for these steps and snaps or its plan."""
        return self.strategy.actions_for(self, self.plan)

    def tape_bytes_of(self, step: int) -> int:
        return self.tape_bytes[step]

    def state_bytes_of(self, step: int, state: Any, ops: StepOps) -> int:
        """The bytes a snapshot of x_step counts: the declared ones, else the state's own."""
        return self.state_bytes[step] if self.state_bytes else ops.state_nbytes(state)


def loop_schedule(
    steps: int,
    snaps: int | None = None,
    strategy: StrategySpec | str | None = None,
    *,
    plan: Any = None,
    tape_bytes: int = 0,
) -> LoopSchedule:
    """Validate a loop's schedule arguments (the same one-line errors on every backend).

    ``strategy`` defaults to revolve; a ``plan`` (made by a planned strategy before the loop
    is built: :func:`ckptbench.schedules.plan_from`) means that strategy, optimal by default,
    whose slots and tape bytes are the plan's. Otherwise ``snaps`` is needed and
    ``tape_bytes`` declares one tape's bytes for ``peak_stored_bytes``. The engine never
    plans: it runs the stream it is given.
    """
    steps = check_int("steps", steps)
    strat = get_strategy(REVOLVE if strategy is None else strategy)
    if plan is not None:
        return _planned_schedule(steps, OPTIMAL if strategy is None else strat, plan, tape_bytes)
    if strat.planned:
        raise ValueError(
            f"strategy {strat.name} needs a plan, or costs and budget_bytes to make one"
        )
    if not strat.ours:
        raise ValueError(f"strategy {strat.name} is a framework's own checkpointing, not ours")
    if snaps is None:
        raise ValueError(f"strategy {strat.name} needs snaps")
    snaps = check_int("snaps", snaps)
    declared = check_int("tape_bytes", tape_bytes, minimum=0)
    return LoopSchedule(steps, snaps, strat, None, (declared,) * steps)


def _planned_schedule(steps: int, strat: StrategySpec, plan: Any, tape_bytes: int) -> LoopSchedule:
    if not strat.planned:
        raise ValueError(f"a plan runs a planned strategy such as optimal, not {strat.name}")
    if tape_bytes:
        raise ValueError("a plan declares its own tape bytes")
    if not all(hasattr(plan, a) for a in ("actions", "steps", "slots", "costs")):
        raise ValueError(f"plan must be a strategy's plan, got {type(plan).__name__}")
    if plan.steps != steps:
        raise ValueError(f"plan is for {plan.steps} steps, not steps={steps}")
    tb, sb = plan.costs.tape_bytes, plan.costs.state_bytes
    per_step = tuple(tb) if isinstance(tb, tuple) else (tb,) * steps
    states = tuple(sb) if isinstance(sb, tuple) else (sb,) * steps
    return LoopSchedule(steps, max(1, plan.slots), strat, plan, per_step, states)
