"""The nineteenth audit, a hostile one: a sweep's result saved beside a cell's path, files
moved aside under a name the clock gave twice, ``environment.finished`` contradicting its
case, choice errors echoing what was typed, markdown reading more than the text.
Synthetic results where nothing needs measuring; nothing is timed."""

from __future__ import annotations

from pathlib import Path

import pytest
from _synthetic import make_result


@pytest.fixture(autouse=True)
def _no_step_summary(monkeypatch):
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)


def _config(name: str = "sw", snaps: str = "[2]"):
    from ckptbench.sweep.config import parse_config

    return parse_config(
        f'name = "{name}"\n[case]\nmodel = "rnn"\nsteps = 20\nhidden = 8\n'
        f"[grid]\nsnaps = {snaps}\n",
        source="t.toml",
    )


def _saving_runner(before_first_save=None):
    """A cell runner that saves as ``run_case`` does (``measure.recording.Recording``: at
    its path, or beside it and said through ``saved_elsewhere``); ``before_first_save(path)``
    runs first (a file appears there meanwhile)."""
    from ckptbench.measure.recording import Recording

    def run_cell(case, *, out_path=None, progress=None, saved_elsewhere=None, **_):
        made = make_result(case)
        if before_first_save is not None:
            before_first_save(Path(out_path))
        rec = Recording(case, dict(made.environment), out_path, False, saved_elsewhere)
        for mode in made.modes:
            rec.results.append(mode)
            rec.save((0, None))
        rec.finish(case.rounds, len(made.modes), False)
        return rec.snapshot()

    return run_cell


# ------------------------------------- 1. a cell's result saved beside its path: one copy


def test_a_result_saved_beside_a_dangling_link_is_saved_once_and_named(tmp_path):
    """A dangling symlink at the cell's path: the runner saved the result beside it, and the
    sweep saved it a second time under another name; its outcome named only the second."""
    from ckptbench.results.store import cell_path
    from ckptbench.sweep.run import run_sweep

    config = _config()
    out = tmp_path / "sw"
    out.mkdir()
    path = cell_path(out, config.cases[0])
    path.symlink_to(tmp_path / "nowhere.json")
    outcome = run_sweep(config, out, run_cell=_saving_runner())
    copies = sorted(p for p in out.glob(f"{path.stem}.*.json"))
    assert len(copies) == 1, [p.name for p in copies]
    (cell,) = outcome.errors
    assert cell.error.startswith(f"measured, but saved as {copies[0]} ("), cell.error
    assert "is a symbolic link" in cell.error
    assert path.is_symlink() and not path.exists()  # never written through


def test_a_file_that_appears_at_a_cells_path_mid_run_is_not_replaced(tmp_path):
    """Someone's file appeared at the cell's path while it was measured: the runner saved
    beside it, then the sweep saved the result over that file."""
    from ckptbench.sweep.run import run_sweep

    def appear(path: Path) -> None:
        path.write_text("someone's data\n")

    out = tmp_path / "sw"
    outcome = run_sweep(_config(), out, run_cell=_saving_runner(appear))
    (cell,) = outcome.errors
    assert cell.path.read_text() == "someone's data\n"
    copies = sorted(out.glob(f"{cell.path.stem}.*.json"))
    assert len(copies) == 1, [p.name for p in copies]
    assert cell.error.startswith(f"measured, but saved as {copies[0]} ("), cell.error


