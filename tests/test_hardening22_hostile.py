"""The twenty-second audit, hostile, on the command line: sweep configs with values of the
wrong type. Nothing is measured; nothing is timed."""

from __future__ import annotations

from pathlib import Path

import pytest
from _cli import one_line_error


@pytest.fixture(autouse=True)
def _no_step_summary(monkeypatch):
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)


CASE = "[case]\nsteps = 4\nhidden = 2\nbatch = 1\ninput = 1\n"


@pytest.mark.parametrize(
    "body",
    [
        CASE + "model = 1.5\n",
        CASE + "model = true\n",
        CASE + "model = {a = 1}\n",
        CASE + "[[grid]]\nmodel = [7]\n",
        CASE + "[[grid]]\nmodel = [[]]\n",
    ],
)
def test_a_config_model_that_is_no_string_is_one_line(capsys, tmp_path: Path, body) -> None:
    """``model = 1.5`` (or true, a table, a list) reached the workload name check, which
    called ``str.strip`` on it: an AttributeError traceback, exit 1. Now Case says it."""
    config = tmp_path / "bad.toml"
    config.write_text(body)
    err = one_line_error(capsys, ["sweep", str(config), "--dry-run", "--out", str(tmp_path / "o")])
    assert "model must be a non-empty string" in err
    assert "bad.toml:" in err
