"""Checkpointing schedules: one action vocabulary, one module per family, one registry.

* :mod:`~ckptbench.schedules.actions` — the vocabulary, :func:`replay` and
  :func:`replay_bytes`;
* :mod:`~ckptbench.schedules.revolve` — binomial checkpointing (Griewank & Walther,
  Algorithm 799, 2000) and its closed forms;
* :mod:`~ckptbench.schedules.uniform` — equal segments (the sqrt(n) strategy);
* :mod:`~ckptbench.schedules.storeall` — every state kept;
* :mod:`~ckptbench.schedules.optimal` — the budget planner (Beaumont et al., 2019);
* :mod:`~ckptbench.schedules.peers` — the frameworks' own checkpointing.

Every list of strategies in ckptbench reads :data:`STRATEGIES` (docs/architecture.md,
"Strategies and backends"). Pure: no arrays, no I/O.
"""

from __future__ import annotations

from collections.abc import Iterator

from ckptbench.schedules.actions import (
    Action,
    ActionKind,
    ByteReplay,
    ReplayStats,
    ScheduleError,
    check_int,
    replay,
    replay_bytes,
)
from ckptbench.schedules.optimal import OPTIMAL
from ckptbench.schedules.peers import EQUINOX, JAX_CHECKPOINT, TORCH_CHECKPOINT
from ckptbench.schedules.revolve import (
    REVOLVE,
    beta,
    optimal_forward_steps,
    repetition_number,
    schedule,
)
from ckptbench.schedules.storeall import STORE_ALL, store_all_schedule
from ckptbench.schedules.strategy import Setting, StrategySpec
from ckptbench.schedules.uniform import UNIFORM, uniform_schedule

__all__ = [
    "STRATEGIES",
    "Action",
    "ActionKind",
    "ByteReplay",
    "ReplayStats",
    "ScheduleError",
    "Setting",
    "StrategySpec",
    "beta",
    "check_int",
    "get_strategy",
    "make_schedule",
    "optimal_forward_steps",
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
    for s in (REVOLVE, UNIFORM, STORE_ALL, OPTIMAL, TORCH_CHECKPOINT, JAX_CHECKPOINT, EQUINOX)
}


def get_strategy(name: str | StrategySpec) -> StrategySpec:
    """The strategy called ``name``; a one-line ``ValueError`` naming the choices otherwise."""
    if isinstance(name, StrategySpec):
        return name
    spec = STRATEGIES.get(name) if isinstance(name, str) else None
    if spec is None:
        raise ValueError(f"unknown strategy {name!r} (choose from {', '.join(STRATEGIES)})")
    return spec


def strategy_names(backend: str | None = None, *, ours: bool | None = None) -> list[str]:
    """Names of the strategies (those ``backend`` runs; only ours or only peers)."""
    return [
        s.name
        for s in STRATEGIES.values()
        if (backend is None or backend in s.backends) and (ours is None or s.ours is ours)
    ]


def make_schedule(strategy: str | StrategySpec, steps: int, snaps: int) -> Iterator[Action]:
    """The action stream of a strategy set by snaps (revolve, uniform, store-all)."""
    spec = get_strategy(strategy)
    if spec.stream is None:
        why = (
            "needs step costs and a byte budget: see ckptbench.schedules.optimal.planner"
            if spec.planned
            else "is a framework's own checkpointing, not an action stream"
        )
        raise ValueError(f"strategy {spec.name} {why}")
    check_int("steps", steps)
    check_int("snaps", snaps)
    return spec.stream(steps, snaps)
