"""The contract for layer chains (issue 23, item 1), on every backend that binds the engine.

A chain runs ``x_{i+1} = layer(i, params[i], x_i)`` and measures ``d loss(x_L) / d(every
layer's parameters, x_0)`` (:mod:`ckptbench.workloads.chain`). For the built-in stacks
(``mlp-stack``'s state changes its shape at every layer, ``cnn-stack``'s states and tapes
are strongly uneven, ``transformer-stack`` has an embedding and a head around its blocks):

* the gradients of every layer's parameters and of x_0 equal the plain gradient (1e-12);
* layer evaluations, advances, taped layers and live snapshots equal
  :func:`ckptbench.schedules.replay`'s; ``peak_stored_bytes`` equals
  :func:`ckptbench.schedules.replay_bytes` with each state's own bytes, and an optimal plan
  from per-layer costs runs with exactly its predicted stored bytes;
* the three backends give one loss and one gradient (float64, 1e-12), through the registry
  as the worker builds them; finite differences agree with autograd's chain gradient.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import itertools
import math

import numpy as np
import pytest

from ckptbench.backends import registry
from ckptbench.results.schema import Case, Mode
from ckptbench.schedules import get_strategy, make_schedule, replay, replay_bytes
from ckptbench.schedules.optimal import Costs, plan_optimal
from ckptbench.workloads import BUILTIN_CHAINS, Sizes, WorkloadError, load_workload

TINY = {"hidden": 8, "batch": 2, "input": 8, "output": 3}
STACKS = ["mlp-stack", "cnn-stack", "transformer-stack"]
#: (layers, snaps, strategy)
GRID = [(2, 1, "revolve"), (7, 1, "revolve"), (7, 3, "revolve"), (9, 3, "uniform"),
        (7, 7, "store-all"), (5, 9, "revolve")]  # fmt: skip


def _installed(package: str):
    return pytest.mark.skipif(
        importlib.util.find_spec(package) is None, reason=f"{package} is not installed"
    )


def _flat(tree) -> np.ndarray:
    if isinstance(tree, dict):
        return np.concatenate([_flat(tree[k]) for k in sorted(tree)] or [np.zeros(0)])
    if isinstance(tree, tuple | list):
        return np.concatenate([_flat(v) for v in tree] or [np.zeros(0)])
    if hasattr(tree, "detach"):
        tree = tree.detach().numpy()
    return np.ravel(np.asarray(tree, dtype=np.float64))


def _close(got, want, what: str) -> None:
    scale = max(np.max(np.abs(want)), 1e-300)
    assert np.max(np.abs(got - want)) <= 1e-12 * scale, what


def _state_bytes(name: str, layers: int) -> list[int]:
    """The bytes of x_0 .. x_{L-1} (float64), from the stack's declared shapes."""
    wl = load_workload(name, Sizes(**TINY))
    return [8 * math.prod(spec.in_shape) for spec in wl.specs(layers)]


def _counted(layer, harness=None):
    if hasattr(harness, "counted"):
        return harness.counted(layer)
    calls = [0]

    def counted(i, p, x):
        calls[0] += 1
        return layer(i, p, x)

    return counted, calls


class AutogradChains:
    def __init__(self) -> None:
        import autograd

        from ckptbench.backends.autograd.chain import chain_checkpoint

        self.autograd, self.checkpoint = autograd, chain_checkpoint

    def problem(self, name: str, layers: int, seed: int):
        wl = load_workload(name, Sizes(**TINY))
        return (wl, *wl.init(layers, np.random.default_rng(seed)))

    def gradients(self, wl, layer, loop, params, x0):
        def loss(p, x):
            if loop is not None:
                return wl.loss(loop(p, x))
            for i in range(len(p)):
                x = layer(i, p[i], x)
            return wl.loss(x)

        value, (gp, gx) = self.autograd.value_and_grad(loss, (0, 1))(params, x0)
        return float(value), _flat(gp), _flat(gx)


