"""The budget planner's plans: the fastest schedule of states *and* tapes in a byte budget.

Revolve (Griewank & Walther, ACM TOMS 26(1), 2000) is optimal when a schedule may store only
states. An executor may also keep a step's tape (all its reverse needs) until that step is
reversed, which is what segment checkpointing does with a whole segment. :func:`plan_optimal`
solves the dynamic program of :mod:`ckptbench.schedules.optimal.dp` (Beaumont et al., 2019),
emits its stream (:mod:`~ckptbench.schedules.optimal.emit`) and scores it with the cost
model every stream shares (:mod:`ckptbench.schedules.cost_model`). The checks here refuse,
before anything is measured, a plan too large to compute or a budget no schedule fits.

numpy is imported only when a plan is solved (``import ckptbench.schedules`` stays light).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any

from ckptbench.results.units import MAX_BYTES, size_text
from ckptbench.schedules.actions import Action, ActionKind, ScheduleError, check_int
from ckptbench.schedules.cost_model import Prediction, predict
from ckptbench.schedules.fates import step_fates
from ckptbench.schedules.optimal.costs import Costs, PlanError, costs_from_json

__all__ = [  # with the names this module had before the package was split
    "DEFAULT_LEVELS",
    "MAX_PLAN_UPDATES",
    "Costs",
    "Plan",
    "PlanError",
    "Prediction",
    "check_budget",
    "check_plannable",
    "costs_from_json",
    "holds_store_all",
    "min_budget_bytes",
    "plan_estimate",
    "plan_optimal",
    "predict",
    "store_all_peak",
]

DEFAULT_LEVELS = 512
#: Plans whose dynamic program needs more table updates than this are refused before anything
#: is measured (about 10 minutes on the 2-core machine of docs/architecture.md, which managed
#: about 4e7 updates/s: l = 1000 homogeneous at 512 levels, 2.6e8 updates, took 8 s there).
MAX_PLAN_UPDATES = 2 * 10**10
#: A budget that holds every tape plans without a table (:func:`holds_store_all`), but its
#: plan is a stream of two actions a step, held and replayed, and ``plan`` replays Revolve
#: and equal segments beside it: about 1 KiB and 20 µs a step in all (10**6 steps: 1.1 GB,
#: 21 s on the 2-core machine). Longer chains are refused (about 4 minutes and 10 GiB).
MAX_STREAM_STEPS = 10**7
STREAM_BYTES_PER_STEP = 1024


@dataclass(frozen=True)
class Plan:
    """The minimum-time schedule for ``costs`` on ``steps`` steps within ``budget_bytes``."""

    steps: int
    budget_bytes: int
    costs: Costs = field(repr=False)
    action_list: tuple[Action, ...] = field(repr=False)
    predicted_time_s: float
    peak_bytes: int
    prediction: Prediction = field(repr=False)
    quantum_bytes: int  # memory granularity of the dynamic program
    exact: bool  # True when the quantum divides every size (no rounding)
    slots: int  # snapshot slots the schedule uses (slot indices 0..slots-1)
    #: "program" (the dynamic program's plan), or the strategy set by snaps whose stream
    #: fitted the budget in exact bytes and ran faster than the rounded program's plan, or
    #: fitted where the rounded program had none.
    chosen: str = "program"

    def actions(self) -> Iterator[Action]:
        """A fresh iterator over the schedule (the executor calls this once per sweep)."""
        return iter(self.action_list)

    def summary(self) -> dict[str, Any]:
        """JSON-able figures: predicted time, peak and counts (no actions); ``step_advances``:
        each step's untaped runs, its recomputations, by a replay of the stream (what the
        recomputation floor prices at the costs' forward time per step)."""
        p = self.prediction
        return {
            "steps": self.steps,
            "budget_bytes": self.budget_bytes,
            "predicted_time_s": self.predicted_time_s,
            "peak_bytes": self.peak_bytes,
            "advances": p.advances,
            "tapes_kept": p.tapes_kept,
            "peak_tapes": p.peak_tapes,
            "snapshots": p.snapshots,
            "peak_snapshots": p.peak_snapshots,
            "slots": self.slots,
            "quantum_bytes": self.quantum_bytes,
            "exact": self.exact,
            "chosen": self.chosen,
            "costs": self.costs.as_dict(),
            "step_advances": [f.advances for f in step_fates(self.action_list, self.steps)],
        }


