"""`check --json`, as `run`, `plan` and `compare` have it: short for `--format json`, the
one shared option (``cli.outputs.json_and_format_options``), and with another `--format`
one line and exit 2 in their words. check had only `--format json` ("No such option")."""

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
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    save_result(make_result(CI_CASE, seed=1), "old.json")
    save_result(make_result(CI_CASE, seed=2), "new.json")


def invoke(args: list[str]):
    return CliRunner().invoke(cli, args, catch_exceptions=False)


@pytest.mark.parametrize("inputs", [["new.json"], ["new.json", "--against", "old.json"]])
def test_check_json_prints_what_format_json_prints(inputs: list[str]) -> None:
    flag = invoke(["check", *inputs, "--json"])
    named = invoke(["check", *inputs, "--format", "json"])
    assert flag.exit_code == named.exit_code and flag.exit_code in (0, 1), flag.output
    assert flag.stdout == named.stdout
    verdicts = json.loads(flag.stdout)
    assert verdicts and verdicts == json.loads(named.stdout)
    both = invoke(["check", *inputs, "--json", "--format", "json"])  # they agree
    assert both.exit_code == flag.exit_code and both.stdout == flag.stdout


@pytest.mark.parametrize("fmt", ["text", "markdown", "junit", "html"])
def test_check_json_with_another_format_is_one_line_as_elsewhere(capsys, fmt) -> None:
    said = f"--json is --format json: give one of --json and --format {fmt}"
    assert said in one_line_error(capsys, ["check", "new.json", "--json", "--format", fmt])
    if fmt != "junit":  # compare has no junit
        assert said in one_line_error(capsys, ["compare", "new.json", "--json", "--format", fmt])


def test_check_help_names_json() -> None:
    text = " ".join(invoke(["check", "--help"]).output.split())  # unwrapped
    assert "--json Print the verdicts as JSON" in text
    assert "(--json is --format json)" in text
