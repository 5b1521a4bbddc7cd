"""The twenty-fifth audit, of the third session of 2026-11-30: a result whose iteration took
less than the clock's nanosecond (1e-300 s) ended compare and check in an OverflowError
traceback; ``check --summary`` after a record written with CRLF line ends (PowerShell's, a
Windows runner's step summary) that closed its code fence "closed" it again, opening a fence
that showed the new record as code; a file starting with a byte-order mark was not read to
its first record (a cut ``<details>`` left open, a BOM alone said to be a cut line); a
stderr open for reading only (what a shell script's ``2>&-`` hands on) made every command
exit 1. Synthetic results; nothing here is timed."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from _cli import one_line_error, run_cli
from _synthetic import CI_CASE, make_result

from ckptbench.cli.appending import append_text
from ckptbench.results.schema import save_result

HEADING = "### ckptbench check"
COSTS = {"forward_time_s": 0.001, "taped_time_s": 0.003, "state_bytes": 4096, "tape_bytes": 65536}


@pytest.fixture
def result(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "r.json"
    save_result(make_result(CI_CASE, seed=1), path)
    return path


# ----------------------------------------------- (1) an iteration under the clock's tick


@pytest.mark.parametrize("took", [1e-300, 5e-324, 1e-10])
@pytest.mark.parametrize("command", ["compare", "check"])
def test_an_iteration_under_a_nanosecond_is_one_line(capsys, result, took, command):
    """1e-300 s made a slowdown of about 1e300 and an OverflowError in its interval (exit 1,
    a traceback); no clock measures under its nanosecond, so the file is malformed."""
    doc = json.loads(result.read_text())
    doc["modes"][1]["iterations"][0]["wall_time_s"] = took
    result.write_text(json.dumps(doc))
    err = one_line_error(capsys, [command, str(result)])
    assert "modes[1].iterations[0].wall_time_s is" in err and "below the clock tick" in err


def test_a_nanosecond_is_read(capsys, result):
    doc = json.loads(result.read_text())
    doc["modes"][1]["iterations"][0]["wall_time_s"] = 1e-9
    result.write_text(json.dumps(doc))
    code, _, err = run_cli(capsys, ["compare", str(result)])
    assert code == 0 and "Traceback" not in err


# ------------------------------------------------------ (2) CRLF line ends, a leading BOM

RECORD = f"{HEADING}: PASSED\n\n<details><summary>All checks</summary>\n\nrows\n\n</details>\n\n"


def test_crlf_record_with_a_closed_fence_is_left_alone(tmp_path):
    """Each line of a CRLF fence ended in '\\r', so its closing line did not close it: the
    append added a fence, which opened one, and GitHub showed the new record as code."""
    summary = tmp_path / "summary.md"
    old = f"{HEADING}: y\n\n```\ncode\n```\n\n".replace("\n", "\r\n").encode()
    summary.write_bytes(old)
    assert not append_text(summary, f"{HEADING}: next\n", heading=HEADING)
    assert summary.read_bytes() == old + f"{HEADING}: next\n".encode()


def test_crlf_record_cut_inside_details_is_closed(tmp_path):
    summary = tmp_path / "summary.md"
    cut = RECORD[: RECORD.index("rows")].replace("\n", "\r\n")
    summary.write_bytes(cut.encode())
    tear = append_text(summary, f"{HEADING}: next\n", heading=HEADING)
    assert tear.details == 1 and not tear.fence


def test_bom_then_a_record_cut_inside_details_is_closed(tmp_path):
    """The first record after a byte-order mark was not found (the heading did not start
    the file): its open <details> stayed open and folded the next record into it."""
    summary = tmp_path / "summary.md"
    summary.write_bytes("\ufeff".encode() + RECORD[: RECORD.index("rows")].encode())
    tear = append_text(summary, f"{HEADING}: next\n", heading=HEADING)
    assert tear.details == 1
    assert "</details>" in summary.read_text(encoding="utf-8-sig")


def test_a_bom_alone_is_no_cut_line(tmp_path):
    """A file holding only a byte-order mark was said to end in a line cut short."""
    summary = tmp_path / "summary.md"
    summary.write_bytes("\ufeff".encode())
    assert not append_text(summary, f"{HEADING}: next\n", heading=HEADING)
    assert summary.read_bytes() == "\ufeff".encode() + f"{HEADING}: next\n".encode()


# ------------------------------------------- (3) stderr open for reading only (2>&- in a script)


def _env() -> dict[str, str]:
    """This environment; its PYTHONPATH names the ckptbench under test."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}


