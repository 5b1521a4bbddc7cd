"""Model-checking the schedules: replay every schedule against a simulated store."""

from __future__ import annotations

from functools import cache

import pytest
from _imports import loaded_after_import
from hypothesis import given, settings
from hypothesis import strategies as st

from ckptbench import schedules as revolve
from ckptbench.schedules import (
    Action,
    ActionKind,
    ScheduleError,
    beta,
    optimal_forward_steps,
    repetition_number,
    replay,
    schedule,
    store_all_schedule,
    uniform_schedule,
)

HEAVY = ("numpy", "autograd", "pandas", "click", "rich")

REFERENCE = [
    (100, 10, 222),
    (1000, 31, 2439),
    (1000, 10, 3636),
    (2048, 7, 11333),
    (10000, 100, 24747),
    (100000, 50, 375196),
]


@cache
def dp_advances(m: int, s: int) -> int:
    """Brute-force minimal advances (Bellman recursion over the first checkpoint)."""
    if m == 1:
        return 0
    if s == 1:
        return m * (m - 1) // 2
    return min(k + dp_advances(m - k, s - 1) + dp_advances(k, s) for k in range(1, m))


@pytest.mark.parametrize(("steps", "snaps", "expected"), REFERENCE)
def test_reference_values(steps, snaps, expected):
    assert optimal_forward_steps(steps, snaps) == expected


@pytest.mark.parametrize(("steps", "snaps", "expected"), REFERENCE)
def test_schedule_attains_reference_values(steps, snaps, expected):
    stats = replay(schedule(steps, snaps), steps, snaps)
    assert stats.advances == expected
    assert stats.taped == steps
    assert stats.peak_snapshots <= snaps
    assert stats.max_step_advances <= repetition_number(steps, snaps)


def test_formula_matches_brute_force_optimum():
    for m in range(1, 61):
        for s in range(1, 9):
            assert optimal_forward_steps(m, s) == dp_advances(m, s), (m, s)


def test_closed_forms():
    for m in range(1, 200):
        assert optimal_forward_steps(m, 1) == m * (m - 1) // 2
        for s in range(max(1, m - 1), m + 3):
            assert optimal_forward_steps(m, s) == m - 1
    assert beta(3, 2) == 10
    assert beta(2, -1) == 0


def test_repetition_number_is_minimal():
    for m in range(1, 300):
        for s in range(1, 12):
            r = repetition_number(m, s)
            assert beta(s, r) >= m
            assert r == 0 or beta(s, r - 1) < m


@settings(max_examples=200, deadline=None)
@given(st.integers(min_value=1, max_value=10**80), st.integers(min_value=1, max_value=200))
def test_repetition_number_is_minimal_for_any_size(m, s):
    """Past 64 repetitions r is searched, not counted: 10**60 steps with one slot
    (r = 10**60 - 1) was 10**60 loop turns, and `schedule --steps` with 60 digits hung."""
    r = repetition_number(m, s)
    assert beta(s, r) >= m
    assert r == 0 or beta(s, r - 1) < m


def test_closed_forms_for_huge_chains_with_one_slot():
    m = 10**60
    assert repetition_number(m, 1) == m - 1  # beta(1, r) = r + 1
    assert optimal_forward_steps(m, 1) == (m - 1) * m - beta(2, m - 2)
    assert optimal_forward_steps(m, 1) == m * (m - 1) // 2  # one slot: 1 + 2 + ... + (m-1)


def test_revolve_grid_is_valid_and_optimal():
    """Every 1 <= steps <= 300, 1 <= snaps <= 40: valid, optimal, within slot and r bounds."""
    for steps in range(1, 301):
        for snaps in range(1, 41):
            stats = replay(schedule(steps, snaps), steps, snaps)
            assert stats.advances == optimal_forward_steps(steps, snaps), (steps, snaps)
            assert stats.taped == steps
            assert stats.peak_snapshots <= snaps
            assert stats.max_step_advances <= repetition_number(steps, snaps), (steps, snaps)


def test_uniform_and_store_all_grid_are_valid():
    for steps in range(1, 121):
        sa = replay(store_all_schedule(steps), steps)
        assert sa.advances == steps - 1
        assert sa.peak_snapshots == steps - 1
        for snaps in range(1, 26):
            un = replay(uniform_schedule(steps, snaps), steps, snaps)
            assert un.peak_snapshots <= snaps
            assert un.taped == steps
            # never better than optimal: a check on the optimality claim itself
            assert un.advances >= optimal_forward_steps(steps, snaps)


