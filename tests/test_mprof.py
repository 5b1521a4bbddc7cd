"""Tests for ckptbench.render.mprof: files that memory_profiler's own reader parses back."""

from __future__ import annotations

import os

import pytest
from mprof import read_mprofile_file  # memory_profiler's top-level module

from ckptbench.render.mprof import MprofError, format_mprof, mprof_name, write_mprof
from ckptbench.results.schema import Case

MIB = 2**20


def _timeline():
    # a ramp to a short peak of 487.2 MiB at 1.234 s and back down
    return [(0.0, 40 * MIB), (0.5, 200 * MIB), (1.234, int(487.2 * MIB)), (1.5, 48 * MIB)]


def test_memory_profilers_reader_finds_the_sampled_peak(tmp_path):
    path = tmp_path / mprof_name(Case().key, "normal")
    write_mprof(path, _timeline(), start_time=1_700_000_000.0, command="ckptbench run --x 1")
    data = read_mprofile_file(str(path))
    assert data["cmd_line"].strip() == "ckptbench run --x 1"
    assert len(data["mem_usage"]) == 4
    peak = max(data["mem_usage"])
    assert peak * MIB == pytest.approx(487.2 * MIB, abs=1)  # 1e-6 MiB precision
    at = data["timestamp"][data["mem_usage"].index(peak)]
    assert at - 1_700_000_000.0 == pytest.approx(1.234, abs=1e-4)
    assert data["func_timestamp"] == {}


def test_file_mode_and_newline_free_command(tmp_path):
    path = tmp_path / "sub" / "mprofile_x.dat"
    write_mprof(path, _timeline(), start_time=0.0, command="a\nb  c")
    text = path.read_text()
    assert text.splitlines()[0] == "CMDLINE a b c"
    assert "\n\n" not in text  # mprof's reader rejects blank lines
    mask = os.umask(0)
    os.umask(mask)
    assert path.stat().st_mode & 0o777 == 0o666 & ~mask


def test_bad_timelines_are_one_clear_error():
    with pytest.raises(MprofError, match="empty"):
        format_mprof([], start_time=0.0, command="x")
    with pytest.raises(MprofError, match="bad timeline sample"):
        format_mprof([(-1.0, 5)], start_time=0.0, command="x")
    with pytest.raises(MprofError, match="finite"):
        format_mprof([(0.0, 5)], start_time=float("nan"), command="x")


def test_names_are_unique_per_case_mode_and_round():
    a, b = Case(steps=100).key, Case(steps=200).key
    names = {
        mprof_name(k, m, r)
        for k in (a, b)
        for m in ("baseline", "normal", "checkpointed")
        for r in (None, 0, 1)
    }
    assert len(names) == 18
    assert all(n.startswith("mprofile_") and n.endswith(".dat") and "/" not in n for n in names)
    assert "/" not in mprof_name("a/b", "normal")
