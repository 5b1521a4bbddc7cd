"""The torch backend: same losses as autograd, gradients vs plain torch, exact step counts."""

from __future__ import annotations

import dataclasses
import gc
import subprocess
import sys
import textwrap
import weakref
from types import SimpleNamespace

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch

from ckptbench.backends.autograd.binding import CheckpointStats, binomial_checkpoint  # noqa: E402
from ckptbench.backends.torch import TorchMissingError  # noqa: E402
from ckptbench.backends.torch import device as tcuda  # noqa: E402
from ckptbench.backends.torch.binding import (  # noqa: E402
    TorchCheckpointStats,
    UnknownActionError,
    revolve_checkpoint,
)
from ckptbench.backends.torch.framework import (  # noqa: E402
    build_gradient,
    flatten_gradient,
    tree_leaves,
)
from ckptbench.backends.torch.peers import torch_checkpoint  # noqa: E402
from ckptbench.backends.torch.workloads import (  # noqa: E402
    TorchLSTM,
    TorchRNN,
    load_torch_workload,
)
from ckptbench.results.schema import Case, Mode  # noqa: E402
from ckptbench.schedules import (  # noqa: E402
    REVOLVE,
    Action,
    make_schedule,
    optimal_forward_steps,
    replay,
)
from ckptbench.workloads import LSTM, RNN, Sizes, WorkloadError  # noqa: E402
from tests._imports import loaded_after_import  # noqa: E402

SMALL = {"hidden": 6, "batch": 3, "input": 4, "output": 2}
WORKLOADS = {"rnn": TorchRNN, "lstm": TorchLSTM}
HAS_CUDA = torch.cuda.is_available()


def autograd_gradient(case):
    """(loss, flattened gradient) of the autograd backend's normal mode for ``case``."""
    from ckptbench.backends.registry import get_backend

    built = get_backend("autograd").build_gradient(case, Mode.NORMAL)
    loss, grad = built.gradient(built.params)
    return loss, built.flatten(grad)


def small_case(model="lstm", steps=20, snaps=4, strategy="revolve", **kw):
    """A case object with the attributes build_gradient reads (strategy may be the peer's)."""
    fields = {f.name: getattr(Case(), f.name) for f in dataclasses.fields(Case)}
    fields.update(SMALL, model=model, steps=steps, snaps=snaps, strategy=strategy, seed=3)
    fields.update(kw)
    return SimpleNamespace(**fields)


def problem(model, steps, seed=0):
    wl = WORKLOADS[model](**SMALL)
    params, state0, inputs = wl.init(steps, np.random.default_rng(seed))
    return wl, params, state0, inputs


def counting(step):
    calls = [0]

    def counted(p, s, x):
        calls[0] += 1
        return step(p, s, x)

    return counted, calls


def plain(wl, steps):
    def loop(params, state, inputs):
        outs = []
        for i in range(steps):
            state = wl.step(params, state, inputs[i])
            outs.append(wl.post(params, state))
        return torch.stack(outs)

    return loop


def all_grads(loop, wl, params, state0, inputs):
    """Gradients of a weighted loss w.r.t. every param, every state0 leaf and the inputs."""
    leaves = [*tree_leaves(params), *tree_leaves(state0), inputs]
    leaves = [t.detach().requires_grad_() for t in leaves]
    n_p = len(tree_leaves(params))
    p = dict(zip(sorted(params), leaves[:n_p], strict=True))
    s = tuple(leaves[n_p:-1]) if isinstance(state0, tuple) else leaves[n_p]
    out = loop(p, s, leaves[-1])
    weights = torch.linspace(0.5, 1.5, out.numel(), dtype=out.dtype).reshape(out.shape)
    loss = torch.sum(torch.sin(out) * weights)
    return out.detach(), torch.autograd.grad(loss, leaves)


def rel_err(got, want):
    got = torch.cat([g.reshape(-1) for g in got])
    want = torch.cat([w.reshape(-1) for w in want])
    return float(torch.max(torch.abs(got - want)) / torch.max(torch.abs(want)))


# ---------------------------------------------------------------------- workloads


