"""Who sent ckptbench a stop signal: the user, or code running in one of its own workers.

A plug-in is untrusted code that runs in ckptbench's workers, and a worker is ckptbench's
child: ``os.kill(os.getppid(), signal.SIGTERM)`` in a plug-in's factory reached
ckptbench's handler, which took it for the user's stop (saved a partial result, exited
143). A Python signal handler is not told who sent the signal, but ``sigtimedwait`` is
(``si_pid``). So on Linux, while :func:`watching`, the stop signals are blocked in the
main thread (and in every thread it starts meanwhile) and one thread waits for them: a
signal sent by a descendant of this process (a worker, what a worker started, what this
process adopted as their subreaper, or a worker that has exited but is not reaped yet) is
recorded (:func:`since`) and not taken as a stop: the launcher fails the mode or task it
came during (``launch``). Any other sender (a shell's ``kill``, a terminal's Ctrl-C from
the kernel, ckptbench itself) is the user's stop, handed to the main thread's handler
(``_thread.interrupt_main``), as before.

What stays as before: a signal that reaches a thread started before the block with the
signal unblocked (Python's own handler then runs, with no sender; numpy's BLAS thread pool
was one, so the commands that start workers import numpy first, with the signals blocked:
:func:`import_blocked`), one whose sender has exited and been reaped before it is looked
up (microseconds), and every platform without ``sigtimedwait`` (macOS). A worker must not
inherit the blocked mask: the launcher starts it inside :func:`unblocked`. A process
ckptbench starts otherwise within the block (``git``) inherits it.
"""

from __future__ import annotations

import _thread
import contextlib
import importlib
import os
import signal
import sys
import threading
from collections.abc import Iterable, Iterator

from ckptbench.measure import orphans

__all__ = ["count", "describe", "import_blocked", "since", "unblocked", "watching"]

#: How long the waiting thread sleeps between looks at whether the block has ended.
_POLL_S = 0.05
#: At most this many signals from workers are kept (a plug-in may send them in a loop).
_KEEP = 100

_STATE: dict[str, object] = {"watched": frozenset()}
_SENT: list[tuple[int, int]] = []  # (signal number, sender pid), oldest first
_COUNT = [0]  # every signal from a worker, kept or not


def available() -> bool:
    """Whether senders can be told apart here (Linux: ``sigtimedwait`` and thread masks)."""
    return hasattr(signal, "sigtimedwait") and hasattr(signal, "pthread_sigmask")


def import_blocked(module: str = "numpy") -> None:
    """Import ``module`` with the stop signals blocked in this thread: the thread pool it
    starts (numpy's BLAS) inherits them blocked and never takes one :func:`watching` waits
    for. A stop signal meanwhile is delivered once the import is done."""
    if not available() or module in sys.modules:
        return
    stops = {getattr(signal, n) for n in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, n)}
    old = signal.pthread_sigmask(signal.SIG_BLOCK, stops)
    try:
        with contextlib.suppress(ImportError):
            importlib.import_module(module)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def count() -> int:
    """How many stop signals ckptbench's own workers have sent it so far."""
    return _COUNT[0]


def since(mark: int) -> list[tuple[int, int]]:
    """The (signal, sender pid) of the signals from workers after :func:`count` was ``mark``
    (at most the last ``_KEEP``)."""
    new = _COUNT[0] - mark
    return list(_SENT[-new:]) if new > 0 else []


def describe(sent: list[tuple[int, int]]) -> str:
    """One sentence for a mode or task during which its worker signalled ckptbench."""
    names = sorted({signal.Signals(s).name for s, _ in sent})
    pids = sorted({p for _, p in sent})
    many = f" ({len(sent)} times)" if len(sent) > 1 else ""
    return (
        f"its worker's code (pid {', '.join(map(str, pids))}) sent ckptbench "
        f"{' and '.join(names)}{many}: a plug-in tried to stop ckptbench, which takes a stop "
        "signal only from outside its workers"
    )


def _from_descendant(pid: int) -> bool:
    """Whether ``pid`` is one of this process's workers or descends from this process."""
    me = os.getpid()
    if pid <= 0 or pid == me:
        return False
    if orphans.was_worker(pid):  # a worker reaped between its kill() and this look
        return True
    import psutil

    try:
        return any(p.pid == me for p in psutil.Process(pid).parents())
    except psutil.Error:
        return False


def _record(signum: int, pid: int) -> None:
    _COUNT[0] += 1
    _SENT.append((signum, pid))
    del _SENT[:-_KEEP]


def _wait(watched: frozenset[int], done: threading.Event) -> None:
    while not done.is_set():
        info = signal.sigtimedwait(watched, _POLL_S)
        if info is None:
            continue
        if _from_descendant(info.si_pid):
            _record(info.si_signo, info.si_pid)
        else:  # the user's: the main thread's handler runs as if it had got the signal
            _thread.interrupt_main(info.si_signo)


@contextlib.contextmanager
def watching(signums: Iterable[int]) -> Iterator[None]:
    """Call in the main thread, with a Python handler installed for each of ``signums``:
    within the block, those signals are waited for by a thread that tells the user's from
    a worker's (module doc). Where that is not available, the block changes nothing."""
    watched = frozenset(signums)
    if not available() or not watched or _STATE["watched"]:
        yield
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, watched)
    done = threading.Event()
    waiter = threading.Thread(target=_wait, args=(watched, done), name="stop-signals",
                              daemon=True)  # fmt: skip
    _STATE["watched"] = watched
    try:
        waiter.start()
        yield
    finally:
        done.set()
        waiter.join()
        _STATE["watched"] = frozenset()
        # a signal still pending now reaches the handler the caller restores after this
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


@contextlib.contextmanager
def unblocked() -> Iterator[None]:
    """Within the block the calling thread has the watched signals unblocked: a process
    started here (a worker) does not inherit them blocked."""
    watched = _STATE["watched"]
    if not watched:
        yield
        return
    old = signal.pthread_sigmask(signal.SIG_UNBLOCK, watched)  # type: ignore[arg-type]
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)
