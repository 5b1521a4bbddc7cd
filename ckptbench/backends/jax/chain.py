"""Layer chains on JAX: the engine dispatching each layer's compiled pieces (``--executor
engine``), and the three modes of a chain.

A chain (:mod:`ckptbench.workloads.chain`) runs ``x_{i+1} = layer(i, params[i], x_i)``; its
states change shape from layer to layer, so every layer gets its own executables, compiled
ahead of time on first use (immune to ``jax.clear_caches``):

* ``advance`` — the layer, untaped;
* ``tape`` — the layer's output and the residuals of its ``jax.vjp`` that are not its own
  inputs (a residual that *is* a parameter or the input is passed again at the reverse, not
  stored: the layout is read once, at tracing, by identity);
* ``reverse`` — the vjp rebuilt from those residuals, adding the layer's parameter cotangent
  into its donated accumulator; ``turn`` (YOUTURN) — tape and reverse in one call.

The compiled executor (one snapshot buffer of one shape) does not run chains: a chain asks
for ``--executor engine`` in one line. Peers (``jax-checkpoint``, ``equinox``) checkpoint
recurrences only, as on the other backends.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import jax
import jax.numpy as jnp
import numpy as np

from ckptbench.backends.contract import Built
from ckptbench.backends.jax import SPEC
from ckptbench.backends.jax.device import DevicePeakMeter
from ckptbench.engine import clock
from ckptbench.engine.chain import ChainLoop
from ckptbench.engine.interpreter import first_sweep, reverse_sweep
from ckptbench.engine.steps import ChainSteps
from ckptbench.measure.peaks import read_rss_bytes, trim_heap
from ckptbench.results.modes import Mode
from ckptbench.schedules import get_strategy, plan_from, strategy_names

if TYPE_CHECKING:
    from ckptbench.results.schema import Case

__all__ = [
    "JaxChainLoop",
    "JaxChainOps",
    "chain_built",
    "chain_checkpoint",
    "chain_ops",
    "tape_nbytes",
]


class _Compiled:
    """``fn`` jitted and compiled ahead of time per argument structure, on first call."""

    def __init__(self, fn: Callable, donate: tuple[int, ...] = ()) -> None:
        self.jitted = jax.jit(fn, donate_argnums=donate)
        self.compiled: dict[Any, Any] = {}

    def __call__(self, *args: Any) -> Any:
        key = jax.tree_util.tree_structure(args)
        fn = self.compiled.get(key)
        if fn is None:
            fn = self.compiled[key] = self.jitted.lower(*args).compile()
        return fn(*args)


class _Layer:
    """The compiled pieces of one layer ``i`` (module docstring)."""

    def __init__(self, layer: Callable, i: int) -> None:
        self.layout: list = []  # [(treedef, kinds)], filled when ``tape`` is traced

        def f(p, x):
            return layer(i, p, x)

        def record(p, x):
            y, vjp = jax.vjp(f, p, x)
            leaves, treedef = jax.tree_util.tree_flatten(vjp)
            inputs = [*jax.tree_util.tree_leaves(p), x]
            kinds = [next((k for k, a in enumerate(inputs) if a is leaf), None) for leaf in leaves]
            if not self.layout:
                self.layout.append((treedef, kinds))
            return y, [leaf for leaf, k in zip(leaves, kinds, strict=True) if k is None]

        def rebuild(p, x, saved):
            treedef, kinds = self.layout[0]
            inputs, it = [*jax.tree_util.tree_leaves(p), x], iter(saved)
            leaves = [next(it) if k is None else inputs[k] for k in kinds]
            return jax.tree_util.tree_unflatten(treedef, leaves)

        def reverse(p, x, saved, ct, pbar):
            gp, gx = rebuild(p, x, saved)(ct)
            return gx, jax.tree_util.tree_map(jnp.add, pbar, gp)

        def turn(p, x, ct, pbar):
            gp, gx = jax.vjp(f, p, x)[1](ct)
            return gx, jax.tree_util.tree_map(jnp.add, pbar, gp)

        self.advance = _Compiled(f)
        self.tape = _Compiled(record)
        self.reverse = _Compiled(reverse, donate=(4,))
        self.turn = _Compiled(turn, donate=(3,))


class JaxChainOps(ChainSteps):
    """The engine's step operations for a chain on JAX: one compiled call per layer."""

    def __init__(self, pieces: list[_Layer], params: list, steps: int, pbar: Any) -> None:
        self.pieces, self.params, self.steps = pieces, params, steps
        self.pbar = pbar  # the parameters' cotangent accumulators, zeros
        self.out: Any = None
        self.g: Any = None
        self.dispatches = 0

    def advance(self, state: Any, start: int, stop: int, outputs: bool) -> Any:
        for i in range(start, stop):
            state = self.pieces[i].advance(self.params[i], state)
        self.dispatches += stop - start
        return state

    def tape(self, state: Any, i: int, outputs: bool) -> tuple[Any, Any]:
        self.dispatches += 1
        y, saved = self.pieces[i].tape(self.params[i], state)
        if outputs and i == self.steps - 1:
            self.out = y
        return (state, saved), y

    def reverse(self, tape: Any, state_bar: Any, i: int) -> Any:
        self.dispatches += 1
        x, saved = tape
        ct = self.g if state_bar is None else state_bar
        gx, self.pbar[i] = self.pieces[i].reverse(self.params[i], x, saved, ct, self.pbar[i])
        return gx

    def turn(self, state: Any, state_bar: Any, i: int) -> Any:
        self.dispatches += 1
        gx, self.pbar[i] = self.pieces[i].turn(self.params[i], state, state_bar, self.pbar[i])
        return gx

    def state_nbytes(self, state: Any) -> int:
        return int(state.size) * state.dtype.itemsize


