"""What a checkpointing strategy is, as every part of ckptbench needs to know it.

One :class:`StrategySpec` per strategy answers for itself (checkpoint_schedules' shape: no
caller branches on a strategy's name): what it is set by (:class:`Setting`, with its unit
and labels), whether it uses ``--snaps``, how its action stream or plan is made
(:meth:`StrategySpec.actions_for`, :meth:`StrategySpec.plan_for`), its closed form where
one exists, whether ``plan`` compares it at a budget, whether it is the reference curve of
the trade-off plot, and which backends run it. A strategy is either *ours* (an action
stream or a plan, run by every backend whose spec says it runs action streams) or a *peer*
(a framework's own checkpointing, run by one backend through a factory named
``"module:function"`` that the backend resolves: one for recurrences, one for layer chains,
or both). The registry in
:mod:`ckptbench.schedules` holds one per strategy; Case validation, the CLI's choices, the
sweep's ETA, the gate, the summary, the plots and the configs read it instead of keeping
their own lists (docs/architecture.md, "Strategies and backends").

Pure: no arrays, no I/O, no backend names.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any, Protocol

from ckptbench.results.units import size_text
from ckptbench.schedules.actions import Action, replay

__all__ = ["ENUMERATE_STEPS", "ClosedForm", "Setting", "StrategySpec"]

#: Above this many steps a schedule without a closed form is not enumerated for estimates.
ENUMERATE_STEPS = 100_000


class Setting(Enum):
    """What one point of a strategy's trade-off is set by, with its unit and labels.

    ``unit``: what one value counts; ``point``: a plot point's label (``{}`` the value,
    bytes shown in MiB); ``phrase``: how a run's headline names the setting (``{value}``
    formatted by the caller, ``{name}`` and ``{label}`` the strategy's); ``clamp``: why a
    value above the steps is clamped to them.
    """

    SNAPS = ("snaps", "slots", "s={}", "{value} snaps ({name})", "never more slots than steps")
    SEGMENTS = (
        "segments", "segments", "{} seg", "{label}, {value} segments",
        "at most one segment per step",
    )  # fmt: skip  # a peer's equal segments (given as --snaps)
    CHECKPOINTS = (
        "checkpoints", "checkpoints", "{} ckpt", "{label}, {value} checkpoints",
        "at most one checkpoint per step",
    )  # fmt: skip  # a peer's online checkpoints (equinox; given as --snaps)
    BUDGET = ("budget", "bytes", "{}", "{name} within {value}", "")  # --budget

    def __new__(cls, value: str, unit: str, point: str, phrase: str, clamp: str) -> Setting:
        member = object.__new__(cls)
        member._value_ = value
        member.unit, member.point, member.phrase, member.clamp = unit, point, phrase, clamp
        return member

    @property
    def in_bytes(self) -> bool:
        """The value is a byte count (format it as bytes)."""
        return self.unit == "bytes"

    def point_label(self, value: int) -> str:
        """A plot point's label: ``s=5``, ``5 seg``, ``5 ckpt``, ``8 MiB``, ``3 KiB`` (a size
        in the unit that keeps it readable, three significant digits)."""
        if not self.in_bytes:
            return self.point.format(value)
        return self.point.format(size_text(value, compact=True))

    def describe(self, spec: StrategySpec, value: str) -> str:
        """The headline's words for a case set to ``value`` (already formatted)."""
        return self.phrase.format(name=spec.name, label=spec.label, value=value)


@dataclass(frozen=True)
class ClosedForm:
    """A strategy's counts from formulas alone, for any size (``s``: the effective snaps):
    each exactly what a replay of its stream counts (tests/test_revolve_peak.py and
    tests/test_hardening21_storeall.py check them)."""

    advances: Callable[[int, int], int]  # untaped advances t, first sweep included
    peak: Callable[[int, int], int]  # most snapshots held at once, as the replay counts
    repetitions: Callable[[int, int], int]  # r: the most advances of one step, likewise


