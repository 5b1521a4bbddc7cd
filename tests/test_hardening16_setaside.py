"""The sixteenth audit, of the reading side: a misfiled cell of a sweep folder (its file
holds another cell's result, say one copied from another sweep) and one measurement in two
of a folder's files no longer stop ``compare`` and ``check`` of the whole folder, as an
unreadable cell no longer does (test_hardening15_reading): the other cells are shown and
gated, the cell set aside is named with why in one line (and failed by ``check``: checks
``filed`` and ``unique``), and no copy of a measurement is picked over another. Files given
by name keep their one-line error. Synthetic results; nothing is measured or timed."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from _cli import one_line_error, run_cli
from _synthetic import make_result


@pytest.fixture(autouse=True)
def _no_step_summary(monkeypatch):
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)


def _sweep(tmp_path: Path, name: str, steps: int = 20, seed: int = 0) -> Path:
    """A three-cell sweep folder (snaps 2, 3, 4) measured by a fake cell runner."""
    from ckptbench.sweep.config import parse_config
    from ckptbench.sweep.run import run_sweep

    config = parse_config(
        f'name = "{name}"\n[case]\nmodel = "rnn"\nsteps = {steps}\nhidden = 8\n'
        "[grid]\nsnaps = [2, 3, 4]\n",
        source="t.toml",
    )
    out = tmp_path / name
    run_sweep(config, out, run_cell=lambda case, **_: make_result(case, seed=seed))
    return out


def _cell(out: Path, snaps: int, steps: int = 20) -> Path:
    return next(out.glob(f"rnn-l{steps}-s{snaps}-*.json"))


def _gate_files(tmp_path: Path, out: Path, capsys) -> tuple[int, str, str, str]:
    junit, summary = tmp_path / "j.xml", tmp_path / "s.md"
    argv = ["check", str(out), "--junit", str(junit), "--summary", str(summary)]
    code, text, _ = run_cli(capsys, argv)
    return code, text, junit.read_text(), summary.read_text()


# ------------------------------------------------------------- 1. a misfiled cell file


@pytest.mark.parametrize("source", ["this sweep", "another sweep"])
def test_a_misfiled_cell_is_named_and_failed_the_others_shown_and_gated(tmp_path, capsys, source):
    """s2's file replaced by s3's result, or by a result of another sweep's config: compare
    and check of the folder stopped with exit 2 on that one file."""
    out = _sweep(tmp_path, "sw")
    s2, s3 = _cell(out, 2), _cell(out, 3)
    other = None if source == "this sweep" else _sweep(tmp_path, "other", steps=12)
    held = s3 if other is None else _cell(other, 2, steps=12)
    shutil.copy(held, s2)
    why = (
        f"{s2}: holds the result of cell {held.stem}, but {out / 'sweep.json'} lists it for "
        f"cell {s2.stem} (a copied or misfiled result; measure that cell again)"
    )
    code, text, err = run_cli(capsys, ["compare", str(out), "--format", "markdown"])
    assert code == 0, err
    assert "| rnn l=20 s=3 revolve |" in text and "| rnn l=20 s=4 revolve |" in text
    assert "s=2" not in text.split("## Misfiled cells")[0]  # not shown as any cell
    lead = "1 cell file(s) are misfiled: they hold another cell's result (not in the tables"
    for stream in (text, err):
        assert lead in stream and why in stream
    assert f"compare: {why}\n" in err  # one line
    code, text, xml, md = _gate_files(tmp_path, out, capsys)
    assert code == 1, text
    assert text.startswith("ckptbench check: FAILED (1 of 3 checks, 1 of 3 cells)")
    assert f"FAIL {s2.stem} filed: {why}\n" in text
    assert f"ok   {s3.stem}@" in text  # s3's own file, gated once
    assert xml.count("<failure ") == 1 and 'name="filed"' in xml
    assert f"`{s2.stem}` | filed | " in md


def test_a_misfiled_cell_through_its_manifest_is_named_too(tmp_path, capsys):
    """The manifest given by name means its cells, as the folder does."""
    out = _sweep(tmp_path, "sw")
    shutil.copy(_cell(out, 3), _cell(out, 2))
    code, text, err = run_cli(capsys, ["check", str(out / "sweep.json")])
    assert code == 1, err
    assert f"FAIL {_cell(out, 2).stem} filed: " in text


# ------------------------------------------------------ 2. one measurement in two files


def test_copies_of_one_measurement_in_a_folder_neither_is_picked(tmp_path, capsys):
    """A loose folder with two copies of one cell's file and another cell's file: the copies
    stopped the read; now both are named on one line and neither is shown or gated."""
    out = _sweep(tmp_path, "sw")
    loose = tmp_path / "loose"
    loose.mkdir()
    a, b, c = loose / "a.json", loose / "b.json", loose / "c.json"
    shutil.copy(_cell(out, 2), a)
    shutil.copy(_cell(out, 2), b)
    shutil.copy(_cell(out, 3), c)
    key = _cell(out, 2).stem
    why = f"{a}, {b}: 2 copies of one measurement of cell {key} (host, creation time "
    code, text, err = run_cli(capsys, ["compare", str(loose), "--format", "markdown"])
    assert code == 0, err
    assert "| rnn l=20 s=3 revolve |" in text
    assert "s=2" not in text.split("## Copied measurements")[0]
    for stream in (text, err):
        assert "1 measurement(s) are copied into several files; none is picked" in stream
        assert why in stream and "neither is read as the cell" in stream
    code, text, xml, md = _gate_files(tmp_path, loose, capsys)
    assert code == 1, text
    assert text.startswith("ckptbench check: FAILED (1 of 2 checks, 1 of 2 cells)")
    assert f"FAIL {key} unique: {why}" in text
    assert text.count("status: all modes measured") == 1  # c only: no copy gated as s2
    assert xml.count("<failure ") == 1 and 'name="unique"' in xml and str(b) in xml
    assert f"`{key}` | unique | " in md


def test_two_sweep_folders_sharing_one_cells_file(tmp_path, capsys):
    """A second sweep of the config (another measurement) whose s2 file is the first's:
    s3 and s4 pool two invocations, s2 is one measurement twice and is neither."""
    first, second = _sweep(tmp_path, "sw"), _sweep(tmp_path, "again", seed=1)
    shutil.copy(_cell(first, 2), _cell(second, 2))
    code, text, err = run_cli(capsys, ["check", str(first), str(second)])
    assert code == 1, err
    assert "FAILED (1 of 5 checks, 1 of 3 cells)" in text
    assert f"unique: {_cell(first, 2)}, {_cell(second, 2)}: 2 copies" in text
    assert text.count("status: all modes measured") == 4  # s3, s4: one line per invocation
    code, text, err = run_cli(capsys, ["compare", str(first), str(second)])
    assert code == 0, err
    assert "2 copies of one measurement" in err


def test_a_folder_and_its_copy_set_every_cell_aside(tmp_path, capsys):
    out = _sweep(tmp_path, "sw")
    copy = tmp_path / "copy"
    shutil.copytree(out, copy)
    code, _, err = run_cli(capsys, ["compare", str(out), str(copy)])
    assert code == 2 and "Traceback" not in err
    assert err.count(": 2 copies of one measurement of cell ") == 3
    assert err.endswith(
        "ckptbench: error: no results to compare: 3 measurement(s) are copied into several "
        "files; none is picked\n"
    )
    code, text, _ = run_cli(capsys, ["check", str(out), str(copy)])
    assert code == 1 and text.startswith("ckptbench check: FAILED (3 of 3 checks, 3 of 3 cells)")


# ------------------------------------------------------------ 3. files given by name


def test_copies_given_by_name_are_still_one_line(tmp_path, capsys):
    out = _sweep(tmp_path, "sw")
    s2 = _cell(out, 2)
    copy = tmp_path / "copy.json"
    shutil.copy(s2, copy)
    for argv in ([str(s2), str(copy)], [str(out), str(copy)]):
        for command in ("compare", "check"):
            err = one_line_error(capsys, [command, *argv])
            assert f"{copy}: the same measurement as {s2} (" in err and "pass one of them" in err


def test_a_reference_is_still_read_whole(tmp_path, capsys):
    """--against reads the reference as before: a misfiled cell there is an input error."""
    out, ref = _sweep(tmp_path, "sw"), _sweep(tmp_path, "ref", seed=1)
    shutil.copy(_cell(ref, 3), _cell(ref, 2))
    for command in ("compare", "check"):
        err = one_line_error(capsys, [command, str(out), "--against", str(ref)])
        assert "holds the result of cell" in err
