"""Fixes of 2026-11-29 (evening): which rounds a figure comes from (a mode failed in one
round, a round cut by a stop), and the words said of a stopped run."""

from __future__ import annotations

from dataclasses import replace

from _synthetic import CI_CASE, make_result

from ckptbench.results.schema import Mode, RunResult, Status


def _with(result: RunResult, round_index: int, mode: Mode, **changes) -> RunResult:
    """``result`` with the (round, mode) result changed."""
    modes = tuple(
        replace(m, **changes) if (m.round, m.mode) == (round_index, mode) else m
        for m in result.modes
    )
    return replace(result, modes=modes)


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