class JaxChainLoop(ChainLoop):
    """A checkpointed chain whose gradient the engine drives with compiled JAX pieces; call
    :meth:`value_and_grad` with concrete arrays (``stats``, ``dispatches``: the last call)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.pieces = [_Layer(self.layer, i) for i in range(self.steps)]
        self._loss: dict[Any, _Compiled] = {}
        # compiled ahead of time like the pieces: an eager zeros_like per parameter shape
        # would be compiled again in the first gradient after jax.clear_caches()
        self._zeros = _Compiled(lambda p: jax.tree_util.tree_map(jnp.zeros_like, p))
        self.dispatches = 0

    def value_and_grad(self, loss: Callable, params: Any, x0: Any) -> tuple[Any, tuple]:
        """``(loss(x_L), (d/dparams, d/dx0))`` as device arrays."""
        params = list(self.check_params(params))
        ops = JaxChainOps(self.pieces, params, self.steps, list(self._zeros(params)))
        run = self.new_run()
        first_sweep(run, ops, x0)
        grad = self._loss.get(loss)
        if grad is None:
            grad = self._loss[loss] = _Compiled(jax.value_and_grad(loss))
        value, ops.g = grad(ops.out)
        ops.out = None
        x_bar = reverse_sweep(run, ops, x0)
        self.stats = run.stats()
        self.dispatches = ops.dispatches + 2  # + the zeros and the loss
        return value, (ops.pbar, x_bar)


def chain_checkpoint(
    layer: Callable, layers: int, snaps: int | None = None, strategy: Any = None,
    *, plan: Any = None, costs: Any = None, budget_bytes: int | None = None, tape_bytes: int = 0,
) -> JaxChainLoop:  # fmt: skip
    """The engine-driven JAX chain (:class:`JaxChainLoop`); the arguments are
    :func:`ckptbench.backends.autograd.chain.chain_checkpoint`'s."""
    plan = plan_from(strategy, layers, plan=plan, costs=costs, budget_bytes=budget_bytes)
    return JaxChainLoop(layer, layers, snaps, strategy, plan=plan, tape_bytes=tape_bytes)


def chain_ops(layer: Callable, layers: int, params: list) -> JaxChainOps:
    """The executor's own step operations over ``params`` (one array tree per layer), each
    layer's pieces compiled on first use: ``tape(x_i, i, False)`` -> ``((x_i, residuals),
    x_{i+1})`` and ``reverse(tape, x_bar, i)``, which adds the layer's parameter cotangent
    into ``pbar[i]`` as a reverse sweep does (what :mod:`ckptbench.backends.jax.layercosts`
    times)."""
    pieces = [_Layer(layer, i) for i in range(layers)]
    pbar = jax.tree_util.tree_map(jnp.zeros_like, list(params))
    return JaxChainOps(pieces, list(params), layers, pbar)


def _buffer(a: Any) -> Any:
    """One device buffer's identity (the array's own where it spans several devices)."""
    try:
        return a.unsafe_buffer_pointer()
    except Exception:  # sharded or deleted arrays have no single pointer
        return id(a)


def tape_nbytes(tape: Any, out: Any) -> int:
    """The bytes a kept tape of :meth:`JaxChainOps.tape` holds: its distinct device buffers
    (the input x_i and the residuals of the layer's ``jax.vjp`` that are not its inputs),
    less any buffer of the output ``out`` (the next state pays for that), exact."""
    seen = {_buffer(a) for a in jax.tree_util.tree_leaves(out)}
    total = 0
    for a in jax.tree_util.tree_leaves(tape):
        key = _buffer(a)
        if key not in seen:
            seen.add(key)
            total += int(a.size) * a.dtype.itemsize
    return total


