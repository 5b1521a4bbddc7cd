"""The action vocabulary of every checkpointing schedule, and the replay checker.

A schedule is a lazy iterator of immutable :class:`Action` values (the classic Revolve
vocabulary of Griewank & Walther, "Algorithm 799: Revolve", ACM TOMS 26(1), 2000, plus
TAPE/REVERSE for kept tapes after Beaumont, Eyraud-Dubois, Herrmann, Joly & Shilova,
"Optimal checkpointing for heterogeneous chains", 2019). Executors interpret the stream;
:func:`replay` checks it against a simulated store without running any model and
:func:`replay_bytes` accounts states *and* tapes in bytes. Conventions and the meaning of
every action: docs/architecture.md, "Revolve conventions".

Pure: no numpy arrays, no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import NamedTuple

__all__ = [
    "ADVANCE",
    "FIRSTURN",
    "RESTORE",
    "REVERSE",
    "TAKESHOT",
    "TAPE",
    "TERMINATE",
    "YOUTURN",
    "Action",
    "ActionKind",
    "ByteReplay",
    "ReplayStats",
    "ScheduleError",
    "advances_within",
    "check_int",
    "replay",
    "replay_bytes",
]


class ActionKind(Enum):
    """The classic Revolve action vocabulary, plus TAPE/REVERSE for kept tapes."""

    ADVANCE = "advance"  # untaped steps start -> stop
    TAKESHOT = "takeshot"  # store the current state x_step in `slot`
    RESTORE = "restore"  # load x_step from `slot`
    FIRSTURN = "firsturn"  # tape step l-1 -> l and run its reverse
    YOUTURN = "youturn"  # tape step step -> step+1 and run its reverse
    TERMINATE = "terminate"  # the reverse sweep is complete
    TAPE = "tape"  # tape step step -> step+1 from the current state and keep that tape
    REVERSE = "reverse"  # run the reverse of step `step` from its kept tape, then free it


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


#: The action kinds by their short names (the generators' inner loops read them).
ADVANCE = ActionKind.ADVANCE
TAKESHOT = ActionKind.TAKESHOT
RESTORE = ActionKind.RESTORE
FIRSTURN = ActionKind.FIRSTURN
YOUTURN = ActionKind.YOUTURN
TERMINATE = ActionKind.TERMINATE
TAPE = ActionKind.TAPE
REVERSE = ActionKind.REVERSE


def check_int(name: str, value: object, minimum: int = 1) -> int:
    """``value`` if it is an int (not a bool) >= ``minimum``; else a one-line ``ValueError``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return value


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
    peak_tapes: int = 0  # most tapes kept at once (TAPE .. REVERSE), the live one excluded

    @property
    def evaluations(self) -> int:
        """Step evaluations for one gradient: advances + taped."""
        return self.advances + self.taped


def advances_within(actions: Iterable[Action], limit: int) -> int | None:
    """The untaped advances of ``actions`` (the sum of the ADVANCE ranges), or None as soon
    as they pass ``limit``: what a :func:`replay`, which visits every advanced step, would
    cost, read in time proportional to the actions up to the limit. Checks nothing."""
    total = 0
    for act in actions:
        if act.kind is ADVANCE:
            total += act.stop - act.start
            if total > limit:
                return None
    return total


def replay(actions: Iterable[Action], steps: int, snaps: int | None = None) -> ReplayStats:
    """Run ``actions`` against a simulated store; raise :class:`ScheduleError` on any violation.

    Checks: ADVANCE starts at the current state and moves forward; TAKESHOT stores the current
    state; RESTORE loads a slot holding that step; steps are reversed exactly once each, in
    order l-1 .. 0, each from the right current state; at most ``snaps`` slots are live (when
    given); the stream ends with one TERMINATE. Slots freed by a later TAKESHOT overwriting
    them are reused; a slot counts as live from TAKESHOT until its state can no longer be
    needed (its step is above the next step to reverse).

    Kept tapes: TAPE i needs the current state x_i, keeps step i's tape and makes x_{i+1}
    current; REVERSE i needs that tape and i to be the next step to reverse. Step l-1 is
    always reversed by FIRSTURN (the executor's first sweep ends there), no RESTORE comes
    before it, and a step with a kept tape is reversed by REVERSE, not by YOUTURN.
    """
    return _replay(actions, steps, snaps, None, None, None)[0]


@dataclass(frozen=True)
class ByteReplay:
    """What :func:`replay_bytes` counted: the :class:`ReplayStats`, storage in bytes, and the
    untaped advances of every step (``step_advances[i]``; every step is taped exactly once)."""

    stats: ReplayStats
    peak_bytes: int  # most bytes of live states + kept tapes + the tape being reversed
    peak_state_bytes: int  # bytes of live states at that peak
    peak_tape_bytes: int  # bytes of tapes (kept and live) at that peak
    step_advances: tuple[int, ...]
    action_bytes: tuple[int, ...] = ()  # with ``per_action``: each action's bytes