@pytest.mark.parametrize("model", ["rnn", "lstm"])
def test_initial_values_are_the_autograd_workloads_bit_for_bit(model):
    ref = {"rnn": RNN, "lstm": LSTM}[model](**SMALL)
    want = ref.init(9, np.random.default_rng(5))
    got = WORKLOADS[model](**SMALL).init(9, np.random.default_rng(5))
    want_leaves, got_leaves = tree_leaves(want), tree_leaves(got)
    assert len(want_leaves) == len(got_leaves)
    for w, g in zip(want_leaves, got_leaves, strict=True):
        assert g.dtype == torch.float64
        np.testing.assert_array_equal(g.numpy(), w)


@pytest.mark.parametrize("model", ["rnn", "lstm"])
def test_same_seed_gives_the_same_loss_on_both_backends(model):
    case = Case(model=model, steps=300, snaps=8, seed=11, hidden=32, batch=4, input=8, output=3)
    loss_autograd, want = autograd_gradient(case)
    built = build_gradient(case, Mode.NORMAL)
    loss_torch, grad_torch = built.gradient(built.params)
    assert abs(loss_torch - loss_autograd) <= 1e-12 * abs(loss_autograd)
    assert loss_torch != 0.0
    assert built.calls[0] == 300
    got = flatten_gradient(grad_torch)
    assert np.max(np.abs(got - want)) <= 1e-10 * np.max(np.abs(want))


def test_lstm_step_is_the_textbook_lstm():
    wl, params, (h, c), inputs = problem("lstm", 2)
    n = SMALL["hidden"]
    z = torch.cat((inputs[0], h), dim=1) @ params["W"] + params["b"]
    i, f, o = (torch.sigmoid(z[:, k * n : (k + 1) * n]) for k in range(3))
    c_want = f * c + i * torch.tanh(z[:, 3 * n :])
    h_got, c_got = wl.step(params, (h, c), inputs[0])
    torch.testing.assert_close(c_got, c_want, rtol=1e-14, atol=1e-15)
    torch.testing.assert_close(h_got, o * torch.tanh(c_want), rtol=1e-14, atol=1e-15)


# ---------------------------------------------------------------------- executor

GRID = [
    (1, 1),
    (1, 3),
    (2, 1),
    (2, 2),
    (3, 2),
    (7, 1),
    (7, 2),
    (7, 3),
    (7, 7),
    (7, 10),
    (23, 4),
    (23, 2),
]


@pytest.mark.parametrize("model", ["rnn", "lstm"])
@pytest.mark.parametrize("strategy", ["revolve", "uniform", "store-all"])
@pytest.mark.parametrize(("steps", "snaps"), GRID)
def test_gradients_equal_plain_torch(model, strategy, steps, snaps):
    wl, params, state0, inputs = problem(model, steps, seed=steps * 13 + snaps)
    step, calls = counting(wl.step)
    loop = revolve_checkpoint(step, wl.post, steps, snaps, strategy)
    out, grads = all_grads(loop, wl, params, state0, inputs)
    out_ref, grads_ref = all_grads(plain(wl, steps), wl, params, state0, inputs)
    torch.testing.assert_close(out, out_ref, rtol=0, atol=0)
    for got, want in zip(grads, grads_ref, strict=True):  # params, state0, inputs one by one
        assert rel_err([got], [want]) <= 1e-10
    st = loop.stats
    assert calls[0] == st.step_evaluations
    assert st.steps_taped == steps
    if strategy == "revolve":
        assert calls[0] == optimal_forward_steps(steps, min(snaps, steps)) + steps
        assert st.steps_advanced == st.forward_steps_optimal
    limit = None if strategy == "store-all" else snaps
    want = replay(make_schedule(strategy, steps, snaps), steps, limit)
    assert st.steps_advanced == want.advances
    assert st.peak_live_snapshots <= snaps or strategy == "store-all"


@pytest.mark.parametrize(
    ("steps", "snaps", "strategy"),
    [
        (1, 1, "revolve"),
        (40, 5, "revolve"),
        (40, 1, "revolve"),
        (40, 7, "uniform"),
        (9, 2, "store-all"),
    ],
)
def test_counters_equal_the_autograd_executors(steps, snaps, strategy):
    wl, params, state0, inputs = problem("lstm", steps)
    loop = revolve_checkpoint(wl.step, wl.post, steps, snaps, strategy)
    all_grads(loop, wl, params, state0, inputs)
    ref_wl = LSTM(**SMALL)
    p, s0, xs = ref_wl.init(steps, np.random.default_rng(0))
    ref = binomial_checkpoint(ref_wl.step, ref_wl.post, steps, snaps, strategy)
    import autograd

    autograd.grad(lambda q: ref_wl.loss(ref(q, s0, xs)))(p)
    counters = [f.name for f in dataclasses.fields(CheckpointStats)]
    counters = [n for n in counters if not n.endswith("_time_s") and n != "peak_stored_bytes"]
    got, want = dataclasses.asdict(loop.stats), dataclasses.asdict(ref.stats)
    assert {n: got[n] for n in counters} == {n: want[n] for n in counters}


