"""Whether the run that wrote a result file finished: every save before a run's last says
it has not (``environment.finished`` false), the last one how many rounds it ran and why no
more (``{"rounds": N, "why": ...}``), so a file cut after a round in every mode with no stop
recorded no longer reads as a complete run, while a run that stopped early by design
(``--precision``) is no alarm and a file without the field (an earlier ckptbench's, the
tests' synthetic ones) reads as before. ``sweep --resume`` measures again a cell whose file
is missing rounds, its old file kept aside and said in one line. Tiny real runs (a SIGKILL
between rounds) and synthetic results; nothing is timed."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from _cli import run_cli
from _synthetic import CI_CASE, TINY_SWEEP_TEXT, make_result

from ckptbench.results.schema import Mode, RunResult, result_to_dict, save_result
from ckptbench.results.store import cell_path, load_result

SAFETY_TIMEOUT_S = 300  # only to avoid hanging the suite; never asserted on


@pytest.fixture(autouse=True)
def _no_step_summary(monkeypatch):
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)


def _finished(rounds: int, kept: int, **env) -> RunResult:
    """A run of ``rounds`` rounds whose last save says it ran them, holding ``kept``."""
    full = make_result(replace(CI_CASE, rounds=rounds), rounds=rounds)
    modes = tuple(m for m in full.modes if m.round < kept)
    return replace(full, modes=modes, environment={**full.environment, **env})


def _status(capsys, path: Path) -> tuple[int, str]:
    code, out, _ = run_cli(capsys, ["check", str(path)])
    return code, next(line for line in out.splitlines() if " status: " in line)


# ------------------------------------------------ 1. the run records whether it finished

CHILD = """
import os, signal, sys
from ckptbench.measure.runner import run_case
from ckptbench.results.schema import Case

case = Case(model="lstm", steps=12, snaps=3, hidden=4, batch=2, rounds=3, repeats=1)
done = []

def killed_after_round_1(event):
    if event.phase == "done" and event.round == 0:
        done.append(event.mode)
        if len(done) == 3:  # round 1's last mode saved: the kill falls between rounds
            os.kill(os.getpid(), signal.SIGKILL)