class StreamCase(Protocol):
    """What a strategy's stream reads of a case (``results.schema.Case`` has it, and so do
    the engine's schedules; the schedules import nothing of the results)."""

    @property
    def steps(self) -> int: ...

    @property
    def snaps(self) -> int: ...


class PlannedCase(Protocol):
    """What a planned strategy's plan reads of a case."""

    @property
    def steps(self) -> int: ...

    @property
    def budget_bytes(self) -> int | None: ...


class RunsStreams(Protocol):
    """What :meth:`StrategySpec.runs_on` reads of a backend's spec."""

    name: str
    runs_streams: bool


@dataclass(frozen=True)
class StrategySpec:
    """One checkpointing strategy and its properties.

    Ours: ``stream(steps, snaps)`` makes the action stream of a strategy set by snaps, or
    ``planner(costs, steps, budget_bytes, levels=...)`` makes the plan whose stream it runs
    (``costs`` a costs object or its dict; the plan has ``actions()``, ``slots``,
    ``exact``, ``quantum_bytes``, ``prediction`` and ``summary()``). A peer has
    neither: ``backend`` names the one backend that runs it, ``factory`` the
    ``"module:function"`` giving ``loop = function(step, post, steps, snaps)`` for a
    recurrence and ``chain_factory`` the one giving ``loop = function(layer, layers, snaps)``
    (``loop(params, x0) -> x_L``) for a layer chain; a peer has one of them or both.
    """

    name: str
    label: str  # for tables and plot legends
    marker: str  # matplotlib marker of its points
    setting: Setting
    help: str  # one line for --help
    stream: Callable[[int, int], Iterator[Action]] | None = None
    planner: Callable[[Any, int, int], Any] | None = None  # (costs, steps, budget) -> plan
    closed_form: ClosedForm | None = None
    lower_bound: Callable[[int, int], int] | None = None  # advances no schedule goes below
    uses_snaps: bool = True  # False: every state kept, or set by a budget (snaps = steps)
    fits_budget: bool = False  # compared at a byte budget by ``plan``
    reference: bool = False  # the trade-off plot's fitted curve
    backend: str | None = None  # a peer's backend; None: ours, on every stream backend
    factory: str | None = None  # a peer's loop factory for recurrences, "module:function"
    chain_factory: str | None = None  # a peer's loop factory for layer chains
    requires: tuple[str, ...] = ()  # packages a peer needs beyond its backend's framework
    #: ``note(steps, snaps)``: what a case at that setting is told beyond a clamp (a setting
    #: where the strategy does something other than its name says), or None
    note: Callable[[int, int], str | None] | None = None
    #: why a peer has no recomputation floor (``results.summary``), or None where each of
    #: its counted step (or layer) calls is one whole evaluation the floor can price
    no_floor: str | None = None

    def __post_init__(self) -> None:
        ours = (self.stream is not None) + (self.planner is not None)
        if self.backend is None and ours != 1:
            raise ValueError(f"strategy {self.name}: ours needs a stream or a planner (one)")
        if self.backend is not None and (ours or not (self.factory or self.chain_factory)):
            raise ValueError(f"strategy {self.name}: a peer has a factory, no stream or plan")
        if self.backend is None and self.no_floor is not None:
            raise ValueError(f"strategy {self.name}: ours counts its evaluations (a floor)")

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
        return self.backend is None

    @property
    def planned(self) -> bool:
        """True when the stream comes from a plan (step costs and a byte budget)."""
        return self.planner is not None

    @property
    def advances(self) -> Callable[[int, int], int] | None:
        """The closed form of untaped advances, ``advances(steps, snaps)``, or None."""
        return None if self.closed_form is None else self.closed_form.advances

    @property
    def runs_chains(self) -> bool:
        """True when this strategy checkpoints a layer chain (ours, or a chain factory)."""
        return self.ours or self.chain_factory is not None

    @property
    def runs_recurrences(self) -> bool:
        """True when this strategy checkpoints a recurrence (ours, or a factory)."""
        return self.ours or self.factory is not None

    def runs_on(self, backend: RunsStreams) -> bool:
        """Whether ``backend`` (a backend's spec) runs this strategy."""
        return backend.runs_streams if self.ours else self.backend == backend.name

    def load_factory(self, chain: bool = False) -> Callable[..., Any]:
        """A peer's ``factory(step, post, steps, snaps) -> loop`` for a recurrence, or with
        ``chain`` its ``chain_factory(layer, layers, snaps) -> loop`` (imports its module);
        a one-line ``ValueError`` where it has none."""
        if self.ours:
            raise ValueError(f"strategy {self.name} is ours: it has no peer factory")
        ref = self.chain_factory if chain else self.factory
        if ref is None:
            only = "recurrences only" if chain else "layer chains only (a --model of layers)"
            raise ValueError(f"strategy {self.name} checkpoints {only}")
        module, _, function = ref.partition(":")
        return getattr(importlib.import_module(module), function)

    def plan_for(self, case: PlannedCase, costs: Any) -> Any:
        """The plan a planned strategy runs for ``case`` (its ``steps`` and
        ``budget_bytes``) with step ``costs``; None for a strategy without plans."""
        if not self.planned:
            return None
        if costs is None:
            raise ValueError(f"strategy {self.name!r} needs measured step costs")
        return self.planner(costs, case.steps, case.budget_bytes)  # type: ignore[misc]

    def actions_for(self, case: StreamCase, plan: Any = None) -> Iterator[Action]:
        """The action stream this strategy runs for ``case`` (its ``steps`` and ``snaps``):
        ``plan``'s (from :meth:`plan_for`) for a planned strategy, else its stream."""
        if self.planned:
            if plan is None:
                raise ValueError(f"strategy {self.name} runs a plan: see plan_for")
            return plan.actions()
        if self.stream is None:
            raise ValueError(
                f"strategy {self.name} is a framework's own checkpointing, not an action stream"
            )
        return self.stream(case.steps, case.snaps)

    def effective_snaps(self, steps: int, snaps: int) -> int:
        """The slots (or segments) a run of ``steps`` really uses."""
        return min(snaps, steps) if self.uses_snaps else steps

    def step_counts(
        self, steps: int, snaps: int, plan: Mapping[str, Any] | None = None
    ) -> tuple[int, int] | None:
        """(untaped advances, taped steps) the executor must count for one gradient, or
        None where the strategy has no step count of ours (a peer; a plan not recorded).

        The closed form where there is one, else a replay of the stream; a plan's own
        count (``plan["advances"]``) for a planned strategy. Every step is taped once.
        """
        if self.planned:
            advances = (plan or {}).get("advances")
            ok = isinstance(advances, int) and not isinstance(advances, bool)
            return (advances, steps) if ok else None
        if self.stream is None:
            return None
        s = self.effective_snaps(steps, snaps)
        if self.closed_form is not None:
            return self.closed_form.advances(steps, s), steps
        stats = replay(self.stream(steps, s), steps)
        return stats.advances, stats.taped

    def estimated_advances(self, steps: int, snaps: int) -> int:
        """Untaped advances for an estimate (the sweep's ETA): exact where cheap, else the
        lower bound, else one extra sweep (``steps``) for plans and peers."""
        s = self.effective_snaps(steps, snaps)
        if self.closed_form is not None:
            return self.closed_form.advances(steps, s)
        if self.stream is not None and steps <= ENUMERATE_STEPS:
            return replay(self.stream(steps, s), steps).advances
        if self.lower_bound is not None:
            return self.lower_bound(steps, s)
        return steps

    def optimum_advances(
        self, steps: int, snaps: int, plan: Mapping[str, Any] | None = None
    ) -> int | None:
        """The advances to compare a run with: a plan's own count for a planned strategy,
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
        if self.setting.in_bytes:
            return int(budget_bytes or 0)
        return snaps
