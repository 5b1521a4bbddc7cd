"""What a plug-in's worker leaves behind (an audit of the measurement processes, 2026-12):
the output it wrote to stderr, and processes that left its group and its environment. Each
test failed on the code before its fix."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import pytest

import ckptbench
from ckptbench.measure.launch import run_mode
from ckptbench.measure.tasks import TaskError, run_task
from ckptbench.results.schema import Case, Mode, Status

ROOT = Path(__file__).resolve().parent.parent

#: A worker that writes 4 MiB to stderr in one line, then two short lines, and exits
#: without a result.
LOUD_WORKER = (
    "import os, sys\n"
    "sys.stdin.read()\n"
    "os.write(2, b'E' * (4 << 20))\n"
    "os.write(2, b'\\nnext to last\\nthe last line\\n')\n"
    "sys.exit(3)\n"
)


class _CountingFile:
    """A file that counts the bytes read from it."""

    def __init__(self, file, counts: list[int]) -> None:
        self.file = file
        self.counts = counts

    def __enter__(self):
        return self

    def __exit__(self, *exc: object) -> None:
        self.file.close()

    def __getattr__(self, name: str):
        return getattr(self.file, name)

    def read(self, *args):
        data = self.file.read(*args)
        self.counts.append(len(data))
        return data


def test_a_worker_s_huge_stderr_is_read_only_as_far_as_its_tail(monkeypatch):
    """A plug-in that wrote 300 MiB to stderr had all of it read into ckptbench's own memory
    (661 MB max RSS against 48 MB), and every line of it among the last eight kept in the
    result's ``stderr_tail``; only the last lines are ever shown."""
    from ckptbench.measure.launch import STDERR_TAIL_BYTES

    counts: list[int] = []
    real = tempfile.TemporaryFile
    monkeypatch.setattr(
        tempfile, "TemporaryFile", lambda *a, **k: _CountingFile(real(*a, **k), counts)
    )
    worker = [sys.executable, "-c", LOUD_WORKER]
    case = Case(model="lstm", steps=4, snaps=2)
    result, _ = run_mode(case, Mode.BASELINE, worker=worker)
    assert result.status is Status.CRASHED
    assert result.stderr_tail.endswith("next to last\nthe last line")
    assert len(result.stderr_tail) <= STDERR_TAIL_BYTES
    assert counts and sum(counts) <= STDERR_TAIL_BYTES

    counts.clear()
    with pytest.raises(TaskError, match=r"last stderr line: the last line$"):
        run_task(case, {"task": "device"}, worker=worker)
    assert counts and sum(counts) <= STDERR_TAIL_BYTES


def _daemon_plugin(pids: Path, sleep: str) -> str:
    """A plug-in whose import double-forks a ``sleep 600`` in a session of its own and with
    an empty environment (no worker token), and records its pid in ``pids``."""
    return (
        "import os\n"
        "from ckptbench.workloads.rnn import rnn\n"
        "if os.fork() == 0:\n"
        "    try:\n"
        "        os.setsid()\n"
        "        if os.fork() == 0:\n"
        f"            with open({str(pids)!r}, 'a') as fh:\n"
        "                fh.write(f'{os.getpid()}\\n')\n"
        f"            os.execve({sleep!r}, ['sleep', '600'], {{}})\n"
        "    finally:\n"
        "        os._exit(0)\n"
        "\n"
        "def make():\n"
        "    return rnn(hidden=8)\n"
    )


def _sleeping(pid: int) -> bool:
    """Whether ``pid`` is still the plug-in's ``sleep 600``, alive (a zombie is not)."""
    with contextlib.suppress(psutil.Error):
        proc = psutil.Process(pid)
        return proc.cmdline() == ["sleep", "600"] and proc.status() != psutil.STATUS_ZOMBIE
    return False


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a child subreaper is Linux's")
def test_a_daemon_without_the_worker_s_session_or_environment_ends_with_the_run(tmp_path):
    """A plug-in that double-forked a ``sleep`` with setsid and an empty environment left
    one running per worker after `ckptbench run` returned: it had left the worker's
    process group and dropped the worker's token, all stop_worker looked for."""
    sleep = shutil.which("sleep")
    assert sleep is not None
    pids = tmp_path / "daemons.pid"
    (tmp_path / "daemon.py").write_text(_daemon_plugin(pids, sleep))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    argv = [sys.executable, "-m", "ckptbench", "run", "--model", "daemon.py:make",
            "--steps", "10", "--hidden", "8", "--snaps", "3", "--rounds", "1", "--warmup",
            "0", "--repeats", "1", "-q", "--out", str(tmp_path / "r.json")]  # fmt: skip
    try:
        proc = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=600)  # fmt: skip
        assert proc.returncode == 0, proc.stdout + proc.stderr
        found = [int(line) for line in pids.read_text().split()]
        assert len(found) >= 4  # the plug-in check and three modes, one worker each
        assert [pid for pid in found if _sleeping(pid)] == []
    finally:
        for line in pids.read_text().split() if pids.exists() else ():  # leftovers
            if _sleeping(int(line)):
                os.kill(int(line), signal.SIGKILL)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a child subreaper is Linux's")
