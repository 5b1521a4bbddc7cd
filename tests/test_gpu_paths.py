"""What a GPU run depends on, checked where it can be: the dtype option and its gradient
tolerances, non-finite losses and gradients, device-synchronised step costs, the GPU
configs, and (on a machine with CUDA only) no synchronisation inside torch's executor.
See docs/gpu.md."""

from __future__ import annotations

import importlib.util
import math
import re
from pathlib import Path

import numpy as np
import pytest
from _frameworks import needing, needs

from ckptbench.measure.gradcheck import EPSILON, grad_error, grad_tolerance, verify
from ckptbench.results.schema import Case, CaseError, Mode, ModeResult, Status, result_from_dict
from ckptbench.sweep.config import load_config

ROOT = Path(__file__).resolve().parent.parent
SMALL = {"hidden": 5, "batch": 2, "input": 3, "output": 2}


def _cuda() -> bool:
    if importlib.util.find_spec("torch") is None:
        return False
    import torch

    return bool(torch.cuda.is_available())


# ---------------------------------------------------------------------- dtype and tolerance


def test_dtype_is_a_case_field_autograd_refuses_and_old_results_mean_float64():
    assert Case().dtype == "float64"
    f32 = Case(backend="torch", dtype="float32")
    assert f32.key != Case(backend="torch").key and "-f32-" in f32.key
    # float64 leaves the key as it was before the field existed
    assert "dtype" not in Case(backend="torch").identity()
    with pytest.raises(CaseError, match="--dtype bfloat16 needs --backend jax or torch"):
        Case(dtype="bfloat16")
    with pytest.raises(CaseError, match="unknown dtype 'float16'"):
        Case(backend="jax", dtype="float16")
    old = Case(backend="jax").to_dict()
    del old["dtype"], old["executor"]  # a result file written before either field
    case = Case.from_dict(old)
    assert case.dtype == "float64" and case.executor_used == "compiled"
    doc = {
        "schema_version": 3,
        "case": old,
        "modes": [],
        "environment": {},
        "summary": {},
        "created": "2026-01-01T00:00:00+00:00",
    }
    assert result_from_dict(doc).case.dtype == "float64"


def test_the_tolerance_follows_the_dtype_and_the_chain():
    assert grad_tolerance("float64", 1000) == pytest.approx(64 * 2.0**-52 * 1000)
    assert grad_tolerance("float32", 1000) == pytest.approx(64 * 2.0**-23 * 1000)
    assert grad_tolerance("float32", 10) < grad_tolerance("float32", 1000)
    assert grad_tolerance("bfloat16", 1000) == 0.5  # capped: gross errors only
    assert EPSILON["float32"] == np.finfo(np.float32).eps


def _ckpt(loss: float = 1.0) -> ModeResult:
    return ModeResult(mode=Mode.CHECKPOINTED, status=Status.OK, loss=loss)


def test_a_float32_gradient_passes_within_its_tolerance_and_fails_beyond():
    case = Case(backend="jax", dtype="float32", steps=1000, snaps=31)
    assert verify(case, _ckpt(), 1e-4).ok  # 1e-8 used to fail this for every dtype
    bad = verify(case, _ckpt(), 0.5)
    assert not bad.ok and "gradient differs" in bad.error and "float32 tolerance" in bad.error
    assert not verify(Case(steps=1000, snaps=31), _ckpt(), 1e-4).ok  # float64: tighter


def test_non_finite_losses_and_gradients_are_reported_as_such(tmp_path):
    case = Case(backend="torch", dtype="bfloat16", steps=10, snaps=3)
    nan_loss = verify(case, _ckpt(math.nan), 0.0)
    assert not nan_loss.ok and "loss is not finite (nan) in bfloat16" in nan_loss.error
    assert "differs" not in nan_loss.error
    normal, ckpt = tmp_path / "n.npy", tmp_path / "c.npy"
    np.save(normal, np.ones(4))
    np.save(ckpt, np.array([1.0, np.inf, np.nan, 1.0]))
    err = grad_error(str(normal), str(ckpt))
    assert err == "the checkpointed gradient has 2 of 4 entries not finite (inf or nan)"
    res = verify(case, _ckpt(), err)
    assert not res.ok and res.error.startswith("gradient not finite: the checkpointed")
    assert "differs" not in res.error


