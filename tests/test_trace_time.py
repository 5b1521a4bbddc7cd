"""``run --trace``'s times: each action's measured seconds, its predicted seconds from the
plan's costs (the cost model's arithmetic), and the per-layer summary (docs/trace.md)."""

from __future__ import annotations

import math

import pytest
from _frameworks import needs

from ckptbench.engine.trace_time import layer_times, predicted_seconds
from ckptbench.schedules import ActionKind
from ckptbench.schedules.cost_model import predict
from ckptbench.schedules.optimal import Costs, plan_optimal

STEPS = 6
# A synthetic cost table: every step its own forward and taped cost, states and tapes.
COSTS = Costs(
    forward_time_s=(1.0, 2.0, 4.0, 8.0, 16.0, 32.0),
    taped_time_s=(100.0, 200.0, 300.0, 400.0, 500.0, 600.0),
    state_bytes=(10, 20, 30, 40, 50, 60),
    tape_bytes=(100, 90, 80, 70, 60, 50),
    fixed_time_s=0.5,
)


def _plan():
    return plan_optimal(COSTS, STEPS, 200)


def test_predicted_seconds_are_the_cost_models_per_action_arithmetic():
    acts = list(_plan().actions())
    got = predicted_seconds(acts, COSTS, STEPS)
    cf, cb = COSTS.forward_time_s, COSTS.taped_time_s
    for act, sec in zip(acts, got, strict=True):
        if act.kind is ActionKind.ADVANCE:
            assert sec == math.fsum(cf[act.start : act.stop])
        elif act.kind is ActionKind.FIRSTURN:  # a chain's loss runs in its last turn
            assert sec == cb[act.step] + COSTS.fixed_time_s and act.step == STEPS - 1
        elif act.kind in (ActionKind.TAPE, ActionKind.YOUTURN):
            assert sec == cb[act.step]
        else:  # a REVERSE's time is in its TAPE's cost; bookkeeping costs nothing
            assert sec == 0.0
    assert any(a.kind is ActionKind.ADVANCE and a.stop - a.start > 1 for a in acts)
    total = math.fsum(got)  # the loss included: the cost model's time, every part charged
    assert total == pytest.approx(predict(acts, STEPS, COSTS).time_s, rel=1e-12)


def test_the_layer_summary_adds_each_layers_predicted_and_measured_time():
    acts = list(_plan().actions())
    measured = [0.25] * len(acts)
    forward = [float(s) for s in range(STEPS)]
    layers = layer_times(acts, measured, forward, COSTS, STEPS, lambda s: f"L{s}")
    assert [r["layer"] for r in layers] == [f"L{s}" for s in range(STEPS)]
    for s, rec in enumerate(layers):
        runs = sum(1 for a in acts if a.kind is ActionKind.ADVANCE and a.start <= s < a.stop)
        taped = sum(
            1 for a in acts
            if a.step == s and a.kind.name in ("TAPE", "FIRSTURN", "YOUTURN", "REVERSE")
        )  # fmt: skip
        assert rec["forward_predicted_s"] == runs * COSTS.forward_time_s[s]
        loss = COSTS.fixed_time_s if s == STEPS - 1 else 0.0
        assert rec["taped_predicted_s"] == COSTS.taped_time_s[s] + loss
        assert rec["forward_measured_s"] == forward[s]
        assert rec["taped_measured_s"] == 0.25 * taped
        assert rec["ratio"] == rec["measured_s"] / rec["predicted_s"]
    # the prediction of the layers is the plan's: a chain's loss is in its last layer's
    assert math.fsum(r["predicted_s"] for r in layers) == pytest.approx(
        predict(acts, STEPS, COSTS).time_s, rel=1e-12
    )
    # no costs: measured only; untimed: predicted only
    bare = layer_times(acts, measured, forward, None, STEPS, str)
    assert "predicted_s" not in bare[0] and "ratio" not in bare[0] and "measured_s" in bare[0]
    untimed = layer_times(acts, None, None, COSTS, STEPS, str)
    assert "measured_s" not in untimed[0] and "predicted_s" in untimed[0]


