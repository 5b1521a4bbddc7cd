"""The fifteenth audit, of the reading side: a mode's round missing from a result file with
no stop recorded is said by ``compare`` and fails ``check``; one unreadable cell file of a
folder (another schema version, cut short) no longer stops ``compare`` and ``check`` of the
whole folder: the other cells are shown and gated, the broken one named (and failed by
``check``); markdown shows a host's ``<``, ``>`` and ``&`` as text, never as HTML; and
``check --summary`` writes its file atomically. Synthetic results; nothing is measured or
timed."""

from __future__ import annotations

import json
import os
import re
from dataclasses import replace
from pathlib import Path

import pytest
from _cli import one_line_error, run_cli
from _synthetic import CI_CASE, make_result

from ckptbench.results.schema import Mode, RunResult, Status, result_to_dict, save_result


@pytest.fixture(autouse=True)
def _no_step_summary(monkeypatch):
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)


def _measured(rounds: int) -> RunResult:
    """A result as a run of ``rounds`` planned rounds saves it (its case plans them)."""
    return make_result(replace(CI_CASE, rounds=rounds), rounds=rounds)


def _without(result: RunResult, mode: Mode, k: int) -> RunResult:
    """``result`` less ``mode``'s round ``k`` (0-based): a record deleted, no stop said."""
    kept = tuple(m for m in result.modes if not (m.mode is mode and m.round == k))
    return replace(result, modes=kept)


# ------------------------------------------------------------------ 1. a missing round


def test_a_round_missing_without_a_stop_is_said_by_compare_and_fails_check(tmp_path, capsys):
    """Round 2 of normal deleted from a 2-round result: compare showed `status ok` and a
    slowdown from round 1 alone, check passed it."""
    path = tmp_path / "a.json"
    save_result(_without(_measured(2), Mode.NORMAL, 1), path)
    code, out, err = run_cli(capsys, ["compare", str(path), "--format", "markdown"])
    assert code == 0, err
    said = "normal: 1 of 2 planned rounds (round 2 missing)"
    warning = next(line for line in out.splitlines() if "it records no stop" in line)
    assert said in warning
    row = next(line for line in out.splitlines() if line.startswith("| lstm"))
    assert row.rstrip(" |").endswith(said)  # the status column, not "ok"
    code, out, err = run_cli(capsys, ["check", str(path)])
    assert code == 1, out
    assert f"status: incomplete: {said}; the file records no stop" in out


def test_a_whole_round_missing_from_every_mode_is_said(tmp_path, capsys):
    path = tmp_path / "a.json"
    result = _measured(3)
    result = replace(result, modes=tuple(m for m in result.modes if m.round != 1))
    save_result(result, path)
    code, out, _ = run_cli(capsys, ["check", str(path)])
    assert code == 1
    for mode in ("baseline", "normal", "checkpointed"):
        assert f"{mode}: 2 of 3 planned rounds (round 2 missing)" in out


def _missing(result: RunResult) -> list[str]:
    return [x.text for x in result.summary.rounds_missing]


