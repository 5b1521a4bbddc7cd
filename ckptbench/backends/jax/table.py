"""Action streams as int32 tables: the form the compiled JAX executor runs.

A :mod:`ckptbench.schedules` action stream (Revolve, Griewank & Walther, ACM TOMS 26(1),
2000; or a budget plan with kept tapes, Beaumont et al. 2019, see ``schedules.optimal.planner``) is
packed into rows of one fixed template, in this order::

    restore? slot | snapshot? slot | advance a0 -> a1 | tape run | turn? step | reverse run

A row takes consecutive actions as long as each one's part comes after the previous one's
(consecutive TAPE actions of steps t0, t0+1, ... form one run; consecutive REVERSE actions
of steps r0, r0-1, ... form one run). FIRSTURN ends its row and the first sweep: the rows
before and including it are the forward pass, the rest the reverse sweep. Every part of a
row is a loop whose trip count comes from the table (0 or 1 for the flags), so the executor
runs any stream with one loop body and no branches (docs/architecture.md, "The JAX
backend"). Kept tapes live in a buffer of ``tape_slots`` entries; ``tape_slot[i]`` is the
entry of step i's tape (slots are reused once a tape is reversed).

This module is pure (numpy integers, no JAX): :func:`decode` turns a table back into the
action stream, so tests replay it with :func:`ckptbench.schedules.replay`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from ckptbench.schedules import Action, ActionKind, check_int

__all__ = ["COLUMNS", "ActionTable", "TableError", "decode", "encode"]

#: Column names of a table row, in order.
COLUMNS: tuple[str, ...] = (
    "restore",  # 0/1
    "restore_slot",
    "snapshot",  # 0/1
    "snapshot_slot",
    "advance_start",  # a0; the advance runs steps a0 .. a1-1 (a0 == a1: none)
    "advance_stop",  # a1
    "tape_start",  # t0; the run tapes and keeps steps t0 .. t0+nt-1
    "tape_count",  # nt
    "turn",  # 0/1 (YOUTURN; FIRSTURN is the end of the first sweep)
    "turn_step",
    "reverse_start",  # r0; the run reverses kept tapes of steps r0, r0-1, .., r0-nr+1
    "reverse_count",  # nr
)
_C = {name: k for k, name in enumerate(COLUMNS)}

# Template order of the parts; a row takes an action only after the parts it already has.
_PART = {
    ActionKind.RESTORE: 0,
    ActionKind.TAKESHOT: 1,
    ActionKind.ADVANCE: 2,
    ActionKind.TAPE: 3,
    ActionKind.YOUTURN: 4,
    ActionKind.FIRSTURN: 4,
    ActionKind.REVERSE: 5,
}


class TableError(ValueError):
    """An action stream cannot be encoded (not a complete, valid schedule shape)."""


@dataclass(frozen=True)
class ActionTable:
    """An encoded action stream: ``rows`` (int32, one row per template), where the first
    sweep ends, the tape buffer's layout and the snapshot slots used."""

    steps: int
    rows: np.ndarray = field(repr=False)  # (n_rows, len(COLUMNS)) int32
    first_rows: int  # rows of the first sweep, the FIRSTURN row included
    snapshot_slots: int  # slots 0 .. snapshot_slots-1 are used
    tape_slots: int  # entries of the kept-tape buffer (most tapes kept at once)
    tape_slot: np.ndarray = field(repr=False)  # (steps,) int32: buffer entry of step i's tape

    @property
    def n_rows(self) -> int:
        return int(self.rows.shape[0])

    def column(self, name: str) -> np.ndarray:
        return self.rows[:, _C[name]]


def _new_row() -> list[int]:
    return [0] * len(COLUMNS)


def encode(actions: Iterable[Action], steps: int) -> ActionTable:
    """Pack ``actions`` into template rows (see the module docstring).

    Raises :class:`TableError` when the stream has no FIRSTURN, an action after TERMINATE,
    a restore, reverse or turn before FIRSTURN, or no TERMINATE. Full validity (states,
    slots, order of reverses) is :func:`ckptbench.schedules.replay`'s job.
    """
    encoder = _Encoder(check_int("steps", steps))
    for act in actions:
        encoder.add(act)
    return encoder.table()


_NOT_IN_FIRST_SWEEP = (ActionKind.RESTORE, ActionKind.YOUTURN, ActionKind.REVERSE)