def test_stats_have_every_autograd_counter_name():
    names = {f.name for f in dataclasses.fields(TorchCheckpointStats)}
    assert {f.name for f in dataclasses.fields(CheckpointStats)} <= names


def test_phase_times_add_up_to_the_executor_time():
    wl, params, state0, inputs = problem("lstm", 60)
    loop = revolve_checkpoint(wl.step, wl.post, 60, 5)
    all_grads(loop, wl, params, state0, inputs)
    st = loop.stats
    parts = (st.advance_time_s, st.taped_time_s, st.bookkeeping_time_s)
    assert all(t > 0 for t in parts)
    assert 0 <= st.other_time_s <= st.executor_time_s
    assert st.peak_stored_bytes == st.peak_snapshot_bytes == 5 * st.state_bytes


def test_revolve_1000_steps_31_snaps_costs_3439_evaluations():
    wl, params, state0, inputs = problem("rnn", 1000)
    step, calls = counting(wl.step)
    loop = revolve_checkpoint(step, wl.post, 1000, 31)
    out = loop({k: v.requires_grad_() for k, v in params.items()}, state0, inputs)
    first_sweep = calls[0]
    assert first_sweep == loop.stats.step_evaluations < 3439
    torch.autograd.grad(wl.loss(out), list(params.values()))
    assert calls[0] == 3439
    assert loop.stats.peak_live_snapshots == 31


def test_gradients_match_finite_differences():
    wl, params, state0, inputs = problem("lstm", 6)
    args = (params["W"], params["W_out"], state0[0], inputs)

    def f(w, w_out, h0, xs):
        p = {**params, "W": w, "W_out": w_out}
        loop = revolve_checkpoint(wl.step, wl.post, 6, 2)
        return torch.sin(loop(p, (h0, state0[1]), xs))

    assert torch.autograd.gradcheck(f, [a.detach().requires_grad_() for a in args])


def test_second_backward_of_one_call_gives_the_same_gradient():
    wl, params, state0, inputs = problem("rnn", 30)
    step, calls = counting(wl.step)
    loop = revolve_checkpoint(step, wl.post, 30, 4)
    p = {k: v.requires_grad_() for k, v in params.items()}
    loss = wl.loss(loop(p, state0, inputs))
    first = torch.autograd.grad(loss, list(p.values()), retain_graph=True)
    once = calls[0]
    second = torch.autograd.grad(loss, list(p.values()))
    assert rel_err(second, first) == 0.0
    assert once == optimal_forward_steps(30, 4) + 30
    # the second reverse redoes the first sweep (no outputs) and then the reverse sweep
    assert calls[0] == 2 * once


@pytest.mark.parametrize("strategy", ["revolve", "store-all"])
def test_a_gradient_leaves_no_reference_cycle_holding_tensors(strategy):
    """A cycle would keep snapshots and taped graphs alive until the collector runs."""
    wl, params, state0, inputs = problem("lstm", 30)
    loop = revolve_checkpoint(wl.step, wl.post, 30, 4, strategy)
    p = {k: v.requires_grad_() for k, v in params.items()}
    gc.collect()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        grads = torch.autograd.grad(wl.loss(loop(p, state0, inputs)), list(p.values()))
        del grads
        gc.collect()
        leaked = [o for o in gc.garbage if isinstance(o, torch.Tensor)]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
    assert leaked == []


def test_gradient_only_for_the_initial_state():
    wl, params, state0, inputs = problem("rnn", 12)
    h0 = state0.clone().requires_grad_()
    loop = revolve_checkpoint(wl.step, wl.post, 12, 3)
    (g,) = torch.autograd.grad(wl.loss(loop(params, h0, inputs)), [h0])
    h0_ref = state0.clone().requires_grad_()
    (g_ref,) = torch.autograd.grad(wl.loss(plain(wl, 12)(params, h0_ref, inputs)), [h0_ref])
    assert rel_err([g], [g_ref]) <= 1e-12


