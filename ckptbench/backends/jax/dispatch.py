"""The engine-driven JAX executor: :mod:`ckptbench.engine` dispatching compiled step pieces.

``--executor engine``. The one interpreter every backend shares (:func:`ckptbench.engine.
first_sweep` / :func:`~ckptbench.engine.reverse_sweep`) runs the action stream in Python;
every step operation it asks for is one call of a jitted executable of static shape, which
JAX dispatches asynchronously, so the host only has to stay ahead of the device:

* a run of ``n`` untaped steps (ADVANCE) is one call per set bit of ``n``: executables
  ``lax.scan`` over 1, 2, 4, ... steps (static trip counts; the start index is an argument),
  the first sweep's variant also writing the readouts into the output buffer (donated, so
  it is updated in place);
* a kept tape (TAPE) is one call returning the step's next state and the residual leaves of
  its ``jax.vjp`` that depend on the state or input (:class:`~ckptbench.backends.jax.binding.
  TapeLayout`, the compiled executor's layout: the same tape bytes); the engine holds these
  device arrays until the REVERSE;
* a reverse (REVERSE, and FIRSTURN's) is one call adding the parameter cotangent into a
  donated accumulator; a turn (YOUTURN: tape and reverse at once) is one fused call;
* snapshots are the device arrays of the state the engine already holds (no copy).

Nothing is read back to the host before the gradient is complete: the schedule never
depends on data, indices are device scalars made once per loop, and every counter is
counted on the host from what was dispatched (each executable runs exactly its static trip
count). ``loop.dispatches`` counts the executable calls of the last gradient.

Phase times: the engine's host clocks around asynchronous dispatches measure launches, not
work; this executor therefore reports no phase times (``phases`` is empty, said in the
result's notes) — the iteration's wall time, taken after the result is ready, is the
measurement.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ckptbench.backends.contract import CheckpointStats
from ckptbench.backends.jax.binding import TapeLayout, tape_layout
from ckptbench.engine.interpreter import EngineLoop, first_sweep, reverse_sweep
from ckptbench.schedules import plan_from

__all__ = ["JaxEngineLoop", "JaxStepOps", "engine_checkpoint"]

_STORED, _INPUT = 0, 1


class _Aot:
    """A jitted function compiled ahead of time on its first call, per variant (whether
    the input cotangent is kept): ``jax.clear_caches()`` (which the other modes call after
    compiling) never drops it, and no later call traces or compiles."""

    def __init__(self, fn: Callable, donate: tuple[int, ...] = ()) -> None:
        self.jitted = jax.jit(fn, donate_argnums=donate)
        self.compiled: dict[bool, Any] = {}

    def __call__(self, *args: Any) -> Any:
        key = args[-1] is None
        fn = self.compiled.get(key)
        if fn is None:
            fn = self.compiled[key] = self.jitted.lower(*args).compile()
        return fn(*args)


def _pieces(n: int) -> list[int]:
    """``n`` as powers of two, largest first (one dispatch each)."""
    return [1 << b for b in range(n.bit_length() - 1, -1, -1) if n >> b & 1]


class _Executables:
    """The jitted step pieces of one (step, post, layout), compiled on first use."""

    def __init__(self, step: Callable, post: Callable, layout: TapeLayout) -> None:
        self.step, self.post, self.layout = step, post, layout
        self._advance: dict[tuple[int, bool], Any] = {}
        kinds, treedef, stored = layout.kinds, layout.treedef, layout.stored

        def sp(p, s, x):
            s1 = step(p, s, x)
            return s1, post(p, s1)

        def record(p, s, xs, i):
            (s1, y), vjp = jax.vjp(sp, p, s, xs[i])
            leaves = jax.tree_util.tree_leaves(vjp)
            return s1, y, [leaves[k] for k in stored], leaves

        invariant = [k for k, kind in enumerate(kinds) if kind not in (_STORED, _INPUT)]

        def rebuild(saved, x, inv):
            it, inv_of = iter(saved), dict(zip(invariant, inv, strict=True))
            leaves = [
                next(it) if kind == _STORED else x if kind == _INPUT else inv_of[k]
                for k, kind in enumerate(kinds)
            ]
            return jax.tree_util.tree_unflatten(treedef, leaves)

        def add(acc, gp):
            return jax.tree_util.tree_map(jnp.add, acc, gp)

        def put_x(xsbar, gx, i):
            if xsbar is None:
                return None
            return lax.dynamic_update_index_in_dim(xsbar, gx, i, 0)

        def tape(p, s, xs, i, inv=False):
            s1, _, saved, leaves = record(p, s, xs, i)
            return saved, s1, ([leaves[k] for k in invariant] if inv else None)

        def tape_out(p, s, xs, ys, i, inv=False):
            s1, y, saved, leaves = record(p, s, xs, i)
            ys = lax.dynamic_update_index_in_dim(ys, y, i, 0)
            return saved, s1, ys, ([leaves[k] for k in invariant] if inv else None)

        def reverse(p, saved, inv, xs, g, i, sbar, pbar, xsbar):
            gp, gs, gx = rebuild(saved, xs[i], inv)((sbar, g[i]))
            return gs, add(pbar, gp), put_x(xsbar, gx, i)

        def turn(p, s, xs, g, i, sbar, pbar, xsbar):
            _, vjp = jax.vjp(sp, p, s, xs[i])
            gp, gs, gx = vjp((sbar, g[i]))
            return gs, add(pbar, gp), put_x(xsbar, gx, i)

        # the first tape of a call also returns the residual leaves computed from the
        # parameters alone, which every kept tape shares (no extra step evaluation)
        self.tape = _Aot(tape)
        self.tape_inv = _Aot(functools.partial(tape, inv=True))
        self.tape_out = _Aot(tape_out, donate=(3,))
        self.tape_out_inv = _Aot(functools.partial(tape_out, inv=True), donate=(3,))
        self.reverse = _Aot(reverse, donate=(7, 8))
        self.turn = _Aot(turn, donate=(6, 7))

    def advance(self, n: int, outputs: bool) -> Any:
        """The executable running ``n`` untaped steps from index ``i`` (with readouts)."""
        key = (n, outputs)
        fn = self._advance.get(key)
        if fn is not None:
            return fn
        step, post = self.step, self.post

        if outputs:

            def run(p, s, xs, ys, i):
                def body(s, x):
                    s = step(p, s, x)
                    return s, post(p, s)

                s, y = lax.scan(body, s, lax.dynamic_slice_in_dim(xs, i, n))
                return s, lax.dynamic_update_slice_in_dim(ys, y, i, 0)

            fn = _Aot(run, donate=(3,))
        else:

            def run(p, s, xs, i):
                xs_n = lax.dynamic_slice_in_dim(xs, i, n)
                return lax.scan(lambda s, x: (step(p, s, x), None), s, xs_n)[0]

            fn = _Aot(run)
        self._advance[key] = fn
        return fn


class JaxStepOps:
    """The engine's step operations on JAX (see :class:`ckptbench.engine.StepOps`): every
    call dispatches one or a few compiled executables and returns device arrays."""

    def __init__(self, ex: _Executables, params: Any, inputs: Any, idx: list, want_x: bool):
        self.ex, self.p, self.xs, self.idx = ex, params, inputs, idx
        self.dispatches = 0
        self.state0: Any = None
        self.zero_s: Any = None
        self.ys: Any = None
        self.g: Any = None
        self.inv: Any = None
        self.pbar: Any = None
        self.xsbar: Any = None
        self.want_x = want_x

    def advance(self, state: Any, start: int, stop: int, outputs: bool) -> Any:
        i = start
        for n in _pieces(stop - start):
            fn = self.ex.advance(n, outputs)
            if outputs:
                state, self.ys = fn(self.p, state, self.xs, self.ys, self.idx[i])
            else:
                state = fn(self.p, state, self.xs, self.idx[i])
            self.dispatches += 1
            i += n
        return state

    def tape(self, state: Any, i: int, outputs: bool) -> tuple[Any, Any]:
        self.dispatches += 1
        ex, first = self.ex, self.inv is None
        if outputs:
            fn = ex.tape_out_inv if first else ex.tape_out
            saved, s1, self.ys, inv = fn(self.p, state, self.xs, self.ys, self.idx[i])
        else:
            fn = ex.tape_inv if first else ex.tape
            saved, s1, inv = fn(self.p, state, self.xs, self.idx[i])
        if first:
            self.inv = inv
        return saved, s1

    def _sbar(self, state_bar: Any) -> Any:
        return self.zero_s if state_bar is None else state_bar

    def reverse(self, tape: Any, state_bar: Any, i: int) -> Any:
        self.dispatches += 1
        gs, self.pbar, self.xsbar = self.ex.reverse(
            self.p, tape, self.inv, self.xs, self.g, self.idx[i],
            self._sbar(state_bar), self.pbar, self.xsbar,
        )  # fmt: skip
        return gs

    def turn(self, state: Any, state_bar: Any, i: int) -> Any:
        """Tape step ``i`` from ``state`` and reverse it at once (one fused call)."""
        self.dispatches += 1
        gs, self.pbar, self.xsbar = self.ex.turn(
            self.p, state, self.xs, self.g, self.idx[i], self._sbar(state_bar),
            self.pbar, self.xsbar,
        )  # fmt: skip
        return gs

    def state_nbytes(self, state: Any) -> int:
        return sum(int(a.size) * a.dtype.itemsize for a in jax.tree_util.tree_leaves(state))


class JaxEngineLoop(EngineLoop):
    """A checkpointed loop whose gradient the engine drives with compiled JAX pieces.

    The arguments are :class:`ckptbench.engine.EngineLoop`'s (``steps``, ``snaps``,
    ``strategy``; ``plan=``; ``tape_bytes`` declaring
    one tape's bytes, default: the layout's exact bytes). Not a traced function: call
    :meth:`value_and_grad` with concrete arrays; ``stats`` and ``dispatches`` describe the
    last call.
    """

    def __init__(self, step: Callable, post: Callable, steps: int, *args: Any, **kw: Any):
        self._layout_kw = kw.pop("layout", None)
        super().__init__(step, post, steps, *args, **kw)
        self._ex: _Executables | None = None
        self._idx: tuple[Any, list] | None = None
        self._loss: dict[Any, Any] = {}
        self.dispatches = 0

    def executables(self, params: Any, state0: Any, inputs: Any) -> _Executables:
        if self._ex is None:
            layout = self._layout_kw
            if layout is None:
                x_spec = jax.ShapeDtypeStruct(inputs.shape[1:], inputs.dtype)
                layout = tape_layout(self.step, self.post, params, state0, x_spec)
            self._ex = _Executables(self.step, self.post, layout)
        return self._ex

    def _indices(self, inputs: Any) -> list:
        device = next(iter(inputs.devices()))
        if self._idx is None or self._idx[0] != device:
            idx = jax.device_put([np.int32(i) for i in range(self.steps)], device)
            self._idx = (device, idx)
        return self._idx[1]

    def _setup(self, params: Any, state0: Any, inputs: Any, inputs_grad: bool) -> Any:
        fn = self._loss.get(("setup", inputs_grad))
        if fn is None:
            step, post, steps = self.step, self.post, self.steps

            def setup(p, s0, xs, _variant):
                y = jax.eval_shape(lambda: post(p, step(p, s0, xs[0])))
                zeros = jax.tree_util.tree_map(jnp.zeros_like, (s0, p))
                xsbar = jnp.zeros_like(xs) if inputs_grad else None
                return jnp.zeros((steps, *y.shape), y.dtype), *zeros, xsbar

            fn = self._loss[("setup", inputs_grad)] = _Aot(setup)
        return fn(params, state0, inputs, None)

    def _loss_grad(self, loss: Callable) -> Any:
        fn = self._loss.get(loss)
        if fn is None:
            fn = self._loss[loss] = _Aot(jax.value_and_grad(loss))
        return fn

    def value_and_grad(
        self, loss: Callable, params: Any, state0: Any, inputs: Any, *, inputs_grad: bool = True
    ) -> tuple[Any, tuple[Any, Any, Any]]:
        """``(loss(outputs), (d/dparams, d/dstate0, d/dinputs or None))`` as device arrays.

        ``outputs`` stacks ``post(params, x_i)`` for i = 1..steps; nothing is read back
        to the host before this returns.
        """
        params, state0, inputs = jax.tree_util.tree_map(jnp.asarray, (params, state0, inputs))
        if inputs.ndim == 0 or inputs.shape[0] != self.steps:
            raise ValueError(
                f"inputs has leading axis {inputs.shape[:1]}, expected steps={self.steps}"
            )
        ex = self.executables(params, state0, inputs)
        ops = JaxStepOps(ex, params, inputs, self._indices(inputs), inputs_grad)
        ops.state0 = state0
        # one call makes every buffer: outputs, zero cotangents, accumulators
        ops.ys, ops.zero_s, ops.pbar, ops.xsbar = self._setup(params, state0, inputs, inputs_grad)
        ops.dispatches = 1
        run = self.new_run()
        first_sweep(run, ops, state0)
        value, ops.g = self._loss_grad(loss)(ops.ys)
        ops.ys = None
        ops.dispatches += 1
        sbar = reverse_sweep(run, ops)
        self.stats: CheckpointStats = run.stats()
        self.dispatches = ops.dispatches
        return value, (ops.pbar, sbar, ops.xsbar)


def engine_checkpoint(
    step: Callable, post: Callable, steps: int, snaps: int | None = None, strategy: Any = None,
    *, plan: Any = None, costs: Any = None, budget_bytes: int | None = None, **kwargs: Any,
) -> JaxEngineLoop:  # fmt: skip
    """The engine-driven JAX loop (see :class:`JaxEngineLoop`); the arguments are
    :func:`ckptbench.backends.autograd.binding.binomial_checkpoint`'s (``costs`` with
    ``budget_bytes`` are planned here: the loop receives the plan) and ``layout``."""
    plan = plan_from(strategy, steps, plan=plan, costs=costs, budget_bytes=budget_bytes)
    return JaxEngineLoop(step, post, steps, snaps, strategy, plan=plan, **kwargs)
