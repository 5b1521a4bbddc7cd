"""Reading the files a user hands ckptbench (configs, costs files) in a bounded way.

A path can name ``/dev/zero``, a FIFO or a multi-gigabyte log: :func:`read_text_limited`
reads at most a fixed number of bytes and refuses the rest in one line, so no input can make
ckptbench read until the kernel stops it. Nothing here prints.
"""

from __future__ import annotations

import os

__all__ = ["read_text_limited"]


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
