"""``check --summary`` (``$GITHUB_STEP_SUMMARY``) after a record a ``kill -9`` cut short
inside a block.

The record after a torn one started on a line of its own (tests/test_summary_append.py),
but a record cut inside its ``<details>`` block (the "All checks" table) left the block
open, and GitHub folded every later record into it; a cut inside a tag (``<summ``) made
the next closing tag that tag's attributes. Now the next append closes what the file's
last record left open (a tag, a code fence, ``<details>``) before its own record, with a
visible note, in the same write: earlier bytes are never rewritten.

The oracle is markdown-it (CommonMark with raw HTML and tables, as GitHub reads a summary)
and the standard library's HTML parser: the new record renders as it renders alone, and
nothing before it is left open around it.
"""

from __future__ import annotations

from html.parser import HTMLParser
from pathlib import Path

import pytest
from _synthetic import CI_CASE, make_result

from ckptbench.cli import main
from ckptbench.results.schema import save_result

markdown_it = pytest.importorskip("markdown_it")  # rich's own dependency

HEADING = "### ckptbench check"
MD = markdown_it.MarkdownIt("commonmark", {"html": True}).enable("table")
#: A record with a code fence in its folded block (no record of check's has one yet).
FENCED = (
    "### ckptbench check: FAILED (1 of 2 checks)\n\n<details><summary>Log</summary>\n\n"
    "````text\nstep 1 <details> é\n```\nstill code\n````\n\nafter the fence\n\n"
    "</details>\n\n- a note\n"
)


@pytest.fixture(autouse=True)
def _no_step_summary(monkeypatch):
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)


class _Open(HTMLParser):
    """The elements left open at the end of some HTML that fold or hide what follows."""

    KEEP = ("details", "summary", "pre", "code")

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []

    def handle_starttag(self, tag, attrs) -> None:
        if tag in self.KEEP:
            self.stack.append(tag)

    def handle_endtag(self, tag) -> None:
        if tag in self.stack:
            del self.stack[len(self.stack) - 1 - self.stack[::-1].index(tag) :]


def assert_stands_alone(text: str, record: str) -> None:
    """``text`` ends with ``record``, which GitHub renders as it renders alone: outside
    every block and tag the text before it opened."""
    whole, alone = MD.render(text), MD.render(record)
    assert whole.endswith(alone), whole[-400:]
    before = _Open()
    before.feed(whole[: len(whole) - len(alone)])
    assert before.stack == [], before.stack
    assert before.rawdata == "", before.rawdata[-80:]  # no tag left incomplete


@pytest.fixture(scope="module")
def record(tmp_path_factory) -> str:
    """A real record: check's markdown of a failed gate (failures, the folded table)."""
    folder = tmp_path_factory.mktemp("record")
    save_result(make_result(CI_CASE, seed=1), folder / "old.json")
    new = make_result(CI_CASE, seed=2, memory_scale={"checkpointed": 2.0})
    save_result(new, folder / "new.json")
    with pytest.raises(SystemExit):
        main([
            "check", str(folder / "new.json"), "--against", str(folder / "old.json"),
            "--summary", str(folder / "s.md"),
        ])  # fmt: skip
    text = (folder / "s.md").read_text()
    assert text.startswith(HEADING) and "<details><summary>" in text and "é" not in text
    return text.replace("All checks", "All checks (café)")  # a character to cut inside


def test_a_record_cut_at_any_byte_leaves_nothing_open_around_the_next(
    tmp_path: Path, record: str
) -> None:
    from ckptbench.cli.appending import append_text

    earlier = "# another tool's summary\n\n" + record  # a whole record before: not reopened
    data = record.encode()
    # open from its tag's name ('>' completes a tag cut short) until its end tag's name
    start = data.index(b"<details>") + len(b"<details")
    end = data.index(b"</details>") + len(b"</details")
    summary = tmp_path / "s.md"
    notes = 0
    for cut in range(1, len(data)):
        torn = earlier.encode() + data[:cut]
        summary.write_bytes(torn)
        tear = append_text(summary, record, heading=HEADING)
        after = summary.read_bytes()
        assert after.startswith(torn)  # appended only
        assert after.endswith(record.encode())
        assert_stands_alone(after.decode("utf-8", "replace"), record)
        inside = start <= cut < end  # cut inside the folded block
        assert bool(tear.details) == inside, (cut, data[:cut][-30:])
        note = b"**Note:** the record above was cut short" in after[len(torn) :]
        assert note == inside
        notes += note
        if data[:cut].endswith(b"\n") and not inside:  # a blank line at most, unsaid
            blank = b"" if data[:cut].endswith(b"\n\n") else b"\n"
            assert not tear and after == torn + blank + record.encode()
    assert notes == end - start


def test_a_code_fence_cut_anywhere_is_closed_before_the_next_record(tmp_path: Path) -> None:
    from ckptbench.cli.appending import append_text

    data = FENCED.encode()
    fence_open, fence_close = data.index(b"````text"), data.index(b"````\n\nafter")
    summary = tmp_path / "s.md"
    for cut in range(1, len(data)):
        summary.write_bytes(data[:cut])
        tear = append_text(summary, FENCED, heading=HEADING)
        after = summary.read_bytes()
        assert after.startswith(data[:cut]) and after.endswith(data)
        assert_stands_alone(after.decode("utf-8", "replace"), FENCED)
        in_code = fence_open + len(b"````") <= cut < fence_close + len(b"````")
        assert (tear.fence == "````") == in_code, (cut, data[:cut][-20:])


@pytest.mark.parametrize(
    ("cut_after", "warning"),
    [
        ("| pass | `lstm", "a <details> block"),  # inside the folded table
        ("<details><summ", "a <details> block"),  # inside a tag
        ("All checks (caf\xc3", "a <details> block"),  # inside a character
        ("|---|---|---|---|\n", "a <details> block"),  # just after a line end
    ],
)
def test_check_closes_the_block_a_cut_left_open_and_says_so(
    tmp_path: Path, capsys, record: str, cut_after: str, warning: str
) -> None:
    """``check --summary`` after a record cut inside its ``<details>``: the file keeps
    every byte it had, then the block's end, a note GitHub shows, and the new record."""
    data = record.encode()
    at = data.index(cut_after.encode("latin-1"), data.index(b"<details>"))
    torn = data[: at + len(cut_after.encode("latin-1"))]
    summary = tmp_path / "summary.md"
    summary.write_bytes(torn)
    result = tmp_path / "r.json"
    save_result(make_result(CI_CASE, seed=1), result)
    with pytest.raises(SystemExit) as exc:
        main(["check", str(result), "--summary", str(summary)])
    err = capsys.readouterr().err
    assert exc.value.code == 0, err
    after = summary.read_bytes()
    assert after.startswith(torn)
    new = after[after.rindex(b"### ckptbench check") :].decode()
    assert_stands_alone(after.decode("utf-8", "replace"), new)
    html = MD.render(after.decode("utf-8", "replace"))
    note = html.index("the record above was cut short")
    shown = _Open()
    shown.feed(html[:note])
    assert shown.stack == []  # the note is seen, not folded
    assert err.splitlines() == [
        f"warning: --summary {summary}: its last record was cut short inside {warning} (an "
        "earlier append stopped part-way?); this summary closes it first, with a note saying "
        "so, and starts on a new line"
    ]
    with pytest.raises(SystemExit) as exc:  # once closed, the next one is said nothing of
        main(["check", str(result), "--summary", str(summary)])
    assert exc.value.code == 0 and capsys.readouterr().err == ""