def test_unknown_action_kind_is_a_clear_error():
    wl, params, state0, inputs = problem("rnn", 3)

    def with_new_kind(steps, snaps):
        actions = list(make_schedule(REVOLVE, steps, snaps))
        return iter([*actions[:-1], Action("keep-tape", None, None, None, 0), actions[-1]])

    variant = dataclasses.replace(REVOLVE, name="variant", stream=with_new_kind)
    loop = revolve_checkpoint(wl.step, wl.post, 3, 2, variant)
    p = {k: v.requires_grad_() for k, v in params.items()}
    loss = wl.loss(loop(p, state0, inputs))
    with pytest.raises(UnknownActionError, match=r"cannot run action .*keep-tape"):
        torch.autograd.grad(loss, list(p.values()))


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ("inputs", "leading axis 4, expected steps=5"),
        ("state", "step must return a state like the one it got"),
        ("params", "params must hold torch tensors"),
        ("strategy", r"unknown strategy 'fastest' \(choose from revolve"),
    ],
)
def test_bad_arguments_are_one_line_value_errors(change, match):
    wl, params, state0, inputs = problem("lstm", 5)
    step, strategy = wl.step, "revolve"
    if change == "inputs":
        inputs = inputs[:4]
    elif change == "state":
        step = lambda p, s, x: (wl.step(p, s, x)[0],)  # noqa: E731
    elif change == "params":
        params = {**params, "b": params["b"].numpy()}
    with pytest.raises(ValueError, match=match) as info:
        if change == "strategy":
            revolve_checkpoint(step, wl.post, 5, 2, "fastest")
        revolve_checkpoint(step, wl.post, 5, 2, strategy)(params, state0, inputs)
    assert "\n" not in str(info.value)


# ---------------------------------------------------------------------- peer


@pytest.mark.parametrize(("steps", "segments"), [(1, 1), (1, 4), (10, 1), (10, 3), (31, 31)])
@pytest.mark.parametrize("model", ["rnn", "lstm"])
def test_torch_checkpoint_peer_equals_plain_and_reruns_every_step_once(model, steps, segments):
    wl, params, state0, inputs = problem(model, steps, seed=steps + segments)
    step, calls = counting(wl.step)
    loop = torch_checkpoint(step, wl.post, steps, segments)
    out, grads = all_grads(loop, wl, params, state0, inputs)
    out_ref, grads_ref = all_grads(plain(wl, steps), wl, params, state0, inputs)
    torch.testing.assert_close(out, out_ref, rtol=0, atol=0)
    for got, want in zip(grads, grads_ref, strict=True):
        assert rel_err([got], [want]) <= 1e-10
    assert calls[0] == 2 * steps
    bounds = loop.bounds()
    assert bounds[0] == 0 and bounds[-1] == steps and len(bounds) == min(segments, steps) + 1


# ---------------------------------------------------------------------- modes


@pytest.mark.parametrize("model", ["rnn", "lstm"])
def test_every_torch_mode_gives_the_autograd_workers_gradient(model):
    case = Case(model=model, steps=40, snaps=5, seed=2, **SMALL)
    loss_ref, want = autograd_gradient(case)
    for strategy in ["revolve", "uniform", "store-all", "torch-checkpoint"]:
        c = small_case(model, steps=40, snaps=5, strategy=strategy, seed=2)
        built = build_gradient(c, Mode.CHECKPOINTED)
        loss, grad = built.gradient(built.params)
        got = built.flatten(grad)
        counters, calls = built.counters(), built.calls
        assert got.shape == want.shape
        assert np.max(np.abs(got - want)) <= 1e-10 * np.max(np.abs(want)), strategy
        assert abs(loss - loss_ref) <= 1e-12 * abs(loss_ref)
        if strategy == "revolve":
            assert calls[0] == optimal_forward_steps(40, 5) + 40
            assert counters["steps_advanced"] + counters["steps_taped"] == calls[0]
            assert set(built.phases()) >= {"advance_time_s", "taped_time_s", "executor_time_s"}
        if strategy == "torch-checkpoint":
            assert calls[0] == 80 and counters == {} and built.phases() == {}


