"""``check --summary`` (and ``$GITHUB_STEP_SUMMARY``) after an append cut short.

A ``kill -9`` of ckptbench while it appended its markdown summary can leave the record cut
short, without its line end (and, cut inside a character, without its last UTF-8 bytes).
The next ``check --summary`` ran its record into the torn line (its heading no heading any
more), or refused the file outright as "a binary file" when the cut fell inside a
character. Now the next record is one write on a line of its own, the torn one is kept as
it is and said in one warning line, and a file that ends inside a character is still text.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from _synthetic import CI_CASE, make_result

from ckptbench.cli import main
from ckptbench.cli.appending import Tear, append_text
from ckptbench.results.schema import save_result

#: A record as a ``kill -9`` left it: a table row cut short, inside "é" (b"\xc3\xa9").
TORN = "### ckptbench check: PASSED\n\n| check | café".encode()[:-1]


@pytest.fixture(autouse=True)
def _no_step_summary(monkeypatch):
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)


def test_an_append_after_a_torn_record_starts_it_on_a_new_line_in_one_write(
    tmp_path: Path, monkeypatch
) -> None:
    summary = tmp_path / "summary.md"
    summary.write_bytes(TORN)
    writes: list[bytes] = []
    real_write = os.write

    def write(fd, data):
        writes.append(bytes(data))
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", write)
    torn = append_text(summary, "### ckptbench check: FAILED\nbody\n")
    assert torn == Tear(line_end=True)  # no block open in it: the line end alone
    assert writes == [b"\n### ckptbench check: FAILED\nbody\n"]  # the record in one write
    assert summary.read_bytes() == TORN + writes[0]
    assert not append_text(summary, "### next\n")  # ended with a line end: as it was
    lines = summary.read_bytes().split(b"\n")
    assert lines[-4:] == [b"### ckptbench check: FAILED", b"body", b"### next", b""]


def test_check_appends_its_summary_after_a_torn_record_and_says_so(tmp_path: Path, capsys) -> None:
    result = tmp_path / "r.json"
    save_result(make_result(CI_CASE, seed=1), result)
    summary = tmp_path / "summary.md"
    summary.write_bytes(TORN)
    with pytest.raises(SystemExit) as exc:
        main(["check", str(result), "--summary", str(summary)])
    err = capsys.readouterr().err
    assert exc.value.code == 0, err
    assert err.splitlines() == [
        f"warning: --summary {summary}: its last line had no line end (an earlier append cut "
        "short?); this summary starts on a new line"
    ]
    data = summary.read_bytes()
    # on a line of its own, after a blank line (the torn one may be raw HTML, which runs on
    # to the next blank line: tests/test_summary_tears.py)
    assert data.startswith(TORN + b"\n\n### ckptbench check: PASSED ("), data[:120]
    new = data[len(TORN) + 2 :].decode()
    assert new.endswith("\n") and new.count("### ckptbench check") == 1
    with pytest.raises(SystemExit) as exc:  # once ended, the next one is said nothing of
        main(["check", str(result), "--summary", str(summary)])
    assert exc.value.code == 0 and capsys.readouterr().err == ""
    assert summary.read_bytes().count(b"\n### ckptbench check: PASSED (") == 2


@pytest.mark.parametrize(
    ("data", "kind"),
    [
        (TORN, None),  # cut inside its last character
        (TORN + b"\n### next\n", None),  # and the next record after it
        ("é€".encode()[:-1] + b"\nok\n", None),  # a 3-byte character cut after 2
        (b"caf\xc3more\n", "a binary file"),  # no cut record: not UTF-8
        (b"\x89PNG\r\n\x1a\n", "a binary file"),
    ],
)
def test_a_character_cut_by_a_torn_append_is_still_text(tmp_path: Path, data, kind) -> None:
    from ckptbench.results.kinds import not_text

    (tmp_path / "s.md").write_bytes(data)
    assert not_text(tmp_path / "s.md") == kind
