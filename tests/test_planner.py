"""The optimal planner: brute-force optimality, replay of every plan, Revolve as a special case."""

from __future__ import annotations

import heapq
import itertools
import json
import math
import random

import pytest
from _imports import loaded_after_import

from ckptbench.schedules import (
    Action,
    ActionKind,
    ScheduleError,
    optimal_forward_steps,
    replay,
    replay_bytes,
    schedule,
    uniform_schedule,
)
from ckptbench.schedules import optimal as planner
from ckptbench.schedules.compare import compare_at_budget
from ckptbench.schedules.cost_model import predict
from ckptbench.schedules.optimal import Costs, PlanError, costs_from_json

HEAVY = ("autograd", "pandas", "click", "rich")


def brute_force(costs: Costs, steps: int, budget: int) -> float:
    """Cheapest schedule over *every* action sequence of the vocabulary (Dijkstra).

    A search state is (current state or None, stored steps, kept tapes, next step to
    reverse). Moves: advance one step, store the current state, restore a stored one (after
    the first reverse), tape a step and keep it, turn (tape + reverse at once), reverse a kept
    tape. Storage is counted like replay_bytes: stored states until their step is reversed,
    kept tapes, and the tape of a turning step.
    """
    cf, cb, sb, tb = costs.per_step(steps)
    start = (0, frozenset(), frozenset(), steps - 1)
    dist = {start: 0.0}
    heap = [(0.0, 0, start)]
    tie = itertools.count(1)

    def used(stored, kept) -> int:
        return sum(sb[i] for i in stored) + sum(tb[i] for i in kept)

    while heap:
        d, _, node = heapq.heappop(heap)
        if d > dist[node]:
            continue
        cur, stored, kept, nxt = node
        if nxt == -1:
            return d
        moves = []
        mem = used(stored, kept)
        if cur is not None and cur < nxt:
            moves.append((cf[cur], (cur + 1, stored, kept, nxt)))
        if cur is not None and cur not in stored and mem + sb[cur] <= budget:
            moves.append((0.0, (cur, stored | {cur}, kept, nxt)))
        if nxt < steps - 1:
            for j in stored:
                if j != cur:
                    moves.append((0.0, (j, stored, kept, nxt)))
        if cur is not None and cur < nxt and cur not in kept and mem + tb[cur] <= budget:
            moves.append((cb[cur], (cur + 1, stored, kept | {cur}, nxt)))
        if cur == nxt and nxt not in kept and mem + tb[cur] <= budget:
            moves.append((cb[cur], (None, stored - {cur}, kept, nxt - 1)))
        if nxt in kept:
            moves.append((0.0, (None, stored - {nxt}, kept - {nxt}, nxt - 1)))
        for cost, nb in moves:
            nd = d + cost
            if nd < dist.get(nb, math.inf):
                dist[nb] = nd
                heapq.heappush(heap, (nd, next(tie), nb))
    return math.inf


def random_costs(rng: random.Random, steps: int, homogeneous: bool) -> Costs:
    def pick(lo, hi, integer=False):
        draw = (lambda: rng.randint(lo, hi)) if integer else (lambda: rng.uniform(lo, hi))
        return draw() if homogeneous else tuple(draw() for _ in range(steps))

    return Costs(
        forward_time_s=pick(0.1, 1.0),
        taped_time_s=pick(0.5, 4.0),
        state_bytes=pick(1, 3, True),
        tape_bytes=pick(2, 7, True),
    )


@pytest.mark.parametrize("homogeneous", [True, False])
@pytest.mark.parametrize("seed", range(10))
def test_plan_is_optimal_against_brute_force(seed, homogeneous):
    rng = random.Random(seed * 31 + homogeneous)
    steps = rng.randint(2, 6)
    costs = random_costs(rng, steps, homogeneous)
    _, _, sb, tb = costs.per_step(steps)
    for budget in range(min(sb) + min(tb) - 1, sum(sb) + sum(tb) + 1):
        best = brute_force(costs, steps, budget)
        if math.isinf(best):
            with pytest.raises(PlanError):
                planner.plan_optimal(costs, steps, budget)
            continue
        plan = planner.plan_optimal(costs, steps, budget)
        assert plan.exact
        assert plan.predicted_time_s == pytest.approx(best, rel=1e-12), (budget, plan.action_list)
        replay_bytes(plan.actions(), steps, sb, tb, budget)  # raises if it breaks the budget
        assert plan.peak_bytes <= budget


