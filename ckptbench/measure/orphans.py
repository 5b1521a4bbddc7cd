"""What a plug-in's processes leave when their worker ends: found and killed.

A worker runs in a process group of its own, which ``launch.stop_worker`` stops whole, but a
process the plug-in started can leave that group (``setsid``) and outlive its parent (a
double fork), and is then reparented away from the worker. Two nets catch it:

* the worker's token: :data:`WORKER_TOKEN_VAR` is set in each worker's environment and
  inherited by whatever it starts; :func:`kill_carrying` SIGKILLs every process of this user
  that still holds it (a process started with an environment of its own has dropped it);
* on Linux, while the command line measures (:func:`adopting`, entered by
  ``launch.stop_on_signals``), ckptbench's process is a child subreaper
  (``PR_SET_CHILD_SUBREAPER``): a worker's orphaned descendant is reparented to it, not to
  init, whatever its environment or session, and :func:`worker_ended` SIGKILLs and reaps
  every such child (and what it started) once the worker has been reaped.

Which children are a worker's leftovers: those of this process that are not a live worker
(:func:`launching` holds the list, and a lock while one starts), were started no earlier than
the worker that ended, and are in a process group other than this process's own (a worker
is started in a group of its own; what ckptbench or a library runs beside it, ``git`` or a
resource tracker, stays in ckptbench's, and nothing tells such a child from one adopted).
No plug-in process can join ckptbench's own group (``os.setpgid(0,
os.getpgid(os.getppid()))`` fails with EPERM): the worker is started in a session of its
own, and a process group is joined only within a session. Until 2026-11-30 the worker had
only a group of its own, and a process that joined ckptbench's group, dropped the token and
was orphaned before the worker was stopped was left running (the own-group rule above).

Not a subreaper elsewhere: a Dask worker running a sweep's cell never enters
``stop_on_signals`` (its tasks run off the main thread). It is a long-lived process that can
run other tasks too, whose orphans it would adopt (and whose daemons started meanwhile the
cleanup could take for a worker's); there the token is the net.

When the parent itself dies without a cleanup (a ``kill -9`` of ckptbench or of the Dask
worker running the cell), the worker does it (:func:`die_with_parent`, called by
``measure.worker`` before any plug-in code runs): a watchdog thread polls the parent's pid
and, once it has changed, SIGKILLs every process carrying the worker's token and then the
worker's process group, the worker with it (:func:`end_worker`). Nothing runs inside an
iteration. The subreaper is gone with the parent, so a process that left the group *and*
dropped the token is not found then. The backstop, on Linux, for a watchdog that cannot
run (a plug-in holding the GIL in C code): ``PR_SET_PDEATHSIG`` sends
:data:`PARENT_DEATH_SIGNAL`, whose handler is libc's ``alarm()`` itself, so the kernel arms
SIGALRM, whose default action ends the worker, as many seconds later as the signal's number
(12 for SIGUSR2 on x86 and ARM), with no Python code involved. A plug-in that handles,
blocks or ignores SIGUSR2 or SIGALRM disarms that backstop (not the watchdog).
"""

from __future__ import annotations

import collections
import contextlib
import ctypes
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, NoReturn

__all__ = [
    "PARENT_DEATH_SIGNAL",
    "WORKER_TOKEN_VAR",
    "adopting",
    "descendants",
    "die_with_parent",
    "end_worker",
    "kill_all",
    "kill_carrying",
    "launching",
    "was_worker",
    "worker_ended",
]

#: Set in each worker's environment to a token of its own, which every process it starts
#: inherits: what :func:`kill_carrying` finds a descendant by once it has left the group.
WORKER_TOKEN_VAR = "CKPTBENCH_WORKER_TOKEN"

#: What the kernel sends a worker when its parent dies (Linux): its handler arms the
#: SIGALRM backstop, that many seconds (module doc).
PARENT_DEATH_SIGNAL = getattr(signal, "SIGUSR2", None)

