"""Hardening, second round: plug-ins never run in ckptbench's own process, every worker under
one guard, every written file under one rule, bad input refused before measuring.

Each test holds one numbered item of the second hardening round (see docs/architecture.md,
"Failure model"). The fast ones use the fake worker (``tests/fake_worker.py``); the few that
need a real worker are small (20 steps, hidden 8) and marked ``slow``.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from _cli import run_cli
from _fake import use_fake_worker
from _synthetic import make_result
from click.testing import CliRunner

from ckptbench.cli import cli
from ckptbench.measure.launch import Interrupted, run_mode
from ckptbench.measure.runner import run_case
from ckptbench.results.schema import Case, Mode, Status, save_result
from ckptbench.results.store import StoreError, load_result
from ckptbench.schedules.optimal import Costs, PlanError, plan_optimal
from ckptbench.sweep.config import ConfigError, parse_config
from ckptbench.sweep.run import run_sweep

TESTS = Path(__file__).parent
ROOT = TESTS.parent
#: Only a safety net for waiting on processes; never a performance limit.
WAIT_S = 60
TINY = ["--steps", "20", "--hidden", "8", "--batch", "2", "--input", "4", "--rounds", "1",
        "--warmup", "0", "--repeats", "1"]  # fmt: skip
TINY_CASE = {"steps": 20, "snaps": 4, "hidden": 8, "batch": 2, "input": 4, "warmup": 0,
             "repeats": 1, "rounds": 1}  # fmt: skip
GOOD = "from ckptbench.workloads.rnn import rnn\n\ndef make():\n    return rnn(hidden=8)\n"
COSTS = {"forward_time_s": 0.001, "taped_time_s": 0.003, "state_bytes": 4096, "tape_bytes": 65536}


@pytest.fixture
def fake(monkeypatch):
    return use_fake_worker(monkeypatch, "GITHUB_STEP_SUMMARY")


def invoke(args):
    return CliRunner().invoke(cli, args, catch_exceptions=False)


def _lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    return env


# ------------------------------------------------------------- 1-5: plug-ins never in-process


def test_the_parent_never_imports_a_plugin(fake, tmp_path):
    """1, 2, 3, 5: whatever a plug-in does at import happens in a worker, never in ckptbench."""
    marker = tmp_path / "imported-in-parent"
    plug = tmp_path / "mine.py"
    plug.write_text(f"import os\nif os.getpid() == {os.getpid()}:\n"
                    f"    open({str(marker)!r}, 'w').close()\n{GOOD}")  # fmt: skip
    fake.chdir(tmp_path)
    res = invoke(["run", "--model", "mine.py:make", *TINY, "--out", "r.json"])
    assert res.exit_code == 0, res.output
    res = invoke(["plan", "--model", "mine.py:make", "--steps", "20", "--budget", "1MiB",
                  "--costs", _costs_file(tmp_path)])  # fmt: skip
    assert res.exit_code == 0, res.output
    assert not marker.exists()


def test_a_plugin_failing_its_check_is_one_line_exit_2(fake, tmp_path, capsys):
    """1: the worker's one-line report becomes the error; no result is written."""
    fake.setenv("FAKE_PLUGIN_BAD", "SystemExit(3) raised while running the job")
    (tmp_path / "mine.py").write_text(GOOD)
    fake.chdir(tmp_path)
    code, out, err = run_cli(capsys, ["run", "--model", "mine.py:make", *TINY, "--out", "r.json"])
    assert code == 2 and out == ""
    assert _lines(err) == [
        "ckptbench: error: --model mine.py:make: loading it in a fresh worker failed: "
        "SystemExit(3) raised while running the job"
    ]
    assert not (tmp_path / "r.json").exists()


