"""A hostile plug-in against ckptbench's own process: the signal it sends its parent, and the
process group it tries to join (docs/architecture.md, "The worker's channel and the failure model").

Every test runs ckptbench as a command in a process of its own; a process a plug-in leaves
is killed only by the pid it wrote down, never by a pattern."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import psutil
import pytest
from _cli import MAIN_AS_IN_A_TERMINAL

import ckptbench
from ckptbench.results.schema import Status
from ckptbench.results.store import load_result

#: the ckptbench under test (the one this test imported), for the command's PYTHONPATH
ROOT = Path(ckptbench.__file__).resolve().parent.parent
#: Only a safety net for waiting on processes; never a performance limit.
WAIT_S = 120

pytestmark = pytest.mark.skipif(
    not hasattr(signal, "sigtimedwait"), reason="the sender of a signal is read on Linux"
)

PLUGIN = """
import os, signal, subprocess, sys, time
from ckptbench.workloads.rnn import rnn

class Model:
    def __init__(self):
        self.inner = rnn(hidden=8)
    def init(self, steps, rng):
        return self.inner.init(steps, rng)
    def step(self, p, s, x):
        return self.inner.step(p, s, x)
    def post(self, p, s):
        return self.inner.post(p, s)
    def loss(self, y):
        return self.inner.loss(y)

def make():
    if os.path.exists("checked"):  # a measured mode: the plug-in check came first
        hostile()
    open("checked", "w").close()
    return Model()
"""

SIGTERM_PARENT = """
def hostile():
    os.kill(os.getppid(), signal.SIGTERM)
"""

#: the first measured worker leaves its group for ckptbench's, starts a child there without
#: the worker's token and hangs; it says when SIGTERM reaches it
HANGS_IN_CKPTBENCHS_GROUP = """
def hostile():
    if os.path.exists("hung"):
        return
    open("hung", "w").close()
    def on_term(signum, frame):
        open("got-sigterm", "w").close()
        os._exit(0)
    signal.signal(signal.SIGTERM, on_term)
    try:
        os.setpgid(0, os.getpgid(os.getppid()))
        open("joined", "w").close()
    except PermissionError:  # the worker has a session of its own: no group outside it
        open("refused", "w").close()
    code = "import os, time; open('left.pid', 'w').write(str(os.getpid())); time.sleep(600)"
    subprocess.Popen([sys.executable, "-c", code], env={})
    time.sleep(600)
"""

#: the first measured worker joins ckptbench's group if it can, and there starts a child that
#: starts a grandchild without the worker's token and exits: the grandchild is orphaned
#: (adopted by ckptbench) before the worker is stopped; then the mode goes on as usual
ORPHANED_IN_CKPTBENCHS_GROUP = """
def hostile():
    if os.path.exists("left.pid"):
        return
    try:
        os.setpgid(0, os.getpgid(os.getppid()))
        open("joined", "w").close()
    except PermissionError:
        open("refused", "w").close()
    code = "import os, time; open('left.pid', 'w').write(str(os.getpid())); time.sleep(600)"
    middle = f"import subprocess, sys; subprocess.Popen([sys.executable, '-c', {code!r}], env={{}})"
    subprocess.run([sys.executable, "-c", middle], check=True)
    while not os.path.exists("left.pid"):
        time.sleep(0.01)
"""


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    return env


def _run(folder: Path, plugin: str, *extra: str, check=False) -> subprocess.CompletedProcess:
    """``ckptbench run`` of the plug-in whose ``hostile()`` runs in every measured mode
    (``check``: in the plug-in check too)."""
    if check:
        (folder / "checked").touch()
    (folder / "hostile.py").write_text(PLUGIN + plugin)
    # the stop signals as in a terminal, whatever this run inherited; in a session of its
    # own, as a shell's job is in a group of its own: a worker that joins ckptbench's group
    # then joins that one, never the test run's, and no signal to it reaches pytest
    return subprocess.run(
        [sys.executable, "-c", MAIN_AS_IN_A_TERMINAL, "run", "--model", "hostile.py:make",
         "--steps", "10", "--snaps", "3", "--rounds", "1", "--out", "r.json", *extra],
        cwd=folder, env=_env(), capture_output=True, text=True, timeout=WAIT_S,
        start_new_session=True,
    )  # fmt: skip


def test_a_plugin_that_sends_ckptbench_sigterm_fails_its_modes_and_does_not_stop_the_run(
    tmp_path: Path,
):
    # it was the user's stop: exit 143, "interrupted by SIGTERM", the result saying so
    done = _run(tmp_path, SIGTERM_PARENT)
    assert done.returncode != 128 + signal.SIGTERM, done.stderr
    assert "interrupted" not in done.stderr
    result = load_result(tmp_path / "r.json")
    assert "interrupted" not in result.environment
    assert [m.status for m in result.modes] == [Status.FAILED] * 3
    for mode in result.modes:
        assert "sent ckptbench SIGTERM: a plug-in tried to stop ckptbench" in mode.error


def test_a_plugin_that_sends_sigterm_in_its_check_is_a_failed_check_not_a_stop(tmp_path: Path):
    # the check ran as the user's stop too: exit 143, "interrupted by SIGTERM"
    done = _run(tmp_path, SIGTERM_PARENT, check=True)
    assert done.returncode == 2, done.stderr
    assert "loading it in a fresh worker failed" in done.stderr
    assert "sent ckptbench SIGTERM" in done.stderr


def test_a_worker_that_joined_ckptbenchs_group_is_stopped_with_what_it_started(
    tmp_path: Path,
):
    # killpg of the worker's own group missed it: it got no SIGTERM, only a SIGKILL two
    # seconds later, and its child (in ckptbench's group, without the token) outlived the run
    done = _run(tmp_path, HANGS_IN_CKPTBENCHS_GROUP, "--timeout", "10")
    pid = int((tmp_path / "left.pid").read_text())
    try:
        assert (tmp_path / "got-sigterm").exists(), done.stderr
        result = load_result(tmp_path / "r.json")
        assert [m.status for m in result.modes] == [Status.TIMEOUT, Status.OK, Status.OK]
        assert not _sleeping_child(pid)
        assert (tmp_path / "refused").exists()  # since the worker has a session of its own
    finally:
        if _sleeping_child(pid):  # by the pid it wrote down, and only while it is that child
            os.kill(pid, signal.SIGKILL)


def test_a_process_orphaned_in_ckptbenchs_group_without_the_token_does_not_outlive_it(
    tmp_path: Path,
):
    """A worker that joined ckptbench's group, and there left a grandchild that dropped the
    token and was orphaned (reparented to ckptbench) before the worker was stopped, left it
    running: nothing told it from a child of ckptbench's own. Now the worker has a session
    of its own, whose processes cannot join ckptbench's group at all."""
    done = _run(tmp_path, ORPHANED_IN_CKPTBENCHS_GROUP)
    pid = int((tmp_path / "left.pid").read_text())
    try:
        assert done.returncode == 0, done.stderr
        assert not _sleeping_child(pid)
        assert (tmp_path / "refused").exists()
    finally:
        if _sleeping_child(pid):  # by the pid it wrote down, and only while it is that child
            os.kill(pid, signal.SIGKILL)


def _sleeping_child(pid: int) -> bool:
    try:
        return "time.sleep(600)" in " ".join(psutil.Process(pid).cmdline())
    except psutil.Error:
        return False
