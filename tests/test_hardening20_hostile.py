"""The twentieth audit, a hostile one: text no reader reads (a lone surrogate from a plug-in's
error message or a non-UTF-8 environment variable) written into a result or a sweep's
manifest. Synthetic results where nothing needs measuring; nothing is timed."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from _cli import run_cli
from _synthetic import make_result

from ckptbench.results.schema import Case, Mode, Status

#: What a plug-in's ``raise ValueError("bad \udcff thing")`` (or a message decoded from bytes
#: with ``surrogateescape``) reaches the parent as: the worker's JSON line escapes it, and
#: ``json.loads`` gives the lone surrogate back.
SURROGATE_ERROR = "WorkloadError: workload factory raised ValueError: bad \udcff thing"

CASE = Case(model="rnn", steps=20, snaps=4, hidden=8, warmup=0, repeats=1, rounds=1)


@pytest.fixture(autouse=True)
def _no_step_summary(monkeypatch):
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)


def _failed(case: Case = CASE, error: str = SURROGATE_ERROR):
    """A result whose checkpointed mode failed with ``error``; its other modes measured."""
    made = make_result(case, status={"checkpointed": Status.FAILED})
    modes = tuple(replace(m, error=error) if m.mode is Mode.CHECKPOINTED else m
                  for m in made.modes)  # fmt: skip
    return replace(made, modes=modes)


# ------------------------- 1. a lone surrogate saved: a result that no reader reads any more


def test_a_failed_modes_message_with_a_lone_surrogate_leaves_the_result_readable(tmp_path):
    """A plug-in raised with a lone surrogate in its message: run saved the result, with its
    measured baseline and normal modes, and every reader refused the whole file ('modes[2].
    error holds a lone UTF-16 surrogate ... which is no text')."""
    from ckptbench.results.schema import save_result
    from ckptbench.results.store import load_result

    path = tmp_path / "r.json"
    save_result(_failed(), path)
    back = load_result(path)
    (failed,) = [m for m in back.modes if m.mode is Mode.CHECKPOINTED]
    assert failed.error == "WorkloadError: workload factory raised ValueError: bad \\udcff thing"
    assert [m.ok for m in back.modes].count(True) == 2  # the measured modes are all there


def test_an_allocator_variable_of_non_utf8_bytes_leaves_the_result_readable(tmp_path, monkeypatch):
    """``MALLOC_X=$'a\\xffb' ckptbench run ...``: the environment recorded the value as
    Python holds it ('a\\udcffb'), and the saved result was unreadable by compare and check."""
    import os

    from ckptbench.measure import peaks
    from ckptbench.results.schema import save_result
    from ckptbench.results.store import load_result

    monkeypatch.setitem(os.environ, "MALLOC_X", os.fsdecode(b"a\xffb"))
    env = {"malloc_env": peaks.malloc_env(), "python_executable": os.fsdecode(b"/v\xfe/python")}
    path = tmp_path / "r.json"
    save_result(replace(make_result(CASE), environment=env), path)
    back = load_result(path)
    assert back.environment["malloc_env"]["MALLOC_X"] == "a\\udcffb"
    assert back.environment["python_executable"] == "/v\\udcfe/python"


def test_a_sweep_whose_cell_failed_with_a_lone_surrogate_stays_readable(tmp_path, capsys):
    """The sweep wrote the cell's message into its manifest too: compare, check and
    ``--resume`` then refused the whole folder ('unreadable sweep manifest: ... cells[0].error
    holds a lone UTF-16 surrogate'), every cell measured in it with it."""
    from ckptbench.sweep.config import parse_config
    from ckptbench.sweep.run import run_sweep

    config = parse_config(
        'name = "sw"\n[case]\nmodel = "rnn"\nsteps = 20\nhidden = 8\nwarmup = 0\n'
        "repeats = 1\nrounds = 1\n[grid]\nsnaps = [2, 4]\n",
        source="t.toml",
    )

    def run_cell(case, **_):
        return _failed(case) if case.snaps == 4 else make_result(case)

    out = tmp_path / "sw"
    run_sweep(config, out, run_cell=run_cell)
    code, stdout, err = run_cli(capsys, ["check", str(out)])
    assert "surrogate" not in err, err
    assert code == 1, err  # the failed cell fails the gate; the folder is read
    assert "FAIL" in stdout and "bad \\udcff thing" in stdout, stdout
    code, stdout, err = run_cli(capsys, ["compare", str(out)])
    assert code == 0, err


# ------------------------------ 2. a grid of a product nobody measures: refused, not expanded

#: Two axes of 317 values: 100,489 cells, just over the limit.
BIG_GRID = (
    '[case]\nmodel = "lstm"\nsteps = 20\n[grid]\n'
    f"seed = {list(range(317))}\nhidden = {list(range(1, 318))}\n"
)


def test_a_grid_of_more_cells_than_a_config_may_name_is_refused_before_expanding():
    """100,489 cells were expanded one Case at a time (about 20 s here), and eight axes of
    ten values (10**8 cells, eight lines of TOML) ran for hours in ``sweep``, ``sweep
    --dry-run`` and ``check --config`` before anything was said."""
    from ckptbench.sweep.config import ConfigError, parse_config

    with pytest.raises(ConfigError) as err:
        parse_config(BIG_GRID, source="big.toml")
    said = str(err.value)
    assert said.startswith("big.toml:4: grid: 100,489 cells (317 x 317 values), over the "), said


def test_a_grid_over_the_limit_is_one_line_from_check_and_sweep(tmp_path, capsys):
    from _cli import one_line_error

    from ckptbench.results.schema import save_result

    config = tmp_path / "big.toml"
    config.write_text(BIG_GRID)
    save_result(make_result(CASE), tmp_path / "r.json")
    err = one_line_error(capsys, ["check", str(tmp_path / "r.json"), "--config", str(config)])
    assert "100,489 cells" in err, err
    err = one_line_error(capsys, ["sweep", str(config), "--out", str(tmp_path / "o")])
    assert "100,489 cells" in err, err


# ---------------------- 3. a command line of non-UTF-8 bytes: the mprof timelines still written


def test_mprof_timelines_are_written_when_an_argument_is_no_utf8(tmp_path, capsys, monkeypatch):
    """``--mprof $'mp\\xff'`` (or ``run --out $'r\\xff.json' --mprof DIR``): the timelines'
    ``CMDLINE`` held the argument as Python holds it, which UTF-8 cannot encode; after the
    run had measured, ``--mprof ...: 'utf-8' codec can't encode character '\\udcff'``, exit 2
    and no timeline (the folder made for them removed)."""
    import os
    import sys

    from ckptbench.results.schema import save_result

    result = tmp_path / "r.json"
    save_result(make_result(CASE), result)
    folder = tmp_path / os.fsdecode(b"mp\xff")
    argv = ["compare", str(result), "--mprof", str(folder)]
    monkeypatch.setattr(sys, "argv", ["ckptbench", *argv])
    code, _, err = run_cli(capsys, argv)
    assert code == 0, err
    files = sorted(folder.glob("mprofile_*.dat"))
    assert len(files) == 3, err
    first = files[0].read_text(encoding="utf-8").splitlines()[0]
    assert first.startswith("CMDLINE ckptbench compare ") and "mp\\xff" in first, first


def test_a_report_naming_a_non_utf8_path_is_written_not_a_traceback(tmp_path, capsys):
    """A sweep's folder whose name is no UTF-8 (``$'sw\\xff'``): ``compare --format csv -o``
    and ``check --summary`` (its limits line names the folder's manifest) ended in a
    UnicodeEncodeError traceback (the path in the text, as Python holds it, cannot be
    encoded), with no report written."""
    import os

    from ckptbench.sweep.config import parse_config
    from ckptbench.sweep.run import run_sweep

    config = parse_config(
        '[case]\nmodel = "rnn"\nsteps = 20\nsnaps = 4\nhidden = 8\nwarmup = 0\nrepeats = 1\n'
        "rounds = 1\n[expect]\nmemory_savings_min = 1.0\n",
        source="t.toml",
    )
    folder = tmp_path / os.fsdecode(b"sw\xff")
    run_sweep(config, folder, run_cell=lambda case, **_: make_result(case))
    out = tmp_path / "report.csv"
    code, _, err = run_cli(capsys, ["compare", str(folder), "--format", "csv", "-o", str(out)])
    assert code == 0 and "Traceback" not in err, err
    assert "sw\\udcff" in out.read_text(encoding="utf-8")
    summary = tmp_path / "summary.md"
    code, _, err = run_cli(capsys, ["check", str(folder), "--summary", str(summary)])
    assert code == 0 and "Traceback" not in err, err
    assert "sw\\udcff" in summary.read_text(encoding="utf-8")


def test_a_plugin_in_a_folder_named_in_non_utf8_bytes_loads(tmp_path):
    """``cd $'d\\xff' && ckptbench run --model pl.py:make``: 'loading it in a fresh worker
    failed: UnicodeEncodeError: 'utf-8' codec can't encode character '\\udcff'' (its module
    name hashed the path's text, which UTF-8 cannot encode)."""
    import os
    import shutil

    from ckptbench.workloads import Sizes, load_workload

    folder = tmp_path / os.fsdecode(b"d\xff")
    folder.mkdir()
    shutil.copy(Path(__file__).parents[1] / "docs" / "examples" / "autograd_rnn.py", folder)
    workload = load_workload(f"{folder / 'autograd_rnn.py'}:make", Sizes(hidden=4))
    assert type(workload).__name__ == "ElmanRNN"
