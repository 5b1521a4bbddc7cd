"""Store-all: every state x_0 .. x_{l-1} kept in the first sweep, no recomputation.

The other end of the trade-off from Revolve with one slot: l - 1 slots (x_0 .. x_{l-2}; x_{l-1}
is in hand when the reversal begins, and a one-step chain stores nothing), l - 1 advances (the
first sweep only), every step taped once in the reverse sweep. Written in the action
vocabulary of :mod:`ckptbench.schedules.actions`. Pure: no arrays, no I/O.
"""

from __future__ import annotations

from collections.abc import Iterator

from ckptbench.schedules.actions import (
    ADVANCE,
    FIRSTURN,
    RESTORE,
    TAKESHOT,
    TERMINATE,
    YOUTURN,
    Action,
    check_int,
)
from ckptbench.schedules.strategy import ClosedForm, Setting, StrategySpec

__all__ = ["STORE_ALL", "store_all_schedule"]

_new = tuple.__new__


def store_all_schedule(steps: int) -> Iterator[Action]:
    """Store every state x_0..x_{l-1} in the first sweep, then reverse with no recomputation.

    Uses l - 1 slots (none for one step); advances l - 1 steps (the first sweep only).
    """
    check_int("steps", steps)
    return _store_all(steps)


def _store_all(l: int) -> Iterator[Action]:
    new = _new
    A = Action
    for i in range(l - 1):
        yield new(A, (TAKESHOT, None, None, i, i))
        yield new(A, (ADVANCE, i, i + 1, None, None))
    yield new(A, (FIRSTURN, None, None, None, l - 1))
    for i in range(l - 2, -1, -1):
        yield new(A, (RESTORE, None, None, i, i))
        yield new(A, (YOUTURN, None, None, None, i))
    yield new(A, (TERMINATE, None, None, None, None))


def _store_all_advances(steps: int, snaps: int) -> int:
    return steps - 1


def _held(steps: int, snaps: int) -> int:
    """The peak, exactly: x_0 .. x_{l-2} stored, x_{l-1} in hand at FIRSTURN (0 for one step,
    as the replay counts; ``snaps``, recorded as ``steps``, is not used)."""
    return steps - 1


def _once(steps: int, snaps: int) -> int:
    """r(l, l) = min{r : C(l + r, l) >= l}: 1, but 0 for one step, which no schedule advances
    (C(1, 1) = 1 >= 1; Revolve's r(1, s) = 0 likewise)."""
    return 1 if steps > 1 else 0


def _store_all_stream(steps: int, snaps: int) -> Iterator[Action]:
    return store_all_schedule(steps)


#: Every state stored, whatever --snaps says: the fastest schedule and the largest.
STORE_ALL = StrategySpec(
    name="store-all",
    label="store all",
    marker="^",
    setting=Setting.SNAPS,
    help="store every state (l - 1 slots, the last in hand; --snaps not used)",
    stream=_store_all_stream,
    closed_form=ClosedForm(_store_all_advances, _held, _once),
    lower_bound=_store_all_advances,
    uses_snaps=False,
)
