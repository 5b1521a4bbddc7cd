"""A nineteenth audit (2026-11-30): wording of counts, of a file saved mid-run, and of a
path that does not exist. Each test failed on the code before its fix."""

from __future__ import annotations

from pathlib import Path

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
