"""The untaped part of the engine's step operations, the same for every framework.

* :class:`UnrolledOps` — a recurrence: ``state = step(params, state, inputs[i])`` with a
  readout ``post(params, state)`` of every step in the first sweep;
* :class:`ChainSteps` — a layer chain: ``x = layer(i, params[i], x)``, no readouts (see
  :mod:`ckptbench.workloads.chain`).

A framework that must switch its tape off wraps ``advance``. Imports nothing.
"""

from __future__ import annotations

from typing import Any, Protocol

__all__ = ["ChainSteps", "StepOps", "UnrolledOps"]


class StepOps(Protocol):
    """What a backend does for the engine; ``step`` i maps x_i to x_{i+1}.

    ``tape`` objects are opaque to the engine; a ``state_bar`` is whatever ``reverse``
    returns (``None`` stands for a zero cotangent, the one of x_l).
    """

    def advance(self, state: Any, start: int, stop: int, outputs: bool) -> Any:
        """Untaped steps start..stop-1 from ``state``; with ``outputs`` also store each
        step's readout (the first sweep)."""

    def tape(self, state: Any, step: int, outputs: bool) -> tuple[Any, Any]:
        """Step ``step`` on the framework's tape: ``(tape, x_{step+1})``; with ``outputs``
        also store its readout."""

    def reverse(self, tape: Any, state_bar: Any, step: int) -> Any:
        """Run ``tape`` backwards from the cotangent of x_{step+1} (and of output ``step``);
        add parameter and input cotangents to the backend's accumulators; return the
        cotangent of x_step."""

    def state_nbytes(self, state: Any) -> int:
        """Bytes of one state (what a snapshot of it counts, unless the plan declares them)."""

    # Optional: ``turn(state, state_bar, step) -> cotangent of x_step``, a YOUTURN (tape
    # step ``step`` from ``state`` and reverse it at once) as one operation; the engine
    # uses it where a backend has it (the JAX dispatcher: one compiled call, not two).
    # ``readouts = False``: the steps have no readouts (a layer chain; no ``post`` calls).


class UnrolledOps:
    """The untaped part of :class:`StepOps` for a recurrence: a
    subclass sets ``step``, ``post``, ``steps``, ``params``, ``inputs`` and gives
    ``check_state(state)`` (the first step's result against the initial state) and
    ``put(i, y)`` (store output i)."""

    step: Any
    post: Any
    steps: int
    params: Any
    inputs: Any

    def advance(self, state: Any, start: int, stop: int, outputs: bool) -> Any:
        step, params, inputs = self.step, self.params, self.inputs
        if not outputs:
            for i in range(start, stop):
                state = step(params, state, inputs[i])
            return state
        post = self.post
        for i in range(start, stop):
            state = step(params, state, inputs[i])
            if i == 0:
                self.check_state(state)
            self.put(i, post(params, state))
        return state


class ChainSteps:
    """The untaped part of :class:`StepOps` for a layer chain: a
    subclass sets ``layer`` and ``params`` (one entry per layer). Step ``i`` is layer ``i``;
    there is no readout (``readouts = False``), the chain's output is x_L, which the taped
    last step (FIRSTURN) gives."""

    readouts = False
    layer: Any
    params: Any

    def advance(self, state: Any, start: int, stop: int, outputs: bool) -> Any:
        layer, params = self.layer, self.params
        for i in range(start, stop):
            state = layer(i, params[i], state)
        return state
