"""Each input file read at most once by one command: :class:`ReadOnce`.

A command such as ``check`` asks for the same sweep config or manifest from several places
(its input list, the ``[expect]`` it gates on, missing cells, unlisted files, the limits it
states); each asks the one reader, which reads a file the first time and answers every later
ask with the same value, or raises the same error again. Pure: the I/O is the ``read`` it
is given."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Generic, TypeVar

__all__ = ["ReadOnce"]

T = TypeVar("T")


class ReadOnce(Generic[T]):
    """``read(path)`` once per path (as given): its value, or the ``errors`` exception it
    raised, raised again on every later ask; other exceptions are not kept."""

    def __init__(
        self, read: Callable[[Path], T], errors: type[Exception] | tuple[type[Exception], ...]
    ) -> None:
        self._read_file = read
        self._errors = errors
        self._seen: dict[Path, tuple[bool, T | Exception]] = {}

    def get(self, path: Path) -> T:
        if path not in self._seen:
            try:
                self._seen[path] = (True, self._read_file(path))
            except self._errors as err:
                self._seen[path] = (False, err)
        ok, found = self._seen[path]
        if not ok:
            raise found  # type: ignore[misc]
        return found  # type: ignore[return-value]
