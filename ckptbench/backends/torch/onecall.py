"""``--executor one-call`` on torch: a schedule run inside ONE backward pass of autograd.

The schedule (Revolve, Griewank & Walther, "Algorithm 799: Revolve", ACM TOMS 26(1), 2000;
equal segments; store-all; a budget plan keeping states and tapes, Beaumont et al.,
"Optimal checkpointing for heterogeneous chains", 2019) is interpreted by
:mod:`ckptbench.engine.interpreter`, as with the engine binding (:mod:`.binding`). The two
differ in how a taped step is reversed:

* the engine binding makes the whole loop one ``autograd.Function`` whose backward reverses
  every taped step with a ``torch.autograd.backward`` call of its own: 1 000 calls for one
  gradient of a 1 000-step Revolve schedule;
* this executor records the first sweep's graph with every saved tensor replaced by a
  token (``torch.autograd.graph.saved_tensors_hooks``), the way torch's non-reentrant
  ``torch.utils.checkpoint`` records a segment, and lets the caller's one backward pass walk
  it. When that pass first unpacks a token of step i, the reverse sweep
  (:func:`ckptbench.engine.interpreter.reverse_turns`) is resumed until it hands out step
  i's tape: restores, recomputing advances and snapshots as the schedule says, then step i
  taped again from its input state, what it saves kept detached (kept attached to the
  recomputation's graph, a backward took 60% longer on the CPU), and returned by the
  unpack. A step the first sweep tapes (FIRSTURN, a plan's kept tapes) keeps its saved
  tensors in the graph itself, and autograd frees them as it reverses the step.

Autograd runs a graph's nodes in reverse creation order, so it asks for steps l-1, ..., 0,
the order of every schedule's reverse sweep (a readout's nodes come just before its step's).
The sweep's end (TERMINATE, the final counters) runs in the backward of :class:`_Finish`, an
identity made before the first step on the loop's differentiable inputs, which autograd
runs after every step.

What it holds that the engine binding does not: the first sweep's graph (host memory, no
tensor data: about 35 KiB a step of the built-in LSTM; on the CPU glibc's heap makes that
far more, docs/gpu.md, "Two torch executors"). Counters, stored bytes
and gradients are the engine binding's (the contract test checks both). One call is
reversed once: a second backward through it (``retain_graph=True``) is refused with one
line (the engine binding replays the first sweep instead).
"""

from __future__ import annotations

import itertools
from typing import Any

import torch

from ckptbench.backends.torch.trees import (
    check_state,
    loop_arguments,
    state_leaves,
    state_nbytes,
    state_signature,
)
from ckptbench.engine import clock
from ckptbench.engine.interpreter import (
    EngineLoop,
    EngineRun,
    UnrolledOps,
    first_sweep,
    reverse_turns,
)

__all__ = ["OneCallLoop", "OneCallOps"]


class _Sweep:
    """The reverse sweep of one call, resumed from autograd's unpack hooks."""

    def __init__(self, loop: OneCallLoop, run: EngineRun) -> None:
        self.loop, self.run = loop, run
        self.ops: Any = None  # the call's OneCallOps, set once they are made
        self.turns: Any = None  # reverse_turns(...) once autograd asks for a first tape
        self.at: int | None = None  # the step whose tape was handed out last
        self.done = False

    def _next(self) -> None:
        if self.turns is None:
            self.turns = reverse_turns(self.run, self.ops)
            _, self.at, _ = next(self.turns)
        else:
            _, self.at, _ = self.turns.send(None)

    def need(self, step: int) -> None:
        """Resume the sweep until it hands out the tape of ``step``."""
        if self.done:
            raise RuntimeError(
                "--executor one-call reverses a call once: a second backward through it "
                "(retain_graph=True) needs --executor engine"
            )
        t0 = clock.perf_counter()
        for k in [k for k in self.ops.live if k > step]:  # autograd is done with them
            del self.ops.live[k]
        try:
            while self.at is None or self.at > step:
                self._next()
        except StopIteration:
            raise RuntimeError(
                f"autograd asked for step {step}'s saved tensors after the schedule ended"
            ) from None
        if self.at != step:
            raise RuntimeError(
                f"autograd asked for step {step}'s saved tensors; the schedule reversed step "
                f"{self.at} instead"
            )
        self.run.executor_s += clock.perf_counter() - t0

    def finish(self) -> None:
        """Run the sweep to its end (every step is reversed): bookkeeping and counters."""
        if self.done:
            return
        t0 = clock.perf_counter()
        try:
            while True:
                self._next()
        except StopIteration:
            pass
        self.done = True
        self.ops.live.clear()
        self.run.executor_s += clock.perf_counter() - t0
        self.loop.stats = self.run.stats()


class _Finish(torch.autograd.Function):
    """``apply(sweep, *tensors)``: the tensors unchanged (views). Made before the first
    step on the loop's differentiable inputs, its backward is the last of the call's nodes
    autograd runs: it ends the reverse sweep and passes the cotangents through."""

    @staticmethod
    def forward(ctx, sweep: _Sweep, *tensors: torch.Tensor):
        ctx.sweep = sweep
        return tuple(t.view_as(t) for t in tensors)

    @staticmethod
    def backward(ctx, *grads: torch.Tensor) -> tuple:
        ctx.sweep.finish()
        return (None, *grads)


