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
    # one cell is numbered at this width, as two or more are (its label said below the table)
    status_row = [line for line in shown.splitlines() if line.startswith(("lstm", "#1 "))]
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


# ------------------------------------- 3. a cell waiting to be measured again is no error


def _two_incomplete(tmp_path: Path):
    """A sweep folder of two cells, each file missing its second round of normal: both
    measured again by ``--resume``."""
    from _synthetic import TINY_SWEEP_TEXT

    from ckptbench.results.modes import Mode
    from ckptbench.results.store import cell_path
    from ckptbench.sweep.config import parse_config

    text = TINY_SWEEP_TEXT.replace("repeats = 3", "repeats = 3\nrounds = 2")
    config = parse_config(text.replace("[2, 3, 4]", "[2, 3]"), source="tiny.toml")
    for i, case in enumerate(config.cases):
        r = make_result(case, rounds=2, seed=i)
        lost = tuple(m for m in r.modes if (m.mode, m.round) != (Mode.NORMAL, 1))
        save_result(replace(r, modes=lost), cell_path(tmp_path, case))
    return config


WHY = "incomplete: normal: 1 of 2 planned rounds (round 2 missing)"


def test_a_cell_waiting_to_be_measured_again_records_why_not_an_error(tmp_path):
    """While ``--resume`` measured one cell, the manifest said of it and of the one waiting
    ``error: "measured again: incomplete: ..."``: a failure claimed of a cell not measured
    yet. The reason is ``remeasure_reason``, and a cell once measured carries none."""
    import json

    from ckptbench.sweep.run import run_sweep

    config = _two_incomplete(tmp_path)
    seen: list[list[dict]] = []

    def run_cell(case, **_):
        seen.append(json.loads((tmp_path / "sweep.json").read_text())["cells"])
        return make_result(case, rounds=2, seed=9)

    outcome = run_sweep(config, tmp_path, resume=True, run_cell=run_cell)
    running, waiting = seen[0]
    assert (running["state"], waiting["state"]) == ("running", "pending")
    for cell in (running, waiting):
        assert cell["error"] is None and cell["remeasure_reason"] == WHY, cell
    done = json.loads((tmp_path / "sweep.json").read_text())["cells"]
    assert [(c["state"], c["error"], c["remeasure_reason"]) for c in done] == [
        ("measured", None, None)
    ] * 2
    notes = [line for line in outcome.summary_lines() if line.startswith("note ")]
    assert len(notes) == 2 and all(f": measured again: {WHY}; its earlier" in n for n in notes)


@pytest.mark.parametrize("older", [True, False], ids=["older-manifest", "this-manifest"])
def test_readers_say_why_a_listed_cell_without_its_file_was_to_be_measured_again(
    tmp_path, capsys, older
):
    """A sweep killed after it moved a cell's file aside: the manifest lists the cell
    running, its file gone. ``compare`` and ``check`` say why it was being measured again,
    from an older manifest's ``error`` as from ``remeasure_reason``; ``--resume`` measures
    it."""
    import json

    from ckptbench.sweep.run import run_sweep

    config = _two_incomplete(tmp_path)
    run_sweep(config, tmp_path, resume=True, run_cell=lambda case, **_: make_result(case))
    manifest = json.loads((tmp_path / "sweep.json").read_text())
    cell = manifest["cells"][1]
    cell.update(state="running", error=None, remeasure_reason=WHY)
    if older:
        cell.pop("remeasure_reason")
        cell["error"] = f"measured again: {WHY}"
    (tmp_path / "sweep.json").write_text(json.dumps(manifest))
    (tmp_path / cell["file"]).unlink()
    said = f"(state running: measured again: {WHY})"
    code, shown, _ = run_cli(capsys, ["compare", str(tmp_path)])
    assert code == 0 and said in " ".join(shown.split()), shown
    code, shown, _ = run_cli(capsys, ["check", str(tmp_path)])
    assert code == 1 and f"running: measured again: {WHY}" in shown, shown
    calls: list[str] = []
    run_sweep(config, tmp_path, resume=True,
              run_cell=lambda case, **_: calls.append(case.key) or make_result(case))  # fmt: skip
    assert calls == [cell["key"]]


# ------------------------------------------- 2. sweep --dry-run says why it measures again