def plan_optimal(
    costs: Costs, steps: int, budget_bytes: int, *, levels: int = DEFAULT_LEVELS
) -> Plan:
    """Minimum-time schedule (states and kept tapes) whose storage peak fits ``budget_bytes``.

    ``levels`` bounds the memory levels of the dynamic program (see the module docstring for
    the granularity and its effect). Plans are cached by their (hashable) inputs. Raises
    :class:`PlanError` when no schedule fits (the budget must hold at least x_0 and a tape).
    Homogeneous l = 1000 at 512 levels plans in about a second; heterogeneous chains cost
    O(l^3 M) and suit a few hundred steps.
    """
    if not isinstance(costs, Costs):
        raise PlanError(f"costs must be a Costs, got {type(costs).__name__}")
    check_int("steps", steps)
    check_int("budget_bytes", budget_bytes, minimum=0)
    check_int("levels", levels)
    costs.per_step(steps)  # length check
    return _plan_cached(costs, steps, budget_bytes, levels)


def plan_estimate(
    steps: int, homogeneous: bool = True, levels: int = DEFAULT_LEVELS
) -> tuple[int, int]:
    """(table updates, table bytes) of the dynamic program for ``steps`` steps, at most
    ``levels`` + 1 memory levels wide: homogeneous l^2/2 x width updates and (l + 1) x width
    x 32 bytes (two float64 values, two int32 choices, one working row block); heterogeneous
    l^3/6 x width updates and l^2/2 x width x 24 bytes."""
    width = levels + 1
    if homogeneous:
        return steps * steps // 2 * width, 32 * (steps + 1) * width
    return steps**3 // 6 * width, 12 * steps * steps * width


def store_all_peak(costs: Costs, steps: int) -> int:
    """The storage peak of the plan that keeps every tape (:func:`_tape_all`), in exact
    bytes, from the costs alone: every tape at once at its first turn, no state stored (the
    cost model's replay of that stream says the same; a test holds them equal)."""
    if costs.steps is None:  # homogeneous: no per-step lists (steps may be 2**31)
        check_int("steps", steps)
        return costs.tape_bytes * steps  # type: ignore[operator]
    return sum(costs.per_step(steps)[3])


def holds_store_all(costs: Costs, steps: int, budget_bytes: int) -> bool:
    """Whether ``budget_bytes`` holds the keep-every-tape plan: then it is the optimal plan
    (every step is taped once whatever the schedule, and it advances none), found without a
    table however long the chain (:func:`check_plannable`, :func:`plan_optimal`)."""
    return store_all_peak(costs, steps) <= budget_bytes


def check_plannable(
    steps: int, costs: Costs | None = None, *, budget_bytes: int | None = None,
    memory_bytes: int | None = None, levels: int = DEFAULT_LEVELS, per_step: bool = False,
) -> None:  # fmt: skip
    """:class:`PlanError` with the estimate when planning ``steps`` steps would need more than
    :data:`MAX_PLAN_UPDATES` table updates or more than half of ``memory_bytes`` (default:
    this machine's memory). Without ``costs`` the chain is taken as homogeneous (a
    recurrence's measured costs are) unless ``per_step`` (a layer stack's are per layer);
    call it again once costs are measured. With ``costs`` and ``budget_bytes``: a budget
    that holds every tape needs no table (:func:`holds_store_all`; its stream is held to
    :data:`MAX_STREAM_STEPS`), and one below the least any plan needs is refused first, as
    :func:`check_budget` refuses it (no table says it better)."""
    if memory_bytes is None:
        import psutil

        memory_bytes = int(psutil.virtual_memory().total)
    if costs is not None and budget_bytes is not None:
        if holds_store_all(costs, steps, budget_bytes):
            return _check_stream(steps, memory_bytes)
        check_budget(costs, steps, budget_bytes)
    homogeneous = costs.steps is None if costs is not None else not per_step
    updates, table_bytes = plan_estimate(steps, homogeneous, levels)
    kind = "homogeneous" if homogeneous else "per-step (heterogeneous)"
    what = (
        f"planning {steps} steps with {kind} costs needs about {updates:.1e} table updates "
        f"and {table_bytes / 2**30:,.1f} GiB of tables"
    )
    fewer = "use fewer steps" + (
        ", or step costs (--costs) with a budget that holds every tape (no table then)"
        if costs is None and budget_bytes is not None
        else f", or a budget of {_bytes(store_all_peak(costs, steps))} or more (it holds every "
        "tape: no table then)"
        if costs is not None
        else ""
    )
    if table_bytes > memory_bytes // 2:
        raise PlanError(f"{what}, more than half of this machine's "
                        f"{memory_bytes / 2**30:.1f} GiB; {fewer}")  # fmt: skip
    if updates > MAX_PLAN_UPDATES:
        raise PlanError(f"{what}, over the limit of {MAX_PLAN_UPDATES:.0e} (about 10 minutes "
                        f"here); {fewer}")  # fmt: skip


