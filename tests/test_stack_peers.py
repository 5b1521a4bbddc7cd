"""The peers people use for stacks of layers (issue 23, item 3), on tiny layer chains.

Each peer is a strategy (:mod:`ckptbench.schedules.peers`) answering for itself: what it
is set by, whether it uses ``--snaps``, which kind of workload it checkpoints. On every
built-in stack, as the worker builds it (``registry.build``), its gradient of every
layer's parameters and of the input equals the plain gradient to 1e-12 (float64) and its
layer calls are the tool's own count; PyTorch's selective checkpointing recomputes no matrix
product; a peer that does not apply is refused in one line.
"""

from __future__ import annotations

import importlib.util
import itertools

import numpy as np
import pytest

from ckptbench.backends import registry
from ckptbench.results.schema import Case, Mode
from ckptbench.schedules import STRATEGIES, Setting, get_strategy
from ckptbench.schedules.peers import STACK_PEERS

TINY = {"hidden": 8, "batch": 2, "input": 8, "output": 3}
STACKS = ["mlp-stack", "cnn-stack", "transformer-stack"]
LAYERS = 7


def _installed(package: str):
    return pytest.mark.skipif(
        importlib.util.find_spec(package) is None, reason=f"{package} is not installed"
    )


def _case(name: str, strategy: str, snaps: int = 3, steps: int = LAYERS, **kw) -> Case:
    backend = get_strategy(strategy).backend or "torch"
    return Case(model=name, steps=steps, snaps=snaps, strategy=strategy, backend=backend,
                seed=11, **TINY, **kw)  # fmt: skip


def _gradients(case: Case):
    normal, ckpt = registry.build(case, Mode.NORMAL), registry.build(case, Mode.CHECKPOINTED)
    n_loss, n_grad = normal.gradient(normal.params)
    c_loss, c_grad = ckpt.gradient(ckpt.params)
    return (n_loss, normal.flatten(n_grad)), (c_loss, ckpt.flatten(c_grad)), ckpt


def _close(got: np.ndarray, want: np.ndarray) -> None:
    assert got.shape == want.shape
    assert np.max(np.abs(got - want)) <= 1e-12 * max(np.max(np.abs(want)), 1e-300)


# ---------------------------------------------------------------------- the specs


def test_every_stack_peer_answers_for_itself():
    for spec in STACK_PEERS:
        assert STRATEGIES[spec.name] is spec and not spec.ours
        assert spec.runs_chains and not spec.runs_recurrences
        assert spec.setting is Setting.SEGMENTS and spec.setting.unit == "segments"
        assert spec.label and spec.help and "\n" not in spec.help
    sequential = get_strategy("checkpoint-sequential")
    assert sequential.uses_snaps and sequential.effective_snaps(24, 5) == 5
    for name in ("torch-every-layer", "torch-selective", "jax-every-layer", "jax-dots-saveable"):
        spec = get_strategy(name)
        assert not spec.uses_snaps and spec.effective_snaps(24, 5) == 24  # one per layer
        assert spec.setting.point_label(24) == "24 seg"
    assert get_strategy("torch-checkpoint").runs_recurrences
    assert not get_strategy("torch-checkpoint").runs_chains
    markers = [s.marker for s in STRATEGIES.values()]
    assert len(markers) == len(set(markers))


def test_per_layer_peers_record_snaps_as_the_number_of_layers():
    case, notes = _case("mlp-stack", "torch-every-layer", snaps=3).effective()
    assert case.snaps == LAYERS and "not used by strategy torch-every-layer" in notes[0]


def test_the_registry_lists_the_stack_peers_on_their_backends():
    assert {"checkpoint-sequential", "torch-every-layer", "torch-selective"} <= set(
        registry.strategies("torch")
    )
    assert {"jax-every-layer", "jax-dots-saveable"} <= set(registry.strategies("jax"))
    assert "jax-every-layer" not in registry.strategies("torch")


# ---------------------------------------------------------------------- torch

TORCH_PEERS = [
    # (strategy, snaps, layer calls of one gradient at LAYERS = 7)
    ("checkpoint-sequential", 3, 7 + 2 * 2),  # 2 checkpointed segments of 7 // 3 = 2
    ("checkpoint-sequential", 1, 7),  # one segment: torch runs it without checkpointing
    ("checkpoint-sequential", 7, 7 + 6),  # the last layer is never checkpointed
    ("torch-every-layer", 7, 2 * 7),
    ("torch-selective", 7, 2 * 7),
]


@pytest.mark.torch
@_installed("torch")
@pytest.mark.parametrize("name", STACKS)
@pytest.mark.parametrize(("strategy", "snaps", "calls"), TORCH_PEERS)
def test_torch_stack_peers_give_the_plain_gradient(name, strategy, snaps, calls):
    (loss, want), (c_loss, got), ckpt = _gradients(_case(name, strategy, snaps))
    assert c_loss == pytest.approx(loss, rel=1e-13)
    _close(got, want)  # every layer's parameters and x0
    assert ckpt.calls[0] == calls
    assert ckpt.counters() == {}  # no step counters of ours: the worker counts layer calls


