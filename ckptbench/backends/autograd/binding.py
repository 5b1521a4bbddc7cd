"""``binomial_checkpoint``: run any checkpointing schedule as one autograd primitive.

The schedule (binomial checkpointing, Griewank & Walther, "Algorithm 799: Revolve", ACM TOMS
26(1), 2000; equal segments; store-all; or a budget plan keeping states and tapes, Beaumont
et al., "Optimal checkpointing for heterogeneous chains", 2019) is interpreted by
:mod:`ckptbench.engine.interpreter`, the interpreter every backend shares. This module is autograd's
binding: the primitive's forward pass *is* the schedule's first sweep (every output, the
snapshots, the tape of the last step), so one gradient costs ``t(l, s) + l`` step
evaluations; its vjp resumes the same schedule and produces the cotangents of params,
initial state and inputs from that one reverse sweep (autograd's ``defvjp_argnums``).

What is autograd's here (:class:`AutogradStepOps`): every array leaf of params and state,
and x, is its own root node of a one-step tape, so the user's ``f`` indexes a plain
dict/tuple of boxes (no container nodes, whose vjps would allocate a zero gradient for
*every* parameter at every step); parameter cotangents accumulate in place into one set of
arrays per call; no closure calls itself (a reference cycle would keep every taped step
alive until the garbage collector runs).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
from autograd.builtins import dict as ag_dict
from autograd.builtins import list as ag_list
from autograd.builtins import tuple as ag_tuple
from autograd.core import VJPNode, add_outgrads
from autograd.extend import defvjp_argnums, primitive
from autograd.tracer import isbox, new_box, toposort, trace_stack

from ckptbench.backends import CheckpointStats
from ckptbench.engine import clock
from ckptbench.engine.interpreter import (
    EngineLoop,
    EngineRun,
    UnrolledOps,
    first_sweep,
    reverse_sweep,
)
from ckptbench.schedules import StrategySpec, plan_from
from ckptbench.schedules.optimal import Costs, Plan

__all__ = [
    "AutogradStepOps",
    "CheckpointStats",  # re-exported: ckptbench.backends
    "CheckpointedLoop",
    "backprop_to_roots",
    "binomial_checkpoint",
    "tape_step",
]


class AutogradStepOps(UnrolledOps):
    """The engine's step operations on autograd (see :class:`ckptbench.engine.steps.StepOps`).

    Built once for the forward pass (``outputs`` collected into ``out``) and once per vjp
    (with the output cotangent ``g`` and the accumulators the vjp asked for).
    """

    def __init__(
        self,
        loop: CheckpointedLoop,
        params: Any,
        inputs: Any,
        sig: tuple,
        g: Any = None,
        want_params: bool = False,
        want_inputs: bool = False,
    ) -> None:
        self.step, self.post, self.steps = loop.step, loop.post, loop.steps
        self.params, self.inputs, self.sig, self.g = params, inputs, sig, g
        self.out: np.ndarray | None = None
        pleaves, self.prebuild = _flatten(params)
        self.n_p = len(pleaves)
        self.acc = [np.zeros_like(leaf) for leaf in pleaves] if want_params else None
        self.inputs_bar = np.zeros_like(inputs) if want_inputs else None
        self.zeros: list | None = None  # the cotangent of x_l, set by the vjp

    def check_state(self, state: Any) -> None:
        _check_state(state, self.sig)

    def put(self, i: int, y: Any) -> None:
        self.out = _store_output(self.out, i, y, self.steps)

    def tape(self, state: Any, step: int, outputs: bool) -> tuple[Callable, Any]:
        x = self.inputs[step]
        turn, (new, y) = tape_step(self.step, self.post, self.params, state, x, self.sig)
        if outputs:
            self.put(step, y)
        return turn, new

    def reverse(self, turn: Callable, state_bar: Any, step: int) -> list:
        zeros = self.zeros
        grads = turn(zeros if state_bar is None else state_bar, self.g[step])
        if self.acc is not None:
            _accumulate(self.acc, grads[: self.n_p])
        if self.inputs_bar is not None and grads[-1] is not None:
            self.inputs_bar[step] = grads[-1]
        return [z if gk is None else gk for z, gk in zip(zeros, grads[self.n_p : -1], strict=True)]

    def state_nbytes(self, state: Any) -> int:
        return _nbytes(state)


class CheckpointedLoop(EngineLoop):
    """``loop(params, state0, inputs)`` -> stacked ``post`` outputs, differentiable by autograd.

    The arguments are :func:`binomial_checkpoint`'s. ``stats`` holds the counters of the
    most recent call (updated after the reverse sweep). ``schedule`` (a
    :class:`ckptbench.engine.loop_schedule.LoopSchedule`) is what it runs: with a plan (a
    :class:`schedules.optimal.planner.Plan`) that schedule, keeping tapes where it says so,
    ``snaps`` the plan's slot count and tape bytes the plan's; otherwise ``tape_bytes``
    declares one tape's bytes for ``peak_stored_bytes``.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.f = self.step  # the name this module's users know the step by
        self._primitive = primitive(self._forward)
        defvjp_argnums(self._primitive, self._make_vjp)

    def __call__(self, params: Any, state0: Any, inputs: Any) -> Any:
        return self._primitive(pack_boxes(params), pack_boxes(state0), inputs, self.new_run())

    def _check_inputs(self, state0: Any, inputs: Any) -> tuple:
        """Validate the arguments; return the state's signature (structure, shapes, dtypes)."""
        shape = getattr(inputs, "shape", None)
        if shape is None or len(shape) == 0:
            raise ValueError("inputs must be an array whose leading axis is the step axis")
        if shape[0] != self.steps:
            raise ValueError(f"inputs has leading axis {shape[0]}, expected steps={self.steps}")
        return _signature(state0, "state0")

    def _forward(self, params: Any, state0: Any, inputs: Any, run: EngineRun) -> np.ndarray:
        """The primitive's forward pass: the engine's first sweep, collecting the outputs."""
        t_enter = clock.perf_counter()
        ops = AutogradStepOps(self, params, inputs, self._check_inputs(state0, inputs))
        first_sweep(run, ops, state0)
        run.executor_s += clock.perf_counter() - t_enter
        self.stats = run.stats()
        return ops.out

    def _make_vjp(self, argnums, ans, args, kwargs):
        params, state0, inputs, run = args

        def vjp(g):
            return self._reverse(g, argnums, params, state0, inputs, run)

        return vjp

    def _reverse(self, g, argnums, params, state0, inputs, run: EngineRun):
        """The vjp: the engine's reverse sweep into freshly zeroed accumulators."""
        t_enter = clock.perf_counter()
        sig = _signature(state0, "state0")
        ops = AutogradStepOps(self, params, inputs, sig, g, 0 in argnums, 2 in argnums)
        s0leaves, s0rebuild = _flatten(state0)
        ops.zeros = [np.zeros_like(leaf) for leaf in s0leaves]
        state_bar = reverse_sweep(run, ops, state0)
        grads = {1: s0rebuild(_like_leaves(state_bar, s0leaves)), 2: ops.inputs_bar}
        if 0 in argnums:
            grads[0] = ops.prebuild(_like_leaves(ops.acc, _flatten(params)[0]))
        run.executor_s += clock.perf_counter() - t_enter
        self.stats = run.stats()
        return tuple(grads[n] for n in argnums)


