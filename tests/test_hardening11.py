"""Fixes of 2026-11-29 (afternoon): the reading side's leftovers of the last audit."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from _synthetic import CI_CASE, make_result

from ckptbench.results.schema import save_result
from ckptbench.results.store import load_results


def test_the_pooled_table_says_which_runs_it_left_out_for_want_of_an_interval(tmp_path: Path):
    # three invocations with spread and one of a single iteration a side: the last has a
    # slowdown but no interval, so the pool cannot weigh it; the table says so
    from click.testing import CliRunner

    from ckptbench.cli import cli
    from ckptbench.frame import invocations_frame

    paths = []
    for k in range(3):
        paths.append(tmp_path / f"run{k}.json")
        save_result(make_result(CI_CASE, seed=50 + k), paths[-1])
    one = CI_CASE.with_(repeats=1, warmup=0)
    lone = make_result(one, seed=60)
    assert lone.summary.slowdown is not None and lone.summary.as_dict()["slowdown_ci"] is None
    paths.append(tmp_path / "lone.json")
    save_result(replace(lone, case=CI_CASE), paths[-1])  # one cell: the same key
    row = invocations_frame(load_results(paths)).iloc[0]
    assert row["invocations"] == 4 and row["slowdown_runs"] == 3 and row["slowdown_bare"] == 1
    out = CliRunner().invoke(cli, ["compare", "--format", "markdown", *map(str, paths)]).output
    assert "pooled without 1 run's slowdown: no interval to weigh it by" in out
