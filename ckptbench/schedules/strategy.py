"""What a checkpointing strategy is, as every part of ckptbench needs to know it.

One :class:`StrategySpec` per strategy carries its properties: its name, what it is set by
(snapshot slots, a peer's segments or a byte budget), which backends run it, how its
action stream is made (``None`` for the frameworks' own checkpointing, which is not ours),
and the step counts it plans where they are known. The registry in
:mod:`ckptbench.schedules` holds one per strategy; Case validation, the CLI's choices, the
sweep's ETA, the gate, the summary, the plots and the configs all read it instead of
keeping their own lists (docs/architecture.md, "Strategies and backends").

Pure: no arrays, no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

from ckptbench.schedules.actions import Action, replay

__all__ = ["ALL_BACKENDS", "ENUMERATE_STEPS", "Setting", "StrategySpec"]

#: Backends that run our action streams (every backend has the one interpreter or compiles it).
ALL_BACKENDS: frozenset[str] = frozenset({"autograd", "torch", "jax"})

#: Above this many steps a schedule without a closed form is not enumerated for estimates.
ENUMERATE_STEPS = 100_000


class Setting(Enum):
    """What one point of a strategy's trade-off is set by."""

    SNAPS = "snaps"  # snapshot slots, including the one holding x_0
    SEGMENTS = "segments"  # a peer's equal segments (given as --snaps)
    CHECKPOINTS = "checkpoints"  # a peer's online checkpoints (equinox; given as --snaps)
    BUDGET = "budget"  # bytes for states and tapes (--budget)


@dataclass(frozen=True)
class StrategySpec:
    """One checkpointing strategy and its properties.

    ``stream(steps, snaps)`` makes the action stream of a strategy set by snaps; the budget
    planner's stream comes from a plan instead (``planned`` is True) and a peer has none.
    ``advances(steps, snaps)`` is the exact closed form of untaped advances where one
    exists.
    """

    name: str
    label: str  # for tables and plot legends
    marker: str  # matplotlib marker of its points
    setting: Setting
    backends: frozenset[str]
    help: str  # one line for --help
    stream: Callable[[int, int], Iterator[Action]] | None = None
    advances: Callable[[int, int], int] | None = None
    lower_bound: Callable[[int, int], int] | None = None  # advances no schedule goes below
    planned: bool = (
        False  # the stream comes from ckptbench.schedules.optimal.planner (states and tapes)
    )
    requires: tuple[str, ...] = ()  # packages a peer needs beyond its backend's framework

    def missing(self) -> str | None:
        """None when every package this strategy needs can be imported, else one line."""
        import importlib.util

        for package in self.requires:
            if importlib.util.find_spec(package) is None:
                return f"--strategy {self.name} needs {package}: pip install 'ckptbench[{package}]'"
        return None

    @property
    def ours(self) -> bool:
        """True for the action streams ckptbench's executors run (not a framework's own)."""
        return self.stream is not None or self.planned

    def effective_snaps(self, steps: int, snaps: int) -> int:
        """The slots (or segments) a run of ``steps`` really uses."""
        return min(snaps, steps)

    def step_counts(
        self, steps: int, snaps: int, plan: Mapping[str, Any] | None = None
    ) -> tuple[int, int] | None:
        """(untaped advances, taped steps) the executor must count for one gradient, or
        None where the strategy has no step count of ours (a peer; a plan not recorded).

        The closed form where there is one, else a replay of the stream; a plan's own
        count (``plan["advances"]``) for the budget planner. Every step is taped once.
        """
        if self.planned:
            advances = (plan or {}).get("advances")
            ok = isinstance(advances, int) and not isinstance(advances, bool)
            return (advances, steps) if ok else None
        if self.stream is None:
            return None
        s = self.effective_snaps(steps, snaps)
        if self.advances is not None:
            return self.advances(steps, s), steps
        stats = replay(self.stream(steps, s), steps)
        return stats.advances, stats.taped

    def estimated_advances(self, steps: int, snaps: int) -> int:
        """Untaped advances for an estimate (the sweep's ETA): exact where cheap, else the
        lower bound, else one extra sweep (``steps``) for plans and peers."""
        s = self.effective_snaps(steps, snaps)
        if self.advances is not None:
            return self.advances(steps, s)
        if self.stream is not None and steps <= ENUMERATE_STEPS:
            return replay(self.stream(steps, s), steps).advances
        if self.lower_bound is not None:
            return self.lower_bound(steps, s)
        return steps

    def optimum_advances(
        self, steps: int, snaps: int, plan: Mapping[str, Any] | None = None
    ) -> int | None:
        """The advances to compare a run with: a plan's own count for the budget planner,
        the binomial optimum t(l, s) for a stream set by snaps (exact for Revolve and
        store-all, a lower bound for others), None for a peer."""
        if self.planned:
            counts = self.step_counts(steps, snaps, plan)
            return None if counts is None else counts[0]
        if self.stream is None or self.lower_bound is None:
            return None
        return self.lower_bound(steps, self.effective_snaps(steps, snaps))

    def setting_of(self, snaps: int, budget_bytes: int | None) -> int:
        """The value this strategy is set by: the budget, else snaps (or segments)."""
        if self.setting is Setting.BUDGET:
            return int(budget_bytes or 0)
        return snaps
