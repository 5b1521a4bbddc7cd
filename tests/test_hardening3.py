"""Third hardening round (issue 26): result inputs read by one bounded rule, cells told
apart by what they are, writers that never lose a measurement, and messages in the
user's own units. Every input problem is one line and exit 2."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from _cli import one_line_error, run_cli
from _synthetic import CI_CASE, TINY_SWEEP_TEXT, make_result
from click.testing import CliRunner

from ckptbench.cli import cli
from ckptbench.results.schema import result_to_dict, save_result
from ckptbench.results.store import StoreError, load_result, load_results


def invoke(args):
    return CliRunner().invoke(cli, args, catch_exceptions=False)


def small(out: Path, *extra: str) -> list[str]:
    return ["run", "--model", "rnn", "--steps", "20", "--snaps", "4", "--rounds", "1",
            "--out", str(out), *extra]  # fmt: skip


def _doc() -> dict:
    return result_to_dict(make_result(CI_CASE))


# --------------------------------------------------------------------------- item 2: reading


def _in_thread(fn, timeout: float = 20.0):
    """Run ``fn`` in a thread; fail (instead of hanging the suite) if it blocks."""
    box: dict = {}

    def target():
        try:
            box["value"] = fn()
        except BaseException as err:
            box["error"] = err

    t = threading.Thread(target=target, daemon=True)
    t.start()
    t.join(timeout)
    assert not t.is_alive(), "blocked on a FIFO"
    if "error" in box:
        raise box["error"]
    return box.get("value")


def test_a_fifo_is_refused_without_blocking(tmp_path: Path, capsys) -> None:
    fifo = tmp_path / "f.json"
    os.mkfifo(fifo)
    with pytest.raises(StoreError, match="FIFO"):
        _in_thread(lambda: load_result(fifo))
    for command in (["compare", str(fifo)], ["check", str(fifo)]):
        err = _in_thread(lambda c=command: one_line_error(capsys, c))
        assert str(fifo) in err and "FIFO" in err


def test_a_fifo_in_a_folder_and_as_a_manifest_is_refused(tmp_path: Path, capsys) -> None:
    save_result(make_result(CI_CASE), tmp_path / "a.json")
    os.mkfifo(tmp_path / "b.json")
    # read without blocking; one unreadable cell of a folder is named, the others shown
    code, out, err = _in_thread(lambda: run_cli(capsys, ["compare", str(tmp_path)]))
    assert code == 0 and "lstm l=256" in out
    assert f"compare: {tmp_path / 'b.json'}: is a FIFO" in err
    err = _in_thread(lambda: one_line_error(capsys, ["compare", str(tmp_path / "b.json")]))
    assert "b.json" in err and "FIFO" in err
    sweep = tmp_path / "sw"
    sweep.mkdir()
    os.mkfifo(sweep / "sweep.json")
    err = _in_thread(lambda: one_line_error(capsys, ["check", str(sweep)]))
    assert "sweep.json" in err


def test_a_device_is_refused_before_reading(capsys) -> None:
    err = one_line_error(capsys, ["compare", "/dev/zero"])
    assert "/dev/zero" in err and "device" in err


def test_an_oversized_file_is_refused(tmp_path: Path, monkeypatch) -> None:
    import ckptbench.results.store as store

    path = tmp_path / "big.json"
    path.write_text(json.dumps(_doc()))
    monkeypatch.setattr(store, "MAX_RESULT_BYTES", 1000)
    with pytest.raises(StoreError, match="more than"):
        load_result(path)


def test_deep_nesting_is_one_line(tmp_path: Path, capsys) -> None:
    path = tmp_path / "deep.json"
    path.write_text('{"schema_version": 3, "case": ' + "[" * 200000 + "]" * 200000 + "}")
    err = one_line_error(capsys, ["compare", str(path)])
    assert str(path) in err and "nested" in err
    with pytest.raises(StoreError, match="nested"):
        load_results([path])


def test_brackets_inside_strings_do_not_count_as_nesting(tmp_path: Path) -> None:
    doc = _doc()
    doc["modes"][0]["stderr_tail"] = "[" * 500 + '\\"{'
    path = tmp_path / "r.json"
    path.write_text(json.dumps(doc))
    assert load_result(path).modes[0].stderr_tail.startswith("[[[")


@pytest.mark.parametrize("digits", [401, 5001])
def test_a_huge_integer_names_the_file_and_field(tmp_path: Path, capsys, digits: int) -> None:
    text = json.dumps(_doc())
    doc = json.loads(text)
    doc["modes"][0]["iterations"][0]["peak_rss_bytes"] = 12345
    text = json.dumps(doc).replace("12345", "1" + "0" * (digits - 1), 1)
    path = tmp_path / "bigint.json"
    path.write_text(text)
    err = one_line_error(capsys, ["compare", str(path)])
    assert str(path) in err and "modes[0].iterations[0].peak_rss_bytes" in err
    assert f"{digits} digits" in err


def test_json_that_is_not_a_result_says_so(tmp_path: Path, capsys) -> None:
    path = tmp_path / "hello.json"
    path.write_text('{"hello": 1}')
    err = one_line_error(capsys, ["compare", str(path)])
    assert "not a ckptbench result" in err and "schema_version None" not in err
    path.write_text("[1, 2]")
    assert "not a ckptbench result" in one_line_error(capsys, ["check", str(path)])


def test_an_empty_path_is_refused(tmp_path: Path, monkeypatch) -> None:
    from ckptbench.frame import read_results

    monkeypatch.chdir(tmp_path)
    save_result(make_result(CI_CASE), tmp_path / "a.json")
    with pytest.raises(StoreError, match="empty path"):
        read_results("")
    with pytest.raises(StoreError, match="empty path"):
        load_result("")


# --------------------------------------------------------------------------- item 3: cells


def _partial_pair(tmp_path: Path) -> tuple[Path, Path, Path]:
    from ckptbench.results.schema import Mode, Status

    a, b, c = tmp_path / "a.json", tmp_path / "b.json", tmp_path / "c.json"
    save_result(make_result(CI_CASE, seed=1), a)
    save_result(make_result(CI_CASE, seed=2, modes=(Mode.BASELINE, Mode.NORMAL)), b)
    save_result(make_result(CI_CASE, seed=3, status={"checkpointed": Status.INTERRUPTED}), c)
    return a, b, c


@pytest.mark.parametrize("fmt", ["table", "markdown", "html", "csv"])
def test_a_partial_invocation_beside_a_full_one_is_shown_not_a_crash(
    tmp_path: Path, capsys, fmt: str
) -> None:
    a, b, c = _partial_pair(tmp_path)
    code, out, err = run_cli(capsys, ["compare", str(a), str(b), str(c), "--format", fmt])
    assert code == 0, err
    if fmt != "csv":
        assert "3 (2 partial)" in out and "2 of 3 runs are partial or failed" in out


def test_two_interrupted_runs_and_plots_do_not_crash(tmp_path: Path, capsys) -> None:
    from ckptbench.results.schema import Status

    a, b = tmp_path / "a.json", tmp_path / "b.json"
    for path, seed in ((a, 1), (b, 2)):
        save_result(make_result(CI_CASE, seed=seed, status={"normal": Status.INTERRUPTED}), path)
    code, out, err = run_cli(
        capsys, ["compare", str(a), str(b), "--plots", str(tmp_path / "plots"), "-q"]
    )
    assert code == 0, err
    assert "2 (2 partial)" in out


def test_pooled_runs_of_different_versions_say_so(tmp_path: Path, capsys) -> None:
    from dataclasses import replace

    a, b = tmp_path / "a.json", tmp_path / "b.json"
    save_result(replace(make_result(CI_CASE, seed=1), tool_version="0.1.0"), a)
    save_result(replace(make_result(CI_CASE, seed=2), tool_version="9.9.9"), b)
    code, out, _ = run_cli(capsys, ["compare", str(a), str(b)])
    assert code == 0 and "different ckptbench versions (0.1.0, 9.9.9)" in out


def test_byte_identical_copies_are_not_independent_invocations(tmp_path: Path, capsys) -> None:
    import shutil

    save_result(make_result(CI_CASE, seed=1), tmp_path / "r1.json")
    folder = tmp_path / "copies"
    folder.mkdir()
    for i in range(6):
        shutil.copy(tmp_path / "r1.json", folder / f"c{i}.json")
    # a folder's copies: no copy is read as the cell (test_hardening16_setaside)
    code, _, err = run_cli(capsys, ["compare", str(folder)])
    assert code == 2 and "6 copies of one measurement" in err and "c1.json" in err
    code, out, _ = run_cli(capsys, ["check", str(folder)])
    assert code == 1 and "unique: " in out and "c1.json" in out
    for command in ("compare", "check"):  # given by name: one line, as before
        err = one_line_error(capsys, [command, str(folder / "c0.json"), str(folder / "c1.json")])
        assert "the same measurement as" in err and "c1.json" in err
    with pytest.raises(StoreError, match="same measurement"):
        load_results([tmp_path / "r1.json", folder / "c0.json"])
    # one file named twice (or through its folder) is still read once
    assert len(load_results([folder / "c0.json", folder / "c0.json"])) == 1


def _sweep_folder(tmp_path: Path) -> Path:
    from ckptbench.results.schema import Case

    out = tmp_path / "gate"
    out.mkdir()
    cells = []
    for strategy in ("revolve", "uniform"):
        case = Case(model="lstm", steps=64, snaps=4, strategy=strategy, hidden=8, repeats=3)
        save_result(make_result(case, seed=len(cells)), out / f"{case.key}.json")
        cells.append({"key": case.key, "file": f"{case.key}.json", "state": "measured"})
    manifest = {
        "kind": "ckptbench-sweep",
        "manifest_version": 1,
        "config": {"name": "gate", "expect": {}, "expect_by_strategy": {}},
        "cells": cells,
    }
    (out / "sweep.json").write_text(json.dumps(manifest))
    return out


def test_a_cell_file_holding_another_cells_result_is_refused(tmp_path: Path, capsys) -> None:
    import shutil

    out = _sweep_folder(tmp_path)
    code, _, err = run_cli(capsys, ["check", str(out)])
    assert code == 0, err
    revolve, uniform = sorted(out.glob("lstm-*.json"), key=lambda p: "uniform" in p.name)
    shutil.copy(revolve, uniform)
    # set aside, named; the folder's other cell still read (test_hardening16_setaside)
    for command in (["check", str(out)], ["compare", str(out)], ["check", str(out / "sweep.json")]):
        code, out_text, err = run_cli(capsys, command)
        assert code == (1 if command[0] == "check" else 0), err
        said = out_text if command[0] == "check" else err
        assert uniform.name in said and "holds the result of cell" in said
    with pytest.raises(StoreError, match="holds the result of cell"):  # read whole: refused
        load_results([out])


# --------------------------------------------------------------------------- item 4: writers

HOLD = """
import sys, time
from ckptbench.{where} import {what}
with {what}(sys.argv[1]):
    print("held", flush=True)
    time.sleep(120)
