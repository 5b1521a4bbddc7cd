"""``chain_checkpoint``: a layer chain under any checkpointing schedule, one autograd primitive.

A chain (:mod:`ckptbench.workloads.chain`) runs ``x_{i+1} = layer(i, params[i], x_i)``;
``loop(params, x0)`` returns x_L and is differentiable by autograd with respect to every
layer's parameters and x0. The primitive's forward pass is the engine's first sweep
(:func:`ckptbench.engine.interpreter.first_sweep`; x_L comes from the taped last step), its
vjp the reverse sweep from the cotangent of x_L: each taped layer is its own small autograd
tape whose roots are that layer's parameter leaves and its input, and each layer's
parameter cotangents accumulate in place into that layer's arrays.
"""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import numpy as np
from autograd.core import VJPNode
from autograd.extend import defvjp_argnums, primitive
from autograd.tracer import isbox, new_box, trace_stack

from ckptbench.backends.autograd.binding import backprop_to_roots, pack_boxes
from ckptbench.engine import clock
from ckptbench.engine.chain import ChainLoop
from ckptbench.engine.interpreter import EngineRun, first_sweep, reverse_sweep
from ckptbench.engine.steps import ChainSteps
from ckptbench.schedules import plan_from

__all__ = [
    "AutogradChainLoop",
    "AutogradChainOps",
    "chain_checkpoint",
    "chain_ops",
    "tape_layer",
]


class AutogradChainOps(ChainSteps):
    """The engine's step operations for a chain on autograd (forward: ``out`` is x_L; vjp:
    ``g`` is its cotangent and ``acc`` the per-layer parameter accumulators)."""

    def __init__(self, loop: AutogradChainLoop, params: list, g: Any = None, want: bool = False):
        self.layer, self.params, self.steps, self.g = loop.layer, params, loop.steps, g
        self.out: Any = None
        self.acc = None
        if want:
            self.acc = [[np.zeros_like(leaf) for leaf in _leaves(p)] for p in params]

    def tape(self, state: Any, step: int, outputs: bool) -> tuple[Callable, Any]:
        turn, new = tape_layer(self.layer, step, self.params[step], state)
        if outputs and step == self.steps - 1:
            self.out = new
        return turn, new

    def reverse(self, turn: Callable, state_bar: Any, step: int) -> Any:
        grads = turn(self.g if state_bar is None else state_bar)
        if self.acc is not None:
            for a, gk in zip(self.acc[step], grads[:-1], strict=True):
                if gk is not None:
                    np.add(a, gk, out=a)
        x_bar = grads[-1]
        return np.zeros(turn.in_shape) if x_bar is None else x_bar

    def state_nbytes(self, state: Any) -> int:
        return int(np.asarray(state).nbytes)


