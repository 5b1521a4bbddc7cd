"""A Ctrl-C the command line received, kept until ckptbench has stopped for it.

Python turns SIGINT into a ``KeyboardInterrupt`` raised wherever the main thread happens
to be, and a few places there lose it, so that a run went on to the end and exited 0
(measured: 3 of 120 Ctrl-Cs sent 0.9-1.5 s into ``run`` on a loaded machine, every one
while the command line was still importing):

* a finalizer or weakref callback prints "Exception ignored in ..." and goes on
  (``importlib``'s module-lock callback ``cb`` was one);
* C code replaces it: ``_elementtree`` imports ``pyexpat`` with ``PyCapsule_Import``, which
  turns any error into ``ImportError``, and ``xml.etree.ElementTree`` catches that to fall
  back to its Python code. A Ctrl-C that arrives while ``_elementtree`` is loaded is raised
  in that import, as its first Python frame.

So the console script's handler (:func:`install`) counts each Ctrl-C before it raises it,
and :func:`check` raises it again where ckptbench stops cleanly (before it measures, between
a worker's events: ``measure.launch``); the console script ends with 130 if the command
returned anyway. The traceback a finalizer would print for it is not printed: the Ctrl-C
is not lost, only raised later.
"""

from __future__ import annotations

import signal
import sys
import threading
from typing import Any

__all__ = ["check", "handler", "install", "seen"]

_SEEN = [0]


def handler(signum: int, frame: Any) -> None:
    """SIGINT: counted, then raised as Python's own handler does."""
    _SEEN[0] += 1
    raise KeyboardInterrupt


def install() -> None:
    """From now on a Ctrl-C is counted (:func:`handler`), where Python handles SIGINT with
    its own handler; an ignored SIGINT stays ignored. Call in the main thread."""
    _SEEN[0] = 0
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, handler)
    if getattr(sys.unraisablehook, "__name__", "") != _unraisable.__name__:
        _PREVIOUS["hook"] = sys.unraisablehook
        sys.unraisablehook = _unraisable


def seen() -> bool:
    """Whether a Ctrl-C reached this process since :func:`install`."""
    return _SEEN[0] > 0


def check() -> None:
    """Raise ``KeyboardInterrupt`` in the main thread once a Ctrl-C has been received:
    one that something swallowed is raised again here."""
    if _SEEN[0] and threading.current_thread() is threading.main_thread():
        raise KeyboardInterrupt


_PREVIOUS: dict[str, Any] = {"hook": sys.__unraisablehook__}


def _unraisable(unraisable: Any) -> None:
    """A counted Ctrl-C that a finalizer could not raise: said by :func:`check`, not here."""
    if isinstance(unraisable.exc_value, KeyboardInterrupt) and seen():
        return
    _PREVIOUS["hook"](unraisable)
