"""``chain_checkpoint``: a layer chain under any checkpointing schedule, one
``torch.autograd.Function``.

A chain (:mod:`ckptbench.workloads.chain`) runs ``x_{i+1} = layer(i, params[i], x_i)``;
``loop(params, x0)`` returns x_L and a torch backward through it gives the gradients of
every layer's parameters and of x0 from one reverse sweep. ``forward`` is the engine's
first sweep under ``no_grad`` (x_L from the taped last step); ``backward`` resumes the
schedule from the cotangent of x_L. A taped layer runs with graph recording from a
detached copy of its input and the layer's shared detached parameter leaves, so torch's
``AccumulateGrad`` adds each layer's parameter cotangents into their ``.grad`` in place.
"""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import torch

from ckptbench.backends.torch.trees import flatten_tree
from ckptbench.engine import clock
from ckptbench.engine.chain import ChainLoop
from ckptbench.engine.interpreter import EngineRun, first_sweep, reverse_sweep
from ckptbench.engine.steps import ChainSteps
from ckptbench.schedules import plan_from

__all__ = ["TorchChainLoop", "TorchChainOps", "chain_checkpoint", "chain_ops"]


class TorchChainOps(ChainSteps):
    """The engine's step operations for a chain on torch (one per call)."""

    def __init__(self, loop: TorchChainLoop, layer_leaves: list[list[torch.Tensor]], builds):
        self.layer, self.steps = loop.layer, loop.steps
        self.params = [b(list(ls)) for b, ls in zip(builds, layer_leaves, strict=True)]
        self.leaves = [[p.detach().requires_grad_(p.requires_grad) for p in ls]
                       for ls in layer_leaves]  # fmt: skip
        self.tape_params = [b(ls) for b, ls in zip(builds, self.leaves, strict=True)]
        self.out: torch.Tensor | None = None
        self.g: torch.Tensor | None = None

    def advance(self, state: Any, start: int, stop: int, outputs: bool) -> Any:
        with torch.no_grad():
            return super().advance(state, start, stop, outputs)

    def tape(self, state: torch.Tensor, i: int, outputs: bool) -> tuple[Any, torch.Tensor]:
        with torch.enable_grad():
            x = state.detach().requires_grad_()
            new = self.layer(i, self.tape_params[i], x)
        if not isinstance(new, torch.Tensor):
            raise ValueError(f"layer {i} must return a tensor, got {type(new).__name__}")
        out = new.detach()
        if outputs and i == self.steps - 1:
            self.out = out
        return (x, new), out

    def reverse(self, tape: tuple, state_bar: Any, i: int) -> torch.Tensor:
        x, new = tape
        if new.requires_grad:
            with torch.enable_grad():
                torch.autograd.backward(new, self.g if state_bar is None else state_bar)
        return torch.zeros_like(x) if x.grad is None else x.grad

    def state_nbytes(self, state: torch.Tensor) -> int:
        return state.numel() * state.element_size()


class _Chain(torch.autograd.Function):
    """``apply(loop, run, ops, *param_leaves, x0)`` -> x_L."""

    @staticmethod
    def forward(ctx, loop, run: EngineRun, ops: TorchChainOps, *args: torch.Tensor):
        t_enter = clock.perf_counter()
        ctx.loop, ctx.run, ctx.ops = loop, run, ops
        ctx.save_for_backward(args[-1])
        first_sweep(run, ops, args[-1])
        out, ops.out = ops.out, None
        run.executor_s += clock.perf_counter() - t_enter
        loop.stats = run.stats()
        return out

    @staticmethod
    def backward(ctx, g: torch.Tensor) -> tuple:
        t_enter = clock.perf_counter()
        loop, run, ops = ctx.loop, ctx.run, ctx.ops
        (x0,) = ctx.saved_tensors
        flat = [leaf for ls in ops.leaves for leaf in ls]
        for leaf in flat:
            leaf.grad = None
        ops.g = g
        x_bar = reverse_sweep(run, ops, x0)
        needs = ctx.needs_input_grad[3:]
        result = []
        for leaf, need in zip(flat, needs[:-1], strict=True):
            result.append((torch.zeros_like(leaf) if leaf.grad is None else leaf.grad)
                          if need else None)  # fmt: skip
            leaf.grad = None
        ops.g = None
        run.executor_s += clock.perf_counter() - t_enter
        loop.stats = run.stats()
        return (None, None, None, *result, x_bar if needs[-1] else None)


class TorchChainLoop(ChainLoop):
    """``loop(params, x0)`` -> x_L, differentiable by torch (see :func:`chain_checkpoint`);
    ``params`` holds one tensor tree per layer (``{}`` for a layer without parameters)."""

    def __call__(self, params: Any, x0: torch.Tensor) -> torch.Tensor:
        if not isinstance(x0, torch.Tensor):
            raise ValueError(f"x0 must be a tensor, got {type(x0).__name__}")
        layer_leaves, builds = [], []
        for p in self.check_params(params):
            leaves, build = flatten_tree(p, "params")
            layer_leaves.append(leaves)
            builds.append(build)
        ops = TorchChainOps(self, layer_leaves, builds)
        flat = [leaf for ls in layer_leaves for leaf in ls]
        return _Chain.apply(self, self.new_run(), ops, *flat, x0)


def chain_checkpoint(
    layer: Callable, layers: int, snaps: int | None = None, strategy: Any = None,
    *, plan: Any = None, costs: Any = None, budget_bytes: int | None = None, tape_bytes: int = 0,
) -> TorchChainLoop:  # fmt: skip
    """Checkpointed ``loop(params, x0) -> x_L`` of ``x_{i+1} = layer(i, params[i], x_i)`` on
    torch; the arguments are :func:`ckptbench.backends.autograd.chain.chain_checkpoint`'s."""
    plan = plan_from(strategy, layers, plan=plan, costs=costs, budget_bytes=budget_bytes)
    return TorchChainLoop(layer, layers, snaps, strategy, plan=plan, tape_bytes=tape_bytes)


def chain_ops(layer: Callable, layers: int, params: list) -> TorchChainOps:
    """The executor's own step operations over ``params`` (one tensor tree per layer),
    outside any gradient: ``tape(x_i, i, False)`` -> ``((x, x_{i+1}), x_{i+1})`` and
    ``reverse(tape, x_bar, i)``, whose parameter cotangents accumulate into the layer's
    detached leaves as in a real reverse sweep (what :mod:`ckptbench.measure.layercosts`
    times)."""
    leaves, builds = [], []
    for p in params:
        flat, build = flatten_tree(p, "params")
        leaves.append(flat)
        builds.append(build)
    shim = SimpleNamespace(layer=layer, steps=layers)
    return TorchChainOps(shim, leaves, builds)  # type: ignore[arg-type]