def test_rounds_the_file_says_why_it_lacks_are_not_missing():
    """A stop (a signal, a file saved mid-run), --precision stopped early, a mode skipped
    after it ran out of memory: the file records why, so nothing is said twice."""
    full = _measured(3)
    assert _missing(full) == []
    # stopped mid-round 2: normal interrupted, checkpointed never started there
    mid = [m for m in full.modes if m.round < 1 or (m.round == 1 and m.mode is Mode.BASELINE)]
    lost = list(mid)
    mid.append(replace(full.modes[4], status=Status.INTERRUPTED, iterations=(), warmup=()))
    assert _missing(replace(full, modes=tuple(mid))) == []
    assert _missing(replace(full, modes=tuple(lost))) == [
        "normal: 1 of 3 planned rounds (round 2 missing)",
        "checkpointed: 1 of 3 planned rounds (round 2 missing)",
    ]
    stop = {"interrupted": {"by": "SIGINT", "round": 2}}  # the stop, in the environment
    assert _missing(replace(full, modes=tuple(lost), environment=stop)) == []
    # --precision stopped by --max-time after 1 of the 3 planned rounds
    prec = {"precision": {"rounds": 1, "stopped": "max-time", "target_rel": 0.05}}
    assert _missing(replace(full, modes=tuple(lost), environment=prec)) == []
    # normal out of memory in round 1, skipped in later rounds (its status or the environment)
    rest = [m for m in full.modes if m.mode is not Mode.NORMAL or m.round == 0]
    oom = [replace(m, status=Status.OUT_OF_MEMORY) if m.mode is Mode.NORMAL else m for m in rest]
    assert _missing(replace(full, modes=tuple(oom))) == []
    assert _missing(replace(full, modes=tuple(rest))) == [
        "normal: 1 of 3 planned rounds (rounds 2, 3 missing)"
    ]
    skipped = replace(full, modes=tuple(rest), environment={"skipped_after_oom": {"normal": 1}})
    assert _missing(skipped) == []
    # but a round before the stop is still missing: stopped in round 3, round 1 deleted
    late = [m for m in full.modes if m.round < 2 or m.mode is Mode.BASELINE]
    late.append(replace(full.modes[7], status=Status.INTERRUPTED, iterations=(), warmup=()))
    assert _missing(replace(full, modes=tuple(late))) == []
    early = _without(replace(full, modes=tuple(late)), Mode.CHECKPOINTED, 0)
    assert _missing(early) == ["checkpointed: 1 of 3 planned rounds (round 1 missing)"]


# ------------------------------------------------------- 2. one unreadable cell of a folder


def _sweep_folder(tmp_path: Path) -> Path:
    """A three-cell sweep folder measured by a fake cell runner."""
    from ckptbench.sweep.config import parse_config
    from ckptbench.sweep.run import run_sweep

    config = parse_config(
        'name = "t"\n[case]\nmodel = "rnn"\nsteps = 20\nhidden = 8\n[grid]\nsnaps = [2, 3, 4]\n',
        source="t.toml",
    )
    out = tmp_path / "sw"
    run_sweep(config, out, run_cell=lambda case, **_: make_result(case))
    return out


#: What a result of a newer layout reads as.
NEWER = (
    "schema_version 4 is from a newer ckptbench (this one reads 3): upgrade ckptbench to read it"
)


