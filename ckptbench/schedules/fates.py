"""What a schedule does with each step: taped and kept, snapshot kept, recomputed how often.

For a layer chain step ``i`` is layer ``i`` and its state is the layer's input ``x_i``, so
this is the per-layer view ``ckptbench plan`` prints beside each layer's costs (as rotor and
rockmate present their solutions). Every step is taped exactly once (by ``TAPE``, kept until
its ``REVERSE``, or at its turn by ``YOUTURN``/``FIRSTURN``); its forward otherwise runs
untaped in ``ADVANCE`` actions, the first of which is the first sweep's own and the others
recomputations. Pure: no arrays, no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ckptbench.schedules.actions import Action, ActionKind

__all__ = ["StepFate", "step_fates"]


@dataclass(frozen=True)
class StepFate:
    """One step's part in a schedule.

    ``snapshot``: x_i is stored in a slot (TAKESHOT) at least once; ``kept_tape``: the step
    is taped and its tape kept until its reverse (TAPE); ``advances``: its untaped forward
    runs. Its forward runs ``advances + 1`` times in all (the taped run included), so it is
    recomputed ``advances`` times when it first ran untaped, never when it was first taped."""

    step: int
    snapshot: bool
    kept_tape: bool
    advances: int

    @property
    def recomputed(self) -> int:
        """Forward runs beyond the first (its taped run counts as one when it is untaped
        first)."""
        return self.advances

    def describe(self) -> str:
        """``snapshot kept``, ``taped and kept``, ``recomputed N times`` (advanced untaped
        N times, then taped at its turn) or ``taped at its turn`` (its one forward is the
        taped one), joined by ``; ``."""
        parts = []
        if self.snapshot:
            parts.append("snapshot kept")
        if self.kept_tape:
            parts.append("taped and kept")
        if self.advances:
            parts.append(f"recomputed {self.advances} time{'s' if self.advances > 1 else ''}")
        elif not self.kept_tape:
            parts.append("taped at its turn")
        return "; ".join(parts)


def step_fates(actions: Iterable[Action], steps: int) -> tuple[StepFate, ...]:
    """One :class:`StepFate` per step of the stream ``actions`` over ``steps`` steps."""
    snaps, kept, advances = [False] * steps, [False] * steps, [0] * steps
    for act in actions:
        kind = act.kind
        if kind is ActionKind.ADVANCE:
            for i in range(act.start, act.stop):
                advances[i] += 1
        elif kind is ActionKind.TAKESHOT and act.step < steps:
            snaps[act.step] = True
        elif kind is ActionKind.TAPE:
            kept[act.step] = True
    return tuple(StepFate(i, snaps[i], kept[i], advances[i]) for i in range(steps))
