"""A sixth audit (2026-11-29 evening): files at the limits of the file system, and output
errors. Each test failed on the code before its fix."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from _synthetic import CI_CASE, make_result

from ckptbench.results.schema import save_or_beside, write_atomic
from ckptbench.results.store import load_result


def _tiny_run(out: Path, *extra: str) -> list[str]:
    """`run` of a tiny LSTM, one round of one iteration, into ``out``."""
    return ["run", "--model", "lstm", "--steps", "12", "--snaps", "3", "--hidden", "4",
            "--batch", "2", "--rounds", "1", "--repeats", "1", *extra,
            "--out", str(out)]  # fmt: skip


def test_a_name_near_the_file_systems_limit_is_written_and_its_fallback_fits(tmp_path: Path):
    """`run --out` with a 249-byte name passed every check (its lock file's name fits), then
    lost the measurement at the first save: the temp name is the target's plus 14 bytes,
    and the fallback name beside it longer still."""
    target = tmp_path / ("x" * 244 + ".json")
    write_atomic(target, "{}")
    assert target.read_text() == "{}"
    assert sorted(os.listdir(tmp_path)) == [target.name]  # no temp file left behind
    result = make_result(CI_CASE, seed=1)
    where, why = save_or_beside(result, target, replace=False)  # the name is taken
    assert why is not None and where != target and where.parent == tmp_path
    assert len(where.name.encode()) <= 255 and load_result(where).case == result.case


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_stdout_on_a_full_disk_is_one_line_and_its_own_exit_status():
    """`ckptbench schedule ... > /dev/full` (and every other command) ended in a traceback
    of OSError ENOSPC with exit 1, a failure's status."""
    with open("/dev/full", "w") as full:
        proc = subprocess.run(
            [sys.executable, "-m", "ckptbench", "schedule", "--steps", "20", "--snaps", "4"],
            stdout=full, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
    assert proc.returncode == 74, proc.stderr
    assert proc.stderr.strip().splitlines() == [
        "ckptbench: error: cannot write the output (No space left on device)"
    ]


def test_mprof_files_of_every_round_precision_may_add_are_checked_before_measuring(
    tmp_path: Path, monkeypatch
):
    """--mprof was checked for --rounds only: with --precision up to --max-rounds 3, a
    round-3 timeline file in the folder was found after the whole measurement, which then
    exited 2 ("bad input, found before anything is measured") with a partial set written."""
    from click.testing import CliRunner

    from ckptbench.cli import cli
    from ckptbench.render.mprof import mprof_name
    from ckptbench.results.schema import Case

    monkeypatch.chdir(tmp_path)
    case = Case(model="lstm", steps=20, snaps=20, hidden=8, batch=2, rounds=2)
    (tmp_path / "m").mkdir()
    precious = tmp_path / "m" / mprof_name(case.key, "baseline", 2)
    precious.write_text("precious\n")
    args = ["run", "--model", "lstm", "--steps", "20", "--hidden", "8", "--batch", "2",
            "--rounds", "2", "--precision", "1%", "--max-rounds", "3", "--out", "r.json",
            "--mprof", "m"]  # fmt: skip
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 2 and "exists" in res.output, res.output
    assert precious.read_text() == "precious\n" and not (tmp_path / "r.json").exists()


def test_a_sweep_not_confirmed_leaves_no_empty_out_folder(tmp_path: Path, monkeypatch):
    """300 cells without --yes (stdin not a terminal): exit 2, "pass --yes", and the --out
    folder it had already made stayed behind, empty."""
    from click.testing import CliRunner

    from ckptbench.cli import cli

    monkeypatch.chdir(tmp_path)
    (tmp_path / "many.toml").write_text(
        'name = "many"\n[case]\nmodel = "lstm"\nsteps = 20\nhidden = 8\nbatch = 2\n'
        "[[grid]]\nseed = [" + ", ".join(map(str, range(300))) + "]\n"
    )
    res = CliRunner().invoke(cli, ["sweep", "many.toml", "--out", "o"])
    assert res.exit_code == 2 and "--yes" in res.output, res.output
    assert not (tmp_path / "o").exists()
    res = CliRunner().invoke(cli, ["sweep", "many.toml", "--out", "new/parent/o"])
    assert res.exit_code == 2 and not (tmp_path / "new").exists()  # its parents too
    (tmp_path / "kept").mkdir()  # a folder that was there before is left as it was
    res = CliRunner().invoke(cli, ["sweep", "many.toml", "--out", "kept"])
    assert res.exit_code == 2 and (tmp_path / "kept").is_dir()


def test_a_save_that_fails_midway_leaves_no_partial_result_at_out(tmp_path: Path, monkeypatch):
    """A disk that filled up after the first mode: the result was saved in the temporary
    folder (said so, exit 0), but --out kept the first save, a valid result of one mode
    whose summary read ok, which `compare` showed as ok."""
    from click.testing import CliRunner

    from ckptbench.cli import cli
    from ckptbench.results import schema

    monkeypatch.chdir(tmp_path)
    out = tmp_path / "r.json"
    real = schema.save_result
    calls = []

    def full_after_one(result, path, **kw):
        if Path(path) == out:
            calls.append(path)
            if len(calls) > 1:
                raise OSError(28, "No space left on device")
        return real(result, path, **kw)

    monkeypatch.setattr(schema, "save_result", full_after_one)
    args = _tiny_run(out, "-q")
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 0, res.output
    assert "partial result saved there earlier is removed" in res.output
    assert len(calls) >= 2 and not out.exists()
    saved = sorted(tmp_path.glob("r.*.json"))
    assert saved and {m.mode.value for m in load_result(saved[0]).modes} == {
        "baseline",
        "normal",
        "checkpointed",
    }


def test_a_daemon_a_plugin_starts_with_setsid_dies_with_its_worker(tmp_path: Path):
    """A plug-in that double-forks and calls setsid left its grandchildren running (PPID 1)
    after the run: they had left the worker's process group, which was all stop_worker
    killed. Each worker's environment now carries a token its descendants inherit."""
    import psutil

    from ckptbench.measure.launch import start_worker, stop_worker
    from ckptbench.results.schema import Case

    pid_file = tmp_path / "daemon.pid"
    script = (
        "import os, sys, time\n"
        "sys.stdin.read()\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        f"        open({str(pid_file)!r}, 'w').write(str(os.getpid()))\n"
        "        time.sleep(600)\n"
        "    os._exit(0)\n"
        "time.sleep(600)\n"
    )
    case = Case(model="lstm", steps=4, snaps=2)
    proc, channel = start_worker(case, {}, [sys.executable, "-c", script], None, None)
    try:
        while not pid_file.exists() or not pid_file.read_text():
            proc.poll()
        daemon = psutil.Process(int(pid_file.read_text()))
        assert daemon.status() != psutil.STATUS_ZOMBIE
        assert os.getpgid(daemon.pid) != proc.pid  # it left the worker's group
    finally:
        stop_worker(proc)
        channel.close()
    with pytest.raises(psutil.NoSuchProcess):
        daemon.wait(600)  # a guard against a hang, not a time limit: it is gone at once
        daemon.status()


def test_a_file_saved_mid_run_reads_unfinished_until_the_run_ends(tmp_path: Path, monkeypatch):
    """A run killed outright (SIGKILL) after its first mode left a file whose summary read
    ok, which `compare` showed as ok (only `check` failed it, for missing modes)."""
    from click.testing import CliRunner

    from ckptbench.cli import cli
    from ckptbench.measure.recording import UNFINISHED
    from ckptbench.results import schema

    monkeypatch.chdir(tmp_path)
    out = tmp_path / "r.json"
    real, saved = schema.save_result, []

    def keep(result, path, **kw):
        saved.append(result)
        return real(result, path, **kw)

    monkeypatch.setattr(schema, "save_result", keep)
    args = _tiny_run(out, "-q")
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 0, res.output
    first, last = saved[0], load_result(out)
    assert [m.status.value for m in first.modes] == ["ok", "interrupted"]  # the next mode
    assert first.environment["interrupted"] == {"by": UNFINISHED, "round": 1}
    assert not first.summary.ok and first.rounds_complete == 0
    assert first.interruption == "interrupted in round 1"
    assert "interrupted" not in last.environment and last.summary.ok
    assert [m.status.value for m in last.modes] == ["ok"] * 3
    between = saved[-2]  # after the round's last mode, before the run's last save
    assert between.interruption == "interrupted before round 2" and between.rounds_complete == 1


def test_force_keeps_the_result_it_replaces_until_the_new_run_ends(tmp_path: Path, monkeypatch):
    """`run --force` over a complete result replaced it at its first save: an interrupted
    rerun left a result of no complete round, and the complete one was gone."""
    from click.testing import CliRunner

    from ckptbench.cli import cli
    from ckptbench.measure import launch
    from ckptbench.results.schema import save_result

    monkeypatch.chdir(tmp_path)
    out = tmp_path / "r.json"
    old = make_result(CI_CASE, seed=1)
    save_result(old, out)
    real, calls = launch.run_mode, []

    def stopped_at_the_second_mode(*a, **kw):
        calls.append(1)
        if len(calls) == 2:
            raise launch.Interrupted(2)
        return real(*a, **kw)

    monkeypatch.setattr("ckptbench.measure.runner.run_mode", stopped_at_the_second_mode)
    args = _tiny_run(out, "--force")
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 130, res.output
    (kept,) = tmp_path.glob("r.json.*.replaced")
    assert "the result it was replacing is kept as" in res.output and kept.name in res.output
    assert load_result(kept).case == old.case and load_result(kept).summary.ok
    assert not load_result(out).summary.ok  # the rerun's partial file
    monkeypatch.setattr("ckptbench.measure.runner.run_mode", real)
    res = CliRunner().invoke(cli, args)  # a rerun that ends replaces it, as --force asks
    assert res.exit_code == 0, res.output
    assert sorted(p.name for p in tmp_path.glob("r.json*")) == ["r.json", kept.name]


def test_ctrl_c_while_the_command_line_is_imported_is_one_line_and_130(monkeypatch, capsys):
    """A Ctrl-C in the first 0.3 s (click, rich and the commands being imported) printed a
    KeyboardInterrupt traceback."""
    from ckptbench import entry

    def interrupted(name):
        raise KeyboardInterrupt

    monkeypatch.setattr(entry.importlib, "import_module", interrupted)
    before = signal.getsignal(signal.SIGINT)
    try:  # the console script ignores SIGINT once its status is decided: restored here
        with pytest.raises(SystemExit) as stop:
            entry.main()
    finally:
        signal.signal(signal.SIGINT, before)
    assert stop.value.code == 130
    assert capsys.readouterr().err == "ckptbench: interrupted while starting\n"


def test_a_regression_review_of_the_evenings_changes():
    """What a review of this evening's changes found (each failed before its fix):
    huge interval ends crashed compare and check (Decimal's 28 digits); one iteration a
    side read "no change" in compare; three equal times gave a point interval 'from the
    data'."""
    from ckptbench.analysis.intervals import ratio_estimate
    from ckptbench.analysis.stats import time_change
    from ckptbench.render.format import fmt_interval
    from ckptbench.results.units import interval_text

    tc = time_change([[5e-4], [0.15]], [[5e-4]])  # 2 processes against 1: t with 1 df
    assert fmt_interval(tc.low, tc.high, 3).startswith("[")
    assert interval_text(9.8e-24, 1.0181e21, 3) == ("9.8e-24", "1.1e+21")
    assert interval_text(1e300, 9.99e307, 2) == ("1.0e+300", "1.0e+308")
    assert time_change([[1.0]], [[1.9]], tolerance=0.1).verdict == "cannot tell"
    assert not time_change([[1.0]], [[1.9]], tolerance=0.1).significant
    est = ratio_estimate([([0.01, 0.01], [0.012])])
    assert not est.interval_from_data


def test_mprof_of_a_one_round_run_precision_extends_is_checked_for_its_round_names(
    tmp_path: Path, monkeypatch
):
    """`--rounds 1 --precision ... --max-rounds 2`: the result's files are named _r0, _r1
    once a second round runs, but the check predicted NAME.dat and NAME-2.dat."""
    from click.testing import CliRunner

    from ckptbench.cli import cli
    from ckptbench.render.mprof import mprof_name
    from ckptbench.results.schema import Case

    monkeypatch.chdir(tmp_path)
    case = Case(model="lstm", steps=20, snaps=20, hidden=8, batch=2, rounds=1)
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / mprof_name(case.key, "normal", 1)).write_text("precious\n")
    args = ["run", "--model", "lstm", "--steps", "20", "--hidden", "8", "--batch", "2",
            "--rounds", "1", "--precision", "1%", "--max-rounds", "2", "--out", "r.json",
            "--mprof", "m"]  # fmt: skip
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 2 and "exists" in res.output and not (tmp_path / "r.json").exists()


def test_force_puts_back_the_result_it_replaces_when_its_first_save_fails(
    tmp_path: Path, monkeypatch
):
    """The first save failing (a full disk): the new result went elsewhere, and the result
    --force was to replace sat renamed aside, --out empty."""
    from click.testing import CliRunner

    from ckptbench.cli import cli
    from ckptbench.results import schema

    monkeypatch.chdir(tmp_path)
    out = tmp_path / ("y" * 230 + ".json")  # its aside name is cut to fit too
    schema.save_result(make_result(CI_CASE, seed=1), out)
    real = schema.save_result

    def full_at_out(result, path, **kw):
        if Path(path) == out:
            raise OSError(28, "No space left on device")
        return real(result, path, **kw)

    monkeypatch.setattr(schema, "save_result", full_at_out)
    args = _tiny_run(out, "--force", "-q")
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 0, res.output
    assert "the result it was to replace is left in place" in res.output
    assert load_result(out).case == CI_CASE and not list(tmp_path.glob("*.replaced"))
