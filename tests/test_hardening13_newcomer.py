"""A newcomer's first ten minutes and a hostile tester's (2026-11-29, session P): what they
typed, what ckptbench answered, and what it answers now."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _cli import one_line_error, run_cli
from _synthetic import CI_CASE, make_result

from ckptbench.results.schema import save_result


def test_a_file_option_ending_in_a_slash_is_refused_not_written_as_a_file(
    fake, tmp_path: Path, capsys, monkeypatch
):
    # `run --out newdir/` measured, then saved a FILE named `newdir` (pathlib drops the
    # slash); `compare -o`, `check --junit`/`--summary` and `plan --save-costs` did the same,
    # and `--out results/` was "results: exists and is not a regular file", naming no fix
    monkeypatch.chdir(tmp_path)
    save_result(make_result(CI_CASE, seed=1), tmp_path / "r.json")
    costs = {"forward_time_s": 1e-4, "taped_time_s": 3e-4, "state_bytes": 4096,
             "tape_bytes": 40000, "fixed_time_s": 0.0}  # fmt: skip
    (tmp_path / "c.json").write_text(json.dumps(costs))
    cases = [
        ("run --model rnn --steps 20 --snaps 4 --rounds 1 --out runs/", "'runs/result.json'"),
        ("compare r.json -o report/", "'report/report.html'"),
        ("check r.json --junit junit/", "'junit/junit.xml'"),
        ("check r.json --summary summary/", "'summary/summary.md'"),
        (
            "plan --model rnn --steps 20 --budget 64KiB --costs c.json --save-costs costs/",
            "'costs/costs.json'",
        ),
    ]
    for line, example in cases:
        argv = line.split()
        err = one_line_error(capsys, argv)
        name = argv[-1]
        assert f"{name!r} names a folder (it ends with '/')" in err, err
        assert f"e.g. {example}" in err, err
        assert not (tmp_path / name.rstrip("/")).exists(), argv
    # an existing folder as well: the fix is named, not "exists and is not a regular file"
    (tmp_path / "results").mkdir()
    err = one_line_error(capsys, ["run", "--model", "rnn", "--steps", "20", "--out", "results/"])
    assert "e.g. 'results/result.json'" in err
    # a folder option keeps its slash: --plots and sweep --out take folders
    code, _, err = run_cli(capsys, ["compare", "r.json", "--plots", "plots/"])
    assert code == 0, err


def test_output_given_a_file_name_says_it_is_the_readout_size_and_where_files_go(capsys):
    # `compare -o/--output FILE` writes a report, so a newcomer typed `run --output r.json`
    # and read "'r.json' is not a valid integer range"; `plan --out p.json` was answered
    # "Did you mean '--output'?", which leads to the same refusal
    err = one_line_error(capsys, ["run", "--steps", "20", "--output", "r.json"])
    assert "'r.json' is not a whole number: --output is the readout size per step" in err
    assert "the result file is --out FILE" in err
    err = one_line_error(capsys, ["run", "--steps", "20", "-o", "r.json"])
    assert "no such option '-o': the result file is --out FILE" in err
    err = one_line_error(capsys, ["plan", "--steps", "20", "--budget", "1MiB", "--out", "p.json"])
    assert "Did you mean" not in err and "--save-costs FILE writes the step costs" in err
    assert "--output is the readout size per step, not a file" in err
    err = one_line_error(capsys, ["profile", "--steps", "20", "--output", "p.txt"])
    assert "--output is the readout size per step" in err and "stdout (> FILE)" in err
    # a number out of range is still click's range message; compare's --output is a file
    err = one_line_error(capsys, ["run", "--steps", "20", "--output", "0"])
    assert "0 is not in the range x>=1" in err
    err = one_line_error(capsys, ["compare", "x.json", "--out", "rep.txt"])
    assert "Did you mean one of: '--output'" in err


def test_the_announced_time_and_the_eta_count_the_two_rounds_the_time_cap_never_stops():
    # with --precision on, two rounds always run (measure.rounds.next_round); with rounds
    # longer than --max-time the run announced "about 38 min 47 s" for two rounds of ~35 min
    # (the cap plus one round), and its live ETA after round 1 said ~4 min for another 35
    from ckptbench.measure.rounds import Precision
    from ckptbench.render.console import JobClock, plan_line
    from ckptbench.render.format import fmt_duration
    from ckptbench.results.schema import Case, Mode

    modes = (Mode.BASELINE, Mode.NORMAL, Mode.CHECKPOINTED)
    target = Precision(0.05, 30, 240.0)
    line = plan_line(Case(rounds=6), modes, target, 2087.0)
    assert f"about {fmt_duration(2 * 2087.0)}." in line, line
    assert "but the first 2 always run" in line
    line = plan_line(Case(rounds=1), modes, target, 10.0)  # --rounds 1 --precision 5%
    assert f"about {fmt_duration(20.0)} to" in line, line
    line = plan_line(Case(rounds=6), modes, target, 10.0)  # the common case is unchanged
    assert f"about {fmt_duration(60.0)} to {fmt_duration(250.0)}." in line, line
    assert "always run" not in line

    now = [0.0]
    clock = JobClock(Case(rounds=6), modes, target, guess_round_s=2087.0)
    clock._time = lambda: now[0]
    clock.started()
    now[0] = 2087.0
    for mode in modes:
        clock.mode_done(0, mode)
    assert clock.eta_s() == pytest.approx(2087.0)  # the second round, however long
    now[0] = 2 * 2087.0
    for mode in modes:
        clock.mode_done(1, mode)
    assert clock.eta_s() == 0.0  # the cap stops it now


def test_a_result_or_manifest_given_as_costs_says_what_it_is(tmp_path: Path, capsys):
    # `plan --costs results/run.json` said "unknown cost field 'case' (known: ...)"
    save_result(make_result(CI_CASE, seed=2), tmp_path / "r.json")
    manifest = {"kind": "ckptbench-sweep", "manifest_version": 1, "cells": []}
    (tmp_path / "sweep.json").write_text(json.dumps(manifest))
    for name, what in (("r.json", "result"), ("sweep.json", "sweep manifest")):
        argv = ["plan", "--steps", "20", "--budget", "1MiB", "--costs", str(tmp_path / name)]
        err = one_line_error(capsys, argv)
        assert f"is a ckptbench {what}, not a costs file (plan --save-costs FILE" in err, err


@pytest.mark.parametrize("zero", ["0", "0KiB", "0.0MiB"])
def test_a_zero_memory_floor_is_refused_with_its_reason(capsys, tmp_path: Path, zero: str) -> None:
    """``check --memory-floor 0`` said only "'0' must be positive"; a user wanting a gate on
    --memory-tolerance alone is told why a floor is needed and what to give."""
    err = one_line_error(capsys, ["check", str(tmp_path), "--memory-floor", zero])
    assert "must be positive: a zero floor fails on noise" in err
    assert "64KiB" in err