def test_homogeneous_and_heterogeneous_programs_agree():
    rng = random.Random(5)
    for _ in range(8):
        steps = rng.randint(2, 14)
        hom = random_costs(rng, steps, True)
        het = Costs(
            forward_time_s=(hom.forward_time_s,) * steps,
            taped_time_s=(hom.taped_time_s,) * (steps - 1) + (hom.taped_time_s * 1.0000001,),
            state_bytes=hom.state_bytes,
            tape_bytes=hom.tape_bytes,
        )
        budget = rng.randint(hom.state_bytes + hom.tape_bytes, 6 * hom.tape_bytes)
        a = planner.plan_optimal(hom, steps, budget)
        b = planner.plan_optimal(het, steps, budget)
        assert b.predicted_time_s == pytest.approx(a.predicted_time_s + 1e-7 * hom.taped_time_s)


@pytest.mark.parametrize("steps", [1, 2, 10, 37, 100, 300])
@pytest.mark.parametrize("snaps", [1, 2, 3, 5, 8, 20])
def test_one_tape_budget_reduces_to_revolve(steps, snaps):
    """With room for s states and one tape but never two tapes, the optimum is t(l, s)."""
    costs = Costs(forward_time_s=1.0, taped_time_s=3.0, state_bytes=2, tape_bytes=100)
    budget = snaps * 2 + 100 + 1  # < 2 + 2 * 100: no second tape
    plan = planner.plan_optimal(costs, steps, budget)
    snaps_used = min(snaps, steps)
    assert plan.predicted_time_s == optimal_forward_steps(steps, snaps_used) + 3.0 * steps
    assert plan.prediction.tapes_kept == 0
    revolve = predict(schedule(steps, snaps_used), steps, costs)
    assert revolve.time_s == plan.predicted_time_s


@pytest.mark.parametrize("steps", [1, 2, 3, 7, 20, 40])
def test_every_plan_replays_over_a_grid(steps):
    """Each plan passes the byte replay at its own budget, and more memory never costs time."""
    costs = Costs(forward_time_s=0.4, taped_time_s=2.5, state_bytes=64, tape_bytes=440)
    last = math.inf
    for budget in range(64 + 440, 64 + 440 + steps * 440 + 64 * steps + 1, 96):
        plan = planner.plan_optimal(costs, steps, budget, levels=5000)
        assert plan.exact  # with a coarse quantum, more budget may round to a worse plan
        r = replay_bytes(plan.actions(), steps, 64, 440, budget)
        assert r.peak_bytes == plan.peak_bytes <= budget
        assert r.stats.taped == steps
        assert replay(plan.actions(), steps, plan.slots).peak_snapshots <= plan.slots
        assert plan.predicted_time_s <= last + 1e-12
        last = plan.predicted_time_s
    assert last == pytest.approx(2.5 * steps)  # enough memory: every step taped once, no advance


def test_plan_prediction_matches_its_dynamic_program():
    rng = random.Random(11)
    steps = 40
    costs = random_costs(rng, steps, False)
    plan = planner.plan_optimal(costs, steps, 40)
    tables_value = plan.predicted_time_s
    assert predict(plan.actions(), steps, costs).time_s == pytest.approx(tables_value)


def test_lstm_like_plan_lies_on_or_below_revolve_and_equal_segments():
    """Reference LSTM figures: 64 KiB states, ~440 KiB tapes, 0.4 ms vs 2.6 ms per step."""
    costs = Costs(forward_time_s=4e-4, taped_time_s=2.6e-3, state_bytes=65536, tape_bytes=450_000)
    for mib in (1, 3, 8, 32):
        rows = {r["strategy"]: r for r in compare_at_budget(costs, 1000, mib << 20)}
        opt = rows["optimal"]
        assert opt["peak_bytes"] <= mib << 20
        for other in ("revolve", "uniform"):
            assert opt["predicted_time_s"] <= rows[other]["predicted_time_s"] + 1e-12
    # with 8 MiB the optimum keeps tapes and beats Revolve clearly
    rows = {r["strategy"]: r for r in compare_at_budget(costs, 1000, 8 << 20)}
    assert rows["optimal"]["tapes_kept"] > 0
    assert rows["optimal"]["predicted_time_s"] < 0.95 * rows["revolve"]["predicted_time_s"]