class TorchChains:
    def __init__(self) -> None:
        import torch

        from ckptbench.backends.torch.chain import chain_checkpoint
        from ckptbench.backends.torch.layers import TORCH_STACKS

        self.torch, self.checkpoint, self.stacks = torch, chain_checkpoint, TORCH_STACKS

    def problem(self, name: str, layers: int, seed: int):
        wl = self.stacks[name](**TINY)
        return (wl, *wl.init(layers, np.random.default_rng(seed)))

    def gradients(self, wl, layer, loop, params, x0):
        torch = self.torch
        params = [{k: v.detach().clone().requires_grad_() for k, v in p.items()} for p in params]
        x0 = x0.detach().clone().requires_grad_()
        if loop is not None:
            out = loop(params, x0)
        else:
            out = x0
            for i in range(len(params)):
                out = layer(i, params[i], out)
        value = wl.loss(out)
        leaves = [p[k] for p in params for k in sorted(p)]
        grads = torch.autograd.grad(value, [*leaves, x0])
        return float(value.detach()), _flat(list(grads[:-1])), _flat(grads[-1])


class JaxChains:
    """The engine-driven JAX chain; layer evaluations are counted where they run, inside the
    compiled pieces (``jax.debug.callback``): a Python counter would count traces."""

    def __init__(self) -> None:
        from ckptbench.backends.jax import require_jax

        self.jax = require_jax()
        from ckptbench.backends.jax.chain import chain_checkpoint
        from ckptbench.workloads.registry import factory

        self.checkpoint, self.factory = chain_checkpoint, factory

    def problem(self, name: str, layers: int, seed: int):
        wl = self.factory(name, "jax")(**TINY)
        return (wl, *wl.init(layers, np.random.default_rng(seed)))

    def counted(self, layer):
        calls = [0]

        def bump():
            calls[0] += 1

        def counted(i, p, x):
            self.jax.debug.callback(bump)
            return layer(i, p, x)

        return counted, calls

    def gradients(self, wl, layer, loop, params, x0):
        jax = self.jax
        if loop is not None:
            value, (gp, gx) = loop.value_and_grad(wl.loss, params, x0)
            jax.effects_barrier()
            return float(value), _flat(list(gp)), _flat(gx)

        def loss(p, x):
            for i in range(len(p)):
                x = layer(i, p[i], x)
            return wl.loss(x)

        value, (gp, gx) = jax.value_and_grad(loss, (0, 1))(params, x0)
        return float(value), _flat(list(gp)), _flat(gx)


#: Backends whose chain binds the engine: one line each.
BINDINGS = [
    pytest.param(AutogradChains, id="autograd"),
    pytest.param(TorchChains, id="torch", marks=[pytest.mark.torch, _installed("torch")]),
    pytest.param(JaxChains, id="jax-engine", marks=[pytest.mark.jax, _installed("jax")]),
]


@pytest.fixture(params=BINDINGS)
def harness(request):
    return request.param()


@pytest.mark.parametrize("name", STACKS)
@pytest.mark.parametrize(("layers", "snaps", "strategy"), GRID)
def test_chains_keep_the_contract(harness, name, layers, snaps, strategy):
    if layers < 2 and name == "transformer-stack":
        pytest.skip("an embedding and a head at least")
    wl, params, x0 = harness.problem(name, layers, seed=layers + snaps)
    layer, calls = _counted(wl.layer, harness)
    loop = harness.checkpoint(layer, layers, snaps, strategy)
    value, gp, gx = harness.gradients(wl, layer, loop, params, x0)
    want_value, want_p, want_x = harness.gradients(wl, wl.layer, None, params, x0)
    assert value == pytest.approx(want_value, rel=1e-13)
    _close(gp, want_p, "every layer's parameters")
    _close(gx, want_x, "x0")
    rep = replay(make_schedule(strategy, layers, snaps), layers)
    sb = _state_bytes(name, layers)
    stored = replay_bytes(make_schedule(strategy, layers, snaps), layers, sb, 0)
    st = loop.stats
    assert calls[0] == st.step_evaluations == rep.evaluations
    assert (st.steps_advanced, st.steps_taped) == (rep.advances, rep.taped)
    assert st.peak_live_snapshots == rep.peak_snapshots
    assert st.post_calls == 0  # a chain has no readouts
    assert st.state_bytes == sb[0]
    assert st.peak_stored_bytes == stored.peak_bytes
    assert st.peak_snapshot_bytes == stored.peak_state_bytes


def test_the_mlp_stack_changes_its_state_shape_at_every_layer():
    wl = load_workload("mlp-stack", Sizes(**TINY))
    shapes = [spec.in_shape for spec in wl.specs(12)] + [wl.specs(12)[-1].out_shape]
    assert all(a != b for a, b in itertools.pairwise(shapes))
    assert len(set(_state_bytes("cnn-stack", 12))) > 2  # uneven states


