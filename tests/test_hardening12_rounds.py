"""Fixes of 2026-11-29 (evening): which rounds a figure comes from (a mode failed in one
round, a round cut by a stop), and the words said of a stopped run."""

from __future__ import annotations

import statistics
from dataclasses import replace
from pathlib import Path

import pytest
from _synthetic import CI_CASE, MIB, make_result

from ckptbench.results.schema import UNFINISHED, Mode, RunResult, Status, save_result


def _with(result: RunResult, round_index: int, mode: Mode, **changes) -> RunResult:
    """``result`` with the (round, mode) result changed."""
    modes = tuple(
        replace(m, **changes) if (m.round, m.mode) == (round_index, mode) else m
        for m in result.modes
    )
    return replace(result, modes=modes)


@pytest.mark.parametrize(
    ("status", "overhead"),
    [
        (Status.TIMEOUT, None),  # checkpointed clear of its noise in round 1
        (Status.OUT_OF_MEMORY, None),  # --retry-oom: ok again in round 1
        (Status.TIMEOUT, 4096),  # within its noise in round 1: the rule is skipped
    ],
)
def test_a_mode_that_failed_in_one_round_gives_no_savings_from_its_other_rounds(
    status: Status, overhead: int | None
):
    # checkpointed failed in round 2: its overhead is not shown ('-'), yet the ok round alone
    # gave a savings figure ('1.3x [0.5, 3.4]'), skipping the below-noise rule on the way
    import pandas as pd

    from ckptbench.frame import cells_frame

    over = {"checkpointed": overhead} if overhead is not None else None
    clean = make_result(CI_CASE, seed=7, rounds=2, overhead=over)
    iters = () if status is Status.OUT_OF_MEMORY else None
    changes = {"status": status, "error": "t"} | ({"iterations": iters} if iters == () else {})
    failed = _with(clean, 1, Mode.CHECKPOINTED, **changes)
    s = failed.summary
    assert s.mode(Mode.CHECKPOINTED).overhead_bytes is None
    assert s.memory_savings.value is None and s.memory_savings.interval is None
    row = cells_frame([failed]).iloc[0]
    assert pd.isna(row["checkpointed_overhead_bytes"]) and pd.isna(row["memory_savings"])
    assert failed.summary.as_dict()["memory_savings"] is None


def _stopped_in_round_2(normal_round_2: dict) -> RunResult:
    """A 3-round run stopped by Ctrl-C in round 2 after normal (changed by
    ``normal_round_2``) and during checkpointed; baseline never ran in round 2."""
    r = make_result(CI_CASE.with_(rounds=3), seed=11, rounds=2)
    r = _with(r, 1, Mode.NORMAL, **normal_round_2)
    r = _with(r, 1, Mode.CHECKPOINTED, status=Status.INTERRUPTED, error="SIGINT")
    modes = tuple(m for m in r.modes if (m.round, m.mode) != (1, Mode.BASELINE))
    env = {**r.environment, "interrupted": {"by": "SIGINT (Ctrl-C)", "round": 2}}
    return replace(r, modes=modes, environment=env)


def test_a_stopped_run_takes_every_figure_from_its_complete_rounds():
    # normal_overhead_bytes and normal_time_s took round 2's normal beside round 1's, while
    # the slowdown came from round 1 alone and the caveat said "from the complete rounds"
    from ckptbench.frame import cells_frame, results_frame

    first = make_result(CI_CASE.with_(rounds=3), seed=11, rounds=2)
    slow = tuple(replace(it, wall_time_s=it.wall_time_s * 5) for it in first.modes[1].iterations)
    big = tuple(replace(it, peak_rss_bytes=it.peak_rss_bytes + 20 * MIB) for it in slow)
    r = _stopped_in_round_2({"iterations": big})
    normal0 = next(m for m in r.modes if (m.round, m.mode) == (0, Mode.NORMAL))
    base0 = next(m for m in r.modes if (m.round, m.mode) == (0, Mode.BASELINE))
    row = cells_frame([r]).iloc[0]
    assert row["normal_time_s"] == pytest.approx(
        statistics.median(it.wall_time_s for it in normal0.iterations)
    )
    peak = int(statistics.median(it.peak_rss_bytes for it in normal0.iterations))
    base = int(statistics.median(it.peak_rss_bytes for it in base0.iterations))
    assert row["normal_overhead_bytes"] == peak - base
    assert row["rounds"] == 2 and row["rounds_complete"] == 1
    assert row["status"] == "interrupted in round 2 (1 complete round)"
    tidy = results_frame([r])
    assert set(tidy["iterations"]) == {CI_CASE.repeats}  # round 1's of every mode
    assert r.summary.slowdown.rounds == 1 and r.summary.rounds_complete == 1
    # a mode that failed in the cut round before the stop still says so
    timed_out = _stopped_in_round_2({"status": Status.TIMEOUT, "error": "t"})
    assert "normal: timeout" in cells_frame([timed_out]).iloc[0]["status"]


def test_a_run_stopped_in_its_first_round_says_no_round_completed():
    # "the figures come from the complete rounds ... 0 complete rounds": there were none
    from ckptbench.analysis.gate import check
    from ckptbench.render.caveats import warning_lines

    r = make_result(CI_CASE.with_(rounds=3), seed=12)
    r = _with(r, 0, Mode.CHECKPOINTED, status=Status.INTERRUPTED, error="SIGINT")
    r = replace(r, environment={"interrupted": {"by": "SIGINT (Ctrl-C)", "round": 1}})
    lines = "\n".join(warning_lines(r))
    assert "complete rounds:" not in lines and "0 complete" not in lines
    assert "no round completed: the figures come from the part of a round the file holds" in lines
    (status,) = [line for line in check([r]).lines if line.check == "status"]
    assert status.detail == "interrupted in round 1 (no complete round)"


def test_check_says_a_file_saved_mid_run_was_never_finished_as_compare_does(tmp_path: Path):
    # check said "interrupted before round 2 (1 complete rounds kept)" where compare said
    # "saved mid-run and never finished (killed outright, or still running)"
    from click.testing import CliRunner

    from ckptbench.cli import cli
    from ckptbench.frame import cells_frame

    r = make_result(CI_CASE.with_(rounds=3), seed=13)
    killed = replace(r, environment={"interrupted": {"by": UNFINISHED, "round": 2}})
    save_result(killed, tmp_path / "kill.json")
    out = CliRunner().invoke(cli, ["check", str(tmp_path / "kill.json")]).output
    assert (
        "status: never finished (1 complete round), saved mid-run: killed outright, or still "
        "running" in out
    ), out
    shown = CliRunner().invoke(cli, ["compare", str(tmp_path / "kill.json")]).output
    assert "still running): the figures come from the complete rounds: " in shown  # its
    assert "(1 complete round)" in shown.replace("\n    ", " ")  # rounds, as the status says
    assert cells_frame([killed]).iloc[0]["status"] == "never finished (1 complete round)"


def test_compare_blames_both_sides_when_a_mode_failed_before_and_after():
    from ckptbench.analysis import compare
    from ckptbench.render import render

    oom = {"normal": Status.OUT_OF_MEMORY}
    before, after = (
        make_result(CI_CASE, seed=1, status=oom),
        make_result(CI_CASE, seed=2, status=oom),
    )
    text = render(compare([after], [before]), "table")
    assert "normal did not measure OK before and after" in text
