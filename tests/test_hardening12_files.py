"""Fixes of the twelfth audit, files: side outputs know a result or manifest whatever the
order of its keys; the reader refuses what compare could not tabulate; errors stay on one
line; ``--force`` covers ``--mprof``'s own timelines."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import pytest
from _synthetic import CI_CASE, make_result
from click.testing import CliRunner

from ckptbench.cli import cli
from ckptbench.results.schema import save_result


def _sorted_copy(src: Path, dst: Path) -> bytes:
    """``dst``: the JSON document of ``src`` with its keys sorted (``jq -S``); its bytes."""
    data = json.dumps(json.loads(src.read_text()), sort_keys=True, indent=2).encode()
    dst.write_bytes(data)
    return data


def _result(tmp_path: Path, name: str = "a.json", seed: int = 0) -> Path:
    path = tmp_path / name
    save_result(make_result(CI_CASE, seed=seed), path)
    return path


def _sorted_manifest(folder: Path) -> bytes:
    folder.mkdir()
    doc = {"kind": "ckptbench-sweep", "manifest_version": 1, "config": {}, "cells": []}
    data = json.dumps(doc, sort_keys=True).encode()
    (folder / "sweep.json").write_bytes(data)
    return data


@pytest.mark.parametrize("target", ["result", "manifest"])
def test_no_side_output_touches_a_key_sorted_result_or_manifest(
    tmp_path: Path, monkeypatch, target: str
):
    src = _result(tmp_path)
    if target == "result":
        path = tmp_path / "sorted.json"
        before = _sorted_copy(_result(tmp_path, "b.json", seed=1), path)
    else:
        before = _sorted_manifest(tmp_path / "sw")
        path = tmp_path / "sw" / "sweep.json"
    runner = CliRunner()
    for args, env in (
        (["check", str(src), "--summary", str(path)], {}),
        (["check", str(src)], {"GITHUB_STEP_SUMMARY": str(path)}),
        (["check", str(src), "--junit", str(path), "--force"], {}),
        (["compare", str(src), "-o", str(path), "--force"], {}),
    ):
        res = runner.invoke(cli, args, env=env)
        assert res.exit_code == 2, (args, res.output)
        assert "a side output never replaces or appends to one" in res.output
        assert path.read_bytes() == before, args


def test_run_force_replaces_a_key_sorted_result_and_never_a_key_sorted_manifest(tmp_path: Path):
    from ckptbench.results.store import StoreError, check_output

    path = tmp_path / "sorted.json"
    _sorted_copy(_result(tmp_path), path)
    check_output(path, "--out", replace=True, result=True)  # a result: --force replaces it
    _sorted_manifest(tmp_path / "sw")
    with pytest.raises(StoreError, match="is a sweep manifest; a result never replaces one"):
        check_output(tmp_path / "sw" / "sweep.json", "--out", replace=True, result=True)


def _edited(tmp_path: Path, edit, name: str = "edited.json") -> Path:
    """A result saved, its document changed by ``edit`` (in place), and written back."""
    path = _result(tmp_path, name)
    doc = json.loads(path.read_text())
    edit(doc)
    path.write_text(json.dumps(doc))
    return path


def _peak(doc, value=2**63 - 1):
    doc["modes"][0]["iterations"][0]["peak_rss_bytes"] = value


def _counter(doc, value=2**63 - 1):
    doc["modes"][2]["counters"].update(steps_advanced=value, steps_taped=value)


def _steps(doc, value=10**15):
    doc["case"].update(steps=value, snaps=1)


@pytest.mark.parametrize(
    ("edit", "said"),
    [
        (_peak, "peak_rss_bytes must be below 2**56 bytes"),
        (_counter, "counters.steps_advanced must be below 2**56"),
        (_steps, "steps must be >= 1 and at most 2**31"),
        (functools.partial(_steps, value=-5), "steps must be >= 1 and at most 2**31"),
    ],
)
def test_compare_and_check_refuse_alike_what_no_table_could_hold(tmp_path: Path, edit, said):
    # compare raised OverflowError (2**63 - 1 bytes) or TypeError (10**15 steps: Revolve's
    # optimal count beyond int64) with a traceback, exit 1; check passed the same file
    path = _edited(tmp_path, edit)
    for command in (["compare"], ["compare", "--format", "csv"], ["check"]):
        res = CliRunner().invoke(cli, [*command, str(path)])
        assert res.exit_code == 2, (command, res.output)
        assert said in res.output and res.output.count("\n") == 1, res.output


def test_a_result_at_the_bounds_still_compares_and_one_past_them_does_not(tmp_path: Path):
    from ckptbench.results.schema import Case, CaseError

    # the largest peak at an iteration of its own, among MiBs: its interval is wide
    top = _edited(tmp_path, lambda d: (_peak(d, 2**56 - 1), _counter(d, 2**56 - 1),
                                       _steps(d, 2**31)))  # fmt: skip
    for fmt in ("table", "csv", "json"):
        res = CliRunner().invoke(cli, ["compare", "--format", fmt, str(top)])
        assert res.exit_code == 0, res.output
    for fields in ({"steps": 2**31 + 1}, {"memory_limit_bytes": 2**62}):  # as run takes them
        with pytest.raises(CaseError, match=r"2\*\*3?[16]"):
            Case(model="rnn", **fields)
    past = _edited(tmp_path, lambda d: _peak(d, 2**56), "past.json")
    assert CliRunner().invoke(cli, ["compare", str(past)]).exit_code == 2


def test_a_model_with_a_newline_is_refused_as_a_host_is(tmp_path: Path):
    # it was accepted, and split compare's table rows and markdown rows in two
    path = _edited(tmp_path, lambda d: d["case"].update(model="a|b\nc"))
    for command in ("compare", "check"):
        res = CliRunner().invoke(cli, [command, "--format", "markdown", str(path)])
        assert res.exit_code == 2, res.output
        assert "model must be printable text on one line" in res.output
        assert res.output.count("\n") == 1, res.output


def test_an_error_naming_a_file_with_a_newline_stays_on_one_line(tmp_path: Path):
    odd = tmp_path / "x\nFAKE LINE.json"
    odd.write_text("{")
    res = CliRunner().invoke(cli, ["compare", str(odd)])
    assert res.exit_code == 2
    assert res.output.count("\n") == 1 and "x\\nFAKE LINE.json: not JSON" in res.output
    assert not any(line.startswith("FAKE LINE") for line in res.output.splitlines())


def test_a_full_disk_under_a_name_with_a_newline_is_said_on_one_line(tmp_path, monkeypatch):
    import errno

    from ckptbench import render

    def full(*_args, **_kw):
        raise OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "x\nFAKE"))

    monkeypatch.setattr(render, "render", full)
    res = CliRunner().invoke(cli, ["compare", str(_result(tmp_path))])
    assert res.exit_code == 74 and "x\\nFAKE (No space left on device)" in res.output
    assert res.output.count("\n") == 1, res.output


def test_compare_force_replaces_its_own_mprof_timelines_and_nothing_else(tmp_path: Path):
    # a folder used before was refused with --force too ("...exists (ckptbench never
    # replaces a file unless told to)"), after -o's and --plots' checks had passed
    src, folder = _result(tmp_path), tmp_path / "mp"
    runner = CliRunner()
    assert runner.invoke(cli, ["compare", str(src), "--mprof", str(folder)]).exit_code == 0
    timelines = sorted(folder.glob("mprofile_*.dat"))
    assert timelines
    report = tmp_path / "report.md"
    again = ["compare", str(src), "--mprof", str(folder), "-o", str(report)]
    res = runner.invoke(cli, again)
    assert res.exit_code == 2 and "pass --force to replace ckptbench's timelines" in res.output
    assert not report.exists()  # refused before anything was written
    inodes = {p: p.stat().st_ino for p in timelines}
    res = runner.invoke(cli, [*again, "--force"])
    assert res.exit_code == 0, res.output
    assert all(p.stat().st_ino != inode for p, inode in inodes.items())  # written anew
    timelines[0].write_text("my own notes\n")  # not a timeline ckptbench wrote
    res = runner.invoke(cli, [*again, "--force"])
    assert res.exit_code == 2 and "not an mprof timeline ckptbench wrote" in res.output
    assert timelines[0].read_text() == "my own notes\n"


def test_run_force_covers_mprof_timelines_as_compare_does(tmp_path: Path):
    from ckptbench.cli.options import InputError
    from ckptbench.cli.outputs import check_mprof_dir
    from ckptbench.render.mprof import mprof_name
    from ckptbench.results.schema import MODES

    case = CI_CASE.with_(rounds=1)
    folder = tmp_path / "mp"
    folder.mkdir()
    own = folder / mprof_name(case.key, "baseline")
    own.write_text("CMDLINE ckptbench run --mprof mp\nMEM 1.000000 1795939395.1369\n")
    with pytest.raises(InputError, match="pass --force"):
        check_mprof_dir(folder, case, MODES)
    check_mprof_dir(folder, case, MODES, force=True)  # its own timeline: replaced
    own.write_text("MEM 1 2\n")  # not one ckptbench wrote
    with pytest.raises(InputError, match="not an mprof timeline ckptbench wrote"):
        check_mprof_dir(folder, case, MODES, force=True)


@pytest.mark.parametrize("steps", [0, -5, 2**31 + 1, 3_000_000_000, 10**20])
def test_a_case_says_the_real_bound_on_its_steps(steps: int):
    """10**20 steps (and -5 in a result file) said 'steps must be >= 1 and < 2**63' while
    3,000,000,000 said 'at most 2**31', the real bound: one line for every side of it."""
    from ckptbench.results.schema import Case, CaseError

    with pytest.raises(CaseError) as err:
        Case(model="rnn", steps=steps, snaps=1)
    assert str(err.value).startswith("steps must be >= 1 and at most 2**31 (2,147,483,648")
    assert "2**63" not in str(err.value)
    res = CliRunner().invoke(cli, ["run", "--model", "rnn", "--steps", str(steps), "-q"])
    assert res.exit_code == 2 and "2**63" not in res.output, res.output
