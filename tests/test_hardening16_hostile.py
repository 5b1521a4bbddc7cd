"""The sixteenth audit, a hostile user's: a costs file whose bytes add up past int64 got a
false least budget (a negative peak, "fits in 1 GiB"); a sweep manifest of a newer layout
was read as this one; ``--out`` on a full disk said "cannot write the output" (exit 74)
without naming it; ``schedule --steps`` of thousands of digits and a ``COLUMNS`` or
``LINES`` of '²' ended in a traceback or "invalid literal for int()"; a Latin-1 or ASCII
stdout ended run and compare in UnicodeEncodeError. Nothing here measures."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from _cli import one_line_error, run_cli
from _synthetic import CI_CASE, make_result

from ckptbench.results.schema import save_result


@pytest.fixture(autouse=True)
def _no_step_summary(monkeypatch):
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)


# ------------------------------------------------------------ 1. costs past int64


def test_least_storage_adds_bytes_past_int64_exactly():
    from ckptbench.schedules.optimal.dp import least_storage

    big = np.full(20, 2**62, dtype=np.int64)
    assert least_storage(big, big) == 2**63  # x_0 and one tape; int64 wrapped it negative


def test_plan_names_the_true_least_budget_of_costs_past_int64(tmp_path, capsys):
    """20 steps of 1e18-byte states and tapes need 2e18 B; the plan said they fit in 1 GiB
    ('the least storage peak is -8446744073709551616 B')."""
    costs = tmp_path / "costs.json"
    costs.write_text(json.dumps({"forward_time_s": 0.001, "taped_time_s": 0.002,
                                 "state_bytes": 10**18, "tape_bytes": 10**18}))  # fmt: skip
    argv = ["plan", "--costs", str(costs), "--steps", "20", "--budget", "1GiB", "-q"]
    code, _, err = run_cli(capsys, argv)
    assert code == 2, err
    line = next(x for x in err.splitlines() if x.startswith("ckptbench: error:"))
    assert "no schedule of 20 steps fits" in line and "(2000000000000000000 B)" in line
    assert " -" not in line and "fits in 1.00 GiB" not in line


# ------------------------------------------------------------ 2. a newer manifest


def _sweep_folder(folder: Path, version: int) -> Path:
    from ckptbench.results.store import write_manifest

    folder.mkdir()
    name = f"{CI_CASE.key}.json"
    save_result(make_result(CI_CASE), folder / name)
    cell = {"key": CI_CASE.key, "file": name, "state": "measured", "ok": True,
            "case": CI_CASE.to_dict()}  # fmt: skip
    config = {"name": "s", "expect": {"memory_savings_min": 1.0}, "expect_by_strategy": {}}
    path = write_manifest(folder, {"config": config, "cells": [cell]})
    doc = json.loads(path.read_text())
    path.write_text(json.dumps({**doc, "manifest_version": version}))
    return folder


def test_a_manifest_of_another_version_is_refused(tmp_path, capsys):
    """A manifest_version 2 (a newer ckptbench's layout) was read as 1 and check passed."""
    code, out, err = run_cli(capsys, ["check", str(_sweep_folder(tmp_path / "v1", 1))])
    assert code == 0, out + err
    folder = _sweep_folder(tmp_path / "v2", 2)
    for command in ("check", "compare"):
        err = one_line_error(capsys, [command, str(folder)])
        assert "manifest_version 2 is from a newer ckptbench (this one reads 1): upgrade" in err


# ------------------------------------------------------------ 3. a full disk at --out


def test_out_on_a_full_disk_is_one_line_naming_it(tmp_path, capsys, monkeypatch):
    """The lock file beside --out could not be written: 'cannot write the output (No space
    left on device)', exit 74, before anything was measured."""

    def full(fd, data, offset):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "pwrite", full)
    out = tmp_path / "x.json"
    argv = ["run", "--steps", "20", "--snaps", "3", "--rounds", "1", "--out", str(out)]
    err = one_line_error(capsys, argv)
    assert f"--out {out}: cannot write .x.json.lock (No space left on device)" in err
    assert list(tmp_path.iterdir()) == []


# ------------------------------------------------------------ 4. odd numbers in the environment


def test_schedule_refuses_steps_whose_counts_would_not_print(capsys):
    code, out, err = run_cli(capsys, ["schedule", "--steps", str(10**1000), "--snaps", "1"])
    assert code == 0 and "(closed form)" in out, err
    err = one_line_error(capsys, ["schedule", "--steps", str(10**2500), "--snaps", "1"])
    assert "--steps is over 10**1000" in err


@pytest.mark.parametrize("name", ["COLUMNS", "LINES"])
def test_a_superscript_width_in_the_environment_is_ignored(capsys, monkeypatch, name):
    """'²' is a digit to isdigit() and not to int(): schedule gave a ValueError traceback."""
    monkeypatch.setenv(name, "²")
    code, out, err = run_cli(capsys, ["schedule", "--steps", "10", "--snaps", "3"])
    assert code == 0 and "revolve schedule: 10 steps, 3 snaps" in out, err


def test_a_latin1_stdout_shows_what_it_cannot_encode_as_question_marks(tmp_path):
    """A host name with an em dash under PYTHONIOENCODING=latin-1: UnicodeEncodeError and
    exit 1 (run's headline '—' did the same under ASCII after measuring)."""
    save_result(make_result(CI_CASE, host="hôte—1"), tmp_path / "r.json")
    env = {**os.environ, "PYTHONIOENCODING": "latin-1", "COLUMNS": "250"}
    proc = subprocess.run(
        [sys.executable, "-m", "ckptbench", "compare", "r.json"],
        cwd=tmp_path, capture_output=True, env=env, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0 and b"Traceback" not in proc.stderr, proc.stderr
    assert "hôte?1".encode("latin-1") in proc.stdout
