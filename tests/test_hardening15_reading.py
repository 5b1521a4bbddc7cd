"""The fifteenth audit, of the reading side: a mode's round missing from a result file with
no stop recorded is said by ``compare`` and fails ``check``; one unreadable cell file of a
folder (another schema version, cut short) no longer stops ``compare`` and ``check`` of the
whole folder: the other cells are shown and gated, the broken one named (and failed by
``check``); markdown shows a host's ``<``, ``>`` and ``&`` as text, never as HTML; and
``check --summary`` writes its file atomically. Synthetic results; nothing is measured or
timed."""

from __future__ import annotations

import json

import pytest
from _cli import run_cli
from _synthetic import CI_CASE, make_result

from ckptbench.results.schema import result_to_dict


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