def test_predict_scores_revolve_by_the_binomial_formula():
    costs = Costs(forward_time_s=0.5, taped_time_s=2.0, state_bytes=10, tape_bytes=70)
    p = predict(schedule(1000, 31), 1000, costs)
    assert p.advances == 2439
    assert p.time_s == pytest.approx(2439 * 0.5 + 1000 * 2.0)
    assert p.peak_bytes == 31 * 10 + 70
    assert p.tapes_kept == 0
    u = predict(uniform_schedule(100, 20), 100, costs)
    assert u.peak_bytes <= 20 * 10 + 70


def test_costs_validation_and_json_round_trip():
    c = Costs(forward_time_s=[0.1, 0.2], taped_time_s=1, state_bytes=8, tape_bytes=[16, 32])
    assert c.steps == 2 and c.forward_time_s == (0.1, 0.2)
    assert costs_from_json(json.dumps(c.as_dict())) == c
    assert hash(c) == hash(costs_from_json(json.dumps(c.as_dict())))
    with pytest.raises(PlanError, match="differ in length"):
        Costs(forward_time_s=[0.1, 0.2], taped_time_s=[1, 2, 3], state_bytes=8, tape_bytes=8)
    with pytest.raises(PlanError, match=r"fixed_time_s must be one number \(seconds per"):
        Costs(forward_time_s=1, taped_time_s=1, state_bytes=8, tape_bytes=8, fixed_time_s=[1, 2])
    with pytest.raises(PlanError, match="state_bytes"):
        Costs(forward_time_s=0.1, taped_time_s=1, state_bytes=0, tape_bytes=8)
    with pytest.raises(PlanError, match="finite"):
        Costs(forward_time_s=-1.0, taped_time_s=1, state_bytes=1, tape_bytes=8)
    with pytest.raises(PlanError, match="whole number"):
        Costs(forward_time_s=1.0, taped_time_s=1, state_bytes=1.5, tape_bytes=8)
    with pytest.raises(PlanError, match="not JSON"):
        costs_from_json("{")
    with pytest.raises(PlanError, match="unknown cost field"):
        costs_from_json('{"forward_time": 1}')
    with pytest.raises(PlanError, match="lack"):
        costs_from_json('{"forward_time_s": 1}')
    with pytest.raises(PlanError, match="for 2 steps"):
        planner.plan_optimal(c, 3, 100)
    with pytest.raises(PlanError, match="no schedule"):
        planner.plan_optimal(c, 2, 20)


def test_plans_are_cached_and_quantised():
    costs = Costs(forward_time_s=4e-4, taped_time_s=2.6e-3, state_bytes=65536, tape_bytes=450_001)
    a = planner.plan_optimal(costs, 200, 8 << 20, levels=128)
    assert planner.plan_optimal(costs, 200, 8 << 20, levels=128) is a
    assert not a.exact and a.quantum_bytes == (8 << 20) // 128
    assert a.peak_bytes <= 8 << 20


def test_byte_replay_rejects_broken_tape_streams():
    A, K = Action, ActionKind
    ok = [A(K.TAKESHOT, slot=0, step=0), A(K.TAPE, step=0), A(K.FIRSTURN, step=1)]
    ok += [A(K.REVERSE, step=0), A(K.TERMINATE)]
    r = replay_bytes(ok, 2, 8, 100)
    assert (r.peak_bytes, r.stats.peak_tapes, r.stats.taped) == (208, 1, 2)
    with pytest.raises(ScheduleError, match="budget"):
        replay_bytes(ok, 2, 8, 100, budget_bytes=207)
    bad_yourturn = [*ok[:3], A(K.RESTORE, slot=0, step=0), A(K.YOUTURN, step=0), A(K.TERMINATE)]
    with pytest.raises(ScheduleError, match="kept tape"):
        replay(bad_yourturn, 2)
    with pytest.raises(ScheduleError, match="FIRSTURN"):
        replay([A(K.TAPE, step=0), A(K.REVERSE, step=0), A(K.TERMINATE)], 1)
    no_tape = [A(K.ADVANCE, start=0, stop=1), A(K.FIRSTURN, step=1), A(K.REVERSE, step=0)]
    with pytest.raises(ScheduleError, match="kept tape"):
        replay([*no_tape, A(K.TERMINATE)], 2)
    early = [A(K.TAKESHOT, slot=0, step=0), A(K.RESTORE, slot=0, step=0)]
    with pytest.raises(ScheduleError, match="before FIRSTURN"):
        replay(early, 2)


