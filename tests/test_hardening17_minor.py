"""The seventeenth audit's minor findings, a hostile user's: plot files that are all links
to one file were called "written twice", not links; a sweep manifest listing no cells was
called a folder with no result files; a cell's unknown state and an [expect] of an unknown
strategy were read silently; a tiny time was written as hundreds of digits; an empty entry
of ``run --modes`` was dropped silently; narrow ``compare`` notes contradicted each other;
``--mprof /proc`` named no file; ``plan`` asked for a budget ``--budget`` refuses; a result
or manifest of another version did not say newer or older. Nothing here measures."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from _cli import one_line_error, run_cli
from _synthetic import CI_CASE, make_result

from ckptbench.results.schema import save_result


@pytest.fixture(autouse=True)
def _no_step_summary(monkeypatch):
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)


def _result(tmp_path: Path) -> Path:
    path = tmp_path / "r.json"
    save_result(make_result(CI_CASE), path)
    return path


# ------------------------------------------------------------ 1. plots linked to one file


def test_plot_files_linked_to_one_file_are_named_as_links(tmp_path, capsys):
    """Each --plots file a link to one file: 'would write the file twice', not the rule
    every output keeps (and one linked plot file gets): ckptbench never writes through one."""
    result, plots, target = _result(tmp_path), tmp_path / "p", tmp_path / "one.png"
    code, _, err = run_cli(capsys, ["compare", str(result), "--plots", str(plots), "-q"])
    assert code == 0, err
    target.write_bytes(b"not a plot")
    for png in plots.glob("*.png"):
        png.unlink()
        png.symlink_to(target)
    err = one_line_error(capsys, ["compare", str(result), "--plots", str(plots), "--force"])
    assert "is a symbolic link; ckptbench never writes through one" in err, err
    assert "twice" not in err and target.read_bytes() == b"not a plot"


# ------------------------------------------------------------ 2. a manifest of no cells


def _manifest_folder(folder: Path, cells: list, doc: dict | None = None) -> Path:
    """``folder`` holding CI_CASE's result and a sweep manifest of ``cells`` (``doc``: its
    other fields, replaced after it is written)."""
    from ckptbench.results.store import write_manifest

    folder.mkdir()
    save_result(make_result(CI_CASE), folder / f"{CI_CASE.key}.json")
    config = {"name": "s", "expect": {"memory_savings_min": 1.0}, "expect_by_strategy": {}}
    path = write_manifest(folder, {"config": config, "cells": cells})
    if doc:
        path.write_text(json.dumps({**json.loads(path.read_text()), **doc}))
    return folder


def test_a_manifest_listing_no_cells_is_not_called_a_folder_without_results(tmp_path, capsys):
    """A sweep.json of no cells beside a result file: 'no result files in this folder'."""
    folder = _manifest_folder(tmp_path / "m", [])
    for command in ("check", "compare"):
        err = one_line_error(capsys, [command, str(folder)])
        assert "no result files" not in err
        assert "its sweep manifest lists no cells; 1 result file here it does not list" in err
    lost = {"key": "k", "file": "k.json", "state": "pending", "case": CI_CASE.to_dict()}
    folder = _manifest_folder(tmp_path / "m2", [lost])
    err = one_line_error(capsys, ["compare", str(folder)])
    assert "its sweep manifest lists 1 cell, none saved; 1 result file here it does not" in err
    (tmp_path / "empty").mkdir()
    err = one_line_error(capsys, ["compare", str(tmp_path / "empty")])
    assert "empty: no result files in this folder" in err


# ------------------------------------------------------------ 3. unchecked manifest fields


def _cell(state: str = "measured") -> dict:
    file = f"{CI_CASE.key}.json"
    return {"key": CI_CASE.key, "file": file, "state": state, "case": CI_CASE.to_dict()}


def test_a_manifest_cell_state_or_expect_strategy_ckptbench_does_not_know_is_refused(
    tmp_path, capsys
):
    """A cell state 'weird' and an expect_by_strategy table of no strategy were read
    silently (check passed); a config with that table is refused."""
    weird = _manifest_folder(tmp_path / "w", [_cell("weird")])
    config = {"name": "s", "expect": {}, "expect_by_strategy": {"nosuch": {}}}
    nosuch = _manifest_folder(tmp_path / "n", [_cell()], {"config": config})
    for command in ("check", "compare"):
        err = one_line_error(capsys, [command, str(weird)])
        assert "cells[0].state is 'weird', not a cell state ckptbench knows (measured," in err
        err = one_line_error(capsys, [command, str(nosuch)])
        assert "config.expect_by_strategy has a table of an unknown strategy, 'nosuch'" in err
    code, out, err = run_cli(capsys, ["check", str(_manifest_folder(tmp_path / "ok", [_cell()]))])
    assert code == 0, out + err


# ------------------------------------------------------------ 4. tiny and huge times


def _plan_wide(tmp_path, capsys, monkeypatch, forward_s, taped_s, state_b, tape_b):
    """``plan`` of 100 steps within 1 MiB from one step's costs, 250 columns wide: (stdout,
    stderr), exit 0 asserted."""
    costs = tmp_path / "costs.json"
    costs.write_text(json.dumps({"forward_time_s": forward_s, "taped_time_s": taped_s,
                                 "state_bytes": state_b, "tape_bytes": tape_b}))  # fmt: skip
    monkeypatch.setenv("COLUMNS", "250")
    argv = ["plan", "--costs", str(costs), "--steps", "100", "--budget", "1MiB"]
    code, out, err = run_cli(capsys, argv)
    assert code == 0, err
    return out, err


def test_tiny_and_huge_predicted_times_are_short(tmp_path, capsys, monkeypatch):
    """A costs file's forward_time_s of 1e-320 was written as a 330-character decimal, so
    plan hid the predicted time column even 250 columns wide."""
    from ckptbench.render.format import fmt_seconds

    assert fmt_seconds(1e-320) == "1.00e-320 s" and fmt_seconds(3.2e15) == "3.20e+15 s"
    assert [fmt_seconds(x) for x in (1e-9, 0.000012, 0.903, 999999999.0, 0.0)] == [
        "0.00000000100 s", "0.0000120 s", "0.903 s", "999999999 s", "0.00 s"
    ]  # fmt: skip
    out, err = _plan_wide(tmp_path, capsys, monkeypatch, 1e-320, 1e-320, 1024, 4096)
    assert "predicted time" in out and "not shown" not in out + err, out
    assert max(len(line) for line in out.splitlines()) < 250


def test_plans_title_writes_a_step_cost_as_its_size_and_says_what_a_quantum_is(
    tmp_path, capsys, monkeypatch
):
    """2026-11-29: plan's title wrote its step costs in ms at three decimals ('untaped 0.000
    ms' for 1e-320 s, as for 0.0004 s), and its note column's 'memory quantum 2048 B' was
    said nowhere."""
    out, _ = _plan_wide(tmp_path, capsys, monkeypatch, 4e-7, 2e-3, 3000, 70001)
    assert "untaped 0.400 µs, taped + reverse 2.00 ms" in out, out
    table = out.split("tapes kept (peak):")[0]
    assert "memory quantum" in table, out  # 3000 B and 70001 B: planned in quanta
    assert "memory quantum: the optimal planner counted bytes in units" in out, out


# ------------------------------------------------------------ 5. an empty --modes entry


@pytest.mark.parametrize("modes", ["baseline,,normal", "baseline,normal,", ",checkpointed"])
def test_an_empty_modes_entry_is_refused(tmp_path, capsys, modes):
    """'baseline,,normal' ran baseline and normal, the empty entry dropped silently."""
    out = tmp_path / "r.json"
    err = one_line_error(capsys, ["run", "--steps", "10", "--modes", modes, "--out", str(out)])
    assert f"--modes {modes!r} has an empty entry" in err and not out.exists()


# ------------------------------------------------------------ 6. narrow compare notes


def test_a_column_left_out_is_not_also_said_shown_without_its_interval(
    tmp_path, capsys, monkeypatch
):
    """At COLUMNS=10 compare said 'not shown at this width: ..., ckpt +MiB, normal +MiB'
    and then 'shown without their intervals at this width: normal +MiB, ckpt +MiB'."""
    result = _result(tmp_path)
    for columns in ("10", "40", "80"):
        monkeypatch.setenv("COLUMNS", columns)
        code, out, err = run_cli(capsys, ["compare", str(result)])
        assert code == 0, err
        notes = " ".join(out.split("Warnings:")[0].split())  # the notes, unwrapped
        left_out = notes.split("not shown at this width: ")[1].split(" shown without")[0]
        if "shown without their intervals at this width: " in notes:
            narrowed = notes.split("shown without their intervals at this width: ")[1]
            for head in ("normal +MiB", "ckpt +MiB"):
                assert not (head in left_out and head in narrowed), (columns, notes)
        else:
            assert columns == "10" and "ckpt +MiB" in left_out, notes


# ------------------------------------------------------------ 7. --mprof names its file


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs Linux's /proc")
def test_an_mprof_file_that_cannot_be_written_is_named(tmp_path, capsys):
    """`compare r.json --mprof /proc`: '--mprof /proc: No such file or directory', which
    file it tried to write not said (/proc itself exists). A folder that takes no file is
    refused before anything is written now (test_hardening18_outputs), in its own name; a
    write that fails after that check still names its file."""
    from ckptbench.render.mprof import export_mprof

    err = one_line_error(capsys, ["compare", str(_result(tmp_path)), "--mprof", "/proc", "-q"])
    assert (
        err == "ckptbench: error: --mprof /proc: cannot write there (No such file or directory)\n"
    )
    name = f"mprofile_{CI_CASE.key}_baseline_r0.dat"
    with pytest.raises(OSError) as exc:
        export_mprof([make_result(CI_CASE, seed=1)], "/proc", "ckptbench compare")
    assert exc.value.filename == f"/proc/{name}", exc.value


# ------------------------------------------------------------ 8. a budget past --budget's


def test_plan_never_asks_for_a_budget_that_budget_refuses(tmp_path, capsys):
    """Costs whose least budget is 2**63 B: 'the smallest budget that works is 8388608 TiB
    (9223372036854775808 B)', which --budget refuses (its limit is 2**62 bytes)."""
    costs = tmp_path / "costs.json"
    costs.write_text(json.dumps({"forward_time_s": 0.001, "taped_time_s": 0.002,
                                 "state_bytes": 2**62, "tape_bytes": 2**62}))  # fmt: skip
    argv = ["plan", "--costs", str(costs), "--steps", "20", "--budget", "1GiB", "-q"]
    code, _, err = run_cli(capsys, argv)
    assert code == 2, err
    line = next(x for x in err.splitlines() if x.startswith("ckptbench: error:"))
    assert "can be planned within a budget below 2**62 bytes (the limit of --budget)" in line
    assert "the least storage peak is 8388608 TiB (9223372036854775808 B)" in line
    assert "smallest budget that works" not in line


