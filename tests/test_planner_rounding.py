"""The planner's memory quanta (Beaumont et al. 2019's program on rounded sizes): a budget that
the sizes do not divide is planned exactly, and a rounded plan is never slower than Revolve or
equal segments at the same budget, nor than a smaller budget planned exactly."""

from __future__ import annotations

import random

import pytest

from ckptbench.schedules import optimal as planner
from ckptbench.schedules import replay_bytes
from ckptbench.schedules.compare import compare_at_budget
from ckptbench.schedules.optimal import Costs


def test_a_budget_the_sizes_do_not_divide_is_planned_exactly():
    """20 497 B of 100 B states and 1 000 B tapes: the budget joined the divisor (gcd 1),
    every item rounded up to 41 B quanta and the plan took 71 s where 20 400 B took 70 s."""
    costs = Costs(forward_time_s=1.0, taped_time_s=2.0, state_bytes=100, tape_bytes=1000)
    at = {b: planner.plan_optimal(costs, 30, b) for b in (20_400, 20_497, 20_499)}
    assert all(p.exact and p.quantum_bytes == 100 for p in at.values())
    assert at[20_497].predicted_time_s == at[20_400].predicted_time_s == 70.0
    times = [planner.plan_optimal(costs, 30, b).predicted_time_s for b in range(2_000, 31_001, 97)]
    assert times == sorted(times, reverse=True)  # more budget is never slower


def _random_costs(rng: random.Random, steps: int) -> Costs:
    return Costs(
        forward_time_s=tuple(rng.uniform(0.5, 2.0) for _ in range(steps)),
        taped_time_s=tuple(rng.uniform(2.0, 6.0) for _ in range(steps)),
        state_bytes=tuple(rng.randint(200, 1500) for _ in range(steps)),
        tape_bytes=tuple(rng.randint(1000, 9000) for _ in range(steps)),
    )


@pytest.mark.parametrize("seed", range(6))
def test_a_rounded_plan_is_never_slower_than_revolve_or_equal_segments(seed):
    """Sizes with no useful divisor and a coarse program (24 levels): rounding up to the
    quantum left 'optimal' slower than Revolve in the same `plan` table (an LSTM's 256 B
    states and 1092 B tapes at 2376 B)."""
    rng = random.Random(seed)
    steps = rng.randint(8, 18)
    costs = _random_costs(rng, steps)
    _, _, sb, tb = costs.per_step(steps)
    chosen = set()
    for budget in range(max(tb) + max(sb), sum(tb) + sum(sb), 397):
        try:
            rows = {r["strategy"]: r for r in compare_at_budget(costs, steps, budget, levels=24)}
        except planner.PlanError:
            continue
        opt = rows["optimal"]
        if opt["predicted_time_s"] is None:
            continue
        for other in ("revolve", "uniform"):
            if rows[other]["predicted_time_s"] is not None:
                assert opt["predicted_time_s"] <= rows[other]["predicted_time_s"], (budget, other)
        plan = planner.plan_optimal(costs, steps, budget, levels=24)
        replay_bytes(plan.actions(), steps, sb, tb, budget)  # within the budget, exactly
        chosen.add(plan.chosen)
        assert plan.summary()["chosen"] == plan.chosen
    assert "program" in chosen


def test_the_lstm_case_that_was_slower_than_revolve():
    """The audit's case: measured LSTM costs (20 steps, hidden 8) at 2376 B planned 39
    advances where Revolve needs 33."""
    costs = Costs(forward_time_s=2.9975e-05, taped_time_s=7.5588e-04, state_bytes=256,
                  tape_bytes=1092)  # fmt: skip
    rows = {r["strategy"]: r for r in compare_at_budget(costs, 20, 2376)}
    assert rows["optimal"]["advances"] <= rows["revolve"]["advances"] == 33
    assert rows["optimal"]["predicted_time_s"] <= rows["revolve"]["predicted_time_s"]


def test_where_rounding_leaves_the_program_no_plan_revolve_in_exact_bytes_is_the_plan():
    """A budget between the least storage peak and the program's rounded least: `run` and
    `plan` refused it ("give that budget, or run Revolve") although Revolve fitted."""
    costs = Costs(forward_time_s=1e-5, taped_time_s=1e-4,
                  state_bytes=[256, 768, 1024, 1280, 512, 768, 1024, 1280],
                  tape_bytes=[5475, 6243, 6755, 6051, 5539, 6051, 6563, 4786])  # fmt: skip
    _, _, sb, tb = costs.per_step(8)
    budget = sb[0] + max(tb)  # Revolve's one-slot peak
    assert budget < planner.min_budget_bytes(costs, 8)  # the program rounds it over
    planner.check_budget(costs, 8, budget)
    plan = planner.plan_optimal(costs, 8, budget)
    assert plan.chosen in ("revolve", "uniform") and not plan.exact
    assert plan.peak_bytes <= budget
    replay_bytes(plan.actions(), 8, sb, tb, budget)
    named = rf"smallest budget that works is .*\({budget} B\)$"
    with pytest.raises(planner.PlanError, match=named):
        planner.plan_optimal(costs, 8, budget - 1)


@pytest.mark.parametrize("seed", range(4))
def test_revolves_one_slot_peak_is_x0_and_the_largest_tape(seed):
    """The least state-only budget is computed, not replayed (Revolve's one-slot stream is
    quadratic in the steps): it must be the replayed peak."""
    from ckptbench.schedules.cost_model import predict
    from ckptbench.schedules.optimal.planner import _state_only_least
    from ckptbench.schedules.revolve import schedule

    rng = random.Random(seed)
    for steps in (1, 2, 3, rng.randint(4, 40)):
        costs = _random_costs(rng, steps)
        replayed = predict(schedule(steps, 1), steps, costs).peak_bytes
        assert _state_only_least(costs, steps) == replayed


def test_check_budget_accepts_what_the_planner_plans_and_names_the_least_it_plans():
    """A budget the keep-every-tape plan fits (planned without rounding) was refused by
    `check_budget`, which `run` and `plan` call first: 'plans from 1107 B' where the planner
    planned 1106 B (peak 1101 B). Over random chains and budgets, check_budget refuses
    exactly the budgets plan_optimal cannot plan, and the budget it names plans."""
    import re

    costs = Costs(forward_time_s=1.0, taped_time_s=2.0, state_bytes=(4097, 100003, 100003, 100003),
                  tape_bytes=(1, 100, 1, 999))  # fmt: skip
    planner.check_budget(costs, 4, 1106)
    assert planner.plan_optimal(costs, 4, 1106).peak_bytes == 1101
    rng = random.Random(7)
    named_at = re.compile(r"(?:works is|plans from) (?:[\d.]+ \w+ \()?(\d+) B")
    for _ in range(10):
        steps = rng.randint(2, 9)
        costs = _random_costs(rng, steps)
        for budget in range(0, 40_000, 457):
            try:
                planner.check_budget(costs, steps, budget)
            except planner.PlanError as err:
                with pytest.raises(planner.PlanError):
                    planner.plan_optimal(costs, steps, budget)
                named = int(named_at.search(str(err)).group(1))
                assert named > budget
                planner.check_budget(costs, steps, named)
                assert planner.plan_optimal(costs, steps, named).peak_bytes <= named
            else:
                assert planner.plan_optimal(costs, steps, budget).peak_bytes <= budget
