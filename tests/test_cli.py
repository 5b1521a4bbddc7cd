"""The command line: CliRunner with a fake worker, error paths, and real end-to-end runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from click.testing import CliRunner

from ckptbench.analysis import mode_peak_bytes
from ckptbench.analysis.intervals import slowdown_estimate
from ckptbench.cli import cli, main
from ckptbench.cli.values import parse_bytes, parse_seconds
from ckptbench.results.schema import SCHEMA_VERSION, Mode, Status
from ckptbench.results.store import load_result
from ckptbench.schedules import optimal_forward_steps


def invoke(args):
    return CliRunner().invoke(cli, args, catch_exceptions=False)


def one_line_error(capsys, argv) -> str:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert "Traceback" not in err
    return err


def test_run_with_fake_worker_saves_recomputable_ratios(fake, tmp_path):
    out = tmp_path / "r.json"
    res = invoke(["run", "--model", "rnn", "--steps", "100", "--snaps", "10", "--out", str(out),
                  "--rounds", "1", "--repeats", "3"])  # fmt: skip
    assert res.exit_code == 0, res.output
    assert "slowdown 1.10x" in res.output  # 0.055 / 0.050
    result = load_result(out)
    s = result.summary.as_dict()
    peaks = {m.mode: mode_peak_bytes(m) for m in result.modes}
    normal_over = peaks[Mode.NORMAL] - peaks[Mode.BASELINE]
    ckpt_over = peaks[Mode.CHECKPOINTED] - peaks[Mode.BASELINE]
    assert s["memory_savings"] == pytest.approx(normal_over / ckpt_over)
    assert s["memory_savings"] == pytest.approx(100 / 18)
    times = {m.mode.value: [i.wall_time_s for i in m.iterations] for m in result.modes}
    # the slowdown is the stratified Hodges-Lehmann estimate of the raw times (one round)
    assert s["slowdown"] == pytest.approx(slowdown_estimate([times]).value)
    ratios = [c / n for c in times["checkpointed"] for n in times["normal"]]
    assert min(ratios) <= s["slowdown"] <= max(ratios)
    low, high = s["slowdown_ci"]
    assert low <= s["slowdown"] <= high and s["rounds"] == 1
    assert s["forward_steps"] == s["forward_steps_optimal"] == optimal_forward_steps(100, 10)
    assert s["grad_max_rel_err"] == 0.0
    assert s["overhead_bytes"]["normal"] == normal_over


def test_run_json_output_has_stable_keys(fake, tmp_path):
    res = invoke(["run", "--model", "rnn", "--steps", "50", "--snaps", "5", "--json",
                  "--out", str(tmp_path / "r.json")])  # fmt: skip
    assert res.exit_code == 0
    doc = json.loads(res.stdout)
    assert doc["schema_version"] == SCHEMA_VERSION
    for key in ("slowdown", "memory_savings", "overhead_bytes", "forward_steps",
                "forward_steps_optimal", "grad_max_rel_err", "slowdown_ci", "memory_savings_ci",
                "rounds", "slowdown_per_round"):  # fmt: skip
        assert key in doc["summary"]
    assert doc["summary"]["rounds"] == 6 == len(doc["summary"]["slowdown_per_round"])
    assert set(doc["environment"]) >= {"python_version", "cpu_model", "thread_env_child", "numpy"}
    assert doc["environment"]["thread_env_child"]["OPENBLAS_NUM_THREADS"] == "1"
    assert [m["mode"] for m in doc["modes"][:3]] == ["baseline", "normal", "checkpointed"]
    assert len(doc["modes"]) == 18 and {m["round"] for m in doc["modes"]} == set(range(6))
    assert len(doc["modes"][1]["iterations"]) == 1 and len(doc["modes"][1]["warmup"]) == 1


def test_crashed_mode_is_reported_and_others_saved(fake, tmp_path):
    fake.setenv("FAKE_CRASH", "normal")
    out = tmp_path / "r.json"
    res = invoke(["run", "--model", "rnn", "--steps", "20", "--snaps", "4", "--rounds", "1",
                  "--out", str(out)])  # fmt: skip
    assert res.exit_code == 1
    assert "simulated segfault" in res.output
    result = load_result(out)
    normal = result.mode(Mode.NORMAL)
    assert normal.status is Status.CRASHED and normal.exit_code == 3
    assert result.mode(Mode.BASELINE).ok and result.mode(Mode.CHECKPOINTED).ok


def test_gradient_mismatch_fails_the_run(fake, tmp_path):
    fake.setenv("FAKE_GRAD_NOISE", "1e-6")
    out = tmp_path / "r.json"
    res = invoke(["run", "--model", "rnn", "--steps", "20", "--snaps", "4", "--rounds", "1",
                  "--out", str(out)])  # fmt: skip
    assert res.exit_code == 1
    ck = load_result(out).mode(Mode.CHECKPOINTED)
    assert ck.status is Status.FAILED and "gradient differs" in ck.error
    assert ck.grad_max_rel_err == pytest.approx(1e-6, rel=1e-3)


def test_timeout_and_memory_limit(fake, tmp_path):
    fake.setenv("FAKE_SLEEP", "normal:30")
    fake.setenv("FAKE_ALLOC", "checkpointed:300")
    out = tmp_path / "r.json"
    # 5 s: a loaded machine's start-up (Python, numpy, 300 MiB touched) stays well inside it,
    # so the checkpointed mode is stopped by the memory limit, not by the timeout
    res = invoke(["run", "--model", "rnn", "--steps", "20", "--snaps", "4", "--out", str(out),
                  "--timeout", "5s", "--memory-limit", "150MiB", "--rounds", "1"])  # fmt: skip
    assert res.exit_code == 1
    result = load_result(out)
    assert result.mode(Mode.NORMAL).status is Status.TIMEOUT
    oom = result.mode(Mode.CHECKPOINTED)
    assert oom.status is Status.OUT_OF_MEMORY
    # in MiB, or in bytes where the RSS caught just over the limit reads '150 MiB' too
    assert any(f"exceeded the memory limit of {v};" in oom.error
               for v in ("150 MiB", f"{150 * 2**20:,} B")), oom.error  # fmt: skip
    assert result.mode(Mode.BASELINE).ok


def test_a_small_memory_limit_is_said_in_its_own_unit(fake, tmp_path):
    # no worker starts under 4 KiB: the run stops at the first (tests/test_hardening14_*)
    out = tmp_path / "r.json"
    res = invoke(["run", "--model", "rnn", "--steps", "20", "--snaps", "4", "--out", str(out),
                  "--rounds", "1", "--memory-limit", "4KiB"])  # fmt: skip
    assert res.exit_code == 2 and not out.exists()
    assert "--memory-limit 4.00 KiB is below" in res.output
    assert "exceeded the memory limit of 4.00 KiB)" in res.output


@pytest.mark.parametrize(
    "argv",
    [
        ["run", "--steps", "0"],
        ["run", "--snaps", "-1"],
        ["run", "--hidden", "lots"],
        ["run", "--model", "transformer"],
        ["run", "--model", "missing_file.py:make"],
        ["run", "--memory-limit", "a lot"],
        ["run", "--modes", "fast"],
        ["run", "--out", "/proc/forbidden/r.json"],
        ["schedule", "--steps", "10"],
        ["schedule", "--steps", "10", "--snaps", "0"],
        ["no-such-command"],
    ],
)
def test_bad_input_is_one_line_exit_2(capsys, argv):
    err = one_line_error(capsys, argv)
    assert err.startswith("ckptbench: error:")


@pytest.mark.parametrize(
    ("argv", "guess"),
    [
        (["run", "--model", "lsmt"], "(did you mean lstm?)"),
        (["run", "--modes", "basline,normal"], "('basline': did you mean baseline?)"),
    ],
)
def test_a_typo_gets_the_nearest_name(capsys, argv, guess):
    assert guess in one_line_error(capsys, argv)
    assert "did you mean" not in one_line_error(capsys, [*argv[:2], "zzz"])


def test_size_and_duration_parsing():
    assert parse_bytes("2GiB") == 2 * 2**30
    assert parse_bytes("500MB") == 500 * 10**6
    assert parse_bytes("1.5g") == int(1.5 * 2**30)
    assert parse_bytes("4096") == 4096
    assert parse_seconds("5ms") == pytest.approx(0.005)
    assert parse_seconds("10m") == 600


def test_schedule_command_prints_the_numbers():
    res = invoke(["schedule", "--steps", "1000", "--snaps", "31"])
    assert res.exit_code == 0
    assert "2439" in res.output and "3439" in res.output and "2.439" in res.output
    res = invoke(["schedule", "--steps", "100", "--snaps", "5", "--strategy", "store-all"])
    assert res.exit_code == 0 and "peak snapshots" in res.output and "99" in res.output
    res = invoke(["schedule", "--steps", "100", "--snaps", "5", "--strategy", "uniform"])
    assert res.exit_code == 0 and "1030" in res.output  # vs the binomial optimum:
    assert str(optimal_forward_steps(100, 5)) in res.output
    # uniform has no closed form: its evaluations (quadratic with few slots) are counted
    # from the stream before it is replayed; 297 645 steps with 6 slots is about 1.2e9 of
    # them, and ran for minutes
    res = invoke(["schedule", "--steps", "297645", "--snaps", "6", "--strategy", "uniform"])
    assert res.exit_code == 2 and "over the limit of 5,000,000 step evaluations" in res.output
    res = invoke(["schedule", "--steps", "56560", "--snaps", "2", "--strategy", "uniform",
                  "--time"])  # fmt: skip
    assert res.exit_code == 2 and "--actions/--time enumerate" in res.output
    assert "formulas)" not in res.output  # uniform has none to offer
    res = invoke(["schedule", "--steps", "5", "--snaps", "2", "--actions"])
    assert res.output.splitlines()[0] == "TAKESHOT(slot=0, step=0)"
    assert "FIRSTURN(4)" in res.output and "TERMINATE" in res.output


def test_every_help_shows_an_example():
    for args in (
        ["--help"],
        *([c, "--help"] for c in ("run", "schedule", "sweep", "compare", "check")),
    ):
        res = invoke(args)
        assert res.exit_code == 0 and "Example" in res.output
    assert "INCLUDING" in invoke(["run", "--help"]).output


def test_bare_ckptbench_prints_its_help_not_an_error(capsys):
    """A newcomer's first command: the help on stdout and status 0, not 'error:' and 2."""
    from _cli import run_cli

    code, out, err = run_cli(capsys, [])
    assert code == 0 and out.startswith("Usage: ckptbench") and "Commands:" in out
    assert err == ""
    code, _, err = run_cli(capsys, ["bogus"])
    assert code == 2 and err.startswith("ckptbench: error: No such command")


