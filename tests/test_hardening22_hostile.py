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


# ------------------------------------------------------ symbolic link loops as file names


def _result(folder: Path) -> Path:
    from _synthetic import make_result

    from ckptbench.results.schema import save_result

    path = folder / "r.json"
    save_result(make_result(), path)
    return path


@pytest.mark.parametrize(
    "argv",
    [
        ["check", "{r}", "--junit", "{loop}"],
        ["check", "{r}", "--summary", "{loop}"],
        ["check", "{r}", "--junit", "{loop}/x.xml"],
        ["compare", "{r}", "--plots", "{loop}"],
        ["compare", "{r}", "--mprof", "{loop}"],
    ],
)
def test_an_output_through_a_symlink_loop_is_one_line(capsys, tmp_path: Path, argv) -> None:
    """A link to itself as an output: ``Path.resolve`` (the check that no file is written
    twice, or into an input) raised RuntimeError "Symlink loop": a traceback, exit 1."""
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    r = _result(tmp_path)
    err = one_line_error(capsys, [a.format(r=r, loop=loop) for a in argv])
    assert str(loop) in err


_RUN = ["run", "--steps", "10", "--snaps", "3"]


@pytest.mark.parametrize(
    ("argv", "target", "named"),
    [
        ([*_RUN, "--mprof", "{link}"], "itself", False),
        ([*_RUN, "--mprof", "{link}/sub"], "itself", True),
        ([*_RUN, "--mprof", "{link}"], "nowhere", False),
        (["compare", "{r}", "--mprof", "{link}"], "nowhere", False),
        (["compare", "{r}", "--plots", "{link}"], "nowhere", False),
        (["compare", "{r}", "-o", "{link}/sub/report.md"], "nowhere", True),
        (["check", "{r}", "--junit", "{link}/sub/j.xml"], "nowhere", True),
    ],
)
def test_an_output_folder_through_a_link_that_leads_nowhere_says_so(
    capsys, tmp_path: Path, argv, target, named
) -> None:
    """A folder to make where a link to itself (or to nothing) stands: mkdir said only
    "--mprof loop: File exists", which names no link (a file checked first, as compare's
    are, says "Too many levels of symbolic links" for a loop, which does)."""
    link = tmp_path / "link"
    link.symlink_to(link if target == "itself" else tmp_path / "nowhere")
    r = _result(tmp_path)
    err = one_line_error(capsys, [a.format(r=r, link=link) for a in argv])
    assert "is a symbolic link that leads nowhere" in err, err
    assert (f"{link} is a symbolic link" in err) == named, err


def test_a_step_summary_through_a_symlink_loop_is_one_line(capsys, tmp_path, monkeypatch):
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(loop))
    err = one_line_error(capsys, ["check", str(_result(tmp_path))])
    assert "$GITHUB_STEP_SUMMARY" in err and "symbolic link" in err


@pytest.mark.parametrize("command", ["compare", "check"])
def test_a_symlink_loop_in_a_results_folder_is_a_cell_set_aside(capsys, tmp_path, command):
    """A folder holding ``z.json -> z.json`` beside a result: compare and check raised
    RuntimeError from ``Path.resolve``. Now the link is a cell that cannot be read: compare
    tabulates the rest and names it, check fails it (as any unreadable cell)."""
    from _cli import run_cli

    _result(tmp_path)
    (tmp_path / "z.json").symlink_to(tmp_path / "z.json")
    code, out, err = run_cli(capsys, [command, str(tmp_path)])
    assert "Traceback" not in err
    assert "z.json: is a symbolic link that leads nowhere (a loop" in out + err
    assert code == (0 if command == "compare" else 1)


# ------------------------------------------------------------- sweep --dry-run --dask


@pytest.mark.parametrize("address", ["nonsense", "http://x", "tcp://127.0.0.1:99999", " "])
def test_a_dry_run_refuses_a_dask_address_the_sweep_refuses(capsys, tmp_path, address) -> None:
    """``sweep --dry-run --dask nonsense`` listed the cells and exited 0; the sweep itself
    refuses the address in one line. The dry run checks its syntax now (it reaches nothing)."""
    config = tmp_path / "c.toml"
    config.write_text(CASE + "snaps = 2\n")
    argv = ["sweep", str(config), "--dry-run", "--dask", address, "--out", str(tmp_path / "o")]
    err = one_line_error(capsys, argv)
    assert err.startswith("ckptbench: error: --dask ")
    assert not (tmp_path / "o").exists()


# ------------------------------------------------------------------ names past NAME_MAX


@pytest.mark.parametrize(
    "argv",
    [
        ["check", "{long}"],
        ["compare", "{long}"],
        ["compare", "{r}", "--against", "{long}"],
        ["check", "{r}", "--against", "{long}"],
        ["compare", "{r}", "{long}/x.json"],
        ["compare", "{r}", "--mprof", "{long}"],
        ["compare", "{r}", "--plots", "{deep}"],
        ["sweep", "{config}", "--out", "{long}"],
        ["sweep", "{config}", "--out", "{deep}"],
        ["run", "--steps", "3", "--mprof", "{long}", "--out", "{tmp}/x.json"],
    ],
)
def test_a_name_too_long_is_one_line(capsys, tmp_path: Path, monkeypatch, argv) -> None:
    """A 300-byte name (or a 5000-byte path) as a result, a folder or --out: pathlib's
    ``exists``/``is_dir`` raised OSError ENAMETOOLONG, a traceback and exit 1."""
    monkeypatch.chdir(tmp_path)
    config = tmp_path / "c.toml"
    config.write_text(CASE + "snaps = 2\n")
    names = {
        "long": "x" * 300,
        "deep": "/".join(["d" * 200] * 25),
        "r": str(_result(tmp_path)),
        "config": str(config),
        "tmp": str(tmp_path),
    }
    err = one_line_error(capsys, [a.format(**names) for a in argv])
    assert "too long" in err
    assert not (tmp_path / "x.json").exists()


# ------------------------------------------------------ a result's enum fields, unhashable


@pytest.mark.parametrize("field", ["mode", "status"])
@pytest.mark.parametrize("value", [[], {}, ["ok"]])
def test_a_list_or_object_as_a_modes_enum_field_is_one_line(capsys, tmp_path, field, value):
    """``"status": []`` (or ``{}``) in a result: the validator looked it up in a set of the
    enum's values, a TypeError (unhashable type) traceback; now "malformed result"."""
    import json

    path = _result(tmp_path)
    doc = json.loads(path.read_text())
    doc["modes"][1][field] = value
    path.write_text(json.dumps(doc))
    err = one_line_error(capsys, ["compare", str(path)])
    assert f"malformed result: modes[1].{field} must be one of" in err