def test_what_a_worker_orphaned_is_killed_and_reaped_and_nothing_else(tmp_path):
    """The same daemon from a worker started within ``stop_on_signals`` (as the command
    line starts every worker): it is reparented to this process and killed and reaped with
    its worker, as is one that exited by itself (no zombie is left); a process this one
    started meanwhile in its own process group is left alone."""
    from ckptbench.measure.launch import start_worker, stop_on_signals, stop_worker

    sleep = shutil.which("sleep")
    assert sleep is not None
    pids = tmp_path / "daemons.pid"
    script = (
        "import os, sys, time\n"
        "sys.stdin.read()\n"
        "for seconds in ('0', '600'):\n"
        "    if os.fork() == 0:\n"
        "        os.setsid()\n"
        "        if os.fork() == 0:\n"
        f"            with open({str(pids)!r}, 'a') as fh:\n"
        "                fh.write(f'{seconds} {os.getpid()}\\n')\n"
        f"            os.execve({sleep!r}, ['sleep', seconds], {{}})\n"
        "        os._exit(0)\n"
        "time.sleep(600)\n"
    )
    case = Case(model="lstm", steps=4, snaps=2)
    bystander = None
    try:
        with stop_on_signals():
            proc, channel = start_worker(case, {}, [sys.executable, "-c", script], None, None)
            try:
                while len(pids.read_text().splitlines() if pids.exists() else ()) < 2:
                    assert proc.poll() is None
                    time.sleep(0.01)
                bystander = subprocess.Popen([sleep, "600"])  # after the worker, in our group
            finally:
                stop_worker(proc)
                channel.close()
            daemons = dict(line.split() for line in pids.read_text().splitlines())
            assert not psutil.pid_exists(int(daemons["0"]))  # reaped, not a zombie of ours
            assert not psutil.pid_exists(int(daemons["600"]))
        assert bystander.poll() is None
    finally:
        for line in pids.read_text().splitlines() if pids.exists() else ():  # leftovers
            if _sleeping(int(line.split()[1])):
                os.kill(int(line.split()[1]), signal.SIGKILL)
        if bystander is not None:
            bystander.kill()
            bystander.wait()


def _spawning_plugin(pids: Path, sleep: str, marker: Path | None, hold: str) -> str:
    """A plug-in whose import starts two ``sleep 600``, one in the worker's process group
    and one in a session of its own (its environment intact, so it carries the worker's
    token), records the worker's pid and theirs in ``pids`` and then runs ``hold``. With a
    ``marker`` only the second worker that imports it does so: the first (the plug-in
    check) creates the marker and goes on, so the second is a measured mode's."""
    first = (
        f"if not os.path.exists({str(marker)!r}):\n    open({str(marker)!r}, 'w').close()\nelse:\n"
        if marker is not None
        else "if True:\n"
    )
    return (
        "import os, subprocess, time\n"
        "from ckptbench.workloads.rnn import rnn\n"
        f"{first}"
        f"    a = subprocess.Popen([{sleep!r}, '600'])\n"
        f"    b = subprocess.Popen([{sleep!r}, '600'], start_new_session=True)\n"
        f"    with open({str(pids)!r} + '.tmp', 'w') as fh:\n"
        "        fh.write(f'{os.getpid()} {a.pid} {b.pid}\\n')\n"
        f"    os.replace({str(pids)!r} + '.tmp', {str(pids)!r})\n"
        f"    {hold}\n"
        "\n"
        "def make():\n"
        "    return rnn(hidden=8)\n"
    )