def tape_step(f, post, params: Any, state: Any, x: Any, sig: tuple) -> tuple[Callable, Any]:
    """Evaluate step + post on autograd's tape; return (turn, (new_state, output)).

    Every array leaf of params and state, and x, is its own root node (module docstring).
    ``turn(state_bar, g)`` runs the reverse of this one step and returns the list of
    cotangents of the roots (``None`` where a root does not influence the outputs).
    """
    pleaves, prebuild = _flatten(params)
    sleaves, srebuild = _flatten(state)
    values = [*pleaves, *sleaves, x]
    n_p, n_s = len(pleaves), len(sleaves)
    roots = [VJPNode.new_root() for _ in values]
    with trace_stack.new_trace() as trace:
        boxes = [new_box(v, trace, r) for v, r in zip(values, roots, strict=True)]
        p = prebuild(boxes[:n_p])
        new = f(p, srebuild(boxes[n_p : n_p + n_s]), boxes[-1])
        _check_state(new, sig)
        y = post(p, new)
        end = ag_tuple((*_flatten(new)[0], y))
        if isbox(end) and end._trace == trace:
            end_value, end_node = end._value, end._node
        else:
            end_value, end_node = tuple(_unbox(v) for v in end), None
    new_state = srebuild(list(end_value[:-1]))
    index = {node: k for k, node in enumerate(roots)}

    def turn(state_bar_leaves: list, g_i: Any) -> list:
        return backprop_to_roots(end_node, (*state_bar_leaves, g_i), index)

    return turn, (new_state, end_value[-1])


