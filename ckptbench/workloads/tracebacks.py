"""Where a plug-in's own code raised, and the error in one line.

The plug-in check (:mod:`ckptbench.workloads.check`) and the worker's report of a failed
mode (:mod:`ckptbench.measure.worker`) name the plug-in's line (``file.py:LINE``, relative
to the current folder), never a frame of ckptbench, the standard library or an installed
package, so a user is sent to the line they wrote. Standard library only: it runs in the
measured worker.
"""

from __future__ import annotations

import os
import sysconfig
import traceback
from collections.abc import Iterable
from pathlib import Path

__all__ = ["error_line", "where"]


def _lib_dirs() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    dirs = {paths.get(k) for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    dirs.add(str(Path(__file__).resolve().parents[1]))  # ckptbench itself
    return tuple(os.path.join(os.path.abspath(d), "") for d in dirs if d)


def _show(path: str) -> str:
    rel = os.path.relpath(path, Path.cwd())
    return path if rel.startswith("..") else rel


def where(err: BaseException, own_files: Iterable[str] = ()) -> str | None:
    """``file.py:LINE`` of the innermost frame of ``err``'s traceback in the plug-in's code
    (not ckptbench, the standard library or an installed package, unless it is one of
    ``own_files``); None when the plug-in's code is not on the traceback."""
    own = {os.path.abspath(f) for f in own_files if f}
    libs = _lib_dirs()
    found = None
    for frame, lineno in traceback.walk_tb(err.__traceback__):
        name = frame.f_code.co_filename
        if not name or name.startswith("<"):
            continue
        path = os.path.abspath(name)
        if path in own or not path.startswith(libs):
            found = f"{_show(path)}:{lineno}"
    return found


def error_line(err: BaseException) -> str:
    """``err`` in one line: 'ValueError: its first non-blank line' (the type alone when it
    says nothing)."""
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    return f"{type(err).__name__}: {lines[0]}" if lines else type(err).__name__