@pytest.mark.parametrize(
    "backend",
    [
        pytest.param("torch", marks=needs("torch")),
        pytest.param("torch-one-call", marks=needs("torch")),
        pytest.param("jax", marks=needs("jax")),
        pytest.param("jax-engine", marks=needs("jax")),
    ],
)
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_workloads_compute_in_the_dtype_and_gradients_agree_within_its_tolerance(backend, dtype):
    from ckptbench.backends import registry

    executor = None
    if backend == "jax-engine":
        backend, executor = "jax", "engine"
    elif backend == "torch-one-call":
        backend, executor = "torch", "one-call"
    case = Case(backend=backend, executor=executor, dtype=dtype, steps=30, snaps=4, **SMALL)
    normal = registry.build(case, Mode.NORMAL)
    ckpt = registry.build(case, Mode.CHECKPOINTED)
    leaves = normal.params.values() if isinstance(normal.params, dict) else normal.params
    assert {str(getattr(leaf, "dtype", "")).split(".")[-1] for leaf in leaves} == {dtype}
    loss, grad = normal.gradient(normal.params)
    want = normal.flatten(grad)
    got = ckpt.flatten(ckpt.gradient(ckpt.params)[1])
    assert math.isfinite(loss)
    assert np.max(np.abs(got - want)) <= grad_tolerance(dtype, 30) * np.max(np.abs(want))


# ---------------------------------------------------------------------- step costs


@needing("torch")
def test_torch_step_costs_on_an_asynchronous_device_end_every_timing_with_the_device():
    """What ``--device cuda`` does (torch.cuda.synchronize), run on the CPU with a counting
    stand-in: every timed region ends with the device, and the taped step comes from whole
    synchronised gradients, not from the engine's host clocks."""
    from ckptbench.backends import registry
    from ckptbench.measure.stepcosts import measure_step_costs

    fw = registry.get_backend("torch").framework
    case = Case(backend="torch", steps=40, snaps=4, **SMALL)
    wl, params, state0, inputs = fw.workload(case, fw.setup(case))
    syncs = []
    report = measure_step_costs(
        wl, params, state0, inputs, samples=2, framework=fw, device_sync=lambda: syncs.append(1)
    )
    assert report.timing == "device-synchronized" and report.as_dict()["timing"] == report.timing
    assert len(syncs) >= 2 * 5  # per sample: the forward, the readouts, around the gradient
    c = report.costs
    assert c.taped_time_s >= c.forward_time_s > 0
    host = measure_step_costs(wl, params, state0, inputs, samples=1, framework=fw)
    assert host.timing == "host"


# ---------------------------------------------------------------------- configs


def test_the_gpu_configs_parse_and_name_what_they_promise():
    full = load_config(ROOT / "configs" / "gpu.toml")
    cases = full.cases
    assert len(cases) == 126
    assert {c.device for c in cases} == {"cuda"} and {c.dtype for c in cases} == {"float32"}
    assert {(c.hidden, c.batch) for c in cases} == {
        (h, b) for h in (256, 1024, 2048) for b in (16, 64, 256)
    }
    assert {c.backend for c in cases} == {"torch", "jax"}
    for backend, peer in (("jax", "jax-checkpoint"), ("torch", "torch-checkpoint")):
        mine = [c for c in cases if c.backend == backend and c.hidden == 1024 and c.batch == 64]
        assert sorted((c.strategy, c.snaps) for c in mine if c.strategy != "optimal") == sorted(
            [("revolve", 8), ("revolve", 31), (peer, 8), (peer, 31)]
        )
        assert len({c.budget_bytes for c in mine if c.strategy == "optimal"}) == 3
    check = load_config(ROOT / "configs" / "gpu-check.toml")
    assert len(check.cases) == 10
    # what 31 segments store, and a budget below it (run 6: the first kept 0.49 MiB more on
    # the device than jax.checkpoint), measured first
    jax_opt = [
        c.budget_bytes for c in check.cases if c.backend == "jax" and c.strategy == "optimal"
    ]
    assert jax_opt == [18000000, 19988480] and check.cases[0].budget_bytes == 18000000
    assert {c.executor_used for c in check.cases if c.strategy == "revolve"} == {
        "engine",
        "compiled",
    }


# ---------------------------------------------------------------------- CUDA only


