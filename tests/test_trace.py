"""``run --trace``: the engine's per-action rows against ``replay_bytes``, the worker's
traced iteration, the CLI and one real run (see docs/trace.md)."""

from __future__ import annotations

import numpy as np
import pytest
from _frameworks import needing, needs

from ckptbench.engine.trace import TraceRecorder
from ckptbench.schedules import make_schedule, replay_bytes
from ckptbench.schedules.optimal import Costs, plan_optimal
from ckptbench.workloads import Sizes, load_workload

SMALL = {"hidden": 5, "batch": 2, "input": 3, "output": 2}
TAPE_BYTES = 700
STEPS = 20


def _autograd(plan=None, snaps=4):
    import autograd
    import autograd.numpy as anp

    from ckptbench.backends.autograd.binding import binomial_checkpoint

    wl = load_workload("lstm", Sizes(**SMALL))
    params, state0, inputs = wl.init(STEPS, np.random.default_rng(0))
    if plan is None:
        loop = binomial_checkpoint(wl.step, wl.post, STEPS, snaps, tape_bytes=TAPE_BYTES)
    else:
        loop = binomial_checkpoint(wl.step, wl.post, STEPS, plan=plan)

    def run():
        autograd.grad(lambda p: anp.sum(loop(p, state0, inputs)))(params)

    return loop, run


def _torch(plan=None, snaps=4):
    import torch

    from ckptbench.backends.torch.binding import revolve_checkpoint
    from ckptbench.backends.torch.workloads import TorchLSTM

    wl = TorchLSTM(**SMALL)
    params, state0, inputs = wl.init(STEPS, np.random.default_rng(0))
    params = {k: v.detach().clone().requires_grad_() for k, v in params.items()}
    if plan is None:
        loop = revolve_checkpoint(wl.step, wl.post, STEPS, snaps, tape_bytes=TAPE_BYTES)
    else:
        loop = revolve_checkpoint(wl.step, wl.post, STEPS, plan=plan)

    def run():
        torch.sum(loop(params, state0, inputs)).backward()

    return loop, run


BINDINGS = [
    pytest.param(_autograd, id="autograd"),
    pytest.param(
        _torch,
        id="torch",
        marks=needs("torch"),
    ),
]


def _state_bytes() -> int:
    wl = load_workload("lstm", Sizes(**SMALL))
    _, state0, _ = wl.init(STEPS, np.random.default_rng(0))
    return sum(s.nbytes for s in state0)


@pytest.mark.parametrize("make", BINDINGS)
@pytest.mark.parametrize("planned", [False, True], ids=["revolve", "optimal"])
def test_the_trace_plans_the_bytes_replay_bytes_counts_per_action(make, planned):
    sb = _state_bytes()
    if planned:
        costs = Costs(forward_time_s=1.0, taped_time_s=3.0, state_bytes=sb, tape_bytes=TAPE_BYTES)
        plan = plan_optimal(costs, STEPS, 3 * sb + 2 * TAPE_BYTES)
        actions, loop_run = plan.actions(), make(plan=plan)
    else:
        actions, loop_run = make_schedule("revolve", STEPS, 4), make()
    loop, run = loop_run
    rec = TraceRecorder()
    loop.recorder = rec
    run()
    want = replay_bytes(actions, STEPS, sb, TAPE_BYTES, per_action=True)
    assert [r["index"] for r in rec.rows] == list(range(want.stats.actions))
    assert [r["planned_bytes"] for r in rec.rows] == list(want.action_bytes)
    assert max(want.action_bytes) == want.peak_bytes == loop.stats.peak_stored_bytes
    assert rec.rows[-1]["kind"] == "TERMINATE" and rec.rows[-1]["planned_bytes"] == 0
    kinds = {r["kind"]: r for r in rec.rows}
    assert kinds["TAKESHOT"]["stored"].startswith("x_")
    assert kinds["YOUTURN"]["taped"].endswith("(reversed)")
    assert any(r["recomputed"] for r in rec.rows)
    if planned:
        assert kinds["TAPE"]["taped"].endswith("(kept)") and "tape" in kinds["REVERSE"]["freed"]


def test_without_a_recorder_the_engine_records_nothing():
    loop, run = _autograd()
    run()
    assert loop.recorder is None and loop.stats.peak_stored_bytes > 0


def test_replay_bytes_keeps_no_trail_unless_asked():
    r = replay_bytes(make_schedule("revolve", 9, 3), 9, 10, 5)
    assert r.action_bytes == ()
    assert max(replay_bytes(make_schedule("revolve", 9, 3), 9, 10, 5, per_action=True)
               .action_bytes) == r.peak_bytes  # fmt: skip


# ---------------------------------------------------------------------- the worker's side


