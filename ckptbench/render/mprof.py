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

from ckptbench.results import write_atomic

__all__ = ["MprofError", "format_mprof", "mprof_name", "write_mprof"]

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
) -> None:
    """Write ``timeline`` to ``path`` in mprof's format, atomically (``write_atomic``)."""
    write_atomic(path, format_mprof(timeline, start_time=start_time, command=command))


def mprof_name(case_key: str, mode: str, round_index: int | None = None) -> str:
    """File name for one (case, mode[, round]): ``mprofile_<case key>_<mode>[_r<k>].dat``.

    ``case_key`` is ``Case.key`` (already unique per measured cell and file-name safe)."""
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in f"{case_key}_{mode}")
    suffix = "" if round_index is None else f"_r{int(round_index)}"
    return f"mprofile_{safe}{suffix}.dat"
