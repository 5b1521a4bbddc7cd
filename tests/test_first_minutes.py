"""A new user's first ten minutes (audit at e1bb117): a failure's install hint printed as
it was written, where a result goes next, what the compare table's columns mean, and a
top-level --help that maps the commands."""

from __future__ import annotations

import io
from dataclasses import replace
from pathlib import Path

from click.testing import CliRunner
from rich.console import Console

from ckptbench.cli import cli
from ckptbench.cli.run_steps import report_outcome, show_result
from ckptbench.results.schema import Mode, Status
from ckptbench.sweep.cells import CellOutcome, CellState, SweepOutcome
from tests._synthetic import TINY_SWEEP_TEXT, make_result

HINT = "TorchMissingError: --backend torch needs PyTorch; pip install 'ckptbench[torch]'"


def _failed(error: str):
    result = make_result(status={"checkpointed": Status.FAILED})
    modes = tuple(
        replace(m, error=error) if m.mode is Mode.CHECKPOINTED else m for m in result.modes
    )
    return replace(result, modes=modes)


def test_a_failure_line_keeps_its_brackets(capsys):
    """rich read '[torch]' as a style and dropped it (the hint said `pip install
    'ckptbench'`), and a '[/x]' in a plug-in's error raised MarkupError (a traceback)."""
    from ckptbench.render.console import stderr_console

    code = report_outcome(_failed(f"{HINT} [/x] [expect]"), (), stderr_console())
    err = capsys.readouterr().err
    assert code == 1
    assert "pip install 'ckptbench[torch]' [/x] [expect]" in err


def test_report_prose_keeps_its_brackets():
    """A report's prose lines (the headline, a plug-in's name) print as written."""
    from ckptbench.render.formats.model import Prose, Report
    from ckptbench.render.formats.text import show_text

    buf = io.StringIO()
    show_text(Report("r", (Prose(("plugins/[v2]/gru.py:make [/b] 1.3x [1.2, 1.4]",)),)),
              Console(file=buf, width=120))  # fmt: skip
    assert "plugins/[v2]/gru.py:make [/b] 1.3x [1.2, 1.4]" in buf.getvalue()


def test_run_says_how_to_turn_its_file_into_a_report(capsys):
    out = Path("results") / "run-lstm-x.json"
    show_result(make_result(), "text", quiet=False, out=out)
    text = capsys.readouterr().out
    assert f"saved {out}" in text
    assert f"ckptbench compare {out} --format html -o report.html" in text


def test_sweep_says_how_to_read_and_gate_its_folder(tmp_path, monkeypatch):
    config = tmp_path / "tiny.toml"
    config.write_text(TINY_SWEEP_TEXT)
    out = tmp_path / "res"

    def fake_run_sweep(cfg, out_dir, **_kw):
        cells = tuple(
            CellOutcome(c, out_dir / f"{c.key}.json", CellState.MEASURED, ok=True)
            for c in cfg.cases
        )
        return SweepOutcome(cfg.name, out_dir, out_dir / "sweep.json", cells, 1.0)

    monkeypatch.setattr("ckptbench.sweep.run.run_sweep", fake_run_sweep)
    res = CliRunner().invoke(cli, ["sweep", str(config), "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert f"ckptbench compare {out}" in res.output
    assert f"ckptbench check {out}" in res.output


def test_compare_text_says_what_its_columns_are():
    from ckptbench.analysis import compare as comparison_of
    from ckptbench.render.compare import render

    text = render(comparison_of([make_result(rounds=3)]), "text", width=200)
    text = " ".join(text.split())  # the legend wraps at the width, anywhere
    assert "+MiB: a mode's exact peak over the forward-only baseline's" in text
    assert "slowdown: ckpt time / normal time" in text
    assert "savings: normal +MiB / ckpt +MiB" in text


def test_top_level_help_is_a_map_in_workflow_order():
    text = CliRunner().invoke(cli, ["--help"], terminal_width=80).output
    listed = text.split("Commands:")[1].splitlines()
    rows = [line.split()[0] for line in listed if line.startswith("  ") and line.split()]
    assert rows[:7] == ["run", "plan", "schedule", "profile", "sweep", "compare", "check"]
    assert not any(line.rstrip().endswith("...") for line in listed)
    assert "ckptbench compare" in text and "--format html" in text
    assert "ckptbench COMMAND --help" in text


def test_max_time_without_a_unit_below_a_minute_is_refused_as_a_slip():
    """'--max-time 4' (the default reads 4m) ran as 4 seconds: two rounds and a slowdown
    interval of +/-14742%. It is refused before anything runs, as '--budget 8' is."""
    # an unknown model too: the old code would otherwise start measuring
    res = CliRunner().invoke(cli, ["run", "--max-time", "4", "--model", "no-such-model"])
    assert res.exit_code == 2
    assert "4 would be 4 s (a duration without a unit is seconds): write 4m" in res.output
    assert "or 4s if you mean it" in res.output


def test_a_refused_plugin_leaves_no_folder_made_for_its_output(tmp_path, monkeypatch):
    """2026-11-29 (layer-stack audit): `run` makes --out's folder before the plug-in check, and
    a plug-in refused there left that folder behind, empty; now a refusal removes the folders
    the command made while they are empty, and leaves one that holds anything."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "badplug.py").write_text("def broken():\n    pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    args = ["run", "--model", "badplug:broken", "--steps", "10", "--snaps", "2", "--out"]
    res = CliRunner().invoke(cli, [*args, "newdir/sub/x.json"])
    assert res.exit_code == 2, res.output
    assert "created folder" not in res.output  # removed: not said (test_hardening18_status)
    assert not (tmp_path / "newdir").exists()
    (tmp_path / "kept").mkdir()
    (tmp_path / "kept" / "other.txt").write_text("mine")
    res = CliRunner().invoke(cli, [*args, "kept/sub/x.json"])
    assert res.exit_code == 2, res.output
    assert not (tmp_path / "kept" / "sub").exists()
    assert (tmp_path / "kept" / "other.txt").read_text() == "mine"
