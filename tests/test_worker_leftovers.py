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
