"""torch's one-call executor (``--executor one-call``): the schedule inside one backward pass.

Its gradients, counters and stored bytes are the contract's (tests/test_contract.py runs it
as ``torch-one-call``); here: what makes it one call (no backward call of its own, one
re-run tape alive at a time, the order autograd asks for steps in), what it refuses, and
the case and the command line that choose it.
"""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
from _cli import one_line_error

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch

from ckptbench.backends.torch import onecall  # noqa: E402
from ckptbench.backends.torch.binding import revolve_checkpoint  # noqa: E402
from ckptbench.backends.torch.workloads import TorchLSTM  # noqa: E402
from ckptbench.results.schema import Case, CaseError  # noqa: E402
from ckptbench.schedules import make_schedule, replay  # noqa: E402
from ckptbench.schedules.optimal import Costs, plan_optimal  # noqa: E402

SMALL = {"hidden": 5, "batch": 2, "input": 3, "output": 2}


def _problem(steps: int):
    wl = TorchLSTM(**SMALL)
    params, state0, inputs = wl.init(steps, np.random.default_rng(steps))
    leaves = [params[k].requires_grad_() for k in sorted(params)]
    return wl, params, state0, inputs, leaves


def _backward_calls(monkeypatch) -> list[int]:
    calls = [0]
    real = torch.autograd.backward

    def counted(*args, **kw):
        calls[0] += 1
        return real(*args, **kw)

    monkeypatch.setattr(torch.autograd, "backward", counted)
    return calls


@pytest.mark.parametrize(("executor", "calls_per_step"), [("engine", 1), ("one-call", 0)])
def test_the_engine_reverses_each_step_with_a_call_and_one_call_with_none(
    monkeypatch, executor, calls_per_step
):
    wl, params, state0, inputs, leaves = _problem(30)
    loop = revolve_checkpoint(wl.step, wl.post, 30, 4, executor=executor)
    calls = _backward_calls(monkeypatch)
    torch.autograd.grad(wl.loss(loop(params, state0, inputs)), leaves)
    assert calls[0] == 30 * calls_per_step
    want = replay(make_schedule("revolve", 30, 4), 30)
    assert loop.stats.step_evaluations == want.evaluations  # final once the backward ended


@pytest.mark.parametrize("plan_tapes", [False, True])
def test_one_re_run_tape_is_alive_at_a_time_and_steps_come_in_reverse_order(
    monkeypatch, plan_tapes
):
    """What the engine binding frees before its next reverse, one-call frees before its next
    re-run: at most one re-run tape beyond the plan's kept ones, steps asked for l-1..0."""
    steps = 25
    wl, params, state0, inputs, leaves = _problem(steps)
    if plan_tapes:
        sb = sum(t.numel() * t.element_size() for t in state0)
        costs = Costs(forward_time_s=1.0, taped_time_s=3.0, state_bytes=sb, tape_bytes=2 * sb)
        plan = plan_optimal(costs, steps, 4 * sb + 3 * 2 * sb)
        loop = revolve_checkpoint(wl.step, wl.post, steps, plan=plan, executor="one-call")
        kept = plan.prediction.peak_tapes
    else:
        loop = revolve_checkpoint(wl.step, wl.post, steps, 3, executor="one-call")
        kept = 0
    live_peak, asked = [0], []
    real_tape, real_need = onecall.OneCallOps.tape, onecall._Sweep.need

    def tape(self, state, i, outputs):
        made = real_tape(self, state, i, outputs)
        live_peak[0] = max(live_peak[0], len(self.live))
        return made

    def need(self, step):
        asked.append(step)
        return real_need(self, step)

    monkeypatch.setattr(onecall.OneCallOps, "tape", tape)
    monkeypatch.setattr(onecall._Sweep, "need", need)
    torch.autograd.grad(wl.loss(loop(params, state0, inputs)), leaves)
    assert 1 <= live_peak[0] <= kept + 1
    assert asked == sorted(asked, reverse=True) and len(set(asked)) == len(asked)
    assert asked[-1] == 0


