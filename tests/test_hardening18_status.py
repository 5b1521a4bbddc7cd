"""Wording left from the seventeenth audit: what ``compare``'s status column, ``sweep
--dry-run`` and a sweep manifest say of a file or cell, and what a refused command prints.
Nothing here measures."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from _cli import run_cli
from _synthetic import CI_CASE, make_result

from ckptbench.results.schema import UNFINISHED, save_result


@pytest.fixture(autouse=True)
def _no_step_summary(monkeypatch):
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)


# ------------------------------------------------ 1. a file saved mid-run: "never finished"


def _saved_mid_run(tmp_path: Path, environment: dict) -> Path:
    """A 3-round result of which only round 1 is held, with ``environment`` recorded."""
    r = make_result(CI_CASE.with_(rounds=3), seed=18)
    r = replace(r, modes=tuple(m for m in r.modes if m.round == 0), environment=environment)
    path = tmp_path / "mid.json"
    save_result(r, path)
    return path


@pytest.mark.parametrize(
    "environment",
    [
        {"finished": False},  # what every save before a run's last records
        {"interrupted": {"by": UNFINISHED, "round": 2}},  # the older marker
    ],
    ids=["finished-false", "older-marker"],
)
def test_compare_status_says_never_finished_as_the_warning_and_check_do(
    tmp_path, capsys, monkeypatch, environment
):
    """The status column read 'interrupted before round 2 (1 complete round)' where the
    warning and ``check`` say the file was saved mid-run and never finished."""
    from ckptbench.frame import cells_frame
    from ckptbench.results.store import load_results

    path = _saved_mid_run(tmp_path, environment)
    (result,) = load_results([path])
    assert cells_frame([result]).iloc[0]["status"] == "never finished (1 complete round)"
    monkeypatch.setenv("COLUMNS", "250")
    code, shown, _ = run_cli(capsys, ["compare", str(path)])
    assert code == 0 and "never finished (1 complete round)" in shown, shown
    assert "interrupted before round 2 (1 complete round)" not in shown
    monkeypatch.setenv("COLUMNS", "60")  # the narrow form keeps the words, not the count
    code, shown, _ = run_cli(capsys, ["compare", str(path)])
    status_row = [line for line in shown.splitlines() if line.startswith("lstm")]
    assert code == 0 and status_row and status_row[0].endswith("never finished"), shown


def test_a_stopped_run_is_still_interrupted_in_the_status_column(tmp_path):
    """A stop signal between rounds keeps its words: the run was interrupted, not killed."""
    from ckptbench.frame import cells_frame
    from ckptbench.results.store import load_results

    path = _saved_mid_run(tmp_path, {"interrupted": {"by": "SIGTERM", "round": 2}})
    (result,) = load_results([path])
    assert cells_frame([result]).iloc[0]["status"] == (
        "interrupted before round 2 (1 complete round)"
    )
