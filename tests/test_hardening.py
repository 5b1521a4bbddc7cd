"""Nothing lost, nothing mixed up: result files, worker processes and bad input under stress.

Each test holds one item of the hardening work (see docs/architecture.md, "Failure model").
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import textwrap
import time
from dataclasses import replace
from pathlib import Path

import psutil
import pytest
from _cli import MAIN_AS_IN_A_TERMINAL
from click.testing import CliRunner

from ckptbench.cli import cli
from ckptbench.cli.run import _default_out
from ckptbench.measure.runner import run_case
from ckptbench.results.schema import Case, Mode, Status
from ckptbench.results.store import load_result

TESTS = Path(__file__).parent
ROOT = TESTS.parent
#: Only a safety net for waiting on processes; never a performance limit.
WAIT_S = 30


def invoke(args):
    return CliRunner().invoke(cli, args, catch_exceptions=False)


def small(out: Path, *extra: str) -> list[str]:
    return ["run", "--model", "rnn", "--steps", "20", "--snaps", "4", "--rounds", "1",
            "--out", str(out), *extra]  # fmt: skip


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    return env


# ------------------------------------------------------------- 1, 2: files never replaced


def test_existing_result_is_kept_unless_force(fake, tmp_path):
    out = tmp_path / "r.json"
    assert invoke(small(out)).exit_code == 0
    measured = out.read_text()
    res = invoke(small(out))
    assert res.exit_code == 2 and "--force" in res.output
    assert out.read_text() == measured
    res = invoke(small(out, "--force"))
    assert res.exit_code == 0, res.output
    assert load_result(out).ok and out.read_text() != measured
    # --force replaces a result, never anything else
    out.write_text("precious")
    res = invoke(small(out, "--force"))
    assert res.exit_code == 2 and "is not a ckptbench result" in res.output
    assert out.read_text() == "precious"


@pytest.mark.parametrize("kind", ["fifo", "symlink", "dir", "device"])
def test_out_never_replaces_a_non_regular_file(fake, tmp_path, kind):
    target = tmp_path / "victim.json"
    target.write_text("victim")
    out = tmp_path / "out.json"
    if kind == "fifo":
        os.mkfifo(out)
    elif kind == "symlink":
        out.symlink_to(target)
    elif kind == "dir":
        out.mkdir()
    else:
        out = Path("/dev/null")
    res = invoke(small(out, "--force"))
    assert res.exit_code == 2, res.output
    assert target.read_text() == "victim"
    mode = os.lstat(out).st_mode
    assert {
        "fifo": stat.S_ISFIFO,
        "symlink": stat.S_ISLNK,
        "dir": stat.S_ISDIR,
        "device": stat.S_ISCHR,
    }[kind](mode)


def test_default_names_are_unique_and_never_replace(fake, tmp_path, monkeypatch):
    names = {_default_out("lstm") for _ in range(2000)}
    assert len(names) == 2000
    monkeypatch.chdir(tmp_path)
    for _ in range(4):
        res = invoke(["run", "--model", "rnn", "--steps", "10", "--snaps", "3", "--rounds", "1"])
        assert res.exit_code == 0, res.output
    assert len(list((tmp_path / "results").glob("run-rnn-*.json"))) == 4


def test_write_without_replace_is_atomic_exclusive(tmp_path):
    from ckptbench.results.schema import TargetError, write_atomic

    p = tmp_path / "a.json"
    write_atomic(p, "one", replace=False)
    with pytest.raises(TargetError):
        write_atomic(p, "two", replace=False)
    assert p.read_text() == "one"
    assert [q.name for q in tmp_path.iterdir()] == ["a.json"]  # no temp file left


# ------------------------------------------------------------- 3: timeouts keep iterations


def test_timeout_keeps_completed_iterations_and_counts_from_ready(fake, tmp_path):
    out = tmp_path / "r.json"
    # baseline: a 2.5 s start-up (before ready) and 5 x 0.6 s iterations, 5.5 s together, each
    # part inside a 5 s timeout with seconds to spare on a loaded machine: ok only if the
    # timeout counts from ready. normal: 5 x 2 s of iterations cannot fit in 5 s.
    fake.setenv("FAKE_SLEEP", "baseline:2.5")
    fake.setenv("FAKE_ITER_SLEEP", "baseline:0.6,normal:2")
    res = invoke(small(out, "--timeout", "5s", "--repeats", "5", "--warmup", "0"))
    assert res.exit_code == 1, res.output
    result = load_result(out)
    base, normal = result.mode(Mode.BASELINE), result.mode(Mode.NORMAL)
    assert base.status is Status.OK and len(base.iterations) == 5
    assert normal.status is Status.TIMEOUT
    assert 1 <= len(normal.iterations) < 5 and normal.iterations_planned == 5
    assert f"{len(normal.iterations)} of 5 measured iterations" in normal.error


# ------------------------------------------------------------- 4, 6: attribution


def test_cases_differing_only_deep_in_a_long_model_path_get_different_keys():
    folder = "experiments/" + "very_long_folder_name/" * 4
    a = Case(model=f"{folder}one.py:make")
    b = Case(model=f"{folder}two.py:make")
    assert a.key != b.key
    assert Case(hidden=128).key != Case(hidden=256).key
    assert Case(repeats=9).key == Case().key  # settings are not identity
    assert Case(backend="torch").key != Case().key


def test_plugin_provenance_is_relative_with_content_hash(fake, tmp_path, monkeypatch):
    import hashlib

    monkeypatch.chdir(tmp_path)
    plug = tmp_path / "models" / "mine.py"
    plug.parent.mkdir()
    plug.write_text(PLUGIN)
    res = invoke(["run", "--model", "models/mine.py:make", "--steps", "10", "--snaps", "3",
                  "--rounds", "1", "--out", "r.json"])  # fmt: skip
    assert res.exit_code == 0, res.output
    env = load_result(tmp_path / "r.json").environment
    assert env["plugin"] == {
        "path": "models/mine.py",
        "sha256": hashlib.sha256(plug.read_bytes()).hexdigest(),
        "watched_since": {"models/mine.py": "start"},  # the fake worker's check lists no files
    }
    assert str(tmp_path) not in json.dumps(env["plugin"])
    res = invoke(["run", "--model", f"{plug}:make", "--steps", "10", "--snaps", "3",
                  "--rounds", "1", "--out", "abs.json"])  # fmt: skip
    assert res.exit_code == 0, res.output
    doc = (tmp_path / "abs.json").read_text()
    assert str(tmp_path) not in doc.replace(str(Path(sys.executable).parent), "")
    assert load_result(tmp_path / "abs.json").case.model == "models/mine.py:make"


# ------------------------------------------------------------- 7: effective values


def test_snaps_are_clamped_and_said(fake, tmp_path):
    out = tmp_path / "r.json"
    res = invoke(["run", "--model", "rnn", "--steps", "20", "--snaps", "500", "--rounds", "1",
                  "--out", str(out)])  # fmt: skip
    assert res.exit_code == 0, res.output
    assert "clamped to 20" in res.output
    assert load_result(out).case.snaps == 20


def test_an_executor_given_to_a_peer_is_said_unused_and_left_out_of_its_key():
    peer = Case(backend="torch", strategy="torch-checkpoint", executor="one-call")
    case, notes = peer.effective()
    assert case.executor is None and case.key == replace(peer, executor=None).key
    assert notes == (
        "--executor one-call is not used by strategy torch-checkpoint (a framework's own "
        "checkpointing runs no executor of ours); recorded without it",
    )
    ours = Case(backend="torch", strategy="revolve", executor="one-call")
    assert ours.effective() == (ours, ())
    both, said = replace(peer, snaps=500, steps=20).effective()
    assert (both.snaps, both.executor, len(said)) == (20, None, 2)


def test_a_run_without_the_normal_mode_says_why_it_has_no_ratios():
    from _synthetic import make_result

    from ckptbench.render.run import headline

    line = headline(make_result(modes=(Mode.BASELINE, Mode.CHECKPOINTED)))
    assert "no slowdown or memory savings: both need the normal mode (--modes)" in line
    assert "slowdown -" not in line and "memory savings -" not in line


def test_a_budget_in_the_headline_is_at_its_precision():
    from _synthetic import make_result, with_case

    from ckptbench.render.run import headline

    planned = with_case(make_result(), strategy="optimal", budget_bytes=600 * 1024)
    assert "optimal within 600 KiB" in headline(planned)  # not "within 0.6 MiB"


def test_duplicate_modes_are_bad_input(fake, tmp_path):
    res = invoke(small(tmp_path / "r.json", "--modes", "baseline,baseline"))
    assert res.exit_code == 2 and "twice" in res.output
    assert not (tmp_path / "r.json").exists()
    with pytest.raises(ValueError):
        run_case(Case(), modes=(Mode.NORMAL, Mode.NORMAL))


# ------------------------------------------------------------- 8: no orphan workers

PLUGIN = (
    "from ckptbench.workloads.rnn import rnn\n\n"
    "def make(hidden=8):\n    return rnn(hidden=hidden)\n"
)

SLOW_PLUGIN = """
import os
import time
from ckptbench.workloads.rnn import rnn