def _check_stream(steps: int, memory_bytes: int) -> None:
    """:class:`PlanError` when the keep-every-tape plan of ``steps`` steps is too long a
    stream to hold and replay (:data:`MAX_STREAM_STEPS`, :data:`STREAM_BYTES_PER_STEP`)."""
    need = steps * STREAM_BYTES_PER_STEP
    what = f"keeping every tape of {steps} steps is a plan of {2 * steps:.1e} actions"
    if need > memory_bytes // 2:
        raise PlanError(f"{what}, about {need / 2**30:,.1f} GiB with its replays, more than "
                        f"half of this machine's {memory_bytes / 2**30:.1f} GiB; use fewer "
                        "steps")  # fmt: skip
    if steps > MAX_STREAM_STEPS:
        raise PlanError(f"{what}, over the limit of {MAX_STREAM_STEPS:.0e} steps (about 4 "
                        "minutes here); use fewer steps")  # fmt: skip


def min_budget_bytes(costs: Costs, steps: int, levels: int = DEFAULT_LEVELS) -> int:
    """The smallest budget :func:`plan_optimal` plans with (below it no schedule fits; see
    :func:`ckptbench.schedules.optimal.dp.min_budget_bytes`)."""
    from ckptbench.schedules.optimal import dp

    return dp.min_budget_bytes(costs, steps, levels)


def check_budget(costs: Costs, steps: int, budget_bytes: int) -> None:
    """:class:`PlanError` naming the smallest budget that works when the planner has no plan
    within ``budget``: none fits at all (below the least storage peak any schedule has), or
    one fits but the planner's memory quanta round it over (it then says so); or none that
    no budget can be, 2**62 B and more (:data:`~ckptbench.results.units.MAX_BYTES`)."""
    from ckptbench.schedules.optimal import dp

    if holds_store_all(costs, steps, budget_bytes):
        return
    least = _least_planned(costs, steps, DEFAULT_LEVELS)
    if budget_bytes >= least:
        return
    exact = dp.least_storage_of(costs, steps)
    if least >= MAX_BYTES:  # no budget to name: every budget is below it (Case, --budget)
        raise PlanError(
            f"no schedule of {steps} steps can be planned within a budget below 2**62 bytes "
            f"(the limit of --budget): the least storage peak is {_bytes(exact)}"
        )
    if budget_bytes < exact:
        if least > exact:  # name the budget that plans, not one refused by the next line
            raise PlanError(
                f"no schedule of {steps} steps fits in a budget of {_bytes(budget_bytes)}; the "
                f"smallest budget that works is {_bytes(least)} (the least storage peak is "
                f"{_bytes(exact)}, and the planner rounds sizes to memory quanta)"
            )
        raise PlanError(
            f"no schedule of {steps} steps fits in a budget of {_bytes(budget_bytes)}; the "
            f"smallest budget that works is {_bytes(exact)}"
        )
    raise PlanError(
        f"a schedule of {steps} steps fits in {_bytes(budget_bytes)} (the least storage "
        f"peak is {_bytes(exact)}), but the planner rounds sizes to memory quanta and plans "
        f"from {_bytes(least)}: give that budget"
    )


def _least_planned(costs: Costs, steps: int, levels: int) -> int:
    """The least budget :func:`plan_optimal` plans with: the least of the dynamic program's
    (its sizes rounded to memory quanta), the keep-every-tape plan's peak and Revolve's
    one-slot peak (both planned in exact bytes). Each plans every budget above its own."""
    from ckptbench.schedules.optimal import dp

    least = (dp.min_budget_bytes(costs, steps, levels), _state_only_least(costs, steps))
    return min(*least, store_all_peak(costs, steps))


def _state_only_least(costs: Costs, steps: int) -> int:
    """The storage peak of Revolve with one slot, the least budget at which a state-only
    schedule fits in exact bytes: x_0 kept while each step's tape is taped and reversed
    (its stream is quadratic in ``steps``; a test replays it against this sum)."""
    if costs.steps is None:  # homogeneous: no per-step lists
        return costs.state_bytes + costs.tape_bytes  # type: ignore[operator]
    _, _, sb, tb = costs.per_step(steps)
    return sb[0] + max(tb)


def _bytes(n: int) -> str:
    """A budget as typed in bytes and in the unit a user would type: '2.00 MiB (2097152 B)'."""
    return f"{size_text(n)} ({n} B)" if n >= 1024 else f"{n} B"


