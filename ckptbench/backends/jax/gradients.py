"""The three modes of a case on the JAX backend, compiled ahead of time.

It returns a :class:`ckptbench.backends.Built`, as the other backends do: ``gradient(params)``
returns ``(loss: float, grad)`` where ``grad`` has the structure of ``params`` (numpy
arrays: the JAX result buffers are copied and deleted at once, so no iteration's peak holds
the previous one's buffers, which JAX would otherwise free a moment later); ``flatten`` gives
the float64 vector of the autograd worker's order (dict keys sorted); ``calls[0]`` is the
step evaluations of the last call, read from counters measured inside the compiled loops
(a Python counter around ``step`` would only count traces).

Modes (see docs/architecture.md, "The JAX backend"):

* ``baseline`` — the jitted forward ``lax.scan``, zero gradients: the floor;
* ``normal`` — ``jax.value_and_grad`` of the same scan, jitted: every step's residuals kept;
* ``checkpointed`` — ``revolve``, ``uniform``, ``store-all`` and ``optimal`` (a budget plan,
  ``schedules.optimal.planner``) run by :func:`ckptbench.backends.jax.binding.compiled_checkpoint`;
  ``jax-checkpoint`` and ``equinox`` are JAX's own (:mod:`ckptbench.backends.jax.peers`).

Every gradient is compiled in :func:`make_built` (``jit(...).lower(...).compile()``), before
the worker reports ``ready``: compile time never falls in an iteration's time or peak. It is
reported as the counter ``compile_time_ns``, beside ``xla_temp_bytes`` (XLA's compile-time
``memory_analysis()`` temp bytes, a second view of memory) and ``program_rss_bytes``: the
resident memory that tracing and compiling the mode left behind, the compiler's one-time
start-up included (RSS after minus before, each after ``malloc_trim``). Not the same in
every mode: what compiling leaves in the glibc arenas of XLA's compile threads grows with
the program (an 8-wide LSTM of 200 steps: baseline 18 MiB, normal 27, Revolve 36), and no
miniature compiled first removes it (docs/measuring.md). It is part of every iteration's
peak, as it is of a user's process, and at these sizes it is most of a checkpointed mode's
overhead: LSTM, 1000 steps, the baseline's forward scan 13-18 MiB, the executor running
Revolve(1000, 31) 33 MiB, equinox's loop 42 MiB.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ckptbench.backends import Built, registry
from ckptbench.backends.jax import SPEC
from ckptbench.backends.jax.binding import COUNTERS, compiled_checkpoint, tape_layout
from ckptbench.backends.jax.chain import chain_built
from ckptbench.backends.jax.device import DevicePeakMeter, resolve_device
from ckptbench.backends.jax.table import encode
from ckptbench.backends.jax.workloads import load_jax_workload
from ckptbench.backends.modes import as_mode
from ckptbench.engine import clock
from ckptbench.measure.peaks import read_rss_bytes, trim_heap
from ckptbench.results.modes import Mode
from ckptbench.schedules import get_strategy, replay_bytes
from ckptbench.workloads import Sizes
from ckptbench.workloads.chain import check_chain_init, is_chain

if TYPE_CHECKING:
    from ckptbench.results.schema import Case

__all__ = ["flatten_gradient", "make_built", "plain_scan", "schedules", "strategies"]


def strategies() -> tuple[str, ...]:
    """Checkpointed-mode strategies of the JAX backend (ours and its peers), read from the
    strategy registry when asked (a strategy registered later is seen)."""
    return registry.strategies(SPEC.name)


def schedules() -> tuple[str, ...]:
    """The strategies the compiled executor runs: our action streams."""
    return tuple(s for s in strategies() if get_strategy(s).ours)


def flatten_gradient(grad: Any) -> np.ndarray:
    """A gradient tree as one float64 numpy vector, in the autograd worker's order."""
    leaves = jax.tree_util.tree_leaves(grad)  # dict keys sorted, as the worker's flatten
    if not leaves:
        return np.zeros(0)
    return np.concatenate([np.ravel(np.asarray(leaf, dtype=np.float64)) for leaf in leaves])