@pytest.mark.parametrize("backend", ["autograd", pytest.param("torch", marks=needs("torch"))])
def test_the_traced_iteration_times_every_action_of_a_planned_chain(backend):
    from ckptbench.backends import registry
    from ckptbench.measure.trace import traced_iteration
    from ckptbench.results.schema import Case, Mode

    steps = 5
    costs = Costs(
        forward_time_s=tuple(1e-5 * (i + 1) for i in range(steps)),
        taped_time_s=tuple(3e-5 * (i + 1) for i in range(steps)),
        state_bytes=64,
        tape_bytes=256,
    )
    case = Case(model="mlp-stack", steps=steps, strategy="optimal", backend=backend,
                budget_bytes=3 * 64 + 2 * 256, hidden=8, batch=2, input=3,
                trace=True)  # fmt: skip
    built = registry.build(case, Mode.CHECKPOINTED, costs.as_dict())
    built.gradient(built.params)
    trace = traced_iteration(built)
    rows, layers = trace["rows"], trace["layers"]
    assert trace["time_method"] == "perf-counter-per-action"
    assert all(r["measured_s"] >= 0 for r in rows)
    # the actions' windows do not overlap and lie inside the traced gradient
    assert math.fsum(r["measured_s"] for r in rows) <= trace["timed_wall_time_s"]
    plan_actions = [r for r in rows if r["kind"] != "TERMINATE"]
    assert rows[-1]["measured_s"] == 0.0 and plan_actions
    cf, cb = costs.forward_time_s, costs.taped_time_s
    for r in rows:  # the row's prediction is the cost model's (the row's own range)
        if r["kind"] in ("TAPE", "FIRSTURN", "YOUTURN"):
            assert r["predicted_s"] == cb[r["step"]]
        elif r["kind"] != "ADVANCE":
            assert r["predicted_s"] == 0.0
    assert math.fsum(r["predicted_s"] for r in rows) == pytest.approx(
        math.fsum(x["predicted_s"] for x in layers), rel=1e-12
    )
    assert [x["step"] for x in layers] == list(range(steps))
    for x in layers:
        assert x["measured_s"] >= x["forward_measured_s"] >= 0 and x["taped_measured_s"] > 0
        assert x["taped_predicted_s"] == cb[x["step"]]
        assert x["forward_predicted_s"] == pytest.approx(
            cf[x["step"]] * round(x["forward_predicted_s"] / cf[x["step"]]), rel=1e-12
        )


def test_an_untimed_trace_leaves_the_times_out():
    from ckptbench.backends import registry
    from ckptbench.measure.trace import UNTIMED_NOTE, traced_iteration
    from ckptbench.results.schema import Case, Mode

    case = Case(model="mlp-stack", steps=4, snaps=2, hidden=8, batch=2, input=3, trace=True)
    built = registry.build(case, Mode.CHECKPOINTED, None)
    trace = traced_iteration(built, timed=False)
    assert trace["time_method"] is None and trace["time_note"] == UNTIMED_NOTE
    assert all(r["measured_s"] is None and "predicted_s" not in r for r in trace["rows"])
    assert all("measured_s" not in x for x in trace["layers"])


# ---------------------------------------------------------------------- shown


def _result(layers, rows=40):
    from ckptbench.results.schema import Case, Mode, ModeResult, RunResult, Status

    trace = {
        "rows": [{"index": i, "kind": "ADVANCE", "layer": f"L{i}", "planned_bytes": 0,
                  "measured_bytes": 0} for i in range(rows)],
        "layers": layers, "method": "vmhwm-per-action", "note": "n", "wall_time_s": 1.0,
    }  # fmt: skip
    mode = ModeResult(Mode.CHECKPOINTED, Status.OK, counters={"tape_bytes": 1}, trace=trace)
    return RunResult(Case(steps=3, snaps=2, hidden=4, batch=2), (mode,), {}, "now")


def _layer(step, predicted, measured):
    return {"step": step, "layer": f"L{step}", "predicted_s": predicted,
            "measured_s": measured, "ratio": measured / predicted}  # fmt: skip


