"""Fixes of 2026-11-29 (evening): which rounds a figure comes from (a mode failed in one
round, a round cut by a stop), and the words said of a stopped run."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from _synthetic import CI_CASE, make_result

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
        "status: saved mid-run and never finished (killed outright, or still running), "
        "before round 2 (1 complete round kept)" in out
    ), out
    shown = CliRunner().invoke(cli, ["compare", str(tmp_path / "kill.json")]).output
    assert "interrupted before round 2, 1 complete round)" in shown.replace("\n    ", " ")
    assert (
        cells_frame([killed]).iloc[0]["status"] == "interrupted before round 2 (1 complete round)"
    )


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
