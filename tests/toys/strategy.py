"""A toy strategy declared outside ckptbench: one slot holding x_0, every state recomputed
from it (quadratic advances). It proves that a strategy is one spec and its stream: the
contract test runs it on every engine binding without editing any ckptbench module."""

from __future__ import annotations

from collections.abc import Iterator

from ckptbench.schedules import Action, ActionKind, Setting, StrategySpec, check_int
from ckptbench.schedules.strategy import ClosedForm


def from_start(steps: int, snaps: int) -> Iterator[Action]:
    """x_0 in slot 0; the reverse of step j restores it and advances 0..j (``snaps`` unused
    beyond the one slot)."""
    check_int("steps", steps)
    check_int("snaps", snaps)
    yield Action(ActionKind.TAKESHOT, slot=0, step=0)
    if steps > 1:
        yield Action(ActionKind.ADVANCE, start=0, stop=steps - 1)
    yield Action(ActionKind.FIRSTURN, step=steps - 1)
    for j in range(steps - 2, -1, -1):
        yield Action(ActionKind.RESTORE, slot=0, step=0)
        if j > 0:
            yield Action(ActionKind.ADVANCE, start=0, stop=j)
        yield Action(ActionKind.YOUTURN, step=j)
    yield Action(ActionKind.TERMINATE)


def from_start_advances(steps: int, snaps: int) -> int:
    """(l - 1) + (l - 2) + ... + 1 = l (l - 1) / 2."""
    return steps * (steps - 1) // 2


#: The toy: registered by the tests that use it, never by ckptbench.
FROM_START = StrategySpec(
    name="toy-from-start",
    label="toy: every state from x_0",
    marker="*",
    setting=Setting.SNAPS,
    help="toy strategy of the tests: one slot, every state recomputed from x_0",
    stream=from_start,
    closed_form=ClosedForm(from_start_advances, lambda steps, s: 1, lambda steps, s: steps - 1),
)