@pytest.mark.parametrize(
    ("argv", "status"),
    [
        (["schedule", "--steps", "10", "--snaps", "3"], 0),
        (["run", "--steps", "0"], 2),
        (["compare", "missing.json"], 2),
        (["plan", "--steps", "10", "--costs", "c.json", "--budget", "1MiB"], 0),
    ],
)
def test_stderr_open_read_only_is_taken_as_closed(tmp_path, argv, status):
    """A shell script started with ``2>&-`` (a wrapper of the console script) leaves its own
    file, open for reading, on descriptor 2 of what it runs: every line to stderr raised
    EBADF, and every command exited 1, a refusal too, with a plan's output lost."""
    script = tmp_path / "script.sh"
    script.write_text("#!/bin/sh\n")
    (tmp_path / "c.json").write_text(json.dumps(COSTS))  # plan warns: not lstm's state
    with open(script, "rb") as read_only:
        done = subprocess.run(
            [sys.executable, "-m", "ckptbench", *argv], cwd=tmp_path, env=_env(),
            stdout=subprocess.PIPE, stderr=read_only, check=False,
        )  # fmt: skip
    assert done.returncode == status
    assert (b"actions" in done.stdout or b"advances" in done.stdout) == (status == 0)
    assert script.read_text() == "#!/bin/sh\n"


# --------------------------------------- (4) sweep --dry-run --out through a link to nowhere

NOWHERE = "is a symbolic link that leads nowhere"


@pytest.mark.parametrize("out", ["loop", "loop/", "loop/sub"])
def test_dry_run_refuses_an_out_the_sweep_refuses(capsys, tmp_path, monkeypatch, out):
    """``sweep --out loop`` (a link to itself) is refused; its dry run planned '1 to measure
    -> loop' and exited 0."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "loop").symlink_to("loop")
    (tmp_path / "s.toml").write_text(
        'name = "nowhere"\n[case]\nrounds = 1\n[grid]\nmodel = ["rnn"]\nsteps = [10]\n'
        'snaps = [3]\nstrategy = ["revolve"]\n'
    )
    dry = one_line_error(capsys, ["sweep", "s.toml", "--out", out, "--dry-run"])
    assert NOWHERE in dry and f"--out {out}:" in dry


# ------------------------------------------- (5) more iterations than the case plans


@pytest.mark.parametrize(("field", "times"), [("iterations", 10_001), ("iterations", 2)])
def test_iterations_past_the_planned_repeats_are_malformed(capsys, result, field, times):
    """A round of 10 001 iterations per mode (past the bound of 10 000, and past the
    case's repeats) was read as measured: a worker runs ``repeats`` iterations, no more."""
    doc = json.loads(result.read_text())
    for mode in doc["modes"]:
        mode[field] = mode["iterations"] * times
    result.write_text(json.dumps(doc))
    for command in ("compare", "check"):
        err = one_line_error(capsys, [command, str(result)])
        assert f"modes[0].{field} holds {len(doc['modes'][0][field]):,} iterations" in err


def test_warmup_past_the_planned_warmup_is_malformed(capsys, result):
    doc = json.loads(result.read_text())
    doc["case"]["warmup"] = 1
    for mode in doc["modes"]:
        mode["warmup"] = mode["iterations"][:2] * 2
    result.write_text(json.dumps(doc))
    err = one_line_error(capsys, ["compare", str(result)])
    assert "warmup holds 4 iterations where case.warmup plans 1" in err