# ---------------------------------------------------------------------- the modes


def _flatten(grad: Any) -> np.ndarray:
    """A gradient tree as one float64 vector (dict keys sorted, as the autograd worker's)."""
    leaves = jax.tree_util.tree_leaves(grad)
    return np.concatenate([np.ravel(np.asarray(a, dtype=np.float64)) for a in leaves])


def _gradient_fn(case: Case, mode: Mode, wl: Any, costs: Any) -> tuple[Callable, Any]:
    """``(gradient(p) -> (loss, grads) on device, loop or None)`` for ``mode``."""
    layers = case.steps

    def value(p: Any) -> Any:
        x = p["input"]
        for i in range(layers):
            x = wl.layer(i, p["layers"][i], x)
        return wl.loss(x)

    if mode is Mode.BASELINE:
        return _Compiled(lambda p: (value(p), jax.tree_util.tree_map(jnp.zeros_like, p))), None
    if mode is Mode.NORMAL:
        return _Compiled(jax.value_and_grad(value)), None
    spec = get_strategy(case.strategy)
    if not spec.runs_chains:
        runs = [n for n in strategy_names(SPEC) if get_strategy(n).runs_chains]
        raise ValueError(
            f"strategy {spec.name} checkpoints recurrences only; a layer chain runs "
            f"{', '.join(runs)}"
        )
    if not spec.ours:  # a peer: JAX's own checkpointing, one jitted gradient
        peer = spec.load_factory(chain=True)(wl.layer, layers, case.snaps)
        return _Compiled(jax.value_and_grad(lambda p: wl.loss(peer(p["layers"], p["input"])))), None
    plan = spec.plan_for(case, costs)
    if plan is not None:
        loop = chain_checkpoint(wl.layer, layers, strategy=spec, plan=plan)
    else:
        loop = chain_checkpoint(wl.layer, layers, case.snaps, spec)

    def gradient(p: Any) -> Any:
        value, (gp, gx) = loop.value_and_grad(wl.loss, p["layers"], p["input"])
        return value, {"input": gx, "layers": gp}

    return gradient, loop


def chain_built(case: Case, mode: Mode, wl: Any, params: list, x0: Any, device: Any, costs: Any):
    """The worker's view of a chain on JAX in ``mode`` (one gradient is run before this
    returns, so every piece is compiled outside the measured iterations)."""
    fn, loop = _gradient_fn(case, mode, wl, costs)
    peer = mode is Mode.CHECKPOINTED and loop is None
    p = {"input": x0, "layers": params}
    trim_heap()
    rss0, t0 = read_rss_bytes(), clock.perf_counter()
    jax.block_until_ready(fn(p))
    compile_ns = int((clock.perf_counter() - t0) * 1e9)
    jax.clear_caches()
    trim_heap()
    program_rss = read_rss_bytes() - rss0
    # plain modes run each layer once; a peer's evaluations happen inside JAX, unseen (None)
    plain: int | None = None if peer else case.steps
    calls: list[int | None] = [plain]

    def gradient(q: Any) -> tuple[float, Any]:
        value, g = fn(q)
        jax.block_until_ready((value, g))
        # set at every call: the worker zeroes the counter before each iteration
        calls[0] = loop.stats.step_evaluations if loop is not None else plain
        return float(value), jax.tree_util.tree_map(lambda a: np.array(a, copy=True), g)

    def counters() -> dict[str, int]:
        out = {"compile_time_ns": compile_ns, "program_rss_bytes": program_rss}
        if loop is not None and loop.stats is not None:
            st = loop.stats
            out.update(
                steps_advanced=st.steps_advanced, steps_taped=st.steps_taped,
                tapes_kept=st.tapes_kept, tapes_kept_peak=st.tapes_kept_peak,
                state_bytes=st.state_bytes, tape_bytes=st.tape_bytes,
                peak_stored_bytes=st.peak_stored_bytes,
                peak_live_snapshots=st.peak_live_snapshots,
                peak_snapshot_bytes=st.peak_snapshot_bytes, dispatches=loop.dispatches,
            )  # fmt: skip
        return out

    return Built(
        params=p,
        gradient=gradient,
        calls=calls,
        counters=counters,
        flatten=_flatten,
        plan=(lambda: loop.plan.summary()) if loop is not None and loop.plan is not None else dict,
        device_meter=DevicePeakMeter(device) if device.platform != "cpu" else None,
    )