@pytest.mark.torch
@_installed("torch")
@pytest.mark.parametrize("name", STACKS)
def test_selective_checkpointing_recomputes_no_matrix_product(name):
    """Counted where the ops reach the dispatcher: the selective peer's gradient runs as many
    matrix products as the plain one (the saved outputs are reused), checkpointing every
    layer runs each forward product twice."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    from ckptbench.backends.torch.peers import SAVED_OPS

    class Count(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.n = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.n += func in SAVED_OPS
            return func(*args, **(kwargs or {}))

    def products(strategy: str | None) -> int:
        case = _case(name, strategy or "torch-every-layer")
        built = registry.build(case, Mode.NORMAL if strategy is None else Mode.CHECKPOINTED)
        built.gradient(built.params)  # warm
        with Count() as count:
            built.gradient(built.params)
        return count.n

    plain, selective, every = (
        products(None),
        products("torch-selective"),
        products("torch-every-layer"),
    )
    assert plain > 0 and torch.__version__
    assert selective == plain < every


@pytest.mark.torch
@_installed("torch")
def test_torch_peers_refuse_what_they_do_not_checkpoint_in_one_line():
    with pytest.raises(ValueError, match="checkpoints recurrences only") as info:
        registry.build(_case("mlp-stack", "torch-checkpoint"), Mode.CHECKPOINTED)
    assert "checkpoint-sequential" in str(info.value) and "\n" not in str(info.value)
    lstm = Case(model="lstm", steps=5, snaps=2, strategy="torch-every-layer", backend="torch",
                **TINY)  # fmt: skip
    with pytest.raises(ValueError, match="checkpoints layer chains only") as info:
        registry.build(lstm, Mode.CHECKPOINTED)
    assert "\n" not in str(info.value)
    with pytest.raises(ValueError, match="segments must be a positive integer"):
        get_strategy("checkpoint-sequential").load_factory(chain=True)(abs, 3, 0)


# ---------------------------------------------------------------------- JAX


def _jax_chain():
    """A tiny dense chain on jax.numpy whose widths change at every layer."""
    import jax
    import jax.numpy as jnp

    jax.config.update("jax_enable_x64", True)
    widths = [4, 6, 3, 5, 2]
    rng = np.random.default_rng(3)
    params = [
        {"W": jnp.asarray(rng.standard_normal((a, b)) / a**0.5), "b": jnp.zeros(b)}
        for a, b in itertools.pairwise(widths)
    ]
    x0 = jnp.asarray(rng.standard_normal((3, widths[0])))

    def layer(i, p, x):
        return jnp.tanh(x @ p["W"] + p["b"])

    return layer, params, x0


@pytest.mark.jax
@_installed("jax")
@pytest.mark.parametrize("strategy", ["jax-every-layer", "jax-dots-saveable"])
def test_jax_stack_peers_give_the_plain_gradient(strategy):
    import jax
    import jax.numpy as jnp

    layer, params, x0 = _jax_chain()
    loop = get_strategy(strategy).load_factory(chain=True)(layer, len(params), 99)

    def plain(p, x):
        for i, q in enumerate(p):
            x = layer(i, q, x)
        return jnp.mean(x**2)

    want = jax.value_and_grad(plain, (0, 1))(params, x0)
    got = jax.value_and_grad(lambda p, x: jnp.mean(loop(p, x) ** 2), (0, 1))(params, x0)
    assert float(got[0]) == pytest.approx(float(want[0]), rel=1e-13)
    leaves = jax.tree_util.tree_leaves
    for g, w in zip(leaves(got[1]), leaves(want[1]), strict=True):
        _close(np.asarray(g), np.asarray(w))


@pytest.mark.jax
@_installed("jax")
def test_dots_saveable_recomputes_no_matrix_product():
    """In the gradient's program: the plain gradient has one forward product per layer,
    nothing_saveable reruns each of them in the backward, dots_saveable keeps them."""
    import jax
    import jax.numpy as jnp

    layer, params, x0 = _jax_chain()

    def products(strategy: str | None) -> int:
        if strategy is None:
            loop = None
        else:
            loop = get_strategy(strategy).load_factory(chain=True)(layer, len(params))

        def loss(p):
            if loop is not None:
                return jnp.mean(loop(p, x0) ** 2)
            x = x0
            for i, q in enumerate(p):
                x = layer(i, q, x)
            return jnp.mean(x**2)

        text = jax.jit(jax.grad(loss)).lower(params).as_text()
        return text.count("dot_general")

    plain, dots, nothing = (
        products(None),
        products("jax-dots-saveable"),
        products("jax-every-layer"),
    )
    assert plain > 0 and dots == plain < nothing


@pytest.mark.jax
@_installed("jax")
@pytest.mark.parametrize("name", STACKS)
@pytest.mark.parametrize("strategy", ["jax-every-layer", "jax-dots-saveable"])
def test_jax_stack_peers_give_the_plain_gradient_as_the_worker_builds_them(name, strategy):
    (loss, want), (c_loss, got), ckpt = _gradients(_case(name, strategy, executor="engine"))
    assert c_loss == pytest.approx(loss, rel=1e-13)
    _close(got, want)  # every layer's parameters and x0
    assert ckpt.calls[0] is None  # recomputed inside JAX's transpose: not counted


@pytest.mark.jax
@_installed("jax")
def test_jax_recurrence_peers_on_a_chain_name_the_chain_peers():
    case = _case("mlp-stack", "jax-checkpoint", executor="engine")
    with pytest.raises(ValueError, match="checkpoints recurrences only") as info:
        registry.build(case, Mode.CHECKPOINTED)
    assert "jax-every-layer" in str(info.value) and "\n" not in str(info.value)