def _built(mode: str = "checkpointed", strategy: str = "revolve", backend: str = "autograd"):
    from ckptbench.backends import registry
    from ckptbench.results.schema import Case, Mode

    case = Case(model="lstm", steps=STEPS, snaps=4, strategy=strategy, backend=backend,
                hidden=5, batch=2, input=3, output=2, trace=True)  # fmt: skip
    return case, registry.build(case, Mode(mode), None)


@pytest.mark.parametrize("make", BINDINGS)
def test_the_traced_iteration_measures_every_action_as_a_non_negative_int(make):
    from ckptbench.measure.trace import traced_iteration

    backend = "torch" if make is not _autograd else "autograd"
    _, built = _built(backend=backend)
    built.gradient(built.params)
    trace = traced_iteration(built)
    rows = trace["rows"]
    tape = built.counters()["tape_bytes"]  # torch declares its saved tensors', autograd none
    assert (tape > 0) == (backend == "torch")
    want = replay_bytes(
        make_schedule("revolve", STEPS, 4), STEPS, _state_bytes(), tape, per_action=True
    )
    assert len(rows) == want.stats.actions
    assert [r["planned_bytes"] for r in rows] == list(want.action_bytes)
    assert all(isinstance(r["measured_bytes"], int) and r["measured_bytes"] >= 0 for r in rows)
    assert "measured figures do not include it" in trace["note"]
    assert built.trace(None)  # removed again: the next call records nothing


def test_a_mode_without_an_engine_loop_says_why_it_has_no_trace():
    from ckptbench.measure.trace import traced_iteration

    _, built = _built(mode="normal")
    assert set(traced_iteration(built)) == {"unavailable"}


def test_a_peer_strategy_cannot_be_traced():
    from ckptbench.results.schema import Case, CaseError
    from ckptbench.schedules import get_strategy, strategy_names

    peer = next(get_strategy(n) for n in strategy_names() if not get_strategy(n).ours)
    with pytest.raises(CaseError, match="--trace records our schedules"):
        Case(strategy=peer.name, backend=peer.backend, trace=True)


# ---------------------------------------------------------------------- reading it


def _rows(planned, measured, kinds=None):
    kinds = kinds or ["ADVANCE"] * len(planned)
    return [
        {"index": i, "kind": k, "layer": f"step {i}", "planned_bytes": p, "measured_bytes": m}
        for i, (p, m, k) in enumerate(zip(planned, measured, kinds, strict=True))
    ]


def test_the_slack_judges_each_action_and_names_the_layer_above_it():
    from ckptbench.analysis.trace import ALLOCATOR_FLOOR_BYTES, TraceSlack, over_slack

    slack = TraceSlack(gradient_bytes=1000, tape_bytes=100, tape_declared=False)
    assert slack.allocator_bytes == 500 + 200 + ALLOCATOR_FLOOR_BYTES
    base = 1000 + slack.allocator_bytes
    assert slack.of({"kind": "ADVANCE"}) == base
    assert slack.of({"kind": "REVERSE"}) == base + 1100
    assert slack.of({"kind": "YOUTURN"}) == base + 1200  # the undeclared tape too
    rows = _rows([10, 10, 10], [10 + base, 11 + base, 0])
    assert [r["index"] for r in over_slack(rows, slack)] == [1]
    assert TraceSlack(1000, None, False).of({"kind": "ADVANCE"}) is None  # T unknown


def _result_with_trace(rows, tape_bytes=100):
    from ckptbench.results.schema import Case, Mode, ModeResult, RunResult, Status

    trace = {"rows": rows, "gradient_elements": 10, "method": "vmhwm-per-action", "note": "n"}
    mode = ModeResult(Mode.CHECKPOINTED, Status.OK, counters={"tape_bytes": tape_bytes},
                      trace=trace)  # fmt: skip
    return RunResult(Case(steps=3, snaps=2, hidden=4, batch=2), (mode,), {}, "now")


def test_a_trace_over_its_slack_is_a_warning_naming_the_layer():
    from ckptbench.render import warning_lines

    result = _result_with_trace(_rows([0, 0, 0], [0, 50 << 20, 0]))
    lines = warning_lines(result)
    assert any("exceeded the plan" in line and "step 1" in line for line in lines), lines
    assert not any(
        "exceeded the plan" in w for w in warning_lines(_result_with_trace(_rows([0], [0])))
    )


