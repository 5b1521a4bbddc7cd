"""The eighteenth audit, a hostile one of the night's features (environment.finished,
``sweep --resume`` measuring incomplete cells again, cells set aside in folder reads,
markdown escapes, off-scale bounds, choice suggestions, rich markup): hand-edited result
files and manifests, symlinked cells, interrupted resumes. Synthetic results where nothing
needs measuring; nothing is timed."""

from __future__ import annotations

from pathlib import Path

import pytest
from _cli import run_cli
from _synthetic import make_result


@pytest.fixture(autouse=True)
def _no_step_summary(monkeypatch):
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)


def _sweep(tmp_path: Path, name: str = "sw") -> Path:
    """A three-cell sweep folder (snaps 2, 3, 4) measured by a fake cell runner."""
    from ckptbench.sweep.config import parse_config
    from ckptbench.sweep.run import run_sweep

    config = parse_config(
        f'name = "{name}"\n[case]\nmodel = "rnn"\nsteps = 20\nhidden = 8\n'
        "[grid]\nsnaps = [2, 3, 4]\n",
        source="t.toml",
    )
    out = tmp_path / name
    run_sweep(config, out, run_cell=lambda case, **_: make_result(case))
    return out


def _cell(out: Path, snaps: int) -> Path:
    return next(out.glob(f"rnn-l20-s{snaps}-*.json"))


# ------------------------------------------- 1. a cell's file linked to another cell's file


@pytest.mark.parametrize("linked", [3, 2])
def test_a_cell_file_linked_to_another_cells_file_is_misfiled_not_dropped(tmp_path, capsys, linked):
    """s3's file a symlink to s2's (listed after it), or s2's to s3's (listed before it):
    the folder read took the link for the file named twice and read it once. A link listed
    after its target dropped its cell silently ('check: PASSED (2 checks on 2 cells)'); one
    listed before it was read as misfiled, and the real cell after it was dropped, its
    measurement gone from every table ('no results to compare' for a one-cell pair)."""
    out = _sweep(tmp_path)
    target = _cell(out, 5 - linked)  # s2 -> s3's file, s3 -> s2's
    link = _cell(out, linked)
    link.unlink()
    link.symlink_to(target.name)
    code, text, err = run_cli(capsys, ["check", str(out)])
    assert code == 1, text + err
    assert text.startswith("ckptbench check: FAILED (1 of 3 checks, 1 of 3 cells)"), text
    assert f"FAIL {link.stem} filed: {link}: holds the result of cell {target.stem}" in text
    assert f"ok   {target.stem}@" in text  # the real cell, gated
    code, text, err = run_cli(capsys, ["compare", str(out), "--format", "markdown"])
    assert code == 0, err
    assert f"{link}: holds the result of cell {target.stem}" in err
    assert f"| rnn l=20 s={5 - linked} revolve |" in text  # the real cell, shown
    assert f"| rnn l=20 s={linked} revolve |" not in text


def test_a_file_named_twice_is_still_read_once(tmp_path, capsys):
    out = _sweep(tmp_path)
    code, text, err = run_cli(capsys, ["check", str(out), str(_cell(out, 2))])
    assert code == 0, text + err
    assert text.startswith("ckptbench check: PASSED (3 checks on 3 cells;")
