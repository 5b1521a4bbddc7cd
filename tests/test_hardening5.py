"""Fifth hardening round (a session's own audits, 2026-11-28, second session): empty
file names, ... Every problem is one line, exit 2, before anything is measured. Nothing
here is timed."""

from __future__ import annotations

import pytest
from _cli import one_line_error

TINY = ["--steps", "6", "--snaps", "3", "--hidden", "8", "--rounds", "1", "-q"]


@pytest.mark.parametrize(
    "argv",
    [
        ["run", "--model", "rnn", *TINY, "--out", ""],
        ["run", "--model", "rnn", *TINY, "--mprof", ""],
        ["sweep", ""],
        ["sweep", "configs/ci.toml", "--out", " "],
        ["compare", ""],
        ["check", ""],
        ["plan", "--steps", "6", "--budget", "1MiB", "--costs", ""],
    ],
)
def test_an_empty_file_name_is_refused_not_read_as_the_current_folder(
    capsys, tmp_path, monkeypatch, argv
):
    monkeypatch.chdir(tmp_path)
    err = one_line_error(capsys, argv)
    assert "an empty name is not a file or folder" in err
    assert list(tmp_path.iterdir()) == []