class Slow:
    def __init__(self):
        self.inner = rnn(hidden=8)
    def init(self, steps, rng):
        if os.path.exists("checked"):  # a measured mode (the plug-in check came first)
            open("in-init", "w").close()
            time.sleep(120)
        open("checked", "w").close()
        return self.inner.init(steps, rng)
    def step(self, p, s, x):
        return self.inner.step(p, s, x)
    def post(self, p, s):
        return self.inner.post(p, s)
    def loss(self, y):
        return self.inner.loss(y)

def make():
    return Slow()
"""


def _worker_children(pid: int) -> list[psutil.Process]:
    def cmdline(p: psutil.Process) -> str:
        try:
            return " ".join(p.cmdline())
        except psutil.Error:  # a short-lived child (git rev-parse) already gone
            return ""

    for _ in range(400):
        kids = [
            p
            for p in psutil.Process(pid).children(recursive=True)
            if "ckptbench.measure.worker" in cmdline(p)
        ]
        if kids:
            return kids
        time.sleep(0.05)
    raise AssertionError("no worker started")


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_sigterm_stops_workers_and_saves(tmp_path, sig):
    (tmp_path / "slow.py").write_text(SLOW_PLUGIN)
    out = tmp_path / "r.json"
    proc = subprocess.Popen(  # the signals as in a terminal, whatever this run inherited
        [sys.executable, "-c", MAIN_AS_IN_A_TERMINAL, "run", "--model", "slow.py:make",
         "--steps", "10", "--snaps", "3", "--out", str(out)],
        cwd=tmp_path, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    while not (tmp_path / "in-init").exists():  # past the plug-in check, in a measured mode
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    workers = _worker_children(proc.pid)
    proc.send_signal(sig)
    proc.communicate(timeout=WAIT_S)
    assert proc.returncode == 128 + sig
    _, alive = psutil.wait_procs(workers, timeout=WAIT_S)
    assert not alive
    result = load_result(out)
    assert result.modes[-1].status is Status.INTERRUPTED


WAITING_PLUGIN = SLOW_PLUGIN.replace(
    "            time.sleep(120)",
    "            for _ in range(1200):  # until the test says go\n"
    "                if os.path.exists('go'):\n"
    "                    break\n"
    "                time.sleep(0.05)",
)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("nohup") is None, reason="needs nohup")
def test_a_run_under_nohup_survives_a_hangup(tmp_path):
    """``nohup ckptbench run ... &`` starts ckptbench with SIGHUP ignored; the terminal's
    hangup must not stop it (it did: ckptbench installed its own SIGHUP handler anyway)."""
    (tmp_path / "wait.py").write_text(WAITING_PLUGIN)
    out = tmp_path / "r.json"
    proc = subprocess.Popen(
        ["nohup", sys.executable, "-m", "ckptbench", "run", "--model", "wait.py:make",
         "--steps", "10", "--snaps", "3", "--rounds", "1", "--out", str(out)],
        cwd=tmp_path, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    while not (tmp_path / "in-init").exists():  # in a measured mode
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    proc.send_signal(signal.SIGHUP)
    time.sleep(1.0)
    assert proc.poll() is None  # still measuring
    (tmp_path / "go").touch()
    stdout, stderr = proc.communicate(timeout=WAIT_S)
    assert proc.returncode == 0, stdout + stderr
    assert load_result(out).ok


@pytest.mark.slow
def test_worker_dies_with_a_killed_parent(tmp_path):
    (tmp_path / "slow.py").write_text(SLOW_PLUGIN)
    (tmp_path / "checked").touch()  # no plug-in check here: the mode's init sleeps
    script = textwrap.dedent(
        """
        from ckptbench.results.schema import Case, Mode
        from ckptbench.measure.launch import run_mode
        run_mode(Case(model="slow.py:make", steps=10, snaps=3), Mode.BASELINE)
        """
    )
    parent = subprocess.Popen([sys.executable, "-c", script], cwd=tmp_path, env=_env())
    workers = _worker_children(parent.pid)
    parent.kill()
    parent.wait(WAIT_S)
    _, alive = psutil.wait_procs(workers, timeout=WAIT_S)
    assert not alive


# ------------------------------------------------------------- 9, 10: what runs is ckptbench


@pytest.mark.slow
def test_current_folder_never_shadows_modules_and_module_plugins_are_found(tmp_path):
    marker = tmp_path / "shadowed"
    (tmp_path / "autograd.py").write_text(
        f"open({str(marker)!r}, 'w').close()\nraise SystemExit(9)\n"
    )
    pkg = tmp_path / "mymodels"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "nets.py").write_text(PLUGIN)
    env = _env()
    env["CKPTBENCH_WORKER"] = "false"  # no environment variable replaces the worker
    proc = subprocess.run(
        [sys.executable, "-P", "-m", "ckptbench", "run", "--model", "mymodels.nets:make",
         "--steps", "10", "--snaps", "3", "--repeats", "1", "--warmup", "0", "--rounds", "1",
         "--out", "r.json"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert not marker.exists()
    assert load_result(tmp_path / "r.json").ok


def test_stdout_of_a_plugin_cannot_forge_a_result(fake, tmp_path):
    out = tmp_path / "r.json"
    fake.setenv("FAKE_SPOOF", "normal")
    res = invoke(small(out, "--repeats", "2"))
    assert res.exit_code == 0, res.output
    assert len(load_result(out).mode(Mode.NORMAL).iterations) == 2


# ------------------------------------------------------------- 13: sizes answered at once


def test_huge_schedule_comes_from_the_formulas():
    res = invoke(["schedule", "--steps", "1000000000", "--snaps", "50"])
    assert res.exit_code == 0
    assert "7699325912" in res.output  # t(1e9, 50) from the closed form
    res = invoke(["schedule", "--steps", "1000000000", "--snaps", "50", "--actions"])
    assert res.exit_code == 2 and "limit" in res.output


def test_run_refuses_inputs_that_cannot_fit(fake, tmp_path):
    res = invoke(small(tmp_path / "r.json", "--steps", str(2**31)))  # the most a case takes
    assert res.exit_code == 2 and "GiB" in res.output
    assert not (tmp_path / "r.json").exists()


# ------------------------------------------------------------- rounds


def test_rounds_rotate_the_mode_order(fake, tmp_path):
    out = tmp_path / "r.json"
    res = invoke(small(out, "--rounds", "3", "--repeats", "2"))
    assert res.exit_code == 0, res.output
    result = load_result(out)
    order = [(m.round, m.mode.value) for m in result.modes]
    assert order == [
        (0, "baseline"), (0, "normal"), (0, "checkpointed"),
        (1, "normal"), (1, "checkpointed"), (1, "baseline"),
        (2, "checkpointed"), (2, "baseline"), (2, "normal"),
    ]  # fmt: skip
    assert len(result.mode(Mode.NORMAL).iterations) == 6


# ------------------------------------------------------------- out of memory as the result


def test_expect_oom_makes_the_limit_the_point_of_the_run(fake, tmp_path):
    fake.setenv("FAKE_ALLOC", "normal:300")
    args = small(tmp_path / "a.json", "--memory-limit", "200MiB", "--repeats", "1")
    assert invoke(args).exit_code == 1  # an out-of-memory mode fails a plain run
    res = invoke([*small(tmp_path / "b.json", "--memory-limit", "200MiB", "--repeats", "1"),
                  "--expect-oom", "normal"])  # fmt: skip
    assert res.exit_code == 0, res.output
    assert "expected: normal exceeded the memory limit" in res.output
    fake.delenv("FAKE_ALLOC")
    res = invoke([*small(tmp_path / "c.json", "--memory-limit", "2GiB", "--repeats", "1"),
                  "--expect-oom", "normal"])  # fmt: skip
    assert res.exit_code == 1 and "did not" in res.output
    assert invoke(small(tmp_path / "d.json", "--expect-oom", "normal")).exit_code == 2


def test_device_memory_is_summarised_beside_host_rss():
    from ckptbench.results.schema import Iteration, ModeResult
    from ckptbench.results.summary import compute

    def summarize(case, modes):  # the stored document of these figures
        return compute(case, modes).as_dict()

    def mode(m, device_mib):
        its = tuple(
            Iteration(1.0, 1.0, 100 * 2**20, 50 * 2**20, peak_device_bytes=device_mib * 2**20)
            for _ in range(3)
        )
        return ModeResult(mode=m, status=Status.OK, iterations=its)

    case = Case(backend="torch", device="cuda")
    s = summarize(
        case, [mode(Mode.BASELINE, 10), mode(Mode.NORMAL, 410), mode(Mode.CHECKPOINTED, 30)]
    )
    assert s["device_overhead_bytes"]["normal"] == 400 * 2**20
    assert s["device_memory_savings"] == pytest.approx(20.0)
    cpu = ModeResult(
        mode=Mode.BASELINE, status=Status.OK, iterations=(Iteration(1.0, 1.0, 2**20, 2**20),)
    )
    assert "device_memory_savings" not in summarize(Case(), [cpu])
    # CPU time / wall time says nothing about a busy machine when the worker waits for a GPU
    assert s["cpu_share"] == {} and s["device_peak_exact"] is True
    assert summarize(Case(), [cpu])["cpu_share"] == {"baseline": 1.0}


def test_a_gpu_run_quotes_device_memory_and_says_when_peaks_are_upper_bounds():
    from ckptbench.render.run import headline, run_table
    from ckptbench.render.table import to_text
    from ckptbench.results.schema import Iteration, ModeResult, RunResult

    def mode(m, device_mib, exact=True):
        its = tuple(
            Iteration(
                1.0,
                0.3,
                2700 * 2**20,
                2600 * 2**20,
                peak_device_bytes=device_mib * 2**20,
                start_device_bytes=6 * 2**20,
                device_peak_exact=exact,
            )
            for _ in range(3)
        )
        return ModeResult(mode=m, status=Status.OK, iterations=its)

    case = Case(backend="jax", device="cuda", rounds=1)
    for exact, bound in [(True, ""), (False, " (upper bounds)")]:
        modes = (mode(Mode.BASELINE, 10), mode(Mode.NORMAL, 410))
        modes += (mode(Mode.CHECKPOINTED, 30, exact),)
        result = RunResult(case, modes, {}, created="now")
        line = headline(result)
        assert f"device memory savings 20.0x{bound} (host RSS " in line, line
        text = to_text(run_table(result), width=200)
        assert "device peak" in text and "+400.0 MiB" in text and "20.0x" in text
