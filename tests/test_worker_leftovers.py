"""What a plug-in's worker leaves behind (an audit of the measurement processes, 2026-12):
the output it wrote to stderr. Each test failed on the code before its fix."""

from __future__ import annotations

import sys
import tempfile

import pytest

from ckptbench.measure.launch import run_mode
from ckptbench.measure.tasks import TaskError, run_task
from ckptbench.results.schema import Case, Mode, Status

#: A worker that writes 4 MiB to stderr in one line, then two short lines, and exits
#: without a result.
LOUD_WORKER = (
    "import os, sys\n"
    "sys.stdin.read()\n"
    "os.write(2, b'E' * (4 << 20))\n"
    "os.write(2, b'\\nnext to last\\nthe last line\\n')\n"
    "sys.exit(3)\n"
)


class _CountingFile:
    """A file that counts the bytes read from it."""

    def __init__(self, file, counts: list[int]) -> None:
        self.file = file
        self.counts = counts

    def __enter__(self):
        return self

    def __exit__(self, *exc: object) -> None:
        self.file.close()

    def __getattr__(self, name: str):
        return getattr(self.file, name)

    def read(self, *args):
        data = self.file.read(*args)
        self.counts.append(len(data))
        return data


def test_a_worker_s_huge_stderr_is_read_only_as_far_as_its_tail(monkeypatch):
    """A plug-in that wrote 300 MiB to stderr had all of it read into ckptbench's own memory
    (661 MB max RSS against 48 MB), and every line of it among the last eight kept in the
    result's ``stderr_tail``; only the last lines are ever shown."""
    from ckptbench.measure.launch import STDERR_TAIL_BYTES

    counts: list[int] = []
    real = tempfile.TemporaryFile
    monkeypatch.setattr(
        tempfile, "TemporaryFile", lambda *a, **k: _CountingFile(real(*a, **k), counts)
    )
    worker = [sys.executable, "-c", LOUD_WORKER]
    case = Case(model="lstm", steps=4, snaps=2)
    result, _ = run_mode(case, Mode.BASELINE, worker=worker)
    assert result.status is Status.CRASHED
    assert result.stderr_tail.endswith("next to last\nthe last line")
    assert len(result.stderr_tail) <= STDERR_TAIL_BYTES
    assert counts and sum(counts) <= STDERR_TAIL_BYTES

    counts.clear()
    with pytest.raises(TaskError, match=r"last stderr line: the last line$"):
        run_task(case, {"task": "device"}, worker=worker)
    assert counts and sum(counts) <= STDERR_TAIL_BYTES
