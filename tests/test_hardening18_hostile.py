"""The eighteenth audit, a hostile one of the night's features (environment.finished,
``sweep --resume`` measuring incomplete cells again, cells set aside in folder reads,
markdown escapes, off-scale bounds, choice suggestions, rich markup): hand-edited result
files and manifests, symlinked cells, interrupted resumes. Synthetic results where nothing
needs measuring; nothing is timed."""

from __future__ import annotations

from pathlib import Path

import pytest
from _cli import run_cli
from _synthetic import make_result


@pytest.fixture(autouse=True)
def _no_step_summary(monkeypatch):
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)


def _sweep(tmp_path: Path, name: str = "sw") -> Path:
    """A three-cell sweep folder (snaps 2, 3, 4) measured by a fake cell runner."""
    from ckptbench.sweep.config import parse_config
    from ckptbench.sweep.run import run_sweep

    config = parse_config(
        f'name = "{name}"\n[case]\nmodel = "rnn"\nsteps = 20\nhidden = 8\n'
        "[grid]\nsnaps = [2, 3, 4]\n",
        source="t.toml",
    )
    out = tmp_path / name
    run_sweep(config, out, run_cell=lambda case, **_: make_result(case))
    return out


def _cell(out: Path, snaps: int) -> Path:
    return next(out.glob(f"rnn-l20-s{snaps}-*.json"))


# ------------------------------------------- 1. a cell's file linked to another cell's file


@pytest.mark.parametrize("linked", [3, 2])
def test_a_cell_file_linked_to_another_cells_file_is_misfiled_not_dropped(tmp_path, capsys, linked):
    """s3's file a symlink to s2's (listed after it), or s2's to s3's (listed before it):
    the folder read took the link for the file named twice and read it once. A link listed
    after its target dropped its cell silently ('check: PASSED (2 checks on 2 cells)'); one
    listed before it was read as misfiled, and the real cell after it was dropped, its
    measurement gone from every table ('no results to compare' for a one-cell pair)."""
    out = _sweep(tmp_path)
    target = _cell(out, 5 - linked)  # s2 -> s3's file, s3 -> s2's
    link = _cell(out, linked)
    link.unlink()
    link.symlink_to(target.name)
    code, text, err = run_cli(capsys, ["check", str(out)])
    assert code == 1, text + err
    assert text.startswith("ckptbench check: FAILED (1 of 3 checks, 1 of 3 cells)"), text
    assert f"FAIL {link.stem} filed: {link}: holds the result of cell {target.stem}" in text
    assert f"ok   {target.stem}@" in text  # the real cell, gated
    code, text, err = run_cli(capsys, ["compare", str(out), "--format", "markdown"])
    assert code == 0, err
    assert f"{link}: holds the result of cell {target.stem}" in err
    assert f"| rnn l=20 s={5 - linked} revolve |" in text  # the real cell, shown
    assert f"| rnn l=20 s={linked} revolve |" not in text


def test_a_file_named_twice_is_still_read_once(tmp_path, capsys):
    out = _sweep(tmp_path)
    code, text, err = run_cli(capsys, ["check", str(out), str(_cell(out, 2))])
    assert code == 0, text + err
    assert text.startswith("ckptbench check: PASSED (3 checks on 3 cells;")


# ---------------------------------------- 2. markdown: links, images, code, emphasis, blocks


def _rendered(markdown: str):
    from test_hardening16_markdown import _rendered as rendered

    return rendered(markdown)


#: Markup the sixteenth audit's escapes let through: an image loads its URL in a CI job
#: summary, a link and emphasis are more than text, a code span showed our escapes as
#: backslashes ('\\<b>' for '<b>'), a line starting '* ' or '1. ' became a list (its mark
#: gone), one starting '[a]: ' a link's definition (the line gone).
MARKUP = [
    "![x](http://example.com/p.png)",
    "[click](http://example.com)",
    "[a][b] and ![c][]",
    "`<b>x</b>`",
    "a `b | c` d",
    "*em* **strong** _u_ __d__",
    "* time figures marked * are unstable (see the lines above)",
    "1. first",
    "12) twelfth",
    "# heading",
    "+ plus",
    "x\n---",
    "x\n===",
    "[a]: http://example.com",
    "- - -",
]


