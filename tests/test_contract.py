"""One contract for every backend and every strategy (see docs/architecture.md, "The engine").

Two levels, each parametrised over the backends:

* the **binding** (a backend whose loop is a binding of ``ckptbench.engine``): gradients of
  the parameters, the initial state *and* the inputs against the framework's plain gradient
  of the unrolled loop; step evaluations, advances, taped steps and snapshots against
  :func:`ckptbench.schedules.replay`; stored bytes against
  :func:`ckptbench.schedules.replay_bytes` and the plan's predicted peak;
* the **registry** (any backend, its own ``build_gradient`` included): the checkpointed
  mode's parameter gradient against the normal mode's, its counters against ``replay``.

Adding a backend: one line in :data:`BINDINGS` (with a small harness class) when it binds
the engine, and one line in :data:`REGISTERED` for the worker's view.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from _frameworks import needs

from ckptbench.backends import registry
from ckptbench.results.schema import Case, Mode
from ckptbench.schedules import REVOLVE, StrategySpec, make_schedule, replay, replay_bytes
from ckptbench.schedules.optimal import Costs, PlanError, plan_optimal
from ckptbench.workloads import Sizes, load_workload

SMALL = {"hidden": 5, "batch": 2, "input": 3, "output": 2}
TAPE_BYTES = 700  # declared bytes of one tape (any value: the engine counts what is declared


class AutogradHarness:
    """Plain and checkpointed gradients of params, state0 and inputs with autograd."""

    def __init__(self) -> None:
        import autograd

        from ckptbench.backends.autograd.binding import binomial_checkpoint

        self.grad, self.checkpoint = autograd.grad, binomial_checkpoint

    def problem(self, steps: int, seed: int):
        wl = load_workload("lstm", Sizes(**SMALL))
        return (wl, *wl.init(steps, np.random.default_rng(seed)))

    def state_nbytes(self, state) -> int:
        return sum(s.nbytes for s in state)

    def gradients(self, loop, wl, params, state0, inputs) -> list[np.ndarray]:
        import autograd.numpy as anp

        def loss(p, s, x):
            out = loop(p, s, x)
            return anp.sum(anp.sin(out) * np.linspace(0.5, 1.5, out.size).reshape(out.shape))

        g = self.grad(loss, (0, 1, 2))(params, state0, inputs)
        return [_flat(g[0]), _flat(g[1]), _flat(g[2])]

    def plain(self, wl, steps):
        import autograd.numpy as anp

        def loop(p, s, xs):
            outs = []
            for i in range(steps):
                s = wl.step(p, s, xs[i])
                outs.append(wl.post(p, s))
            return anp.array(outs)

        return loop


class TorchHarness:
    """The same with torch tensors (``torch.autograd.grad`` of every leaf)."""

    def __init__(self) -> None:
        import torch

        from ckptbench.backends.torch.binding import revolve_checkpoint
        from ckptbench.backends.torch.workloads import TorchLSTM

        self.torch, self.checkpoint, self.model = torch, revolve_checkpoint, TorchLSTM

    def problem(self, steps: int, seed: int):
        wl = self.model(**SMALL)
        return (wl, *wl.init(steps, np.random.default_rng(seed)))

    def state_nbytes(self, state) -> int:
        return sum(s.numel() * s.element_size() for s in state)

    def gradients(self, loop, wl, params, state0, inputs) -> list[np.ndarray]:
        torch = self.torch
        keys = sorted(params)
        leaves = [params[k] for k in keys] + list(state0) + [inputs]
        leaves = [t.detach().clone().requires_grad_() for t in leaves]
        p = dict(zip(keys, leaves[: len(keys)], strict=True))
        s = tuple(leaves[len(keys) : -1])
        out = loop(p, s, leaves[-1])
        w = torch.linspace(0.5, 1.5, out.numel(), dtype=out.dtype).reshape(out.shape)
        g = [t.detach().numpy() for t in torch.autograd.grad(torch.sum(torch.sin(out) * w), leaves)]
        n = len(keys)
        return [_flat(g[:n]), _flat(g[n:-1]), _flat(g[-1])]

    def plain(self, wl, steps):
        torch = self.torch

        def loop(p, s, xs):
            outs = []
            for i in range(steps):
                s = wl.step(p, s, xs[i])
                outs.append(wl.post(p, s))
            return torch.stack(outs)

        return loop


class TorchOneCallHarness(TorchHarness):
    """torch's one-call executor (``--executor one-call``): the same loop reversed inside
    one backward pass of autograd, the interpreter resumed from saved-tensor hooks."""

    def __init__(self) -> None:
        import functools

        super().__init__()
        self.checkpoint = functools.partial(self.checkpoint, executor="one-call")


class JaxHarness:
    """The engine-driven JAX executor (``--executor engine``): the engine dispatching compiled
    step pieces. Step evaluations are counted where they run, inside the compiled pieces
    (``jax.debug.callback``): a Python counter around ``step`` would count traces."""

    def __init__(self) -> None:
        import jax

        from ckptbench.backends.jax import require_jax
        from ckptbench.backends.jax.dispatch import engine_checkpoint
        from ckptbench.backends.jax.workloads import JaxLSTM

        require_jax()
        self.jax, self.checkpoint, self.model = jax, engine_checkpoint, JaxLSTM

    def problem(self, steps: int, seed: int):
        wl = self.model(**SMALL)
        return (wl, *wl.init(steps, np.random.default_rng(seed)))

    def state_nbytes(self, state) -> int:
        return sum(s.nbytes for s in state)

    def counting(self, step):
        calls = [0]

        def bump():
            calls[0] += 1

        def counted(p, s, x):
            self.jax.debug.callback(bump)
            return step(p, s, x)

        return counted, calls

    def gradients(self, loop, wl, params, state0, inputs) -> list[np.ndarray]:
        import jax.numpy as jnp

        def loss(out):
            w = jnp.linspace(0.5, 1.5, out.size).reshape(out.shape)
            return jnp.sum(jnp.sin(out) * w)

        if hasattr(loop, "value_and_grad"):
            _, g = loop.value_and_grad(loss, params, state0, inputs)
        else:
            g = self.jax.grad(lambda p, s, x: loss(loop(p, s, x)), (0, 1, 2))(
                params, state0, inputs
            )
        self.jax.effects_barrier()
        return [_flat(g[0]), _flat(g[1]), _flat(g[2])]

    def plain(self, wl, steps):
        import jax.numpy as jnp

        def loop(p, s, xs):
            outs = []
            for i in range(steps):
                s = wl.step(p, s, xs[i])
                outs.append(wl.post(p, s))
            return jnp.stack(outs)

        return loop


#: Backends whose checkpointed loop binds ckptbench.engine.interpreter: one line each.
BINDINGS = [
    pytest.param(AutogradHarness, id="autograd"),
    pytest.param(TorchHarness, id="torch", marks=needs("torch")),
    pytest.param(TorchOneCallHarness, id="torch-one-call", marks=needs("torch")),
    pytest.param(JaxHarness, id="jax-engine", marks=needs("jax")),
]

#: Registered backends, measured as the worker sees them: one line each.
REGISTERED = [
    pytest.param("autograd", id="autograd"),
    pytest.param("torch", id="torch", marks=needs("torch")),
    pytest.param("torch-one-call", id="torch-one-call", marks=needs("torch")),
    pytest.param("jax", id="jax", marks=needs("jax")),
    pytest.param("jax-engine", id="jax-engine", marks=needs("jax")),
]

#: (steps, snaps) for the snapshot strategies: 1 step, snaps >= steps, few and many slots.
GRID = [(1, 1), (1, 3), (2, 1), (7, 2), (7, 7), (7, 9), (40, 1), (40, 5), (40, 40)]
STRATEGIES = ["revolve", "uniform", "store-all"]


def _flat(tree) -> np.ndarray:
    if isinstance(tree, dict):
        return np.concatenate([_flat(tree[k]) for k in sorted(tree)])
    if isinstance(tree, (tuple, list)):
        return np.concatenate([_flat(v) for v in tree])
    return np.ravel(np.asarray(tree, dtype=np.float64))


def _close(got: list[np.ndarray], want: list[np.ndarray]) -> None:
    for what, g, w in zip(("params", "state0", "inputs"), got, want, strict=True):
        scale = max(np.max(np.abs(w)), 1e-300)
        assert np.max(np.abs(g - w)) <= 1e-12 * scale, what


def _counting(step, harness=None):
    if hasattr(harness, "counting"):
        return harness.counting(step)
    calls = [0]

    def counted(p, s, x):
        calls[0] += 1
        return step(p, s, x)

    return counted, calls


def _budgets(steps: int, sb: int) -> list[int]:
    """Budgets from x_0 plus one tape (Revolve with one slot) to every tape kept."""
    return [sb + TAPE_BYTES, 3 * sb + 2 * TAPE_BYTES, steps * (sb + TAPE_BYTES)]


# ---------------------------------------------------------------------- binding level


@pytest.fixture(params=BINDINGS)
def harness(request):
    return request.param()


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize(("steps", "snaps"), GRID)
def test_snapshot_strategies_keep_the_contract(harness, strategy, steps, snaps):
    wl, params, state0, inputs = harness.problem(steps, seed=steps + snaps)
    step, calls = _counting(wl.step, harness)
    loop = harness.checkpoint(step, wl.post, steps, snaps, strategy, tape_bytes=TAPE_BYTES)
    got = harness.gradients(loop, wl, params, state0, inputs)
    _close(got, harness.gradients(harness.plain(wl, steps), wl, params, state0, inputs))
    sb = harness.state_nbytes(state0)
    want = replay(make_schedule(strategy, steps, snaps), steps)
    bytes_want = replay_bytes(make_schedule(strategy, steps, snaps), steps, sb, TAPE_BYTES)
    st = loop.stats
    assert calls[0] == st.step_evaluations == want.evaluations
    assert (st.steps_advanced, st.steps_taped) == (want.advances, want.taped)
    assert st.peak_live_snapshots == want.peak_snapshots
    assert st.post_calls == steps - 1  # untaped readouts: every step but FIRSTURN's
    assert st.state_bytes == sb
    assert st.peak_stored_bytes == bytes_want.peak_bytes
    assert st.tapes_kept == st.tapes_kept_peak == 0


@pytest.mark.parametrize("budget_index", range(3))
@pytest.mark.parametrize("steps", [1, 2, 9, 40])
def test_optimal_plans_keep_the_contract(harness, steps, budget_index):
    wl, params, state0, inputs = harness.problem(steps, seed=steps)
    sb = harness.state_nbytes(state0)
    costs = Costs(forward_time_s=1.0, taped_time_s=3.0, state_bytes=sb, tape_bytes=TAPE_BYTES)
    plan = plan_optimal(costs, steps, _budgets(steps, sb)[budget_index])
    step, calls = _counting(wl.step, harness)
    loop = harness.checkpoint(step, wl.post, steps, plan=plan)
    got = harness.gradients(loop, wl, params, state0, inputs)
    _close(got, harness.gradients(harness.plain(wl, steps), wl, params, state0, inputs))
    p, st = plan.prediction, loop.stats
    assert calls[0] == st.step_evaluations == p.advances + steps
    assert (st.tapes_kept, st.tapes_kept_peak) == (p.tapes_kept, p.peak_tapes)
    assert st.peak_live_snapshots == p.peak_snapshots
    assert st.peak_stored_bytes == plan.peak_bytes <= plan.budget_bytes
    assert st.strategy == "optimal" and st.tape_bytes == TAPE_BYTES


def test_a_budget_below_one_state_is_a_clear_error(harness):
    wl, _, state0, _ = harness.problem(5, seed=0)
    sb = harness.state_nbytes(state0)
    costs = Costs(forward_time_s=1.0, taped_time_s=3.0, state_bytes=sb, tape_bytes=TAPE_BYTES)
    no_plan = r"no schedule of 5 steps fits in a budget of \d+ B"
    with pytest.raises(PlanError, match=no_plan) as info:
        harness.checkpoint(wl.step, wl.post, 5, costs=costs, budget_bytes=sb - 1)
    assert "\n" not in str(info.value)


def test_a_second_reverse_of_one_call_replays_the_first_sweep(harness):
    """Jacobians call the vjp once per output: every reverse after the first re-runs the
    first sweep (no outputs) and gives the same cotangents."""
    wl, params, state0, inputs = harness.problem(9, seed=1)
    sb = harness.state_nbytes(state0)
    costs = Costs(forward_time_s=1.0, taped_time_s=3.0, state_bytes=sb, tape_bytes=TAPE_BYTES)
    loop = harness.checkpoint(wl.step, wl.post, 9, costs=costs, budget_bytes=2 * sb + 3 * 700)
    assert loop.plan.prediction.tapes_kept > 0
    first = harness.gradients(loop, wl, params, state0, inputs)
    again = harness.gradients(loop, wl, params, state0, inputs)
    for a, b in zip(first, again, strict=True):
        np.testing.assert_array_equal(a, b)


def _variant(stream) -> StrategySpec:
    """Revolve with its stream changed (a strategy is its spec: nothing to patch)."""
    return dataclasses.replace(REVOLVE, name="variant", stream=stream, closed_form=None)


def test_an_unknown_action_is_one_error_on_every_backend(harness):
    from ckptbench.engine import interpreter as engine
    from ckptbench.schedules import Action

    def with_new_kind(steps, snaps):
        actions = list(make_schedule(REVOLVE, steps, snaps))
        return iter([*actions[:-1], Action("keep-tape", None, None, None, 0), actions[-1]])

    wl, params, state0, inputs = harness.problem(3, seed=0)
    loop = harness.checkpoint(wl.step, wl.post, 3, 2, _variant(with_new_kind))
    with pytest.raises(engine.UnknownActionError, match=r"engine cannot run action 'keep-tape'"):
        harness.gradients(loop, wl, params, state0, inputs)


def test_a_restore_of_the_wrong_step_is_refused(harness):
    from ckptbench.schedules import Action, ActionKind

    def wrong_restore(steps, snaps):
        for act in make_schedule(REVOLVE, steps, snaps):
            if act.kind is ActionKind.RESTORE:
                act = Action(ActionKind.RESTORE, slot=act.slot, step=act.step + 1)
            yield act

    wl, params, state0, inputs = harness.problem(6, seed=0)
    loop = harness.checkpoint(wl.step, wl.post, 6, 2, _variant(wrong_restore))
    with pytest.raises(RuntimeError, match=r"RESTORE of x_\d+: slot \d+ holds \d+"):
        harness.gradients(loop, wl, params, state0, inputs)


# ---------------------------------------------------------------------- registry level


def _case(backend: str, strategy: str, steps: int, snaps: int, budget: int | None = None):
    executor = None
    if backend == "jax-engine":  # JAX's engine-driven executor (--executor engine)
        backend, executor = "jax", "engine"
    elif backend == "torch-one-call":  # torch's one-backward executor (--executor one-call)
        backend, executor = "torch", "one-call"
    return Case(
        executor=executor,
        model="lstm",
        steps=steps,
        snaps=snaps,
        strategy=strategy,
        backend=backend,
        budget_bytes=budget,
        seed=steps,
        **SMALL,
    )


@pytest.mark.parametrize("backend", REGISTERED)
@pytest.mark.parametrize(
    ("strategy", "steps", "snaps"),
    [("revolve", 1, 1), ("revolve", 30, 4), ("uniform", 30, 5), ("store-all", 8, 8)],
)
def test_registered_backends_agree_with_their_normal_mode(backend, strategy, steps, snaps):
    case = _case(backend, strategy, steps, snaps)
    normal = registry.build(case, Mode.NORMAL)
    ckpt = registry.build(case, Mode.CHECKPOINTED)
    want = normal.flatten(normal.gradient(normal.params)[1])
    ckpt.calls[0] = 0
    got = ckpt.flatten(ckpt.gradient(ckpt.params)[1])
    assert np.max(np.abs(got - want)) <= 1e-12 * np.max(np.abs(want))
    counters = ckpt.counters()
    rep = replay(make_schedule(strategy, steps, snaps), steps)
    assert ckpt.calls[0] == rep.evaluations == counters["steps_advanced"] + counters["steps_taped"]
    assert counters["peak_live_snapshots"] == rep.peak_snapshots


@pytest.mark.parametrize("backend", REGISTERED)
def test_registered_backends_run_optimal_plans_from_their_own_costs(backend):
    """Costs measured on the backend that runs the plan; stored bytes equal the plan's."""
    case = _case(backend, "optimal", 24, 1, budget=1)
    doc = registry.measure_costs(case)
    costs = Costs.from_dict(doc["costs"])
    budget = 3 * costs.state_bytes + 4 * costs.tape_bytes
    case = _case(backend, "optimal", 24, 1, budget=budget)
    ckpt = registry.build(case, Mode.CHECKPOINTED, doc["costs"])
    normal = registry.build(case, Mode.NORMAL)
    want = normal.flatten(normal.gradient(normal.params)[1])
    got = ckpt.flatten(ckpt.gradient(ckpt.params)[1])
    assert np.max(np.abs(got - want)) <= 1e-12 * np.max(np.abs(want))
    plan = ckpt.plan()
    assert ckpt.counters()["peak_stored_bytes"] == plan["peak_bytes"] <= budget
    assert ckpt.counters()["tapes_kept"] == plan["tapes_kept"] > 0


