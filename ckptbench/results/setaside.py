"""The cell files a folder read sets aside (``store.load_readable``): a file that cannot be
read, one holding another cell's result than its manifest lists it for (misfiled, or
copied from another sweep), and copies of one measurement (:func:`measurement_id`), none
of which is picked as the cell. ``compare`` shows the other cells and names these,
``check`` gates the others and fails these (the check is :attr:`CellProblem.check`).

Nothing here reads a file or prints.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ckptbench.results.schema import RunResult

__all__ = [
    "FILED",
    "READABLE",
    "UNIQUE",
    "CellProblem",
    "copies",
    "measurement_id",
    "misfiled",
    "same_measurement",
]

#: The checks ``check`` fails a set-aside cell on (its ``GateLine.check``).
READABLE, FILED, UNIQUE = "readable", "filed", "unique"


def measurement_id(result: RunResult) -> tuple[Any, ...]:
    """What makes a result one measurement: its cell, host, creation time and samples. Two
    files with one id are copies of one invocation, never two invocations."""
    samples = tuple(
        (m.mode.value, m.round, tuple((it.wall_time_s, it.peak_rss_bytes) for it in m.iterations))
        for m in result.modes
    )
    return (result.case.key, result.host, result.created, samples)


@dataclass(frozen=True)
class CellProblem:
    """A cell a folder or manifest yields that is not read as its cell: its file(s), the
    cell's key (the manifest's, else the result's or the file's stem), the check it fails
    (:data:`READABLE`, :data:`FILED`, :data:`UNIQUE`) and the one-line problem, which names
    the file(s)."""

    paths: tuple[Path, ...]
    key: str
    check: str
    problem: str

    @property
    def path(self) -> Path:
        """The (first) file."""
        return self.paths[0]


def misfiled(path: Path, key: str, manifest: Path | None, result: RunResult) -> str:
    """The problem of ``path``, which ``manifest`` lists for cell ``key`` and which holds
    ``result`` of another cell."""
    return (
        f"{path}: holds the result of cell {result.case.key}, but {manifest} lists it for "
        f"cell {key} (a copied or misfiled result; measure that cell again)"
    )


def same_measurement(path: Path, first: Path, result: RunResult) -> str:
    """The problem of ``path``, a copy of ``first`` given by name (``result``: either)."""
    return (
        f"{path}: the same measurement as {first} (one cell, host, creation time "
        f"{result.created or '-'} and samples): a copy would pool as another invocation; "
        "pass one of them"
    )


def copies(paths: Sequence[Path], result: RunResult) -> CellProblem:
    """The cell whose one measurement ``result`` is in each of ``paths`` (two or more files a
    folder or manifest yields): none is read as the cell, so none is picked silently."""
    none = "neither" if len(paths) == 2 else "none"
    problem = (
        f"{', '.join(map(str, paths))}: {len(paths)} copies of one measurement of cell "
        f"{result.case.key} (host, creation time {result.created or '-'} and samples alike); "
        f"{none} is read as the cell, as a copy would pool as another invocation: keep one"
    )
    return CellProblem(tuple(paths), result.case.key, UNIQUE, problem)