class _Encoder:
    """The rows of one stream, filled action by action (:func:`encode`), and the kept-tape
    buffer's entries."""

    def __init__(self, steps: int) -> None:
        self.steps = steps
        self.rows: list[list[int]] = []
        self.row: list[int] | None = None
        self.last = -1  # part index last filled in ``row``
        self.first_rows: int | None = None
        self.terminated = False
        self.tape_slot = np.full(steps, -1, dtype=np.int32)
        self.free: list[int] = []  # tape buffer entries released by a reverse
        self.used = 0  # tape buffer entries ever used
        self.max_slot = -1

    def close(self) -> None:
        if self.row is not None:
            self.rows.append(self.row)
        self.row, self.last = None, -1

    def add(self, act: Action) -> None:
        kind = act.kind
        if self.terminated:
            raise TableError(f"action {act!r} after TERMINATE")
        if kind is ActionKind.TERMINATE:
            self.close()
            self.terminated = True
            return
        if kind not in _PART:
            raise TableError(f"unknown action {act!r}")
        if self.first_rows is None and kind in _NOT_IN_FIRST_SWEEP:
            raise TableError(f"{act!r} before FIRSTURN")
        part = _PART[kind]
        if not self.joins(act, part):
            self.close()
            self.row = _new_row()
        self.fill(act, self.row)
        self.last = part
        if kind is ActionKind.FIRSTURN:  # ends the row and the first sweep
            self.close()
            self.first_rows = len(self.rows)

    def joins(self, act: Action, part: int) -> bool:
        """Whether ``act`` goes into the open row: a later part, or the next step of the
        row's tape run or reverse run."""
        row = self.row
        if row is None:
            return False
        if part > self.last:
            return True
        if part == self.last == _PART[ActionKind.TAPE]:
            return act.step == row[_C["tape_start"]] + row[_C["tape_count"]]
        if part == self.last == _PART[ActionKind.REVERSE]:
            return act.step == row[_C["reverse_start"]] - row[_C["reverse_count"]]
        return False

    def fill(self, act: Action, row: list[int]) -> None:
        kind = act.kind
        if kind is ActionKind.RESTORE:
            row[_C["restore"]], row[_C["restore_slot"]] = 1, act.slot
        elif kind is ActionKind.TAKESHOT:
            row[_C["snapshot"]], row[_C["snapshot_slot"]] = 1, act.slot
            self.max_slot = max(self.max_slot, act.slot)
        elif kind is ActionKind.ADVANCE:
            row[_C["advance_start"]], row[_C["advance_stop"]] = act.start, act.stop
        elif kind is ActionKind.TAPE:
            self.tape(act, row)
        elif kind is ActionKind.REVERSE:
            self.reverse(act, row)
        elif kind is ActionKind.YOUTURN:
            row[_C["turn"]], row[_C["turn_step"]] = 1, act.step
        else:  # FIRSTURN
            if self.first_rows is not None or act.step != self.steps - 1:
                raise TableError(f"{act!r}: FIRSTURN must reverse step {self.steps - 1}, once")
            row[_C["turn_step"]] = act.step

    def tape(self, act: Action, row: list[int]) -> None:
        """TAPE: extend the row's tape run and give the tape a buffer entry."""
        if row[_C["tape_count"]] == 0:
            row[_C["tape_start"]] = act.step
        row[_C["tape_count"]] += 1
        if not 0 <= act.step < self.steps or self.tape_slot[act.step] >= 0:
            raise TableError(f"{act!r}: step outside 0..{self.steps - 1} or taped twice")
        if self.free:
            self.tape_slot[act.step] = self.free.pop()
        else:
            self.tape_slot[act.step], self.used = self.used, self.used + 1

    def reverse(self, act: Action, row: list[int]) -> None:
        """REVERSE: extend the row's reverse run and release the tape's buffer entry."""
        if row[_C["reverse_count"]] == 0:
            row[_C["reverse_start"]] = act.step
        row[_C["reverse_count"]] += 1
        if not 0 <= act.step < self.steps or self.tape_slot[act.step] < 0:
            raise TableError(f"{act!r}: no kept tape of step {act.step}")
        self.free.append(int(self.tape_slot[act.step]))

    def table(self) -> ActionTable:
        self.close()
        if self.first_rows is None:
            raise TableError("the stream has no FIRSTURN")
        if not self.terminated:
            raise TableError("the stream ended without TERMINATE")
        rows = np.asarray(self.rows, dtype=np.int32).reshape(len(self.rows), len(COLUMNS))
        return ActionTable(
            steps=self.steps,
            rows=rows,
            first_rows=self.first_rows,
            snapshot_slots=self.max_slot + 1,
            tape_slots=self.used,
            tape_slot=self.tape_slot,
        )


def decode(table: ActionTable) -> list[Action]:
    """The action stream a table encodes (the inverse of :func:`encode`)."""
    out: list[Action] = []
    for r, row in enumerate(table.rows.tolist()):
        if row[_C["restore"]]:
            out.append(Action(ActionKind.RESTORE, slot=row[_C["restore_slot"]], step=None))
            # the step of a restore is the slot's content: filled in below
        if row[_C["snapshot"]]:
            out.append(Action(ActionKind.TAKESHOT, slot=row[_C["snapshot_slot"]], step=None))
        a0, a1 = row[_C["advance_start"]], row[_C["advance_stop"]]
        if a1 > a0:
            out.append(Action(ActionKind.ADVANCE, start=a0, stop=a1))
        t0, nt = row[_C["tape_start"]], row[_C["tape_count"]]
        out.extend(Action(ActionKind.TAPE, step=t0 + j) for j in range(nt))
        if r == table.first_rows - 1:
            out.append(Action(ActionKind.FIRSTURN, step=row[_C["turn_step"]]))
        elif row[_C["turn"]]:
            out.append(Action(ActionKind.YOUTURN, step=row[_C["turn_step"]]))
        r0, nr = row[_C["reverse_start"]], row[_C["reverse_count"]]
        out.extend(Action(ActionKind.REVERSE, step=r0 - j) for j in range(nr))
    out.append(Action(ActionKind.TERMINATE))
    return _fill_steps(out)


def _fill_steps(actions: list[Action]) -> list[Action]:
    """Give TAKESHOT and RESTORE the step they hold, by following the current state."""
    current: int | None = 0
    slots: dict[int, int] = {}
    filled = []
    for act in actions:
        kind = act.kind
        if kind is ActionKind.TAKESHOT:
            slots[act.slot] = current  # type: ignore[assignment]
            act = act._replace(step=current)
        elif kind is ActionKind.RESTORE:
            current = slots.get(act.slot)
            act = act._replace(step=current)
        elif kind is ActionKind.ADVANCE:
            current = act.stop
        elif kind is ActionKind.TAPE:
            current = act.step + 1
        elif kind in (ActionKind.YOUTURN, ActionKind.FIRSTURN, ActionKind.REVERSE):
            current = None
        filled.append(act)
    return filled
