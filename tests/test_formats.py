"""One formats registry: every command's ``--format`` reads it, a format is one entry, and
a toy format registered from the test folder renders a ``compare`` report without editing
any ckptbench module; old flags (``run --json``, ``compare --format table``, ``check
--junit``/``--summary``) keep working."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _synthetic import CI_CASE, make_result
from click.testing import CliRunner
from toys.format import TOY

from ckptbench.analysis import compare
from ckptbench.analysis.gate import check
from ckptbench.cli import cli as main
from ckptbench.render import compare_report, render
from ckptbench.render.formats import get_format, names_for, register, registry
from ckptbench.render.reports import (
    CHECK_SECTIONS,
    PLAN_SECTIONS,
    RUN_SECTIONS,
    check_report,
    run_report,
)
from ckptbench.results.schema import result_to_dict, save_result


@pytest.fixture
def toy():
    register(TOY)
    yield TOY
    registry().pop(TOY.name, None)


def _files(tmp_path: Path) -> list[Path]:
    paths = []
    for k, snaps in enumerate((4, 8, 12)):
        paths.append(tmp_path / f"r{k}.json")
        save_result(make_result(CI_CASE.with_(snaps=snaps), seed=k), paths[-1])
    return paths


def test_every_builtin_format_is_one_module_of_the_registry() -> None:
    names = set(registry())
    assert {"text", "markdown", "csv", "json", "html", "junit"} <= names
    assert get_format("table") is get_format("text")  # compare's old name
    assert set(names_for(CHECK_SECTIONS, aliases=False)) >= {"text", "markdown", "junit", "json"}
    assert "junit" not in names_for(RUN_SECTIONS) and "junit" not in names_for(PLAN_SECTIONS)
    with pytest.raises(ValueError, match=r"unknown format 'pdf'.*choose from"):
        get_format("pdf")


def test_compare_offers_no_format_it_cannot_render(tmp_path, capsys) -> None:
    """junit shows only a gate's verdicts: `compare --format junit` raised an IndexError."""
    from _cli import one_line_error

    from ckptbench.render.compare import format_names

    assert "junit" not in format_names() and {"html", "csv", "json"} <= set(format_names())
    paths = _files(tmp_path)
    err = one_line_error(capsys, ["compare", str(paths[0]), "--format", "junit"])
    assert "'junit' is not one of" in err
    report = compare_report(compare([make_result(CI_CASE)]))
    with pytest.raises(ValueError, match="use it with ckptbench check"):
        get_format("junit").render(report, None)


def test_a_toy_format_from_the_test_folder_renders_a_compare_report(toy, tmp_path) -> None:
    results = [make_result(CI_CASE.with_(snaps=s), seed=s) for s in (4, 8)]
    comparison = compare(results)
    text = toy.render(compare_report(comparison), None)
    assert text.startswith("# ckptbench compare\n== Cells ==")
    assert render(comparison, "toy") == text
    paths = _files(tmp_path)
    res = CliRunner().invoke(main, ["compare", *map(str, paths), "--format", "toy"])
    assert res.exit_code == 0, res.output
    assert "== Cells ==" in res.output and res.output.count(" ; ") >= 3
    assert "toy" in CliRunner().invoke(main, ["compare", "--help"]).output


def test_old_format_flags_are_aliases_of_the_registry(tmp_path) -> None:
    paths = _files(tmp_path)
    invoke = CliRunner().invoke
    table = invoke(main, ["compare", *map(str, paths), "--format", "table"]).output
    assert table == invoke(main, ["compare", *map(str, paths), "--format", "text"]).output
    rows = json.loads(invoke(main, ["compare", *map(str, paths), "--format", "json"]).output)
    assert len(rows) == 3 and {"key", "slowdown", "memory_savings"} <= set(rows[0])
    bad = invoke(main, ["compare", *map(str, paths), "--format", "pdf"])
    assert bad.exit_code == 2 and "'pdf' is not one of" in bad.output
    junit = invoke(main, ["check", str(tmp_path), "--format", "junit"])
    assert junit.output.startswith('<?xml version="1.0"')
    out = tmp_path / "out" / "j.xml"
    res = invoke(main, ["check", *map(str, paths), "--junit", str(out)])
    assert out.read_text().startswith("<?xml") and "ckptbench check" in res.output


def test_run_and_check_reports_render_as_their_old_outputs() -> None:
    result = make_result(CI_CASE, seed=2)
    doc = json.loads(get_format("json").render(run_report(result), None))
    assert doc == json.loads(json.dumps(result_to_dict(result)))  # run --json
    text = get_format("text").render(run_report(result, quiet=True), 200)
    assert "ckptbench run" in text and "slowdown" in text
    gate = check([result])
    from ckptbench.render.verdicts import check_junit, check_markdown, check_text

    assert get_format("text").render(check_report(gate), None) == check_text(gate)
    assert get_format("markdown").render(check_report(gate), None) == check_markdown(gate)
    assert get_format("junit").render(check_report(gate), None) == check_junit(gate)


@pytest.mark.parametrize("command", [["run", "--model", "rnn", "--steps", "10"], ["plan"]])
def test_json_and_another_format_is_bad_input_not_a_silent_choice(command, capsys) -> None:
    from _cli import one_line_error

    argv = [*command, "--steps", "10", "--budget", "1MiB"] if command == ["plan"] else command
    err = one_line_error(capsys, [*argv, "--json", "--format", "csv"])
    assert "--json is --format json: give one of --json and --format csv" in err