def test_the_time_table_puts_the_layers_furthest_over_their_prediction_first():
    from ckptbench.render.trace_time import SHOWN_LAYERS, layer_time_table

    few = layer_time_table(_result([_layer(0, 1.0, 1.5), _layer(1, 1.0, 3.0), _layer(2, 2, 1)]))
    assert [r["layer"] for r in few.records] == ["L1", "L0", "L2"]
    assert "every layer" in few.title
    many = [_layer(s, 1.0, 1.0 + s / 100) for s in range(40)]
    table = layer_time_table(_result(many))
    assert len(table.records) == SHOWN_LAYERS and table.records[0]["layer"] == "L39"
    assert any("28 more layers in the result file" in n for n in table.notes)
    assert layer_time_table(_result([])) is None  # an older trace: no times, no table


def test_a_recurrences_time_table_speaks_of_steps_not_layers():
    from ckptbench.render.trace_time import layer_time_table

    steps = [{**_layer(s, 1.0, 1.0 + s / 100), "layer": f"step {s}"} for s in range(40)]
    table = layer_time_table(_result(steps))
    assert table.title.startswith("Trace time per step (12 of 40 steps, ")
    assert table.columns[0].header == "step"
    assert any(n.startswith("28 more steps in the result file") for n in table.notes)


def test_plain_text_shows_the_first_and_last_actions_every_other_format_all():
    from ckptbench.render.formats import get_format
    from ckptbench.render.reports import run_report
    from ckptbench.render.trace import TEXT_ROWS

    report = run_report(_result([_layer(0, 1.0, 2.0)], rows=100))
    text = get_format("text").render(report, 200)
    assert "Trace time per layer" in text and "2.00x" in text
    assert f"{100 - TEXT_ROWS} of 100 rows left out here" in text
    assert "L99" in text and "L50" not in text
    markdown = get_format("markdown").render(report, 200)
    assert "L50" in markdown and "left out here" not in markdown
    assert "L50" in get_format("csv").render(report, 200)


def test_old_result_files_with_a_trace_load_and_show_no_time_table():
    from ckptbench.render.formats import get_format
    from ckptbench.render.reports import run_report
    from ckptbench.results.schema import result_from_dict, result_to_dict

    doc = result_to_dict(_result([_layer(0, 1.0, 2.0)]))
    assert result_from_dict(doc).modes[0].trace["layers"][0]["ratio"] == 2.0
    del doc["modes"][0]["trace"]["layers"], doc["modes"][0]["trace"]["wall_time_s"]
    text = get_format("text").render(run_report(result_from_dict(doc)), 200)
    assert "Trace: the checkpointed schedule" in text and "Trace time per layer" not in text


def test_run_trace_on_a_planned_stack_shows_the_time_per_layer(tmp_path):
    import json

    from click.testing import CliRunner

    from ckptbench.cli import cli

    out = tmp_path / "r.json"
    res = CliRunner().invoke(cli, [
        "run", "--model", "mlp-stack", "--backend", "autograd", "--steps", "6",
        "--hidden", "8", "--batch", "2", "--input", "3", "--strategy", "optimal",
        "--budget", "8KiB", "--rounds", "1", "--warmup", "0", "--repeats", "1",
        "--precision", "off", "--trace", "--out", str(out),
    ], env={"COLUMNS": "200"})  # fmt: skip
    assert res.exit_code == 0, res.output
    assert "Trace time per layer (every layer, furthest over its prediction first)" in res.output
    assert "measured/predicted" in res.output and "all layers: predicted" in res.output
    doc = json.loads(out.read_text())
    trace = next(m["trace"] for m in doc["modes"] if m.get("trace"))
    assert [x["step"] for x in trace["layers"]] == list(range(6))
    assert all(x["measured_s"] >= 0 and x["predicted_s"] > 0 for x in trace["layers"])
    costs = next(m["plan"]["costs"] for m in doc["modes"] if m.get("trace"))
    loss = [0.0] * 5 + [costs["fixed_time_s"]]  # the loss, in the last layer's turn
    want = [t + x for t, x in zip(costs["taped_time_s"], loss, strict=True)]
    assert [x["taped_predicted_s"] for x in trace["layers"]] == want
    assert all(r["measured_s"] >= 0 for r in trace["rows"])