def test_a_second_backward_through_one_call_is_refused_in_one_line():
    wl, params, state0, inputs, leaves = _problem(12)
    loop = revolve_checkpoint(wl.step, wl.post, 12, 3, executor="one-call")
    loss = wl.loss(loop(params, state0, inputs))
    first = torch.autograd.grad(loss, leaves, retain_graph=True)
    assert all(torch.isfinite(g).all() for g in first)
    with pytest.raises(RuntimeError, match="reverses a call once") as info:
        torch.autograd.grad(loss, leaves)
    assert "\n" not in str(info.value).strip()


def test_without_grad_the_loop_is_a_plain_forward():
    wl, params, state0, inputs, _ = _problem(10)
    loop = revolve_checkpoint(wl.step, wl.post, 10, 3, executor="one-call")
    with torch.no_grad():
        out = loop(params, state0, inputs)
    engine = revolve_checkpoint(wl.step, wl.post, 10, 3)(params, state0, inputs)
    assert out.grad_fn is None
    torch.testing.assert_close(out, engine.detach(), rtol=0, atol=0)


def test_run_tells_a_user_of_one_call_on_the_cpu_what_it_costs_there():
    from ckptbench.backends import registry
    from ckptbench.cli.run_steps import executor_notes

    spec = registry.spec("torch")
    assert "glibc's heap" in spec.executor_note("one-call", "cpu")
    assert spec.executor_note("one-call", "cuda") is None
    assert spec.executor_note("engine", "cpu") is None
    (note,) = executor_notes(Case(backend="torch", executor="one-call"))
    assert note == spec.executor_note("one-call", "cpu")
    peer = Case(backend="torch", executor="one-call", strategy="torch-checkpoint")
    assert executor_notes(peer) == ()  # it runs no executor of ours
    assert executor_notes(Case(backend="torch", executor="one-call", device="cuda")) == ()


def test_the_case_and_the_command_line_choose_it(capsys, tmp_path):
    case = Case(backend="torch", executor="one-call")
    assert case.executor_used == "one-call" and "-one-call-" in case.key
    assert Case.from_dict(case.to_dict()) == case
    with pytest.raises(CaseError, match="--executor one-call needs --backend torch") as info:
        Case(backend="jax", executor="one-call")
    assert str(info.value).endswith("runs our schedules with --executor engine or compiled only)")
    err = one_line_error(
        capsys,
        ["run", "--backend", "torch", "--model", "mlp-stack", "--executor", "one-call",
         "--steps", "4", "--out", str(tmp_path / "r")],
    )  # fmt: skip
    assert "layer chain" in err and "--executor engine, not one-call" in err
    assert not (tmp_path / "r").exists()


@pytest.mark.slow
def test_run_measures_it_end_to_end(tmp_path):
    out = tmp_path / "one.json"
    cmd = [sys.executable, "-m", "ckptbench", "run", "--backend", "torch", "--executor",
           "one-call", "--steps", "40", "--snaps", "5", "--hidden", "4", "--batch", "2",
           "--rounds", "1", "--repeats", "2", "--out", str(out)]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert "note --executor one-call on the CPU: the first sweep's recorded graph" in proc.stderr
    doc = json.loads(out.read_text())
    assert doc["case"]["executor"] == "one-call"
    assert doc["environment"]["executor"] == "one-call"
    ckpt = next(m for m in doc["modes"] if m["mode"] == "checkpointed")
    assert ckpt["status"] == "ok" and ckpt["grad_max_rel_err"] <= 1e-12
    want = replay(make_schedule("revolve", 40, 5), 40).evaluations
    counters = ckpt["counters"]
    assert counters["step_calls"] == counters["steps_advanced"] + counters["steps_taped"] == want


PLUGIN_CHAIN = """
import torch


class Chain:
    def init(self, layers, rng):
        params = [torch.tensor(rng.standard_normal((4, 4)) / 3) for _ in range(layers)]
        return params, torch.tensor(rng.standard_normal((2, 4)))

    def layer(self, i, params, x):
        return torch.tanh(x @ params)

    def loss(self, x):
        return (x**2).mean()


def make(**sizes):
    return Chain()
"""


