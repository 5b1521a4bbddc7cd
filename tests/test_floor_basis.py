"""The recomputation floor prices each extra evaluation at its own layer's share of the
baseline where the run has per-layer forward costs (strategy optimal's plan: measured or
``--costs``, and the replay of its stream, ``step_advances``), else at the mean layer
(``floor_basis``). Until 2026-11-30 it was always the mean layer: on cnn-stack, whose first
convolutions cost most and are the ones a plan recomputes, the floor read low."""

from __future__ import annotations

import json
import statistics
from dataclasses import replace

import pytest
from _cli import run_cli
from _synthetic import make_result

from ckptbench.analysis.summary import recompute_floor_s
from ckptbench.frame import read_results
from ckptbench.render.run import explain_lines
from ckptbench.results.schema import Case, Mode, save_result
from ckptbench.schedules.fates import step_fates
from ckptbench.schedules.optimal import Costs, plan_optimal

STACK = Case(model="mlp-stack", steps=6, snaps=6, hidden=8, strategy="optimal",
             budget_bytes=2**20, repeats=3)  # fmt: skip
ADVANCES = [2, 1, 0, 1, 0, 0]  # 4 extra evaluations
FORWARD = [0.004, 0.003, 0.001, 0.002, 0.001, 0.0001]
PER_LAYER, MEAN_LAYER = "per-layer costs", "mean layer"  # floor_basis


def floor_extra(*args):
    """``analysis.floor.floor_extra``, imported here so that the tests of the summary and
    of a real run fail on the code before it (2026-11-30) for what they check."""
    from ckptbench.analysis.floor import floor_extra as extra

    return extra(*args)


def _with_plan(result, plan):
    modes = tuple(replace(m, plan=plan) if m.mode is Mode.CHECKPOINTED else m for m in result.modes)
    return replace(result, modes=modes)


def _stack_result(forward=FORWARD, advances=ADVANCES, rounds=1):
    counters = {"step_calls": 10, "steps_advanced": sum(advances), "steps_taped": 6}
    result = make_result(STACK, rounds=rounds, time_cv=0.0, counters=counters)
    return _with_plan(result, {"costs": {"forward_time_s": forward}, "step_advances": advances})


def _median(result, mode):
    return statistics.median(it.wall_time_s for it in result.mode(mode).iterations)


@pytest.mark.parametrize("advances", [[2, 1, 0, 1, 0, 0], [5, 4, 3, 2, 1, 0], [0] * 6])
@pytest.mark.parametrize("cost", [0.1, 3.7e-4, 1e-9, 1])
def test_equal_shares_give_exactly_the_mean_layer_floor(advances, cost):
    steps, extra = 6, sum(advances)
    plan = {"costs": {"forward_time_s": [cost] * steps}, "step_advances": advances}
    got = floor_extra(steps + extra, steps, plan)
    assert got.basis == PER_LAYER and got.steps == extra
    base, plain = 0.0937, 1.234
    old = plain + max(steps + extra - steps, 0) * base / steps  # the formula before
    assert recompute_floor_s(base, plain, got.steps, steps) == old  # exactly


def test_unequal_shares_price_each_recomputed_layer_at_its_own_cost():
    base, plain, steps = 0.05, 0.4, 6
    got = floor_extra(steps + 4, steps, {"costs": {"forward_time_s": FORWARD},
                                         "step_advances": ADVANCES})  # fmt: skip
    hand = plain + sum(a * base * c / sum(FORWARD) for a, c in zip(ADVANCES, FORWARD, strict=True))
    assert got.basis == PER_LAYER and got.evaluations == 4
    assert recompute_floor_s(base, plain, got.steps, steps) == pytest.approx(hand, rel=1e-12)
    # the expensive first layers are the recomputed ones: above the mean layer's floor
    assert hand > plain + 4 * base / steps


@pytest.mark.parametrize(
    "plan",
    [
        None,
        {},
        {"costs": {"forward_time_s": 0.003}, "step_advances": ADVANCES},  # homogeneous costs
        {"costs": {"forward_time_s": FORWARD}},  # no replay
        {"costs": {"forward_time_s": FORWARD[:5]}, "step_advances": ADVANCES},
        {"costs": {"forward_time_s": FORWARD}, "step_advances": [1, 1, 0, 1, 0, 0]},  # sum 3
        {"costs": {"forward_time_s": [0.0] * 6}, "step_advances": ADVANCES},
        {"costs": {"forward_time_s": [*FORWARD[:5], -1.0]}, "step_advances": ADVANCES},
        {"costs": {"forward_time_s": [*FORWARD[:5], float("nan")]}, "step_advances": ADVANCES},
        {"costs": {"forward_time_s": [*FORWARD[:5], True]}, "step_advances": ADVANCES},
        {"costs": {"forward_time_s": FORWARD}, "step_advances": [2, 1, 0, 1, 0, 0.0]},
        {"costs": "x", "step_advances": "210100"},
    ],
)
def test_without_usable_per_layer_costs_the_floor_is_the_mean_layers(plan):
    got = floor_extra(10, 6, plan)
    assert got.basis == MEAN_LAYER and got.steps == 4.0
    assert floor_extra(None, 6, plan) is None