def test_every_registered_backend_says_why_it_is_unavailable(monkeypatch):
    spec = registry.BackendSpec(name="nowhere", module="nowhere", requires=("no_such_pkg_x",))
    assert "needs no_such_pkg_x" in spec.available()
    with pytest.raises(registry.BackendUnavailableError, match="needs no_such_pkg_x"):
        spec.load()
    with pytest.raises(ValueError, match="unknown backend 'nowhere'"):
        registry.spec("nowhere")
    assert {"autograd", "torch"} <= set(registry.backend_names())


@pytest.mark.parametrize("backend", REGISTERED)
def test_a_strategy_set_by_snaps_declares_the_tape_its_backend_counts(backend):
    """Revolve's stored bytes are its snapshots and the tape being reversed, as `replay_bytes`
    counts them with the tape the backend counts: JAX its vjp residuals, torch its saved
    tensors (the planner's tape for an optimal plan, ``tape_method`` saved-tensors; torch
    declared none before 2026-11-29 evening, so its Revolve stored its states alone);
    autograd counts none (it measures a slope) and declares none."""
    case = _case(backend, "revolve", 12, 3)
    ckpt = registry.build(case, Mode.CHECKPOINTED)
    ckpt.gradient(ckpt.params)
    got = ckpt.counters()
    tape = got["tape_bytes"]
    if backend.startswith(("torch", "jax")):
        assert tape > 0
    if backend.startswith("torch"):
        costs = registry.measure_costs(_case(backend, "optimal", 12, 1, budget=1))
        assert costs["costs"]["tape_bytes"] == tape  # the planner's count of one tape
    if backend == "autograd":
        assert tape == 0
    want = replay_bytes(make_schedule("revolve", 12, 3), 12, [got["state_bytes"]] * 12, tape)
    assert got["peak_stored_bytes"] == want.peak_bytes