def test_a_plugin_chain_is_refused_in_the_worker_too(tmp_path, monkeypatch):
    """A plug-in is only known to be a chain once loaded: the backend refuses it there."""
    from ckptbench.backends import registry
    from ckptbench.results.schema import Mode

    (tmp_path / "net.py").write_text(PLUGIN_CHAIN)
    monkeypatch.chdir(tmp_path)
    case = Case(model="net.py:make", backend="torch", executor="one-call", steps=4, snaps=2)
    with pytest.raises(ValueError, match=r"is a layer chain: on torch .* not one-call"):
        registry.build(case, Mode.CHECKPOINTED)
    normal = registry.build(case, Mode.NORMAL)  # the other modes run no executor of ours
    assert np.isfinite(normal.gradient(normal.params)[0])


def _loop_calls(monkeypatch) -> list[int]:
    calls = [0]
    real = onecall.OneCallLoop.__call__

    def counted(self, *args):
        calls[0] += 1
        return real(self, *args)

    monkeypatch.setattr(onecall.OneCallLoop, "__call__", counted)
    return calls


def test_a_plan_for_one_call_is_priced_through_one_call(monkeypatch):
    """The planner's taped step is timed through the executor that will run the plan: for
    one-call, whole store-all gradients through it (its recorded first sweep included)."""
    from ckptbench.backends import registry

    fw = registry.get_backend("torch").framework
    calls = _loop_calls(monkeypatch)
    engine = fw.measure_costs(Case(backend="torch", steps=30, snaps=4, **SMALL))
    assert (engine["executor"], engine["taped_method"], calls[0]) == ("engine", "phase-timer", 0)
    one = fw.measure_costs(Case(backend="torch", steps=30, snaps=4, executor="one-call", **SMALL))
    assert (one["executor"], one["taped_method"]) == ("one-call", "whole-gradient")
    assert calls[0] >= 2  # per sample: one untimed call, then the timed one
    costs = Costs.from_dict(one["costs"])
    assert costs.taped_time_s >= costs.forward_time_s > 0


def test_a_device_whose_default_is_one_call_runs_and_prices_one_call(monkeypatch):
    """Without --executor, the backend's default on the case's device decides (as JAX's
    compiled executor on the CPU): the binding is told, and so is the cost measurement."""
    from ckptbench.backends import registry
    from ckptbench.results import schema

    real = schema.default_executor
    monkeypatch.setattr(
        schema, "default_executor", lambda b, d: "one-call" if b == "torch" else real(b, d)
    )
    case = Case(backend="torch", steps=20, snaps=3, **SMALL)
    assert case.executor is None and case.executor_used == "one-call"
    calls = _loop_calls(monkeypatch)
    built = registry.build(case, schema.Mode.CHECKPOINTED)
    built.gradient(built.params)
    assert calls[0] == 1
    assert registry.get_backend("torch").framework.measure_costs(case)["executor"] == "one-call"


def test_a_torch_result_records_torch_and_a_peer_records_no_executor_of_ours(tmp_path):
    """Its provenance named numpy and autograd only, and a torch.utils.checkpoint cell said
    it ran the engine executor."""
    from ckptbench.analysis import compare
    from ckptbench.measure.runner import run_case
    from ckptbench.render.html import render_html

    case = Case(backend="torch", strategy="torch-checkpoint", steps=6, snaps=2, hidden=8,
                batch=2, input=4, warmup=0, repeats=1, rounds=1)  # fmt: skip
    result = run_case(case, out_path=tmp_path / "r.json")
    assert result.ok
    assert result.environment["executor"] is None
    assert result.environment["numpy"]["torch_version"] == torch.__version__
    page = render_html(compare([result]))
    assert f"<dd>{torch.__version__}</dd>" in page or torch.__version__ in page