@pytest.mark.parametrize("name", STACKS)
@pytest.mark.parametrize("budget_index", range(3))
def test_optimal_plans_from_per_layer_costs_run_with_their_predicted_bytes(
    harness, name, budget_index
):
    layers = 9
    wl, params, x0 = harness.problem(name, layers, seed=3)
    sb = _state_bytes(name, layers)
    tb = [3 * b + 100 * i for i, b in enumerate(sb)]  # uneven declared tapes
    costs = Costs(
        forward_time_s=tuple(1.0 + i % 3 for i in range(layers)),
        taped_time_s=tuple(3.0 + i % 2 for i in range(layers)),
        state_bytes=tuple(sb),
        tape_bytes=tuple(tb),
    )
    budget = [sb[0] + max(tb) + max(sb), 3 * max(sb) + 2 * max(tb), sum(sb) + sum(tb)]
    plan = plan_optimal(costs, layers, budget[budget_index])
    layer, calls = _counted(wl.layer, harness)
    loop = harness.checkpoint(layer, layers, plan=plan)
    _, gp, gx = harness.gradients(wl, layer, loop, params, x0)
    _, want_p, want_x = harness.gradients(wl, wl.layer, None, params, x0)
    _close(gp, want_p, "every layer's parameters")
    _close(gx, want_x, "x0")
    st, p = loop.stats, plan.prediction
    assert calls[0] == st.step_evaluations == p.advances + layers
    assert (st.tapes_kept, st.tapes_kept_peak) == (p.tapes_kept, p.peak_tapes)
    assert st.peak_stored_bytes == plan.peak_bytes <= plan.budget_bytes
    assert st.peak_stored_bytes == replay_bytes(plan.actions(), layers, sb, tb).peak_bytes


def test_autograd_chain_gradient_matches_finite_differences():
    import autograd

    from ckptbench.backends.autograd.chain import chain_checkpoint

    wl = load_workload("mlp-stack", Sizes(hidden=4, batch=2, input=3, output=2))
    params, x0 = wl.init(4, np.random.default_rng(7))
    loop = chain_checkpoint(wl.layer, 4, 2, "revolve")
    gp, gx = autograd.grad(lambda p, x: wl.loss(loop(p, x)), (0, 1))(params, x0)
    rng = np.random.default_rng(8)
    dp = [{k: rng.standard_normal(v.shape) for k, v in p.items()} for p in params]
    dx = rng.standard_normal(x0.shape)
    eps = 1e-6

    def at(t):
        p = [{k: v + t * d[k] for k, v in q.items()} for q, d in zip(params, dp, strict=True)]
        x = x0 + t * dx
        for i in range(4):
            x = wl.layer(i, p[i], x)
        return wl.loss(x)

    fd = (at(eps) - at(-eps)) / (2 * eps)
    ad = np.dot(_flat(gp), _flat(dp)) + np.sum(gx * dx)
    assert abs(ad) > 1e-4
    assert abs(ad - fd) <= 1e-7 * abs(ad)


# ---------------------------------------------------------------------- registry level

REGISTERED = [
    pytest.param("autograd", id="autograd"),
    pytest.param("torch", id="torch", marks=[pytest.mark.torch, _installed("torch")]),
    pytest.param("jax-engine", id="jax-engine", marks=[pytest.mark.jax, _installed("jax")]),
]


def _case(backend: str, name: str, strategy: str = "revolve", steps: int = 7, snaps: int = 3):
    executor = None
    if backend == "jax-engine":  # JAX's engine-driven executor (--executor engine)
        backend, executor = "jax", "engine"
    return Case(model=name, steps=steps, snaps=snaps, strategy=strategy, backend=backend,
                executor=executor, seed=5, **TINY)  # fmt: skip


@pytest.mark.parametrize("name", STACKS)
def test_every_backend_gives_one_loss_and_one_gradient(name):
    """The same chain on every installed backend, as the worker builds it: baseline, normal
    and checkpointed agree, and so do the backends (float64, 1e-12)."""
    results = {}
    for param in REGISTERED:
        backend = param.values[0]
        case = _case(backend, name)
        if registry.spec(case.backend).available() is not None:
            continue
        modes = {m: registry.build(case, m) for m in Mode}
        got = {m: (b.gradient(b.params), b) for m, b in modes.items()}
        (loss, grad), normal = got[Mode.NORMAL]
        (c_loss, c_grad), ckpt = got[Mode.CHECKPOINTED]
        assert got[Mode.BASELINE][0][0] == pytest.approx(loss, rel=1e-13)
        assert c_loss == pytest.approx(loss, rel=1e-13)
        want = normal.flatten(grad)
        _close(ckpt.flatten(c_grad), want, f"{backend}: checkpointed")
        rep = replay(make_schedule("revolve", 7, 3), 7)
        assert ckpt.calls[0] == rep.evaluations and normal.calls[0] == 7
        assert ckpt.counters()["peak_live_snapshots"] == rep.peak_snapshots
        results[backend] = (loss, want)
    ref_loss, ref_grad = results["autograd"]
    for loss, grad in results.values():
        assert abs(loss - ref_loss) <= 1e-12 * abs(ref_loss)
        _close(grad, ref_grad, "across backends")


