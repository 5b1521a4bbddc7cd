"""The schedule interpreter every backend shares: slots, kept tapes, counters, timers, bytes.

A checkpointing schedule (:mod:`ckptbench.schedules`: binomial Revolve, Griewank & Walther,
"Algorithm 799: Revolve", ACM TOMS 26(1), 2000; equal segments; store-all; the budget
planner's plans keeping states *and* tapes, Beaumont et al., "Optimal checkpointing for
heterogeneous chains", 2019) is a stream of actions. This module runs that stream once for
every framework (see docs/architecture.md, "The engine"):

* :func:`first_sweep` runs the actions up to FIRSTURN (the binding's forward pass): it
  computes every step's output, places the snapshots and keeps the tapes the schedule asks
  for, ending on the taped last step;
* :func:`reverse_sweep` resumes the same stream after FIRSTURN (the binding's vjp /
  backward) and returns the cotangent of the initial state; the step operations add the
  parameter and input cotangents into their own accumulators on the way;
* a second reverse of the same call re-runs the first sweep without outputs first.

The bindings time their whole forward and reverse (``executor_time_s``); the engine times
each action's phase (advances, taped steps with their reverses, bookkeeping).

A backend supplies only :class:`StepOps` (advance untaped, tape one step, reverse one tape,
the bytes of a state) and a thin binding making the whole loop one differentiable operation
(``backends.autograd.binding`` for autograd, ``backends.torch.binding`` for torch).

Every counter means the same on every backend: ``peak_stored_bytes`` is the most bytes of
live snapshots (each its own state's bytes, or the plan's declared ``state_bytes[i]``: a
chain's states differ) + kept tapes + the tape being reversed, with the *declared* tape
bytes (a plan's costs, or ``tape_bytes``), exactly as
:func:`ckptbench.schedules.replay_bytes` counts them with per-step bytes; every RESTORE is
checked against the slot's step; an action kind the engine does not know is one
:class:`UnknownActionError`.
"""

from __future__ import annotations

from collections.abc import Generator, Iterator
from typing import Any

from ckptbench.backends.contract import CheckpointStats, ExecutorCounters
from ckptbench.engine.clock import perf_counter
from ckptbench.engine.handlers import BOTH_SWEEPS
from ckptbench.engine.loop_schedule import LoopSchedule, loop_schedule
from ckptbench.engine.steps import StepOps, UnrolledOps
from ckptbench.schedules import Action, ActionKind

__all__ = [
    "HANDLED_KINDS",
    "EngineLoop",
    "EngineRun",
    "LoopSchedule",
    "ScheduledLoop",
    "StepOps",
    "UnknownActionError",
    "UnrolledOps",
    "first_sweep",
    "loop_schedule",
    "reverse_sweep",
    "reverse_turns",
]

_RESTORE, _REVERSE = ActionKind.RESTORE, ActionKind.REVERSE
_FIRSTURN, _YOUTURN, _TERMINATE = ActionKind.FIRSTURN, ActionKind.YOUTURN, ActionKind.TERMINATE

#: The action kinds the engine interprets; any other kind is an :class:`UnknownActionError`.
HANDLED_KINDS = frozenset(ActionKind)


class UnknownActionError(NotImplementedError):
    """The schedule emitted an action kind the engine cannot interpret."""


def _unknown(act: Any) -> UnknownActionError:
    known = ", ".join(sorted(k.name for k in HANDLED_KINDS))
    kind = getattr(act.kind, "name", act.kind)
    return UnknownActionError(
        f"the engine cannot run action {kind!r} (it knows {known}); "
        "teach ckptbench.engine.interpreter the new kind"
    )


# ---------------------------------------------------------------------- the loops


class ScheduledLoop:
    """What every checkpointed loop holds, a recurrence's or a layer chain's: the validated
    :class:`LoopSchedule` (``steps``, ``snaps``, ``strategy``, ``plan``; the arguments of
    :func:`loop_schedule`, a plan made before the loop by the binding with
    ``ckptbench.schedules.plan_from``), ``stats`` (the counters of the most recent call)
    and ``recorder`` (``run --trace``: handed every action of the next calls)."""

    def __init__(
        self, steps: int, snaps: int | None = None, strategy: Any = None,
        *, plan: Any = None, tape_bytes: int = 0,
    ) -> None:  # fmt: skip
        self.schedule = loop_schedule(steps, snaps, strategy, plan=plan, tape_bytes=tape_bytes)
        self.steps = self.schedule.steps
        self.snaps = self.schedule.snaps
        self.strategy = self.schedule.strategy
        self.plan = self.schedule.plan
        self.stats: CheckpointStats | None = None
        self.recorder: Any = None

    def new_run(self) -> EngineRun:
        """The state of one call of this loop (with the recorder, when one is set)."""
        return EngineRun(self.schedule, self.recorder)


