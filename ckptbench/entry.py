"""The ``ckptbench`` console script (and ``python -m ckptbench``): the command line imported
inside a guard, and a Ctrl-C ending it the same way wherever it lands.

Python takes about 0.3 s to import click, rich and the command modules; a Ctrl-C in that
window raised ``KeyboardInterrupt`` from an import, with a traceback, before
:func:`ckptbench.cli.main` could say anything. Here it ends as any stop by Ctrl-C does:
exit status 130, one line.

Once ckptbench has its exit status, two things of CPython's own could still change it:

* ``python -m`` ends in death by SIGINT (wait status -2, after the one line, and whatever
  status ckptbench chose) when the ``KeyboardInterrupt`` was raised in code that Python ran
  from a string (``exec``: every dataclass's generated methods, ``namedtuple``), even though
  ckptbench caught it: Python records such an interrupt as unhandled and, under ``-m``
  only, kills itself with SIGINT once it has shut down. A string evaluated without one
  clears that record (:func:`_settle`).
* A second Ctrl-C while Python shuts down raised ``KeyboardInterrupt`` in its thread joins
  or exit handlers ("Exception ignored in ... Traceback"), or, once its handlers are gone,
  killed the process by SIGINT. From then on a Ctrl-C ends the process at once with 130
  and says nothing more (stdout and stderr flushed first, unless a flush is what hangs):
  it was ignored, and an exit handler that hung could then be stopped by SIGTERM only.
  Python's module teardown, after its exit handlers, runs with SIGINT ignored (Python has
  no handler of its own by then, and SIGINT would kill it): :func:`_quiet_teardown`.

A Ctrl-C that Python itself loses while the command runs (raised in a finalizer, or turned
into an ``ImportError`` by C code) is counted before it is raised (:mod:`ckptbench.ctrlc`)
and ends the command all the same: raised again where ckptbench stops cleanly, or, where
the command returned anyway, exit 130 with ``aborted``.

What remains out of reach is Python's own start-up, before this module's first line: a
Ctrl-C in it ends Python with its traceback, or by SIGINT before Python handles SIGINT.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import os
import sys

__all__ = ["EXIT_INTERRUPTED", "main"]

#: 128 + SIGINT, the status of a stop by Ctrl-C.
EXIT_INTERRUPTED = 130


def main() -> None:
    """Import :mod:`ckptbench.cli` and run it. A Ctrl-C that ends it exits 130 with one line
    (while importing, or past every command's own handling, or lost on the way); once the
    exit status is decided, a Ctrl-C ends the process at once with 130 (module doc)."""
    atexit.register(_quiet_teardown)  # first registered: the last exit handler to run
    outcome = SystemExit(EXIT_INTERRUPTED)
    try:  # noqa: SIM105 -- suppress() runs Python code of its own, which a Ctrl-C can stop
        outcome = _outcome()
    except KeyboardInterrupt:  # a second Ctrl-C while the first was said: 130 stands
        pass
    while True:  # until a Ctrl-C exits at once: one meanwhile changes nothing
        try:
            _settle()
            break
        except KeyboardInterrupt:
            continue
    raise outcome


def _outcome() -> SystemExit:
    """How the command line ends: its own exit, or 130 with one line on a Ctrl-C. An error
    raised after a Ctrl-C is taken for that Ctrl-C, which Python wraps on occasion (a
    ``KeyboardInterrupt`` in a class body's ``__set_name__`` is a ``RuntimeError``)."""
    try:
        try:
            ctrlc = importlib.import_module("ckptbench.ctrlc")
            ctrlc.install()  # a Ctrl-C is counted before it is raised
            cli = importlib.import_module("ckptbench.cli")
        except KeyboardInterrupt:
            sys.stderr.write("ckptbench: interrupted while starting\n")
            return SystemExit(EXIT_INTERRUPTED)
        except Exception:
            if not _ctrl_c_seen():
                raise
            sys.stderr.write("ckptbench: interrupted while starting\n")
            return SystemExit(EXIT_INTERRUPTED)
        try:
            cli.main()
        except SystemExit as stop:  # the command line always ends so
            ended = stop
        except Exception:
            if not ctrlc.seen():
                raise
            raise KeyboardInterrupt from None
        else:
            ended = SystemExit(0)
        if ctrlc.seen() and ended.code != EXIT_INTERRUPTED:  # a Ctrl-C lost on the way
            raise KeyboardInterrupt
        return ended
    except KeyboardInterrupt:  # past every command's own handling: one line, no traceback
        sys.stderr.write("ckptbench: aborted\n")
        return SystemExit(EXIT_INTERRUPTED)


def _ctrl_c_seen() -> bool:
    """Whether :mod:`ckptbench.ctrlc`, if imported, counted a Ctrl-C."""
    ctrlc = sys.modules.get("ckptbench.ctrlc")
    return bool(ctrlc is not None and ctrlc.seen())


def _settle() -> None:
    """A Ctrl-C ends the process at once with 130 from now on (:func:`_exit_now`), and
    CPython's record of an unhandled Ctrl-C is cleared. (``signal`` is imported here, not
    before the guard: the console script imports this module unguarded.)"""
    import signal

    with contextlib.suppress(ValueError):  # not the main thread (a test's): left as it is
        if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:  # started ignored: stays
            signal.signal(signal.SIGINT, _exit_now)
    # a string evaluated to its end clears CPython's "a KeyboardInterrupt went unhandled",
    # which under -m turns the exit into death by SIGINT (module doc)
    exec("None", {})


_EXITING = [False]


def _exit_now(signum: int, frame: object) -> None:
    """A Ctrl-C once the exit status is decided: what was written is flushed, then the
    process ends with 130, whatever exit handler or thread join it was waiting for. A Ctrl-C
    while that flush hangs (a reader that stopped reading) ends it without the flush."""
    if not _EXITING[0]:
        _EXITING[0] = True
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
    os._exit(EXIT_INTERRUPTED)


def _quiet_teardown() -> None:
    """The last exit handler: SIGINT ignored while Python tears its modules down, where
    it has no handler of its own and SIGINT would kill the process (wait status -2)."""
    import signal

    with contextlib.suppress(ValueError):
        if signal.getsignal(signal.SIGINT) is _exit_now:
            signal.signal(signal.SIGINT, signal.SIG_IGN)
