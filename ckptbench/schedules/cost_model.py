"""One cost model for every action stream: predicted time, storage peak and counts.

Given a chain's step costs (:class:`ckptbench.schedules.optimal.Costs`), :func:`predict`
scores any stream, so Revolve, equal segments and the budget planner's plan are compared by
one function (``ckptbench plan``, :mod:`ckptbench.schedules.compare`):

* time = ``fixed_time_s`` + forward cost of every untaped advance + taped cost of every
  step (each step is taped exactly once, by TAPE or a turn);
* storage = the states in live snapshot slots (x_0 included when the schedule stores it,
  which every schedule here does) + the kept tapes + the tape of the step being reversed
  by a FIRSTURN/YOUTURN. A snapshot of x_i lives until step i is reversed (Revolve's rule,
  and the executor's); the current state is not counted. The peak of this sum is what a
  budget bounds and what a plan's ``peak_bytes`` reports, in exact bytes.

Pure: no arrays, no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ckptbench.schedules.actions import Action, ActionKind, replay_bytes

if TYPE_CHECKING:
    from ckptbench.schedules.optimal.costs import Costs

__all__ = ["Prediction", "largest_fitting", "predict"]


@dataclass(frozen=True)
class Prediction:
    """A schedule scored by the cost model: time, storage peak, counts."""

    time_s: float
    peak_bytes: int
    peak_state_bytes: int
    peak_tape_bytes: int
    advances: int
    tapes_kept: int  # TAPE actions (tapes kept beyond their own step)
    peak_tapes: int  # most tapes kept at once, the live one excluded
    snapshots: int  # TAKESHOT actions
    peak_snapshots: int


def predict(actions: Iterable[Action], steps: int, costs: Costs) -> Prediction:
    """Replay ``actions`` (checked like :func:`ckptbench.schedules.replay_bytes`) and score them.

    Example: Revolve with 31 slots on 1000 steps, forward 0.4 ms, taped 2.5 ms, 64 KiB
    states, 440 KiB tapes: time = 2439 * 0.4 ms + 1000 * 2.5 ms = 3.4756 s and peak =
    31 * 64 KiB + 440 KiB.
    """
    cf, cb, sb, tb = costs.per_step(steps)
    acts = list(actions)
    r = replay_bytes(acts, steps, sb, tb)
    tapes = sum(1 for a in acts if a.kind is ActionKind.TAPE)
    time_s = costs.fixed_time_s + math.fsum(
        [n * f for n, f in zip(r.step_advances, cf, strict=True)] + cb
    )
    return Prediction(
        time_s=time_s,
        peak_bytes=r.peak_bytes,
        peak_state_bytes=r.peak_state_bytes,
        peak_tape_bytes=r.peak_tape_bytes,
        advances=r.stats.advances,
        tapes_kept=tapes,
        peak_tapes=r.stats.peak_tapes,
        snapshots=r.stats.takeshots,
        peak_snapshots=r.stats.peak_snapshots,
    )


def largest_fitting(
    make: Callable[[int], Iterator[Action]], steps: int, costs: Costs, budget: int
) -> tuple[int, Prediction] | None:
    """Most slots s (1..steps) whose schedule ``make(s)`` predicts a peak within budget."""
    _, _, sb, tb = costs.per_step(steps)
    s = max(1, min(steps, (budget - max(tb)) // max(sb)))
    best = None
    while s >= 1:  # walk down until it fits
        p = predict(make(s), steps, costs)
        if p.peak_bytes <= budget:
            best = (s, p)
            break
        s -= 1
    if best is None:
        return None
    s = best[0]
    while s < steps:  # a cheaper-than-assumed peak may leave room for more slots
        p = predict(make(s + 1), steps, costs)
        if p.peak_bytes > budget:
            break
        s, best = s + 1, (s + 1, p)
    return best
