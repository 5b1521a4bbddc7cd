"""One rule for what ``--force`` replaces among the side outputs (``compare --plots``,
``-o``, ``--mprof``; ``check --junit``; ``plan --save-costs``): a file ckptbench wrote there
before, never another. A file that is not recognisably ckptbench's output is refused in one
line naming it and what to do (remove it, or another name), ``--force`` or not, before
anything is written (``kinds.Own``, ``store.check_output``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from _synthetic import make_result
from click.testing import CliRunner

from ckptbench.cli import cli
from ckptbench.results.schema import save_result

pytest.importorskip("matplotlib")


def _result(tmp_path: Path) -> Path:
    path = tmp_path / "r.json"
    save_result(make_result(), path)
    return path


def _one_line_refusal(res, path: Path) -> str:
    assert res.exit_code == 2, res.output
    assert res.output.count("\n") == 1 and "Traceback" not in res.output, res.output
    assert str(path) in res.output and "remove it or use another" in res.output, res.output
    return res.output


@pytest.mark.parametrize(
    ("option", "pattern"), [("--plots", "*.png"), ("--mprof", "mprofile_*.dat")]
)
def test_force_replaces_its_own_earlier_plots_and_timelines(tmp_path: Path, option, pattern):
    src, folder = _result(tmp_path), tmp_path / "out"
    write = ["compare", str(src), option, str(folder), "-q"]
    assert CliRunner().invoke(cli, write).exit_code == 0
    written = sorted(folder.glob(pattern))
    assert written
    res = CliRunner().invoke(cli, write)  # without --force: refused, and --force is said
    assert res.exit_code == 2 and "--force" in res.output, res.output
    inodes = {p: p.stat().st_ino for p in written}
    res = CliRunner().invoke(cli, [*write, "--force"])
    assert res.exit_code == 0, res.output
    assert all(p.stat().st_ino != inode for p, inode in inodes.items())  # written anew


def test_plots_force_never_replaces_a_png_ckptbench_did_not_write(tmp_path: Path):
    """``--plots DIR --force`` replaced a user's own evaluations.png in DIR (while --mprof
    refused a user's file); now it is refused as --mprof's is, and nothing is written."""
    src, folder = _result(tmp_path), tmp_path / "plots"
    folder.mkdir()
    mine = folder / "evaluations.png"
    mine.write_bytes(b"\x89PNG\r\n\x1a\n my own figure")
    report = tmp_path / "report.md"
    write = ["compare", str(src), "--plots", str(folder), "-o", str(report), "--force"]
    said = _one_line_refusal(CliRunner().invoke(cli, write), mine)
    assert "not a plot ckptbench wrote" in said and "not even with --force" in said
    assert mine.read_bytes() == b"\x89PNG\r\n\x1a\n my own figure"
    assert sorted(folder.iterdir()) == [mine] and not report.exists()  # nothing written
    res = CliRunner().invoke(cli, write[:-1])  # without --force: the same line, no "--force"
    assert "not a plot ckptbench wrote" in _one_line_refusal(res, mine)


def test_mprof_refuses_a_file_ckptbench_did_not_write_in_the_plots_words(tmp_path: Path):
    """A foreign file where --mprof writes was refused with 'exists; pass --force to
    replace ckptbench's timelines' (then refused again with --force); now one line says
    what it is not and what to do, --force or not, as --plots says it."""
    src, folder = _result(tmp_path), tmp_path / "mp"
    assert (
        CliRunner().invoke(cli, ["compare", str(src), "--mprof", str(folder), "-q"]).exit_code == 0
    )
    mine = sorted(folder.glob("mprofile_*.dat"))[0]
    mine.write_text("MEM 1 2\n")  # the user's own timeline, under ckptbench's name
    for force in ([], ["--force"]):
        res = CliRunner().invoke(cli, ["compare", str(src), "--mprof", str(folder), *force])
        said = _one_line_refusal(res, mine)
        assert "not an mprof timeline ckptbench wrote" in said and "pass --force" not in said
        assert mine.read_text() == "MEM 1 2\n"


@pytest.mark.parametrize("fmt", ["text", "markdown", "csv", "json", "html"])
def test_compare_o_force_replaces_its_own_report_in_every_format(tmp_path: Path, fmt: str):
    src, report = _result(tmp_path), tmp_path / f"report.{fmt}"
    write = ["compare", str(src), "--format", fmt, "-o", str(report), "-q"]
    assert CliRunner().invoke(cli, write).exit_code == 0
    inode = report.stat().st_ino
    res = CliRunner().invoke(cli, [*write, "--force"])
    assert res.exit_code == 0, res.output
    assert report.stat().st_ino != inode
    report.write_text("my notes\n")
    said = _one_line_refusal(CliRunner().invoke(cli, [*write, "--force"]), report)
    assert "not a report ckptbench wrote" in said and report.read_text() == "my notes\n"


def test_force_replaces_an_empty_file(tmp_path: Path):
    """An empty file (``mktemp``'s) loses nothing: --force replaces it, as it does a result."""
    src, report = _result(tmp_path), tmp_path / "report.md"
    report.touch()
    res = CliRunner().invoke(cli, ["compare", str(src), "-o", str(report), "--force", "-q"])
    assert res.exit_code == 0 and report.stat().st_size > 0, res.output


def test_run_out_says_a_foreign_file_is_no_result_before_asking_for_force(tmp_path: Path):
    """A file of the user's at ``run --out`` was 'exists; pass --force to replace it', and
    with --force then refused as no result: it is said at once, as the side outputs say it."""
    from ckptbench.cli.options import InputError
    from ckptbench.cli.outputs import check_out

    mine = tmp_path / "mine.json"
    mine.write_text("my notes\n")
    for force in (False, True):
        with pytest.raises(InputError, match="is not a ckptbench result") as err:
            check_out(mine, force)
        assert "pass --force" not in str(err.value) and "remove it or use another" in str(err.value)
    assert mine.read_text() == "my notes\n"