def test_old_result_files_load_and_a_trace_round_trips():
    from ckptbench.results.schema import result_from_dict, result_to_dict

    result = _result_with_trace(_rows([1, 2], [3, 4]))
    doc = result_to_dict(result)
    assert result_from_dict(doc).modes[0].trace == result.modes[0].trace
    del doc["modes"][0]["trace"], doc["case"]["trace"]
    assert result_from_dict(doc).modes[0].trace is None
    doc["modes"][0]["trace"] = {"rows": ["not a row"]}
    with pytest.raises(ValueError, match="trace must be"):
        result_from_dict(doc)


@pytest.mark.parametrize("fmt", ["text", "markdown", "csv", "json", "html"])
def test_every_run_format_shows_the_trace(fmt):
    from ckptbench.render.formats import get_format
    from ckptbench.render.reports import run_report

    result = _result_with_trace(_rows([1024, 2048], [4096, 8192]))
    text = get_format(fmt).render(run_report(result), 200)
    assert ("8192" in text) if fmt in ("csv", "json") else ("Trace" in text or "trace" in text)


def test_the_html_report_plots_and_tables_a_trace():
    from ckptbench.analysis import compare
    from ckptbench.render.html import render_html
    from ckptbench.render.trace import plot_trace

    result = _result_with_trace(_rows([1024, 2048], [4096, 8192]))
    page = render_html(compare([result]))
    assert "Trace" in page and "planned" in page and "<img" in page
    assert plot_trace(result).axes[0].get_ylabel().startswith("MiB")


# ---------------------------------------------------------------------- the command line


def test_trace_without_the_checkpointed_mode_is_a_one_line_error(tmp_path):
    from click.testing import CliRunner

    from ckptbench.cli import cli

    res = CliRunner().invoke(cli, ["run", "--trace", "--modes", "baseline,normal", "--out",
                                   str(tmp_path / "r.json")])  # fmt: skip
    assert res.exit_code == 2
    lines = [line for line in res.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "--trace" in lines[0] and "checkpointed" in lines[0], res.output
    assert not (tmp_path / "r.json").exists()


def test_a_real_traced_run_end_to_end(tmp_path):
    import json
    import os
    import subprocess
    import sys

    out = tmp_path / "r.json"
    proc = subprocess.run(
        [sys.executable, "-m", "ckptbench", "run", "--model", "lstm", "--steps", "9",
         "--snaps", "3", "--hidden", "4", "--batch", "2", "--input", "3", "--rounds", "1",
         "--precision", "off", "--trace", "--out", str(out)],
        capture_output=True, text=True, env={**os.environ, "COLUMNS": "200"},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "Trace: the checkpointed schedule as it ran" in proc.stdout
    assert "the measured figures do not include it" in proc.stdout
    doc = json.loads(out.read_text())
    traced = [m for m in doc["modes"] if m.get("trace")]
    assert [m["mode"] for m in traced] == ["checkpointed"]
    rows = traced[0]["trace"]["rows"]
    assert len(rows) == replay_bytes(make_schedule("revolve", 9, 3), 9, 1, 0).stats.actions
    assert all(isinstance(r["measured_bytes"], int) and r["measured_bytes"] >= 0 for r in rows)
    assert doc["case"]["trace"] is True


@needing("torch")
def test_the_cuda_trace_window_reads_the_peak_since_the_last_read(monkeypatch):
    """torch's per-action device window, against a model of the caching allocator's
    counters (no GPU here: the calls it makes are the ones a GPU would answer)."""
    import torch

    from ckptbench.backends.torch.device import DevicePeakMeter

    state = {"allocated": 100, "peak": 100}
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda d=None: state["allocated"])
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda d=None: state["peak"])
    monkeypatch.setattr(torch.cuda, "reset_peak_memory_stats",
                        lambda d=None: state.update(peak=state["allocated"]))  # fmt: skip
    meter = DevicePeakMeter.__new__(DevicePeakMeter)
    meter.device = torch.device("cuda")
    window = meter.trace_window()
    assert window.start() == 100
    state.update(allocated=150, peak=400)  # an action that peaked at 400 and kept 150
    assert window.read() == 300
    assert window.read() == 50  # the next action allocated nothing: what is held
    assert DevicePeakMeter("cpu").trace_window() is None


def test_a_layer_chain_is_traced_with_its_layer_names():
    from ckptbench.backends import registry
    from ckptbench.measure.trace import traced_iteration
    from ckptbench.results.schema import Case, Mode

    case = Case(model="mlp-stack", steps=4, snaps=2, hidden=8, batch=2, input=3, trace=True)
    built = registry.build(case, Mode.CHECKPOINTED, None)
    rows = traced_iteration(built)["rows"]
    assert len(rows) == replay_bytes(make_schedule("revolve", 4, 2), 4, 1, 0).stats.actions
    layers = {r["layer"] for r in rows if r["kind"] == "YOUTURN"}
    assert layers and not any(name.startswith("step ") for name in layers), layers
