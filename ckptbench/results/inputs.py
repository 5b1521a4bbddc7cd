"""An input file's name as its user typed it, and why it could not be read, said alike by
every command: 'nope/: no such file or folder' (pathlib drops a trailing '/': ``nope``), 'loop:
is a symbolic link that leads nowhere (...)' (:func:`leads_nowhere`, said of inputs and outputs
alike); and the byte-order mark a Windows editor writes first, read alike by every reader
(:func:`without_bom`)."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import AnyStr

__all__ = [
    "LEADS_NOWHERE",
    "NOT_A_FOLDER",
    "TypedPath",
    "file_with_slash",
    "leads_nowhere",
    "named_pipe",
    "real_path",
    "said_path",
    "typed_path",
    "unreadable_text",
    "without_bom",
]

#: What a file's name followed by '/' is (``r1.json/``; the shell: 'Not a directory').
NOT_A_FOLDER = "is not a folder: a file's name followed by '/'"
#: What a symbolic link is that no file or folder is at the end of (``ln -s loop loop``).
LEADS_NOWHERE = "is a symbolic link that leads nowhere (a loop, or to a missing file or folder)"


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


def file_with_slash(name: str) -> bool:
    """Whether the name ``name`` as typed ends in '/' after something that is no folder
    (``r1.json/``), which pathlib reads as the file: it drops the slash."""
    if not name.endswith(("/", os.sep)):
        return False
    return os.path.exists(name.rstrip("/" + os.sep) or "/") and not os.path.isdir(name)


def leads_nowhere(path: str | os.PathLike[str]) -> str | None:
    """Where ``path``, or a folder on the way to it, is a symbolic link that leads nowhere (a
    loop, or to nothing): :data:`LEADS_NOWHERE`, after that folder's name when it is one; None
    otherwise. An input so named read 'no such file or folder', or 'Too many levels of
    symbolic links', and an output's folder 'File exists' (``mkdir``)."""
    path = Path(path)
    for part in (path, *path.parents):
        if os.path.islink(part) and not os.path.exists(part):
            return LEADS_NOWHERE if part == path else f"{part} {LEADS_NOWHERE}"
    return None


def unreadable_text(err: OSError, path: str | os.PathLike[str] | None = None) -> str:
    """Why a file named as input could not be read, as every reader says it: 'no such file
    or folder' where nothing is there (or a part of its path is no folder), where a symbolic
    link on its way leads nowhere that (:func:`leads_nowhere`, ``path`` the name read), else
    'cannot read (Permission denied)'."""
    missing = (FileNotFoundError, NotADirectoryError)
    if isinstance(err, missing) or err.errno == errno.ELOOP:
        nowhere = leads_nowhere(path if path is not None else err.filename or "")
        if nowhere is not None or err.errno == errno.ELOOP:
            return nowhere or LEADS_NOWHERE
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
