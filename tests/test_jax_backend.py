"""The JAX backend: the table encoder against replay, compiled gradients against plain
``jax.grad`` and finite differences, measured counters and stored bytes against the schedule,
the peers, the modes and one real run."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from types import SimpleNamespace

import numpy as np
import pytest
from click.testing import CliRunner

from ckptbench.backends.jax.table import TableError, decode, encode
from ckptbench.results.schema import Case, CaseError, Mode
from ckptbench.schedules import (
    Action,
    ActionKind,
    make_schedule,
    optimal_forward_steps,
    replay,
    replay_bytes,
)
from ckptbench.schedules.optimal import Costs, plan_optimal
from tests._imports import loaded_after_import

jax = pytest.importorskip("jax")
pytestmark = pytest.mark.jax

from ckptbench.backends.jax import require_jax  # noqa: E402

require_jax()

import jax.numpy as jnp  # noqa: E402

SMALL = {"hidden": 5, "batch": 3, "input": 4, "output": 2}
STREAMS = ("revolve", "uniform", "store-all")
GRID = [(1, 1), (1, 3), (2, 1), (2, 2), (5, 2), (7, 3), (12, 4), (9, 9), (6, 20)]

# --------------------------------------------------------------- the table (no JAX needed)


def unit_plan(steps, budget):
    """A plan that keeps tapes (tapes cost 3 state sizes; taped steps are cheap)."""
    costs = Costs(forward_time_s=1.0, taped_time_s=1.5, state_bytes=2, tape_bytes=6)
    return plan_optimal(costs, steps, budget)


@pytest.mark.parametrize("strategy", STREAMS)
@pytest.mark.parametrize(("steps", "snaps"), [*GRID, (30, 5), (100, 10), (64, 7)])
def test_table_decodes_to_the_same_stream(strategy, steps, snaps):
    actions = list(make_schedule(strategy, steps, min(snaps, steps)))
    table = encode(actions, steps)
    assert decode(table) == actions
    assert replay(decode(table), steps) == replay(actions, steps)
    assert table.n_rows <= len(actions)
    assert table.tape_slots == 0


@pytest.mark.parametrize(("steps", "budget"), [(1, 8), (3, 8), (10, 16), (30, 40), (40, 300)])
def test_table_of_a_plan_with_kept_tapes(steps, budget):
    plan = unit_plan(steps, budget)
    actions = list(plan.actions())
    table = encode(actions, steps)
    assert decode(table) == actions
    stats = replay(actions, steps)
    assert table.tape_slots == stats.peak_tapes
    kept = [a.step for a in actions if a.kind is ActionKind.TAPE]
    slots = [int(table.tape_slot[i]) for i in kept]
    assert all(0 <= s < max(table.tape_slots, 1) for s in slots)
    assert int(np.sum(table.column("tape_count"))) == len(kept)


def test_revolve_1000_31_packs_into_1942_rows():
    table = encode(make_schedule("revolve", 1000, 31), 1000)
    assert table.n_rows == 1942
    first = table.rows[: table.first_rows]
    advances = int(np.sum(table.column("advance_stop") - table.column("advance_start")))
    assert advances == optimal_forward_steps(1000, 31)
    assert int(np.sum(first[:, 8])) == 0  # no YOUTURN in the first sweep


@pytest.mark.parametrize(
    ("actions", "match"),
    [
        ([Action(ActionKind.TERMINATE)], "no FIRSTURN"),
        ([Action(ActionKind.FIRSTURN, step=0)], "without TERMINATE"),
        ([Action(ActionKind.RESTORE, slot=0, step=0)], "before FIRSTURN"),
        ([Action(ActionKind.FIRSTURN, step=1), Action(ActionKind.TERMINATE)], "FIRSTURN must"),
        (
            [Action(ActionKind.FIRSTURN, step=0), Action(ActionKind.TERMINATE)] * 2,
            "after TERMINATE",
        ),
    ],
)
def test_table_rejects_streams_it_cannot_encode(actions, match):
    with pytest.raises(TableError, match=match):
        encode(actions, 1 if "must" not in match else 3)


def test_case_accepts_the_jax_backend_and_its_peers_only_there():
    assert Case(backend="jax", strategy="equinox").backend == "jax"
    assert Case(backend="jax", strategy="jax-checkpoint").strategy == "jax-checkpoint"
    for strategy, backend in [
        ("jax-checkpoint", "torch"),
        ("equinox", "autograd"),
        ("torch-checkpoint", "jax"),
    ]:
        with pytest.raises(CaseError, match="needs --backend"):
            Case(backend=backend, strategy=strategy)
    case, notes = Case(backend="jax", strategy="equinox", steps=5, snaps=9).effective()
    assert case.snaps == 5 and notes == ("--snaps 9 clamped to 5: at most one checkpoint per step",)


def test_ckptbench_worker_and_the_backend_package_import_no_jax():
    assert loaded_after_import("ckptbench.measure.worker", ("jax",)) == []
    assert loaded_after_import("ckptbench.cli", ("jax",)) == []
    assert loaded_after_import("ckptbench.backends.jax", ("jax",)) == []
    assert loaded_after_import("ckptbench.backends.jax.modes", ("jax",)) == []


def test_missing_jax_is_one_line():
    code = (
        "import sys; sys.modules['jax'] = None\n"
        "from types import SimpleNamespace\n"
        "from ckptbench.backends.jax import JaxMissingError\n"
        "from ckptbench.backends.jax.modes import build_gradient\n"
        "try:\n"
        "    build_gradient(SimpleNamespace(threads=2), 'normal')\n"
        "except JaxMissingError as err:\n"
        "    print(repr(str(err)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    msg = eval(out.stdout)  # the repr printed above
    assert msg.startswith("--backend jax needs JAX") and "ckptbench[jax]" in msg
    assert "\n" not in msg


def test_cli_without_jax_or_equinox_is_one_line_exit_2(monkeypatch, tmp_path):
    import importlib.util

    from ckptbench.cli import cli

    real = importlib.util.find_spec
    for missing, args in [
        ("jax", ["--backend", "jax"]),
        ("equinox", ["--backend", "jax", "--strategy", "equinox"]),
    ]:
        monkeypatch.setattr(
            importlib.util, "find_spec", lambda n, *a, m=missing: None if n == m else real(n, *a)
        )
        res = CliRunner().invoke(
            cli, ["run", "--steps", "4", "--snaps", "2", *args, "--out", str(tmp_path / "r.json")]
        )
        assert res.exit_code == 2, res.output
        assert f"needs {missing}" in res.output
        assert len(res.output.strip().splitlines()) == 1


# --------------------------------------------------------------- compiled

from ckptbench.backends.jax.binding import (  # noqa: E402
    COUNTERS,
    compiled_checkpoint,
    tape_layout,
)
from ckptbench.backends.jax.costs import measure_jax_costs  # noqa: E402
from ckptbench.backends.jax.device import DevicePeakMeter, resolve_device  # noqa: E402
from ckptbench.backends.jax.modes import build_gradient  # noqa: E402
from ckptbench.backends.jax.peers import equinox_checkpoint, scan_checkpoint  # noqa: E402
from ckptbench.backends.jax.workloads import JaxLSTM, JaxRNN  # noqa: E402
from ckptbench.workloads import LSTM, RNN  # noqa: E402

WORKLOADS = {"rnn": (JaxRNN, RNN), "lstm": (JaxLSTM, LSTM)}


def problem(model, steps, seed=0):
    wl = WORKLOADS[model][0](**SMALL)
    return (wl, *wl.init(steps, np.random.default_rng(seed)))


def weighted(out):
    w = jnp.linspace(0.5, 1.5, out.size, dtype=out.dtype).reshape(out.shape)
    return jnp.sum(jnp.sin(out) * w)


def plain_loop(wl):
    def loop(p, s0, xs):
        def body(s, x):
            s = wl.step(p, s, x)
            return s, wl.post(p, s)

        return jax.lax.scan(body, s0, xs)[1]

    return loop


def plain_grads(wl, params, state0, inputs):
    return jax.grad(lambda p, s, x: weighted(plain_loop(wl)(p, s, x)), (0, 1, 2))(
        params, state0, inputs
    )


def executor_for(wl, params, state0, inputs, actions):
    steps = inputs.shape[0]
    layout = tape_layout(wl.step, wl.post, params, state0, inputs[0])
    return compiled_checkpoint(wl.step, wl.post, encode(actions, steps), layout), layout


def compiled_grads(loop, params, state0, inputs):
    zero = jnp.zeros(len(COUNTERS), jnp.float64)
    fn = jax.jit(jax.grad(lambda p, s, x, c: weighted(loop(p, s, x, c)), (0, 1, 2, 3)))
    *grads, counts = fn(params, state0, inputs, zero)
    return grads, dict(zip(COUNTERS, (int(v) for v in np.asarray(counts)), strict=True))


def rel_err(got, want):
    a = np.concatenate([np.ravel(x) for x in jax.tree_util.tree_leaves(got)])
    b = np.concatenate([np.ravel(x) for x in jax.tree_util.tree_leaves(want)])
    return float(np.max(np.abs(a - b)) / np.max(np.abs(b)))


def small_case(model="lstm", steps=12, snaps=4, strategy="revolve", **kw):
    fields = {f.name: getattr(Case(), f.name) for f in dataclasses.fields(Case)}
    fields.update(SMALL, model=model, steps=steps, snaps=snaps, strategy=strategy, seed=3)
    fields.update(backend="jax", threads=2, **kw)
    return SimpleNamespace(**fields)


@pytest.mark.parametrize("model", ["rnn", "lstm"])
def test_initial_values_and_loss_are_the_autograd_workloads(model):
    jwl, ref = WORKLOADS[model][0](**SMALL), WORKLOADS[model][1](**SMALL)
    got = jwl.init(7, np.random.default_rng(5))
    want = ref.init(7, np.random.default_rng(5))
    for a, b in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want), strict=True):
        assert a.dtype == jnp.float64 and np.array_equal(np.asarray(a), b)
    p, s, xs = want
    outs = []
    for i in range(7):
        s = ref.step(p, s, xs[i])
        outs.append(ref.post(p, s))
    want_loss = float(ref.loss(np.array(outs)))
    got_loss = float(jwl.loss(plain_loop(jwl)(*got)))
    assert got_loss == pytest.approx(want_loss, rel=1e-12)


@pytest.mark.parametrize("model", ["rnn", "lstm"])
@pytest.mark.parametrize("strategy", STREAMS)
@pytest.mark.parametrize(("steps", "snaps"), [*GRID[::2], (12, 4)])
def test_compiled_gradients_equal_plain_jax_and_counters_equal_replay(
    model, strategy, steps, snaps
):
    wl, params, state0, inputs = problem(model, steps)
    actions = list(make_schedule(strategy, steps, min(snaps, steps)))
    loop, _ = executor_for(wl, params, state0, inputs, actions)
    grads, counts = compiled_grads(loop, params, state0, inputs)
    assert rel_err(grads, plain_grads(wl, params, state0, inputs)) <= 1e-12
    stats = replay(actions, steps)
    assert counts["steps_advanced"] == stats.advances
    assert counts["steps_taped"] == stats.taped == steps
    assert counts["tapes_kept"] == 0
    assert counts["post_calls"] == sum(
        a.stop - a.start
        for a in actions[: actions.index(next(iter_firsturn(actions)))]
        if a.kind is ActionKind.ADVANCE
    )


def iter_firsturn(actions):
    return (a for a in actions if a.kind is ActionKind.FIRSTURN)


@pytest.mark.parametrize("model", ["rnn", "lstm"])
@pytest.mark.parametrize(("steps", "tapes"), [(1, 1), (4, 2), (9, 3), (16, 30)])
def test_plans_with_kept_tapes_give_plain_gradients_and_the_plans_counts(model, steps, tapes):
    wl, params, state0, inputs = problem(model, steps)
    layout = tape_layout(wl.step, wl.post, params, state0, inputs[0])
    sb = sum(int(a.size) * 8 for a in jax.tree_util.tree_leaves(state0))
    costs = Costs(
        forward_time_s=1.0, taped_time_s=1.5, state_bytes=sb, tape_bytes=layout.tape_bytes
    )
    plan = plan_optimal(costs, steps, 2 * sb + tapes * layout.tape_bytes)
    actions = list(plan.actions())
    loop, _ = executor_for(wl, params, state0, inputs, actions)
    grads, counts = compiled_grads(loop, params, state0, inputs)
    assert rel_err(grads, plain_grads(wl, params, state0, inputs)) <= 1e-12
    stats = replay(actions, steps)
    assert counts["steps_advanced"] == stats.advances == plan.prediction.advances
    assert counts["steps_taped"] == steps
    assert counts["tapes_kept"] == plan.prediction.tapes_kept
    if steps > 4:
        assert plan.prediction.tapes_kept > 0  # the test exercises kept tapes


def test_kept_tapes_store_no_parameter():
    wl, params, state0, inputs = problem("lstm", 3)
    layout = tape_layout(wl.step, wl.post, params, state0, inputs[0])
    stored = [layout.shapes[k][0] for k in layout.stored]
    assert params["W"].shape not in stored
    assert params["W_out"].shape not in stored
    assert layout.tape_bytes == sum(8 * int(np.prod(s)) for s in stored)


def test_gradients_match_finite_differences():
    wl, params, state0, inputs = problem("rnn", 5, seed=2)
    loop, _ = executor_for(wl, params, state0, inputs, list(make_schedule("revolve", 5, 2)))
    (gp, gs, gx), _ = compiled_grads(loop, params, state0, inputs)
    zero = jnp.zeros(len(COUNTERS))

    def f(p, s, x):
        return float(weighted(loop(p, s, x, zero)))

    eps = 1e-6
    for name, index in [("W_hh", (1, 2)), ("b", (3,)), ("W_out", (0, 1))]:
        up = {k: np.array(v) for k, v in params.items()}
        down = {k: np.array(v) for k, v in params.items()}
        up[name][index] += eps
        down[name][index] -= eps
        fd = (f(up, state0, inputs) - f(down, state0, inputs)) / (2 * eps)
        assert float(gp[name][index]) == pytest.approx(fd, rel=1e-6, abs=1e-9)
    for grad, arg in [(gs, 1), (gx, 2)]:
        base = [params, np.array(state0), np.array(inputs)]
        up, down = [list(base), list(base)]
        idx = (0, 1) if arg == 1 else (2, 0, 1)
        up[arg] = base[arg].copy()
        down[arg] = base[arg].copy()
        up[arg][idx] += eps
        down[arg][idx] -= eps
        fd = (f(*up) - f(*down)) / (2 * eps)
        assert float(grad[idx]) == pytest.approx(fd, rel=1e-6, abs=1e-9)


@pytest.mark.parametrize(("strategy", "snaps"), [("revolve", 3), ("uniform", 4), ("optimal", 0)])
def test_modes_counters_are_measured_and_bytes_equal_the_replayed_schedule(strategy, snaps):
    steps = 14
    wl, params, state0, inputs = problem("lstm", steps, seed=3)
    layout = tape_layout(wl.step, wl.post, params, state0, inputs[0])
    sb = sum(int(a.size) * 8 for a in jax.tree_util.tree_leaves(state0))
    tb = layout.tape_bytes
    costs = None
    if strategy == "optimal":
        doc = Costs(forward_time_s=1.0, taped_time_s=1.5, state_bytes=sb, tape_bytes=tb)
        costs = doc.as_dict()
        case = small_case(steps=steps, snaps=1, strategy=strategy, budget_bytes=2 * sb + 4 * tb)
        plan = plan_optimal(doc, steps, case.budget_bytes)
        actions = list(plan.actions())
    else:
        case = small_case(steps=steps, snaps=snaps, strategy=strategy)
        actions = list(make_schedule(strategy, steps, snaps))
    built = build_gradient(case, Mode.CHECKPOINTED, costs)
    built.calls[0] = 0
    built.gradient(built.params)
    counters = built.counters()
    stats = replay(actions, steps)
    assert built.calls[0] == stats.advances + stats.taped
    assert counters["steps_advanced"] == stats.advances
    assert counters["state_bytes"] == sb and counters["tape_bytes"] == tb
    stored = replay_bytes(actions, steps, sb, tb)
    assert counters["peak_stored_bytes"] == stored.peak_bytes
    assert counters["compile_time_ns"] > 0 and counters["xla_temp_bytes"] > 0
    assert isinstance(counters["program_rss_bytes"], int)  # RSS the compile left (may be < 0)
    if strategy == "optimal":
        assert counters["peak_stored_bytes"] == plan.peak_bytes
        assert built.plan()["peak_bytes"] == plan.peak_bytes
        assert counters["tapes_kept"] == plan.prediction.tapes_kept > 0


@pytest.mark.parametrize("model", ["rnn", "lstm"])
@pytest.mark.parametrize(("steps", "segments"), [(1, 1), (1, 4), (10, 1), (10, 3), (12, 12)])
def test_jax_checkpoint_peer_equals_plain(model, steps, segments):
    wl, params, state0, inputs = problem(model, steps)
    loop = scan_checkpoint(wl.step, wl.post, steps, segments)
    got = jax.grad(lambda p, s, x: weighted(loop(p, s, x)), (0, 1, 2))(params, state0, inputs)
    assert rel_err(got, plain_grads(wl, params, state0, inputs)) <= 1e-12


@pytest.mark.parametrize(("steps", "checkpoints"), [(1, 1), (10, 2), (13, 4)])
def test_equinox_peer_equals_plain(steps, checkpoints):
    pytest.importorskip("equinox")
    wl, params, state0, inputs = problem("lstm", steps)
    loop = equinox_checkpoint(wl.step, wl.post, steps, checkpoints)
    got = jax.jit(jax.grad(lambda p, s, x: weighted(loop(p, s, x)), (0, 1, 2)))(
        params, state0, inputs
    )
    assert rel_err(got, plain_grads(wl, params, state0, inputs)) <= 1e-12


@pytest.mark.parametrize("model", ["rnn", "lstm"])
def test_every_jax_mode_gives_the_autograd_workers_gradient(model):
    from ckptbench.backends.registry import build as autograd_build

    ref = autograd_build(Case(model=model, steps=9, snaps=3, seed=3, **SMALL), Mode.NORMAL)
    want_loss, want = ref.gradient(ref.params)
    want = ref.flatten(want)
    for strategy in ("revolve", "store-all", "jax-checkpoint", "equinox"):
        for mode in (Mode.NORMAL, Mode.CHECKPOINTED):
            if mode is Mode.NORMAL and strategy != "revolve":
                continue
            built = build_gradient(small_case(model, 9, 3, strategy), mode)
            loss, grad = built.gradient(built.params)
            flat = built.flatten(grad)
            assert isinstance(loss, float) and loss == pytest.approx(want_loss, rel=1e-12)
            assert flat.dtype == np.float64
            assert float(np.max(np.abs(flat - want)) / np.max(np.abs(want))) <= 1e-12
            if mode is Mode.NORMAL:
                assert built.calls[0] == 9  # counted inside the scan
            elif strategy in ("jax-checkpoint", "equinox"):
                assert built.calls[0] is None  # recomputed inside JAX's transpose: unmeasured
    base = build_gradient(small_case(model, 9, 3), Mode.BASELINE)
    loss, grad = base.gradient(base.params)
    assert loss == pytest.approx(want_loss, rel=1e-12)
    assert not np.any(base.flatten(grad)) and base.calls[0] == 9


def test_modes_reject_unknown_strategy_mode_and_device():
    with pytest.raises(ValueError, match="not available on the jax backend"):
        build_gradient(small_case(strategy="torch-checkpoint"), Mode.CHECKPOINTED)
    with pytest.raises(ValueError, match="unknown mode"):
        build_gradient(small_case(), "sideways")
    with pytest.raises(ValueError, match="needs measured step costs"):
        build_gradient(small_case(strategy="optimal", budget_bytes=10**6), Mode.CHECKPOINTED)


def test_step_costs_measured_on_jax():
    case = small_case(steps=6)
    doc = measure_jax_costs(case, samples=1)
    costs = Costs.from_dict(doc["costs"])
    wl, params, state0, inputs = problem("lstm", 6)
    layout = tape_layout(wl.step, wl.post, params, state0, inputs[0])
    assert costs.tape_bytes == layout.tape_bytes
    assert costs.state_bytes == 2 * SMALL["batch"] * SMALL["hidden"] * 8
    # measured times: a loaded machine can invert a small gap, only a wide one is wrong
    assert costs.forward_time_s > 0 and 4 * costs.taped_time_s >= costs.forward_time_s
    assert doc["backend"] == "jax" and doc["steps"] == 6


HAS_GPU = any(d.platform == "gpu" for d in jax.devices())


@pytest.mark.skipif(HAS_GPU, reason="this machine has a GPU")
def test_gpu_device_without_a_gpu_is_one_line():
    with pytest.raises(ValueError, match="needs a GPU build of JAX") as info:
        resolve_device("cuda")
    assert "\n" not in str(info.value)
    meter = DevicePeakMeter(resolve_device("cpu"))
    assert meter.method is None


@pytest.mark.skipif(HAS_GPU, reason="this machine has a GPU")
@pytest.mark.parametrize("name", ["cuda", "gpu"])  # gpu: JAX's name for it
def test_run_on_a_missing_gpu_is_refused_before_any_mode_is_measured(tmp_path, name):
    # a disposable worker asks JAX (ckptbench's process never imports it): one line, exit 2
    from ckptbench.cli import cli

    out = tmp_path / "r.json"
    res = CliRunner().invoke(cli, ["run", "--backend", "jax", "--device", name, "--steps",
                                   "4", "--snaps", "2", "--out", str(out)])  # fmt: skip
    assert res.exit_code == 2
    assert res.output.strip().splitlines() == [
        f"Error: --device {name}: jax {jax.__version__} sees no GPU here (needs a GPU "
        "build and a visible GPU)"
    ]
    assert not out.exists()


class _Allocator:
    """A device allocator whose peak is never reset (XLA's), modelled in bytes."""

    def __init__(self, in_use: int, peak: int) -> None:
        self.in_use, self.peak = in_use, peak

    def alloc(self, n: int) -> None:
        self.in_use += n
        self.peak = max(self.peak, self.in_use)

    def free(self, n: int) -> None:
        self.in_use -= n


class _Block:
    def __init__(self, allocator: _Allocator, n: int) -> None:
        self.allocator, self.n = allocator, n
        allocator.alloc(n)

    def __del__(self) -> None:
        self.allocator.free(self.n)


@pytest.mark.parametrize("room", [True, False, "short"])
def test_device_peak_is_exact_after_a_higher_peak_when_the_floor_can_be_raised(room):
    mib = 2**20
    allocator = _Allocator(in_use=6 * mib, peak=105 * mib)  # compiling set the peak high
    device = SimpleNamespace(
        platform="gpu",
        memory_stats=lambda: {
            "bytes_in_use": allocator.in_use,
            "peak_bytes_in_use": allocator.peak,
        },
    )
    meter = DevicePeakMeter(device)
    meter._ballast = {
        True: lambda n: _Block(allocator, -(-n // mib) * mib),
        False: lambda n: None,  # no room on the device
        "short": lambda n: _Block(allocator, n - mib),  # allocated, but below the old peak
    }[room]
    for extra in [3 * mib, 7 * mib, 2 * mib, 0]:  # each window's temporaries
        with meter.measure() as window:
            scratch = _Block(allocator, extra)
            del scratch
        r = window.reading
        assert r.start_device_bytes == 6 * mib and allocator.in_use == 6 * mib  # ballast gone
        if room is True:
            assert r.peak_exact and r.peak_device_bytes == 6 * mib + extra
        else:  # the compiler's peak, an upper bound, said so
            assert not r.peak_exact and r.peak_device_bytes == 105 * mib


@pytest.mark.skipif(not HAS_GPU, reason="needs a GPU")
def test_gpu_gradients_equal_cpu_and_device_peak_is_read():
    cpu = build_gradient(small_case(), Mode.CHECKPOINTED)
    gpu = build_gradient(small_case(device="cuda"), Mode.CHECKPOINTED)
    want = cpu.flatten(cpu.gradient(cpu.params)[1])
    peaks = []
    for _ in range(3):  # the first call's peak is set by compiling, above the gradient's
        with gpu.device_meter.measure() as window:
            got = gpu.flatten(gpu.gradient(gpu.params)[1])
        peaks.append(window.reading)
    assert float(np.max(np.abs(got - want)) / np.max(np.abs(want))) <= 1e-10
    assert all(r.peak_exact and r.peak_device_bytes > r.start_device_bytes > 0 for r in peaks)
    assert peaks[1].peak_device_bytes == peaks[2].peak_device_bytes  # one program, one peak


@pytest.mark.slow
def test_real_run_on_the_jax_backend(tmp_path):
    out = tmp_path / "r.json"
    args = [
        "run",
        "--backend",
        "jax",
        "--model",
        "lstm",
        "--steps",
        "12",
        "--snaps",
        "3",
        "--hidden",
        "8",
        "--batch",
        "2",
        "--input",
        "3",
        "--warmup",
        "1",
        "--repeats",
        "1",
        "--rounds",
        "1",
        "--quiet",
        "--out",
    ]
    proc = subprocess.run(
        [sys.executable, "-m", "ckptbench", *args, str(out)],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    doc = json.loads(out.read_text())
    text = json.dumps(doc)
    assert '"backend": "jax"' in text
    ckpt = next(m for m in doc["modes"] if m["mode"] == "checkpointed")
    assert ckpt["counters"]["step_calls"] == optimal_forward_steps(12, 3) + 12
    assert ckpt["grad_max_rel_err"] <= 1e-12


@pytest.mark.parametrize(("mode", "strategy"), [("normal", "revolve"), ("checkpointed", "revolve")])
def test_compilation_happens_in_build_never_in_an_iteration(mode, strategy):
    import jax.monitoring

    events = []

    def listen(event, duration, **kw):
        if "compile" in event:
            events.append(event)

    jax.monitoring.register_event_duration_secs_listener(listen)
    try:
        built = build_gradient(small_case(steps=7, snaps=3, strategy=strategy), Mode(mode))
        assert events, "the build compiles"
        assert built.counters()["compile_time_ns"] > 0
        events.clear()
        for _ in range(2):
            built.gradient(built.params)
        assert events == []
    finally:
        jax.monitoring.unregister_event_duration_listener(listen)