def test_a_plugin_printing_at_import_cannot_corrupt_run_json(fake, tmp_path):
    """4: stdout carries the JSON document only."""
    (tmp_path / "loud.py").write_text(f"print('hello from the plug-in')\nprint('{{}}')\n{GOOD}")
    fake.chdir(tmp_path)
    res = CliRunner().invoke(cli, ["run", "--model", "loud.py:make", *TINY, "--out", "r.json",
                                   "--json", "-q"], catch_exceptions=False)  # fmt: skip
    assert res.exit_code == 0
    doc = json.loads(res.stdout)
    assert [m["status"] for m in doc["modes"]] == ["ok"] * 3


EXITS = {
    "sys-exit-0": ("import sys\nsys.exit(0)\n", "SystemExit(0)"),
    "sys-exit-3": ("import sys\nsys.exit(3)\n", "SystemExit(3)"),
    "os-exit-0": ("import os\nos._exit(0)\n", "exited with status 0 without a result"),
    "keyboard-interrupt": ("raise KeyboardInterrupt\n", "no signal came from ckptbench"),
    "hang": ("import time\ntime.sleep(600)\n", "did not finish within 8 s"),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(EXITS))
def test_a_plugin_that_exits_or_hangs_at_import_is_bad_input(tmp_path, monkeypatch, capsys,
                                                              name):  # fmt: skip
    """1, 2: a real disposable worker, bounded by --timeout; one line, exit 2."""
    text, said = EXITS[name]
    (tmp_path / "bad.py").write_text(text + GOOD)
    monkeypatch.chdir(tmp_path)
    # 8 s: a real worker's imports on a loaded machine stay well inside it
    argv = ["run", "--model", "bad.py:make", *TINY, "--timeout", "8s", "--out", "r.json"]
    code, out, err = run_cli(capsys, argv)
    assert code == 2 and out == ""
    (line,) = _lines(err)
    assert line.startswith("ckptbench: error: --model bad.py:make: ") and said in line
    assert not (tmp_path / "r.json").exists()


THREAD = "import threading, time\nthreading.Thread(target=time.sleep, args=(600,)).start()\n"
FORK = (
    "import os, time\npid = os.fork()\nif pid == 0:\n    time.sleep(600)\n    os._exit(0)\n"
    "open('child-%d.pid' % os.getpid(), 'w').write(str(pid))\n"
)


@pytest.mark.slow
@pytest.mark.parametrize("leftover", ["thread", "fork"])
def test_what_a_plugin_leaves_running_never_relabels_a_completed_mode(tmp_path, monkeypatch,
                                                                      leftover):  # fmt: skip
    """3, 5: a mode that completed is ok (not timeout) and its forked child is stopped."""
    (tmp_path / "left.py").write_text((THREAD if leftover == "thread" else FORK) + GOOD)
    monkeypatch.chdir(tmp_path)
    case = Case(model="left.py:make", timeout_s=30, **TINY_CASE)
    result, _ = run_mode(case, Mode.BASELINE)
    assert result.status is Status.OK, result.error
    assert result.wall_time_s < case.timeout_s
    for pid_file in tmp_path.glob("child-*.pid"):
        try:
            child = psutil.Process(int(pid_file.read_text()))
        except psutil.NoSuchProcess:
            continue
        _, alive = psutil.wait_procs([child], timeout=WAIT_S)  # SIGKILL lands asynchronously
        assert all(p.status() == psutil.STATUS_ZOMBIE for p in alive), "the child outlived it"


# ------------------------------------------------------------- 6: profile under the guard

FORGE = (
    "import atexit, json\n"
    "atexit.register(lambda: print(json.dumps({'ok': True, 'rows': [], 'model': 'forged'})))\n"
)


@pytest.mark.slow
def test_profile_reports_on_the_private_channel(tmp_path, monkeypatch):
    """6: a plug-in printing a JSON line at exit cannot forge or blank the profile."""
    (tmp_path / "forge.py").write_text(FORGE + GOOD)
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(cli, ["profile", "--model", "forge.py:make", "--steps", "6",
                                   "--snaps", "2", "--hidden", "8", "--batch", "2", "--input",
                                   "4", "--json"], catch_exceptions=False)  # fmt: skip
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["model"] == "forge.py:make" and doc["rows"]