def test_a_stopped_cell_whose_part_was_saved_beside_its_path_names_it(tmp_path):
    """Stopped after its first mode, saved beside a dangling link at its path: the manifest
    said 'stopped ... before its first mode', and nothing named the file that holds it."""
    import json

    from ckptbench.measure.launch import Interrupted
    from ckptbench.measure.recording import Recording
    from ckptbench.results.store import cell_path
    from ckptbench.sweep.run import run_sweep

    def run_cell(case, *, out_path=None, progress=None, saved_elsewhere=None, **_):
        made = make_result(case)
        rec = Recording(case, dict(made.environment), out_path, False, saved_elsewhere)
        rec.results.append(made.modes[0])
        rec.save((0, made.modes[1].mode))
        err = Interrupted(15)
        err.result = rec.snapshot()
        raise err

    config = _config()
    out = tmp_path / "sw"
    out.mkdir()
    path = cell_path(out, config.cases[0])
    path.symlink_to(tmp_path / "nowhere.json")
    with pytest.raises(Interrupted):
        run_sweep(config, out, run_cell=run_cell)
    (copy,) = out.glob(f"{path.stem}.*.json")
    (cell,) = json.loads((out / "sweep.json").read_text())["cells"]
    said = f"stopped by SIGTERM; measured, but saved as {copy} ("
    assert cell["error"].startswith(said), cell["error"]


# ------------------------------- 2. a file moved aside never goes over one kept there before


@pytest.fixture
def frozen_clock(monkeypatch):
    """The clock the names of files kept aside read, stopped: every name it gives is the
    same, ``<name>.20260101T000000000000.<kind>``."""
    from datetime import UTC, datetime

    from ckptbench.results import schema

    class Frozen(datetime):
        @classmethod
        def now(cls, tz=None):
            return datetime(2026, 1, 1, tzinfo=tz or UTC)

    monkeypatch.setattr(schema, "datetime", Frozen)
    return "20260101T000000000000"


def test_resume_moving_a_result_aside_never_overwrites_one_kept_there(tmp_path, frozen_clock):
    """``sweep --resume --retry-failed`` moved the failed result to the clock's
    ``.replaced`` name with ``rename``, over the file an earlier resume had kept there."""
    from ckptbench.results.schema import Status
    from ckptbench.sweep.run import run_sweep

    config = _config()
    out = tmp_path / "sw"
    failed = {"normal": Status.FAILED}
    run_sweep(config, out, run_cell=lambda case, **_: make_result(case, status=failed))
    (cell,) = out.glob("rnn-*.json")
    measured = cell.read_text()
    earlier = cell.with_name(f"{cell.name}.{frozen_clock}.replaced")
    earlier.write_text("kept by an earlier resume\n")
    outcome = run_sweep(config, out, resume=True, retry_failed=True,
                        run_cell=lambda case, **_: make_result(case))  # fmt: skip
    assert earlier.read_text() == "kept by an earlier resume\n"
    moved = cell.with_name(f"{cell.name}.{frozen_clock}-1.replaced")
    assert moved.read_text() == measured
    assert f"{cell.stem}: " in outcome.notes[0] and outcome.notes[0].endswith(moved.name)
    assert [c.state.value for c in outcome.cells] == ["measured"]


def test_force_moving_a_result_aside_never_overwrites_one_kept_there(tmp_path, frozen_clock):
    """``run --force`` moved the result it replaces aside (until its last save) with
    ``rename``, over a file kept under the same name."""
    from ckptbench.measure.recording import Recording

    made = make_result(_config().cases[0])
    out = tmp_path / "r.json"
    out.write_text("the result --force replaces\n")
    earlier = tmp_path / f"r.json.{frozen_clock}.replaced"
    earlier.write_text("kept before\n")
    rec = Recording(made.case, dict(made.environment), out, True, None)
    rec.results.append(made.modes[0])
    rec.save((0, made.modes[1].mode))
    assert earlier.read_text() == "kept before\n"
    assert rec.aside == tmp_path / f"r.json.{frozen_clock}-1.replaced"
    assert rec.aside.read_text() == "the result --force replaces\n"


def test_a_move_aside_does_not_follow_a_link(tmp_path, frozen_clock):
    from ckptbench.results.schema import move_aside

    target = tmp_path / "target.json"
    target.write_text("{}\n")
    link = tmp_path / "cell.json"
    link.symlink_to(target.name)
    aside = move_aside(link, "replaced")
    assert aside.is_symlink() and not link.exists() and target.read_text() == "{}\n"
    link.write_text("again\n")
    assert move_aside(link, "replaced").name == f"cell.json.{frozen_clock}-1.replaced"


