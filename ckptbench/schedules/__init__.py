"""Checkpointing schedules: one action vocabulary, one module per family, one registry.

* :mod:`~ckptbench.schedules.actions` — the vocabulary, :func:`replay` and
  :func:`replay_bytes`;
* :mod:`~ckptbench.schedules.strategy` — :class:`StrategySpec`, what a strategy answers for
  itself;
* :mod:`~ckptbench.schedules.revolve` — binomial checkpointing (Griewank & Walther,
  Algorithm 799, 2000) and its closed forms;
* :mod:`~ckptbench.schedules.uniform` — equal segments (the sqrt(n) strategy);
* :mod:`~ckptbench.schedules.storeall` — every state kept;
* :mod:`~ckptbench.schedules.optimal` — the budget planner (costs, dynamic program, plans);
* :mod:`~ckptbench.schedules.peers` — the frameworks' own checkpointing;
* :mod:`~ckptbench.schedules.cost_model` — one cost model scoring any stream, and
  :mod:`~ckptbench.schedules.compare` — the strategies compared at a byte budget.

Every list of strategies in ckptbench reads :data:`STRATEGIES` (docs/architecture.md,
"Strategies and backends"); :func:`register` adds one (a plug-in's, a test's). Pure: no
arrays, no I/O.
"""

from __future__ import annotations

from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

from ckptbench.schedules.actions import (
    Action,
    ActionKind,
    ByteReplay,
    ReplayStats,
    ScheduleError,
    advances_within,
    check_int,
    replay,
    replay_bytes,
)
from ckptbench.schedules.optimal import OPTIMAL
from ckptbench.schedules.peers import EQUINOX, JAX_CHECKPOINT, STACK_PEERS, TORCH_CHECKPOINT
from ckptbench.schedules.revolve import (
    REVOLVE,
    beta,
    optimal_forward_steps,
    repetition_number,
    schedule,
)
from ckptbench.schedules.storeall import STORE_ALL, store_all_schedule
from ckptbench.schedules.strategy import ClosedForm, RunsStreams, Setting, StrategySpec
from ckptbench.schedules.uniform import UNIFORM, uniform_schedule

__all__ = [
    "OPTIMAL",
    "REVOLVE",
    "STORE_ALL",
    "STRATEGIES",
    "UNIFORM",
    "Action",
    "ActionKind",
    "ByteReplay",
    "ClosedForm",
    "ReplayStats",
    "ScheduleError",
    "Setting",
    "StrategySpec",
    "advances_within",
    "beta",
    "check_int",
    "get_strategy",
    "make_schedule",
    "model_kind_refusal",
    "optimal_forward_steps",
    "plan_from",
    "register",
    "repetition_number",
    "replay",
    "replay_bytes",
    "schedule",
    "store_all_schedule",
    "strategy_names",
    "uniform_schedule",
]

#: Every strategy, ours first (action streams, then the planner), then the peers.
STRATEGIES: dict[str, StrategySpec] = {
    s.name: s
    for s in (
        REVOLVE, UNIFORM, STORE_ALL, OPTIMAL, TORCH_CHECKPOINT, JAX_CHECKPOINT, EQUINOX,
        *STACK_PEERS,
    )
}  # fmt: skip


def register(spec: StrategySpec) -> StrategySpec:
    """Add ``spec`` to :data:`STRATEGIES` (a name registers once); returns it."""
    if not isinstance(spec, StrategySpec):
        raise TypeError(f"a strategy is a StrategySpec, got {type(spec).__name__}")
    if STRATEGIES.get(spec.name, spec) is not spec:
        raise ValueError(f"strategy {spec.name!r} is already registered")
    STRATEGIES[spec.name] = spec
    return spec


def get_strategy(name: str | StrategySpec) -> StrategySpec:
    """The strategy called ``name``; a one-line ``ValueError`` naming the choices otherwise."""
    if isinstance(name, StrategySpec):
        return name
    spec = STRATEGIES.get(name) if isinstance(name, str) else None
    if spec is None:
        raise ValueError(f"unknown strategy {name!r} (choose from {', '.join(STRATEGIES)})")
    return spec


def strategy_names(backend: RunsStreams | None = None, *, ours: bool | None = None) -> list[str]:
    """Names of the strategies (those ``backend`` runs: a backend's spec, which the caller
    looks up: the schedules never import the backends; only ours or only peers)."""
    return [
        s.name
        for s in STRATEGIES.values()
        if (backend is None or s.runs_on(backend)) and (ours is None or s.ours is ours)
    ]


def model_kind_refusal(strategy: str, backend: RunsStreams, model: str, chain: bool) -> str | None:
    """Why ``strategy`` cannot checkpoint ``model`` on ``backend`` (a layer chain with
    ``chain``, else a recurrence), naming what that kind of model runs there; None where it
    can. The one statement of the rule, for the case check and a backend's chain loop."""
    spec = get_strategy(strategy)
    if chain and not spec.runs_chains:
        runs = [n for n in strategy_names(backend) if get_strategy(n).runs_chains]
        return (
            f"strategy {spec.name} checkpoints recurrences only, and --model {model} is a "
            f"layer chain (on {backend.name} a chain runs {', '.join(runs)})"
        )
    if not chain and not spec.runs_recurrences:
        runs = [n for n in strategy_names(backend) if get_strategy(n).runs_recurrences]
        return (
            f"strategy {spec.name} checkpoints layer chains only, and --model {model} is a "
            f"recurrence (on {backend.name} a recurrence runs {', '.join(runs)})"
        )
    return None


def plan_from(
    strategy: str | StrategySpec | None, steps: int, *, plan: Any = None, costs: Any = None,
    budget_bytes: int | None = None,
) -> Any:  # fmt: skip
    """The plan a binding runs: ``plan`` as given, or the one a planned strategy makes from
    ``costs`` and ``budget_bytes`` (:meth:`StrategySpec.plan_for`; ``strategy`` None means
    :data:`OPTIMAL`); None where neither is given."""
    if costs is None and budget_bytes is None:
        return plan
    if plan is not None:
        raise ValueError("give either plan or costs and budget_bytes, not both")
    if costs is None or budget_bytes is None:
        raise ValueError("costs and budget_bytes go together")
    spec = OPTIMAL if strategy is None else get_strategy(strategy)
    if not spec.planned:
        raise ValueError(f"costs and budget_bytes make a plan; strategy {spec.name} runs none")
    sized = SimpleNamespace(steps=check_int("steps", steps), budget_bytes=budget_bytes)
    return spec.plan_for(sized, costs)


def make_schedule(strategy: str | StrategySpec, steps: int, snaps: int) -> Iterator[Action]:
    """The action stream of a strategy set by snaps (revolve, uniform, store-all)."""
    spec = get_strategy(strategy)
    if spec.stream is None:
        why = (
            f"needs step costs and a byte budget: its plan comes from {spec.planner.__module__}"
            if spec.planned
            else "is a framework's own checkpointing, not an action stream"
        )
        raise ValueError(f"strategy {spec.name} {why}")
    check_int("steps", steps)
    check_int("snaps", snaps)
    return spec.stream(steps, snaps)