def _random_markup(n: int) -> list[str]:
    import random

    rng = random.Random(18)
    alphabet, first = "\\<>&|`*_[]()!#+-=.1 ab:/", "\\<>&|`*_[]!#+-=1ab "
    tails = ("".join(rng.choice(alphabet) for _ in range(rng.randint(0, 20))) for _ in range(n))
    return [rng.choice(first) + tail for tail in tails]


@pytest.mark.parametrize("text", MARKUP + _random_markup(400))
def test_markdown_shows_markup_as_its_text(text):
    """Old: '![x](http://...)' rendered <img src=...>, '[click](...)' <a>, '`<b>`' showed
    '\\<b>', '* time figures marked *' a nested list without its '*'."""
    pytest.importorskip("markdown_it")
    shown_as_text(text, _rendered)


def shown_as_text(text: str, rendered) -> None:
    """``text`` escaped for markdown and ``rendered`` (to its tags and text) as a paragraph,
    a list item and a table cell: no tag but those, and the same words as ``text``."""
    from ckptbench.render.table import md_cell, md_text

    words = " ".join
    para = rendered(md_text(text))
    item = rendered("- " + md_text(text))
    cell = rendered(f"| h |\n|---|\n| {md_cell(text)} |")
    for seen in (para, item, cell):
        assert seen.tags <= {"p", "ul", "li", "table", "thead", "tbody", "tr", "th", "td"}, (
            text,
            seen.tags,
        )
    for seen in (para, item):
        assert words("".join(seen.text).split()) == words(text.split()), text
    assert words("".join(cell.text).split()) == words(("h " + text).split()), text


def test_compare_markdown_keeps_the_unstable_mark_and_a_hosts_image_as_text(tmp_path, capsys):
    import json

    from _synthetic import CI_CASE

    from ckptbench.results.schema import result_to_dict

    pytest.importorskip("markdown_it")
    host = "![x](http://example.com/p.png)"
    doc = result_to_dict(make_result(CI_CASE, time_cv=0.5))
    doc["host"] = host
    path = tmp_path / "a.json"
    path.write_text(json.dumps(doc))
    code, out, err = run_cli(capsys, ["compare", str(path), "--format", "markdown"])
    assert code == 0, err
    assert "- \\* time figures marked * are unstable" in out
    seen = _rendered(out)
    assert "img" not in seen.tags and host in "".join(seen.text)
    assert "* time figures marked * are unstable" in "".join(seen.text)


# ------------------------------------------------ 3. a manifest's text printed in one line


def _edit_manifest(out: Path, **cell) -> None:
    import json

    path = out / "sweep.json"
    doc = json.loads(path.read_text())
    doc["cells"][0].update(cell)
    path.write_text(json.dumps(doc))


@pytest.mark.parametrize(
    ("field", "value", "said"),
    [
        ("key", "evil\nFAIL forged", "cells[0].key must be printable text on one line"),
        ("file", "a\nFAIL forged.json", "cells[0].file is not a file name in its folder"),
    ],
)
def test_a_manifests_key_or_file_on_two_lines_is_refused(tmp_path, capsys, field, value, said):
    """Old: 'FAIL evil' and 'FAIL forged filed: ...' on lines of their own, the forged one
    reading as another cell's verdict (a key); the file's name broken over two lines."""
    out = _sweep(tmp_path)
    _edit_manifest(out, **{field: value})
    for argv in (["check", str(out)], ["compare", str(out)]):
        code, text, err = run_cli(capsys, argv)
        assert code == 2, text + err
        assert err.count("\n") == 1 and said in err and "FAIL forged" not in text, err


def test_a_manifests_error_on_two_lines_is_shown_on_one(tmp_path, capsys):
    """Old: 'FAIL <key> present: ... (state error: e1' and 'FAIL forged) is missing'."""
    out = _sweep(tmp_path)
    _edit_manifest(out, state="error", error="e1\nFAIL forged")
    s2 = _cell(out, 2)
    s2.unlink()
    code, text, err = run_cli(capsys, ["check", str(out)])
    assert code == 1, text + err
    assert f"{s2} (state error: e1 FAIL forged) is missing\n" in text
    assert "\nFAIL forged" not in text
    code, text, err = run_cli(capsys, ["compare", str(out)])
    assert code == 0, err
    assert "(state error: e1 FAIL forged)" in err and "\nFAIL forged" not in err