# ---------------------- 3. environment.finished: 'planned' with fewer rounds, an unknown why


def _finished_file(tmp_path: Path, finished, rounds_held: int = 1) -> Path:
    """A result whose case plans 2 rounds (no --precision), holding ``rounds_held`` of
    them, its ``environment.finished`` as given."""
    from dataclasses import replace

    from ckptbench.results.schema import Case, save_result

    case = Case(model="rnn", steps=20, snaps=3, hidden=8, rounds=2)
    made = make_result(case, rounds=rounds_held)
    path = tmp_path / "r.json"
    save_result(replace(made, environment={**made.environment, "finished": finished}), path)
    return path


def test_planned_with_fewer_rounds_than_planned_reads_as_incomplete(tmp_path, capsys):
    """``{"rounds": 1, "why": "planned"}`` in a file whose case planned 2 rounds read as ok
    in check and compare: 'planned' says every planned round ran."""
    from _cli import run_cli

    path = _finished_file(tmp_path, {"rounds": 1, "why": "planned"})
    code, text, err = run_cli(capsys, ["check", str(path)])
    assert code == 1, text + err
    assert "status: incomplete: baseline: 1 of 2 planned rounds (round 2 missing);" in text
    code, text, err = run_cli(capsys, ["compare", str(path), "--format", "csv"])
    assert code == 0, err
    assert "1 of 2 planned rounds" in text


@pytest.mark.parametrize("why", ["out-of-memory", "max-time"])
def test_a_run_that_said_why_it_stopped_early_is_not_incomplete(tmp_path, capsys, why):
    from _cli import run_cli

    path = _finished_file(tmp_path, {"rounds": 1, "why": why})
    code, text, err = run_cli(capsys, ["check", str(path)])
    assert code == 0, text + err


@pytest.mark.parametrize("why", ["banana", "", "PLANNED"])
def test_an_unknown_why_is_a_malformed_file(tmp_path, capsys, why):
    """An unknown ``why`` read as ok; every other malformed ``finished`` is refused."""
    from _cli import run_cli

    path = _finished_file(tmp_path, {"rounds": 2, "why": why}, rounds_held=2)
    for command in (["check", str(path)], ["compare", str(path)]):
        code, text, err = run_cli(capsys, command)
        assert code == 2, text + err
        (line,) = err.strip().splitlines()
        assert line.startswith(f"ckptbench: error: {path}: malformed result: environment.")
        assert "why (one of planned, reached, max-time," in line


# ------------------------------------------ 4. choice errors: a full stop, a value cut short

LONG = "torchx" * 900  # 5400 characters, as a paste into the wrong place


def test_format_choice_error_has_the_full_stop_of_the_others(tmp_path, capsys):
    """``--format mrkdown`` said "... 'text' (Did you mean 'markdown'?)", where every other
    choice error says "... 'torch'. (Did you mean 'torch'?)"."""
    from _cli import run_cli

    code, _, err = run_cli(capsys, ["compare", str(tmp_path), "--format", "mrkdown"])
    assert code == 2
    assert err.strip().endswith(
        "'mrkdown' is not one of 'csv', 'html', 'json', 'markdown', 'text'. "
        "(Did you mean 'markdown'?)"
    ), err
    code, _, err = run_cli(capsys, ["compare", str(tmp_path), "--format", "zzz"])
    assert err.strip().endswith("'zzz' is not one of 'csv', 'html', 'json', 'markdown', 'text'.")
    code, _, err = run_cli(capsys, ["run", "--backend", "pytorch"])
    assert err.strip().endswith(
        "'pytorch' is not one of 'autograd', 'jax', 'torch'. (Did you mean 'torch'?)"
    ), err