@pytest.mark.parametrize("backend", REGISTERED[1:])  # the backends with peers
def test_a_peer_strategy_on_a_chain_is_one_line(backend):
    case = _case(backend, "mlp-stack")
    peer = next(n for n in registry.strategies(case.backend) if not get_strategy(n).runs_chains)
    with pytest.raises(ValueError, match="checkpoints recurrences only") as info:
        registry.build(_case(backend, "mlp-stack", strategy=peer), Mode.CHECKPOINTED)
    assert "\n" not in str(info.value)


def test_chain_names_and_minimum_depth():
    assert set(BUILTIN_CHAINS) == set(STACKS)
    wl = load_workload("transformer-stack", Sizes(**TINY))
    assert wl.layer_names(6) == ("embed", "block0.attn", "block0.mlp", "block1.attn",
                                 "block1.mlp", "head")  # fmt: skip
    with pytest.raises(WorkloadError, match="at least 2 layers"):
        wl.init(1, 0)
    cnn = load_workload("cnn-stack", Sizes(**TINY))
    assert cnn.layer_names(3) == ("conv0", "conv1", "head")


@pytest.mark.torch
@_installed("torch")
def test_an_nn_sequential_plug_in_is_a_chain(tmp_path):
    plugin = tmp_path / "seq.py"
    plugin.write_text(
        "import torch\n"
        "def make(hidden=6, input=4):\n"
        "    return torch.nn.Sequential(torch.nn.Linear(input, hidden), torch.nn.Tanh(),\n"
        "                               torch.nn.Linear(hidden, 3))\n"
    )
    model = f"{plugin}:make"
    case = Case(model=model, steps=3, snaps=2, strategy="revolve", backend="torch", batch=2,
                hidden=6, input=4, output=3)  # fmt: skip
    normal, ckpt = registry.build(case, Mode.NORMAL), registry.build(case, Mode.CHECKPOINTED)
    want = normal.flatten(normal.gradient(normal.params)[1])
    _close(ckpt.flatten(ckpt.gradient(ckpt.params)[1]), want, "nn.Sequential")
    assert want.size == 4 * 6 + 6 + 6 * 3 + 3 + 2 * 4  # both linears and x0
    assert ckpt.counters()["steps_taped"] == 3
    with pytest.raises(WorkloadError, match="run it with --steps 3"):
        registry.build(dataclasses.replace(case, steps=4), Mode.NORMAL)


@pytest.mark.jax
@_installed("jax")
def test_the_compiled_jax_executor_asks_for_the_engine_in_one_line():
    case = dataclasses.replace(_case("jax-engine", "cnn-stack"), executor="compiled")
    with pytest.raises(ValueError, match="run it with --executor engine") as info:
        registry.build(case, Mode.CHECKPOINTED)
    assert "\n" not in str(info.value)


@pytest.mark.jax
@_installed("jax")
def test_jax_chain_peers_run_through_the_registry():
    peers = [n for n in registry.strategies("jax")
             if get_strategy(n).runs_chains and not get_strategy(n).ours]  # fmt: skip
    assert peers
    # three layers (two convolutions and the head): a checkpoint around each all the same,
    # in under half the compilation of seven
    normal = registry.build(_case("jax-engine", "cnn-stack", steps=3), Mode.NORMAL)
    want = normal.flatten(normal.gradient(normal.params)[1])
    for peer in peers:
        case = _case("jax", "cnn-stack", strategy=peer, steps=3)
        ckpt = registry.build(case, Mode.CHECKPOINTED)
        _close(ckpt.flatten(ckpt.gradient(ckpt.params)[1]), want, peer)
        assert ckpt.calls[0] is None  # recomputations inside JAX's transpose: unseen