def plain_scan(step: Any, post: Any) -> Any:
    """``loop(params, state0, inputs) -> (outputs, evaluations)``: the plain ``lax.scan``
    with a step counter carried through it."""

    def loop(p: Any, s0: Any, xs: Any) -> tuple[Any, Any]:
        def body(c: Any, x: Any) -> tuple[Any, Any]:
            s, n = c
            s = step(p, s, x)
            return (s, n + 1), post(p, s)

        (_, n), ys = lax.scan(body, (s0, jnp.int32(0)), xs)
        return ys, n

    return loop


def _to_numpy(tree: Any) -> Any:
    """Host copies of a tree's JAX arrays; the device buffers are deleted at once."""

    def copy(leaf: Any) -> Any:
        out = np.array(leaf, copy=True)
        if isinstance(leaf, jax.Array):
            leaf.delete()
        return out

    return jax.tree_util.tree_map(copy, tree)


def _tree_nbytes(tree: Any) -> int:
    return sum(int(leaf.size) * leaf.dtype.itemsize for leaf in jax.tree_util.tree_leaves(tree))


def _schedule(case: Case, steps: int, costs: dict[str, Any] | None):
    """The action list of a schedule strategy, and the plan it made (a planned one only)."""
    spec = get_strategy(case.strategy)
    plan = spec.plan_for(case, costs)
    return list(spec.actions_for(_Clamped(steps, min(case.snaps, steps)), plan)), plan


class _Clamped(NamedTuple):
    """The steps and snaps a stream is made for (snaps clamped to the steps)."""

    steps: int
    snaps: int


def make_built(case: Case, mode: Any, costs: dict[str, Any] | None = None) -> Built:
    """Build and compile the gradient of ``case`` in ``mode`` (see the module docstring)."""
    name = as_mode(mode)
    spec = _checked_strategy(case, name)
    device = resolve_device(case.device)
    wl, params, state0, inputs = _problem(case, device)
    if is_chain(wl):
        return _chain(case, name, spec, wl, (params, state0), device, costs)
    info: dict[str, Any] = {}
    plan = None
    if name is not Mode.CHECKPOINTED:
        fn = _plain_fn(wl, differentiate=name is Mode.NORMAL)
    elif not spec.ours:
        loop = spec.load_factory()(wl.step, wl.post, case.steps, case.snaps)

        def fn(p, s0, xs):  # step evaluations: not measured (None), never a made-up 0
            loss, g = jax.value_and_grad(lambda q: wl.loss(loop(q, s0, xs)))(p)
            return loss, g, jnp.int32(-1)

    else:
        # abstractly: ``inputs[0]`` would run an eager XLA op, and the compiler's start-up
        # (about 19 MiB resident) would fall outside ``program_rss_bytes`` here only
        x_spec = jax.ShapeDtypeStruct(inputs.shape[1:], inputs.dtype)
        layout = tape_layout(wl.step, wl.post, params, state0, x_spec)
        actions, plan = _schedule(case, case.steps, costs)
        if _executor(case) == "engine":
            return _engine_built(case, wl, params, state0, inputs, layout, plan, device)
        fn, info = _compiled_fn(wl, actions, case.steps, layout, _tree_nbytes(state0))

    (compiled, temp), compile_ns, program_rss = _compiling(
        lambda: _with_temp_bytes(jax.jit(fn).lower(params, state0, inputs).compile())
    )
    gradient, calls, counters = _compiled_gradient(compiled, state0, inputs)

    def counters_now() -> dict[str, int]:
        out = {**counters, **info, "compile_time_ns": compile_ns, "program_rss_bytes": program_rss}
        if temp is not None:
            out["xla_temp_bytes"] = temp
        return out

    return _built(params, gradient, calls, counters_now, plan, device)


def _checked_strategy(case: Case, mode: Mode) -> Any:
    """The case's strategy spec, refused in one line where a checkpointed mode cannot run it
    here; the packages it needs imported (in every mode of a cell)."""
    strategy = getattr(case, "strategy", "revolve")
    if mode is Mode.CHECKPOINTED:
        registry.check_strategy(SPEC.name, strategy)
    spec = get_strategy(strategy)
    for package in spec.requires:
        # every mode of a cell imports what its checkpointed mode needs (equinox: about
        # 8.5 MiB resident), so the overhead over the baseline is differentiation, not imports
        importlib.import_module(package)
    return spec


