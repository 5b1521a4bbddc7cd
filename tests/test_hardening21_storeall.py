"""The twenty-first audit, on store-all's figures and '-' as an output folder: `schedule`
demanded --snaps of store-all, which ignores it, and its closed form said l snapshots where
the schedule holds l - 1; `--plots -`, `--mprof -` and `sweep --out -` made a folder named
'-'. Nothing is measured (the fake worker); nothing is timed."""

from __future__ import annotations

from pathlib import Path

import pytest
from _cli import one_line_error, run_cli
from _synthetic import make_result

from ckptbench.results.schema import save_result
from ckptbench.schedules import get_strategy, make_schedule, replay

# ------------------------------------------------------------- 1. store-all's closed form


def test_store_alls_closed_form_is_its_replay() -> None:
    """The closed form said a peak of l snapshots ("at most"); the actions hold x_0 ..
    x_{l-2}, l - 1 of them (none for one step), and the replay says so."""
    spec = get_strategy("store-all")
    form = spec.closed_form
    for steps in range(1, 51):
        s = spec.effective_snaps(steps, steps)
        stats = replay(make_schedule("store-all", steps, s), steps, None)
        closed = (form.advances(steps, s), form.peak(steps, s), form.repetitions(steps, s))
        replayed = (stats.advances, stats.peak_snapshots, stats.max_step_advances)
        assert closed == replayed, steps
        assert form.peak(steps, s) == steps - 1


def test_schedule_takes_store_all_without_snaps(capsys) -> None:
    """`schedule --strategy store-all --steps 5` said "Missing option '--snaps'", which
    store-all does not use; the strategies set by it still need it, in one line."""
    code, out, err = run_cli(capsys, ["schedule", "--strategy", "store-all", "--steps", "5"])
    assert code == 0, err
    assert err == ""  # nothing typed, nothing to note
    assert "store-all schedule: 5 steps" in out and "peak snapshots" in out
    # beyond the enumeration limit: the closed form, whose peak is the replay's, l - 1
    code, out, err = run_cli(capsys, ["schedule", "--strategy", "store-all", "--steps", "10000000"])
    assert code == 0, err
    assert "(closed form)" in out
    peak = next(line for line in out.splitlines() if "peak snapshots" in line)
    assert peak.split()[-1] == "9999999"
    for strategy in ("revolve", "uniform"):
        err = one_line_error(capsys, ["schedule", "--strategy", strategy, "--steps", "5"])
        assert "Missing option '--snaps'" in err and strategy in err


# ------------------------------------------------------------- 2. '-' as an output folder


@pytest.mark.parametrize(
    "argv",
    [
        ["compare", "r.json", "--plots", "-"],
        ["compare", "r.json", "--mprof", "-"],
        ["run", "--model", "rnn", "--steps", "20", "--rounds", "1", "--mprof", "-", "--out", "a"],
        ["sweep", "s.toml", "--out", "-", "--dry-run"],
    ],
)
def test_dash_as_an_output_folder_is_refused(argv, fake, tmp_path: Path, capsys, monkeypatch):
    """`--plots -`, `--mprof -` and `sweep --out -` made a folder named '-' in the current
    folder (or, with --dry-run, planned to); no folder is stdout: one line, exit 2, and
    ``./-`` names such a folder."""
    monkeypatch.chdir(tmp_path)
    save_result(make_result(), tmp_path / "r.json")
    Path("s.toml").write_text('[case]\nmodel = "rnn"\nsteps = 20\nsnaps = 4\n')
    err = one_line_error(capsys, argv)
    assert "'-' is not a folder ckptbench writes to" in err
    assert "./- names a folder called '-'" in err
    assert not (tmp_path / "-").exists()
    assert not (tmp_path / "a").exists()


def test_dot_slash_dash_is_a_folder_called_dash(tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    save_result(make_result(), tmp_path / "r.json")
    code, _, err = run_cli(capsys, ["compare", "r.json", "--mprof", "./-"])
    assert code == 0, err
    assert (tmp_path / "-").is_dir() and list((tmp_path / "-").iterdir())