SLOW_INIT = """
import time
from ckptbench.workloads.rnn import rnn

class Slow:
    def __init__(self):
        self.inner = rnn(hidden=8)
    def init(self, steps, rng):
        open("in-init", "w").close()
        time.sleep(600)
    def step(self, p, s, x):
        return self.inner.step(p, s, x)
    def post(self, p, s):
        return self.inner.post(p, s)
    def loss(self, y):
        return self.inner.loss(y)

def make():
    return Slow()
"""


def _workers(pid: int, ready: Path) -> list[psutil.Process]:
    """The parent's workers, once the plug-in's ``init`` has started (``ready`` exists)."""
    for _ in range(2400):
        if ready.exists():
            kids = []
            for p in psutil.Process(pid).children(recursive=True):
                try:
                    if "ckptbench.measure.worker" in " ".join(p.cmdline()):
                        kids.append(p)
                except psutil.Error:
                    continue
            if kids:
                return kids
        time.sleep(0.05)
    raise AssertionError("no worker started")


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_stopping_profile_stops_its_worker(tmp_path, sig):
    """6: SIGTERM, SIGHUP or SIGKILL to ``ckptbench profile`` leaves no worker running."""
    (tmp_path / "slow.py").write_text(SLOW_INIT)
    proc = subprocess.Popen(
        [sys.executable, "-m", "ckptbench", "profile", "--model", "slow.py:make", "--steps",
         "6", "--snaps", "2"],
        cwd=tmp_path, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    workers = _workers(proc.pid, tmp_path / "in-init")
    proc.send_signal(sig)
    proc.communicate(timeout=WAIT_S)
    _, alive = psutil.wait_procs(workers, timeout=WAIT_S)
    assert not alive
    if sig == signal.SIGTERM:
        assert proc.returncode == 128 + sig


# ------------------------------------------------------------- 7: one rule for written files


def _result_file(tmp_path: Path, name: str = "r.json") -> Path:
    path = tmp_path / name
    save_result(make_result(Case(model="rnn", **TINY_CASE), seed=1), path)
    return path


def test_side_outputs_never_replace_results_or_inputs(fake, tmp_path):
    result = _result_file(tmp_path)
    before = result.read_bytes()
    res = invoke(["check", str(result), "--junit", str(result)])
    assert res.exit_code == 2 and "--junit" in res.output
    res = invoke(["check", str(result), "--summary", str(result)])
    assert res.exit_code == 2 and "--summary" in res.output
    other = _result_file(tmp_path, "other.json")
    res = invoke(["check", str(result), "--summary", str(other), "--force"])
    assert res.exit_code == 2 and "result or sweep manifest" in res.output
    res = invoke(["compare", str(result), "-o", str(result), "--force"])
    assert res.exit_code == 2 and "input" in res.output
    assert result.read_bytes() == before


def test_side_outputs_replace_only_with_force(fake, tmp_path):
    result = _result_file(tmp_path)
    report = tmp_path / "report.md"
    write = ["compare", str(result), "--format", "markdown", "-o", str(report)]
    assert invoke(write).exit_code == 0
    earlier = report.read_text()
    res = invoke(write)
    assert res.exit_code == 2 and "--force" in res.output
    assert report.read_text() == earlier
    inode = report.stat().st_ino
    res = invoke([*write, "--force"])  # its own earlier report: replaced
    assert res.exit_code == 0 and report.stat().st_ino != inode
    report.write_text("mine")  # a file of the user's: never replaced, --force or not
    res = invoke([*write, "--force"])
    assert res.exit_code == 2 and "not a report ckptbench wrote" in res.output
    assert report.read_text() == "mine"
    summary = tmp_path / "summary.md"
    summary.write_text("earlier\n")  # appending to a summary is its purpose
    res = invoke(["check", str(result), "--summary", str(summary)])
    assert res.exit_code == 0 and summary.read_text().startswith("earlier\n")


def test_the_output_rule_refuses_links_and_special_files(tmp_path):
    from ckptbench.results.store import check_output

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "target")
    for path in (fifo, link, Path("/dev/null")):
        with pytest.raises(StoreError):
            check_output(path, "--junit", replace=True, append=True)
    check_output(tmp_path / "new.xml", "--junit")  # a new file is fine