def backprop_to_roots(end: Any, seed: Any, index: dict) -> list:
    """The reverse of one taped graph: the cotangents of its roots, from ``seed``, the
    cotangent of its end node ``end``.

    ``index`` numbers the root nodes (``{node: position}``, positions 0..len(index)-1); the
    list has a root's cotangent at its position, ``None`` where a root does not influence
    ``end`` (every root, where ``end`` is ``None``: nothing was taped).
    """
    grads: list = [None] * len(index)
    if end is None:
        return grads
    outgrads = {end: (seed, False)}
    for node in toposort(end):
        og = outgrads.pop(node)
        k = index.get(node)
        if k is not None:
            grads[k] = og[0]
            continue
        for parent, ingrad in zip(node.parents, node.vjp(og[0]), strict=False):
            outgrads[parent] = add_outgrads(outgrads.get(parent), ingrad)
    return grads


def binomial_checkpoint(
    f: Callable[[Any, Any, Any], Any],
    post: Callable[[Any, Any], Any],
    steps: int,
    snaps: int | None = None,
    strategy: StrategySpec | str | None = None,
    *,
    plan: Plan | None = None,
    costs: Costs | None = None,
    budget_bytes: int | None = None,
    tape_bytes: int = 0,
) -> CheckpointedLoop:
    """Checkpointed ``loop(params, state0, inputs)`` for ``state = f(params, state, x)``.

    ``loop`` returns ``post(params, x_i)`` for i = 1..steps stacked on a new leading axis and
    is differentiable by autograd with respect to ``params`` (any autograd container),
    ``state0`` (an array or a tuple of arrays) and ``inputs`` (leading axis ``steps``), all
    from one reverse sweep. ``snaps`` counts every snapshot slot *including the one holding
    state0*. With ``strategy="revolve"`` (the default) a gradient evaluates ``f`` exactly
    ``optimal_forward_steps(steps, snaps) + steps`` times; ``loop.stats`` has the counters.

    ``strategy="optimal"`` runs the minimum-time schedule keeping states and tapes
    (:func:`ckptbench.schedules.optimal.planner.plan_optimal`): pass ``plan=`` or ``costs=`` and
    ``budget_bytes=`` (then ``snaps`` is not needed). A ``plan`` alone implies "optimal".
    For the other strategies ``tape_bytes`` declares one tape's size, so that
    ``stats.peak_stored_bytes`` (snapshots + the live tape) compares with a plan's peak.

    Example::

        loop = binomial_checkpoint(rnn_step, readout, steps=1000, snaps=31)
        loss = lambda p: anp.sum(loop(p, h0, xs) ** 2)
        g = autograd.grad(loss)(params)      # 2439 + 1000 evaluations of rnn_step
    """
    plan = plan_from(strategy, steps, plan=plan, costs=costs, budget_bytes=budget_bytes)
    return CheckpointedLoop(f, post, steps, snaps, strategy, plan=plan, tape_bytes=tape_bytes)