def _problem(case: Case, device: Any) -> tuple[Any, Any, Any, Any]:
    """The case's workload and its ``(params, state0, inputs)`` on ``device`` (a layer
    chain's: ``(params per layer, x0, None)``)."""
    sizes = Sizes(hidden=case.hidden, batch=case.batch, input=case.input, output=case.output)
    wl = load_jax_workload(case.model, sizes, getattr(case, "dtype", "float64") or "float64")
    rng = np.random.default_rng(case.seed)
    if is_chain(wl):
        params, x0 = check_chain_init(wl.init(case.steps, rng), case.steps, wl.init)
        return (wl, *jax.device_put((params, x0), device), None)
    params, state0, inputs = jax.device_put(wl.init(case.steps, rng), device)
    return wl, params, state0, inputs


def _chain(case: Case, mode: Mode, spec: Any, wl: Any, drawn: tuple, device: Any, costs: Any):
    """A layer chain (:mod:`ckptbench.backends.jax.chain`): ours run by the engine-driven
    executor, whose per-layer pieces hold states of any shape."""
    if spec.ours and _executor(case) != "engine":
        raise ValueError(
            f"--model {case.model}: a layer chain's states change shape, which the compiled "
            "executor's one snapshot buffer cannot hold; run it with --executor engine"
        )
    return chain_built(case, mode, wl, *drawn, device, costs)


def _plain_fn(wl: Any, differentiate: bool) -> Any:
    """``fn(p, s0, xs) -> (loss, gradient, evaluations)`` of the plain scan: the normal
    mode's gradient, or the baseline's zeros without differentiating."""
    plain = plain_scan(wl.step, wl.post)

    def value(p, s0, xs):
        ys, n = plain(p, s0, xs)
        return wl.loss(ys), n

    if differentiate:

        def fn(p, s0, xs):
            (loss, n), g = jax.value_and_grad(value, has_aux=True)(p, s0, xs)
            return loss, g, n

        return fn

    def baseline(p, s0, xs):
        loss, n = value(p, s0, xs)
        return loss, jax.tree_util.tree_map(jnp.zeros_like, p), n

    return baseline


def _compiled_fn(
    wl: Any, actions: list, steps: int, layout: Any, state_bytes: int
) -> tuple[Any, dict[str, Any]]:
    """``fn`` of the compiled executor running ``actions`` (its counters leave the backward
    pass as the cotangent of a probe), and the stored bytes that stream declares."""
    table = encode(actions, steps)
    loop = compiled_checkpoint(wl.step, wl.post, table, layout)
    sb, tb = state_bytes, layout.tape_bytes
    stored = replay_bytes(actions, steps, sb, tb)
    info = dict(
        state_bytes=sb,
        tape_bytes=tb,
        peak_stored_bytes=stored.peak_bytes,
        peak_live_snapshots=stored.stats.peak_snapshots,
        peak_snapshot_bytes=stored.stats.peak_snapshots * sb,
        tapes_kept_peak=stored.stats.peak_tapes,
        table_rows=table.n_rows,
    )

    def fn(p, s0, xs):
        zero = jnp.zeros(len(COUNTERS), jnp.float64)
        loss, (g, n) = jax.value_and_grad(lambda q, c: wl.loss(loop(q, s0, xs, c)), argnums=(0, 1))(
            p, zero
        )
        return loss, g, n.astype(jnp.int64)

    return fn, info


def _compiling(make: Any) -> tuple[Any, int, int]:
    """``make()`` (tracing and compiling), its time in ns and the resident memory it left
    behind: RSS after minus before, each after ``malloc_trim``, JAX's tracing and lowering
    caches cleared (about 12 MiB for the executor; the executables are kept)."""
    trim_heap()
    rss0 = read_rss_bytes()
    t0 = clock.perf_counter()
    out = make()
    compile_ns = int((clock.perf_counter() - t0) * 1e9)
    jax.clear_caches()
    trim_heap()
    return out, compile_ns, read_rss_bytes() - rss0


