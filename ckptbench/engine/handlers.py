"""What each action does to one call's state (``interpreter.EngineRun``), once for both sweeps.

ADVANCE, TAKESHOT and TAPE run in the first sweep and in the reverse sweep alike: one handler
each, ``handler(run, ops, act, state, outputs, t0) -> (state, now)``, adding the action's
time since ``t0`` to its phase (with a timing recorder, ``run --trace``, an ADVANCE runs
and times its steps one by one). A YOUTURN (tape one step and reverse it at once) is the
reverse sweep's own (``interpreter.reverse_turns``). ``run`` is an ``EngineRun``, ``ops`` a
backend's ``StepOps``.
"""

from __future__ import annotations

from typing import Any

from ckptbench.engine.clock import perf_counter
from ckptbench.schedules import ActionKind

__all__ = ["BOTH_SWEEPS", "advance", "takeshot", "tape"]


def advance(run: Any, ops: Any, act: Any, state: Any, outputs: bool, t0: float):
    n = act.stop - act.start
    timer = getattr(run.recorder, "step_timer", None)
    if timer is None:
        state = ops.advance(state, act.start, act.stop, outputs)
    else:  # run --trace: each step alone, timed (the per-layer times)
        clock = perf_counter
        for i in range(act.start, act.stop):
            t = clock()
            state = ops.advance(state, i, i + 1, outputs)
            timer(i, clock() - t)
    run.advanced += n
    if outputs and run.readouts:
        run.post_calls += n
    now = perf_counter()
    run.advance_s += now - t0
    return state, now


def takeshot(run: Any, ops: Any, act: Any, state: Any, outputs: bool, t0: float):
    run.store(act.slot, act.step, state, run.schedule.state_bytes_of(act.step, state, ops))
    now = perf_counter()
    run.book_s += now - t0
    return state, now


def tape(run: Any, ops: Any, act: Any, state: Any, outputs: bool, t0: float):
    kept, state = ops.tape(state, act.step, outputs)
    run.keep_tape(act.step, kept)
    run.taped += 1
    now = perf_counter()
    run.taped_s += now - t0
    return state, now


#: The handler of every action kind both sweeps run.
BOTH_SWEEPS = {ActionKind.ADVANCE: advance, ActionKind.TAKESHOT: takeshot, ActionKind.TAPE: tape}