def test_the_summary_result_and_frame_carry_the_per_layer_floor_and_its_basis(tmp_path):
    result = _stack_result(rounds=3)
    s = result.summary
    base, plain = _median(result, Mode.BASELINE), _median(result, Mode.NORMAL)
    hand = plain + sum(a * base * c / sum(FORWARD) for a, c in zip(ADVANCES, FORWARD, strict=True))
    assert s.floor_time_s == pytest.approx(hand, rel=1e-12) and s.floor_basis == PER_LAYER
    assert s.floor_time_s > plain + 4 * base / 6  # the mean layer's
    # round by round too: each round's floor from its own baseline, the same shares
    want = []
    for k in range(3):
        t = {
            m.mode: statistics.median(it.wall_time_s for it in m.iterations)
            for m in result.modes
            if m.round == k
        }
        share = sum(a * c for a, c in zip(ADVANCES, FORWARD, strict=True)) / sum(FORWARD)
        want.append(t[Mode.CHECKPOINTED] / (t[Mode.NORMAL] + share * t[Mode.BASELINE]))
    assert s.floor_ratio.per_round == pytest.approx(want, rel=1e-12)
    doc = s.as_dict()
    assert doc["floor_basis"] == "per-layer costs" and doc["floor_time_s"] == s.floor_time_s
    path = tmp_path / "r.json"
    save_result(result, path)
    tidy = read_results([path]).set_index("mode")
    assert tidy.loc["checkpointed", "floor_basis"] == "per-layer costs"
    (line,) = [x for x in explain_lines(result) if x.startswith("recomputation floor")]
    assert "(per-layer costs: plain" in line and "at the mean layer's" in line


def test_a_run_without_per_layer_costs_says_mean_layer():
    result = make_result(STACK.with_(strategy="revolve", snaps=2, budget_bytes=None), rounds=2)
    assert result.summary.floor_basis == MEAN_LAYER
    assert result.summary.as_dict()["floor_basis"] == "mean layer"
    (line,) = [x for x in explain_lines(result) if x.startswith("recomputation floor")]
    assert "(mean layer: plain" in line and "the forward-only step)" in line
    lstm = make_result(STACK.with_(model="lstm", strategy="revolve", snaps=2, budget_bytes=None))
    assert lstm.summary.floor_basis == MEAN_LAYER


def test_a_plan_records_how_often_it_recomputes_each_step():
    costs = Costs(FORWARD, 0.01, [4096, 2048, 1024, 512, 256, 128], 8192)
    plan = plan_optimal(costs, 6, 4096 + 2 * 8192 + 2048)
    advances = plan.summary()["step_advances"]
    assert advances == [f.advances for f in step_fates(plan.action_list, 6)]
    assert sum(advances) == plan.prediction.advances


def test_a_real_optimal_run_on_a_layer_stack_prices_its_floor_per_layer(tmp_path, capsys):
    out_file = tmp_path / "r.json"
    argv = ["run", "--model", "cnn-stack", "--steps", "6", "--hidden", "8", "--batch", "2",
            "--strategy", "optimal", "--budget", "500KiB", "--rounds", "1", "--repeats", "2",
            "--out", str(out_file)]  # fmt: skip
    code, out, err = run_cli(capsys, argv)
    assert code == 0, err
    doc = json.loads(out_file.read_text())
    modes = {m["mode"]: m for m in doc["modes"]}
    plan, counters = modes["checkpointed"]["plan"], modes["checkpointed"]["counters"]
    advances, forward = plan["step_advances"], plan["costs"]["forward_time_s"]
    # the replay and the engine agree on the recomputations
    assert sum(advances) == counters["steps_advanced"] == counters["step_calls"] - 6 > 0

    def median(mode):
        return statistics.median(it["wall_time_s"] for it in modes[mode]["iterations"])

    base = median("baseline")
    hand = median("normal") + sum(
        a * base * c / sum(forward) for a, c in zip(advances, forward, strict=True)
    )
    summary = doc["summary"]
    assert summary["floor_basis"] == "per-layer costs"
    assert summary["floor_time_s"] == pytest.approx(hand, rel=1e-12)
    (line,) = [x for x in out.splitlines() if x.startswith("recomputation floor")]
    assert "(per-layer costs: plain" in line
