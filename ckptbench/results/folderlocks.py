"""One sweep at a time per results folder: ``flock`` on the folder itself.

A sweep holds an exclusive lock on its folder (:func:`locked_folder`) while it measures; a
result written into a folder (``run --out``) holds a shared one (:func:`folder_shared`), so
neither starts while the other writes. The lock is on the folder's own descriptor: no lock
file is left behind, and the kernel drops it when the process dies. A refusal is a
one-line :class:`~ckptbench.results.store.StoreError`.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

from ckptbench.results.store import StoreError

__all__ = ["folder_shared", "locked_folder"]


@contextlib.contextmanager
def _flock_folder(out_dir: str | os.PathLike, how: int, cannot: str, held: str) -> Iterator[None]:
    """Hold ``flock(how)`` on the folder itself for the block (no lock file is left behind;
    the kernel drops it when the process dies); StoreError ``cannot`` (+ why) where the
    folder does not open, ``held`` where another process holds a conflicting lock."""
    try:
        fd = os.open(out_dir, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError as err:
        raise StoreError(f"{cannot} ({err.strerror or err})") from None
    try:
        try:
            fcntl.flock(fd, how | fcntl.LOCK_NB)
        except BlockingIOError:
            raise StoreError(held) from None
        yield
    finally:
        os.close(fd)


def folder_shared(
    out_dir: str | os.PathLike[str], what: str = "--out"
) -> contextlib.AbstractContextManager[None]:
    """Hold a shared ``flock`` on the folder a result is written into: refused (StoreError)
    while a sweep holds it (:func:`locked_folder`), and a sweep cannot start in it meanwhile."""
    return _flock_folder(
        out_dir,
        fcntl.LOCK_SH,
        f"{what} {out_dir}: cannot lock the folder",
        f"{what}: the folder {out_dir} is being written by a ckptbench sweep; wait for it to "
        "finish or use another folder",
    )


def locked_folder(out_dir: Path) -> contextlib.AbstractContextManager[None]:
    """Hold an exclusive ``flock`` on the folder for the block; StoreError if another holds it."""
    return _flock_folder(
        out_dir,
        fcntl.LOCK_EX,
        f"{out_dir}: cannot lock the folder",
        f"{out_dir}: another ckptbench sweep is writing this folder (or a run with --out in "
        "it); wait for it to finish or use another --out",
    )