# ------------------------------------------------------------- 8: one sweep per folder

SWEEP = """
name = "tiny"
[case]
model = "rnn"
steps = 20
hidden = 8
batch = 2
input = 4
warmup = 0
repeats = 1
rounds = 1
[grid]
snaps = [2, 3]
"""


def test_a_second_sweep_on_a_locked_folder_is_refused(fake, tmp_path):
    from ckptbench.results.folderlocks import locked_folder

    out = tmp_path / "out"
    out.mkdir()
    config = tmp_path / "tiny.toml"
    config.write_text(SWEEP)
    with locked_folder(out):  # as a sweep in another process holds it
        res = invoke(["sweep", str(config), "--out", str(out), "-q"])
        assert res.exit_code == 2
        assert "another ckptbench sweep is writing this folder" in res.output
        assert list(out.iterdir()) == []
    res = invoke(["sweep", str(config), "--out", str(out), "-q"])
    assert res.exit_code == 0, res.output


# ------------------------------------------------------------- 9: missing cells fail the gate


def test_check_fails_on_cells_the_manifest_lists_but_are_missing(fake, tmp_path):
    out = tmp_path / "out"
    config = tmp_path / "tiny.toml"
    config.write_text(SWEEP)
    assert invoke(["sweep", str(config), "--out", str(out), "-q"]).exit_code == 0
    assert invoke(["check", str(out)]).exit_code == 0
    cells = json.loads((out / "sweep.json").read_text())["cells"]
    (out / cells[1]["file"]).unlink()
    res = invoke(["check", str(out)])
    assert res.exit_code == 1
    assert cells[1]["key"] in res.output and "missing" in res.output


# ------------------------------------------------------------- 10: sizes and costs files


@pytest.mark.parametrize(
    "args",
    [
        ["plan", "--budget", "9" * 300],
        ["run", "--memory-limit", "9" * 300],
        ["check", "x.json", "--memory-floor", "9" * 300],
        ["run", "--timeout", "9" * 400],
    ],
)
def test_sizes_with_hundreds_of_digits_are_one_line(fake, capsys, args):
    code, _, err = run_cli(capsys, args)
    assert code == 2
    (line,) = _lines(err)
    assert "too" in line and len(line) < 200


def _costs_file(folder: Path, text: str | None = None) -> str:
    path = folder / "costs.json"
    path.write_text(text if text is not None else json.dumps(COSTS))
    return str(path)


@pytest.mark.parametrize(
    ("value", "field"),
    [("Infinity", "state_bytes"), ("1e400", "state_bytes"), ("1" + "0" * 400, "state_bytes"),
     ("NaN", "state_bytes"), ("1e400", "taped_time_s"), ("NaN", "forward_time_s"),
     ("-1", "forward_time_s"), ("-1", "tape_bytes")],
)  # fmt: skip
def test_non_finite_or_huge_costs_name_their_field(fake, tmp_path, capsys, value, field):
    doc = json.dumps({**COSTS, field: 1}).replace(f'"{field}": 1', f'"{field}": {value}')
    code, _, err = run_cli(capsys, ["plan", "--steps", "20", "--budget", "1MiB",
                                    "--costs", _costs_file(tmp_path, doc)])  # fmt: skip
    assert code == 2
    (line,) = _lines(err)
    huge = f"{field} is an integer of 401 digits"  # refused as it is read, before converting
    assert f"{field} must be finite, >= 0 and <= " in line or huge in line, line