class EngineLoop(ScheduledLoop):
    """A recurrence's checkpointed loop: ``step``, ``post`` and what every
    :class:`ScheduledLoop` holds. The bindings subclass it and add ``__call__``."""

    def __init__(
        self, step: Any, post: Any, steps: int, snaps: int | None = None, strategy: Any = None,
        *, plan: Any = None, tape_bytes: int = 0,
    ) -> None:  # fmt: skip
        if not callable(step) or not callable(post):
            raise ValueError("step and post must be callables")
        self.step = step
        self.post = post
        super().__init__(steps, snaps, strategy, plan=plan, tape_bytes=tape_bytes)

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(steps={self.steps}, snaps={self.snaps}, "
            f"strategy={self.strategy.name!r})"
        )


# ---------------------------------------------------------------------- one call's state


class EngineRun(ExecutorCounters):
    """Mutable state of one call: the action stream, snapshots, kept tapes and counters."""

    def __init__(self, schedule: LoopSchedule, recorder: Any = None) -> None:
        super().__init__()
        self.schedule = schedule
        self.recorder = recorder  # None, or ``record(run, index, act, planned_bytes)``
        self.actions: Iterator[Action] | None = None
        self.slots: dict[int, tuple[int, Any, int]] = {}  # slot -> (step, state, bytes)
        self.last_turn: Any = None  # tape of step l-1, taped by the first sweep
        self.tapes: dict[int, Any] = {}  # step -> kept tape (TAPE .. REVERSE)
        self.kept_tape_bytes = 0
        self.snapshot_bytes = 0  # bytes of the live snapshots (each slot its own state's)
        self.peak_snapshot_bytes = 0
        self.peak_bytes = 0
        self.readouts = True  # whether the first sweep's advances read out (post) each step

    def stats(self) -> CheckpointStats:
        sc = self.schedule
        return self.frozen(
            sc.steps,
            sc.snaps,
            sc.strategy.name,
            tape_bytes=sc.tape_bytes_of(0),
            peak_stored_bytes=self.peak_bytes,
            peak_snapshot_bytes=self.peak_snapshot_bytes,
        )

    def live_bytes(self, live_tape: int = 0) -> int:
        """Declared bytes held now: states in live slots + kept tapes (+ ``live_tape``)."""
        return self.snapshot_bytes + self.kept_tape_bytes + live_tape

    def at_peak(self, live_tape: int = 0) -> None:
        total = self.live_bytes(live_tape)
        if total > self.peak_bytes:
            self.peak_bytes = total

    def store(self, slot: int, step: int, state: Any, nbytes: int) -> None:
        """Hold x_step in ``slot`` (``nbytes``: what it counts), replacing what it held."""
        old = self.slots.get(slot)
        if old is not None:
            self.snapshot_bytes -= old[2]
        self.slots[slot] = (step, state, nbytes)
        self.snapshot_bytes += nbytes
        if len(self.slots) > self.peak_live:
            self.peak_live = len(self.slots)
        if self.snapshot_bytes > self.peak_snapshot_bytes:
            self.peak_snapshot_bytes = self.snapshot_bytes
        self.at_peak()

    def restore(self, slot: int, step: int) -> Any:
        held = self.slots.get(slot)
        if held is None or held[0] != step:
            raise RuntimeError(f"RESTORE of x_{step}: slot {slot} holds {held and held[0]}")
        return held[1]

    def keep_tape(self, step: int, tape: Any) -> None:
        self.tapes[step] = tape
        self.tapes_kept += 1
        self.peak_tapes = max(self.peak_tapes, len(self.tapes))
        self.kept_tape_bytes += self.schedule.tape_bytes_of(step)
        self.at_peak()

    def take_tape(self, step: int) -> Any:
        """The kept tape of ``step``, no longer counted as kept."""
        self.kept_tape_bytes -= self.schedule.tape_bytes_of(step)
        return self.tapes.pop(step)

    def free(self, step: int) -> None:
        """Drop snapshots of x_step: once step is reversed, no action can need them again."""
        for k in [k for k, held in self.slots.items() if held[0] == step]:
            self.snapshot_bytes -= self.slots.pop(k)[2]

    def clear(self) -> None:
        self.slots.clear()
        self.tapes.clear()
        self.kept_tape_bytes = 0
        self.snapshot_bytes = 0


# ---------------------------------------------------------------------- the sweeps


def _recorded(run: EngineRun, actions: Iterator[Action]) -> Iterator[Action]:
    """``actions``, each handed to ``run.recorder`` once the sweep asks for the next one
    (``run --trace``; only when a recorder is set). The planned bytes of an action are the
    most it holds: live bytes before or after it, plus a turn's live tape. Its time is the
    host clock from handing it out to the sweep asking for the next one (the recorder's own
    work outside). FIRSTURN is recorded once the reverse sweep has reversed it (its time
    holds the loss and the gradient down to the loop's outputs); TERMINATE, before it ends
    the sweep, takes no time."""
    record, clock = run.recorder.record, perf_counter
    for index, act in enumerate(actions):
        before = run.live_bytes()
        if act.kind is _TERMINATE:
            record(run, index, act, before, 0.0)
            yield act
            return
        t0 = clock()
        yield act
        seconds = clock() - t0
        turn = act.kind is _FIRSTURN or act.kind is _YOUTURN
        live = run.schedule.tape_bytes_of(act.step) if turn else 0
        record(run, index, act, max(before, run.live_bytes()) + live, seconds)


