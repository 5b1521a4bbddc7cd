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

import pytest
from _cli import one_line_error, run_cli
from _synthetic import CI_CASE, make_result

from ckptbench.results.schema import result_to_dict, save_result


@pytest.fixture(autouse=True)
def _no_step_summary(monkeypatch):
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)


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