def replay_bytes(
    actions: Iterable[Action],
    steps: int,
    state_bytes: int | Sequence[int],
    tape_bytes: int | Sequence[int],
    budget_bytes: int | None = None,
    per_action: bool = False,
) -> ByteReplay:
    """:func:`replay` with storage counted in bytes: states *and* tapes.

    ``state_bytes`` / ``tape_bytes`` are one value for every step or one per step (x_i's
    state, step i's tape). Live storage = the states in live slots + the kept tapes (TAPE
    until REVERSE); during a FIRSTURN/YOUTURN the step's own tape is live too and counts.
    With ``budget_bytes`` a peak above it is a :class:`ScheduleError`. With ``per_action``,
    ``action_bytes`` holds each action's bytes: the most live storage before or after it,
    plus a turn's own tape (what ``run --trace`` shows as planned; its max is the peak).
    """
    check_int("steps", steps)
    sb = _per_step("state_bytes", state_bytes, steps)
    tb = _per_step("tape_bytes", tape_bytes, steps)
    if budget_bytes is not None:
        check_int("budget_bytes", budget_bytes, minimum=0)
    trail: list[int] | None = [] if per_action else None
    stats, peak, peak_s, peak_t, per_step = _replay(
        actions, steps, None, sb, tb, budget_bytes, trail
    )
    return ByteReplay(stats, peak, peak_s, peak_t, tuple(per_step), tuple(trail or ()))


def _per_step(name: str, value: int | Sequence[int], steps: int) -> list[int]:
    if isinstance(value, int) and not isinstance(value, bool):
        return [check_int(name, value, minimum=0)] * steps
    values = list(value)
    if len(values) != steps:
        raise ValueError(f"{name} has {len(values)} entries, expected one per step ({steps})")
    return [check_int(name, v, minimum=0) for v in values]


def _replay(
    actions: Iterable[Action],
    steps: int,
    snaps: int | None,
    sb: list[int] | None,
    tb: list[int] | None,
    budget: int | None,
    trail: list[int] | None = None,
) -> tuple[ReplayStats, int, int, int, list[int]]:
    check_int("steps", steps)
    store = _Store(steps, snaps, sb, tb, budget)
    handlers = {
        ADVANCE: store.advance,
        TAKESHOT: store.takeshot,
        RESTORE: store.restore,
        TAPE: store.tape,
        FIRSTURN: store.turn,
        YOUTURN: store.turn,
        REVERSE: store.reverse,
        TERMINATE: store.terminate,
    }
    for act in actions:
        store.count += 1
        if store.terminated:
            raise ScheduleError(f"action {store.count} ({act!r}) after TERMINATE")
        handler = handlers.get(act.kind)
        if handler is None:  # pragma: no cover - the enum is closed
            raise ScheduleError(f"unknown action {act!r}")
        if trail is None:
            handler(act)
            continue
        before, store.extra = store.state_b + store.tape_b, 0  # the action's bytes: see
        handler(act)  # replay_bytes
        trail.append(max(before, store.state_b + store.tape_b) + store.extra)
    if not store.terminated:
        raise ScheduleError("schedule ended without TERMINATE")
    return store.stats(), store.peak_b, store.peak_sb, store.peak_tb, store.per_step