def _compiled_gradient(compiled: Any, state0: Any, inputs: Any) -> tuple[Any, list, dict]:
    """``gradient(p) -> (loss, numpy gradient)`` of a compiled ``fn``, the step evaluations
    of its last call (``calls``) and the executor's counters (filled by each call)."""
    counters: dict[str, int] = {}
    calls: list = [0]

    def record(n: Any) -> None:
        if isinstance(n, list):  # the executor's counters
            got = dict(zip(COUNTERS, (int(v) for v in n), strict=True))
            counters.clear()
            counters.update(got)
            calls[0] = got["steps_advanced"] + got["steps_taped"]
        elif n >= 0:  # the plain scan's step counter
            calls[0] = int(n)
        else:  # a peer: its recomputations happen inside JAX's own transpose, unseen
            calls[0] = None

    def gradient(p):
        loss, g, n = compiled(p, state0, inputs)
        jax.block_until_ready((loss, g, n))
        n_host = np.asarray(n).tolist()
        loss_host = float(loss)
        for arr in (loss, n):
            arr.delete()
        record(n_host)
        return loss_host, _to_numpy(g)

    return gradient, calls, counters


def _built(params: Any, gradient: Any, calls: list, counters: Any, plan: Any, device: Any) -> Built:
    """What the worker measures, the same for both executors."""
    return Built(
        params=params,
        gradient=gradient,
        calls=calls,
        counters=counters,
        flatten=flatten_gradient,
        plan=(lambda: plan.summary()) if plan is not None else dict,
        device_meter=DevicePeakMeter(device) if device.platform != "cpu" else None,
    )


def _executor(case: Case) -> str:
    used = getattr(case, "executor_used", None)
    return used if isinstance(used, str) else "compiled"


def _engine_built(
    case: Case, wl: Any, params: Any, state0: Any, inputs: Any, layout: Any, plan: Any, device: Any
) -> Built:
    """``--executor engine``: the shared interpreter dispatching compiled step pieces
    (:mod:`ckptbench.backends.jax.dispatch`). One gradient is run here, before ``ready``, so
    every piece the schedule needs is compiled outside the measured iterations."""
    from ckptbench.backends.jax.dispatch import engine_checkpoint

    steps = case.steps
    if plan is not None:
        loop = engine_checkpoint(wl.step, wl.post, steps, plan=plan, layout=layout)
    else:
        loop = engine_checkpoint(
            wl.step, wl.post, steps, min(case.snaps, steps), case.strategy,
            tape_bytes=layout.tape_bytes, layout=layout,
        )  # fmt: skip
    counters: dict[str, int] = {}
    calls = [0]

    def run(p: Any) -> tuple[Any, Any]:
        loss, (g, _, _) = loop.value_and_grad(wl.loss, p, state0, inputs, inputs_grad=False)
        return loss, g

    # compiles every piece this schedule dispatches; the pieces are compiled ahead of time
    # (dispatch._Aot): clearing JAX's tracing and lowering caches keeps their executables
    _, compile_ns, program_rss = _compiling(lambda: jax.block_until_ready(run(params)))

    def gradient(p: Any) -> tuple[float, Any]:
        loss, g = run(p)
        jax.block_until_ready((loss, g))
        loss_host = float(loss)
        loss.delete()
        st = loop.stats
        counters.clear()
        counters.update(
            steps_advanced=st.steps_advanced,
            steps_taped=st.steps_taped,
            post_calls=st.post_calls,
            tapes_kept=st.tapes_kept,
            dispatches=loop.dispatches,
        )
        calls[0] = st.step_evaluations
        return loss_host, _to_numpy(g)

    def counters_now() -> dict[str, int]:
        st = loop.stats
        return {
            **counters,
            "state_bytes": st.state_bytes,
            "tape_bytes": st.tape_bytes,
            "peak_stored_bytes": st.peak_stored_bytes,
            "peak_live_snapshots": st.peak_live_snapshots,
            "peak_snapshot_bytes": st.peak_snapshot_bytes,
            "tapes_kept_peak": st.tapes_kept_peak,
            "compile_time_ns": compile_ns,
            **loop.fused_counters(),
            "program_rss_bytes": program_rss,
        }

    return _built(params, gradient, calls, counters_now, plan, device)


def _with_temp_bytes(compiled: Any) -> tuple[Any, int | None]:
    """A compiled executable and XLA's temp bytes for it (read before the caches go)."""
    return compiled, _temp_bytes(compiled)


def _temp_bytes(compiled: Any) -> int | None:
    try:
        stats = compiled.memory_analysis()
    except Exception:  # some platforms have none
        return None
    temp = getattr(stats, "temp_size_in_bytes", None)
    return int(temp) if temp is not None else None
