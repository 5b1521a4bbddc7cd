"""Binomial checkpointing (Revolve): the optimal schedule for s slots, and its closed forms.

Griewank, "Achieving logarithmic growth of temporal and spatial complexity in reverse
automatic differentiation", OMS 1(1), 1992; Griewank & Walther, "Algorithm 799: Revolve",
ACM TOMS 26(1), 2000. Conventions (the Revolve / pyrevolve ones, docs/architecture.md):

* ``steps`` = l, states x_0 .. x_l, step i maps x_i to x_{i+1}.
* ``snaps`` = s counts *every* snapshot slot, including the one that holds x_0.
* beta(s, r) = C(s + r, s) is the longest chain reversible with s slots and r repetitions.
* t(l, s) = r*l - beta(s + 1, r - 1) untaped forward steps ("advances", the first sweep
  included), with r = r(l, s) = min{r : beta(s, r) >= l}; the reverse sweep tapes each
  step exactly once, so a gradient costs t + l step evaluations.

Pure: no arrays, no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

from ckptbench.schedules.actions import Action, ActionKind, check_int
from ckptbench.schedules.strategy import ClosedForm, Setting, StrategySpec

__all__ = ["REVOLVE", "beta", "optimal_forward_steps", "repetition_number", "schedule"]

_new = tuple.__new__


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


#: Repetitions counted one by one before :func:`_reps` searches (beta grows with r).
_COUNT_UP_TO = 64


def _reps(m: int, s: int) -> int:
    """r(m, s) for s >= 1: counted up (beta(s, r) = beta(s, r-1) * (s+r) / r) while r is
    small, which every schedule a gradient runs needs; past that, a galloping then binary
    search on r, so that a closed form for 10**60 steps with one slot (r = m - 1) takes
    about 400 binomials, not 10**60 loop turns."""
    r = 0
    b = 1  # beta(s, 0)
    while b < m:
        if r == _COUNT_UP_TO:
            return _reps_search(m, s, r)
        r += 1
        b = b * (s + r) // r
    return r


def _reps_search(m: int, s: int, below: int) -> int:
    """The least r > ``below`` with beta(s, r) >= m, given beta(s, below) < m."""
    lo, hi = below, 2 * below
    while beta(s, hi) < m:
        lo, hi = hi, 2 * hi
    while hi - lo > 1:  # beta(s, lo) < m <= beta(s, hi)
        mid = (lo + hi) // 2
        if beta(s, mid) < m:
            lo = mid
        else:
            hi = mid
    return hi


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
    yield new(A, (ActionKind.TERMINATE, None, None, None, None))


def _peak(steps: int, snaps: int) -> int:
    """The most slots held at once, exactly, as the replay counts them: all ``snaps`` while
    they are fewer than the steps; with a slot per step (``snaps`` clamped to l) x_0 ..
    x_{l-2}, l - 1, since x_{l-1} is in hand when the reversal begins and never stored; and
    x_0's slot for a one-step chain. ``tests/test_revolve_peak.py`` replays every l <= 60,
    s <= l + 3 against it."""
    return max(1, min(snaps, steps - 1))


#: Optimal binomial checkpointing: the fewest advances for s slots; the reference curve.
REVOLVE = StrategySpec(
    name="revolve",
    label="Revolve (binomial)",
    marker="o",
    setting=Setting.SNAPS,
    help="optimal binomial checkpointing with --snaps slots (Griewank & Walther)",
    stream=schedule,
    closed_form=ClosedForm(optimal_forward_steps, _peak, repetition_number),
    lower_bound=optimal_forward_steps,
    fits_budget=True,
    reference=True,
)
