"""``binomial_checkpoint``: run any checkpointing schedule as one autograd primitive.

The executor interprets a :mod:`ckptbench.schedules` action stream (binomial checkpointing,
Griewank & Walther, "Algorithm 799: Revolve", ACM TOMS 26(1), 2000). The primitive's forward
pass *is* the schedule's first sweep: it computes every output, places the snapshots and
tapes the last step, so one gradient costs ``t(l, s) + l`` step evaluations. The vjp resumes
the same schedule and produces the cotangents of params, initial state and inputs from that
one reverse sweep (autograd's ``defvjp_argnums``), accumulating parameter cotangents in place.

Compared with the older autograd ``binomial_checkpoint`` example, which ran a forward pass,
then a full Revolve run per argument (l + t + l evaluations per argument), this costs t + l
evaluations in total.

Besides states, a schedule from :mod:`ckptbench.planner` may keep a step's *tape* (TAPE ..
REVERSE; Beaumont et al., "Optimal checkpointing for heterogeneous chains", 2019): the
executor keeps that step's reverse closure until the REVERSE action runs it. The executor
times itself per action (not per step): untaped advances, taped steps with their reverses,
and bookkeeping (snapshots, restores, generating the schedule).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import numpy as np
from autograd.builtins import dict as ag_dict
from autograd.builtins import list as ag_list
from autograd.builtins import tuple as ag_tuple
from autograd.core import VJPNode, add_outgrads
from autograd.extend import defvjp_argnums, primitive
from autograd.tracer import isbox, new_box, toposort, trace_stack

from ckptbench.backends import CheckpointStats, ExecutorCounters
from ckptbench.planner import Costs, Plan, plan_optimal
from ckptbench.schedules import (
    Action,
    ActionKind,
    check_int,
    get_strategy,
    make_schedule,
)

__all__ = ["CheckpointStats", "CheckpointedLoop", "binomial_checkpoint"]  # stats: backends


class _Run(ExecutorCounters):
    """Mutable state of one call: the schedule, the snapshots and the counters."""

    def __init__(self, loop: CheckpointedLoop) -> None:
        super().__init__()
        self.loop = loop
        self.actions: Iterator[Action] | None = None
        self.slots: dict[int, tuple[int, Any]] = {}
        self.last_turn: Callable | None = None  # vjp of step l-1, taped in the forward pass
        self.tapes: dict[int, Callable] = {}  # step -> kept reverse closure (TAPE .. REVERSE)
        self.kept_tape_bytes = 0
        self.peak_bytes = 0

    def stats(self) -> CheckpointStats:
        lp = self.loop
        return self.frozen(
            lp.steps,
            lp.snaps,
            lp.strategy.name,
            tape_bytes=lp.tape_bytes_of(0),
            peak_stored_bytes=self.peak_bytes,
        )

    def _at_peak(self, live_tape: int = 0) -> None:
        total = len(self.slots) * self.state_bytes + self.kept_tape_bytes + live_tape
        if total > self.peak_bytes:
            self.peak_bytes = total

    def store(self, slot: int, step: int, state: Any) -> None:
        self.slots[slot] = (step, state)
        self.peak_live = max(self.peak_live, len(self.slots))
        self._at_peak()

    def turning(self, step: int) -> None:
        """Account the tape of a step being taped and reversed at once (FIRSTURN/YOUTURN)."""
        self._at_peak(self.loop.tape_bytes_of(step))

    def keep_tape(self, step: int, turn: Callable) -> None:
        self.tapes[step] = turn
        self.tapes_kept += 1
        self.peak_tapes = max(self.peak_tapes, len(self.tapes))
        self.kept_tape_bytes += self.loop.tape_bytes_of(step)
        self._at_peak()

    def take_tape(self, step: int) -> Callable:
        """The kept reverse closure of ``step``, no longer counted as kept."""
        self.kept_tape_bytes -= self.loop.tape_bytes_of(step)
        return self.tapes.pop(step)

    def free(self, step: int) -> None:
        """Drop snapshots of x_step: once step is reversed, no action can need them again."""
        dead = [k for k, (st, _) in self.slots.items() if st == step]
        for k in dead:
            del self.slots[k]


class CheckpointedLoop:
    """``loop(params, state0, inputs)`` -> stacked ``post`` outputs, differentiable by autograd.

    ``stats`` holds the counters of the most recent call (updated after the reverse sweep).
    With ``plan`` (a :class:`ckptbench.planner.Plan`) the loop runs that schedule, keeping
    tapes where it says so; ``snaps`` is then the plan's slot count and tape bytes are the
    plan's. Otherwise ``tape_bytes`` declares one tape's bytes for ``peak_stored_bytes``.
    """

    def __init__(
        self,
        f: Callable[[Any, Any, Any], Any],
        post: Callable[[Any, Any], Any],
        steps: int,
        snaps: int | None = None,
        strategy: str = "revolve",
        *,
        plan: Plan | None = None,
        tape_bytes: int = 0,
    ) -> None:
        if not callable(f) or not callable(post):
            raise ValueError("f and post must be callables")
        self.f = f
        self.post = post
        self.steps = check_int("steps", steps)
        self.plan = plan
        if plan is not None:
            if not isinstance(plan, Plan):
                raise ValueError(f"plan must be a ckptbench.planner.Plan, got {type(plan)}")
            if plan.steps != self.steps:
                raise ValueError(f"plan is for {plan.steps} steps, not steps={self.steps}")
            self.strategy = get_strategy("optimal")
            self.snaps = max(1, plan.slots)
            tb = plan.costs.tape_bytes
            self._tape_bytes = list(tb) if isinstance(tb, tuple) else [tb] * self.steps
        else:
            self.strategy = get_strategy(strategy)
            if self.strategy.planned:
                raise ValueError(
                    "strategy optimal needs a plan, or costs and budget_bytes "
                    "(ckptbench.planner.plan_optimal)"
                )
            if self.strategy.stream is None:
                raise ValueError(f"strategy {self.strategy.name} is not an action stream")
            if snaps is None:
                raise ValueError(f"strategy {self.strategy.name} needs snaps")
            self.snaps = check_int("snaps", snaps)
            self._tape_bytes = [check_int("tape_bytes", tape_bytes, minimum=0)] * self.steps
        self.stats: CheckpointStats | None = None
        self._primitive = primitive(self._forward)
        defvjp_argnums(self._primitive, self._make_vjp)

    def __repr__(self) -> str:
        return (
            f"CheckpointedLoop(steps={self.steps}, snaps={self.snaps}, "
            f"strategy={self.strategy.name!r})"
        )

    def __call__(self, params: Any, state0: Any, inputs: Any) -> Any:
        return self._primitive(_pack(params), _pack(state0), inputs, _Run(self))

    def tape_bytes_of(self, step: int) -> int:
        """Declared bytes of step ``step``'s tape (the plan's costs; 0 without a plan)."""
        return self._tape_bytes[step]

    def schedule_actions(self) -> Iterable[Action]:
        """A fresh action stream of this loop's schedule."""
        if self.plan is not None:
            return self.plan.actions()
        return make_schedule(self.strategy, self.steps, self.snaps)

    # ------------------------------------------------------------------ forward = first sweep

    def _check_inputs(self, state0: Any, inputs: Any) -> tuple:
        """Validate the arguments; return the state's signature (structure, shapes, dtypes)."""
        shape = getattr(inputs, "shape", None)
        if shape is None or len(shape) == 0:
            raise ValueError("inputs must be an array whose leading axis is the step axis")
        if shape[0] != self.steps:
            raise ValueError(f"inputs has leading axis {shape[0]}, expected steps={self.steps}")
        return _signature(state0, "state0")

    def _forward(self, params: Any, state0: Any, inputs: Any, run: _Run) -> np.ndarray:
        clock = time.perf_counter
        t_enter = clock()
        sig = self._check_inputs(state0, inputs)
        run.state_bytes = _nbytes(state0)
        run.actions = iter(self.schedule_actions())
        out: np.ndarray | None = None
        state = state0
        f, post = self.f, self.post
        t_prev = clock()
        for act in run.actions:
            t0 = clock()
            run.book_s += t0 - t_prev
            kind = act.kind
            if kind is ActionKind.ADVANCE:
                for i in range(act.start, act.stop):
                    state = f(params, state, inputs[i])
                    if i == 0:
                        _check_state(state, sig)
                    y = post(params, state)
                    out = _store_output(out, i, y, self.steps)
                run.advanced += act.stop - act.start
                run.post_calls += act.stop - act.start
                t_prev = clock()
                run.advance_s += t_prev - t0
            elif kind is ActionKind.TAKESHOT:
                run.store(act.slot, act.step, state)
                t_prev = clock()
                run.book_s += t_prev - t0
            elif kind is ActionKind.TAPE:
                i = act.step
                turn, (state, y) = self._tape(params, state, inputs[i], sig)
                run.keep_tape(i, turn)
                run.taped += 1
                out = _store_output(out, i, y, self.steps)
                t_prev = clock()
                run.taped_s += t_prev - t0
            elif kind is ActionKind.FIRSTURN:
                i = act.step
                run.turning(i)
                run.last_turn, (_, y) = self._tape(params, state, inputs[i], sig)
                run.taped += 1
                out = _store_output(out, i, y, self.steps)
                t_prev = clock()
                run.taped_s += t_prev - t0
                break
            else:  # pragma: no cover - schedules reach FIRSTURN before anything else
                raise RuntimeError(f"unexpected {act!r} in the first sweep")
        self.stats = run.stats()
        run.executor_s += clock() - t_enter
        return out

    def _tape(self, params: Any, state: Any, x: Any, sig: tuple) -> tuple[Callable, Any]:
        """Evaluate step + post on autograd's tape; return (turn, (new_state, output)).

        Every array leaf of params and state, and x, is its own root node, so the user's
        ``f`` indexes a plain dict/tuple of boxes: no autograd container nodes, whose vjps
        would allocate a zero gradient for *every* parameter at every step. ``turn(state_bar,
        g)`` runs the reverse of this one step and returns the list of cotangents of the
        roots (``None`` where a root does not influence the outputs).
        """
        pleaves, prebuild = _flatten(params)
        sleaves, srebuild = _flatten(state)
        values = [*pleaves, *sleaves, x]
        n_p, n_s = len(pleaves), len(sleaves)
        roots = [VJPNode.new_root() for _ in values]
        with trace_stack.new_trace() as trace:
            boxes = [new_box(v, trace, r) for v, r in zip(values, roots, strict=True)]
            p = prebuild(boxes[:n_p])
            new = self.f(p, srebuild(boxes[n_p : n_p + n_s]), boxes[-1])
            _check_state(new, sig)
            y = self.post(p, new)
            end = ag_tuple((*_flatten(new)[0], y))
            if isbox(end) and end._trace == trace:
                end_value, end_node = end._value, end._node
            else:
                end_value, end_node = tuple(_unbox(v) for v in end), None
        new_state = srebuild(list(end_value[:-1]))
        index = {node: k for k, node in enumerate(roots)}

        def turn(state_bar_leaves: list, g_i: Any) -> list:
            grads: list = [None] * len(values)
            if end_node is None:
                return grads
            outgrads = {end_node: ((*state_bar_leaves, g_i), False)}
            for node in toposort(end_node):
                og = outgrads.pop(node)
                k = index.get(node)
                if k is not None:
                    grads[k] = og[0]
                    continue
                for parent, ingrad in zip(node.parents, node.vjp(og[0]), strict=False):
                    outgrads[parent] = add_outgrads(outgrads.get(parent), ingrad)
            return grads

        return turn, (new_state, end_value[-1])

    # ------------------------------------------------------------------ reverse sweep

    def _make_vjp(self, argnums, ans, args, kwargs):
        params, state0, inputs, run = args

        def vjp(g):
            return self._reverse(g, argnums, params, state0, inputs, run)

        return vjp

    def _reverse(self, g, argnums, params, state0, inputs, run: _Run):
        clock = time.perf_counter
        t_enter = clock()
        want_params, want_inputs = 0 in argnums, 2 in argnums
        sig = _signature(state0, "state0")
        if run.last_turn is None:  # a second vjp of the same call: redo the first sweep
            self._replace_snapshots(params, state0, inputs, run, sig)
        pleaves, prebuild = _flatten(params)
        s0leaves, s0rebuild = _flatten(state0)
        n_p = len(pleaves)
        acc = [np.zeros_like(leaf) for leaf in pleaves] if want_params else None
        inputs_bar = np.zeros_like(inputs) if want_inputs else None
        zeros = [np.zeros_like(leaf) for leaf in s0leaves]
        state_bar = zeros

        def reverse_step(turn: Callable, i: int) -> None:
            nonlocal state_bar
            grads = turn(state_bar, g[i])
            if want_params:
                _accumulate(acc, grads[:n_p])
            state_bar = [
                z if gk is None else gk for z, gk in zip(zeros, grads[n_p:-1], strict=True)
            ]
            if want_inputs and grads[-1] is not None:
                inputs_bar[i] = grads[-1]
            run.free(i)

        # The forward pass consumed FIRSTURN and kept its tape: reverse step l-1 first.
        t0 = clock()
        turn, run.last_turn = run.last_turn, None
        reverse_step(turn, self.steps - 1)
        state = None
        f = self.f
        t_prev = clock()
        run.taped_s += t_prev - t0
        for act in run.actions:
            t0 = clock()
            run.book_s += t0 - t_prev
            kind = act.kind
            if kind is ActionKind.YOUTURN:
                run.turning(act.step)
                turn, _ = self._tape(params, state, inputs[act.step], sig)
                run.taped += 1
                reverse_step(turn, act.step)
                state = None
                t_prev = clock()
                run.taped_s += t_prev - t0
            elif kind is ActionKind.ADVANCE:
                for i in range(act.start, act.stop):
                    state = f(params, state, inputs[i])
                run.advanced += act.stop - act.start
                t_prev = clock()
                run.advance_s += t_prev - t0
            elif kind is ActionKind.TAPE:
                turn, (state, _) = self._tape(params, state, inputs[act.step], sig)
                run.keep_tape(act.step, turn)
                run.taped += 1
                t_prev = clock()
                run.taped_s += t_prev - t0
            elif kind is ActionKind.REVERSE:
                reverse_step(run.take_tape(act.step), act.step)
                state = None
                t_prev = clock()
                run.taped_s += t_prev - t0
            elif kind is ActionKind.RESTORE:
                state = run.slots[act.slot][1]
                t_prev = clock()
                run.book_s += t_prev - t0
            elif kind is ActionKind.TAKESHOT:
                run.store(act.slot, act.step, state)
                t_prev = clock()
                run.book_s += t_prev - t0
            elif kind is ActionKind.TERMINATE:
                break
            else:  # pragma: no cover - FIRSTURN was consumed by the first sweep
                raise RuntimeError(f"unexpected {act!r} in the reverse sweep")
        run.slots.clear()
        run.tapes.clear()
        params_bar = prebuild(_like_leaves(acc, pleaves)) if want_params else None
        grads = {0: params_bar, 1: s0rebuild(_like_leaves(state_bar, s0leaves)), 2: inputs_bar}
        run.executor_s += clock() - t_enter
        self.stats = run.stats()
        return tuple(grads[n] for n in argnums)

    def _replace_snapshots(self, params, state0, inputs, run: _Run, sig: tuple) -> None:
        """Re-run the first sweep (no outputs) so the schedule can be reversed once more."""
        run.slots.clear()
        run.tapes.clear()
        run.kept_tape_bytes = 0
        run.actions = iter(self.schedule_actions())
        state = state0
        for act in run.actions:
            if act.kind is ActionKind.ADVANCE:
                for i in range(act.start, act.stop):
                    state = self.f(params, state, inputs[i])
                run.advanced += act.stop - act.start
            elif act.kind is ActionKind.TAKESHOT:
                run.store(act.slot, act.step, state)
            elif act.kind is ActionKind.TAPE:
                turn, (state, _) = self._tape(params, state, inputs[act.step], sig)
                run.keep_tape(act.step, turn)
                run.taped += 1
            elif act.kind is ActionKind.FIRSTURN:
                run.turning(act.step)
                run.last_turn, _ = self._tape(params, state, inputs[act.step], sig)
                run.taped += 1
                return