@pytest.mark.torch
@pytest.mark.skipif(not _cuda(), reason="needs a CUDA device")
@pytest.mark.parametrize("executor", ["engine", "one-call"])
@pytest.mark.parametrize("strategy", ["revolve", "optimal"])
def test_torch_executor_never_synchronises_on_cuda(strategy, executor):
    """``torch.cuda.set_sync_debug_mode("error")`` raises at any synchronising call (an
    ``.item()``, a host copy, a data-dependent branch) inside the gradient."""
    import torch

    from ckptbench.backends.torch.binding import revolve_checkpoint
    from ckptbench.backends.torch.workloads import TorchLSTM
    from ckptbench.schedules.optimal.planner import Costs

    wl = TorchLSTM(hidden=64, batch=8, input=8, output=1, device="cuda", dtype="float32")
    params, state0, inputs = wl.init(50, np.random.default_rng(0))
    leaves = [params[k].requires_grad_() for k in sorted(params)]
    if strategy == "optimal":
        sb = sum(t.numel() * t.element_size() for t in state0)
        costs = Costs(forward_time_s=1.0, taped_time_s=3.0, state_bytes=sb, tape_bytes=4 * sb)
        loop = revolve_checkpoint(
            wl.step, wl.post, 50, costs=costs, budget_bytes=20 * sb, executor=executor
        )
    else:
        loop = revolve_checkpoint(wl.step, wl.post, 50, 6, "revolve", executor=executor)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        loss = wl.loss(loop(params, state0, inputs))
        grads = torch.autograd.grad(loss, leaves)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    torch.cuda.synchronize()
    assert all(torch.isfinite(g).all().item() for g in grads)


@pytest.mark.torch
@pytest.mark.skipif(not _cuda(), reason="needs a CUDA device")
def test_torch_phase_times_are_left_out_on_cuda():
    from ckptbench.backends import registry

    case = Case(backend="torch", device="cuda", steps=20, snaps=4, **SMALL)
    ckpt = registry.build(case, Mode.CHECKPOINTED)
    ckpt.gradient(ckpt.params)
    assert ckpt.phases() == {}


# ---------------------------------------------------------------------- the prediction line


@pytest.mark.parametrize("backend", ["torch", "jax"])
@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_run_prints_the_plans_prediction_beside_the_measurement(backend, device):
    from dataclasses import replace

    from _synthetic import make_result, with_case

    from ckptbench.render.run import explain_lines

    case = Case(backend=backend, device=device, steps=40, snaps=40, strategy="store-all")
    result = make_result(case, times={"checkpointed": 0.8})
    plan = {"predicted_time_s": 0.5, "peak_bytes": 2**20}
    modes = tuple(replace(m, plan=plan) if m.mode is Mode.CHECKPOINTED else m for m in result.modes)
    result = with_case(replace(result, modes=modes), strategy="optimal", budget_bytes=2**21)
    (line,) = [x for x in explain_lines(result) if x.startswith("plan: predicted 0.5 s")]
    assert "measured 0.8" in line
    # both times at one precision: a 0.08 s gradient is not "0.08 s" beside "0.0813 s"
    fast = make_result(case, times={"checkpointed": 0.0822})
    fast_plan = {**plan, "predicted_time_s": 0.0813}
    modes = tuple(
        replace(m, plan=fast_plan) if m.mode is Mode.CHECKPOINTED else m for m in fast.modes
    )
    fast = with_case(replace(fast, modes=modes), strategy="optimal", budget_bytes=2**21)
    (line,) = [x for x in explain_lines(fast) if x.startswith("plan: ")]
    assert "predicted 0.0813 s" in line and re.search(r"measured 0\.08\d\d s \(\+\d%[;)]", line)


@pytest.mark.parametrize(
    ("executor", "words"),
    [
        ("engine", "recomputation 0.300 s (60 untaped steps x 5.00 ms)"),
        ("one-call", "advances 0.300 s (60 steps x 5.00 ms; the first sweep's are recorded on"),
    ],
)
def test_where_the_time_goes_names_what_the_executor_advanced(executor, words):
    """one-call records its first sweep's advances on autograd's graph: not untaped runs."""
    from dataclasses import replace

    from _synthetic import make_result

    from ckptbench.render.run import explain_lines

    case = Case(backend="torch", steps=40, snaps=4, executor=executor)
    result = make_result(case, times={"checkpointed": 0.8}, time_cv=0.0)
    phases = {"advance_time_s": 0.3, "taped_time_s": 0.45, "bookkeeping_time_s": 0.01}
    modes = tuple(
        replace(
            m,
            iterations=tuple(replace(it, phases=phases) for it in m.iterations),
            counters={**m.counters, "steps_advanced": 60},
        )
        if m.mode is Mode.CHECKPOINTED
        else m
        for m in result.modes
    )
    (line,) = [x for x in explain_lines(replace(result, modes=modes)) if "time goes" in x]
    assert words in line and "taped steps + reverse 0.450 s" in line
