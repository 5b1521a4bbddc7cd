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
  killed the process by SIGINT. From then on SIGINT is ignored: ckptbench has said its
  outcome and is only exiting.

What remains out of reach is Python's own start-up, before this module's first line: a
Ctrl-C in it ends Python with its traceback, or by SIGINT before Python handles SIGINT.
"""

from __future__ import annotations

import contextlib
import importlib
import sys

__all__ = ["EXIT_INTERRUPTED", "main"]

#: 128 + SIGINT, the status of a stop by Ctrl-C.
EXIT_INTERRUPTED = 130


def main() -> None:
    """Import :mod:`ckptbench.cli` and run it. A Ctrl-C that ends it exits 130 with one line
    (while importing, or past every command's own handling); once the exit status is
    decided, none changes it (module doc)."""
    outcome = SystemExit(EXIT_INTERRUPTED)
    try:  # noqa: SIM105 -- suppress() runs Python code of its own, which a Ctrl-C can stop
        outcome = _outcome()
    except KeyboardInterrupt:  # a second Ctrl-C while the first was said: 130 stands
        pass
    while True:  # until SIGINT is ignored: a Ctrl-C meanwhile changes nothing
        try:
            _settle()
            break
        except KeyboardInterrupt:
            continue
    raise outcome


def _outcome() -> SystemExit:
    """How the command line ends: its own exit, or 130 with one line on a Ctrl-C."""
    try:
        try:
            cli = importlib.import_module("ckptbench.cli")
        except KeyboardInterrupt:
            sys.stderr.write("ckptbench: interrupted while starting\n")
            return SystemExit(EXIT_INTERRUPTED)
        cli.main()
    except KeyboardInterrupt:  # past every command's own handling: one line, no traceback
        sys.stderr.write("ckptbench: aborted\n")
        return SystemExit(EXIT_INTERRUPTED)
    except SystemExit as stop:  # the command line always ends so
        return stop
    return SystemExit(0)


def _settle() -> None:
    """SIGINT ignored from now on, and CPython's record of an unhandled Ctrl-C cleared.
    (``signal`` is imported here, not before the guard: the console script imports this
    module unguarded.)"""
    import signal

    with contextlib.suppress(ValueError):  # not the main thread (a test's): left as it is
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    # a string evaluated to its end clears CPython's "a KeyboardInterrupt went unhandled",
    # which under -m turns the exit into death by SIGINT (module doc)
    exec("None", {})
