"""The sixteenth audit, markdown: ``compare --format markdown`` and ``check --summary``
escaped ``&``, ``<`` and ``>`` as HTML entities, so the raw markdown read ``need &gt;= 25x``
and ``&gt; +12.34``. They now use CommonMark's backslash escapes, and only where markdown
would read more than text: every ``<`` and backslash, an ``&`` that starts an entity, a
``>`` that starts a block quote. Two properties are tested: what a renderer shows is the
text itself and never HTML (markdown-it-py with raw HTML allowed, where it is installed),
and the raw markdown reads as the text wherever it can. Synthetic results only."""

from __future__ import annotations

import json
import random
from html.parser import HTMLParser

import pytest
from _cli import run_cli
from _synthetic import CI_CASE, make_result

from ckptbench.render.table import md_cell, md_text
from ckptbench.results.schema import result_to_dict


@pytest.fixture(autouse=True)
def _no_step_summary(monkeypatch):
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)


# ----------------------------------------------------------------- raw: reads as itself


def test_the_raw_markdown_reads_as_the_text():
    """Old: 'need &gt;= 25x', '&gt; +12.34 MiB', 'a &amp; b'."""
    assert md_text("need >= 25x (the interval reaches past the limit)") == (
        "need >= 25x (the interval reaches past the limit)"
    )
    assert md_cell("> +12.34 MiB") == "> +12.34 MiB"  # a cell holds no block quote
    assert md_text("normal +1.00 -> +2.00 MiB; a & b") == "normal +1.00 -> +2.00 MiB; a & b"
    assert md_text("> limit") == "\\> limit"  # first on a line: a block quote, escaped
    assert md_text("ok\n  > limit") == "ok\n  \\> limit"
    assert md_cell("<script>x</script>|a&b") == "\\<script>x\\</script>\\|a&b"
    assert md_text("&lt; &#60; &#x3c;") == "\\&lt; \\&#60; \\&#x3c;"  # shown, not decoded
    assert md_text("C:\\runs\\<b>") == "C:\\\\runs\\\\\\<b>"


# ------------------------------------------------------- rendered: text, never HTML

#: Strings a host name, file name or model name could be edited to.
HOSTILE = [
    "<script>alert(1)</script>",
    "\\<script>alert(1)\\</script>",  # a backslash of its own before the '<'
    "\\<img src=x onerror=alert(1)\\>",  # 'alert(1)\\' would be a valid attribute value
    "<img src=x onerror=alert(1)>",
    "<!-- x -->",
    "<https://example.com>",
    "<a@b.c>",
    "&lt;script&gt;",
    "\\&lt;b\\&gt;",
    "a|b\\|c\\\\|d",
    "> quoted",
    "x\n> quoted",
    "need >= 25x & < 3 <=> ok",
    "trailing backslash\\",
    "<div>\n<script>x</script>\n</div>",
]

#: The tags markdown-it makes of a paragraph, a list item and a table: nothing else.
STRUCTURE = {"p", "ul", "li", "table", "thead", "tbody", "tr", "th", "td", "br"}


class _Seen(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: set[str] = set()
        self.text: list[str] = []
        self.comments: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.add(tag)

    def handle_endtag(self, tag):
        self.tags.add(tag)

    def handle_data(self, data):
        self.text.append(data)

    def handle_comment(self, data):
        self.comments.append(data)


def _rendered(markdown: str) -> _Seen:
    from markdown_it import MarkdownIt

    md = MarkdownIt("commonmark", {"html": True}).enable("table")  # raw HTML allowed
    seen = _Seen()
    seen.feed(md.render(markdown))
    seen.close()
    return seen


def _random_strings(n: int) -> list[str]:
    """One-line strings of the characters the escaping is about, among others: what a
    line starting with '#', '-' or '1.' turns into (a heading, a list) is markdown's own and
    not HTML, so their lines start with one of these too."""
    rng = random.Random(16)
    alphabet, first = "\\<>&|;#/=!?:'\"ab1 x-", "\\<>&|ab"
    tails = ("".join(rng.choice(alphabet) for _ in range(rng.randint(0, 24))) for _ in range(n))
    return [rng.choice(first) + tail for tail in tails]


def _words(text: str) -> str:
    return " ".join(text.split())


@pytest.mark.parametrize("text", HOSTILE + _random_strings(300))
def test_a_renderer_shows_the_text_and_never_html(text):
    pytest.importorskip("markdown_it")
    # a paragraph, a list item (as compare and check write them) and a table cell
    para = _rendered(md_text(text))
    item = _rendered("- " + md_text(text))
    cell = _rendered(f"| h |\n|---|\n| {md_cell(text)} |")
    for seen in (para, item, cell):
        assert seen.tags <= STRUCTURE and not seen.comments, (text, seen.tags)
        assert "blockquote" not in seen.tags
    for seen in (para, item):
        assert _words("".join(seen.text)) == _words(text)
    assert _words("".join(cell.text)) == _words("h " + text)


# ---------------------------------------------------------- through compare and check


def test_a_hosts_markup_renders_as_text_through_compare_and_check(tmp_path, capsys):
    pytest.importorskip("markdown_it")
    host = "\\<img src=x onerror=alert(1)\\>|a&b"
    path = tmp_path / "a.json"
    doc = result_to_dict(make_result(CI_CASE))
    doc["host"] = host
    path.write_text(json.dumps(doc))
    code, out, err = run_cli(capsys, ["compare", str(path), "--format", "markdown"])
    assert code == 0, err
    seen = _rendered(out)
    assert "img" not in seen.tags and host in "".join(seen.text)
    summary = tmp_path / "s.md"
    code, _, err = run_cli(capsys, ["check", str(path), "--summary", str(summary)])
    assert code == 0, err
    seen = _rendered(summary.read_text())
    assert "img" not in seen.tags and f"({host})" in "".join(seen.text)
