"""Checkpointing schedules: binomial Revolve and its simpler rivals, as pure action streams.

The optimal schedule is binomial checkpointing (Griewank, "Achieving logarithmic growth of
temporal and spatial complexity in reverse automatic differentiation", OMS 1(1), 1992;
Griewank & Walther, "Algorithm 799: Revolve", ACM TOMS 26(1), 2000).

Conventions (the Revolve / pyrevolve ones):

* ``steps`` = l, states x_0 .. x_l, step i maps x_i to x_{i+1}.
* ``snaps`` = s counts *every* snapshot slot, including the one that holds x_0.
* beta(s, r) = C(s + r, s) is the longest chain reversible with s slots and r repetitions.
* t(l, s) = r*l - beta(s + 1, r - 1) untaped forward steps ("advances", the first sweep
  included), with r = r(l, s) = min{r : beta(s, r) >= l}; the reverse sweep tapes each
  step exactly once, so a gradient costs t + l step evaluations.

This module is pure: no numpy arrays, no autograd, no I/O. A schedule is a lazy iterator of
immutable :class:`Action` values; an executor (``ckptbench.checkpoint``) interprets them and
:func:`replay` checks them against a simulated store without running any model.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from enum import Enum
from typing import NamedTuple

__all__ = [
    "Action",
    "ActionKind",
    "ReplayStats",
    "ScheduleError",
    "Strategy",
    "as_strategy",
    "beta",
    "check_int",
    "make_schedule",
    "memory_savings",
    "optimal_forward_steps",
    "recomputation_factor",
    "repetition_number",
    "replay",
    "schedule",
    "should_checkpoint",
    "snaps_for_budget",
    "store_all_schedule",
    "uniform_schedule",
]


class ActionKind(Enum):
    """The classic Revolve action vocabulary."""

    ADVANCE = "advance"  # untaped steps start -> stop
    TAKESHOT = "takeshot"  # store the current state x_step in `slot`
    RESTORE = "restore"  # load x_step from `slot`
    FIRSTURN = "firsturn"  # tape step l-1 -> l and run its reverse
    YOUTURN = "youturn"  # tape step step -> step+1 and run its reverse
    TERMINATE = "terminate"  # the reverse sweep is complete


class Strategy(Enum):
    """Schedules the executor can run."""

    REVOLVE = "revolve"
    UNIFORM = "uniform"
    STORE_ALL = "store-all"


class Action(NamedTuple):
    """One immutable schedule action; fields that do not apply to a kind are ``None``.

    A NamedTuple rather than a frozen dataclass: a 100 000-step schedule has ~450 000 actions
    and tuple construction is several times cheaper, which is what keeps generation fast.
    """

    kind: ActionKind
    start: int | None = None
    stop: int | None = None
    slot: int | None = None
    step: int | None = None

    def __repr__(self) -> str:
        k = self.kind
        if k is ActionKind.ADVANCE:
            return f"ADVANCE({self.start}->{self.stop})"
        if k is ActionKind.TAKESHOT or k is ActionKind.RESTORE:
            return f"{k.name}(slot={self.slot}, step={self.step})"
        if k is ActionKind.TERMINATE:
            return "TERMINATE"
        return f"{k.name}({self.step})"


class ScheduleError(ValueError):
    """A schedule violates the rules checked by :func:`replay`."""


_ADVANCE = ActionKind.ADVANCE
_TAKESHOT = ActionKind.TAKESHOT
_RESTORE = ActionKind.RESTORE
_FIRSTURN = ActionKind.FIRSTURN
_YOUTURN = ActionKind.YOUTURN
_TERMINATE = ActionKind.TERMINATE
_new = tuple.__new__


def check_int(name: str, value: object, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return value


# --------------------------------------------------------------------------- formulas


def beta(s: int, r: int) -> int:
    """beta(s, r) = C(s + r, s): most steps reversible with s slots and r repetitions."""
    if r < 0 or s < 0:
        return 0
    return math.comb(s + r, s)


def repetition_number(steps: int, snaps: int) -> int:
    """r(l, s) = min{r : beta(s, r) >= l}: how often the busiest step is advanced."""
    check_int("steps", steps)
    check_int("snaps", snaps)
    return _reps(steps, snaps)


def _reps(m: int, s: int) -> int:
    r = 0
    b = 1  # beta(s, 0)
    while b < m:
        r += 1
        b = b * (s + r) // r
    return r


def optimal_forward_steps(steps: int, snaps: int) -> int:
    """t(l, s) = r*l - beta(s + 1, r - 1): minimal untaped advances, first sweep included."""
    check_int("steps", steps)
    check_int("snaps", snaps)
    return _optimal(steps, snaps)


def _optimal(m: int, s: int) -> int:
    if m <= 1:
        return 0
    r = _reps(m, s)
    return r * m - beta(s + 1, r - 1)


def _split(m: int, s: int) -> int:
    """Optimal first checkpoint offset k (1 <= k < m) for m steps with s slots (s >= 2).

    With r = r(m, s), every k with the left part in [beta(s, r-2), beta(s, r-1)] and the
    right part in [beta(s-1, r-1), beta(s-1, r)] attains t(m, s) exactly, because
    beta(s+1, r-1) = beta(s+1, r-2) + beta(s, r-1). We take the largest such k: it leaves
    the smallest subchain to the recursion with one slot fewer.
    """
    r = _reps(m, s)
    hi = min(beta(s, r - 1), m - beta(s - 1, r - 1), m - 1)
    return hi


# --------------------------------------------------------------------------- schedules


def schedule(steps: int, snaps: int) -> Iterator[Action]:
    """Lazy optimal (binomial / Revolve) schedule reversing ``steps`` steps with ``snaps`` slots.

    Memory is O(snaps): an explicit stack holds at most one pending left subchain per slot.
    Total ADVANCE length is exactly :func:`optimal_forward_steps`.
    """
    check_int("steps", steps)
    check_int("snaps", snaps)
    return _revolve(steps, snaps)


def _revolve(l: int, s: int) -> Iterator[Action]:
    new, A = _new, Action  # locals: this loop runs ~4 times per step
    _ADVANCE, _TAKESHOT, _RESTORE = ActionKind.ADVANCE, ActionKind.TAKESHOT, ActionKind.RESTORE
    _FIRSTURN, _YOUTURN = ActionKind.FIRSTURN, ActionKind.YOUTURN
    yield new(A, (_TAKESHOT, None, None, 0, 0))
    top = s - 1  # highest slot index
    # Each entry: (a, b, c) = reverse steps b-1..a, x_a in slot top-c, c free slots above it.
    stack: list[tuple[int, int, int]] = []
    a, b, c = 0, l, top
    restore = False
    while True:
        if restore:
            yield new(A, (_RESTORE, None, None, top - c, a))
        while True:
            m = b - a
            if m == 1:
                yield new(A, (_FIRSTURN if b == l else _YOUTURN, None, None, None, a))
                break
            if m <= c + 2:
                # Enough slots for every interior state but the last: store them all.
                base = top - c - a
                for j in range(a + 1, b - 1):
                    yield new(A, (_ADVANCE, j - 1, j, None, None))
                    yield new(A, (_TAKESHOT, None, None, base + j, j))
                yield new(A, (_ADVANCE, b - 2, b - 1, None, None))
                yield new(A, (_FIRSTURN if b == l else _YOUTURN, None, None, None, b - 1))
                for j in range(b - 2, a - 1, -1):
                    yield new(A, (_RESTORE, None, None, base + j, j))
                    yield new(A, (_YOUTURN, None, None, None, j))
                break
            if c == 0:
                slot = top
                yield new(A, (_ADVANCE, a, b - 1, None, None))
                yield new(A, (_FIRSTURN if b == l else _YOUTURN, None, None, None, b - 1))
                for j in range(b - 2, a, -1):
                    yield new(A, (_RESTORE, None, None, slot, a))
                    yield new(A, (_ADVANCE, a, j, None, None))
                    yield new(A, (_YOUTURN, None, None, None, j))
                yield new(A, (_RESTORE, None, None, slot, a))
                yield new(A, (_YOUTURN, None, None, None, a))
                break
            k = a + _split(m, c + 1)
            yield new(A, (_ADVANCE, a, k, None, None))
            yield new(A, (_TAKESHOT, None, None, top - c + 1, k))
            stack.append((a, k, c))
            a, c = k, c - 1
        if not stack:
            break
        a, b, c = stack.pop()
        restore = True
    yield new(A, (_TERMINATE, None, None, None, None))


def store_all_schedule(steps: int) -> Iterator[Action]:
    """Store every state x_0..x_{l-1} in the first sweep, then reverse with no recomputation.

    Uses ``steps`` slots; advances l - 1 steps (the first sweep only).
    """
    check_int("steps", steps)
    return _store_all(steps)


def _store_all(l: int) -> Iterator[Action]:
    new = _new
    A = Action
    for i in range(l - 1):
        yield new(A, (_TAKESHOT, None, None, i, i))
        yield new(A, (_ADVANCE, i, i + 1, None, None))
    yield new(A, (_FIRSTURN, None, None, None, l - 1))
    for i in range(l - 2, -1, -1):
        yield new(A, (_RESTORE, None, None, i, i))
        yield new(A, (_YOUTURN, None, None, None, i))
    yield new(A, (_TERMINATE, None, None, None, None))


def uniform_schedule(steps: int, snaps: int) -> Iterator[Action]:
    """Uniform segments: the sqrt(n) strategy of ``checkpoint_sequential`` and Graphcore.

    The chain is cut into k near-equal segments whose start states are stored in the first
    sweep (k slots). Each segment is then rerun once from its start, storing its interior
    states in the remaining ``snaps - k`` slots, and reversed from them. With snaps >= about
    2*sqrt(steps) every segment fits and the cost is about one extra forward sweep; with fewer
    slots the states of a segment that do not fit are recomputed from the last stored one.
    k is chosen to minimise advances, then slots; the peak never exceeds ``snaps``.
    """
    check_int("steps", steps)
    check_int("snaps", snaps)
    return _uniform(steps, snaps)


def _uniform_cost(l: int, s: int, k: int) -> tuple[int, int]:
    """(advances, peak slots) of the uniform strategy with k segments."""
    bounds = [i * l // k for i in range(k + 1)]
    interior = s - k
    adv = bounds[k - 1]
    held_max = 0
    for i in range(k):
        seg = bounds[i + 1] - bounds[i]
        held = min(seg - 1, interior)
        tail = seg - held
        adv += held + tail * (tail - 1) // 2
        held_max = max(held_max, held)
    return adv, k + held_max


def _uniform_segments(l: int, s: int) -> int:
    best = min(range(1, min(l, s) + 1), key=lambda k: (*_uniform_cost(l, s, k), k))
    return best


def _uniform(l: int, s: int) -> Iterator[Action]:
    new = _new
    A = Action
    nseg = _uniform_segments(l, s)
    bounds = [i * l // nseg for i in range(nseg + 1)]
    interior = s - nseg
    yield new(A, (_TAKESHOT, None, None, 0, 0))
    for i in range(1, nseg):
        yield new(A, (_ADVANCE, bounds[i - 1], bounds[i], None, None))
        yield new(A, (_TAKESHOT, None, None, i, bounds[i]))
    for i in range(nseg - 1, -1, -1):
        a, b = bounds[i], bounds[i + 1]
        if i != nseg - 1:
            yield new(A, (_RESTORE, None, None, i, a))
        held = min(b - a - 1, interior)  # interior states x_{a+1}..x_{a+held} get slots
        for j in range(a + 1, a + held + 1):
            yield new(A, (_ADVANCE, j - 1, j, None, None))
            yield new(A, (_TAKESHOT, None, None, nseg + j - a - 1, j))
        base = a + held
        base_slot = nseg + held - 1 if held else i
        fresh = True  # current state is x_base
        for j in range(b - 1, base - 1, -1):
            if not fresh:
                yield new(A, (_RESTORE, None, None, base_slot, base))
            if j > base:
                yield new(A, (_ADVANCE, base, j, None, None))
            yield new(A, (_FIRSTURN if j + 1 == l else _YOUTURN, None, None, None, j))
            fresh = False
        for j in range(base - 1, a - 1, -1):
            yield new(A, (_RESTORE, None, None, nseg + j - a - 1 if j > a else i, j))
            yield new(A, (_YOUTURN, None, None, None, j))
    yield new(A, (_TERMINATE, None, None, None, None))


def make_schedule(strategy: Strategy | str, steps: int, snaps: int) -> Iterator[Action]:
    """The schedule of ``strategy`` (revolve, uniform or store-all) as an action iterator."""
    strat = as_strategy(strategy)
    if strat is Strategy.REVOLVE:
        return schedule(steps, snaps)
    if strat is Strategy.UNIFORM:
        return uniform_schedule(steps, snaps)
    return store_all_schedule(steps)


def as_strategy(strategy: Strategy | str) -> Strategy:
    if isinstance(strategy, Strategy):
        return strategy
    try:
        return Strategy(strategy)
    except ValueError:
        names = ", ".join(s.value for s in Strategy)
        raise ValueError(f"unknown strategy {strategy!r} (choose from {names})") from None


# --------------------------------------------------------------------------- replay checker


@dataclass(frozen=True)
class ReplayStats:
    """What a schedule did, as counted by :func:`replay`."""

    steps: int
    advances: int  # untaped forward steps, first sweep included
    taped: int  # FIRSTURN + YOUTURN
    takeshots: int
    restores: int
    actions: int
    peak_snapshots: int  # most slots live at once
    max_step_advances: int  # most advances of any single step

    @property
    def evaluations(self) -> int:
        """Step evaluations for one gradient: advances + taped."""
        return self.advances + self.taped


def replay(actions: Iterable[Action], steps: int, snaps: int | None = None) -> ReplayStats:
    """Run ``actions`` against a simulated store; raise :class:`ScheduleError` on any violation.

    Checks: ADVANCE starts at the current state and moves forward; TAKESHOT stores the current
    state; RESTORE loads a slot holding that step; steps are reversed exactly once each, in
    order l-1 .. 0, each from the right current state; at most ``snaps`` slots are live (when
    given); the stream ends with one TERMINATE. Slots freed by a later TAKESHOT overwriting
    them are reused; a slot counts as live from TAKESHOT until its state can no longer be
    needed (its step is above the next step to reverse).
    """
    check_int("steps", steps)
    store: dict[int, int] = {}  # slot -> step
    holders: dict[int, int] = {}  # step -> number of slots holding it
    live = 0
    current: int | None = 0
    next_reverse = steps - 1
    advances = taped = shots = restores = count = peak = 0
    per_step = [0] * steps
    terminated = False
    for act in actions:
        count += 1
        if terminated:
            raise ScheduleError(f"action {count} ({act!r}) after TERMINATE")
        kind = act.kind
        if kind is _ADVANCE:
            if current is None or act.start != current:
                raise ScheduleError(f"action {count} {act!r}: current state is x_{current}")
            if not (act.start < act.stop <= next_reverse):
                raise ScheduleError(
                    f"action {count} {act!r}: must stop in ({act.start}, {next_reverse}]"
                )
            advances += act.stop - act.start
            for i in range(act.start, act.stop):
                per_step[i] += 1
            current = act.stop
        elif kind is _TAKESHOT:
            if current is None or act.step != current:
                raise ScheduleError(f"action {count} {act!r}: current state is x_{current}")
            if snaps is not None and not (0 <= act.slot < snaps):
                raise ScheduleError(f"action {count} {act!r}: slot outside 0..{snaps - 1}")
            old = store.get(act.slot)
            if old is not None and old <= next_reverse:
                live -= 1
                holders[old] -= 1
            store[act.slot] = act.step
            holders[act.step] = holders.get(act.step, 0) + 1
            live += 1
            shots += 1
            peak = max(peak, live)
        elif kind is _RESTORE:
            if store.get(act.slot) != act.step:
                raise ScheduleError(f"action {count} {act!r}: slot holds {store.get(act.slot)}")
            restores += 1
            current = act.step
        elif kind is _FIRSTURN or kind is _YOUTURN:
            if act.step != next_reverse or current != act.step:
                raise ScheduleError(
                    f"action {count} {act!r}: expected reverse of step {next_reverse} "
                    f"from x_{next_reverse}, current x_{current}"
                )
            if (kind is _FIRSTURN) != (act.step == steps - 1):
                raise ScheduleError(f"action {count} {act!r}: FIRSTURN is for step {steps - 1}")
            taped += 1
            # x_step is never needed again: the slots holding it are free
            live -= holders.pop(act.step, 0)
            next_reverse -= 1
            current = None  # the reverse consumed the state
        elif kind is _TERMINATE:
            if next_reverse != -1:
                raise ScheduleError(f"TERMINATE with steps 0..{next_reverse} not reversed")
            terminated = True
        else:  # pragma: no cover - the enum is closed
            raise ScheduleError(f"unknown action {act!r}")
    if not terminated:
        raise ScheduleError("schedule ended without TERMINATE")
    return ReplayStats(
        steps=steps,
        advances=advances,
        taped=taped,
        takeshots=shots,
        restores=restores,
        actions=count,
        peak_snapshots=peak,
        max_step_advances=max(per_step),
    )


# --------------------------------------------------------------------------- planning helpers


def recomputation_factor(steps: int, snaps: int) -> float:
    """Untaped advances per step, t(l, s) / l. Example: (1000, 31) -> 2.439."""
    return optimal_forward_steps(steps, snaps) / steps


def memory_savings(
    steps: int, snaps: int, state_bytes: int = 1, tape_bytes: int | None = None
) -> float:
    """Ratio of store-all memory to checkpointed memory for one gradient.

    Store-all keeps one tape per step (``tape_bytes``, default = ``state_bytes``); a
    checkpointed run keeps ``min(snaps, steps)`` state snapshots plus one tape. Example:
    ``memory_savings(1000, 31, state_bytes=65536, tape_bytes=10 * 65536)`` = 10000/41 ~ 243.9.
    """
    check_int("steps", steps)
    check_int("snaps", snaps)
    check_int("state_bytes", state_bytes)
    tape = state_bytes if tape_bytes is None else check_int("tape_bytes", tape_bytes)
    return steps * tape / (min(snaps, steps) * state_bytes + tape)


def snaps_for_budget(steps: int, budget_bytes: int, state_bytes: int) -> int:
    """Most snapshot slots (at least 1, at most ``steps``) whose states fit in ``budget_bytes``.

    Example: ``snaps_for_budget(1000, 2 * 2**20, 65536)`` = 32. Raises ``ValueError`` when not
    even the one slot holding x_0 fits.
    """
    check_int("steps", steps)
    check_int("state_bytes", state_bytes)
    check_int("budget_bytes", budget_bytes, minimum=0)
    snaps = budget_bytes // state_bytes
    if snaps < 1:
        raise ValueError(f"budget {budget_bytes} B holds no state of {state_bytes} B")
    return min(snaps, steps)


def should_checkpoint(steps: int, snaps: int, max_recomputation: float = 3.0) -> bool:
    """True when checkpointing with ``snaps`` slots recomputes at most ``max_recomputation``
    advances per step *and* actually saves memory (snaps < steps). Example:
    ``should_checkpoint(1000, 31)`` is True (2.439 <= 3); ``should_checkpoint(1000, 2)`` is
    False (t = 44 k advances, 44.2 per step).
    """
    return snaps < steps and recomputation_factor(steps, snaps) <= max_recomputation
