"""The untaped part of the engine's step operations, the same for every framework.

* :class:`UnrolledOps` — a recurrence: ``state = step(params, state, inputs[i])`` with a
  readout ``post(params, state)`` of every step in the first sweep;
* :class:`ChainSteps` — a layer chain: ``x = layer(i, params[i], x)``, no readouts (see
  :mod:`ckptbench.workloads.chain`).

A framework that must switch its tape off wraps ``advance``. Imports nothing.
"""

from __future__ import annotations

from typing import Any

__all__ = ["ChainSteps", "UnrolledOps"]


class UnrolledOps:
    """The untaped part of :class:`ckptbench.engine.interpreter.StepOps` for a recurrence: a
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
    """The untaped part of :class:`ckptbench.engine.interpreter.StepOps` for a layer chain: a
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