def first_sweep(run: EngineRun, ops: StepOps, state0: Any, outputs: bool = True) -> None:
    """Run the actions up to FIRSTURN from ``state0`` (``outputs``: store every readout).

    With ``outputs=False`` this is the re-run a second reverse of the same call needs: the
    snapshots and tapes are placed again, nothing is read out. A step-operations object
    whose steps have no readouts (a layer chain) says so with ``readouts = False``: its
    advances count no ``post`` calls.
    """
    clock = perf_counter
    run.clear()
    run.state_bytes = ops.state_nbytes(state0)
    run.readouts = getattr(ops, "readouts", True)
    run.actions = iter(run.schedule.actions())
    if run.recorder is not None:
        run.actions = _recorded(run, run.actions)
    state = state0
    t_prev = clock()
    for act in run.actions:
        t0 = clock()
        run.book_s += t0 - t_prev
        kind = act.kind
        handler = BOTH_SWEEPS.get(kind)
        if handler is not None:
            state, t_prev = handler(run, ops, act, state, outputs, t0)
        elif kind is _FIRSTURN:
            run.at_peak(run.schedule.tape_bytes_of(act.step))
            run.last_turn, _ = ops.tape(state, act.step, outputs)
            run.taped += 1
            run.taped_s += clock() - t0
            break
        elif kind in HANDLED_KINDS:
            raise RuntimeError(f"unexpected {act!r} in the first sweep")
        else:
            raise _unknown(act)


def reverse_sweep(run: EngineRun, ops: StepOps, replay_state0: Any = None) -> Any:
    """Resume the stream after FIRSTURN; return the cotangent of x_0: :func:`reverse_turns`
    with every tape it hands out reversed by ``ops.reverse``."""
    turns = reverse_turns(run, ops, replay_state0)
    try:
        tape, step, state_bar = next(turns)
        while True:
            state_bar = ops.reverse(tape, state_bar, step)
            tape = None  # the tape is freed before the sweep goes on
            tape, step, state_bar = turns.send(state_bar)
    except StopIteration as done:
        return done.value


def reverse_turns(
    run: EngineRun, ops: StepOps, replay_state0: Any = None
) -> Generator[tuple[Any, int, Any], Any, Any]:
    """The stream after FIRSTURN, handing each tape out to be reversed: yields ``(tape, step,
    state_bar)`` (the cotangent of x_{step+1}; ``None`` for x_l's) at FIRSTURN's tape, every
    YOUTURN and every REVERSE (steps l-1 down to 0) and is sent the cotangent of x_step back
    (``None`` where autograd's own pass reverses: :mod:`ckptbench.backends.torch.onecall`);
    returns x_0's. What lies between two hand-outs runs when the next is asked for; a
    backend's fused ``turn`` (JAX) runs in place. The caller's reverse counts as taped time.
    When the first sweep's tapes were already consumed (a second reverse of one call), the
    first sweep is re-run from ``replay_state0`` without outputs first.
    """
    clock = perf_counter
    if run.last_turn is None:
        first_sweep(run, ops, replay_state0, outputs=False)
    t0 = clock()
    last = run.schedule.steps - 1
    turn, run.last_turn = run.last_turn, None
    state_bar = yield turn, last, None
    del turn
    run.free(last)
    state = None
    t_prev = clock()
    run.taped_s += t_prev - t0
    fused = getattr(ops, "turn", None)
    for act in run.actions:
        t0 = clock()
        run.book_s += t0 - t_prev
        kind = act.kind
        handler = BOTH_SWEEPS.get(kind)
        if handler is not None:
            state, t_prev = handler(run, ops, act, state, False, t0)
        elif kind is _YOUTURN:  # tape one step and reverse it at once
            run.at_peak(run.schedule.tape_bytes_of(act.step))
            if fused is not None:  # one operation (a dispatching backend)
                state_bar = fused(state, state_bar, act.step)
            else:
                taped, _ = ops.tape(state, act.step, False)
                state_bar = yield taped, act.step, state_bar
                del taped
            run.taped += 1
            run.free(act.step)
            state = None
            t_prev = clock()
            run.taped_s += t_prev - t0
        elif kind is _RESTORE:
            state = run.restore(act.slot, act.step)
            t_prev = clock()
            run.book_s += t_prev - t0
        elif kind is _REVERSE:
            state_bar = yield run.take_tape(act.step), act.step, state_bar
            run.free(act.step)
            state = None
            t_prev = clock()
            run.taped_s += t_prev - t0
        elif kind is _TERMINATE:
            break
        elif kind in HANDLED_KINDS:
            raise RuntimeError(f"unexpected {act!r} in the reverse sweep")
        else:
            raise _unknown(act)
    run.clear()
    return state_bar