@lru_cache(maxsize=64)
def _plan_cached(costs: Costs, steps: int, budget_bytes: int, levels: int) -> Plan:
    from ckptbench.schedules.optimal import dp
    from ckptbench.schedules.optimal.emit import emit

    if holds_store_all(costs, steps, budget_bytes):  # no schedule is faster: no table
        tape_all = _as_plan(_tape_all(steps), costs, steps, budget_bytes, 1, True)
        if tape_all.peak_bytes <= budget_bytes:  # store_all_peak's, replayed
            return tape_all
    solution = dp.solve(costs, steps, budget_bytes, levels)
    if not solution.feasible:  # rounding can leave no plan where Revolve fits in exact bytes
        rival = _state_only_rival(costs, steps, budget_bytes, solution.quantum_bytes)
        if rival is not None:
            return rival
        least = _least_planned(costs, steps, levels)
        raise PlanError(
            f"no schedule of {steps} steps fits in a budget of {_bytes(budget_bytes)}; the "
            f"smallest budget that works is {_bytes(least)}"
        )
    plan = _as_plan(
        tuple(emit(solution)), costs, steps, budget_bytes, solution.quantum_bytes, solution.exact
    )
    if plan.peak_bytes > budget_bytes:  # pragma: no cover - rounding up makes this impossible
        raise ScheduleError(f"plan peak {plan.peak_bytes} B exceeds budget {budget_bytes} B")
    return plan if plan.exact else _unrounded_rivals(plan, costs, steps, budget_bytes)


def _unrounded_rivals(plan: Plan, costs: Costs, steps: int, budget_bytes: int) -> Plan:
    """The fastest of a rounded plan and the state-only schedules that fit the budget in
    exact bytes: Revolve (optimal among them, Griewank & Walther 2000) and equal segments,
    each at the most slots that fit. Rounding every size up to the quantum can leave the
    program slower than Revolve at the same budget, and slower than at a smaller budget
    whose sizes rounded less; with the rivals, a plan is never slower than either."""
    rival = _state_only_rival(costs, steps, budget_bytes, plan.quantum_bytes)
    return rival if rival is not None and rival.predicted_time_s < plan.predicted_time_s else plan


def _state_only_rival(costs: Costs, steps: int, budget_bytes: int, quantum: int) -> Plan | None:
    """The faster of Revolve and equal segments, each at the most slots that fit
    ``budget_bytes`` in exact bytes (``chosen`` names it), or None when neither fits."""
    from ckptbench.schedules.cost_model import largest_fitting
    from ckptbench.schedules.revolve import schedule as revolve_schedule
    from ckptbench.schedules.uniform import uniform_schedule

    best = None
    for name, make in (("revolve", revolve_schedule), ("uniform", uniform_schedule)):
        found = largest_fitting(lambda s, make=make: make(steps, s), steps, costs, budget_bytes)
        if found is not None and (best is None or found[1].time_s < best.predicted_time_s):
            acts = tuple(make(steps, found[0]))
            best = replace(_as_plan(acts, costs, steps, budget_bytes, quantum, False), chosen=name)
    return best


def _as_plan(
    acts: tuple[Action, ...], costs: Costs, steps: int, budget_bytes: int, quantum: int, exact: bool
) -> Plan:
    """``acts`` as a :class:`Plan`, scored by the cost model."""
    pred = predict(acts, steps, costs)
    slots = 1 + max((a.slot for a in acts if a.kind is ActionKind.TAKESHOT), default=-1)
    return Plan(
        steps=steps,
        budget_bytes=budget_bytes,
        costs=costs,
        action_list=acts,
        predicted_time_s=pred.time_s,
        peak_bytes=pred.peak_bytes,
        prediction=pred,
        quantum_bytes=quantum,
        exact=exact,
        slots=slots,
    )


def _tape_all(steps: int) -> tuple[Action, ...]:
    """The schedule that keeps every tape: no schedule is faster (each step is taped once
    whatever the schedule, and this one advances none). The dynamic program rounds sizes up
    to its memory quantum, which with many small tapes can leave it far short of this plan
    however large the budget (2 000 tapes of 4 KiB in 512 levels), so where it fits in exact
    bytes the program is not asked."""
    return (
        *(Action(ActionKind.TAPE, step=i) for i in range(steps - 1)),
        Action(ActionKind.FIRSTURN, step=steps - 1),
        *(Action(ActionKind.REVERSE, step=i) for i in range(steps - 2, -1, -1)),
        Action(ActionKind.TERMINATE),
    )