def _uniform_cost_by_segment(l, s, k):
    """The definition, segment by segment: the cuts i*l//k, each segment's interior stored
    where slots allow (but its last state, in hand when it is reversed first), its tail
    re-advanced from the last stored state at every turn."""
    bounds = [i * l // k for i in range(k + 1)]
    adv, held_max = bounds[k - 1], 0
    for i in range(k):
        seg = bounds[i + 1] - bounds[i]
        held = max(0, min(seg - 2, s - k))
        tail = seg - held
        adv += held + tail * (tail - 1) // 2
        held_max = max(held_max, held)
    return adv, k + held_max


def test_uniform_cost_in_constant_time_is_the_segment_by_segment_sum():
    """Choosing k was O(min(l, s)**2): 20 000 slots took minutes before a schedule began."""
    from ckptbench.schedules.uniform import _uniform_cost

    for steps in range(1, 160):
        for snaps in range(1, 40):
            for k in range(1, min(steps, snaps) + 1):
                assert _uniform_cost(steps, snaps, k) == _uniform_cost_by_segment(steps, snaps, k)
    for steps, snaps in ((1, 1), (7, 3), (100, 5), (1000, 31), (997, 64)):
        stats = replay(uniform_schedule(steps, snaps), steps, snaps)
        costs = [_uniform_cost(steps, snaps, k) for k in range(1, min(steps, snaps) + 1)]
        assert (stats.advances, stats.peak_snapshots) == min(costs)  # the k it chose


def test_advances_within_counts_a_stream_up_to_its_limit():
    stream = list(uniform_schedule(1000, 31))
    total = replay(stream, 1000, 31).advances
    assert revolve.advances_within(stream, total) == total
    assert revolve.advances_within(stream, total - 1) is None
    assert revolve.advances_within(iter(uniform_schedule(10**6, 2)), 10**6) is None  # early


def test_uniform_is_sqrt_strategy_when_budget_allows():
    # 1000 steps, 64 slots: 32 segments of ~31 states -> about one extra forward sweep.
    stats = replay(uniform_schedule(1000, 64), 1000, 64)
    assert stats.advances < 2 * 1000
    assert stats.max_step_advances == 2
    # and binomial is strictly better when slots are scarce
    assert optimal_forward_steps(1000, 31) < replay(uniform_schedule(1000, 31), 1000).advances


@settings(max_examples=60, deadline=None)
@given(steps=st.integers(1, 5000), snaps=st.integers(1, 200))
def test_revolve_property_large(steps, snaps):
    stats = replay(schedule(steps, snaps), steps, snaps)
    assert stats.advances == optimal_forward_steps(steps, snaps)
    assert stats.peak_snapshots <= snaps
    assert stats.max_step_advances <= repetition_number(steps, snaps)


def test_turns_cover_every_step_once_in_reverse_order():
    turns = [
        a.step for a in schedule(137, 6) if a.kind in (ActionKind.FIRSTURN, ActionKind.YOUTURN)
    ]
    assert turns == list(range(136, -1, -1))


def test_schedule_is_lazy_and_actions_immutable():
    it = schedule(10**9, 20)
    first = next(it)
    assert first == Action(ActionKind.TAKESHOT, slot=0, step=0)
    with pytest.raises(AttributeError):
        first.slot = 3  # type: ignore[misc]


@pytest.mark.parametrize(
    ("steps", "snaps"), [(0, 3), (5, 0), (-1, 2), (2.5, 3), ("10", 3), (True, 3), (10, None)]
)
def test_invalid_arguments(steps, snaps):
    with pytest.raises(ValueError) as err:
        list(schedule(steps, snaps))
    assert "\n" not in str(err.value)
    with pytest.raises(ValueError):
        optimal_forward_steps(steps, snaps)


def test_replay_rejects_broken_schedules():
    good = list(schedule(20, 4))
    # drop a RESTORE: the next action starts from the wrong state
    i = next(i for i, a in enumerate(good) if a.kind is ActionKind.RESTORE)
    with pytest.raises(ScheduleError):
        replay(good[:i] + good[i + 1 :], 20, 4)
    # too few slots allowed
    with pytest.raises(ScheduleError):
        replay(good, 20, 3)
    # missing TERMINATE
    with pytest.raises(ScheduleError):
        replay(good[:-1], 20, 4)
    # restoring a slot that holds another state
    bad = [*good[:1], Action(ActionKind.RESTORE, slot=0, step=5)]
    with pytest.raises(ScheduleError):
        replay(bad, 20, 4)
    # an advance past the reversal front
    with pytest.raises(ScheduleError):
        replay([Action(ActionKind.ADVANCE, start=0, stop=21)], 20)


def test_make_schedule_dispatch():
    assert replay(revolve.make_schedule("revolve", 50, 5), 50).advances == optimal_forward_steps(
        50, 5
    )
    assert replay(revolve.make_schedule("store-all", 50, 5), 50).advances == 49
    with pytest.raises(ValueError, match="unknown strategy"):
        revolve.make_schedule("magic", 50, 5)


def test_revolve_module_is_pure():
    """Importing the schedule module pulls in no numpy, autograd or I/O-heavy modules."""
    assert loaded_after_import("ckptbench.schedules", HEAVY) == []


def test_byte_replay_agrees_with_slot_replay_on_classic_schedules():
    """States-only schedules: peak bytes = peak slots x state bytes + the live tape."""
    for steps, snaps in [(1, 1), (10, 3), (100, 10), (37, 40)]:
        for make in (schedule, uniform_schedule):
            plain = replay(make(steps, snaps), steps, snaps)
            r = revolve.replay_bytes(make(steps, snaps), steps, 64, 500)
            assert r.stats == plain
            assert plain.peak_tapes == 0
            assert r.peak_bytes == plain.peak_snapshots * 64 + 500
            assert sum(r.step_advances) == plain.advances
            with pytest.raises(ScheduleError, match="budget"):
                revolve.replay_bytes(
                    make(steps, snaps), steps, 64, 500, budget_bytes=r.peak_bytes - 1
                )


def test_public_helpers_and_optimal_needs_a_planner():
    assert revolve.check_int("n", 3) == 3
    with pytest.raises(ValueError, match="n must be an integer"):
        revolve.check_int("n", True)
    assert revolve.get_strategy("optimal").planned
    with pytest.raises(ValueError, match=r"ckptbench\.schedules\.optimal"):
        revolve.make_schedule("optimal", 10, 3)
    with pytest.raises(ValueError, match="one per step"):
        revolve.replay_bytes(schedule(3, 2), 3, [1, 2], 5)