def _cli(*args, env=None, timeout=600):
    return subprocess.run(
        [sys.executable, "-m", "ckptbench", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=timeout,
    )


def test_schedule_time_end_to_end():
    proc = _cli("schedule", "--steps", "100000", "--snaps", "50", "--time", "--repeat", "1")
    assert proc.returncode == 0, proc.stderr
    assert "375196" in proc.stdout and "generation time" in proc.stdout


def test_real_run_end_to_end(tmp_path):
    """A small real run through the CLI: real workers, real measurements."""
    out = tmp_path / "rnn.json"
    proc = _cli("run", "--model", "rnn", "--steps", "50", "--snaps", "5", "--hidden", "64",
                "--repeats", "2", "--rounds", "1", "--out", str(out), "--json")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc == json.loads(out.read_text())
    result = load_result(out)
    s = result.summary.as_dict()
    assert s["ok"] and s["grad_max_rel_err"] <= 1e-12
    assert (
        s["step_evaluations"] == s["step_evaluations_optimal"] == optimal_forward_steps(50, 5) + 50
    )
    # ratios recompute from the raw samples
    peaks = {m.mode: mode_peak_bytes(m) for m in result.modes}
    assert s["overhead_bytes"]["normal"] == peaks[Mode.NORMAL] - peaks[Mode.BASELINE]
    times = {m.mode.value: [i.wall_time_s for i in m.iterations] for m in result.modes}
    # the slowdown is the stratified Hodges-Lehmann estimate of the raw times (one round)
    assert s["slowdown"] == pytest.approx(slowdown_estimate([times]).value)
    ratios = [c / n for c in times["checkpointed"] for n in times["normal"]]
    assert min(ratios) <= s["slowdown"] <= max(ratios)
    low, high = s["slowdown_ci"]
    assert low <= s["slowdown"] <= high and s["rounds"] == 1
    for m in result.modes:
        assert m.peak_method in ("vmhwm", "ru_maxrss")
        assert m.sample_count > 0 and m.timeline
        assert all(i.peak_rss_bytes >= i.start_rss_bytes > 0 for i in m.iterations)
    # the normal tape of 50 steps costs more than 5 snapshots + one taped step
    assert s["overhead_bytes"]["normal"] > s["overhead_bytes"]["checkpointed"]


def test_real_run_bad_plugin_is_exit_2(tmp_path):
    plugin = tmp_path / "p.py"
    plugin.write_text("def make():\n    return object()\n")
    proc = _cli("run", "--model", f"{plugin}:make", "--steps", "5")
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "without method" in proc.stderr


def test_sweep_compare_check_through_the_cli(fake, tmp_path):
    cfg = tmp_path / "tiny.toml"
    cfg.write_text(
        'name = "tiny"\n[case]\nmodel = "rnn"\nsteps = 40\nrepeats = 3\nrounds = 2\n'
        "[[grid]]\nsnaps = [4, 8]\n[expect]\nmemory_savings_min = 2.0\n"
    )
    out = tmp_path / "sweep"
    res = invoke(["sweep", str(cfg), "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert "2 measured" in res.output
    assert len(list(out.glob("rnn-*.json"))) == 2
    # a second fresh sweep into the same folder refuses instead of overwriting
    assert CliRunner().invoke(cli, ["sweep", str(cfg), "--out", str(out)]).exit_code == 2
    res = invoke(["sweep", str(cfg), "--out", str(out), "--resume"])
    assert res.exit_code == 0 and "2 kept" in res.output

    res = invoke(["compare", str(out), "--format", "csv"])
    lines = res.output.strip().splitlines()
    assert res.exit_code == 0 and len(lines) == 3  # header + two cells
    html = tmp_path / "r.html"
    plots = tmp_path / "plots"
    res = invoke(["compare", str(out), "--format", "html", "-o", str(html), "--plots", str(plots)])
    assert res.exit_code == 0
    assert html.read_text().count("data:image/png;base64,") >= 3
    assert (plots / "tradeoff-rnn-l40.png").read_bytes()[:4] == b"\x89PNG"

    res = invoke(["check", str(out)])
    assert res.exit_code == 0 and "PASSED" in res.output
    # the same cells with +20% checkpointed memory fail the gate against the first run
    fake.setenv("FAKE_SCALE", "1.2")
    worse = tmp_path / "worse"
    assert invoke(["sweep", str(cfg), "--out", str(worse)]).exit_code == 0
    res = invoke(["check", str(worse), "--against", str(out)])
    assert res.exit_code == 1 and "FAILED" in res.output
    assert invoke(["check", str(tmp_path / "nothing-here")]).exit_code == 2


def test_busy_machine_warning(fake, tmp_path):
    out = tmp_path / "r.json"
    args = ["run", "--model", "rnn", "--steps", "20", "--snaps", "4", "--rounds", "1",
            "--out", str(out)]  # fmt: skip
    res = invoke(args)
    assert res.exit_code == 0 and "machine was busy" not in res.output
    assert load_result(out).summary.mode(Mode.NORMAL).cpu_share == pytest.approx(1.0)
    fake.setenv("FAKE_CPU_SHARE", "0.6")
    res = invoke([*args, "--force"])
    assert res.exit_code == 0  # a warning, not a failure: memory is still right
    assert "machine was busy" in res.output and "(down to 60.0%): baseline, normal" in res.output


def test_result_files_get_ordinary_permissions(tmp_path):
    from ckptbench.results.schema import write_atomic

    old = os.umask(0o022)
    try:
        write_atomic(tmp_path / "r.json", "{}")
    finally:
        os.umask(old)
    assert (tmp_path / "r.json").stat().st_mode & 0o777 == 0o644
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]  # no temp file left