def test_costs_are_read_in_a_bounded_way(fake, tmp_path):
    res = invoke(["plan", "--steps", "20", "--budget", "1MiB", "--costs", "/dev/zero"])
    assert res.exit_code == 2 and "is a device, not a file" in res.output  # never read
    big = tmp_path / "big.json"
    big.write_bytes(b" " * (64 * 2**20 + 1))
    res = invoke(["plan", "--steps", "20", "--budget", "1MiB", "--costs", str(big)])
    assert res.exit_code == 2 and "MiB" in res.output


# ------------------------------------------------------------- 11, 12: plans refused up front


@pytest.fixture
def no_costs_worker(fake):
    def refuse(*args, **kwargs):
        raise AssertionError("step costs measured")

    for where in (
        "ckptbench.measure.tasks",
        "ckptbench.measure.launch",
        "ckptbench.measure.runner",
    ):
        try:
            fake.setattr(f"{where}.measure_costs", refuse, raising=False)
        except ImportError:  # a module this version does not have
            continue
    return fake


@pytest.mark.parametrize("steps", ["20000", "100000000"])
def test_plans_too_large_are_refused_with_the_estimate_before_measuring(
    no_costs_worker, capsys, steps
):
    code, _, err = run_cli(capsys, ["plan", "--steps", steps, "--budget", "8MiB", "--hidden",
                                    "8", "--batch", "2", "--input", "4"])  # fmt: skip
    assert code == 2
    (line,) = _lines(err)
    assert "table updates" in line and "GiB of tables" in line


def test_an_infeasible_budget_names_the_smallest_that_works(no_costs_worker, tmp_path, capsys):
    from ckptbench.results.units import size_text
    from ckptbench.schedules.optimal import min_budget_bytes

    least = min_budget_bytes(Costs.from_dict(COSTS), 20)
    argv = ["plan", "--steps", "20", "--budget", "100B", "--costs", _costs_file(tmp_path), "-q"]
    code, _, err = run_cli(capsys, argv)
    assert code == 2
    warned, *said = _lines(err)  # the file's states are not lstm's at these sizes: -q says it
    assert warned.startswith("warning: --costs") and said == [
        f"ckptbench: error: no schedule of 20 steps fits in a budget of 100 B; the smallest "
        f"budget that works is {size_text(least)} ({least} B)"
    ]
    out = tmp_path / "r.json"
    argv = ["run", "--strategy", "optimal", "--budget", "100B", *TINY, "--out", str(out), "-q"]
    code, _, err = run_cli(capsys, [*argv, "--costs", _costs_file(tmp_path)])
    said = [line for line in _lines(err) if not line.startswith("warning --costs")]
    assert code == 2 and len(said) == 1 and str(least) in err
    assert not out.exists()
    assert invoke(["plan", "--steps", "20", "--budget", str(least),
                   "--costs", _costs_file(tmp_path)]).exit_code == 0  # fmt: skip


def test_min_budget_plans_and_nothing_below_the_least_peak_does():
    import random

    from ckptbench.schedules.optimal import min_budget_bytes

    rng = random.Random(7)
    for _ in range(30):
        steps = rng.randint(2, 9)
        costs = Costs(0.001, 0.003, rng.randint(1, 10**7),
                      [rng.randint(1, 10**7) for _ in range(steps)])  # fmt: skip
        least = min_budget_bytes(costs, steps)
        assert plan_optimal(costs, steps, least).peak_bytes <= least
        _, _, sb, tb = costs.per_step(steps)
        exact = min(sum(tb), min(sum(tb[:k]) + sb[k] + max(tb[k:]) for k in range(steps)))
        assert exact <= least
        with pytest.raises(PlanError):
            plan_optimal(costs, steps, exact - 1)


# ------------------------------------------------------------- 13: --device cuda