run_case(case, out_path=sys.argv[1], progress=killed_after_round_1)
"""


def test_a_run_killed_between_rounds_leaves_a_file_that_says_it_did_not_finish(
    tmp_path: Path, capsys
):
    """A real run of 3 rounds, SIGKILLed after round 1's last save: its file holds round 1
    in every mode, says the run did not finish, and compare and check read it so."""
    out = tmp_path / "r.json"
    child = subprocess.run([sys.executable, "-c", CHILD, str(out)], timeout=SAFETY_TIMEOUT_S)
    assert child.returncode == -9
    doc = json.loads(out.read_text())
    assert {(m["mode"], m["round"]) for m in doc["modes"]} == {
        (m, 0) for m in ("baseline", "normal", "checkpointed")
    }
    assert doc["environment"]["finished"] is False
    code, status = _status(capsys, out)
    assert code == 1
    assert status.endswith(
        "status: never finished (1 complete round), saved mid-run: killed outright, or still "
        "running"
    ), status
    code, shown, _ = run_cli(capsys, ["compare", str(out), "--format", "markdown"])
    assert code == 0 and "never finished (1 complete round)" in shown
    assert "saved mid-run and never finished" in shown


def test_every_save_but_the_last_says_the_run_has_not_finished(tmp_path: Path, monkeypatch):
    from click.testing import CliRunner

    from ckptbench.cli import cli
    from ckptbench.results import schema

    monkeypatch.chdir(tmp_path)
    real, saved = schema.save_result, []

    def keep(result, path, **kw):
        saved.append(result)
        return real(result, path, **kw)

    monkeypatch.setattr(schema, "save_result", keep)
    args = ["run", "--model", "lstm", "--steps", "12", "--snaps", "3", "--hidden", "4",
            "--batch", "2", "--rounds", "2", "--repeats", "1", "-q", "--out", "r.json"]  # fmt: skip
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 0, res.output
    assert len(saved) == 7  # after each of 2 x 3 modes, then the last save
    assert [s.environment.get("finished") for s in saved[:-1]] == [False] * 6
    assert saved[-1].environment["finished"] == {"rounds": 2, "why": "planned"}
    assert load_result(tmp_path / "r.json").environment["finished"] == {
        "rounds": 2,
        "why": "planned",
    }


def test_the_last_save_says_why_no_more_rounds_were_measured():
    """--precision's outcome, every mode over the memory limit, or the plug-in changed (the
    loop ended the run: its precision record said 'running', one round short)."""
    from ckptbench.measure.recording import Recording

    def finished(env: dict, oom: int = 0, precise: bool = True) -> dict:
        rec = Recording(CI_CASE, env, None, False, None)
        rec.out_of_memory = {m.value: 1 for m in list(Mode)[:oom]}
        rec.finish(4, 3, precise)
        return rec.env

    assert finished({}, precise=False)["finished"] == {"rounds": 4, "why": "planned"}
    reached = finished({"precision": {"rounds": 4, "stopped": "reached"}})
    assert reached["finished"] == {"rounds": 4, "why": "reached"}
    over = finished({"precision": {"rounds": 3, "stopped": "running"}}, oom=3)
    assert over["finished"]["why"] == over["precision"]["stopped"] == "out-of-memory"
    assert over["precision"]["rounds"] == 4
    changed = finished({"precision": {"rounds": 3, "stopped": "running"}})
    assert changed["finished"] == {"rounds": 4, "why": "plugin-changed"}
    assert changed["precision"] == {"rounds": 4, "stopped": "plugin-changed"}


# ------------------------------------------------------------- 2. how a reader takes it


def test_a_finished_run_missing_rounds_in_every_mode_is_said_and_fails_check(tmp_path, capsys):
    """A file whose run says it ran 3 rounds, cut after round 1 in every mode (a record
    lost, files merged): compare showed a clean run with figures from 1 round, check
    passed it."""
    path = tmp_path / "cut.json"
    save_result(_finished(3, 1, finished={"rounds": 3, "why": "planned"}), path)
    code, status = _status(capsys, path)
    assert code == 1
    said = [f"{m}: 1 of 3 planned rounds (rounds 2, 3 missing)"
            for m in ("baseline", "normal", "checkpointed")]  # fmt: skip
    assert status.endswith(f"status: incomplete: {'; '.join(said)}; the file records no stop")
    code, out, err = run_cli(capsys, ["compare", str(path), "--format", "markdown"])
    assert code == 0, err
    row = next(line for line in out.splitlines() if line.startswith("| lstm"))
    assert row.rstrip(" |").endswith("; ".join(said))  # the status column, not "ok"


def test_a_file_that_says_its_run_did_not_finish_reads_so_with_no_stop_recorded(tmp_path, capsys):
    path = tmp_path / "cut.json"
    save_result(_finished(3, 1, finished=False), path)
    code, status = _status(capsys, path)
    assert code == 1
    assert status.endswith(
        "status: never finished (1 complete round), saved mid-run: killed outright, or still "
        "running"
    ), status


def test_fewer_rounds_by_design_and_files_that_do_not_say_read_as_before(tmp_path, capsys):
    """--precision reached (or its --max-time) after 2 of 6 planned rounds: no round is
    missing; a file without the field (an earlier ckptbench's) is read as before."""
    prec = {"rounds": 2, "rounds_planned": 6, "stopped": "reached", "target_rel": 0.05,
            "half_width_rel": 0.04, "max_rounds": 30, "max_time_s": 900.0}  # fmt: skip
    for why in ("reached", "max-time"):
        r = _finished(6, 2, precision={**prec, "stopped": why},
                      finished={"rounds": 2, "why": why})  # fmt: skip
        assert r.summary.rounds_missing == () and r.interruption is None
        save_result(r, tmp_path / f"{why}.json")
        code, status = _status(capsys, tmp_path / f"{why}.json")
        assert code == 0 and status.endswith("status: all modes measured"), status
    old = _finished(3, 1)  # cut after round 1 by a ckptbench that did not record it
    assert "finished" not in old.environment and old.summary.rounds_missing == ()
    assert old.summary.ok and old.interruption is None


def test_a_malformed_finished_record_is_one_line(tmp_path, capsys):
    from _cli import one_line_error

    doc = result_to_dict(_finished(2, 2))
    for bad in (True, {"rounds": 0, "why": "planned"}, {"rounds": 2}, "yes"):
        doc["environment"]["finished"] = bad
        (tmp_path / "bad.json").write_text(json.dumps(doc))
        err = one_line_error(capsys, ["compare", str(tmp_path / "bad.json")])
        assert "environment.finished must be false (the run did not finish) or an object" in err


# ------------------------------------------------------------- 3. sweep --resume


def test_resume_measures_a_cell_missing_rounds_again_keeping_its_file(tmp_path: Path):
    from ckptbench.sweep.config import parse_config
    from ckptbench.sweep.run import CellState, run_sweep

    config = parse_config(TINY_SWEEP_TEXT.replace("repeats = 3", "repeats = 3\nrounds = 2"),
                          source="tiny.toml")  # fmt: skip
    cases = config.cases
    full = [make_result(c, rounds=2, seed=i) for i, c in enumerate(cases)]
    save_result(full[0], cell_path(tmp_path, cases[0]))  # complete: kept
    lost = replace(full[1], modes=tuple(m for m in full[1].modes
                                        if (m.mode, m.round) != (Mode.NORMAL, 1)))  # fmt: skip
    save_result(lost, cell_path(tmp_path, cases[1]))  # a round missing, no reason: again
    cut = _finished(2, 1, finished=False)
    cut = replace(cut, case=cases[2], environment={"finished": False})
    save_result(cut, cell_path(tmp_path, cases[2]))  # did not finish: again
    before = {p: p.read_bytes() for p in (cell_path(tmp_path, c) for c in cases[1:])}
    calls: list[str] = []

    def run_cell(case, **_):
        calls.append(case.key)
        return make_result(case, rounds=2, seed=9)

    outcome = run_sweep(config, tmp_path, resume=True, run_cell=run_cell)
    assert calls == [cases[1].key, cases[2].key]
    assert [c.state for c in outcome.cells] == [CellState.KEPT] + [CellState.MEASURED] * 2
    for path, data in before.items():  # nothing measured is lost: the old file kept aside
        (aside,) = tmp_path.glob(f"{path.name}.*.replaced")
        assert aside.read_bytes() == data
    notes = [line for line in outcome.summary_lines() if line.startswith("note ")]
    assert notes[0].startswith(
        f"note {cases[1].key}: measured again: incomplete: normal: 1 of 2 planned rounds "
        "(round 2 missing); its earlier result was moved to "
    )
    assert notes[1].startswith(
        f"note {cases[2].key}: measured again: never finished (1 complete round), saved "
        "mid-run: killed outright, or still running; its earlier "
    )
    assert len(notes) == 2
