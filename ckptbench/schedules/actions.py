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
    store: dict[int, int] = {}  # slot -> step
    holders: dict[int, int] = {}  # step -> number of slots holding it
    kept: set[int] = set()  # steps whose tape is kept
    live = 0
    current: int | None = 0
    next_reverse = steps - 1
    advances = taped = shots = restores = count = peak = peak_tapes = 0
    state_b = tape_b = peak_b = peak_sb = peak_tb = 0
    bytes_on = sb is not None
    per_step = [0] * steps
    terminated = False

    def at_peak(extra_tape: int = 0) -> None:
        nonlocal peak_b, peak_sb, peak_tb
        total = state_b + tape_b + extra_tape
        if total > peak_b:
            peak_b, peak_sb, peak_tb = total, state_b, tape_b + extra_tape
            if budget is not None and total > budget:
                raise ScheduleError(
                    f"action {count} {act!r}: {total} B stored exceeds the budget of {budget} B"
                )

    for act in actions:
        count += 1
        before, extra = state_b + tape_b, 0  # the action's bytes (``trail``): see replay_bytes
        if terminated:
            raise ScheduleError(f"action {count} ({act!r}) after TERMINATE")
        kind = act.kind
        if kind is ADVANCE:
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
        elif kind is TAKESHOT:
            if current is None or act.step != current:
                raise ScheduleError(f"action {count} {act!r}: current state is x_{current}")
            if snaps is not None and not (0 <= act.slot < snaps):
                raise ScheduleError(f"action {count} {act!r}: slot outside 0..{snaps - 1}")
            old = store.get(act.slot)
            if old is not None and old <= next_reverse:
                live -= 1
                holders[old] -= 1
                if bytes_on:
                    state_b -= sb[old]
            store[act.slot] = act.step
            holders[act.step] = holders.get(act.step, 0) + 1
            live += 1
            shots += 1
            peak = max(peak, live)
            if bytes_on:
                state_b += sb[act.step]
                at_peak()
        elif kind is RESTORE:
            if store.get(act.slot) != act.step:
                raise ScheduleError(f"action {count} {act!r}: slot holds {store.get(act.slot)}")
            if next_reverse == steps - 1:
                raise ScheduleError(f"action {count} {act!r}: RESTORE before FIRSTURN")
            restores += 1
            current = act.step
        elif kind is TAPE:
            i = act.step
            if current is None or i != current or i > next_reverse:
                raise ScheduleError(
                    f"action {count} {act!r}: current state is x_{current}, "
                    f"next step to reverse {next_reverse}"
                )
            if i == steps - 1:
                raise ScheduleError(f"action {count} {act!r}: step {i} is taped by FIRSTURN")
            if i in kept:
                raise ScheduleError(f"action {count} {act!r}: step {i}'s tape is already kept")
            kept.add(i)
            peak_tapes = max(peak_tapes, len(kept))
            taped += 1
            current = i + 1
            if bytes_on:
                tape_b += tb[i]
                at_peak()
        elif kind is FIRSTURN or kind is YOUTURN or kind is REVERSE:
            i = act.step
            if kind is REVERSE:
                if i != next_reverse or i not in kept:
                    raise ScheduleError(
                        f"action {count} {act!r}: expected reverse of step {next_reverse} "
                        "from its kept tape"
                    )
                if bytes_on:
                    tape_b -= tb[i]
                kept.discard(i)
            else:
                if i != next_reverse or current != i:
                    raise ScheduleError(
                        f"action {count} {act!r}: expected reverse of step {next_reverse} "
                        f"from x_{next_reverse}, current x_{current}"
                    )
                if (kind is FIRSTURN) != (i == steps - 1):
                    raise ScheduleError(f"action {count} {act!r}: FIRSTURN is for step {steps - 1}")
                if i in kept:
                    raise ScheduleError(f"action {count} {act!r}: step {i} has a kept tape")
                taped += 1
                if bytes_on:
                    extra = tb[i]
                    at_peak(extra)
            # x_step is never needed again: the slots holding it are free
            held = holders.pop(i, 0)
            live -= held
            if bytes_on:
                state_b -= held * sb[i]
            next_reverse -= 1
            current = None  # the reverse consumed the state
        elif kind is TERMINATE:
            if next_reverse != -1:
                raise ScheduleError(f"TERMINATE with steps 0..{next_reverse} not reversed")
            terminated = True
        else:  # pragma: no cover - the enum is closed
            raise ScheduleError(f"unknown action {act!r}")
        if trail is not None:
            trail.append(max(before, state_b + tape_b) + extra)
    if not terminated:
        raise ScheduleError("schedule ended without TERMINATE")
    counts = (advances, taped, shots, restores, count, peak, max(per_step), peak_tapes)
    return ReplayStats(steps, *counts), peak_b, peak_sb, peak_tb, per_step