def _break(out: Path) -> tuple[Path, Path, Path]:
    """The folder's cells: one of schema version 4, one cut short, one intact."""
    s2, s3, s4 = (next(out.glob(f"rnn-l20-s{s}-*.json")) for s in (2, 3, 4))
    doc = json.loads(s2.read_text())
    s2.write_text(json.dumps({**doc, "schema_version": 4}))
    text = s3.read_text()
    s3.write_text(text[: len(text) // 2])
    return s2, s3, s4


def test_compare_shows_the_readable_cells_and_names_each_unreadable_one(tmp_path, capsys):
    out = _sweep_folder(tmp_path)
    s2, s3, _ = _break(out)
    code, text, err = run_cli(capsys, ["compare", str(out), "--format", "markdown"])
    assert code == 0, err
    assert "| rnn l=20 s=4 revolve |" in text  # the readable cell is shown
    v4 = f"{s2}: {NEWER}"
    cut = f"{s3}: not JSON ("
    for stream in (text, err):
        assert "2 cell file(s) could not be read" in stream
        assert v4 in stream and cut in stream
    # every cell unreadable: nothing to compare, each named, exit 2
    s4 = next(out.glob("rnn-l20-s4-*.json"))
    s4.write_text("{")
    code, _, err = run_cli(capsys, ["compare", str(out)])
    assert code == 2 and err.count(": not JSON (") == 2 and v4 in err and "Traceback" not in err


def test_check_gates_the_readable_cells_and_fails_each_unreadable_one(tmp_path, capsys):
    out = _sweep_folder(tmp_path)
    s2, s3, _ = _break(out)
    junit, summary = tmp_path / "j.xml", tmp_path / "s.md"
    argv = ["check", str(out), "--junit", str(junit), "--summary", str(summary)]
    code, text, err = run_cli(capsys, argv)
    assert code == 1, err
    assert text.startswith("ckptbench check: FAILED (2 of 3 checks, 2 of 3 cells)")
    lines = text.splitlines()
    passed = "status: all modes measured"
    assert any(x.startswith("ok   rnn-l20-s4-") and x.endswith(passed) for x in lines)
    v4 = f"readable: {s2}: {NEWER}"
    assert any(x.startswith(f"FAIL {s2.stem} ") and x.endswith(v4) for x in lines)
    assert any(x.startswith(f"FAIL {s3.stem} readable: {s3}: not JSON (") for x in lines)
    xml, md = junit.read_text(), summary.read_text()
    assert xml.count("<failure ") == 2 and 'name="readable"' in xml and str(s2) in xml
    assert md.count("| **FAIL** |") == 4  # failures, then all checks
    assert f"`{s3.stem}` | readable | {s3}: not JSON (" in md
    # every cell unreadable: still a failed check, not bad input
    next(out.glob("rnn-l20-s4-*.json")).write_text("{")
    code, text, _ = run_cli(capsys, ["check", str(out)])
    assert code == 1 and text.startswith("ckptbench check: FAILED (3 of 3 checks, 3 of 3 cells)")


def test_a_broken_file_given_by_name_is_still_one_line(tmp_path, capsys):
    out = _sweep_folder(tmp_path)
    s2, s3, _ = _break(out)
    for command in ("compare", "check"):
        err = one_line_error(capsys, [command, str(s2)])
        assert err == f"ckptbench: error: {s2}: {NEWER}\n"
        assert "not JSON (" in one_line_error(capsys, [command, str(s3)])


# --------------------------------------------------------- 3. HTML through markdown


def test_markdown_shows_a_hosts_markup_as_text(tmp_path, capsys):
    path = tmp_path / "a.json"
    doc = result_to_dict(make_result(CI_CASE))
    doc["host"] = "<script>x</script>|a&b"
    path.write_text(json.dumps(doc))
    shown = "\\<script>x\\</script>\\|a&b"  # backslash escapes (test_hardening16_markdown)
    code, out, err = run_cli(capsys, ["compare", str(path), "--format", "markdown"])
    assert code == 0, err
    assert shown in out and not re.search(r"(?<!\\)<", out)  # every '<' escaped
    summary = tmp_path / "s.md"
    code, out, err = run_cli(capsys, ["check", str(path), "--summary", str(summary)])
    assert code == 0, err
    md = summary.read_text()
    assert f"({shown})" in md and not re.search(r"(?<!\\)</?script", md)


# ------------------------------------------------------------ 4. the summary, atomically


def test_the_summary_is_written_atomically_and_keeps_what_was_there(tmp_path, capsys, monkeypatch):
    """A stop while the summary is written leaves the file as it was: it was appended to in
    place (`open(path, "a")`), so a SIGINT mid-write could leave half a summary. It is
    appended in place again (its identity kept: test_hardening18_outputs), and a stop cuts
    it back to its old length."""
    path = tmp_path / "a.json"
    save_result(make_result(CI_CASE), path)
    summary = tmp_path / "s.md"
    summary.write_text("# earlier step\n")
    os.chmod(summary, 0o640)
    inode = summary.stat().st_ino

    def stop(_fd: int) -> None:  # Ctrl-C while the new file is being written
        raise KeyboardInterrupt

    with monkeypatch.context() as m:
        m.setattr(os, "fsync", stop)
        code, _, err = run_cli(capsys, ["check", str(path), "--summary", str(summary)])
    assert summary.read_text() == "# earlier step\n"  # nothing of the new part
    assert code == 130, err  # stopped, as by Ctrl-C
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.json", "s.md"]  # no temp file
    code, _, err = run_cli(capsys, ["check", str(path), "--summary", str(summary)])
    assert code == 0, err
    assert summary.read_text().startswith("# earlier step\n### ckptbench check: PASSED")
    assert summary.stat().st_ino == inode  # appended in place (test_hardening18_outputs)
    assert summary.stat().st_mode & 0o777 == 0o640


def test_what_summary_refused_is_still_refused(tmp_path, capsys):
    path = tmp_path / "a.json"
    save_result(make_result(CI_CASE), path)
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    err = one_line_error(capsys, ["check", str(path), "--summary", str(fifo)])
    assert err == f"ckptbench: error: --summary {fifo}: exists and is not a regular file\n"
    link = tmp_path / "link.md"
    link.symlink_to(tmp_path / "target.md")
    err = one_line_error(capsys, ["check", str(path), "--summary", str(link)])
    assert "is a symbolic link" in err and not (tmp_path / "target.md").exists()