class _Store:
    """The simulated store :func:`_replay` runs a stream against: the slots (slot -> step)
    and how many hold each step, the kept tapes, the current state (None: consumed by a
    reverse), the next step to reverse, the counts, and with per-step byte sizes (``sb``,
    ``tb``) the bytes stored and their peak. Each action's method checks it and applies it
    (:class:`ScheduleError` on a violation). Slotted: a long stream calls it ~10^6 times."""

    __slots__ = (
        "advances", "budget", "bytes_on", "count", "current", "extra", "holders", "kept", "live",
        "next_reverse", "peak", "peak_b", "peak_sb", "peak_tapes", "peak_tb", "per_step",
        "restores", "sb", "shots", "snaps", "state_b", "steps", "store", "tape_b", "taped",
        "tb", "terminated",
    )  # fmt: skip

    def __init__(self, steps, snaps, sb, tb, budget) -> None:
        self.steps, self.snaps, self.sb, self.tb, self.budget = steps, snaps, sb, tb, budget
        self.bytes_on = sb is not None
        self.store: dict[int, int] = {}  # slot -> step
        self.holders: dict[int, int] = {}  # step -> number of slots holding it
        self.kept: set[int] = set()  # steps whose tape is kept
        self.live = 0
        self.current: int | None = 0
        self.next_reverse = steps - 1
        self.advances = self.taped = self.shots = self.restores = self.count = 0
        self.peak = self.peak_tapes = 0
        self.state_b = self.tape_b = self.peak_b = self.peak_sb = self.peak_tb = 0
        self.per_step = [0] * steps
        self.terminated = False
        self.extra = 0  # the tape a turn keeps live beside the stored bytes (``trail``)

    def fail(self, act: Action, why: str) -> ScheduleError:
        return ScheduleError(f"action {self.count} {act!r}: {why}")

    def at_peak(self, act: Action, extra_tape: int = 0) -> None:
        total = self.state_b + self.tape_b + extra_tape
        if total > self.peak_b:
            self.peak_b, self.peak_sb, self.peak_tb = total, self.state_b, self.tape_b + extra_tape
            if self.budget is not None and total > self.budget:
                raise self.fail(act, f"{total} B stored exceeds the budget of {self.budget} B")

    def advance(self, act: Action) -> None:
        if self.current is None or act.start != self.current:
            raise self.fail(act, f"current state is x_{self.current}")
        if not (act.start < act.stop <= self.next_reverse):
            raise self.fail(act, f"must stop in ({act.start}, {self.next_reverse}]")
        self.advances += act.stop - act.start
        per_step = self.per_step
        for i in range(act.start, act.stop):
            per_step[i] += 1
        self.current = act.stop

    def takeshot(self, act: Action) -> None:
        if self.current is None or act.step != self.current:
            raise self.fail(act, f"current state is x_{self.current}")
        if self.snaps is not None and not (0 <= act.slot < self.snaps):
            raise self.fail(act, f"slot outside 0..{self.snaps - 1}")
        old = self.store.get(act.slot)
        if old is not None and old <= self.next_reverse:
            self.live -= 1
            self.holders[old] -= 1
            if self.bytes_on:
                self.state_b -= self.sb[old]
        self.store[act.slot] = act.step
        self.holders[act.step] = self.holders.get(act.step, 0) + 1
        self.live += 1
        self.shots += 1
        self.peak = max(self.peak, self.live)
        if self.bytes_on:
            self.state_b += self.sb[act.step]
            self.at_peak(act)

    def restore(self, act: Action) -> None:
        if self.store.get(act.slot) != act.step:
            raise self.fail(act, f"slot holds {self.store.get(act.slot)}")
        if self.next_reverse == self.steps - 1:
            raise self.fail(act, "RESTORE before FIRSTURN")
        self.restores += 1
        self.current = act.step

    def tape(self, act: Action) -> None:
        i = act.step
        if self.current is None or i != self.current or i > self.next_reverse:
            raise self.fail(
                act, f"current state is x_{self.current}, next step to reverse {self.next_reverse}"
            )
        if i == self.steps - 1:
            raise self.fail(act, f"step {i} is taped by FIRSTURN")
        if i in self.kept:
            raise self.fail(act, f"step {i}'s tape is already kept")
        self.kept.add(i)
        self.peak_tapes = max(self.peak_tapes, len(self.kept))
        self.taped += 1
        self.current = i + 1
        if self.bytes_on:
            self.tape_b += self.tb[i]
            self.at_peak(act)

    def turn(self, act: Action) -> None:
        """FIRSTURN or YOUTURN: tape step ``act.step`` from its state and reverse it."""
        i, nr = act.step, self.next_reverse
        if i != nr or self.current != i:
            raise self.fail(
                act, f"expected reverse of step {nr} from x_{nr}, current x_{self.current}"
            )
        if (act.kind is FIRSTURN) != (i == self.steps - 1):
            raise self.fail(act, f"FIRSTURN is for step {self.steps - 1}")
        if i in self.kept:
            raise self.fail(act, f"step {i} has a kept tape")
        self.taped += 1
        if self.bytes_on:
            self.extra = self.tb[i]  # the turn's own tape, live during it
            self.at_peak(act, self.extra)
        self._reversed(i)

    def reverse(self, act: Action) -> None:
        """REVERSE: reverse step ``act.step`` from its kept tape, which is freed."""
        i = act.step
        if i != self.next_reverse or i not in self.kept:
            raise self.fail(act, f"expected reverse of step {self.next_reverse} from its kept tape")
        if self.bytes_on:
            self.tape_b -= self.tb[i]
        self.kept.discard(i)
        self._reversed(i)

    def _reversed(self, i: int) -> None:
        # x_step is never needed again: the slots holding it are free
        held = self.holders.pop(i, 0)
        self.live -= held
        if self.bytes_on:
            self.state_b -= held * self.sb[i]
        self.next_reverse -= 1
        self.current = None  # the reverse consumed the state

    def terminate(self, act: Action) -> None:
        if self.next_reverse != -1:
            raise ScheduleError(f"TERMINATE with steps 0..{self.next_reverse} not reversed")
        self.terminated = True

    def stats(self) -> ReplayStats:
        return ReplayStats(
            steps=self.steps,
            advances=self.advances,
            taped=self.taped,
            takeshots=self.shots,
            restores=self.restores,
            actions=self.count,
            peak_snapshots=self.peak,
            max_step_advances=max(self.per_step),
            peak_tapes=self.peak_tapes,
        )
