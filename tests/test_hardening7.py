"""Session of 2026-11-28/29 (no GPU): a fourth audit's findings (hostile command lines),
each with a test that fails on the code before it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from ckptbench.cli import cli

EXAMPLE = Path(__file__).resolve().parent.parent / "docs" / "examples" / "autograd_rnn.py"
TINY = ["--steps", "20", "--hidden", "8", "--batch", "2", "--input", "4"]


def _invoke(*args: str):
    return CliRunner().invoke(cli, list(args))


@pytest.mark.parametrize("form", ["file", "package"])
def test_save_costs_never_replaces_the_plugins_own_source(tmp_path, monkeypatch, form):
    """`plan --model plug.py:make --save-costs plug.py --force` wrote the costs over the
    plug-in (exit 0); `run --out` refused the file form only."""
    monkeypatch.chdir(tmp_path)
    if form == "file":
        source, model = tmp_path / "plug.py", "plug.py:make"
    else:
        (tmp_path / "mypkg").mkdir()
        (tmp_path / "mypkg" / "__init__.py").write_text("")
        source, model = tmp_path / "mypkg" / "mod.py", "mypkg.mod:make"
    shutil.copy(EXAMPLE, source)
    before = source.read_bytes()
    res = _invoke("plan", "--model", model, *TINY, "--budget", "64KiB",
                  "--save-costs", str(source), "--force")  # fmt: skip
    assert res.exit_code == 2, res.output
    assert "is an input of this command" in res.output
    assert source.read_bytes() == before
    res = _invoke("run", "--model", model, *TINY, "--snaps", "3", "--out", str(source), "--force")
    assert res.exit_code == 2, res.output
    assert source.read_bytes() == before