def binomial_checkpoint(
    f: Callable[[Any, Any, Any], Any],
    post: Callable[[Any, Any], Any],
    steps: int,
    snaps: int | None = None,
    strategy: str | None = None,
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
    (:func:`ckptbench.planner.plan_optimal`): pass ``plan=`` or ``costs=`` and
    ``budget_bytes=`` (then ``snaps`` is not needed). A ``plan`` alone implies "optimal".
    For the other strategies ``tape_bytes`` declares one tape's size, so that
    ``stats.peak_stored_bytes`` (snapshots + the live tape) compares with a plan's peak.

    Example::

        loop = binomial_checkpoint(rnn_step, readout, steps=1000, snaps=31)
        loss = lambda p: anp.sum(loop(p, h0, xs) ** 2)
        g = autograd.grad(loss)(params)      # 2439 + 1000 evaluations of rnn_step
    """
    if costs is not None or budget_bytes is not None:
        if plan is not None:
            raise ValueError("give either plan or costs and budget_bytes, not both")
        if costs is None or budget_bytes is None:
            raise ValueError("costs and budget_bytes go together")
        plan = plan_optimal(costs, steps, budget_bytes)
    strat = get_strategy("revolve" if strategy is None else strategy)
    if plan is not None and strategy is not None and not strat.planned:
        raise ValueError(f"a plan runs strategy optimal, not {strat.name}")
    if plan is not None and tape_bytes:
        raise ValueError("a plan declares its own tape bytes")
    return CheckpointedLoop(f, post, steps, snaps, strat, plan=plan, tape_bytes=tape_bytes)


# ---------------------------------------------------------------------- helpers


def _pack(value: Any) -> Any:
    """Turn nested Python containers holding autograd boxes into autograd container boxes."""
    if isinstance(value, tuple):
        return ag_tuple(tuple(_pack(v) for v in value))
    if isinstance(value, list):
        return ag_list([_pack(v) for v in value])
    if isinstance(value, dict):
        return ag_dict({k: _pack(v) for k, v in value.items()})
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