# ------------------------------------------------------------ 9. newer or older versions


@pytest.mark.parametrize(
    ("version", "words"),
    [
        (4, "schema_version 4 is from a newer ckptbench (this one reads 3): upgrade ckptbench"),
        (2, "schema_version 2 is from an older ckptbench (this one reads 3): read it with that"),
        (0, "schema_version 0 is not supported (this ckptbench reads 3)"),
        ("3", "schema_version '3' is not supported (this ckptbench reads 3)"),
    ],
)
def test_a_result_of_another_version_says_newer_or_older(tmp_path, capsys, version, words):
    """schema_version 4 (a newer ckptbench's) and 2 (an older one's) both read 'is not
    supported (this ckptbench reads 3)': which way to go, upgrade or not, was not said."""
    path = _result(tmp_path)
    path.write_text(json.dumps({**json.loads(path.read_text()), "schema_version": version}))
    for command in ("compare", "check"):
        assert f"{path}: {words}" in one_line_error(capsys, [command, str(path)])


def test_a_manifest_of_a_newer_version_says_upgrade(tmp_path, capsys):
    newer = _manifest_folder(tmp_path / "v2", [_cell()], {"manifest_version": 2})
    err = one_line_error(capsys, ["check", str(newer)])
    assert "manifest_version 2 is from a newer ckptbench (this one reads 1): upgrade" in err
    never = _manifest_folder(tmp_path / "v0", [_cell()], {"manifest_version": 0})
    err = one_line_error(capsys, ["check", str(never)])  # no ckptbench wrote 0: not 'older'
    assert "manifest_version 0 is not supported (this ckptbench reads 1)" in err
