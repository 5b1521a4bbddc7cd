"""An input file's name as its user typed it, and why it could not be read, said alike by
every command: 'nope/: no such file or folder' (pathlib drops a trailing '/': ``nope``); and
the byte-order mark a Windows editor writes first, read alike by every reader
(:func:`without_bom`)."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import AnyStr

__all__ = [
    "TypedPath",
    "named_pipe",
    "real_path",
    "said_path",
    "typed_path",
    "unreadable_text",
    "without_bom",
]


class TypedPath(type(Path())):  # type: ignore[misc]
    """A path that keeps how it was typed (``typed``), for an error to name it so: pathlib
    drops a trailing '/' ('nope/' is 'nope'). A path made from it (its parent, a file in
    it) keeps no typed name, and it pickles as a plain path."""

    typed: str

    def __reduce__(self):
        return (Path, (os.fspath(self),))


def typed_path(text: str) -> Path:
    """``text`` as a :class:`TypedPath` that remembers it."""
    path = TypedPath(text)
    path.typed = text
    return path


def said_path(path: str | os.PathLike[str]) -> str:
    """``path`` as its user typed it (a :class:`TypedPath`'s ``typed``), else as it reads."""
    typed = getattr(path, "typed", None)
    return typed if isinstance(typed, str) else os.fspath(path)


def unreadable_text(err: OSError) -> str:
    """Why a file named as input could not be read, as every reader says it: 'no such file
    or folder' where nothing is there (or a part of its path is no folder), else 'cannot
    read (Permission denied)'."""
    if isinstance(err, (FileNotFoundError, NotADirectoryError)):
        return "no such file or folder"
    if isinstance(err, IsADirectoryError):  # as read_regular_file says it
        return "is a folder, not a file ckptbench reads"
    return f"cannot read ({err.strerror or err})"


def named_pipe(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a FIFO made with ``mkfifo`` (a name in a folder), which a reader
    refuses as not a regular file: nobody may ever write to it (it then reads as empty). A
    pipe handed over by the shell (``<(...)``, ``/dev/stdin``: ``/dev/fd/N``, a link to
    ``pipe:[...]``) is no named pipe: it is read like a file where a reader takes one."""
    try:
        if not stat.S_ISFIFO(os.stat(path).st_mode):
            return False
    except OSError:
        return False  # the reader says why it cannot be read
    handed = os.path.basename(os.path.realpath(path)).startswith("pipe:")
    return not handed and not os.path.abspath(path).startswith("/dev/")


def without_bom(text: AnyStr) -> AnyStr:
    """``text`` (a file's text, or its bytes) without the UTF-8 byte-order mark that Windows
    editors write first (Notepad, PowerShell's ``Out-File``): every reader of a file a user
    gives (results, manifests, costs files, sweep configs) reads a leading one as nothing.
    One anywhere else is kept, and JSON and TOML refuse it."""
    if isinstance(text, bytes):
        return text.removeprefix(b"\xef\xbb\xbf")
    return text.removeprefix("\ufeff")


def real_path(path: str | os.PathLike[str]) -> Path:
    """``path`` absolute, its symbolic links resolved as far as they resolve: a loop (a link
    to itself, or through its own folder) is left as named, where ``Path.resolve`` raised
    RuntimeError on Python 3.11 and 3.12 ("Symlink loop") and ended the command with a
    traceback (``--junit loop``, a results folder holding ``z.json -> z.json``)."""
    return Path(os.path.realpath(path))