# ---------------------------------------------------------------------- helpers


def pack_boxes(value: Any) -> Any:
    """Nested Python containers holding autograd boxes as autograd container boxes (what
    a primitive of autograd can take as one argument and differentiate through)."""
    if isinstance(value, tuple):
        return ag_tuple(tuple(pack_boxes(v) for v in value))
    if isinstance(value, list):
        return ag_list([pack_boxes(v) for v in value])
    if isinstance(value, dict):
        return ag_dict({k: pack_boxes(v) for k, v in value.items()})
    return value


def _signature(value: Any, what: str, strict: bool = True) -> tuple:
    """Structure, shapes and dtypes of a state (an array or a tuple/list of arrays)."""
    value = getattr(value, "_value", value)  # unbox
    if isinstance(value, (tuple, list)):
        return ("tuple", tuple(_signature(v, what, strict) for v in value))
    shape = getattr(value, "shape", None)
    if shape is None:
        if strict:
            raise ValueError(f"{what} must be an array or a tuple of arrays, got {type(value)}")
        return ("other", type(value).__name__)
    return ("array", tuple(shape), str(getattr(value, "dtype", "")))


def _check_state(new: Any, expected: tuple) -> None:
    got = _signature(new, "f's result", strict=False)
    if got != expected:
        raise ValueError(
            f"f must return a state like the one it got: expected {_describe(expected)}, "
            f"got {_describe(got)}"
        )


def _describe(sig: tuple) -> str:
    if sig[0] == "tuple":
        return "(" + ", ".join(_describe(s) for s in sig[1]) + ")"
    if sig[0] == "array":
        return f"array{list(sig[1])} {sig[2]}"
    return sig[1]


def _nbytes(value: Any) -> int:
    if isinstance(value, (tuple, list)):
        return sum(_nbytes(v) for v in value)
    return int(getattr(value, "nbytes", 0))


def _store_output(out: np.ndarray | None, i: int, y: Any, steps: int) -> np.ndarray:
    y = np.asarray(getattr(y, "_value", y))
    if out is None:
        out = np.empty((steps, *y.shape), dtype=y.dtype)
    elif y.shape != out.shape[1:]:
        raise ValueError(f"post returned shape {y.shape} at step {i}, expected {out.shape[1:]}")
    out[i] = y
    return out


def _flatten(tree: Any) -> tuple[list, Callable[[list], Any]]:
    """Leaves of nested dict/tuple/list containers, and a function rebuilding the structure.

    The walk is a module-level function, not a closure calling itself: such a closure is a
    reference cycle that would keep every taped step's boxes (and their tape) alive until
    the garbage collector runs.
    """
    leaves: list = []
    build = _walk(tree, leaves)
    return leaves, lambda flat: build(iter(flat))


def _walk(t: Any, leaves: list) -> Callable[[Iterator], Any]:
    if isinstance(t, dict):
        keys = list(t)
        subs = [_walk(t[k], leaves) for k in keys]
        return lambda it: {k: s(it) for k, s in zip(keys, subs, strict=True)}
    if isinstance(t, (tuple, list)):
        subs = [_walk(v, leaves) for v in t]
        kind = type(t)
        return lambda it: kind([s(it) for s in subs])
    leaves.append(t)
    return next


def _accumulate(acc: list, grads: list) -> None:
    """acc[k] += grads[k] in place: no weight-sized allocation per step."""
    for a, gk in zip(acc, grads, strict=True):
        if gk is not None:
            np.add(a, gk, out=a)


def _unbox(value: Any) -> Any:
    while isbox(value):
        value = value._value
    return value


def _like_leaves(values: list, leaves: list) -> list:
    """Cotangents typed like their leaves (a Python float leaf gets a float)."""
    return [
        float(v) if isinstance(leaf, float) else v for v, leaf in zip(values, leaves, strict=True)
    ]
