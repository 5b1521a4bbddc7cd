"""`compare --json`, as `run --json` and `plan --json` have it: short for `--format json`,
one shared option (``cli.outputs.json_and_format_options``), and given with another
`--format` one line and exit 2, in the words run and plan use. compare had only
`--format json` ("No such option '--json'")."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _cli import one_line_error
from _synthetic import CI_CASE, make_result
from click.testing import CliRunner

from ckptbench.cli import cli
from ckptbench.results.schema import save_result


@pytest.fixture(autouse=True)
def _results(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    save_result(make_result(CI_CASE, seed=1), "old.json")
    save_result(make_result(CI_CASE, seed=2), "new.json")


def invoke(args: list[str]):
    return CliRunner().invoke(cli, args, catch_exceptions=False)


@pytest.mark.parametrize("inputs", [["new.json"], ["new.json", "--against", "old.json"]])
def test_compare_json_prints_what_format_json_prints(inputs: list[str]) -> None:
    flag = invoke(["compare", *inputs, "--json"])
    assert flag.exit_code == 0, flag.output
    named = invoke(["compare", *inputs, "--format", "json"])
    assert flag.stdout == named.stdout and flag.stderr == named.stderr
    rows = json.loads(flag.stdout)
    assert rows and rows == json.loads(named.stdout)
    both = invoke(["compare", *inputs, "--json", "--format", "json"])  # they agree
    assert both.exit_code == 0 and both.stdout == flag.stdout


def test_compare_json_writes_the_json_report_to_o() -> None:
    assert invoke(["compare", "new.json", "--json", "-o", "a.json", "-q"]).exit_code == 0
    assert invoke(["compare", "new.json", "--format", "json", "-o", "b.json", "-q"]).exit_code == 0
    assert json.loads(Path("a.json").read_text()) == json.loads(Path("b.json").read_text())
    assert Path("a.json").read_bytes() == Path("b.json").read_bytes()


@pytest.mark.parametrize("fmt", ["text", "table", "markdown", "csv", "html"])
def test_compare_json_with_another_format_is_one_line_as_for_run_and_plan(capsys, fmt) -> None:
    said = f"--json is --format json: give one of --json and --format {fmt}"
    err = one_line_error(capsys, ["compare", "new.json", "--json", "--format", fmt])
    assert said in err
    assert not Path(f"report.{fmt}").exists()
    for command in (["run", "--steps", "10", "--snaps", "3"], ["plan", "--budget", "1MiB"]):
        assert said in one_line_error(capsys, [*command, "--json", "--format", fmt])


def test_compare_help_names_json() -> None:
    text = " ".join(invoke(["compare", "--help"]).output.split())  # unwrapped
    assert "--json" in text and "the same as --format json" in text
    assert "(--json is --format json)" in text