@pytest.mark.parametrize(
    "args",
    [
        ["run", "--backend", LONG],
        ["run", "--device", LONG],
        ["run", "--strategy", LONG],
        ["run", "--modes", LONG],
        ["compare", ".", "--format", LONG],
        ["schedule", "--steps", "5", "--snaps", "2", "--strategy", LONG],
    ],
)
def test_a_long_mistyped_choice_is_cut_in_its_error(capsys, args):
    """A 5400-character value was echoed whole: a 5500-character error line."""
    from _cli import run_cli

    code, text, err = run_cli(capsys, args)
    assert code == 2, text + err
    (line,) = err.strip().splitlines()
    assert f"{LONG[:60]!r}... (5400 characters)" in line, line
    assert len(line) < 400, len(line)


@pytest.mark.parametrize("key", ["strategy", "backend", "device", "dtype", "executor"])
def test_a_long_mistyped_choice_in_a_config_is_cut_in_its_error(tmp_path, capsys, key):
    from _cli import run_cli

    config = tmp_path / "long.toml"
    config.write_text(
        f'name = "t"\n[case]\nmodel = "rnn"\nsteps = 6\n{key} = "{LONG}"\n[grid]\nsnaps = [2]\n'
    )
    code, text, err = run_cli(capsys, ["sweep", str(config), "--out", str(tmp_path / "o")])
    assert code == 2, text + err
    (line,) = err.strip().splitlines()
    assert f"unknown {key} {LONG[:60]!r}... (5400 characters)" in line, line
    assert len(line) - len(str(config)) < 400, len(line)


# ----------------------------- 5. markdown: strikethrough, an indent that makes a code block


def _rendered_gfm(markdown: str):
    """What markdown-it (raw HTML allowed, tables and GitHub's strikethrough on) makes."""
    from markdown_it import MarkdownIt
    from test_hardening16_markdown import _Seen

    md = MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])
    seen = _Seen()
    seen.feed(md.render(markdown))
    seen.close()
    return seen


#: Old: '~~gone~~' rendered <s>gone</s>, a line indented 4 columns a code block that
#: showed our escapes ('\\<b>' for '<b>').
MARKUP = [
    "a ~~gone~~ b",
    "~~x~~",
    "host ~~a~~|~~b~~",
    "    <b>indented</b>",
    "\t*em* in a tab",
    "  \t x",
    "ok\n\n    <b>code</b> after a blank line",
    "ok\n\n\t`tick`",
    "~~~\ncode\n~~~",
    "      > quoted",
]


def _random_lines(n: int) -> list[str]:
    import random

    rng = random.Random(19)
    alphabet, first = "\\<>&|`*_~[]()!#+-=.1 ab\t", [" ", "  ", "    ", "\t", "~", "~~", "a"]
    out = []
    for _ in range(n):
        lines = [
            rng.choice(first) + "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 16)))
            for _ in range(rng.randint(1, 3))
        ]
        out.append(("\n\n" if rng.random() < 0.5 else "\n").join(lines))
    return out


@pytest.mark.parametrize("text", MARKUP + _random_lines(400))
def test_markdown_shows_strikethrough_and_indents_as_text(text):
    pytest.importorskip("markdown_it")
    from test_hardening18_hostile import shown_as_text

    shown_as_text(text, _rendered_gfm)


def test_markdown_escapes_a_tilde_or_an_indent_only_where_markdown_reads_more():
    from ckptbench.render.table import md_cell, md_text

    assert md_text("a ~~gone~~ b") == "a \\~\\~gone\\~~ b"
    assert md_cell("~~x~~|y") == "\\~\\~x\\~~\\|y"
    assert md_text("~/runs/a.json") == "~/runs/a.json"  # no strikethrough to close
    assert md_text("~5 MiB or ~3 MiB") == "~5 MiB or ~3 MiB"  # none after a non-blank
    assert md_text("    <b>") == "   &#32;\\<b>"
    assert md_text("\tx") == "&#9;x"
    assert md_text("   x") == "   x"  # 3 columns: a paragraph's
    assert md_text("ok\n    continued") == "ok\n    continued"  # a paragraph's next line
    assert md_text("ok\n\n    code") == "ok\n\n   &#32;code"
    assert md_cell("    x") == "    x"  # a cell holds no block
