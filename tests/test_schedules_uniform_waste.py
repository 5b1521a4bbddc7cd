"""Every state a schedule stores is restored: a model check over all small (steps, snaps).

The audit's case: ``uniform`` with as many slots as steps stored x_{l-1} before FIRSTURN
and never restored it (the state is in hand when step l-1 is reversed first), and so did
every segment whose interior fitted its slots: one slot stored for nothing, a peak one
state above Revolve's (mlp-stack, 8 layers, 8 snaps: 91.4 against 88.2 KiB). The only
state a schedule may store without restoring it is x_0 of a one-step chain, the slot that
the Revolve convention gives x_0 (docs/architecture.md, "Revolve conventions").
"""

from __future__ import annotations

import pytest

from ckptbench.schedules import (
    ActionKind,
    replay,
    replay_bytes,
    schedule,
    store_all_schedule,
    uniform_schedule,
)
from ckptbench.schedules.optimal import (
    DEFAULT_LEVELS,
    Costs,
    PlanError,
    min_budget_bytes,
    plan_optimal,
)

SMALL = [(steps, snaps) for steps in range(1, 41) for snaps in range(1, steps + 3)]


def unrestored(actions) -> list[tuple[int, int]]:
    """(slot, step) of every TAKESHOT whose state is not restored before its slot is written
    again or the stream ends, x_0 of a one-step chain excepted."""
    actions = list(actions)
    steps = 1 + max(a.step for a in actions if a.kind is ActionKind.FIRSTURN)
    held: dict[int, list] = {}  # slot -> [step, restored]
    wasted = []
    for act in actions:
        if act.kind is ActionKind.TAKESHOT:
            old = held.get(act.slot)
            if old is not None and not old[1]:
                wasted.append((act.slot, old[0]))
            held[act.slot] = [act.step, False]
        elif act.kind is ActionKind.RESTORE:
            held[act.slot][1] = True
    wasted += [(slot, step) for slot, (step, used) in held.items() if not used]
    return [w for w in wasted if not (steps == 1 and w[1] == 0)]


def test_the_checker_sees_a_state_stored_for_nothing():
    wasteful = [
        *schedule(2, 2),  # TAKESHOT x_0, ADVANCE, FIRSTURN(1), RESTORE x_0, YOUTURN(0), ...
    ]
    first_turn = next(i for i, a in enumerate(wasteful) if a.kind is ActionKind.FIRSTURN)
    shot = wasteful[0]._replace(slot=1, step=1)
    wasteful.insert(first_turn, shot)
    replay(wasteful, 2, 2)  # valid, and wasteful
    assert unrestored(wasteful) == [(1, 1)]
    assert unrestored(schedule(2, 2)) == []


def test_uniform_restores_every_state_it_stores():
    wasted = {}
    for steps, snaps in SMALL:
        stream = list(uniform_schedule(steps, snaps))
        stats = replay(stream, steps, snaps)
        assert stats.peak_snapshots <= snaps
        if unrestored(stream):
            wasted[steps, snaps] = unrestored(stream)
    assert wasted == {}, sorted(wasted.items())[:5]


def test_uniform_with_a_slot_per_step_holds_what_revolve_holds():
    """The audit's figures: 8 steps, 8 snaps stored x_0..x_7 (peak 8) against Revolve's
    x_0..x_6; now both hold 7 states, and in bytes (a first state larger than the rest, as
    a layer stack's input) the same peak."""
    stats = replay(uniform_schedule(8, 8), 8, 8)
    assert (stats.advances, stats.taped, stats.peak_snapshots) == (7, 8, 7)
    sizes = [4096] + [32768] * 7
    mine = replay_bytes(uniform_schedule(8, 8), 8, sizes, 0).peak_bytes
    assert mine == replay_bytes(schedule(8, 8), 8, sizes, 0).peak_bytes == 4096 + 6 * 32768
    for steps in range(1, 41):
        for snaps in (steps - 1, steps, steps + 5):
            if snaps >= 1:
                un = replay(uniform_schedule(steps, snaps), steps, snaps).peak_snapshots
                assert un == replay(schedule(steps, snaps), steps, snaps).peak_snapshots


@pytest.mark.parametrize(
    ("steps", "snaps", "advances"),
    [(8, 8, 7), (16, 7, 23), (37, 6, 121), (100, 10, 503), (1000, 31, 15134), (1000, 64, 1934)],
)
def test_uniform_advances_are_what_they_were(steps, snaps, advances):
    """Not storing a segment's last state changes no evaluation count: the segment is
    advanced as often either way (held + tail * (tail - 1) / 2 with tail 1 or 2)."""
    stats = replay(uniform_schedule(steps, snaps), steps, snaps)
    assert (stats.advances, stats.taped) == (advances, steps)


def test_revolve_and_store_all_restore_every_state_they_store():
    for steps, snaps in SMALL:
        assert unrestored(schedule(steps, snaps)) == [], (steps, snaps)
    for steps in range(1, 41):
        assert unrestored(store_all_schedule(steps)) == [], steps


COSTS = {
    "homogeneous": lambda n: Costs(1.0, 3.0, 100, 300),
    "cheap tapes": lambda n: Costs(1.0, 2.0, 100, 50),
    "dear tapes": lambda n: Costs(1.0, 1.5, 100, 10_000),
    "large input": lambda n: Costs(1.0, 3.0, tuple([1000] + [100] * (n - 1)), 300),
    "heterogeneous": lambda n: Costs(
        tuple(1.0 + i % 3 for i in range(n)),
        tuple(2.5 + i % 2 for i in range(n)),
        tuple(100 + 37 * (i % 4) for i in range(n)),
        tuple(250 + 60 * (i % 3) for i in range(n)),
    ),
}


@pytest.mark.parametrize("levels", [DEFAULT_LEVELS, 3], ids=["exact", "coarse"])
@pytest.mark.parametrize("name", sorted(COSTS))
def test_optimal_plans_restore_every_state_they_store(name, levels):
    """The planner's plans, its program's and (coarse levels) the rivals it chooses, at
    budgets from the least that fits to every tape kept."""
    planned = 0
    for steps in range(1, 13):
        costs = COSTS[name](steps)
        _, _, sb, tb = costs.per_step(steps)
        least, most = min_budget_bytes(costs, steps), sum(sb) + sum(tb)
        for budget in range(least, most + 1, max(1, (most - least) // 10)):
            try:
                plan = plan_optimal(costs, steps, budget, levels=levels)
            except PlanError:
                continue
            stream = list(plan.actions())
            replay(stream, steps)
            assert unrestored(stream) == [], (steps, budget, plan.chosen)
            planned += 1
    assert planned > 0
