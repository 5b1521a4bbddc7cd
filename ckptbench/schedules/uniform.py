"""Uniform segments: the sqrt(n) strategy of ``checkpoint_sequential`` and Graphcore.

Chen, Xu, Zhang & Guestrin, "Training deep nets with sublinear memory cost", 2016: the chain
is cut into k near-equal segments whose start states are stored in the first sweep; each
segment is rerun once from its start and reversed. Written in the action vocabulary of
:mod:`ckptbench.schedules.actions`, so the same executors run it and :func:`replay` checks
it. It has no closed form: its counts come from a replay.

Pure: no arrays, no I/O.
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
from ckptbench.schedules.revolve import optimal_forward_steps
from ckptbench.schedules.strategy import Setting, StrategySpec

__all__ = ["UNIFORM", "uniform_schedule"]

_new = tuple.__new__


def uniform_schedule(steps: int, snaps: int) -> Iterator[Action]:
    """Uniform segments: the sqrt(n) strategy of ``checkpoint_sequential`` and Graphcore.

    The chain is cut into k near-equal segments whose start states are stored in the first
    sweep (k slots). Each segment is then rerun once from its start, storing its interior
    states in the remaining ``snaps - k`` slots, and reversed from them. A segment's last
    state is never stored: it is in hand when its step is reversed first, so a segment of
    n steps uses at most n - 2 interior slots. With snaps >= about 2*sqrt(steps) every
    segment fits and the cost is about one extra forward sweep; with fewer slots the states
    of a segment that do not fit are recomputed from the last stored one. k is chosen to
    minimise advances, then slots; the peak never exceeds ``snaps``, and every state stored
    is restored at least once (but x_0 of a one-step chain, the slot Revolve's convention
    gives it).
    """
    check_int("steps", steps)
    check_int("snaps", snaps)
    return _uniform(steps, snaps)


def _uniform_cost(l: int, s: int, k: int) -> tuple[int, int]:
    """(advances, peak slots) of the uniform strategy with k segments, in O(1): the cuts
    i*l//k make ``l mod k`` segments of q+1 steps and the rest of q (q = l // k), and a
    segment's cost depends on its length alone."""
    q, longer = divmod(l, k)
    interior = s - k

    def held(seg: int) -> int:  # interior states of a segment that get a slot
        return _held_states(seg, interior)

    def cost(seg: int) -> int:  # its interior advanced once, its tail re-advanced per turn
        tail = seg - held(seg)
        return held(seg) + tail * (tail - 1) // 2

    first_sweep = (k - 1) * l // k  # the advances to the last segment's start
    adv = first_sweep + longer * cost(q + 1) + (k - longer) * cost(q)
    return adv, k + held(q + 1 if longer else q)


def _held_states(seg: int, interior: int) -> int:
    """How many interior states x_{a+1}.. of a segment of ``seg`` steps get one of the
    ``interior`` free slots: at most seg - 2, since its last state x_{b-1} is in hand when
    step b-1 is reversed first and would never be restored (a slot stored for nothing; the
    advances are the same either way, held + tail * (tail - 1) / 2 with tail = seg - held)."""
    return max(0, min(seg - 2, interior))


def _uniform_segments(l: int, s: int) -> int:
    best = min(range(1, min(l, s) + 1), key=lambda k: (*_uniform_cost(l, s, k), k))
    return best


def _uniform(l: int, s: int) -> Iterator[Action]:
    new = _new
    A = Action
    nseg = _uniform_segments(l, s)
    bounds = [i * l // nseg for i in range(nseg + 1)]
    interior = s - nseg
    yield new(A, (TAKESHOT, None, None, 0, 0))
    for i in range(1, nseg):
        yield new(A, (ADVANCE, bounds[i - 1], bounds[i], None, None))
        yield new(A, (TAKESHOT, None, None, i, bounds[i]))
    for i in range(nseg - 1, -1, -1):
        a, b = bounds[i], bounds[i + 1]
        if i != nseg - 1:
            yield new(A, (RESTORE, None, None, i, a))
        held = _held_states(b - a, interior)  # x_{a+1}..x_{a+held} get slots
        for j in range(a + 1, a + held + 1):
            yield new(A, (ADVANCE, j - 1, j, None, None))
            yield new(A, (TAKESHOT, None, None, nseg + j - a - 1, j))
        base = a + held
        base_slot = nseg + held - 1 if held else i
        fresh = True  # current state is x_base
        for j in range(b - 1, base - 1, -1):
            if not fresh:
                yield new(A, (RESTORE, None, None, base_slot, base))
            if j > base:
                yield new(A, (ADVANCE, base, j, None, None))
            yield new(A, (FIRSTURN if j + 1 == l else YOUTURN, None, None, None, j))
            fresh = False
        for j in range(base - 1, a - 1, -1):
            yield new(A, (RESTORE, None, None, nseg + j - a - 1 if j > a else i, j))
            yield new(A, (YOUTURN, None, None, None, j))
    yield new(A, (TERMINATE, None, None, None, None))


#: Equal segments with their interiors stored where slots allow.
UNIFORM = StrategySpec(
    name="uniform",
    label="equal segments",
    marker="s",
    setting=Setting.SNAPS,
    help="sqrt(n)-style equal segments within --snaps slots",
    stream=uniform_schedule,
    lower_bound=optimal_forward_steps,
    fits_budget=True,
)