_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36
_PR_GET_CHILD_SUBREAPER = 37
#: How long a SIGKILLed leftover may take to exit before it is left (a process stuck in the
#: kernel), and how many generations of leftovers one cleanup goes through.
_REAP_GRACE_S = 2.0
_MAX_PASSES = 100
#: How many times a worker whose parent died looks for processes carrying its token (one
#: may have started another while the previous pass killed it).
_TOKEN_PASSES = 3

_ADOPTING = {"on": False}
#: Workers started and not yet reaped: pid -> their start (``psutil`` create time).
_LIVE: dict[int, float] = {}
_LIVE_LOCK = threading.Lock()
#: The pids of the last workers started, reaped or not (:func:`was_worker`).
_RECENT: collections.deque[int] = collections.deque(maxlen=64)


def _prctl_subreaper(on: bool) -> bool | None:
    """Set this process's child-subreaper flag; its value before, or None where it cannot
    be read or set (not Linux)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        was = ctypes.c_int(0)
        if libc.prctl(_PR_GET_CHILD_SUBREAPER, ctypes.byref(was), 0, 0, 0) != 0:
            return None
        if libc.prctl(_PR_SET_CHILD_SUBREAPER, int(on), 0, 0, 0) != 0:
            return None
    except (OSError, AttributeError):
        return None
    return bool(was.value)


@contextlib.contextmanager
def adopting() -> Iterator[None]:
    """Within the block, on Linux, this process adopts what its workers orphan and
    :func:`worker_ended` kills it; elsewhere the block changes nothing."""
    was_on = _ADOPTING["on"]
    before = _prctl_subreaper(True)
    _ADOPTING["on"] = before is not None
    try:
        yield
    finally:
        _ADOPTING["on"] = was_on
        if before is not None:
            _prctl_subreaper(before)


@contextlib.contextmanager
def launching() -> Iterator[Callable[[int], None]]:
    """Hold while starting a worker, and call what this yields with its pid: no cleanup
    takes the new process for a leftover meanwhile, and its own will know when it started."""
    with _LIVE_LOCK:
        yield _started


def _started(pid: int) -> None:
    """Note the worker ``pid`` (a child, not yet reaped) as live, with its start time."""
    import psutil

    _RECENT.append(pid)
    try:
        _LIVE[pid] = psutil.Process(pid).create_time()
    except psutil.Error:
        _LIVE[pid] = 0.0  # it cannot be read: every child not live is a leftover then


def was_worker(pid: int) -> bool:
    """Whether ``pid`` is one of the last workers this process started (reaped or not)."""
    return pid in _RECENT


def worker_ended(pid: int) -> None:
    """The worker ``pid`` has been reaped: forget it and, while :func:`adopting`, SIGKILL
    and reap every leftover of it this process adopted, generation by generation."""
    with _LIVE_LOCK:
        since = _LIVE.pop(pid, None)
        if since is None or not _ADOPTING["on"]:
            return
        tried: set[int] = set()  # one that cannot be killed (setuid) is tried once
        for _ in range(_MAX_PASSES):
            if not _kill_leftovers(since, tried):
                return


def _kill_leftovers(since: float, tried: set[int]) -> bool:
    """SIGKILL each leftover child not ``tried`` yet (and all it started) and reap it;
    whether there was one. Its children are this process's once it has exited: the next
    pass takes them."""
    import psutil

    own_group = os.getpgrp()
    leftovers = []
    for child in psutil.Process().children():
        with contextlib.suppress(psutil.Error, OSError):
            if (
                child.pid not in _LIVE
                and child.pid not in tried
                and os.getpgid(child.pid) != own_group
                and child.create_time() >= since
            ):
                leftovers.append(child)
    tried.update(child.pid for child in leftovers)
    for child in leftovers:
        with contextlib.suppress(psutil.Error, OSError):
            for descendant in child.children(recursive=True):
                _kill(descendant.pid)
        _kill(child.pid)
    _reap([child.pid for child in leftovers])
    return bool(leftovers)


def _kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, signal.SIGKILL)


def _reap(pids: list[int]) -> None:
    """Reap these SIGKILLed children, waiting up to :data:`_REAP_GRACE_S` in all."""
    deadline = time.monotonic() + _REAP_GRACE_S
    left = set(pids)
    while left:
        for pid in list(left):
            try:
                done, _ = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                done = pid
            if done:
                left.discard(pid)
        if not left or time.monotonic() > deadline:
            return
        time.sleep(0.01)


def descendants(pid: int) -> list[Any]:
    """The processes descended from ``pid`` now (``psutil.Process``), whatever their group."""
    import psutil

    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return []


def kill_all(processes: list[Any]) -> None:
    """SIGKILL each of ``processes`` (from :func:`descendants`) still running; psutil
    checks that its pid was not reused meanwhile."""
    import psutil

    for p in processes:
        with contextlib.suppress(psutil.Error, OSError):
            p.kill()


def kill_carrying(env: dict[str, Any]) -> int:
    """SIGKILL every other process of this user whose environment holds the token of the
    worker environment ``env`` (nothing if it has none); how many were signalled."""
    token = env.get(WORKER_TOKEN_VAR)
    if not token:
        return 0
    import psutil

    killed = 0
    for p in psutil.process_iter():
        with contextlib.suppress(psutil.Error, OSError):
            if p.pid != os.getpid() and p.environ().get(WORKER_TOKEN_VAR) == token:
                p.kill()
                killed += 1
    return killed


def die_with_parent(parent_pid: int, poll_s: float) -> None:
    """In a worker, before any plug-in code runs: when the parent ``parent_pid`` dies, end
    what this worker started and the worker (:func:`end_worker`). A watchdog thread checks
    the parent every ``poll_s`` seconds; on Linux the kernel's parent-death signal arms the
    SIGALRM backstop (module doc). A parent already gone ends the worker at once."""
    token = os.environ.get(WORKER_TOKEN_VAR)  # read before a plug-in can change it
    getppid, sleep = os.getppid, time.sleep  # bound before a plug-in can replace them
    _arm_backstop()
    if getppid() != parent_pid:  # the parent died before the signal was set
        end_worker(token)

    def watch() -> None:
        while getppid() == parent_pid:
            sleep(poll_s)
        end_worker(token)

    threading.Thread(target=watch, name="parent-watchdog", daemon=True).start()


def end_worker(token: str | None) -> NoReturn:
    """SIGKILL every process carrying the worker's ``token`` (a few passes: one may have
    started another meanwhile), then the worker's process group, which holds the worker
    (``launch`` starts it as the group's leader; a worker that leads no group kills only
    itself). Never returns."""
    with contextlib.suppress(Exception):  # whatever fails here, the worker still ends
        for _ in range(_TOKEN_PASSES):
            if not kill_carrying({WORKER_TOKEN_VAR: token}):
                break
    with contextlib.suppress(OSError, AttributeError):  # no process groups: itself only
        if os.getpgrp() == os.getpid():
            os.killpg(os.getpid(), signal.SIGKILL)
    with contextlib.suppress(OSError, AttributeError):
        os.kill(os.getpid(), signal.SIGKILL)
    os._exit(3)


def _arm_backstop() -> None:
    """Linux: make the kernel send :data:`PARENT_DEATH_SIGNAL` when the parent dies, with
    libc's ``alarm()`` as its handler (module doc). Where either cannot be set, nothing."""
    sig = PARENT_DEATH_SIGNAL
    if not sys.platform.startswith("linux") or sig is None:
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.signal.restype = ctypes.c_void_p
        libc.signal.argtypes = (ctypes.c_int, ctypes.c_void_p)
        alarm = ctypes.cast(libc.alarm, ctypes.c_void_p).value
        if libc.signal(int(sig), alarm) == ctypes.c_void_p(-1).value:  # SIG_ERR
            return
        libc.prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
    except (OSError, AttributeError):
        return
