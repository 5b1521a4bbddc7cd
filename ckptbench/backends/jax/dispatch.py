"""The engine-driven JAX executor: :mod:`ckptbench.engine` dispatching compiled step pieces.

``--executor engine``. The one interpreter every backend shares
(:func:`ckptbench.engine.interpreter.first_sweep` /
:func:`~ckptbench.engine.interpreter.reverse_sweep`) runs the action stream in Python;
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
from ckptbench.backends.jax.fusion import DEFAULT_SPAN, Window, fusion_windows
from ckptbench.backends.jax.step_ops import JaxStepOps, value_of, windowed
from ckptbench.engine.interpreter import EngineLoop, first_sweep, reverse_sweep
from ckptbench.schedules import ActionKind, plan_from

__all__ = ["JaxEngineLoop", "JaxStepOps", "engine_checkpoint"]

_STORED, _INPUT = 0, 1

#: The most step operations of a first sweep run as one fused call (a longer one, such as
#: store-all's, would be a large program compiled for one use per gradient).
FUSED_FIRST_SWEEP_MAX = 256


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
        self.fused: dict[tuple, Any] = {}  # a fused window's executable, by its program key

        #: what a fused window runs for each recorded operation (:mod:`.fusion`)
        self.impls = self._fused_impls(tape, tape_out, reverse, turn, sp, add)

    def _fused_impls(self, tape, tape_out, reverse, turn, sp, add) -> dict[str, Callable]:
        """The traceable function of each operation a fused window records (``sp``: the
        step with its readout; ``add``: the parameter cotangent's accumulation)."""

        def fused_advance(static, i, p, s, xs, ys=None):
            n, outputs = static
            if outputs:
                return self.advance_fn(n, True)(p, s, xs, ys, i)
            return (self.advance_fn(n, False)(p, s, xs, i),)

        def fused_tape(static, i, p, s, xs, ys=None):
            outputs, inv = static  # the invariant leaves come last (None unless inv)
            return tape_out(p, s, xs, ys, i, inv) if outputs else tape(p, s, xs, i, inv)

        def segment(static, i, p, s, xs, g, sbar, pbar, xsbar):
            """A run of kept tapes and its turn (:func:`~.fusion.tape_runs`): the vjp of
            a scan over its steps, the way the plain gradient reverses them."""
            (n,) = static

            def run(p, s, xs_n):
                return lax.scan(lambda s, x: sp(p, s, x), s, xs_n)

            xs_n = lax.dynamic_slice_in_dim(xs, i, n)
            if xsbar is None:  # no input cotangent wanted: none computed
                _, vjp = jax.vjp(lambda p, s: run(p, s, xs_n), p, s)
                gp, gs = vjp((sbar, lax.dynamic_slice_in_dim(g, i, n)))
                return gs, add(pbar, gp), None
            _, vjp = jax.vjp(run, p, s, xs_n)
            gp, gs, gx = vjp((sbar, lax.dynamic_slice_in_dim(g, i, n)))
            return gs, add(pbar, gp), lax.dynamic_update_slice_in_dim(xsbar, gx, i, 0)

        return {
            "advance": fused_advance,
            "segment": segment,
            "tape": fused_tape,
            "reverse": lambda _, i, p, saved, inv, xs, g, sbar, pbar, xsbar: reverse(
                p, saved, inv, xs, g, i, sbar, pbar, xsbar
            ),
            "turn": lambda _, i, p, s, xs, g, sbar, pbar, xsbar: turn(
                p, s, xs, g, i, sbar, pbar, xsbar
            ),
        }

    def advance_fn(self, n: int, outputs: bool) -> Callable:
        """The traceable function of ``n`` untaped steps from index ``i`` (with readouts:
        ``(p, s, xs, ys, i) -> (s, ys)``, else ``(p, s, xs, i) -> s``)."""
        step, post = self.step, self.post
        if outputs:

            def run_out(p, s, xs, ys, i):
                def body(s, x):
                    s = step(p, s, x)
                    return s, post(p, s)

                s, y = lax.scan(body, s, lax.dynamic_slice_in_dim(xs, i, n))
                return s, lax.dynamic_update_slice_in_dim(ys, y, i, 0)

            return run_out

        def run(p, s, xs, i):
            xs_n = lax.dynamic_slice_in_dim(xs, i, n)
            return lax.scan(lambda s, x: (step(p, s, x), None), s, xs_n)[0]

        return run

    def advance(self, n: int, outputs: bool) -> Any:
        """The executable running ``n`` untaped steps from index ``i`` (with readouts)."""
        key = (n, outputs)
        fn = self._advance.get(key)
        if fn is None:
            donate = (3,) if outputs else ()
            fn = self._advance[key] = _Aot(self.advance_fn(n, outputs), donate=donate)
        return fn


class JaxEngineLoop(EngineLoop):
    """A checkpointed loop whose gradient the engine drives with compiled JAX pieces.

    The arguments are :class:`ckptbench.engine.interpreter.EngineLoop`'s (``steps``, ``snaps``,
    ``strategy``; ``plan=``; ``tape_bytes`` declaring
    one tape's bytes, default: the layout's exact bytes). Not a traced function: call
    :meth:`value_and_grad` with concrete arrays; ``stats`` and ``dispatches`` describe the
    last call. ``fuse_span`` runs the first sweep and every stretch reversing at most that
    many steps as one call each (:mod:`.fusion`; 0: off); by default
    :data:`~.fusion.DEFAULT_SPAN` on an accelerator, off on the CPU (there a call costs
    little and XLA's CPU code for a long window ran slower: docs/gpu.md). A first sweep of
    more than :data:`FUSED_FIRST_SWEEP_MAX` operations dispatches its operations one by
    one. A recorder (``run --trace``) turns fusion off. ``fold_runs`` (default true) runs
    each run of kept tapes inside a window as the vjp of one scan
    (:func:`~.fusion.tape_runs`). ``fuse_rest`` (default true) also fuses the stretches of
    the reverse sweep outside Revolve's repeating segments that tape or reverse a step
    (:func:`~.fusion.fusion_windows`). Both are class attributes a measurement may set.
    """

    fold_runs = True
    fuse_rest = True

    def __init__(self, step: Callable, post: Callable, steps: int, *args: Any, **kw: Any):
        self._layout_kw = kw.pop("layout", None)
        span = kw.pop("fuse_span", None)
        self.fuse_span: int | None = None if span is None else int(span)
        super().__init__(step, post, steps, *args, **kw)
        self._ex: _Executables | None = None
        self._idx: tuple[Any, list] | None = None
        self._loss: dict[Any, Any] = {}
        self._windows: tuple[tuple, tuple[int, bool, dict[int, int]]] | None = None
        self.dispatches = 0

    def span_on(self, platform: str) -> int:
        """The fused-window span used on a device of ``platform`` (see the class)."""
        if self.fuse_span is not None:
            return self.fuse_span
        return 0 if platform == "cpu" else DEFAULT_SPAN

    def fusion(self, span: int) -> tuple[int, bool, dict[int, int]]:
        """``(position of FIRSTURN, whether the first sweep is fused, reverse windows)``,
        read once from the (data-independent) action stream."""
        if self._windows is None or self._windows[0] != (span, self.fuse_rest):
            actions = list(self.schedule.actions())
            first, windows = fusion_windows(actions, self.steps, span, self.fuse_rest)
            ops = sum(a.kind is not ActionKind.TAKESHOT for a in actions[: first + 1])
            fuse_first = span > 0 and ops <= FUSED_FIRST_SWEEP_MAX
            self._windows = ((span, self.fuse_rest), (first, fuse_first, windows))
        return self._windows[1]

    def fused_counters(self) -> dict[str, int]:
        """``fused_programs``: the fused windows' distinct executables compiled so far;
        ``fused_temp_bytes``: the most temporary device bytes one of them needs (XLA's
        memory analysis: what a window holds beyond its inputs and outputs)."""
        fused = self._ex.fused if self._ex is not None else {}
        temps = [getattr(fn.memory_analysis(), "temp_size_in_bytes", 0) for fn in fused.values()]
        return {"fused_programs": len(fused), "fused_temp_bytes": max(temps, default=0)}

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
        ops.fold_runs = self.fold_runs
        ops.state0 = state0
        ops.state_bytes = ops.state_nbytes(state0)
        # one call makes every buffer: outputs, zero cotangents, accumulators
        ops.ys, ops.zero_s, ops.pbar, ops.xsbar = self._setup(params, state0, inputs, inputs_grad)
        ops.dispatches = 1
        run = self.new_run()
        span = self.span_on(next(iter(inputs.devices())).platform)
        first, fuse_first, windows = (0, False, {})
        if self.recorder is None and span > 0:
            first, fuse_first, windows = self.fusion(span)
        if fuse_first:
            ops.window = Window()
        first_sweep(run, ops, state0)
        ops.flush()
        value, ops.g = self._loss_grad(loss)(value_of(ops.ys))
        ops.ys = None
        ops.dispatches += 1
        if windows:
            run.actions = windowed(run.actions, ops, first + 1, windows)
        sbar = value_of(reverse_sweep(run, ops))
        self.stats: CheckpointStats = run.stats()
        self.dispatches = ops.dispatches
        return value, (value_of(ops.pbar), sbar, value_of(ops.xsbar))


def engine_checkpoint(
    step: Callable, post: Callable, steps: int, snaps: int | None = None, strategy: Any = None,
    *, plan: Any = None, costs: Any = None, budget_bytes: int | None = None, **kwargs: Any,
) -> JaxEngineLoop:  # fmt: skip
    """The engine-driven JAX loop (see :class:`JaxEngineLoop`); the arguments are
    :func:`ckptbench.backends.autograd.binding.binomial_checkpoint`'s (``costs`` with
    ``budget_bytes`` are planned here: the loop receives the plan) and ``layout``."""
    plan = plan_from(strategy, steps, plan=plan, costs=costs, budget_bytes=budget_bytes)
    return JaxEngineLoop(step, post, steps, snaps, strategy, plan=plan, **kwargs)
