"""The per-layer view of a plan (``ckptbench plan`` on per-step costs, e.g. a layer chain):
for every layer its measured costs and what the plan does with it, the way rotor and
rockmate present their solutions. Returns records and a table (see
:mod:`ckptbench.render.table`); never prints."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ckptbench.render.format import NAME_CHARS, fmt_name, fmt_seconds, fmt_size
from ckptbench.render.table import Column, Table
from ckptbench.schedules import replay_bytes
from ckptbench.schedules.fates import step_fates

__all__ = ["action_records", "action_table", "layer_records", "layer_table", "name_column"]


def name_column(key: str, header: str) -> Column:
    """A column of layer names (a plug-in's own, or a built-in's): each on one line, and in a
    text table too narrow for the longest, each cut to :data:`NAME_CHARS` characters first,
    before any column of numbers is left out (named under the table); CSV and JSON keep
    every name whole."""
    return Column(
        key, header, lambda v, _r: fmt_name(v), align="left",
        narrow=lambda v, _r: fmt_name(v, NAME_CHARS), narrow_priority=9,
        narrow_drops="the start of long names",
    )  # fmt: skip


def layer_records(plan: Any, names: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """One record per step of ``plan`` (a :class:`ckptbench.schedules.optimal.Plan`): its
    name, its four costs (seconds, bytes) and the plan's part in it (``snapshot``,
    ``kept_tape``, ``advances``, ``recomputed``, ``plan`` in words). ``names`` default to
    ``step0``, ``step1``, ..."""
    steps = plan.steps
    names = list(names) if names is not None else [f"step{i}" for i in range(steps)]
    if len(names) != steps:
        raise ValueError(f"{len(names)} layer names for a plan of {steps} steps")
    fwd, taped, state, tape = plan.costs.per_step(steps)
    records = []
    for fate, name in zip(step_fates(plan.action_list, steps), names, strict=True):
        i = fate.step
        records.append(
            {
                "layer": name,
                "forward_time_s": fwd[i],
                "taped_time_s": taped[i],
                "state_bytes": state[i],
                "tape_bytes": tape[i],
                "snapshot": fate.snapshot,
                "kept_tape": fate.kept_tape,
                "advances": fate.advances,
                "recomputed": fate.recomputed,
                "plan": fate.describe(),
            }
        )
    return records


def _ms(value: Any, _record: dict[str, Any]) -> str:
    return f"{value * 1e3:.3f}"


def _bytes(value: Any, _record: dict[str, Any]) -> str:
    return fmt_size(value)


def layer_table(plan: Any, names: Sequence[str] | None = None) -> Table:
    """The per-layer table of ``plan``: costs and the plan's part, with the plan's predicted
    time and stored bytes in the title."""
    p = plan.prediction
    title = (
        f"optimal plan per layer within {fmt_size(plan.budget_bytes)}: predicted "
        f"{fmt_seconds(plan.predicted_time_s)}, stored {fmt_size(plan.peak_bytes)} at the peak "
        f"(states {fmt_size(p.peak_state_bytes)}, tapes {fmt_size(p.peak_tape_bytes)}); "
        f"{p.advances} recomputations (untaped runs), {p.tapes_kept} tapes kept"
    )
    columns = (
        name_column("layer", "layer"),
        Column("forward_time_s", "forward ms", _ms),
        Column("taped_time_s", "taped + reverse ms", _ms),
        Column("state_bytes", "state x_i", _bytes),
        Column("tape_bytes", "tape", _bytes),
        Column("advances", "advances", priority=2),
        Column("plan", "plan", align="left"),
        Column("snapshot", "snapshot", priority=0),
        Column("kept_tape", "kept tape", priority=0),
        Column("recomputed", "recomputed", priority=0),
    )
    if plan.exact:
        notes: tuple[str, ...] = ()
    elif plan.chosen != "program":  # a stream set by snaps, in exact bytes (planner.Plan)
        notes = (f"{plan.chosen}'s stream in exact bytes: the program, planning in quanta of "
                 f"{fmt_size(plan.quantum_bytes)}, had a slower plan or none",)  # fmt: skip
    else:
        notes = (f"memory planned in quanta of {fmt_size(plan.quantum_bytes)} (sizes rounded up)",)
    return Table(title, columns, tuple(layer_records(plan, names)), notes=notes)


def action_records(plan: Any) -> list[dict[str, Any]]:
    """One record per action of ``plan`` (``plan --actions``): its index, the action as
    ``schedule --actions`` prints it and the bytes it keeps stored (live states and kept
    tapes, a turn's own tape included: what ``run --trace`` plans)."""
    _, _, state, tape = plan.costs.per_step(plan.steps)
    stored = replay_bytes(plan.action_list, plan.steps, state, tape, per_action=True)
    return [
        {"index": i, "action": repr(act), "stored_bytes": b}
        for i, (act, b) in enumerate(zip(plan.action_list, stored.action_bytes, strict=True))
    ]


def action_table(plan: Any) -> Table:
    """Every action of ``plan`` with the bytes it keeps stored (:func:`action_records`)."""
    title = (
        f"the optimal plan's {len(plan.action_list)} actions within "
        f"{fmt_size(plan.budget_bytes)} (stored: at most {fmt_size(plan.peak_bytes)})"
    )
    columns = (
        Column("index", "#"),
        Column("action", "action", align="left"),
        Column("stored_bytes", "stored", _bytes),
    )
    return Table(title, columns, tuple(action_records(plan)))
