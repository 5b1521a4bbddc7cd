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


def test_a_file_saved_mid_run_names_the_next_mode_measured_not_one_skipped_for_memory(
    tmp_path: Path, monkeypatch
):
    # normal runs out of memory in round 1 and is skipped after it: round 3 measures
    # checkpointed, baseline, (normal skipped); the file saved after baseline named normal
    # as the interrupted next mode, a mode the run was never going to measure
    from ckptbench.measure import runner
    from ckptbench.results import schema
    from ckptbench.results.schema import Mode, Status

    fake = {m.mode: m for m in make_result(CI_CASE, seed=3).modes}

    def run_mode(case, mode, grad_path, *, round_index, **_kw):
        m = replace(fake[mode], round=round_index)
        if mode is Mode.NORMAL:
            m = replace(m, status=Status.OUT_OF_MEMORY, iterations=(), error="over the limit")
        return m, None

    real, saved = schema.save_result, []

    def keep(result, path, **kw):
        saved.append(result)
        return real(result, path, **kw)

    monkeypatch.setattr(runner, "run_mode", run_mode)
    monkeypatch.setattr(schema, "save_result", keep)
    runner.run_case(CI_CASE.with_(rounds=3), out_path=tmp_path / "r.json")
    for doc in saved[:-1]:
        cut = [m for m in doc.modes if m.status is Status.INTERRUPTED]
        assert all(m.mode is not Mode.NORMAL or m.round == 0 for m in cut), doc.modes
    after = [(m.round, m.mode) for m in saved[-2].modes]
    assert after[-1] == (2, Mode.BASELINE)  # the round's last measured mode: none named next
    assert saved[-1].modes[-1].status is Status.OK
