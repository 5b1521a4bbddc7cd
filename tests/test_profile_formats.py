"""`profile --json`, on the one option `run`, `plan`, `compare` and `check` share
(``cli.outputs.json_and_format_options``, resolved by ``options.format_asked``): short for
`--format json`, which prints the document `--json` always printed, byte for byte, and
`--format` takes the formats of profile's report (those of `run`'s), a clash with `--json`
one line and exit 2 in their words. profile had a `--json` flag of its own and no
`--format` ("No such option"). The profiling worker is replaced by a fixed document."""

from __future__ import annotations

import csv
import io
import json

import pytest
from _cli import one_line_error, run_cli

#: A profile as the worker returns it (``measure.lineprofile.LineProfile.to_dict``).
DOC = {
    "ok": True, "model": "lstm", "steps": 5, "snaps": 2, "mode": "checkpointed",
    "rows": [
        {"file": "ckptbench/workloads/lstm.py", "function": "step", "line": 104,
         "source": "        z = anp.dot(x, W) + b", "increment_mib": 0.5, "mem_usage_mib": 1.25,
         "occurrences": 5},
        {"file": "ckptbench/engine/interpreter.py", "function": "run", "line": 88,
         "source": "        del tape", "increment_mib": -0.25, "mem_usage_mib": 1.0,
         "occurrences": 3},
    ],
    "peak_traced_mib": 1.5, "end_traced_mib": 0.125,
}  # fmt: skip
ARGS = ["profile", "--steps", "5", "--snaps", "2", "--hidden", "8"]


@pytest.fixture(autouse=True)
def _fake_worker(monkeypatch) -> list[object]:
    import ckptbench.measure.tasks as tasks

    calls: list[object] = []
    monkeypatch.setattr(tasks, "profile_lines", lambda case, job: calls.append(job) or DOC)
    monkeypatch.setattr(tasks, "check_plugin", lambda case: None)
    monkeypatch.setenv("COLUMNS", "160")
    return calls


def test_json_and_format_json_print_the_document_json_always_printed(capsys) -> None:
    code, flag, err = run_cli(capsys, [*ARGS, "--json"])
    assert code == 0, err
    assert flag == json.dumps(DOC, indent=1) + "\n"  # as `profile --json` printed it
    assert run_cli(capsys, [*ARGS, "--format", "json"]) == (0, flag, err)
    assert run_cli(capsys, [*ARGS, "--json", "--format", "json"]) == (0, flag, err)


def test_the_format_choices_are_those_of_run_and_a_clash_is_one_line_as_there(
    capsys, _fake_worker
) -> None:
    from ckptbench.cli import cli

    def choices(command: str) -> str:
        option = next(p for p in cli.commands[command].params if p.name == "fmt")
        return option.type.get_metavar(option)

    assert choices("profile") == choices("run") == "[csv|html|json|markdown|text]"
    for fmt in ("csv", "text", "markdown"):
        said = one_line_error(capsys, [*ARGS, "--json", "--format", fmt])
        assert said == one_line_error(capsys, ["run", "--json", "--format", fmt])
        assert said == f"ckptbench: error: --json is --format json: give one of --json and " \
                       f"--format {fmt}\n"  # fmt: skip
    for fmt in ("junit", "yaml"):  # not a choice: run's words, the command's name aside
        said = one_line_error(capsys, [*ARGS, "--format", fmt])
        assert said == one_line_error(capsys, ["run", "--format", fmt])
    assert _fake_worker == []  # refused before anything was profiled


def test_each_format_shows_the_profile(capsys) -> None:
    code, text, _ = run_cli(capsys, ARGS)
    assert code == 0
    assert run_cli(capsys, [*ARGS, "--format", "text"])[1] == text  # the default
    assert "memory by line, top 2 of 2" in text and "lstm.py:104" in text
    assert "traced memory (tracemalloc) during the profiled gradient: peak 1.50 MiB" in text
    code, rows, _ = run_cli(capsys, [*ARGS, "--format", "csv"])
    assert code == 0
    records = list(csv.DictReader(io.StringIO(rows)))
    assert [r["line"] for r in records] == ["104", "88"]  # every row, raw
    assert [float(r["increment_mib"]) for r in records] == [0.5, -0.25]
    code, md, _ = run_cli(capsys, [*ARGS, "--format", "markdown", "--top", "1"])
    assert code == 0 and "lstm.py:104" in md and "interpreter.py" not in md
    assert "| " in md and "peak 1.50 MiB" in md
    code, page, _ = run_cli(capsys, [*ARGS, "--format", "html"])
    assert code == 0 and page.lstrip().lower().startswith("<!doctype html") and "lstm.py" in page