def test_baseline_mode_runs_forward_only_with_zero_gradient():
    case = small_case("rnn", steps=25)
    built = build_gradient(case, "baseline")
    loss, grad = built.gradient(built.params)
    normal = build_gradient(case, "normal")
    assert loss == normal.gradient(normal.params)[0]
    assert built.calls[0] == 25 and built.counters() == {}
    assert not flatten_gradient(grad).any()
    assert set(grad) == set(built.params)


def test_baseline_writes_outputs_into_one_buffer_and_keeps_no_step_output():
    # one small tensor kept per step fragmented glibc's heap (the baseline's peak moved by
    # 40-120 MiB between iterations); the baseline copies each output into one buffer
    from ckptbench.backends.torch.framework import TorchFramework

    live: list[int] = []
    outputs: list = []

    def step(p, s, x):
        live.append(sum(r() is not None for r in outputs))
        return torch.tanh(s @ p + x)

    def post(p, s):
        y = s.sum(dim=1, keepdim=True)
        outputs.append(weakref.ref(y))
        return y

    p, s0 = torch.eye(3, dtype=torch.float64), torch.ones(2, 3, dtype=torch.float64)
    xs = torch.zeros(6, 2, 3, dtype=torch.float64)
    with torch.no_grad():
        out = TorchFramework().untaped_outputs(step, post, p, s0, xs, 6)
    assert out.shape == (6, 2, 1) and out.is_contiguous()
    assert max(live) <= 1  # never more than the last step's output alive
    want, s = [], s0
    for i in range(6):
        s = torch.tanh(s @ p + xs[i])
        want.append(s.sum(dim=1, keepdim=True))
    assert torch.equal(out, torch.stack(want))


def test_lstm_baseline_loss_equals_normal_loss():
    case = small_case("lstm", steps=30)
    base = build_gradient(case, "baseline")
    normal = build_gradient(case, "normal")
    assert base.gradient(base.params)[0] == normal.gradient(normal.params)[0]
    assert base.calls[0] == 30


def test_modes_reject_unknown_strategy_mode_and_device():
    with pytest.raises(ValueError, match="strategy 'fastest' is not available on the torch"):
        build_gradient(small_case(strategy="fastest"), "checkpointed")
    with pytest.raises(ValueError, match="unknown mode 'eager'"):
        build_gradient(small_case(), "eager")
    with pytest.raises(tcuda.DeviceError, match="unknown device 'tpu'"):
        build_gradient(small_case(device="tpu"), "normal")


PLUGIN = textwrap.dedent(
    """
    import numpy as np
    import torch

    class Cell:
        def __init__(self, hidden, batch, tensors):
            self.hidden, self.batch, self.tensors = hidden, batch, tensors

        def init(self, steps, rng):
            h = self.hidden
            params = {"A": rng.standard_normal((h, h)) / h ** 0.5, "u": rng.standard_normal(h)}
            h0 = rng.standard_normal((self.batch, h))
            xs = rng.standard_normal((steps, self.batch, h))
            if self.tensors:
                params = {k: torch.from_numpy(v) for k, v in params.items()}
                h0, xs = torch.from_numpy(h0), torch.from_numpy(xs)
            return params, h0, xs

        def step(self, p, h, x):
            return torch.tanh(h @ p["A"] + x * p["u"])

        def post(self, p, h):
            return h.sum(dim=1)

        def loss(self, ys):
            return (ys ** 2).mean()

    def numpy_init(hidden, batch):
        return Cell(hidden, batch, tensors=False)

    def tensor_init(hidden, batch):
        return Cell(hidden, batch, tensors=True)
    """
)


@pytest.mark.parametrize("factory", ["numpy_init", "tensor_init"])
def test_plugin_with_torch_tensors(tmp_path, factory):
    path = tmp_path / "torch_cell.py"
    path.write_text(PLUGIN)
    spec = f"{path}:{factory}"
    wl = load_torch_workload(spec, Sizes(**SMALL))
    _, h0, _ = wl.init(10, np.random.default_rng(0))
    assert isinstance(h0, torch.Tensor) and h0.dtype == torch.float64
    results = {}
    for strategy in ["revolve", "torch-checkpoint"]:
        case = small_case(spec, steps=10, snaps=3, strategy=strategy)
        built = build_gradient(case, "checkpointed")
        results[strategy] = flatten_gradient(built.gradient(built.params)[1])
    built = build_gradient(small_case(spec, steps=10), "normal")
    want = flatten_gradient(built.gradient(built.params)[1])
    assert want.shape == (SMALL["hidden"] ** 2 + SMALL["hidden"],)
    for got in results.values():
        assert np.max(np.abs(got - want)) <= 1e-10 * np.max(np.abs(want))