def test_dry_run_says_why_a_cell_is_measured_again_as_resume_does(tmp_path, capsys):
    """``--dry-run --resume`` said 'measure again (incomplete or failed; ...)' of a cell whose
    file misses a round, where ``--resume`` says 'incomplete: normal: 1 of 2 planned rounds
    (round 2 missing)': the table says why is below, and the line below says it."""
    from _synthetic import TINY_SWEEP_TEXT

    from ckptbench.sweep.run import run_sweep

    config = _two_incomplete(tmp_path / "d")
    text = TINY_SWEEP_TEXT.replace("repeats = 3", "repeats = 3\nrounds = 2")
    (tmp_path / "tiny.toml").write_text(text.replace("[2, 3, 4]", "[2, 3]"))
    argv = ["sweep", str(tmp_path / "tiny.toml"), "--out", str(tmp_path / "d"), "--resume"]
    code, shown, err = run_cli(capsys, [*argv, "--dry-run"])
    assert code == 0, err
    lines = shown.splitlines()
    for case in config.cases:
        assert f"measure again: {case.key}: {WHY}" in lines, shown
    assert "incomplete or failed" not in shown
    said = run_sweep(config, tmp_path / "d", resume=True, run_cell=lambda c, **_: make_result(c))
    assert all(f": measured again: {WHY}; " in n for n in said.notes)  # the same words


# ------------------------------------------ 4. a manifest given by name that lists no cells


@pytest.mark.parametrize("saved", [False, True], ids=["no-cells", "none-saved"])
def test_a_manifest_given_by_name_says_what_its_folder_says(tmp_path, capsys, saved):
    """``compare d/sweep.json`` said 'no results to compare' where ``compare d`` says its
    sweep manifest lists no cells (or lists some, none saved)."""
    from _cli import one_line_error

    from ckptbench.sweep.run import run_sweep

    config = _two_incomplete(tmp_path)
    run_sweep(config, tmp_path, resume=True, run_cell=lambda case, **_: make_result(case))
    manifest = tmp_path / "sweep.json"
    if saved:
        for case in config.cases:
            (tmp_path / f"{case.key}.json").unlink()
        why = "its sweep manifest lists 2 cells, none saved"
    else:
        import json

        data = json.loads(manifest.read_text())
        manifest.write_text(json.dumps({**data, "cells": []}))
        why = (
            "its sweep manifest lists no cells; 2 result files here it does not list "
            "(pass one by name)"
        )
    for command in ("compare", "check"):
        assert one_line_error(capsys, [command, str(tmp_path)]).endswith(f": {why}\n")
        err = one_line_error(capsys, [command, str(manifest)])
        assert err.endswith(f"{manifest}: {why}\n"), err


# ------------------------------ 5. a refusal does not say it created a folder it removes


def _refused(capsys, argv: list[str]) -> str:
    """``ckptbench ARGV``'s refusal: exit 2, one line, and no folder said made."""
    from _cli import one_line_error

    err = one_line_error(capsys, argv)
    assert "created folder" not in err, err
    return err


def test_a_refused_command_says_no_folder_it_removes(tmp_path, capsys, monkeypatch):
    """A command refused after it made its output's folder printed 'note: created folder X
    for --out' before its error line, then removed X: the refusal is its one line now."""
    monkeypatch.chdir(tmp_path)
    save_result(make_result(CI_CASE), tmp_path / "r.json")
    (tmp_path / "empty").mkdir()
    bad = "/proc/no-such-process/m"  # no folder can be made there
    tiny = ["--model", "rnn", "--steps", "20", "--snaps", "3", "--hidden", "8"]
    err = _refused(capsys, ["run", *tiny, "--out", "nd/x.json", "--mprof", bad])
    assert "--mprof" in err
    err = _refused(capsys, ["compare", "r.json", "-o", "nd/r.html", "--plots", bad])
    assert "--plots" in err
    err = _refused(capsys, ["check", "r.json", "--junit", "nd/j.xml", "--against", "empty"])
    assert "empty: no result files in this folder" in err
    assert not (tmp_path / "nd").exists()


def test_a_sweep_refused_at_its_question_says_nothing_before_its_line(
    tmp_path, capsys, monkeypatch
):
    """A sweep too long to start unasked, off a terminal, said the folder it made and its
    start line, then refused and removed the folder: now the refusal alone."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("sys.stdin.isatty", lambda: False, raising=False)
    # over two hours, within the iterations a result file holds (results.resultsize)
    long = '[case]\nmodel = "rnn"\nsteps = 5000\nhidden = 8\nrepeats = 1000\nrounds = 100\n'
    (tmp_path / "long.toml").write_text(f'name = "long"\n{long}')
    err = _refused(capsys, ["sweep", "long.toml", "--out", "nd/sub"])
    assert "pass --yes to run them" in err
    assert not (tmp_path / "nd").exists()


def test_a_kept_folder_is_said_before_what_is_written_there(tmp_path, capsys, monkeypatch):
    """The note comes once the command is past its checks, before the files it writes."""
    monkeypatch.chdir(tmp_path)
    save_result(make_result(CI_CASE), tmp_path / "r.json")
    code, _, err = run_cli(capsys, ["compare", "r.json", "-o", "rep/r.html", "-q"])
    assert code == 0 and err.startswith("note: created folder rep for -o\n"), err
    code, _, err = run_cli(capsys, ["check", "r.json", "--junit", "ci/j.xml"])
    lines = err.splitlines()
    assert lines[:2] == ["note: created folder ci for --junit", "wrote ci/j.xml"], err
