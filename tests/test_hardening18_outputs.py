"""The eighteenth audit, of the side outputs: ``compare`` checks every file it will write
(``-o``, ``--plots``, ``--mprof``: each folder takes a new file, every timeline can be
formatted) before it writes any, so a refusal is one line with nothing left behind.
Synthetic results; nothing here is measured or timed."""

from __future__ import annotations

import errno
import json
import os

import pytest
from _cli import one_line_error, run_cli
from _synthetic import CI_CASE, make_result

from ckptbench.results.schema import save_result


@pytest.fixture(autouse=True)
def _no_step_summary(monkeypatch):
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)


def _unwritable(tmp_path):
    """A folder no new file can be made in: read-only to a user; to root (who writes any
    mode), one missing under /proc, where no folder can be made."""
    if os.geteuid() != 0:
        folder = tmp_path / "ro"
        folder.mkdir(mode=0o555)
        return folder
    return "/proc/ckptbench-no-such-folder"


@pytest.mark.parametrize("output", [False, True])
def test_compare_refuses_an_unwritable_mprof_folder_before_writing_a_plot(tmp_path, capsys, output):
    """``compare r.json --plots P --mprof U`` wrote the three plots (and said so), then
    stopped at the first timeline: 'cannot write (Operation not permitted)', exit 2 with
    the plots left behind. The folder is probed with the others now: one line, nothing
    written, no folder made (nor -o's)."""
    save_result(make_result(CI_CASE, seed=1), tmp_path / "r.json")
    plots, mprof = tmp_path / "plots", _unwritable(tmp_path)
    argv = ["compare", str(tmp_path / "r.json"), "--plots", str(plots), "--mprof", str(mprof)]
    if output:
        argv += ["-o", str(tmp_path / "new" / "report.txt")]
    err = one_line_error(capsys, argv)
    assert err.startswith(f"ckptbench: error: --mprof {mprof}: cannot write there ("), err
    assert not plots.exists() and not (tmp_path / "new").exists()


def test_compare_refuses_a_timeline_mprof_cannot_write_before_writing_anything(tmp_path, capsys):
    """A result whose timeline holds a negative RSS sample (a damaged or hand-edited file)
    loads and plots; its mprof file cannot be written. compare wrote the plots and the
    first mode's timeline, then refused: now every timeline is formatted before any file
    is written."""
    save_result(make_result(CI_CASE, seed=1), tmp_path / "r.json")
    doc = json.loads((tmp_path / "r.json").read_text())
    t, _ = doc["modes"][1]["timeline"][1]
    doc["modes"][1]["timeline"][1] = [t, -5]
    (tmp_path / "bad.json").write_text(json.dumps(doc))
    plots, mprof = tmp_path / "plots", tmp_path / "mprof"
    argv = ["compare", str(tmp_path / "bad.json"), "--plots", str(plots), "--mprof", str(mprof)]
    err = one_line_error(capsys, argv)
    assert err == f"ckptbench: error: --mprof {mprof}: bad timeline sample ({t!r} s, -5 bytes)\n"
    assert not plots.exists() and not mprof.exists()


def test_compare_refuses_an_unwritable_plots_folder_before_writing_a_timeline(tmp_path, capsys):
    """--plots probed as --mprof and -o are, in their words ('cannot write there'; it
    said '--plots P: No such file or directory' when making the folder failed), before a
    timeline or the report is written."""
    save_result(make_result(CI_CASE, seed=1), tmp_path / "r.json")
    plots, mprof = _unwritable(tmp_path), tmp_path / "mprof"
    argv = ["compare", str(tmp_path / "r.json"), "--plots", str(plots), "--mprof", str(mprof)]
    err = one_line_error(capsys, [*argv, "-o", str(tmp_path / "report.txt")])
    assert err.startswith(f"ckptbench: error: --plots {plots}: cannot write there ("), err
    assert not mprof.exists() and not (tmp_path / "report.txt").exists()