def test_planner_is_pure():
    assert loaded_after_import("ckptbench.schedules.optimal.planner", HEAVY) == []


def test_a_budget_that_holds_every_tape_gets_the_tape_all_plan():
    """2 000 tapes of 4 KiB in 512 memory levels: each counted as 18 KiB, the program kept
    about 500 of them and recomputed 1 491 steps, however large the budget."""
    costs = Costs(forward_time_s=0.001, taped_time_s=0.003, state_bytes=1024, tape_bytes=4096)
    for budget in (2000 * 4096, 9 * 2**20, 2**30):
        plan = planner.plan_optimal(costs, 2000, budget)
        assert plan.prediction.advances == 0 and plan.peak_bytes == 2000 * 4096
        assert plan.predicted_time_s == pytest.approx(2000 * 0.003)
        replay_bytes(plan.actions(), 2000, costs.state_bytes, costs.tape_bytes, budget)
    below = planner.plan_optimal(costs, 2000, 2000 * 4096 - 1)  # one byte short: the program plans
    assert below.prediction.advances > 0


#: Small chains whose sizes the program holds exactly (every size a multiple of the quantum).
SMALL_CHAINS = [
    Costs(forward_time_s=0.001, taped_time_s=0.003, state_bytes=1000, tape_bytes=3000),
    Costs(forward_time_s=0.002, taped_time_s=0.004, state_bytes=200, tape_bytes=100),
    Costs(
        forward_time_s=(0.001, 0.003, 0.002, 0.001, 0.004, 0.002, 0.001, 0.003),
        taped_time_s=(0.004, 0.005, 0.003, 0.006, 0.004, 0.003, 0.005, 0.004),
        state_bytes=(100, 300, 200, 100, 400, 200, 100, 300),
        tape_bytes=(500, 200, 700, 300, 100, 600, 400, 200),
    ),
]


@pytest.mark.parametrize("costs", SMALL_CHAINS)
def test_a_budget_holding_every_tape_plans_as_the_full_table_does(costs, monkeypatch):
    """Where the budget holds the store-all plan's peak the planner returns that plan
    without building the table; on small chains the full table, solved and emitted, gives
    the same evaluations, peak and time at every such budget."""
    from ckptbench.schedules.optimal import dp
    from ckptbench.schedules.optimal.emit import emit

    steps = costs.steps or 8
    peak = planner.store_all_peak(costs, steps)
    keep_all = [Action(ActionKind.TAPE, step=i) for i in range(steps - 1)]
    stream = [*keep_all, Action(ActionKind.FIRSTURN, step=steps - 1),
              *(Action(ActionKind.REVERSE, step=i) for i in range(steps - 2, -1, -1)),
              Action(ActionKind.TERMINATE)]  # fmt: skip
    assert predict(stream, steps, costs).peak_bytes == peak  # the replay says it too
    budgets = (peak, peak + 1, peak + 12345, 3 * peak)
    tables = []
    for budget in budgets:
        solution = dp.solve(costs, steps, budget, levels=10**6)
        assert solution.exact and solution.feasible
        tables.append(predict(emit(solution), steps, costs))
    solved = dp.solve

    def refused(*args, **kwargs):
        raise AssertionError("a table was built")

    monkeypatch.setattr(dp, "solve", refused)
    for budget, table in zip(budgets, tables, strict=True):
        assert planner.holds_store_all(costs, steps, budget)
        shortcut = planner.plan_optimal(costs, steps, budget, levels=10**6 + budget % 7)
        p = shortcut.prediction
        assert (p.advances, p.peak_bytes, p.tapes_kept) == (0, peak, steps - 1)
        assert (table.advances, table.peak_bytes) == (p.advances, p.peak_bytes)
        assert table.time_s == pytest.approx(p.time_s)
    monkeypatch.setattr(dp, "solve", solved)
    below = planner.plan_optimal(costs, steps, peak - 1, levels=10**6)  # the table's plan
    assert below.prediction.advances > 0 or below.prediction.peak_bytes < peak
    assert not planner.holds_store_all(costs, steps, peak - 1)


