"""``ckptbench sweep --dry-run``: the plan a sweep would make, printed, with nothing
measured and nothing created; refused where the sweep itself would refuse."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from _synthetic import make_result
from click.testing import CliRunner

from ckptbench.cli import cli
from ckptbench.results.schema import Status, save_result
from ckptbench.results.store import cell_path
from ckptbench.sweep.config import load_config

CONFIG = """
name = "tiny"
[case]
model = "rnn"
steps = 20
hidden = 8
repeats = 1
[grid]
snaps = [2, 3, 4, 5]
"""


def _setup(tmp_path: Path) -> tuple[Path, list]:
    config = tmp_path / "tiny.toml"
    config.write_text(CONFIG)
    return config, load_config(config).cases


def _dry(*args: str):
    return CliRunner().invoke(cli, ["sweep", *args, "--dry-run"])


def _rows(output: str) -> dict[str, str]:
    """cell label -> the action column, read from the text table (columns: cell, roughly,
    action, then the file where the width allows)."""
    rows = {}
    for line in output.splitlines():
        if line.startswith("rnn l=20"):
            cell, _roughly, action, *_ = re.split(r"\s{2,}", line.strip())
            rows[cell] = action
    return rows


def test_a_fresh_folder_lists_every_cell_to_measure_and_is_not_created(tmp_path: Path) -> None:
    config, cases = _setup(tmp_path)
    out = tmp_path / "nested" / "out"
    res = _dry(str(config), "--out", str(out))
    assert res.exit_code == 0, res.output
    rows = _rows(res.output)
    assert len(rows) == len(cases) == 4
    assert all(a.endswith("measure") for a in rows.values()), rows
    assert "4 cells, 4 to measure, roughly" in res.output and "nothing written" in res.output
    assert not out.parent.exists()


def test_a_resumed_folder_shows_kept_failed_conflicting_and_missing_cells(tmp_path: Path) -> None:
    config, cases = _setup(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    save_result(make_result(cases[0]), cell_path(out, cases[0]))
    failed = make_result(cases[1], status={"checkpointed": Status.TIMEOUT})
    save_result(failed, cell_path(out, cases[1]))
    cell_path(out, cases[2]).write_text("{ not json")
    before = sorted(p.name for p in out.iterdir())

    res = _dry(str(config), "--out", str(out), "--resume")
    assert res.exit_code == 0, res.output
    actions = list(_rows(res.output).values())
    assert actions[0].startswith("keep (measured OK)")
    assert actions[1].startswith("keep (a failed measurement")
    assert actions[2].startswith("conflict:")
    assert actions[3].endswith("measure")
    assert "4 cells, 1 to measure" in res.output
    assert "conflict: " in res.output and "not JSON" in res.output  # the reason, in full

    retry = _dry(str(config), "--out", str(out), "--resume", "--retry-failed")
    assert retry.exit_code == 0, retry.output
    assert list(_rows(retry.output).values())[1].startswith("measure again")
    assert "4 cells, 2 to measure" in retry.output
    assert sorted(p.name for p in out.iterdir()) == before  # nothing moved, nothing written


def test_it_refuses_what_the_sweep_would_refuse(tmp_path: Path) -> None:
    config, cases = _setup(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    save_result(make_result(cases[0]), cell_path(out, cases[0]))
    res = _dry(str(config), "--out", str(out))  # results there, no --resume
    assert res.exit_code == 2 and "pass --resume" in res.output
    assert "Traceback" not in res.output
    a_file = tmp_path / "file"
    a_file.write_text("x")
    res = _dry(str(config), "--out", str(a_file))
    assert res.exit_code == 2 and "not a folder" in res.output


def test_a_dry_run_says_which_grid_cells_were_clamped_or_merged(tmp_path: Path) -> None:
    """The sweep printed its notes on the grid (snaps not used or clamped, duplicates
    measured once) only when it ran: a dry run listed 3 cells of a 6-cell grid silently."""
    config = tmp_path / "merged.toml"
    config.write_text(
        'name = "merged"\n[case]\nmodel = "rnn"\nsteps = 10\nhidden = 8\n'
        '[grid]\nstrategy = ["revolve", "store-all"]\nsnaps = [2, 12]\n'
    )
    notes = load_config(config).notes
    assert len(notes) >= 2  # snaps unused by store-all or clamped, one duplicate
    res = _dry(str(config), "--out", str(tmp_path / "out"))
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    assert all(note in lines for note in notes), res.output
    assert "1 duplicate grid cell(s) measured once" in res.output
    assert lines[-1].startswith("sweep merged: 3 cells, 3 to measure")


def test_a_one_cell_sweep_says_one_cell_not_one_cells(tmp_path: Path) -> None:
    config = tmp_path / "one.toml"
    config.write_text(CONFIG.replace("snaps = [2, 3, 4, 5]", "snaps = [3]"))
    res = _dry(str(config), "--out", str(tmp_path / "out"))
    assert res.exit_code == 0, res.output
    assert "sweep tiny: 1 cell, 1 to measure" in res.output
    assert "1 cell, 1 to measure (dry run)" in res.output
    assert "1 cells" not in res.output


def test_a_sweep_says_its_estimate_as_its_dry_run_does(tmp_path: Path, monkeypatch):
    """The same grid was 'roughly 3.0 s' in --dry-run's last line and 'roughly 3 s' in the
    real sweep's start line: one estimate, said one way (``sweepplan.total_estimate``)."""
    config = tmp_path / "est.toml"
    config.write_text('name = "est"\n[case]\nmodel = "rnn"\nsteps = 6\nhidden = 2\nrounds = 1\n'
                      "warmup = 0\nrepeats = 1\n[grid]\nsnaps = [2, 3]\n")  # fmt: skip
    monkeypatch.setenv("COLUMNS", "200")
    out = str(tmp_path / "o")
    dry = CliRunner().invoke(cli, ["sweep", str(config), "--out", out, "--dry-run"])
    assert dry.exit_code == 0, dry.output
    real = CliRunner().invoke(cli, ["sweep", str(config), "--out", out])
    assert real.exit_code == 0, real.output
    said = [re.search(r", (roughly [^,>]+?) -> ", r.output) for r in (dry, real)]
    assert said[0] is not None and said[1] is not None, (dry.output, real.output)
    assert said[0].group(1) == said[1].group(1), (dry.output, real.output)


@pytest.mark.parametrize(
    ("seconds", "said"),
    [
        (3599, "59 min 59 s"),
        (86280, "23 h 58 min"),
        (86400, "1 d"),
        (4 * 86400 + 16 * 3600 + 59, "4 d 16 h"),
        (400 * 86400, "1.1 years"),
        (3e9, "95 years"),
        (3.3e10, "over 1,000 years"),
        (3847042856094246 * 3600.0, "over 1,000 years"),  # was said '3847042856094246 h'
        (float("inf"), "over 1,000 years"),
    ],
)
def test_long_estimates_are_said_in_days_and_years(seconds: float, said: str) -> None:
    from ckptbench.render.format import fmt_duration
    from ckptbench.render.sweepplan import estimate_text

    assert fmt_duration(seconds) == said
    assert estimate_text(seconds) == said
