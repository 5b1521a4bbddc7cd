"""``run --trace``'s times: each action's measured seconds, its predicted seconds from the
plan's costs (the cost model's arithmetic), and the per-layer summary (docs/trace.md)."""

from __future__ import annotations

import math

import pytest

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
        elif act.kind in (ActionKind.TAPE, ActionKind.FIRSTURN, ActionKind.YOUTURN):
            assert sec == cb[act.step]
        else:  # a REVERSE's time is in its TAPE's cost; bookkeeping costs nothing
            assert sec == 0.0
    assert any(a.kind is ActionKind.ADVANCE and a.stop - a.start > 1 for a in acts)
    total = COSTS.fixed_time_s + math.fsum(got)
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
        assert rec["taped_predicted_s"] == COSTS.taped_time_s[s]
        assert rec["forward_measured_s"] == forward[s]
        assert rec["taped_measured_s"] == 0.25 * taped
        assert rec["ratio"] == rec["measured_s"] / rec["predicted_s"]
    # the prediction of the layers is the plan's, less the fixed time
    assert math.fsum(r["predicted_s"] for r in layers) == pytest.approx(
        predict(acts, STEPS, COSTS).time_s - COSTS.fixed_time_s, rel=1e-12
    )
    # no costs: measured only; untimed: predicted only
    bare = layer_times(acts, measured, forward, None, STEPS, str)
    assert "predicted_s" not in bare[0] and "ratio" not in bare[0] and "measured_s" in bare[0]
    untimed = layer_times(acts, None, None, COSTS, STEPS, str)
    assert "measured_s" not in untimed[0] and "predicted_s" in untimed[0]


@pytest.mark.parametrize("backend", ["autograd", "torch"])
def test_the_traced_iteration_times_every_action_of_a_planned_chain(backend):
    pytest.importorskip(backend)
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
    assert math.fsum(r["measured_s"] for r in rows) <= trace["wall_time_s"]
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