def test_cuda_without_cuda_is_one_line_before_any_measurement(fake, tmp_path, capsys, monkeypatch):
    # torch counts as installed (the fake worker answers the CUDA probe), so the probe speaks
    monkeypatch.setattr("ckptbench.backends.registry.BackendSpec.available", lambda self: None)
    out = tmp_path / "r.json"
    code, _, err = run_cli(capsys, ["run", "--backend", "torch", "--device", "cuda", "--model",
                                    "rnn", *TINY, "--out", str(out)])  # fmt: skip
    assert code == 2
    assert _lines(err) == [
        "ckptbench: error: --device cuda: torch 0.fake (a CPU-only build) sees no CUDA device here"
    ]
    assert not out.exists()


# ------------------------------------------------------------- 14: --mprof checked first


def test_mprof_problems_are_found_before_measuring(fake, tmp_path):
    first = tmp_path / "a.json"
    assert invoke(["run", "--model", "rnn", *TINY, "--out", str(first), "--mprof",
                   str(tmp_path / "mp")]).exit_code == 0  # fmt: skip
    second = tmp_path / "b.json"
    res = invoke(["run", "--model", "rnn", *TINY, "--out", str(second), "--mprof",
                  str(tmp_path / "mp")])  # fmt: skip
    assert res.exit_code == 2 and "exists" in res.output
    assert not second.exists()  # nothing measured
    res = invoke(["run", "--model", "rnn", *TINY, "--out", str(second), "--mprof",
                  str(first / "sub")])  # fmt: skip
    assert res.exit_code == 2 and not second.exists()


# ------------------------------------------------------------- 15: in means out


def test_non_finite_config_values_are_refused_at_read_time():
    with pytest.raises(ConfigError, match=r"tiny.toml:4: case.timeout_s: .*finite"):
        parse_config('name = "x"\n[case]\nmodel = "rnn"\ntimeout_s = inf\n[grid]\nsnaps = [2]\n',
                     source="tiny.toml")  # fmt: skip


def test_every_accepted_value_is_readable_on_the_way_out(tmp_path):
    big = Case(model="rnn", timeout_s=1e299, memory_limit_bytes=2**62 - 1,
               sample_interval_s=1e-9, **TINY_CASE)  # fmt: skip
    save_result(make_result(big, seed=1), tmp_path / "r.json")
    assert load_result(tmp_path / "r.json").case == big
    for bad in ({"timeout_s": math.inf}, {"memory_limit_bytes": 2**62}, {"steps": 10**400}):
        with pytest.raises(ValueError):
            Case(model="rnn", **bad)


# ------------------------------------------------------------- 16: the memory limit holds


def test_the_memory_limit_holds_whatever_the_sampling_interval(fake, tmp_path):
    # 10 s, the longest interval taken (1h is refused): one sample, as the worker starts
    fake.setenv("FAKE_ALLOC", "normal:300")  # touches 300 MiB, reports small peaks
    out = tmp_path / "r.json"
    res = invoke(["run", "--model", "rnn", *TINY, "--memory-limit", "200MiB",
                  "--sample-interval", "10s", "--out", str(out)])  # fmt: skip
    assert res.exit_code == 1
    assert load_result(out).mode(Mode.NORMAL).status is Status.OUT_OF_MEMORY


def test_an_exact_iteration_peak_over_the_limit_is_out_of_memory(fake, tmp_path):
    fake.setenv("FAKE_SCALE", "2000")  # reported exact peaks of 2.5 GiB, nothing sampled
    out = tmp_path / "r.json"
    res = invoke(["run", "--model", "rnn", *TINY, "--memory-limit", "1GiB",
                  "--sample-interval", "10s", "--out", str(out)])  # fmt: skip
    assert res.exit_code == 1
    normal = load_result(out).mode(Mode.NORMAL)
    assert normal.status is Status.OUT_OF_MEMORY and "exceeded the memory limit" in normal.error


# ------------------------------------------------------------- 17: one case, one key


