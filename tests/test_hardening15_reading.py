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
from dataclasses import replace

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


# --------------------------------------------------------- 3. HTML through markdown


def test_markdown_shows_a_hosts_markup_as_text(tmp_path, capsys):
    path = tmp_path / "a.json"
    doc = result_to_dict(make_result(CI_CASE))
    doc["host"] = "<script>x</script>|a&b"
    path.write_text(json.dumps(doc))
    shown = "&lt;script&gt;x&lt;/script&gt;\\|a&amp;b"
    code, out, err = run_cli(capsys, ["compare", str(path), "--format", "markdown"])
    assert code == 0, err
    assert shown in out and "<script>" not in out
    summary = tmp_path / "s.md"
    code, out, err = run_cli(capsys, ["check", str(path), "--summary", str(summary)])
    assert code == 0, err
    md = summary.read_text()
    assert f"({shown})" in md and "<script>" not in md


# ------------------------------------------------------------ 4. the summary, atomically


def test_the_summary_is_written_atomically_and_keeps_what_was_there(tmp_path, capsys, monkeypatch):
    """A stop while the summary is written leaves the file as it was: it was appended to in
    place (`open(path, "a")`), so a SIGINT mid-write could leave half a summary."""
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
    assert summary.stat().st_ino != inode  # a new file renamed over the old one
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
