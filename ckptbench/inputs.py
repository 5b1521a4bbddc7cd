"""Reading the files a user hands ckptbench (configs, costs files, results) in a bounded way.

A path can name ``/dev/zero``, a FIFO or a multi-gigabyte log: :func:`read_text_limited`
reads at most a fixed number of bytes and refuses the rest in one line, so no input can make
ckptbench read until the kernel stops it. :func:`read_regular_file` is the stricter rule for
result files and manifests: a regular file only (a FIFO, a device or a folder is refused
without opening it for a blocking read), at most a fixed number of bytes. Nothing here prints.
"""

from __future__ import annotations

import os
import stat

__all__ = ["InputFileError", "read_regular_file", "read_text_limited"]


class InputFileError(ValueError):
    """A file cannot be read as asked; the message is one line without the path."""


def read_text_limited(path: str | os.PathLike[str], limit_bytes: int) -> str:
    """The UTF-8 text of ``path``, read in a bounded way: ``ValueError`` (one line) when it
    holds more than ``limit_bytes`` (``/dev/zero``, a log) or is not UTF-8 text; ``OSError``
    when it cannot be read. A pipe (``<(...)``) is read like a file."""
    with open(path, "rb") as fh:
        data = fh.read(limit_bytes + 1)
    if len(data) > limit_bytes:
        raise ValueError(f"more than {limit_bytes / 2**20:g} MiB; not a file ckptbench reads")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError("not UTF-8 text") from None


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def read_regular_file(path: str | os.PathLike[str], limit_bytes: int) -> bytes:
    """The bytes of the regular file ``path``, at most ``limit_bytes`` of them.

    The file is opened non-blocking (a FIFO with no writer would otherwise block the open
    forever) and checked with ``fstat`` before a byte is read: a folder, FIFO, device or
    socket is :class:`InputFileError`, and so is a file larger than ``limit_bytes`` (also
    when it grows while being read). ``OSError`` when it cannot be opened or read."""
    if os.fspath(path) == "":
        raise InputFileError("an empty path names no file")
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
    fd = os.open(path, flags | getattr(os, "O_CLOEXEC", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise InputFileError(f"is {_kind(st.st_mode)}, not a file ckptbench reads")
        if st.st_size > limit_bytes:
            raise InputFileError(
                f"is {st.st_size / 2**20:,.1f} MiB, more than the {limit_bytes / 2**20:g} MiB "
                "ckptbench reads"
            )
        chunks, left = [], limit_bytes + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 24))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        data = b"".join(chunks)
    finally:
        os.close(fd)
    if len(data) > limit_bytes:
        raise InputFileError(f"holds more than the {limit_bytes / 2**20:g} MiB ckptbench reads")
    return data
