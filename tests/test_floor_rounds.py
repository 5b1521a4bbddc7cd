"""The recomputation floor round by round, and a plan's prediction beside its fastest
iteration (GPU run 8, 2026-11-28: one fresh worker ran every forward-only step 1.6x slower
than the next; a pooled floor hid that, and the plan's minima met the median at +19%)."""

from __future__ import annotations

import math
import statistics
from dataclasses import replace

import pytest
from _synthetic import CI_CASE, make_result, with_case

from ckptbench.analysis.summary import floor_estimate
from ckptbench.render.run import explain_lines
from ckptbench.results import summary as summary_module
from ckptbench.results.schema import Iteration, Mode
from ckptbench.results.units import interval_text


def _scaled(result, factors):
    """``result`` with each (round, mode)'s iteration times multiplied by ``factors``."""
    modes = []
    for m in result.modes:
        f = factors.get((m.round, m.mode), 1.0)
        its = tuple(replace(it, wall_time_s=it.wall_time_s * f) for it in m.iterations)
        modes.append(replace(m, iterations=its))
    return replace(result, modes=tuple(modes))


def _median(values):
    values = sorted(values)
    return values[len(values) // 2]


def test_each_round_prices_its_extra_evaluations_at_its_own_forward_only_step():
    # exact times (no noise), three rounds; round 2's baseline worker runs 1.6x slower
    result = make_result(CI_CASE, rounds=3, time_cv=0.0)
    result = _scaled(result, {(1, Mode.BASELINE): 1.6, (2, Mode.CHECKPOINTED): 1.3})
    s = result.summary
    ev = s.step_evaluations
    assert ev is not None and ev > CI_CASE.steps
    want = []
    for k in range(3):
        t = {m.mode: _median([it.wall_time_s for it in m.iterations])
             for m in result.modes if m.round == k}  # fmt: skip
        floor = t[Mode.NORMAL] + (ev - CI_CASE.steps) * t[Mode.BASELINE] / CI_CASE.steps
        want.append(t[Mode.CHECKPOINTED] / floor)
    got = s.floor_ratio.per_round
    assert got == pytest.approx(want, rel=1e-12)
    assert want[1] < want[0] < want[2]  # the slow baseline raised round 2's floor
    low, high = s.floor_ratio.interval
    assert low <= s.vs_floor <= high and low <= min(want) and max(want) <= high
    doc = s.as_dict()
    assert doc["vs_floor_per_round"] == pytest.approx(want, rel=1e-12)
    assert doc["vs_floor_ci"] == [low, high]
    (line,) = [x for x in explain_lines(result) if x.startswith("recomputation floor")]
    rounds = ", ".join(f"{v:.2f}x" for v in want)
    lo, hi = interval_text(low, high, 2)  # rounded outward
    assert f"x the floor [{lo}, {hi}] (rounds {rounds})" in line
    # vs_floor is estimated as the slowdown is: the geometric mean of the rounds' ratios
    assert s.vs_floor == pytest.approx(math.exp(statistics.fmean(map(math.log, want))))


def test_one_round_or_uncounted_evaluations_give_no_rounds():
    one = make_result(CI_CASE, seed=4)
    (line,) = [x for x in explain_lines(one) if x.startswith("recomputation floor")]
    assert "(rounds" not in line and one.summary.floor_ratio.rounds == 1
    peer = tuple(
        replace(m, counters={}) if m.mode is Mode.CHECKPOINTED else m
        for m in make_result(CI_CASE, rounds=2).modes
    )
    assert floor_estimate(peer, None, CI_CASE.steps) is None
    s = summary_module.compute(CI_CASE, peer)
    assert s.floor_ratio is None and s.as_dict()["vs_floor_ci"] is None


def test_a_round_without_its_baseline_is_left_out_of_the_floor():
    result = make_result(CI_CASE, rounds=3, time_cv=0.0)
    modes = tuple(m for m in result.modes if not (m.round == 1 and m.mode is Mode.BASELINE))
    extra = result.summary.step_evaluations - CI_CASE.steps  # in mean steps: no costs
    est = floor_estimate(modes, extra, CI_CASE.steps)
    assert est is not None and est.n_rounds == 2


def test_the_plan_line_sets_the_fastest_iteration_beside_the_median():
    result = make_result(CI_CASE, seed=5, time_cv=0.2, times={"checkpointed": 1.2})
    plan = {"predicted_time_s": 1.0, "peak_bytes": 2**20}
    modes = tuple(replace(m, plan=plan) if m.mode is Mode.CHECKPOINTED else m for m in result.modes)
    result = with_case(replace(result, modes=modes), strategy="optimal", budget_bytes=2**21)
    ckpt = result.mode(Mode.CHECKPOINTED)
    times = [it.wall_time_s for it in ckpt.iterations]
    best, median = min(times), _median(times)
    assert best < median
    (line,) = [x for x in explain_lines(result) if x.startswith("plan: predicted")]
    assert f"measured {median:.3g} s ({median - 1:+.0%}; fastest iteration {best:.3g} s, " in line
    assert f"{best - 1:+.0%})" in line
    assert isinstance(ckpt.iterations[0], Iteration)


def test_compare_shows_the_floors_interval(tmp_path):
    from ckptbench.frame import read_results
    from ckptbench.results.schema import save_result

    result = _scaled(make_result(CI_CASE, rounds=3, time_cv=0.0), {(1, Mode.BASELINE): 1.6})
    save_result(result, tmp_path / "r.json")
    row = read_results([tmp_path]).iloc[0]
    low, high = result.summary.floor_ratio.interval
    assert (row["vs_floor_low"], row["vs_floor_high"]) == pytest.approx((low, high))


def test_one_rounds_floor_interval_is_in_runs_line_as_in_compare(tmp_path, capsys):
    """One round of three iterations a mode: compare printed 'vs floor [95%] 1.41x [1.04,
    1.67]' and run's floor line '1.41x the floor' with no interval."""
    import json

    from _cli import run_cli

    result = make_result(CI_CASE, seed=4)
    s = result.summary
    assert s.floor_ratio.rounds == 1 and s.floor_ratio.interval is not None
    (line,) = [x for x in explain_lines(result) if x.startswith("recomputation floor")]
    lo, hi = interval_text(*s.floor_ratio.interval, 2)
    assert f"x the floor [{lo}, {hi}]" in line and "(rounds" not in line
    from ckptbench.results.schema import save_result

    save_result(result, tmp_path / "r.json")
    code, out, _ = run_cli(capsys, ["compare", str(tmp_path / "r.json"), "--format", "json"])
    (row,) = json.loads(out)
    assert code == 0 and (row["vs_floor_low"], row["vs_floor_high"]) == pytest.approx(
        s.floor_ratio.interval
    )


def test_a_floor_ratio_just_under_one_never_reads_1_00x_below_it():
    result = make_result(CI_CASE, seed=4, time_cv=0.0)
    s = result.summary
    ckpt = _median([it.wall_time_s for it in result.mode(Mode.CHECKPOINTED).iterations])
    result = _scaled(result, {(0, Mode.CHECKPOINTED): 0.998 * s.floor_time_s / ckpt})
    assert result.summary.vs_floor == pytest.approx(0.998)
    (line,) = [x for x in explain_lines(result) if x.startswith("recomputation floor")]
    assert "0.998x the floor" in line and "below it" in line