def test_check_refuses_an_unwritable_junit_in_one_line_making_no_folder(tmp_path, capsys):
    """``check r.json --summary new/s.md --junit U/j.xml`` made (and said it made) --summary's
    folder while probing, then refused --junit: two lines for one refusal. Every file is
    checked first now, and a folder made only as its file is written."""
    save_result(make_result(CI_CASE, seed=1), tmp_path / "r.json")
    summary, junit = tmp_path / "new" / "s.md", f"{_unwritable(tmp_path)}/j.xml"
    argv = ["check", str(tmp_path / "r.json"), "--summary", str(summary), "--junit", junit]
    err = one_line_error(capsys, argv)
    assert err.startswith(f"ckptbench: error: --junit {junit}: cannot write there ("), err
    assert not summary.parent.exists()


# ------------------------------------------------------------ --summary, appended in place


def test_summary_is_appended_in_place_so_another_hard_link_sees_it(tmp_path, capsys):
    """``check --summary s.md`` wrote the old text and the new part to a new file renamed
    over s.md: a second hard link (and a reader holding the file open, as a CI runner may)
    kept the old file without the summary. It is appended in place now: one inode, both
    names see the text."""
    save_result(make_result(CI_CASE, seed=1), tmp_path / "r.json")
    summary, link = tmp_path / "s.md", tmp_path / "link.md"
    summary.write_text("# earlier step\n")
    os.link(summary, link)
    inode = summary.stat().st_ino
    code, _, err = run_cli(capsys, ["check", str(tmp_path / "r.json"), "--summary", str(summary)])
    assert code == 0, err
    assert summary.stat().st_ino == inode and summary.stat().st_nlink == 2
    assert link.read_text().startswith("# earlier step\n### ckptbench check: PASSED")
    assert link.read_text() == summary.read_text()


def test_a_summary_write_that_fails_half_way_is_cut_back(tmp_path, capsys, monkeypatch):
    """In place, yet never half a summary: a write that fails after part of the text went
    in (a full disk) leaves the file as it was, and says so in one line (exit 2)."""
    save_result(make_result(CI_CASE, seed=1), tmp_path / "r.json")
    summary = tmp_path / "s.md"
    summary.write_text("# earlier step\n")
    write, calls = os.write, []

    def full_disk(fd, data):  # as a disk filling up: part of it written, then ENOSPC
        if calls[:1] != [fd] and (calls or b"### ckptbench check" not in bytes(data)):
            return write(fd, data)  # not the summary's file
        calls.append(fd)
        if len(calls) == 1:
            return write(fd, bytes(data)[:10])
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    with monkeypatch.context() as m:
        m.setattr(os, "write", full_disk)
        code, _, err = run_cli(
            capsys, ["check", str(tmp_path / "r.json"), "--summary", str(summary)]
        )
    assert code == 2
    assert err == f"ckptbench: error: --summary {summary}: cannot write (No space left on device)\n"
    assert summary.read_text() == "# earlier step\n" and len(calls) == 2


# ------------------------------------------------------------ schedule's --steps, run's


def test_schedule_says_when_its_steps_are_more_than_run_takes(capsys):
    """``schedule --steps`` takes up to 10**1000 (the closed forms, in Python's integers; no
    result is written) where run, plan and sweep take at most 2**31 (a result's counts are
    64-bit): the difference is deliberate, and was said nowhere, so a schedule printed for
    2**31 + 1 steps read as one run could measure. It says so now, in its help and on
    stderr past run's limit (the figures still on stdout, exit 0)."""
    from ckptbench.results.schema import MAX_STEPS

    code, out, err = run_cli(capsys, ["schedule", "--steps", str(MAX_STEPS), "--snaps", "10"])
    assert code == 0 and err == "", err
    code, out, err = run_cli(capsys, ["schedule", "--steps", str(MAX_STEPS + 1), "--snaps", "10"])
    assert code == 0 and "closed form" in out
    assert err == (
        f"note: --steps {MAX_STEPS + 1} is over 2**31 (2,147,483,648), the most run, plan and "
        "sweep take (the evaluation counts of a longer chain exceed a 64-bit integer): these "
        "figures are the formulas' alone\n"
    )
    code, _, err = run_cli(capsys, ["run", "--steps", str(MAX_STEPS + 1), "--snaps", "10"])
    assert code == 2 and "at most 2**31" in err  # run's limit, which the note names
    code, out, _ = run_cli(capsys, ["schedule", "--help"])
    assert code == 0 and "run, plan and sweep take at most 2**31" in " ".join(out.split())