"""


def _holder(what: str, path: Path, where: str = "results.folderlocks") -> subprocess.Popen:
    """Another live ckptbench process holding ``what`` (writer_lock, locked_folder)."""
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD.format(what=what, where=where), str(path)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    return proc


def _stop(proc: subprocess.Popen) -> None:
    proc.kill()
    proc.wait()


def test_an_out_held_by_a_live_writer_is_refused_before_measuring(fake, tmp_path, capsys):
    out = tmp_path / "g.json"
    holder = _holder("writer_lock", out, "results.schema")
    try:
        err = one_line_error(capsys, small(out))
        assert f"pid {holder.pid}" in err and "is writing this file" in err
        err = one_line_error(capsys, [*small(out), "--force"])
        assert f"pid {holder.pid}" in err
    finally:
        _stop(holder)
    assert not out.exists()
    # the holder died: its lock file is stale and taken over
    assert (tmp_path / ".g.json.lock").exists()
    res = invoke(small(out))
    assert res.exit_code == 0, res.output
    assert load_result(out).case.steps == 20
    assert not (tmp_path / ".g.json.lock").exists()


def test_a_run_honours_a_sweeps_folder_lock(fake, tmp_path, capsys):
    holder = _holder("locked_folder", tmp_path)
    try:
        err = one_line_error(capsys, small(tmp_path / "cell.json"))
        assert "being written by a ckptbench sweep" in err
    finally:
        _stop(holder)
    assert not (tmp_path / "cell.json").exists()


def test_a_run_never_replaces_a_manifest(fake, tmp_path, capsys):
    manifest = tmp_path / "sweep.json"
    manifest.write_text(json.dumps({"kind": "ckptbench-sweep", "manifest_version": 1}, indent=1))
    before = manifest.read_text()
    err = one_line_error(capsys, [*small(manifest), "--force"])
    assert "is a sweep manifest" in err
    assert manifest.read_text() == before


def test_a_measurement_that_cannot_be_saved_where_asked_is_saved_beside_it(fake, tmp_path):
    out = tmp_path / "r.json"
    fake.setenv("FAKE_SLEEP", "baseline:2.0")

    def intruder():  # another program writes the file once the run has claimed it
        lock = tmp_path / ".r.json.lock"
        for _ in range(600):
            if lock.exists():
                out.write_text("{}")
                return
            time.sleep(0.05)

    t = threading.Thread(target=intruder)
    t.start()
    res = invoke(small(out))
    t.join()
    assert res.exit_code == 0, res.output
    assert out.read_text() == "{}"  # not replaced
    beside = [p for p in tmp_path.glob("r.*.json")]
    assert len(beside) == 1, res.output
    assert "saved it as" in res.output and beside[0].name in res.output
    assert len(load_result(beside[0]).modes) == 3


def test_save_or_beside_keeps_the_result(tmp_path):
    from ckptbench.results.schema import save_or_beside

    result = make_result(CI_CASE)
    taken = tmp_path / "taken.json"
    taken.write_text("x")
    at, why = save_or_beside(result, taken, replace=False)
    assert at != taken and at.parent == tmp_path and "exists" in why
    assert load_result(at).case == CI_CASE
    at, why = save_or_beside(result, tmp_path / "free.json", replace=False)
    assert why is None and at == tmp_path / "free.json"


def test_a_sweep_never_moves_a_result_it_did_not_write(tmp_path: Path) -> None:
    from ckptbench.results.schema import Status
    from ckptbench.sweep.config import parse_config
    from ckptbench.sweep.run import CellState, cell_path, run_sweep

    config = parse_config(TINY_SWEEP_TEXT, source="tiny.toml")
    cases = config.cases
    foreign = make_result(cases[1], seed=99)

    def run_cell(case, *, out_path=None, progress=None):
        if case == cases[0]:  # meanwhile another program saves a result at cell 1's path
            save_result(foreign, cell_path(tmp_path, cases[1]))
            status = {"checkpointed": Status.TIMEOUT}
            return make_result(case, seed=1, status=status)
        return make_result(case, seed=2)

    outcome = run_sweep(config, tmp_path, run_cell=run_cell)
    assert outcome.cells[1].state is CellState.ERROR
    assert "appeared while the sweep ran" in outcome.cells[1].error
    assert load_result(cell_path(tmp_path, cases[1])).created == foreign.created
    assert not list(tmp_path.glob("*.replaced"))
    # re-measuring the failed cell moves its file aside, and says so
    outcome = run_sweep(config, tmp_path, resume=True, retry_failed=True, run_cell=run_cell)
    (aside,) = tmp_path.glob("*.replaced")
    assert any(aside.name in line for line in outcome.summary_lines())


# --------------------------------------------------------------------------- item 7: messages


def test_sizes_are_parsed_exactly():
    from ckptbench.cli.values import parse_bytes

    assert parse_bytes(str(2**62 - 1)) == 2**62 - 1  # was refused as too large
    assert parse_bytes(str(2**53 + 1)) == 2**53 + 1  # was 2**53
    assert parse_bytes("1.5g") == 3 * 2**29 and parse_bytes("0.5KiB") == 512
    with pytest.raises(Exception, match="too large"):
        parse_bytes(str(2**62))
    with pytest.raises(Exception, match="too large"):
        parse_bytes("9" * 400)


def test_small_sizes_and_fractions_keep_their_units():
    from ckptbench.render.format import fmt_bytes, fmt_percent

    assert fmt_bytes(4096) == "4.0 KiB" and fmt_bytes(100) == "100 B"
    assert fmt_bytes(48 * 2**20) == "48.0 MiB" and fmt_bytes(4096, unit=False) == "0.0"
    assert fmt_percent(1e-11) == "1e-09%" and fmt_percent(0.05) == "5.0%"
    assert "0.0%" not in fmt_percent(4e-4) and fmt_percent(0.05, 0) == "5%"


def test_precision_zero_is_off_and_the_variable_is_named(fake, tmp_path, capsys, monkeypatch):
    from ckptbench.cli.precision import precision_value as _precision_value

    assert _precision_value("0.0") is None and _precision_value("0") is None
    assert _precision_value("off") is None and _precision_value("5%") == 0.05
    monkeypatch.setenv("CKPTBENCH_PRECISION", "abc")
    err = one_line_error(capsys, small(tmp_path / "r.json"))
    assert "CKPTBENCH_PRECISION='abc'" in err and "--precision was not given" in err
    monkeypatch.delenv("CKPTBENCH_PRECISION")
    err = one_line_error(capsys, [*small(tmp_path / "r.json"), "--precision", "150%"])
    assert "below 100%" in err


def test_max_rounds_below_rounds_is_refused_in_the_users_words(fake, tmp_path, capsys):
    argv = ["run", "--model", "rnn", "--steps", "20", "--out", str(tmp_path / "r.json")]
    err = one_line_error(capsys, [*argv, "--precision", "5%", "--max-rounds", "1"])
    assert "--max-rounds 1 is below --rounds 6 (its default)" in err
    err = one_line_error(capsys, [*argv, "--precision", "5%", "--rounds", "1", "--max-rounds", "1"])
    assert "--max-rounds 1: --precision needs at least 2 rounds" in err
    assert not (tmp_path / "r.json").exists()


def test_precision_without_a_slowdown_says_it_adds_no_rounds(fake, tmp_path):
    out = tmp_path / "r.json"
    argv = [*small(out), "--precision", "1%", "--modes", "baseline,normal"]
    res = invoke(argv)
    assert res.exit_code == 0, res.output
    assert "adds none" in res.output
    assert load_result(out).case.rounds == 1


def test_device_gpu_is_reported_as_typed(capsys, tmp_path):
    argv = ["run", "--steps", "10", "--device", "gpu", "--out", str(tmp_path / "r.json")]
    err = one_line_error(capsys, argv)
    assert "'gpu'" in err and "gpu needs --backend" in err


def test_an_infinite_expectation_is_refused():
    from ckptbench.sweep.config import parse_config

    text = "[case]\nsteps = 20\n[grid]\nsnaps = [4]\n[expect]\nmemory_savings_min = inf\n"
    with pytest.raises(ValueError, match="finite"):
        parse_config(text, source="x.toml")


def test_step_costs_of_a_one_step_chain_are_measured():
    import numpy as np

    from ckptbench.measure.stepcosts import measure_step_costs
    from ckptbench.workloads import Sizes, load_workload

    wl = load_workload("rnn", Sizes(hidden=8, batch=2, input=4, output=1))
    params, state0, inputs = wl.init(1, np.random.default_rng(0))
    report = measure_step_costs(wl, params, state0, inputs, samples=1)
    assert report.steps == 1 and report.costs.state_bytes > 0


def test_all_zero_iteration_times_name_the_file_and_field(tmp_path, capsys):
    doc = _doc()
    for m in doc["modes"]:
        for it in m["iterations"]:
            it["wall_time_s"] = 0.0
    path = tmp_path / "zero.json"
    path.write_text(json.dumps(doc))
    err = one_line_error(capsys, ["compare", str(path)])
    assert str(path) in err and "modes[0].iterations[0].wall_time_s is 0" in err


def test_a_signal_before_the_first_iteration_claims_no_measurement(fake, tmp_path):
    import signal

    out = tmp_path / "s.json"
    fake.setenv("FAKE_SLEEP", "baseline:60")

    def stop():  # SIGTERM once the run has claimed --out and its first worker sleeps
        for _ in range(600):
            if (tmp_path / ".s.json.lock").exists():
                time.sleep(1.0)
                os.kill(os.getpid(), signal.SIGTERM)
                return
            time.sleep(0.05)

    t = threading.Thread(target=stop)
    t.start()
    res = invoke(small(out, "--rounds", "2"))
    t.join()
    assert res.exit_code == 128 + signal.SIGTERM, res.output
    assert "what was measured is saved" not in res.output
    assert "nothing measured (no iteration completed" in res.output
    assert "rounds ran" not in res.output


def test_a_named_pipe_as_a_config_or_costs_file_never_blocks(tmp_path: Path, capsys) -> None:
    fifo = tmp_path / "cfg.toml"
    os.mkfifo(fifo)
    save_result(make_result(CI_CASE), tmp_path / "a.json")
    argv = ["check", str(tmp_path / "a.json"), "--config", str(fifo)]
    err = _in_thread(lambda: one_line_error(capsys, argv))
    assert str(fifo) in err


def test_a_sweep_cell_that_cannot_be_saved_at_its_path_is_saved_beside_it(tmp_path: Path):
    from ckptbench.sweep.config import parse_config
    from ckptbench.sweep.run import CellState, cell_path, run_sweep

    config = parse_config(TINY_SWEEP_TEXT, source="tiny.toml")
    cases = config.cases

    def run_cell(case, *, out_path=None, progress=None):
        if case == cases[1]:  # something made a folder where the cell's file belongs
            cell_path(tmp_path, case).mkdir()
        return make_result(case, seed=3)

    outcome = run_sweep(config, tmp_path, run_cell=run_cell)
    cell = outcome.cells[1]
    assert cell.state is CellState.ERROR and "measured, but saved as" in cell.error
    (beside,) = tmp_path.glob(f"{cases[1].key}.*.json")
    assert load_result(beside).case == cases[1]


def test_check_against_notes_pooled_runs_of_different_versions(tmp_path: Path, capsys) -> None:
    from dataclasses import replace

    a, b, ref = tmp_path / "a.json", tmp_path / "b.json", tmp_path / "ref.json"
    save_result(replace(make_result(CI_CASE, seed=1), tool_version="0.1.0"), a)
    save_result(replace(make_result(CI_CASE, seed=2), tool_version="9.9.9"), b)
    save_result(make_result(CI_CASE, seed=3), ref)
    _, out, err = run_cli(capsys, ["check", str(a), str(b), "--against", str(ref)])
    assert "pooled runs of different ckptbench versions (0.1.0, 9.9.9)" in out + err


def test_a_ratio_too_small_for_its_decimals_keeps_two_significant_digits():
    # a GPU cell's host "savings" was 6.31 / 198.78 MiB and printed "0.0x [0.0, 0.0]"
    from ckptbench.render.format import fmt_ratio, fmt_ratio_ci

    assert fmt_ratio(6.31 / 198.78, 1) == "0.032x" and fmt_ratio(0.0, 1) == "0.0x"
    # the ends round outward (2026-11-29): the printed interval holds the computed one
    assert fmt_ratio_ci(0.0317, (0.0311, 0.0323), 1) == "0.032x [0.031, 0.033]"
    assert fmt_ratio_ci(1.17, (1.1, 1.25)) == "1.17x [1.10, 1.25]"
