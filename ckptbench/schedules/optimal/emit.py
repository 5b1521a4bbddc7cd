"""The budget planner's action stream: the dynamic program's choices as actions.

The stream uses the vocabulary of :mod:`ckptbench.schedules.actions` (ADVANCE, TAKESHOT,
RESTORE, TAPE, REVERSE, FIRSTURN/YOUTURN), so the engine and :func:`replay_bytes` read it
as they read Revolve. Pure: no arrays (it only asks the tables for choices), no I/O.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from ckptbench.schedules.actions import Action, ActionKind

if TYPE_CHECKING:
    from ckptbench.schedules.optimal.dp import Solution

__all__ = ["SHOT", "TAPE", "TURN", "emit"]

#: The dynamic program's choice codes: a turn (single step), TAPE, TAKESHOT (N only); a
#: code j + 1 > 2 is ADVANCE j then RESTORE (S only).
TURN, TAPE, SHOT = 0, 1, 2


def emit(solution: Solution) -> Iterator[Action]:
    """The solved program's choices as actions, with an explicit stack (chains nest l
    deep); snapshot slots are reused lowest first."""
    tab, su, tu = solution.tables, solution.state_units, solution.tape_units
    l, m_top = len(su), solution.levels
    free_slots: list[int] = []
    next_slot = 0
    slot_of: dict[int, int] = {}
    # tasks: ("N"|"S", a, n, m) | ("R", a) reverse kept tape | ("X", a, n, m) restore then S
    stack: list[tuple] = [("N", 0, l, m_top)]

    def turn_kind(step: int) -> ActionKind:
        return ActionKind.FIRSTURN if step == l - 1 else ActionKind.YOUTURN

    def release(step: int) -> None:
        slot = slot_of.pop(step, None)
        if slot is not None:
            free_slots.append(slot)
            free_slots.sort(reverse=True)

    while stack:
        task = stack.pop()
        if task[0] == "R":
            yield Action(ActionKind.REVERSE, step=task[1])
            release(task[1])
            continue
        kind, a, n, m = task
        if kind == "X":
            yield Action(ActionKind.RESTORE, slot=slot_of[a], step=a)
            kind = "S"
        stored = kind == "S"
        c = tab.choice(stored, n, a, m)
        if n == 1 or c == TURN:
            yield Action(turn_kind(a), step=a)
            release(a)
        elif c == TAPE:
            yield Action(ActionKind.TAPE, step=a)
            stack.append(("R", a))
            stack.append(("N", a + 1, n - 1, m - tu[a]))
        elif not stored and c == SHOT:
            if free_slots:
                slot = free_slots.pop()
            else:
                slot, next_slot = next_slot, next_slot + 1
            slot_of[a] = slot
            yield Action(ActionKind.TAKESHOT, slot=slot, step=a)
            stack.append(("S", a, n, m - su[a]))
        else:
            j = c - 1
            yield Action(ActionKind.ADVANCE, start=a, stop=a + j)
            stack.append(("X", a, j, m))
            stack.append(("N", a + j, n - j, m))
    yield Action(ActionKind.TERMINATE)
