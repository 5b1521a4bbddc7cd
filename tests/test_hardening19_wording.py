"""A nineteenth audit (2026-11-30): wording of counts, of a file saved mid-run, and of a
path that does not exist. Each test failed on the code before its fix."""

from __future__ import annotations

from pathlib import Path

import pytest
from _cli import one_line_error
from click.testing import CliRunner

from ckptbench.cli import cli

ONE_CELL = 'name = "one"\n[case]\nmodel = "lstm"\nsteps = 20\nhidden = 8\nbatch = 2\n'


def test_a_long_sweep_of_one_cell_not_confirmed_says_1_cell(tmp_path: Path, monkeypatch):
    """Off a terminal without --yes, a sweep of one long cell said '1 cells, roughly ...'."""
    monkeypatch.setattr("ckptbench.cli.sweep.CONFIRM_HOURS", 0.0)  # every sweep is long
    (tmp_path / "one.toml").write_text(ONE_CELL)
    res = CliRunner().invoke(
        cli, ["sweep", str(tmp_path / "one.toml"), "--out", str(tmp_path / "o")]
    )
    assert res.exit_code == 2 and "--yes" in res.output, res.output
    assert ": 1 cell, roughly " in res.output and "1 cells" not in res.output, res.output


def test_checks_failed_headline_of_one_check_and_one_cell_is_singular():
    """`check`'s FAILED headline said '(1 of 1 checks, 1 of 1 cells)' where PASSED said
    '1 check on 1 cell'."""
    from ckptbench.analysis.cellchecks import GateLine
    from ckptbench.analysis.gate import GateReport

    report = GateReport((GateLine("k", "h", "status", False, "failed"),))
    assert report.headline == "ckptbench check: FAILED (1 of 1 check, 1 of 1 cell)"
    two = GateReport((*report.lines, GateLine("k2", "h", "status", True, "ok")))
    assert two.headline == "ckptbench check: FAILED (1 of 2 checks, 1 of 2 cells)"


# ------------------------------------------- 2. a file saved mid-run: what the warning knows


def _kept(rounds_kept: int, environment: dict):
    """A 3-round result holding its first ``rounds_kept`` rounds, with ``environment``."""
    from dataclasses import replace

    from _synthetic import CI_CASE, make_result

    r = make_result(CI_CASE.with_(rounds=3), rounds=3, seed=19)
    modes = tuple(m for m in r.modes if m.round < rounds_kept)
    return replace(r, modes=modes, environment={**r.environment, **environment})


def test_the_warning_for_a_file_saved_mid_run_says_its_complete_rounds_as_the_status(
    tmp_path: Path, monkeypatch
):
    """compare's warning said '(interrupted before round 2, 1 complete round)' for a file
    saved before its last round, where nothing interrupted it that the file records and the
    status column says 'never finished (1 complete round)'."""
    from ckptbench.frame import cells_frame
    from ckptbench.render.caveats import warning_lines
    from ckptbench.results.schema import save_result

    result = _kept(1, {"finished": False})
    (line,) = [w for w in warning_lines(result) if "saved mid-run" in w]
    assert line.endswith("the figures come from the complete rounds: 1 complete round"), line
    assert "interrupted" not in line
    assert cells_frame([result]).iloc[0]["status"] == "never finished (1 complete round)"
    save_result(result, tmp_path / "mid.json")
    monkeypatch.setenv("COLUMNS", "250")
    res = CliRunner().invoke(cli, ["compare", str(tmp_path / "mid.json")])
    assert res.exit_code == 0 and "interrupted before round 2" not in res.output, res.output


def test_the_warning_for_a_stopped_run_says_what_stopped_it_where_recorded():
    """Where the file records the signal that stopped ckptbench, the warning names it."""
    from ckptbench.render.caveats import warning_lines

    result = _kept(2, {"finished": False, "interrupted": {"by": "SIGTERM", "round": 3}})
    (line,) = [w for w in warning_lines(result) if "ckptbench was stopped" in w]
    assert line.endswith(": interrupted before round 3 by SIGTERM, 2 complete rounds"), line


# ----------------------------------- 3. --against a path that does not exist (no change)


@pytest.mark.parametrize("command", ["check", "compare"])
@pytest.mark.parametrize("absent", ["gone", "gone/", "gone/r.json"])
def test_against_a_path_that_does_not_exist_says_so(tmp_path: Path, capsys, command, absent):
    """Reported as 'no result files in this folder' for `--against /nonexist`, which was
    an empty folder on that machine: a path that does not exist already says so; kept."""
    from _synthetic import CI_CASE, make_result

    from ckptbench.results.schema import save_result

    save_result(make_result(CI_CASE, seed=3), tmp_path / "r.json")
    against = f"{tmp_path}/{absent}"
    err = one_line_error(capsys, [command, str(tmp_path / "r.json"), "--against", against])
    assert err.endswith(f"{against}: no such file or folder\n"), err  # as typed
    assert "no result files" not in err
    (tmp_path / "empty").mkdir()  # an empty folder that exists says what it lacks
    err = one_line_error(
        capsys, [command, str(tmp_path / "r.json"), "--against", str(tmp_path / "empty")]
    )
    assert err.endswith("empty: no result files in this folder\n"), err


# ------------------------------------------------------ 4. one round, in run's own lines
def test_precision_that_adds_no_rounds_to_one_round_says_1_round(fake, tmp_path):
    """`run --rounds 1 --precision 1% --modes baseline,normal` said 'runs 1 rounds'."""
    argv = ["run", "--model", "rnn", "--steps", "20", "--snaps", "4", "--rounds", "1",
            "--out", str(tmp_path / "r.json"), "--precision", "1%",
            "--modes", "baseline,normal"]  # fmt: skip
    res = CliRunner().invoke(cli, argv, catch_exceptions=False)
    assert res.exit_code == 0, res.output
    assert "runs 1 round and adds none" in res.output, res.output