def test_run_and_sweep_give_one_optimal_case_one_key(fake, tmp_path):
    config = parse_config(
        'name = "o"\n[case]\nmodel = "rnn"\nsteps = 20\nstrategy = "optimal"\n'
        "budget_bytes = 1048576\nhidden = 8\nbatch = 2\ninput = 4\nwarmup = 0\nrepeats = 1\n"
        "rounds = 1\n"
        "[grid]\nsnaps = [4, 31]\n"
    )
    (cell,) = config.cases  # snaps is not used by optimal: one cell
    out = tmp_path / "r.json"
    res = invoke(["run", "--model", "rnn", "--strategy", "optimal", "--budget", "1MiB", "--snaps",
                  "31", *TINY, "--costs", _costs_file(tmp_path), "--out", str(out)])  # fmt: skip
    assert res.exit_code == 0, res.output
    assert res.output.count("--snaps 31 is not used by strategy optimal") == 1
    assert load_result(out).case.key == cell.key
    res = invoke(["run", "--model", "rnn", "--strategy", "optimal", "--budget", "1MiB", *TINY,
                  "--costs", _costs_file(tmp_path), "--out", str(tmp_path / "d.json")])  # fmt: skip
    assert "not used" not in res.output  # --snaps not given: nothing to say
    assert load_result(tmp_path / "d.json").case.key == cell.key


def test_costs_with_a_strategy_that_ignores_them_is_refused(fake, tmp_path):
    """As --budget is (test_hardening23_edges): said once as a note before, measured anyway."""
    out = tmp_path / "r.json"
    res = invoke(["run", "--model", "rnn", "--strategy", "store-all", *TINY, "--costs",
                  _costs_file(tmp_path), "--out", str(out)])  # fmt: skip
    assert res.exit_code == 2, res.output
    assert "(--costs) is only used by strategy 'optimal', not 'store-all'" in res.output
    assert not out.exists()


# ------------------------------------------------------------- 18: signals say what they are


def test_interrupts_name_the_signal_and_count_the_rounds_that_ran(fake, tmp_path):
    from ckptbench.render import headline

    def stop_in_round_two(event):
        if event.round == 1 and event.phase == "iteration":
            raise KeyboardInterrupt

    case = Case(model="rnn", **{**TINY_CASE, "rounds": 5})
    with pytest.raises(KeyboardInterrupt) as info:
        run_case(case, out_path=tmp_path / "r.json", progress=stop_in_round_two)
    saved = load_result(tmp_path / "r.json")
    last = saved.modes[-1]
    assert last.status is Status.INTERRUPTED and "stopped by SIGINT (Ctrl-C)" in last.error
    assert "1 complete round (interrupted in round 2 by SIGINT (Ctrl-C))" in headline(
        info.value.result
    )


def test_a_signal_during_a_sweep_saves_the_mode_in_flight(fake, tmp_path):
    config = parse_config(SWEEP.replace("rounds = 1", "rounds = 2"), source="tiny.toml")

    def run_cell(case, *, out_path=None, progress=None):
        def stop(event):
            if event.phase == "iteration" and event.mode is Mode.NORMAL:
                raise Interrupted(signal.SIGTERM)

        return run_case(case, out_path=out_path, progress=stop)

    with pytest.raises(Interrupted):
        run_sweep(config, tmp_path / "out", run_cell=run_cell)
    first = load_result(tmp_path / "out" / f"{config.cases[0].key}.json")
    assert first.modes[-1].status is Status.INTERRUPTED
    assert "stopped by SIGTERM" in first.modes[-1].error
    cells = json.loads((tmp_path / "out" / "sweep.json").read_text())["cells"]
    # the cut cell is pending (--resume measures it again), its part saved (2026-11-29)
    assert [(c["state"], c["ok"]) for c in cells] == [("pending", False), ("pending", None)]
    assert "interrupted" in cells[0]["error"]
