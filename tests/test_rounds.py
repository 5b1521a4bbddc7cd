"""Rounds the runner adds or skips: a mode out of memory is skipped in later rounds (said
once, ``--retry-oom`` runs it every round) and ``--precision`` adds rounds until the
slowdown's interval is narrow enough (CliRunner with the fake worker, no timing)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from ckptbench.cli import cli
from ckptbench.measure.runner import Precision
from ckptbench.results.schema import Mode, Status
from ckptbench.results.store import load_result

SMALL = ["run", "--model", "rnn", "--steps", "20", "--snaps", "4", "--warmup", "0"]


def invoke(args):
    return CliRunner().invoke(cli, args, catch_exceptions=False)


def test_a_mode_out_of_memory_is_skipped_in_later_rounds_and_said_once(fake, tmp_path):
    fake.setenv("FAKE_ALLOC", "normal:300")
    out = tmp_path / "r.json"
    res = invoke([*SMALL, "--rounds", "3", "--memory-limit", "150MiB", "--out", str(out)])
    result = load_result(out)
    normal = result.mode_rounds(Mode.NORMAL)
    assert [r.round for r in normal] == [0]  # measured once, in round 1
    assert normal[0].status is Status.OUT_OF_MEMORY
    assert len(result.mode_rounds(Mode.CHECKPOINTED)) == 3
    assert len(result.mode_rounds(Mode.BASELINE)) == 3
    assert result.environment["skipped_after_oom"] == {"normal": 1}
    said = [line for line in res.output.splitlines() if "later rounds skipped it" in line]
    assert len(said) == 1, res.output
    assert said[0].endswith("every round): normal from round 1")
    assert res.exit_code == 1  # the out-of-memory itself is still a failure


def test_retry_oom_measures_every_round(fake, tmp_path):
    fake.setenv("FAKE_ALLOC", "normal:300")
    out = tmp_path / "r.json"
    res = invoke([*SMALL, "--rounds", "2", "--memory-limit", "150MiB", "--retry-oom",
                  "--out", str(out)])  # fmt: skip
    result = load_result(out)
    normal = result.mode_rounds(Mode.NORMAL)
    assert [r.status for r in normal] == [Status.OUT_OF_MEMORY] * 2
    assert "skipped_after_oom" not in result.environment
    assert "later rounds skipped" not in res.output


def test_expected_oom_with_skipped_rounds_still_exits_0(fake, tmp_path):
    fake.setenv("FAKE_ALLOC", "normal:300")
    out = tmp_path / "r.json"
    res = invoke([*SMALL, "--rounds", "3", "--memory-limit", "150MiB", "--expect-oom",
                  "normal", "--out", str(out)])  # fmt: skip
    assert res.exit_code == 0, res.output
    assert len(load_result(out).mode_rounds(Mode.NORMAL)) == 1


def test_precision_adds_rounds_until_the_interval_is_narrow(fake, tmp_path):
    # the fake worker's times are exact (1.10x): the interval is the between-invocation
    # floor, about +/-1%, so 3% is met at the first check (2 rounds are the least judged)
    out = tmp_path / "r.json"
    res = invoke([*SMALL, "--rounds", "1", "--precision", "3%", "--out", str(out)])
    assert res.exit_code == 0, res.output
    result = load_result(out)
    assert result.case.rounds == 2 == result.summary.rounds
    prec = result.environment["precision"]
    assert prec["stopped"] == "reached" and prec["rounds"] == 2
    assert prec["half_width_rel"] <= 0.03
    assert "--precision 3.0% reached" in res.output


def test_precision_says_when_it_stopped_short(fake, tmp_path):
    out = tmp_path / "r.json"
    res = invoke([*SMALL, "--rounds", "2", "--precision", "0.5%", "--max-rounds", "3",
                  "--out", str(out)])  # fmt: skip
    assert res.exit_code == 0, res.output
    result = load_result(out)
    assert result.case.rounds == 3 == result.summary.rounds
    assert result.environment["precision"]["stopped"] == "max-rounds"
    assert "--precision 0.5% not reached" in res.output
    assert "within +/-1.0% after 3 rounds, stopped by --max-rounds" in res.output


def test_run_adds_rounds_for_5_percent_by_default(fake, tmp_path, monkeypatch):
    # the default is --precision 5% after the 6 default rounds (the fake worker's exact
    # 1.10x reaches it at the first check); --rounds N alone is exactly N rounds
    monkeypatch.delenv("CKPTBENCH_PRECISION", raising=False)
    out = tmp_path / "r.json"
    assert invoke([*SMALL, "--out", str(out)]).exit_code == 0
    prec = load_result(out).environment["precision"]
    assert prec["target_rel"] == 0.05 and prec["stopped"] == "reached" and prec["rounds"] == 6
    assert prec["max_rounds"] == 30 and prec["max_time_s"] == 240
    fixed = tmp_path / "fixed.json"
    assert invoke([*SMALL, "--rounds", "2", "--out", str(fixed)]).exit_code == 0
    result = load_result(fixed)
    assert result.case.rounds == 2 and "precision" not in result.environment
    both = tmp_path / "both.json"
    res = invoke([*SMALL, "--rounds", "2", "--precision", "4%", "--out", str(both)])
    assert res.exit_code == 0 and load_result(both).environment["precision"]["target_rel"] == 0.04


def test_precision_off_adds_no_rounds(fake, tmp_path, monkeypatch):
    monkeypatch.setenv("CKPTBENCH_PRECISION", "5%")
    out = tmp_path / "r.json"
    assert invoke([*SMALL, "--rounds", "2", "--precision", "off", "--out", str(out)]).exit_code == 0
    assert "precision" not in load_result(out).environment
    monkeypatch.setenv("CKPTBENCH_PRECISION", "off")
    env_off = tmp_path / "env.json"
    assert invoke([*SMALL, "--out", str(env_off)]).exit_code == 0
    result = load_result(env_off)
    assert "precision" not in result.environment and result.case.rounds == 6


def test_precision_is_checked_before_measuring(fake, tmp_path):
    res = invoke([*SMALL, "--precision", "150%", "--out", str(tmp_path / "r.json")])
    assert res.exit_code == 2 and "precision" in res.output
    assert not (tmp_path / "r.json").exists()
    with pytest.raises(ValueError, match="max time"):
        Precision(0.03, 5, 0.0)


def test_workers_load_ckptbench_from_bytecode_however_it_is_installed(fake, tmp_path):
    # issue 16: without .pyc files (PYTHONDONTWRITEBYTECODE in a source checkout) every
    # worker compiled ckptbench at start-up and its exact peaks moved by 0.3-0.7 MiB
    import importlib.util

    import ckptbench.measure.worker
    from ckptbench.measure.runner import compile_package

    assert compile_package() is True
    assert Path(importlib.util.cache_from_source(ckptbench.measure.worker.__file__)).is_file()
    out = tmp_path / "r.json"
    assert invoke([*SMALL, "--rounds", "1", "--out", str(out)]).exit_code == 0
    assert load_result(out).environment["bytecode_compiled"] is True


def test_the_gate_reads_a_runs_expected_out_of_memory(fake, tmp_path):
    """run --expect-oom passed (exit 0) and check failed the same file: the expectation was
    not recorded."""
    fake.setenv("FAKE_ALLOC", "normal:300")
    out = tmp_path / "r.json"
    res = invoke([*SMALL, "--rounds", "2", "--memory-limit", "150MiB", "--expect-oom",
                  "normal", "--out", str(out)])  # fmt: skip
    assert res.exit_code == 0, res.output
    assert load_result(out).environment["expect_oom"] == ["normal"]
    res = invoke(["check", str(out)])
    assert res.exit_code == 0, res.output
    assert "normal out of memory as expected" in res.output
    fake.delenv("FAKE_ALLOC")  # the same expectation unmet: the gate fails it
    unmet = tmp_path / "u.json"
    invoke([*SMALL, "--rounds", "1", "--memory-limit", "150MiB", "--expect-oom", "normal",
            "--out", str(unmet)])  # fmt: skip
    res = invoke(["check", str(unmet)])
    assert res.exit_code == 1 and "not every one ran out of memory" in res.output