MODULE_PLUGIN = textwrap.dedent(
    """
    import torch

    class CellModel:
        def __init__(self, hidden, batch, input):
            self.hidden, self.batch, self.input = hidden, batch, input

        def init(self, steps, rng):
            torch.manual_seed(int(rng.integers(1 << 30)))
            net = torch.nn.ModuleDict(
                {"cell": torch.nn.LSTMCell(self.input, self.hidden),
                 "out": torch.nn.Linear(self.hidden, 1)}
            ).double()
            h0 = torch.from_numpy(rng.standard_normal((self.batch, self.hidden)))
            c0 = torch.from_numpy(rng.standard_normal((self.batch, self.hidden)))
            xs = torch.from_numpy(rng.standard_normal((steps, self.batch, self.input)))
            return net, (h0, c0), xs

        def step(self, net, state, x):
            return net["cell"](x, state)

        def post(self, net, state):
            return net["out"](state[0])

        def loss(self, ys):
            return (ys ** 2).mean()

    def make(hidden, batch, input):
        return CellModel(hidden, batch, input)
    """
)


def test_plugin_with_an_nn_module_step_differentiates_its_parameters(tmp_path):
    path = tmp_path / "module_cell.py"
    path.write_text(MODULE_PLUGIN)
    spec = f"{path}:make"
    normal = build_gradient(small_case(spec, steps=12), "normal")
    assert set(normal.params) == {
        "cell.weight_ih", "cell.weight_hh", "cell.bias_ih", "cell.bias_hh", "out.weight",
        "out.bias",
    }  # fmt: skip
    want = flatten_gradient(normal.gradient(normal.params)[1])
    assert np.max(np.abs(want)) > 0
    costs = {"forward_time_s": 1.0, "taped_time_s": 3.0, "state_bytes": 96, "tape_bytes": 500}
    for strategy, extra in [("revolve", {}), ("optimal", {"budget_bytes": 4 * 96 + 2000})]:
        case = small_case(spec, steps=12, snaps=3, strategy=strategy, **extra)
        built = build_gradient(case, "checkpointed", costs)
        got = flatten_gradient(built.gradient(built.params)[1])
        assert np.max(np.abs(got - want)) <= 1e-12 * np.max(np.abs(want)), strategy
    assert built.counters()["tapes_kept"] > 0


def test_plugin_errors_are_workload_errors(tmp_path):
    with pytest.raises(WorkloadError, match="no such file or folder"):
        load_torch_workload(f"{tmp_path}/missing.py:make", Sizes())
    path = tmp_path / "init_not_a_tuple.py"
    path.write_text(
        "class W:\n    def init(self, steps, rng): return 1\n    step = post = loss = init\n"
    )
    wl = load_torch_workload(f"{path}:W", Sizes())
    with pytest.raises(WorkloadError, match="init must return"):
        wl.init(3, np.random.default_rng(0))


# ---------------------------------------------------------------------- imports


def test_ckptbench_and_the_backend_package_import_no_torch():
    assert loaded_after_import("ckptbench.measure.worker", ("torch",)) == []
    assert loaded_after_import("ckptbench.cli", ("torch",)) == []
    assert loaded_after_import("ckptbench.backends.torch", ("torch",)) == []