def test_a_long_chain_whose_tapes_all_fit_plans_without_a_table(monkeypatch):
    """``plan --steps 100000 --budget 1TiB`` was refused ('about 2.6e+12 table updates ...
    use fewer steps') though the budget holds every tape: no table is needed."""
    from ckptbench.schedules.optimal import dp

    costs = Costs(forward_time_s=1.3e-5, taped_time_s=4e-4, state_bytes=256, tape_bytes=24348)
    steps, budget = 100_000, 2**40
    with pytest.raises(PlanError, match="table updates"):  # without the budget: refused
        planner.check_plannable(steps, costs, memory_bytes=2**40)
    planner.check_plannable(steps, costs, budget_bytes=budget, memory_bytes=2**40)
    monkeypatch.setattr(dp, "solve", lambda *a, **k: pytest.fail("a table was built"))
    plan = planner.plan_optimal(costs, steps, budget)
    assert plan.prediction.advances == 0 and plan.peak_bytes == steps * 24348
    short = steps * 24348 - 1  # one byte short of every tape: the table, too large
    with pytest.raises(PlanError, match=r"table updates.*a budget of 2\.27 GiB \(2434800000 B\)"):
        planner.check_plannable(steps, costs, budget_bytes=short, memory_bytes=2**40)


def test_a_budget_below_the_least_is_said_before_the_tables_size():
    """The other way: a budget no schedule fits is refused as such (naming the least that
    works), not as a table too large to build; homogeneous costs answer it in closed form,
    however long the chain."""
    costs = Costs(forward_time_s=1e-3, taped_time_s=3e-3, state_bytes=4096, tape_bytes=65536)
    for steps in (100_000, 2**31):
        with pytest.raises(PlanError, match="no schedule of .* fits in a budget of 100 B; the "
                           r"smallest budget that works is 68\.0 KiB \(69632 B\)"):  # fmt: skip
            planner.check_plannable(steps, costs, budget_bytes=100, memory_bytes=2**40)


@pytest.mark.parametrize(("steps", "q"), [(1, 1), (2, 1), (7, 3), (50, 1000), (300, 4096)])
def test_homogeneous_least_storage_in_closed_form_is_the_arrays(steps: int, q: int):
    from ckptbench.schedules.optimal import dp

    for s, t in ((4096, 65536), (65536, 4096), (100, 1000), (3, 5)):
        same = Costs(forward_time_s=1e-3, taped_time_s=3e-3, state_bytes=s, tape_bytes=t)
        listed = Costs(forward_time_s=1e-3, taped_time_s=3e-3, state_bytes=(s,) * steps,
                       tape_bytes=(t,) * steps)  # fmt: skip
        assert dp.least_storage_of(same, steps, q) == dp.least_storage_of(listed, steps, q)
        assert dp.min_budget_bytes(same, steps, 64) == dp.min_budget_bytes(listed, steps, 64)
        assert planner.store_all_peak(same, steps) == planner.store_all_peak(listed, steps)


def test_a_stream_too_long_to_hold_is_refused_with_its_size():
    costs = Costs(forward_time_s=1e-3, taped_time_s=3e-3, state_bytes=8, tape_bytes=8)
    top = planner.MAX_STREAM_STEPS
    planner.check_plannable(top, costs, budget_bytes=2**60, memory_bytes=2**50)
    with pytest.raises(PlanError, match=r"keeping every tape of 10000001 steps .* over the "
                       "limit of 1e\\+07 steps"):  # fmt: skip
        planner.check_plannable(top + 1, costs, budget_bytes=2**60, memory_bytes=2**50)
    with pytest.raises(PlanError, match=r"about 9\.5 GiB with its replays, more than half of "
                       r"this machine's 16\.0 GiB; use fewer steps"):  # fmt: skip
        planner.check_plannable(top, costs, budget_bytes=2**60, memory_bytes=16 * 2**30)
