"""Revolve's closed form against its replay: `schedule`'s closed-form table (shown past the
enumeration limit) said "peak snapshots (at most) s", which for s >= l is one slot more than
the schedule holds (x_0 .. x_{l-2}, x_{l-1} in hand at FIRSTURN). Every count of the closed
form is now what the replay of the stream counts. Nothing is measured or timed."""

from __future__ import annotations

import pytest
from _cli import run_cli

from ckptbench.schedules import get_strategy, make_schedule, replay

#: Every l <= 60 with s up to l + 3 (clamped to l, as run and schedule clamp it), and a few
#: longer chains at slot counts on both sides of l.
_SMALL = [(steps, snaps) for steps in range(1, 61) for snaps in range(1, steps + 4)]
_LONG = [
    (steps, snaps)
    for steps in (100, 257, 1000, 4097)
    for snaps in (1, 2, 3, 5, 31, steps // 2, steps - 2, steps - 1, steps, steps + 1, 2 * steps)
]


@pytest.mark.parametrize("strategy", ["revolve", "store-all"])
def test_closed_form_is_the_replay(strategy: str) -> None:
    spec = get_strategy(strategy)
    form = spec.closed_form
    wrong = []
    for steps, snaps in _SMALL + _LONG:
        s = spec.effective_snaps(steps, snaps)
        stats = replay(make_schedule(strategy, steps, s), steps, s if spec.uses_snaps else None)
        closed = (form.advances(steps, s), form.peak(steps, s), form.repetitions(steps, s))
        replayed = (stats.advances, stats.peak_snapshots, stats.max_step_advances)
        if closed != replayed:
            wrong.append((steps, snaps, closed, replayed))
    assert not wrong, wrong[:10]


def test_revolve_fills_every_slot_below_a_slot_per_step() -> None:
    """With fewer slots than steps Revolve holds all s at its peak (checked by replay, not
    assumed); with s >= l, l - 1; one step holds x_0's slot."""
    form = get_strategy("revolve").closed_form
    for steps, snaps in _SMALL + _LONG:
        s = min(snaps, steps)
        peak = replay(make_schedule("revolve", steps, s), steps, s).peak_snapshots
        expected = 1 if steps == 1 else (s if s < steps else steps - 1)
        assert peak == expected == form.peak(steps, s), (steps, snaps)


def test_schedules_closed_form_table_says_the_replayed_peak(capsys) -> None:
    """`schedule --steps 10000000 --snaps 10000000` (past the enumeration limit: the closed
    form) said "peak snapshots (at most) 10000000"; the schedule holds 9999999, as the
    enumerated table of a shorter chain says (`--steps 8 --snaps 8`: 7)."""
    for steps, snaps, peak in (("10000000", "10000000", "9999999"), ("10000000", "5", "5")):
        argv = ["schedule", "--strategy", "revolve", "--steps", steps, "--snaps", snaps]
        code, out, err = run_cli(capsys, argv)
        assert code == 0, err
        assert "(closed form)" in out and "(at most)" not in out
        line = next(line for line in out.splitlines() if "peak snapshots" in line)
        assert line.split()[-1] == peak, line
    code, out, _ = run_cli(capsys, ["schedule", "--steps", "8", "--snaps", "8"])
    line = next(line for line in out.splitlines() if "peak snapshots" in line)
    assert code == 0 and line.split()[-1] == "7"
