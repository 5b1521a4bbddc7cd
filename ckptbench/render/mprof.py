"""Export a sampled RSS timeline in memory_profiler's ``mprof`` file format.

The runner samples each worker's RSS like ``top`` (``ModeResult.timeline``: pairs of
seconds since the worker started and RSS bytes). ``mprof run`` writes the same kind of
series as text, and ``mprof plot FILE`` draws it; this module writes our timelines that
way so a user can plot and overlay them with memory_profiler's own tool. The format, as
memory_profiler 0.61 reads it (``mprof.read_mprofile_file``):

    CMDLINE <the command, one line>
    MEM <RSS in MiB> <unix timestamp in seconds>
    ...

one ``MEM`` line per sample, no blank lines (its reader rejects them), no ``FUNC`` lines
(those mark decorated functions, which a sampled worker does not have). Files are named
``mprofile_*.dat`` like mprof's own, so ``mprof plot`` with no argument finds the newest
one. See ``docs/architecture.md`` for the sampler and the timeline's thinning.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from typing import Any

from ckptbench.results.schema import write_atomic

__all__ = [
    "MprofError",
    "export_mprof",
    "format_mprof",
    "mprof_documents",
    "mprof_files",
    "mprof_name",
    "write_mprof",
]

MIB = 2**20


class MprofError(ValueError):
    """A timeline cannot be written as an mprof file (empty, negative or not finite)."""


def _check(timeline: Sequence[tuple[float, int]], start_time: float) -> None:
    if not timeline:
        raise MprofError("empty RSS timeline: nothing for mprof to plot")
    if not math.isfinite(start_time):
        raise MprofError(f"start_time must be a finite unix timestamp, got {start_time!r}")
    for t, rss in timeline:
        if not (math.isfinite(t) and t >= 0) or rss < 0:
            raise MprofError(f"bad timeline sample ({t!r} s, {rss!r} bytes)")


def format_mprof(timeline: Sequence[tuple[float, int]], *, start_time: float, command: str) -> str:
    """The text of an mprof file for ``timeline`` (seconds since ``start_time``, RSS bytes)."""
    _check(timeline, start_time)
    cmd = " ".join(str(command).split()) or "ckptbench"
    lines = [f"CMDLINE {cmd}"]
    lines += [f"MEM {rss / MIB:.6f} {start_time + t:.4f}" for t, rss in timeline]
    return "\n".join(lines) + "\n"


def write_mprof(
    path: str | os.PathLike[str],
    timeline: Sequence[tuple[float, int]],
    *,
    start_time: float,
    command: str,
    replace: bool = False,
) -> None:
    """Write ``timeline`` to ``path`` in mprof's format, atomically (``write_atomic``); an
    existing file is never replaced unless ``replace``."""
    write_atomic(
        path, format_mprof(timeline, start_time=start_time, command=command), replace=replace
    )


def mprof_files(results: Sequence[Any], folder: str | os.PathLike[str]) -> list[tuple[str, Any]]:
    """(path, mode result) of every mprof file :func:`export_mprof` writes for ``results``
    into ``folder``: one per (result, round, mode) with a timeline. Names are
    :func:`mprof_name`, with ``-<host>`` when the results come from several machines (as
    ``--plots`` names its timelines); a name met twice (reruns of one case) gets a ``-2``,
    ``-3`` ... suffix, so no file is written twice."""
    files: list[tuple[str, Any]] = []
    seen: dict[str, int] = {}
    several_hosts = len({r.host for r in results}) > 1
    for result in results:
        rounds = result.case.rounds > 1
        for m in result.modes:
            if len(m.timeline) < 1:
                continue
            name = mprof_name(result.case.key, m.mode.value, m.round if rounds else None)
            if several_hosts:
                host = "".join(c if c.isalnum() or c in "-_." else "_" for c in result.host)
                name = name.replace(".dat", f"-{host}.dat")
            seen[name] = seen.get(name, 0) + 1
            if seen[name] > 1:
                name = name.replace(".dat", f"-{seen[name]}.dat")
            files.append((os.path.join(folder, name), m))
    return files


def mprof_documents(
    results: Sequence[Any], folder: str | os.PathLike[str], command: str
) -> list[tuple[str, str]]:
    """(path, text) of every file of :func:`mprof_files`, each text formatted
    (:func:`format_mprof`) before any file is written: :class:`MprofError` names a
    timeline that cannot be, with nothing written."""
    documents = []
    for path, m in mprof_files(results, folder):
        start = m.started_unix_s if m.started_unix_s is not None else 0.0
        documents.append((path, format_mprof(m.timeline, start_time=start, command=command)))
    return documents


def export_mprof(
    results: Sequence[Any],
    folder: str | os.PathLike[str],
    command: str,
    *,
    replace: bool = False,
) -> list[str]:
    """Write the mprof files of :func:`mprof_files` into ``folder``; their paths. An existing
    file is never replaced unless ``replace`` (the caller checks what it replaces); an
    OSError names the file it was writing (``filename``), not a temp file or the folder; a
    timeline that cannot be written is :class:`MprofError` before any file is."""
    os.makedirs(folder, exist_ok=True)
    written: list[str] = []
    for path, text in mprof_documents(results, folder, command):  # every text, then files
        try:
            write_atomic(path, text, replace=replace)
        except OSError as err:
            raise OSError(err.errno, err.strerror or str(err), path) from None
        written.append(path)
    return written


def mprof_name(case_key: str, mode: str, round_index: int | None = None) -> str:
    """File name for one (case, mode[, round]): ``mprofile_<case key>_<mode>[_r<k>].dat``.

    ``case_key`` is ``Case.key`` (already unique per measured cell and file-name safe)."""
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in f"{case_key}_{mode}")
    suffix = "" if round_index is None else f"_r{int(round_index)}"
    return f"mprofile_{safe}{suffix}.dat"