class OneCallOps(UnrolledOps):
    """The engine's step operations for the one-call executor (see
    :class:`ckptbench.engine.steps.StepOps`; ``reverse`` is autograd's own).

    While ``recording`` (the first sweep) every step and readout is recorded on the caller's
    graph: an advance with tokens for what it saves, a tape with what it saves. Afterwards
    (the reverse sweep, inside autograd's backward) an advance records nothing and a tape
    re-runs its step from detached leaves, keeping what it saves in :attr:`live`.
    """

    def __init__(self, loop: OneCallLoop, args: list, n_p: int, trees: tuple, sweep: _Sweep):
        self.step, self.post, self.steps = loop.step, loop.post, loop.steps
        prebuild, self.srebuild, self.sig = trees
        self.sweep = sweep
        self.params = prebuild(args[:n_p])  # on the caller's graph (through _Finish)
        self.tape_params = prebuild(
            [p.detach().requires_grad_(p.requires_grad) for p in args[:n_p]]
        )
        inputs = args[-1]
        self.inputs = inputs
        # one UnbindBackward for every step's input, not one SelectBackward each (whose
        # cotangents would each be the whole input's size)
        self.xs = inputs.unbind(0) if inputs.requires_grad else inputs
        self.recording = True
        self.state_grads: list[tuple[bool, ...] | None] = [None] * loop.steps
        self.ys: list[torch.Tensor | None] = [None] * loop.steps
        self.live: dict[int, list[torch.Tensor]] = {}  # step -> its re-run tape's tensors

    # ---------------------------------------------------------------- first sweep

    def _note(self, state: Any, i: int) -> None:
        self.state_grads[i] = tuple(t.requires_grad for t in state_leaves(state))

    def advance(self, state: Any, start: int, stop: int, outputs: bool) -> Any:
        if not self.recording:
            with torch.no_grad():
                return super().advance(state, start, stop, outputs)
        step, post, params, xs = self.step, self.post, self.params, self.xs
        unpack = self._unpack
        for i in range(start, stop):
            self._note(state, i)
            tokens = itertools.count()
            with torch.autograd.graph.saved_tensors_hooks(
                lambda _t, i=i, tokens=tokens: (i, next(tokens)), unpack
            ):
                state = step(params, state, xs[i])
                if i == 0:
                    self.check_state(state)
                y = post(params, state)
            if outputs:
                self.put(i, y)
        return state

    def check_state(self, state: Any) -> None:
        check_state(state, self.sig)

    def put(self, i: int, y: Any) -> None:
        if not isinstance(y, torch.Tensor):
            raise ValueError(f"post must return a tensor, got {type(y).__name__}")
        self.ys[i] = y

    def tape(self, state: Any, i: int, outputs: bool) -> tuple[int, Any]:
        """Step i (and its readout) taped; the tape the engine holds is the step's number."""
        if self.recording:  # on the caller's graph, what it saves kept there
            self._note(state, i)
            new = self.step(self.params, state, self.xs[i])
            check_state(new, self.sig)
            y = self.post(self.params, new)
            if outputs:
                self.put(i, y)
            return i, new
        leaves = [
            t.detach().requires_grad_(g)
            for t, g in zip(state_leaves(state), self.state_grads[i], strict=True)
        ]
        x = self.inputs[i].detach().requires_grad_(self.inputs.requires_grad)
        kept: list[torch.Tensor] = []
        with (
            torch.enable_grad(),
            torch.autograd.graph.saved_tensors_hooks(
                lambda t: kept.append(t.detach()) or len(kept) - 1, kept.__getitem__
            ),
        ):
            new = self.step(self.tape_params, self.srebuild(leaves), x)
            self.post(self.tape_params, new)
        self.live[i] = kept
        return i, self.srebuild([t.detach() for t in state_leaves(new)])

    def _unpack(self, token: tuple[int, int]) -> torch.Tensor:
        step, j = token
        if self.sweep.at != step:
            self.sweep.need(step)
        return self.live[step][j]

    def reverse(self, tape: Any, state_bar: Any, i: int) -> Any:  # pragma: no cover
        raise RuntimeError("the one-call executor's reverses are autograd's own")

    def state_nbytes(self, state: Any) -> int:
        return state_nbytes(state)


class OneCallLoop(EngineLoop):
    """``loop(params, state0, inputs)`` -> stacked ``post`` outputs on the caller's graph;
    the arguments and ``stats`` are :class:`ckptbench.backends.torch.binding.RevolveLoop`'s
    (``stats`` final once a backward has reached the loop's inputs)."""

    def __call__(self, params: Any, state0: Any, inputs: torch.Tensor) -> torch.Tensor:
        t_enter = clock.perf_counter()
        pleaves, prebuild, sleaves, srebuild = loop_arguments(params, state0, inputs, self.steps)
        args = [*pleaves, *sleaves, inputs]
        run = self.new_run()
        sweep = _Sweep(self, run)
        grads = [k for k, t in enumerate(args) if t.requires_grad]
        if grads and torch.is_grad_enabled():
            for k, t in zip(grads, _Finish.apply(sweep, *(args[k] for k in grads)), strict=True):
                args[k] = t
        trees = (prebuild, srebuild, state_signature(sleaves))
        ops = sweep.ops = OneCallOps(self, args, len(pleaves), trees, sweep)
        first_sweep(run, ops, srebuild(args[len(pleaves) : -1]))
        ops.recording = False
        out = torch.stack(ops.ys)
        ops.ys = []
        run.executor_s += clock.perf_counter() - t_enter
        self.stats = run.stats()
        return out
