"""`run --mprof`, `compare --mprof` and `profile`: exports a person opens with other tools."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from _fake import use_fake_worker
from click.testing import CliRunner

from ckptbench.cli import cli
from ckptbench.results.store import load_result

TESTS = Path(__file__).parent


@pytest.fixture
def fake(monkeypatch):
    use_fake_worker(monkeypatch)
    monkeypatch.setenv("FAKE_ALLOC", "normal:40")  # a timeline with a visible peak
    return monkeypatch


def invoke(args):
    return CliRunner().invoke(cli, args, catch_exceptions=False)


def test_run_and_compare_write_mprof_files_mprof_reads(fake, tmp_path):
    mprof = pytest.importorskip("mprof")
    out = tmp_path / "r.json"
    res = invoke(["run", "--model", "rnn", "--steps", "20", "--snaps", "4", "--rounds", "2",
                  "--out", str(out), "--mprof", str(tmp_path / "m")])  # fmt: skip
    assert res.exit_code == 0, res.output
    files = sorted((tmp_path / "m").glob("*.dat"))
    assert len(files) == 6  # 2 rounds x 3 modes, each its own file
    result = load_result(out)
    normal = next(m for m in result.modes if m.mode.value == "normal" and m.round == 1)
    name = next(f for f in files if f.name.endswith("_normal_r1.dat"))
    data = mprof.read_mprofile_file(str(name))
    assert max(data["mem_usage"]) == pytest.approx(normal.sampled_peak_rss_bytes / 2**20, 1e-5)
    # compare exports the same files elsewhere, and never replaces existing ones
    res = invoke(["compare", str(out), "--mprof", str(tmp_path / "c")])
    assert res.exit_code == 0 and len(list((tmp_path / "c").glob("*.dat"))) == 6
    res = invoke(["compare", str(out), "--mprof", str(tmp_path / "c")])
    assert res.exit_code == 2 and "exists" in res.output


@pytest.mark.slow
def test_profile_shows_the_lines_of_a_step():
    res = invoke(["profile", "--model", "lstm", "--hidden", "32", "--steps", "10",
                  "--snaps", "3", "--mode", "normal", "--json"])  # fmt: skip
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    step_rows = [r for r in doc["rows"] if r["function"] == "step"]
    assert step_rows and sum(r["increment_mib"] for r in step_rows) > 0
    assert all(r["occurrences"] >= 10 for r in step_rows if r["increment_mib"] > 0)
    res = invoke(["profile", "--model", "lstm", "--hidden", "32", "--steps", "10", "--top", "5"])
    assert res.exit_code == 0 and "memory by line" in res.output


# ------------------------------------------------------------- --quiet, --verbose, --progress


def test_progress_verbose_quiet_when_not_a_terminal(fake, tmp_path):
    base = ["run", "--model", "rnn", "--steps", "20", "--snaps", "4", "--repeats", "3",
            "--rounds", "1"]  # fmt: skip
    res = invoke([*base, "--out", str(tmp_path / "a.json"), "--progress"])
    assert res.exit_code == 0
    assert "normal: iteration 2/4" in res.output and "ETA" in res.output
    res = invoke([*base, "--out", str(tmp_path / "b.json"), "--verbose"])
    assert "exact peak" in res.output and "iteration 4/4" in res.output
    res = invoke([*base, "--out", str(tmp_path / "c.json"), "--quiet"])
    assert res.exit_code == 0
    assert not re.search(r"iteration \d+/\d+", res.output) and "saved" not in res.output
    assert "slowdown" in res.output  # the result itself is never quiet


def test_big_sweeps_ask_first_and_huge_cells_are_refused(fake, tmp_path, monkeypatch):
    config = tmp_path / "c.toml"
    config.write_text(
        "name = 'c'\n[case]\nmodel = 'rnn'\nsteps = 20\nrepeats = 3\nrounds = 1\n"
        "[[grid]]\nsnaps = [3, 4]\n"
    )
    monkeypatch.setattr("ckptbench.cli.sweep.CONFIRM_CELLS", 1)
    res = invoke(["sweep", str(config), "--out", str(tmp_path / "o")])
    assert res.exit_code == 2 and "2 cells" in res.output and "--yes" in res.output
    # a few seconds' sweep says seconds, not "0.0 h"
    assert re.search(r"2 cells, roughly [\d.]+ s\b", res.output) and " h" not in res.output
    assert not (tmp_path / "o" / "sweep.json").exists()
    res = invoke(["sweep", str(config), "--out", str(tmp_path / "o"), "--yes", "--progress"])
    assert res.exit_code == 0, res.output
    assert "iteration 4/4" in res.output
    huge = tmp_path / "h.toml"
    huge.write_text("name = 'h'\n[case]\nmodel = 'rnn'\n[[grid]]\nsteps = [1000000000]\n")
    res = invoke(["sweep", str(huge), "--out", str(tmp_path / "h")])
    assert res.exit_code == 2 and "GiB" in res.output


def test_check_quiet_lists_only_failures(fake, tmp_path):
    config = tmp_path / "c.toml"
    config.write_text(
        "name = 'c'\n[case]\nmodel = 'rnn'\nsteps = 20\nrounds = 1\n[[grid]]\nsnaps = [3]\n"
        "[expect]\nmemory_savings_min = 1.0\n"
    )
    assert invoke(["sweep", str(config), "--out", str(tmp_path / "o")]).exit_code == 0
    loud = invoke(["check", str(tmp_path / "o")])
    quiet = invoke(["check", str(tmp_path / "o"), "--quiet"])
    assert loud.exit_code == quiet.exit_code == 0
    assert "ok " in loud.output and "ok " not in quiet.output


@pytest.mark.parametrize("command", ["run", "sweep"])
@pytest.mark.parametrize("louder", ["--verbose", "--progress"])
def test_quiet_with_verbose_or_progress_is_bad_input(command, louder, capsys, tmp_path):
    """Opposite asks are one line before anything runs, not one of them silently winning."""
    from _cli import one_line_error

    config = Path(__file__).resolve().parents[1] / "configs" / "ci.toml"
    argv = {
        "run": ["run", "--model", "rnn", "--steps", "10", "--out", str(tmp_path / "r.json")],
        "sweep": ["sweep", str(config), "--out", str(tmp_path / "o")],
    }[command]
    err = one_line_error(capsys, [*argv, "--quiet", louder])
    assert not any(tmp_path.iterdir())  # nothing measured, nothing written
    assert f"--quiet and {louder} ask for opposite things: give one" in err
