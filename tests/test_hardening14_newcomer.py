"""A newcomer's audit (session T): what they typed, what ckptbench answered, and what it
answers now.

1. A sweep config with only ``[case]`` was "empty grid: add a [grid] table ..."; it is one
   cell now (asv's benchmark without ``params``), and the sweep's first line says so.
2. ``run --sample-interval 1h`` was accepted and sampled each worker once, as it started;
   an interval over 10 s, or not below ``--timeout``, is refused before anything runs.
3. ``run --out /new/dir/x.json`` and ``compare -o new/rep.html`` made the folders without a
   word (documented for ``check --junit`` only); every output's missing folder is made and
   said in one line, so a typo in a path is seen.
4. ``run --memory-limit 30MiB``, below what an idle worker holds, started every mode and
   failed each "while starting"; the run stops at the first such worker, in one line, exit 2.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from _cli import run_cli

from ckptbench.sweep.config import ConfigError, parse_config

TINY = ["--model", "rnn", "--steps", "20", "--snaps", "4", "--rounds", "1"]


# ------------------------------------------------------------- 1: a config without [grid]


@pytest.mark.parametrize(
    "text",
    ["[case]\nsteps = 10\n", "[case]\nsteps = 10\n[grid]\n", "grid = []\n[case]\nsteps = 10\n"],
    ids=["no-grid", "empty-grid", "empty-list"],
)
def test_a_config_without_grid_axes_is_one_cell_the_case_alone(text: str) -> None:
    cfg = parse_config(text, source="one.toml")
    assert len(cfg.cases) == 1 and cfg.cases[0].steps == 10 and cfg.axes == ()


def test_an_empty_table_among_several_grid_tables_is_refused() -> None:
    # it adds the bare [case] as a cell: most likely a table whose axes were forgotten
    text = "[case]\nsteps = 10\n[[grid]]\n[[grid]]\nsnaps = [2]\n"
    with pytest.raises(ConfigError, match="among several needs at least one axis") as err:
        parse_config(text, source="two.toml")
    assert "two.toml:3:" in str(err.value)
    with pytest.raises(ConfigError, match="empty grid: the axis has no values"):
        parse_config("[grid]\nsnaps = []\n")
    # neither [case] nor [grid] (an empty file) is still no sweep: one cell of defaults
    # would be a guess
    for text in ("", "name = 'x'\n", "[expect]\nslowdown_max = 2.0\n"):
        with pytest.raises(ConfigError, match=r"nothing to measure: give a \[case\] table"):
            parse_config(text, source="e.toml")


def test_a_one_cell_sweep_says_it_is_the_case_alone(tmp_path: Path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "one.toml").write_text("name = 'one'\n[case]\nmodel = 'rnn'\nsteps = 20\n")
    code, out, err = run_cli(capsys, ["sweep", "one.toml", "--dry-run"])
    assert code == 0, err
    assert "sweep one: 1 cell (no [grid] axes: the [case] alone), 1 to measure" in out


# ------------------------------------------------------------- 2: --sample-interval


def test_a_sample_interval_no_mode_can_use_is_refused_before_anything_runs(
    fake, tmp_path: Path, capsys, monkeypatch
):
    from _cli import one_line_error

    monkeypatch.chdir(tmp_path)
    err = one_line_error(capsys, ["run", *TINY, "--sample-interval", "1h", "--out", "a.json"])
    assert "--sample-interval 3600 s is above the longest it takes, 10 s" in err
    assert "the exact peak is read in the worker whatever the interval" in err
    argv = ["run", *TINY, "--timeout", "2s", "--sample-interval", "2s", "--out", "b.json"]
    err = one_line_error(capsys, argv)
    assert "--sample-interval 2 s is not below --timeout 2 s" in err
    assert not list(tmp_path.iterdir())  # nothing measured, nothing written
    # a sweep config's sample_interval_s, in the config's words and line
    (tmp_path / "s.toml").write_text("[case]\nsteps = 20\nsample_interval_s = '1m'\n")
    err = one_line_error(capsys, ["sweep", "s.toml", "--dry-run"])
    assert "s.toml:3: sample_interval_s 60 s is above the longest it takes, 10 s" in err


def test_the_longest_sample_interval_is_taken() -> None:
    from ckptbench.measure.sampling import MAX_SAMPLE_INTERVAL_S, sample_interval_problem

    assert sample_interval_problem(MAX_SAMPLE_INTERVAL_S, 900.0) is None
    assert sample_interval_problem(0.005, None) is None
    assert sample_interval_problem(9.0, 10.0) is None
    assert sample_interval_problem(10.5, None) is not None


# ------------------------------------------------------------- 3: folders made for outputs


def test_a_folder_made_for_an_output_is_said(fake, tmp_path: Path, capsys, monkeypatch):
    import json

    from _synthetic import CI_CASE, make_result

    from ckptbench.results.schema import save_result

    monkeypatch.chdir(tmp_path)
    code, _, err = run_cli(capsys, ["run", *TINY, "--out", "runs/new/x.json"])
    assert code == 0, err
    assert "note: created folder runs/new for --out\n" in err
    assert (tmp_path / "runs/new/x.json").is_file()
    code, _, err = run_cli(capsys, ["run", *TINY, "--out", "runs/new/y.json"])
    assert code == 0 and "created folder" not in err  # it exists now: nothing said
    save_result(make_result(CI_CASE, seed=1), tmp_path / "r.json")
    code, _, err = run_cli(capsys, ["compare", "r.json", "-o", "rep/r.html"])
    assert code == 0 and "note: created folder rep for -o\n" in err, err
    code, _, err = run_cli(capsys, ["compare", "r.json", "--plots", "figs"])
    assert code == 0 and "note: created folder figs for --plots\n" in err, err
    code, _, err = run_cli(capsys, ["check", "r.json", "--junit", "ci/junit.xml"])
    assert code == 0 and "note: created folder ci for --junit\n" in err, err
    costs = {"forward_time_s": 1e-4, "taped_time_s": 3e-4, "state_bytes": 4096,
             "tape_bytes": 40000, "fixed_time_s": 0.0}  # fmt: skip
    (tmp_path / "c.json").write_text(json.dumps(costs))
    argv = ["plan", "--model", "rnn", "--steps", "20", "--budget", "64KiB", "--costs",
            "c.json", "--save-costs", "saved/costs.json"]  # fmt: skip
    code, _, err = run_cli(capsys, argv)
    assert code == 0 and "note: created folder saved for --save-costs\n" in err, err


# ------------------------------------------------------------- 4: a limit no worker starts in


def test_a_memory_limit_no_worker_starts_under_stops_the_run_at_the_first(
    fake, tmp_path: Path, capsys, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    fake.setenv("FAKE_ALLOC", "baseline:64,normal:64,checkpointed:64")  # before "ready"
    started = []
    real = __import__("ckptbench.measure.launch", fromlist=["run_mode"]).run_mode

    def counted(case, mode, *args, **kwargs):
        started.append(mode.value)
        return real(case, mode, *args, **kwargs)

    monkeypatch.setattr("ckptbench.measure.runner.run_mode", counted)
    argv = ["run", *TINY, "--memory-limit", "48MiB", "--out", "r.json"]
    code, _, err = run_cli(capsys, argv)
    assert code == 2 and "Traceback" not in err, err
    lines = err.splitlines()
    assert len(lines) == 2 and lines[0].startswith("measuring rnn 20 steps"), err  # the plan
    err = lines[1]
    assert started == ["baseline"]  # not every mode to the same failure
    assert "--memory-limit 48.0 MiB is below what a worker holds before measuring" in err
    assert "the first one (baseline) was stopped while starting (RSS " in err
    # in MiB, or in bytes where the RSS caught just over the limit reads '48.0 MiB' too
    assert any(f"exceeded the memory limit of {v})" in err for v in ("48.0 MiB", "50,331,648 B"))
    assert "nothing measured, no file written" in err
    assert "the baseline's exact peak, in a run without --memory-limit" in err
    assert not (tmp_path / "r.json").exists()


def test_a_limit_a_later_mode_exceeds_while_starting_is_still_its_result(fake, tmp_path):
    # the baseline started and measured: normal's out-of-memory is the run's result, kept
    from ckptbench.cli import main
    from ckptbench.results.schema import Mode, Status
    from ckptbench.results.store import load_result

    fake.setenv("FAKE_ALLOC", "normal:300")
    out = tmp_path / "r.json"
    with pytest.raises(SystemExit) as exc:
        main(["run", *TINY, "--memory-limit", "200MiB", "--out", str(out)])
    assert exc.value.code == 1
    result = load_result(out)
    assert result.mode(Mode.BASELINE).ok
    assert result.mode(Mode.NORMAL).status is Status.OUT_OF_MEMORY


def test_a_sweep_cell_no_worker_starts_in_is_a_config_error() -> None:
    from ckptbench.measure.follow import LimitBelowStart
    from ckptbench.sweep.cells import CellState, cell_error

    state, why = cell_error(LimitBelowStart("--memory-limit 30.0 MiB is below ..."))
    assert state is CellState.INVALID and why.startswith("config error: --memory-limit")
