"""``revolve_checkpoint``: run a checkpointing schedule as one ``torch.autograd.Function``.

The schedule (Revolve, Griewank & Walther, "Algorithm 799: Revolve", ACM TOMS 26(1), 2000;
equal segments; store-all; or a budget plan keeping states and tapes, Beaumont et al.,
"Optimal checkpointing for heterogeneous chains", 2019) is interpreted by
:mod:`ckptbench.engine.interpreter`, the interpreter every backend shares. This module is torch's
binding (see docs/architecture.md, "The engine"):

* ``forward`` *is* the schedule's first sweep, under ``no_grad``: every output, the
  snapshots, the tapes the schedule keeps (TAPE) and the last step's graph (FIRSTURN);
* ``backward`` resumes the same schedule; the cotangents of the parameters, the initial
  state and the inputs come from that one reverse sweep.

What is torch's here (:class:`TorchStepOps`): a taped step runs with graph recording from
detached copies of the state's leaves; every taped step shares one set of detached
parameter leaves, so torch's ``AccumulateGrad`` adds parameter cotangents into their
``.grad`` buffers in place; untaped steps run under ``no_grad``.

One gradient therefore evaluates ``step`` exactly ``t(l, s) + l`` times with
``strategy="revolve"`` (t from :func:`ckptbench.schedules.optimal_forward_steps`).
``loop.stats`` has the engine's counters (``ckptbench.backends.CheckpointStats``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from ckptbench.backends import CheckpointStats
from ckptbench.backends.torch.onecall import OneCallLoop
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
    UnknownActionError,
    UnrolledOps,
    first_sweep,
    reverse_sweep,
)
from ckptbench.schedules import plan_from

__all__ = [
    "RevolveLoop",
    "TorchCheckpointStats",
    "TorchStepOps",
    "UnknownActionError",  # re-exported: ckptbench.engine.interpreter
    "revolve_checkpoint",
]

#: The counters of every executor (``ckptbench.backends.CheckpointStats``).
TorchCheckpointStats = CheckpointStats


@dataclass
class _Turn:
    """One taped step: its input leaves, its outputs and the graph between them."""

    state_leaves: list[torch.Tensor]
    x: torch.Tensor
    new_leaves: list[torch.Tensor]
    y: torch.Tensor


class TorchStepOps(UnrolledOps):
    """The engine's step operations on torch (see :class:`ckptbench.engine.steps.StepOps`).

    One per call: the forward builds it, ``backward`` sets the output cotangent ``g``
    and the input-cotangent buffer, and reads the parameter leaves' ``.grad``.
    """

    def __init__(self, loop: RevolveLoop, args: tuple, n_p: int, prebuild, srebuild, sig):
        pleaves, self.inputs = args[:n_p], args[-1]
        self.step, self.post, self.steps = loop.step, loop.post, loop.steps
        self.srebuild, self.sig = srebuild, sig
        self.params = prebuild(list(pleaves))
        self.param_leaves = [p.detach().requires_grad_(p.requires_grad) for p in pleaves]
        self.tape_params = prebuild(self.param_leaves)
        self.want_inputs = self.inputs.requires_grad
        self.out: torch.Tensor | None = None
        self.g: torch.Tensor | None = None
        self.inputs_bar: torch.Tensor | None = None

    def advance(self, state: Any, start: int, stop: int, outputs: bool) -> Any:
        with torch.no_grad():
            return super().advance(state, start, stop, outputs)

    def check_state(self, state: Any) -> None:
        check_state(state, self.sig)

    def put(self, i: int, y: Any) -> None:
        self.out = _store_output(self.out, i, y, self.steps)

    def tape(self, state: Any, i: int, outputs: bool) -> tuple[_Turn, Any]:
        """Step i and its output with graph recording, from detached leaves."""
        with torch.enable_grad():
            leaves = [t.detach().requires_grad_() for t in state_leaves(state)]
            x = self.inputs[i].detach().requires_grad_(self.want_inputs)
            new = self.step(self.tape_params, self.srebuild(leaves), x)
            check_state(new, self.sig)
            y = self.post(self.tape_params, new)
        new_leaves = state_leaves(new)
        if outputs:
            self.put(i, y.detach())
        return _Turn(leaves, x, new_leaves, y), self.srebuild([t.detach() for t in new_leaves])

    def reverse(self, turn: _Turn, state_bar: Any, i: int) -> list:
        if state_bar is None:
            state_bar = [None] * len(turn.new_leaves)
        outs, grads = [], []
        for o, gb in zip(turn.new_leaves, state_bar, strict=True):
            if gb is not None and o.requires_grad:
                outs.append(o)
                grads.append(gb)
        if turn.y.requires_grad:
            outs.append(turn.y)
            grads.append(self.g[i])
        if outs:
            with torch.enable_grad():
                torch.autograd.backward(outs, grads)
        if self.inputs_bar is not None and turn.x.grad is not None:
            self.inputs_bar[i] = turn.x.grad
        return [leaf.grad for leaf in turn.state_leaves]

    def state_nbytes(self, state: Any) -> int:
        return state_nbytes(state)


class _Revolve(torch.autograd.Function):
    """``apply(loop, run, ops, *param_leaves, *state0_leaves, inputs)`` -> stacked outputs."""

    @staticmethod
    def forward(ctx, loop, run: EngineRun, ops: TorchStepOps, *args: torch.Tensor):
        t_enter = clock.perf_counter()
        ctx.loop, ctx.run, ctx.ops = loop, run, ops
        ctx.save_for_backward(*args)
        state0 = ops.srebuild(list(args[len(ops.param_leaves) : -1]))
        first_sweep(run, ops, state0)
        out, ops.out = ops.out, None
        run.executor_s += clock.perf_counter() - t_enter
        loop.stats = run.stats()
        return out

    @staticmethod
    def backward(ctx, g: torch.Tensor) -> tuple:
        t_enter = clock.perf_counter()
        loop, run, ops = ctx.loop, ctx.run, ctx.ops
        saved, needs = ctx.saved_tensors, ctx.needs_input_grad[3:]
        n_p = len(ops.param_leaves)
        for leaf in ops.param_leaves:
            leaf.grad = None
        ops.g = g
        ops.inputs_bar = torch.zeros_like(saved[-1]) if needs[-1] else None
        state_bar = reverse_sweep(run, ops, ops.srebuild(list(saved[n_p:-1])))
        if state_bar is None:  # pragma: no cover - every schedule reverses step l-1
            state_bar = [None] * (len(saved) - n_p - 1)
        result: list[torch.Tensor | None] = []
        for leaf, need in zip(ops.param_leaves, needs[:n_p], strict=True):
            result.append(_or_zeros(leaf.grad, leaf) if need else None)
            leaf.grad = None
        for s_bar, s0, need in zip(state_bar, saved[n_p:-1], needs[n_p:-1], strict=True):
            result.append(_or_zeros(s_bar, s0) if need else None)
        result.append(ops.inputs_bar)
        ops.g = ops.inputs_bar = None
        run.executor_s += clock.perf_counter() - t_enter
        loop.stats = run.stats()
        return (None, None, None, *result)


class RevolveLoop(EngineLoop):
    """``loop(params, state0, inputs)`` -> stacked ``post`` outputs, differentiable by torch.

    ``params`` is a tensor or a nested dict/tuple/list of tensors, ``state0`` a tensor or a
    tuple of tensors, ``inputs`` a tensor whose leading axis is ``steps``. The arguments and
    attributes are those of :class:`ckptbench.engine.interpreter.EngineLoop` (validated as
    autograd's are); ``stats`` holds the counters of the most recent call (updated again after its
    backward).
    """

    def __call__(self, params: Any, state0: Any, inputs: torch.Tensor) -> torch.Tensor:
        pleaves, prebuild, sleaves, srebuild = loop_arguments(params, state0, inputs, self.steps)
        args = (*pleaves, *sleaves, inputs)
        sig = state_signature(sleaves)
        ops = TorchStepOps(self, args, len(pleaves), prebuild, srebuild, sig)
        return _Revolve.apply(self, self.new_run(), ops, *args)


def revolve_checkpoint(
    step: Callable, post: Callable, steps: int, snaps: int | None = None, strategy: Any = None,
    *, plan: Any = None, costs: Any = None, budget_bytes: int | None = None, tape_bytes: int = 0,
    executor: str = "engine",
) -> RevolveLoop | OneCallLoop:  # fmt: skip
    """Checkpointed ``loop(params, state0, inputs)`` for ``state = step(params, state, x)``.

    The arguments are :func:`ckptbench.backends.autograd.binding.binomial_checkpoint`'s (``steps``,
    ``snaps``, ``strategy``; ``plan=`` or ``costs=`` with ``budget_bytes=`` for strategy
    optimal, which keeps tapes; ``tape_bytes`` declaring one tape's bytes for
    ``stats.peak_stored_bytes``; ``executor``: ``"engine"``, a backward call per taped
    step, or ``"one-call"``, the whole gradient one backward pass of autograd, see
    :mod:`ckptbench.backends.torch.onecall`). ``loop`` returns ``post(params, x_i)`` for
    i = 1..steps stacked on a new leading axis; a torch backward through it yields the gradients of
    ``params``, ``state0`` and ``inputs`` (whichever require grad) from one reverse sweep.
    With ``strategy="revolve"`` one gradient evaluates ``step`` exactly
    ``optimal_forward_steps(steps, snaps) + steps`` times.

    Example::

        loop = revolve_checkpoint(lstm.step, lstm.post, steps=1000, snaps=31)
        loss = lstm.loss(loop(params, (h0, c0), xs))
        grads = torch.autograd.grad(loss, list(params.values()))   # 2439 + 1000 steps
    """
    if executor not in ("engine", "one-call"):
        raise ValueError(f"unknown executor {executor!r} (torch runs engine or one-call)")
    plan = plan_from(strategy, steps, plan=plan, costs=costs, budget_bytes=budget_bytes)
    kind = OneCallLoop if executor == "one-call" else RevolveLoop
    return kind(step, post, steps, snaps, strategy, plan=plan, tape_bytes=tape_bytes)


# ---------------------------------------------------------------------- helpers


def _store_output(out: torch.Tensor | None, i: int, y: Any, steps: int) -> torch.Tensor:
    if not isinstance(y, torch.Tensor):
        raise ValueError(f"post must return a tensor, got {type(y).__name__}")
    if out is None:
        out = torch.empty((steps, *y.shape), dtype=y.dtype, device=y.device)
    elif y.shape != out.shape[1:]:
        raise ValueError(
            f"post returned shape {list(y.shape)} at step {i}, expected {list(out.shape[1:])}"
        )
    out[i] = y
    return out


def _or_zeros(grad: torch.Tensor | None, like: torch.Tensor) -> torch.Tensor:
    return torch.zeros_like(like) if grad is None else grad
