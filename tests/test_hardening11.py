"""Fixes of 2026-11-29 (afternoon): the reading side's leftovers of the last audit."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from _synthetic import CI_CASE, make_result

from ckptbench.results.schema import Status, save_result
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


_HOLD = """
import sys
from ckptbench.results.schema import writer_lock
from ckptbench.results.folderlocks import locked_folder
hold = locked_folder if sys.argv[1] == "folder" else writer_lock
with hold(__import__("pathlib").Path(sys.argv[2])):
    print("held", flush=True)
    sys.stdin.read()
"""


def test_compare_and_check_say_which_inputs_another_ckptbench_is_writing(tmp_path: Path):
    # compare on a file a live run is still saving said "ckptbench was stopped": the run
    # was not stopped, and its next save changes the figures
    import subprocess
    import sys

    from click.testing import CliRunner

    from ckptbench.cli import cli
    from ckptbench.results.schema import UNFINISHED, being_written

    r = make_result(CI_CASE, seed=5)
    env = {**r.environment, "interrupted": {"by": UNFINISHED, "round": 1}}
    modes = (r.modes[0], replace(r.modes[1], status=Status.INTERRUPTED))
    cut = replace(r, environment=env, modes=modes)
    sweep = tmp_path / "sweep"
    sweep.mkdir()
    for path in (tmp_path / "r.json", sweep / "c.json"):
        save_result(cut, path)
    assert being_written(tmp_path / "r.json") is None and being_written(sweep) is None
    for kind, target, said in (
        ("file", tmp_path / "r.json", "is writing"),
        ("folder", sweep, "a ckptbench sweep is writing"),
    ):
        argv = [sys.executable, "-c", _HOLD, kind, str(target)]
        hold = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        try:
            assert hold.stdout.readline().strip() == "held"
            assert being_written(target) is not None
            for cmd in (["compare"], ["check"]):
                res = CliRunner().invoke(cli, [*cmd, str(target)])
                assert said in res.output and f"{target} right now" in res.output, res.output
            if kind == "file":
                assert f"pid {hold.pid}" in res.output
        finally:
            hold.communicate("")
        assert being_written(target) is None  # its writer is gone: no note
        res = CliRunner().invoke(cli, ["compare", str(target)])
        assert "right now" not in res.output
        assert "saved mid-run and never finished" in res.output


def test_a_bare_number_for_a_fraction_says_what_to_write_even_beyond_the_range():
    # '25' for 25% read "'25' is out of range (0% to below 1000%)": 25 looks in range
    from click.testing import CliRunner

    from ckptbench.cli import cli

    res = CliRunner().invoke(cli, ["check", "x", "--against", "y", "--time-tolerance", "25"])
    assert res.exit_code == 2 and "25 would be 2500%: write 25% (or 0.25)" in res.output
    assert "if you mean it" not in res.output  # 2500% is out of range: never meant


def test_a_default_snaps_is_called_the_default_when_clamped_and_unsaid_where_unused():
    from click.testing import CliRunner

    from ckptbench.cli import cli
    from ckptbench.cli.run_steps import snaps_notes

    class Ctx:
        def __init__(self, source):
            self.source = source

        def get_parameter_source(self, _name):
            return self.source

    from click.core import ParameterSource

    notes = ("--snaps 31 clamped to 20: at most one", "--snaps 31 is not used by strategy x; r")
    assert snaps_notes(Ctx(ParameterSource.COMMANDLINE), notes) == notes
    assert snaps_notes(Ctx(ParameterSource.DEFAULT), notes) == (f"the default {notes[0]}",)
    res = CliRunner().invoke(cli, ["schedule", "--steps", "20", "--snaps", "40"])
    assert "note: --snaps 40 clamped to 20" in res.output


@pytest.mark.torch
def test_profile_never_advises_an_option_it_lacks():
    pytest.importorskip("torch")  # the plug-in imports torch; the advice is torch's
    from click.testing import CliRunner

    from ckptbench.cli import cli

    res = CliRunner().invoke(cli, ["profile", "--model", "docs/examples/torch_gru.py:make",
                                   "--steps", "4", "--snaps", "2"])  # fmt: skip
    assert res.exit_code == 2, res.output
    assert "use --backend" not in res.output and "autograd plug-ins only" in res.output


def test_a_sweep_config_given_for_results_is_named_as_such(tmp_path: Path):
    from click.testing import CliRunner

    from ckptbench.cli import cli

    for cmd in ("compare", "check"):
        res = CliRunner().invoke(cli, [cmd, "configs/ci.toml"])
        assert res.exit_code == 2 and "a TOML file, not a result: a sweep config?" in res.output


def test_the_run_table_says_what_slowdown_and_savings_divide(tmp_path: Path):
    from ckptbench.render.run import run_table

    table = run_table(make_result(CI_CASE, seed=8))
    assert any("savings: normal's overhead / checkpointed's overhead" in n for n in table.notes)
    assert all(r["overhead"] != "(floor)" for r in table.records)


def test_a_table_too_narrow_for_intervals_says_which_columns_it_shows_without_them():
    # compare's cells table showed '+2.48' without its interval at a short width, and only
    # whole columns left out were named
    from ckptbench.analysis import compare
    from ckptbench.render import render

    results = [make_result(CI_CASE.with_(snaps=s), seed=s) for s in (4, 8, 12)]
    narrow = render(compare(results), "table", width=80)
    assert "shown without their intervals at this width: normal +MiB, ckpt +MiB" in narrow
    assert "shown without" not in render(compare(results), "table", width=400)


def test_max_time_given_without_precision_is_said_to_be_unused(tmp_path: Path):
    from click.testing import CliRunner

    from ckptbench.cli import cli

    out = tmp_path / "r.json"
    args = ["run", "--model", "rnn", "--steps", "6", "--snaps", "2", "--hidden", "4",
            "--batch", "2", "--repeats", "1", "--warmup", "0", "--rounds", "1",
            "--max-time", "2s", "--out", str(out)]  # fmt: skip
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 0, res.output
    assert "--max-time not used: " in res.output and "so exactly 1 round run" in res.output


def test_a_time_cap_that_cut_the_planned_rounds_is_not_called_a_missed_precision():
    from ckptbench.render.caveats import caveats
    from ckptbench.render.run import explain_lines

    r = make_result(CI_CASE.with_(rounds=2), rounds=2)
    prec = {"target_rel": 0.05, "half_width_rel": 0.031, "rounds": 2, "rounds_planned": 6,
            "max_rounds": 30, "max_time_s": 3.0, "stopped": "max-time"}  # fmt: skip
    r = replace(r, environment={**r.environment, "precision": prec})
    lines = explain_lines(r)
    assert any("after 2 of 6 planned rounds" in x and "within the +/-5" in x for x in lines)
    said = [c.text for c in caveats(r) if "precision" in c.text]
    assert said and all("met, but by fewer rounds than planned" in t for t in said)


def test_a_plan_that_keeps_every_tape_says_it_is_the_plain_gradient():
    from ckptbench.render.expected import plan_line

    r = make_result(CI_CASE, seed=4)
    r = replace(r, case=CI_CASE.with_(strategy="optimal", budget_bytes=2**30))
    plan = {"predicted_time_s": 0.8, "peak_bytes": 1000}
    modes = tuple(
        replace(m, plan=plan, counters={**m.counters, "steps_advanced": 0})
        if m.mode.value == "checkpointed"
        else m
        for m in r.modes
    )
    line = plan_line(replace(r, modes=modes))
    assert line is not None and "so the plan recomputes nothing" in line


def test_a_ratio_below_one_keeps_two_significant_digits():
    from ckptbench.render.format import fmt_ratio, fmt_ratio_ci

    assert fmt_ratio(0.445, 1) == "0.45x" and fmt_ratio(79.84, 1) == "79.8x"
    assert fmt_ratio_ci(0.445, (0.31, 0.62), 1) == "0.45x [0.31, 0.62]"


def test_check_says_in_its_verdict_when_it_gated_status_alone(tmp_path: Path):
    from click.testing import CliRunner

    from ckptbench.cli import cli

    save_result(make_result(CI_CASE, seed=9), tmp_path / "r.json")
    res = CliRunner().invoke(cli, ["check", str(tmp_path / "r.json")])
    assert res.exit_code == 0
    assert "PASSED (1 check on 1 cell; status only, no limits)" in res.output


def test_savings_without_the_baseline_mode_say_why_there_are_none():
    from ckptbench.render.run import headline
    from ckptbench.results.schema import Mode

    line = headline(make_result(CI_CASE, modes=(Mode.NORMAL, Mode.CHECKPOINTED)))
    assert "memory savings - (needs the baseline mode" in line


def test_check_json_carries_the_limits_and_rule_the_text_prints(tmp_path: Path):
    import json

    from click.testing import CliRunner

    from ckptbench.cli import cli

    for k in range(2):
        save_result(make_result(CI_CASE, seed=20 + k), tmp_path / f"r{k}.json")
    args = ["check", str(tmp_path / "r0.json"), "--against", str(tmp_path / "r1.json")]
    text = CliRunner().invoke(cli, args).output
    doc = json.loads(CliRunner().invoke(cli, [*args, "--format", "json"]).output)["verdicts"]
    assert doc["limits"] and all(line in text for line in doc["limits"])
    assert doc["rule"] and "256 KiB" in doc["rule"]
