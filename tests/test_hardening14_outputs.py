"""The fourteenth audit, of the side outputs: ``check --summary`` appends to no input under
another name (a hard link) and to no document that is not text (a costs file, a JSON
report, JUnit XML, a plot, an mprof timeline); ``compare --mprof`` names the host of each
timeline when the results come from several machines, as ``--plots`` does; and a JSON
file in a sweep folder that is not a result (a costs file, a report) is not called one.
Synthetic results; nothing here is measured or timed."""

from __future__ import annotations

import os

import pytest
from _cli import one_line_error, run_cli
from _synthetic import CI_CASE, make_result

from ckptbench.results.schema import save_result

CONFIG = (
    'name = "tiny"\n[case]\nmodel = "rnn"\nsteps = 20\nhidden = 8\nbatch = 2\ninput = 4\n'
    "rounds = 1\n[[grid]]\nsnaps = [4]\n[expect]\nmemory_savings_min = 1.5\n"
)


@pytest.fixture(autouse=True)
def _no_step_summary(monkeypatch):
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)


def test_summary_is_never_appended_to_an_input_under_another_name(tmp_path, capsys):
    """A hard link has its own path: ``check --config c.toml --summary link.md`` appended
    the markdown to the config itself (both names are one file)."""
    save_result(make_result(CI_CASE, seed=1), tmp_path / "r.json")
    config = tmp_path / "c.toml"
    config.write_text(CONFIG)
    link = tmp_path / "notes.md"
    os.link(config, link)
    argv = ["check", str(tmp_path / "r.json"), "--config", str(config), "--summary", str(link)]
    err = one_line_error(capsys, argv)
    assert (
        err == f"ckptbench: error: --summary {link}: is an input of this command; nothing written\n"
    )
    assert config.read_text() == CONFIG


@pytest.mark.parametrize(
    ("name", "content", "what"),
    [
        ("costs.json", '{\n "forward_time_s": 1e-05,\n "state_bytes": 64\n}\n', "a JSON document"),
        ("report.json", '[\n {"key": "x"}\n]\n', "a JSON document"),
        (
            "junit.xml",
            '<?xml version="1.0" encoding="utf-8"?>\n<testsuites/>\n',
            "an XML or HTML document",
        ),
        ("report.html", "<!DOCTYPE html>\n<html><body></body></html>\n", "an XML or HTML document"),
        ("plot.png", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "a binary file"),
        (
            "mprofile_x_normal.dat",
            "CMDLINE ckptbench run\nMEM 1.0 1700000000.0\n",
            "an mprof timeline ckptbench wrote",
        ),
    ],
)
def test_summary_appends_markdown_only_to_text(tmp_path, capsys, name, content, what):
    """--summary appends: onto a costs file it broke the file (`plan --costs` then read
    'not JSON (Extra data ...)'), onto JUnit XML, HTML, a PNG or a timeline likewise."""
    save_result(make_result(CI_CASE, seed=1), tmp_path / "r.json")
    target = tmp_path / name
    if isinstance(content, bytes):
        target.write_bytes(content)
    else:
        target.write_text(content)
    before = target.read_bytes()
    err = one_line_error(capsys, ["check", str(tmp_path / "r.json"), "--summary", str(target)])
    assert err == (
        f"ckptbench: error: --summary {target}: is {what}; --summary appends markdown to a "
        "text file only: use another file name\n"
    )
    assert target.read_bytes() == before


def test_summary_still_appends_to_markdown_and_plain_text(tmp_path, capsys):
    save_result(make_result(CI_CASE, seed=1), tmp_path / "r.json")
    for name, start in [("s.md", "# CI\n\n[a link](x)\n"), ("s.txt", "{not json\n"), ("e.md", "")]:
        target = tmp_path / name
        target.write_text(start)
        code, _, err = run_cli(
            capsys, ["check", str(tmp_path / "r.json"), "--summary", str(target)]
        )
        assert code == 0, err
        text = target.read_text()
        assert text.startswith(start) and "ckptbench check" in text[len(start) :]


def test_compare_mprof_names_the_host_of_each_timeline(tmp_path, capsys):
    """Two results of one cell from two machines: --plots named each timeline's host, --mprof
    wrote the second machine's as '-2', which host it was told nowhere (and swapped with the
    order of the arguments)."""
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    save_result(make_result(CI_CASE, seed=1, host="laptop"), a)
    save_result(make_result(CI_CASE, seed=2, host="ci-runner"), b)
    code, _, err = run_cli(capsys, ["compare", str(a), str(b), "--mprof", str(tmp_path / "m")])
    assert code == 0, err
    names = sorted(p.name for p in (tmp_path / "m").iterdir())
    assert names and all(("-laptop" in n) != ("-ci-runner" in n) for n in names), names
    assert not any(n.endswith("-2.dat") for n in names), names
    code, _, err = run_cli(capsys, ["compare", str(b), str(a), "--mprof", str(tmp_path / "m2")])
    assert code == 0, err
    for n in names:  # each file holds its own host's timeline, whatever the order given
        assert (tmp_path / "m" / n).read_text().splitlines()[1:] == (
            (tmp_path / "m2" / n).read_text().splitlines()[1:]
        ), n


def test_a_json_file_in_a_sweep_folder_that_is_no_result_is_not_called_one(tmp_path, capsys):
    """`plan --save-costs sw/costs.json` or `compare ... -o sw/report.json` in a sweep folder:
    compare said 'is not a cell of its folder's sweep manifest (not in the tables; pass the
    file itself to compare it)', and passing it is refused: it is no result."""
    from ckptbench.sweep.config import parse_config
    from ckptbench.sweep.run import run_sweep

    def run_cell(case, *, out_path=None, progress=None):
        return make_result(case, seed=case.snaps)

    sw = tmp_path / "sw"
    run_sweep(parse_config(CONFIG, "t.toml"), sw, run_cell=run_cell)
    (sw / "costs.json").write_text('{\n "forward_time_s": 1e-05\n}\n')
    code, _, err = run_cli(capsys, ["compare", str(sw)])
    assert code == 0, err
    assert "pass the file itself" not in err
    assert f"compare: {sw / 'costs.json'} is not a ckptbench result (not read)" in err
    code, out, err = run_cli(capsys, ["check", str(sw)])
    assert "so not gated: " not in out + err
    assert f"not ckptbench results (not read): {sw / 'costs.json'}" in out + err