def test_missing_torch_is_one_line():
    code = (
        "import sys; sys.modules['torch'] = None\n"
        "from ckptbench.backends.torch import TorchMissingError\n"
        "try:\n"
        "    import ckptbench.backends.torch.framework\n"
        "except TorchMissingError as err:\n"
        "    print(repr(str(err)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    msg = eval(out.stdout)  # the repr printed above
    assert "--backend torch needs PyTorch" in msg and "ckptbench[torch]" in msg
    assert "\n" not in msg
    assert issubclass(TorchMissingError, ValueError)


MODULES_AFTER_GRADIENT = """
import sys
from types import SimpleNamespace
from ckptbench.backends.torch.framework import build_gradient
case = SimpleNamespace(model="rnn", steps=6, snaps=2, strategy=sys.argv[2], hidden=4, batch=2,
                       input=3, output=1, seed=0, threads=1, device="cpu")
built = build_gradient(case, sys.argv[1])
built.gradient(built.params)
print(" ".join(sorted(sys.modules)))
"""


@pytest.mark.slow
def test_every_torch_mode_has_imported_the_same_modules():
    loaded = {}
    for mode, strategy in [
        ("baseline", "revolve"),
        ("normal", "revolve"),
        ("checkpointed", "revolve"),
        ("checkpointed", "torch-checkpoint"),
    ]:
        out = subprocess.run(
            [sys.executable, "-c", MODULES_AFTER_GRADIENT, mode, strategy],
            capture_output=True,
            text=True,
            check=True,
        )
        loaded[mode, strategy] = set(out.stdout.split())
    sets = list(loaded.values())
    assert "torch._dynamo" in sets[0]
    for other in sets[1:]:
        assert other == sets[0], sorted(other ^ sets[0])[:10]


# ---------------------------------------------------------------------- CUDA


@pytest.mark.skipif(HAS_CUDA, reason="this machine has CUDA")
def test_cuda_device_without_cuda_is_one_line():
    with pytest.raises(tcuda.DeviceError, match="needs a CUDA build") as info:
        tcuda.resolve_device("cuda")
    assert "\n" not in str(info.value)
    with pytest.raises(tcuda.DeviceError):
        build_gradient(small_case(device="cuda"), "normal")


def test_device_meter_on_cpu_reads_nothing_and_synchronize_is_a_no_op():
    meter = tcuda.DevicePeakMeter("cpu")
    assert meter.method is None
    with meter.measure() as window:
        tcuda.synchronize(torch.device("cpu"))
    assert window.reading == tcuda.DevicePeakReading(None, None, None)


@pytest.mark.skipif(not HAS_CUDA, reason="needs CUDA")
def test_cuda_gradients_equal_cpu_and_device_peaks_grow_with_the_tape():
    peaks = {}
    for device in ["cpu", "cuda"]:
        case = small_case("lstm", steps=200, snaps=8, device=device, hidden=64, batch=8)
        for mode in ["normal", "checkpointed"]:
            built = build_gradient(case, mode)
            meter = tcuda.DevicePeakMeter(device)
            built.gradient(built.params)  # warm-up
            with meter.measure() as window:
                loss, grad = built.gradient(built.params)
            peaks[device, mode] = (loss, flatten_gradient(grad), window.reading)
    for mode in ["normal", "checkpointed"]:
        cpu, gpu = peaks["cpu", mode], peaks["cuda", mode]
        assert abs(gpu[0] - cpu[0]) <= 1e-10 * abs(cpu[0])
        assert np.max(np.abs(gpu[1] - cpu[1])) <= 1e-8 * np.max(np.abs(cpu[1]))
        assert cpu[2].peak_device_bytes is None
        assert gpu[2].peak_device_bytes >= gpu[2].start_device_bytes > 0
    normal = peaks["cuda", "normal"][2]
    checkpointed = peaks["cuda", "checkpointed"][2]
    assert (normal.peak_device_bytes - normal.start_device_bytes) > 5 * (
        checkpointed.peak_device_bytes - checkpointed.start_device_bytes
    )


def test_state_leaves_are_flatten_trees_leaves_in_its_order():
    """The executors' per-step shortcut (a tensor, a tuple of tensors) and its fallback
    give flatten_tree's leaves, the same objects in the same order, and its one-line error."""
    from ckptbench.backends.torch.trees import flatten_tree, state_leaves, state_nbytes

    a, b, c = (
        torch.zeros(2, dtype=torch.float64),
        torch.ones(3, dtype=torch.float32),
        torch.zeros(1),
    )
    for state in (a, (a, b), [a, b], (a, (b, c)), {"h": a, "c": b}):
        got, want = state_leaves(state), flatten_tree(state, "state")[0]
        assert len(got) == len(want) and all(x is y for x, y in zip(got, want, strict=True))
    assert state_nbytes((a, b)) == 2 * 8 + 3 * 4
    with pytest.raises(ValueError, match="state must hold torch tensors, got int") as info:
        state_leaves((a, 1))
    assert "\n" not in str(info.value)