def _alive(pid: int, name: str) -> bool:
    """Whether ``pid`` is still a live (not zombie) process whose command line holds
    ``name``: a pid reused meanwhile by something else is not."""
    with contextlib.suppress(psutil.Error):
        proc = psutil.Process(pid)
        return name in " ".join(proc.cmdline()) and proc.status() != psutil.STATUS_ZOMBIE
    return False


def _kill_ckptbench_and_wait(tmp_path: Path, plugin: str, wait_for: set[str]) -> dict[str, bool]:
    """Start ``ckptbench run`` on ``plugin``, SIGKILL it once the plug-in has recorded its
    pids, then wait for the processes named in ``wait_for`` (``worker``, ``in-group
    sleep``, ``setsid sleep``) to be gone, up to two minutes (a bound on a hang, not a
    speed); which of the three are still alive then. Any survivor is killed."""
    pids = tmp_path / "spawned.pid"
    (tmp_path / "spawn.py").write_text(plugin)
    env = dict(os.environ)
    root = str(Path(ckptbench.__file__).resolve().parents[1])  # the ckptbench under test
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    argv = [sys.executable, "-m", "ckptbench", "run", "--model", "spawn.py:make",
            "--steps", "10", "--hidden", "8", "--snaps", "3", "--rounds", "1", "--warmup",
            "0", "--repeats", "1", "-q", "--out", str(tmp_path / "r.json")]  # fmt: skip
    names: dict[int, tuple[str, str]] = {}
    parent = subprocess.Popen(argv, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        while not pids.exists():
            assert parent.poll() is None, "ckptbench ended before the plug-in started"
            time.sleep(0.05)
        worker, in_group, own_session = (int(p) for p in pids.read_text().split())
        names = {
            worker: ("worker", "ckptbench.measure.worker"),
            in_group: ("in-group sleep", "600"),
            own_session: ("setsid sleep", "600"),
        }
        parent.kill()  # kill -9: ckptbench's own cleanup never runs
        parent.wait()
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and any(
            _alive(p, n) for p, (label, n) in names.items() if label in wait_for
        ):
            time.sleep(0.1)
        return {label: _alive(p, n) for p, (label, n) in names.items()}
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
        for pid, (_, name) in names.items():  # leftovers, by pid
            if _alive(pid, name):
                os.kill(pid, signal.SIGKILL)


@pytest.mark.slow
@pytest.mark.skipif(sys.platform == "win32", reason="process groups and kill -9 are POSIX")
@pytest.mark.parametrize("stage", ["check", "mode"])
def test_what_a_worker_started_dies_when_ckptbench_is_killed_outright(tmp_path, stage):
    """After a ``kill -9`` of ckptbench its worker exited (``PR_SET_PDEATHSIG`` was SIGKILL)
    but what the plug-in started kept running, reparented to init: a child in the worker's
    own process group and one started with ``start_new_session``, in the plug-in check and
    in a measured mode alike. Now the worker kills its group and what carries its token
    before it ends."""
    sleep = shutil.which("sleep")
    assert sleep is not None
    marker = tmp_path / "checked" if stage == "mode" else None
    plugin = _spawning_plugin(tmp_path / "spawned.pid", sleep, marker, "time.sleep(600)")
    everything = {"worker", "in-group sleep", "setsid sleep"}
    alive = _kill_ckptbench_and_wait(tmp_path, plugin, wait_for=everything)
    assert alive == {"worker": False, "in-group sleep": False, "setsid sleep": False}


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_a_worker_whose_plugin_holds_the_gil_still_ends_after_its_parent(tmp_path):
    """The backstop: a plug-in whose C code never lets the watchdog thread run (``sum`` over
    a long ``range`` holds the GIL) leaves the worker to the parent-death signal, which arms
    SIGALRM; the worker ends, what it started is left (docs/usage.md says so). The code
    before passed this too (its parent-death signal was SIGKILL): it guards what replaced
    that signal, so the worker still never outlives its parent for long."""
    sleep = shutil.which("sleep")
    assert sleep is not None
    plugin = _spawning_plugin(tmp_path / "spawned.pid", sleep, None, "sum(range(10**15))")
    alive = _kill_ckptbench_and_wait(tmp_path, plugin, wait_for={"worker"})
    assert alive["worker"] is False