class AutogradChainLoop(ChainLoop):
    """``loop(params, x0)`` -> x_L, differentiable by autograd (see :func:`chain_checkpoint`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._primitive = primitive(self._forward)
        defvjp_argnums(self._primitive, self._make_vjp)

    def __call__(self, params: Any, x0: Any) -> Any:
        params = pack_boxes(self.check_params(params))
        return self._primitive(params, x0, self.new_run())

    def _forward(self, params: list, x0: Any, run: EngineRun) -> Any:
        t_enter = clock.perf_counter()
        ops = AutogradChainOps(self, list(params))
        first_sweep(run, ops, x0)
        run.executor_s += clock.perf_counter() - t_enter
        self.stats = run.stats()
        return ops.out

    def _make_vjp(self, argnums, ans, args, kwargs):
        params, x0, run = args

        def vjp(g):
            t_enter = clock.perf_counter()
            ops = AutogradChainOps(self, list(params), g, 0 in argnums)
            x_bar = reverse_sweep(run, ops, x0)
            grads = {1: x_bar}
            if 0 in argnums:
                grads[0] = [_rebuild(p, acc) for p, acc in zip(params, ops.acc, strict=True)]
            run.executor_s += clock.perf_counter() - t_enter
            self.stats = run.stats()
            return tuple(grads[n] for n in argnums)

        return vjp


def tape_layer(layer: Callable, i: int, params: Any, x: Any) -> tuple[Callable, Any]:
    """Layer ``i`` on its own autograd tape: ``(turn, x_{i+1})``. ``turn(x_bar)`` runs its
    reverse and returns the cotangents of the parameter leaves and of ``x`` (``None`` where
    a root does not influence the output)."""
    pleaves = _leaves(params)
    values = [*pleaves, x]
    roots = [VJPNode.new_root() for _ in values]
    with trace_stack.new_trace() as trace:
        boxes = [new_box(v, trace, r) for v, r in zip(values, roots, strict=True)]
        new = layer(i, _rebuild(params, boxes[:-1]), boxes[-1])
        if isbox(new) and new._trace == trace:
            value, end = new._value, new._node
        else:
            value, end = _unbox(new), None
    index = {node: k for k, node in enumerate(roots)}

    def turn(x_bar: Any) -> list:
        return backprop_to_roots(end, x_bar, index)

    turn.in_shape = np.shape(x)
    return turn, value


def chain_checkpoint(
    layer: Callable, layers: int, snaps: int | None = None, strategy: Any = None,
    *, plan: Any = None, costs: Any = None, budget_bytes: int | None = None, tape_bytes: int = 0,
) -> AutogradChainLoop:  # fmt: skip
    """Checkpointed ``loop(params, x0) -> x_L`` of ``x_{i+1} = layer(i, params[i], x_i)``.

    The arguments are :func:`ckptbench.backends.autograd.binding.binomial_checkpoint`'s with
    ``layers`` for ``steps`` (``snaps`` counts the slot holding x0; ``plan=`` or ``costs=``
    with ``budget_bytes=`` for strategy optimal, per-layer costs planning a heterogeneous
    chain). ``loop.stats.peak_stored_bytes`` counts each snapshot with its own state's bytes.
    """
    plan = plan_from(strategy, layers, plan=plan, costs=costs, budget_bytes=budget_bytes)
    return AutogradChainLoop(layer, layers, snaps, strategy, plan=plan, tape_bytes=tape_bytes)


def chain_ops(layer: Callable, layers: int, params: list) -> AutogradChainOps:
    """The executor's own step operations over ``params`` (one tree per layer), outside any
    gradient: ``tape(x_i, i, False)`` -> ``(turn, x_{i+1})`` and ``reverse(turn, x_bar,
    i)`` with the per-layer parameter accumulators of a real reverse sweep (what the
    per-layer costs of :mod:`ckptbench.measure.layercosts` time)."""
    shim = SimpleNamespace(layer=layer, steps=layers)
    return AutogradChainOps(shim, list(params), want=True)  # type: ignore[arg-type]


# ---------------------------------------------------------------------- helpers


def _leaves(tree: Any) -> list:
    """Leaves of nested dict/tuple/list containers, in insertion order."""
    if isinstance(tree, dict):
        return [leaf for v in tree.values() for leaf in _leaves(v)]
    if isinstance(tree, tuple | list):
        return [leaf for v in tree for leaf in _leaves(v)]
    return [tree]


def _rebuild(tree: Any, leaves: list) -> Any:
    """``tree``'s structure filled with ``leaves`` (the order of :func:`_leaves`)."""
    it = iter(leaves)
    return _fill(tree, it)


def _fill(tree: Any, it: Any) -> Any:
    if isinstance(tree, dict):
        return {k: _fill(v, it) for k, v in tree.items()}
    if isinstance(tree, tuple | list):
        return type(tree)(_fill(v, it) for v in tree)
    return next(it)


def _unbox(value: Any) -> Any:
    while isbox(value):
        value = value._value
    return value
