"""A JSON file a user gives ckptbench, saved with a UTF-8 byte-order mark (Windows Notepad,
PowerShell's ``Out-File``), reads as it does without the mark, for every reader: result
files and sweep folders given to ``compare`` and ``check`` (and ``--against``), their
manifests, a folder ``sweep --resume`` continues, ``--costs`` of ``plan`` and ``run``,
``read_results``, and what a writer takes an existing file for. It was refused in one line
("not JSON (Unexpected UTF-8 BOM (decode using utf-8-sig) at line 1)"), while a sweep config
with one was read. A mark anywhere but first stays an error. Nothing real is measured."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _synthetic import CI_CASE, TINY_SWEEP_TEXT, make_result
from click.testing import CliRunner

from ckptbench.cli import cli
from ckptbench.results.schema import save_result
from ckptbench.sweep.config import parse_config
from ckptbench.sweep.run import run_sweep

BOM = b"\xef\xbb\xbf"
COSTS = {"forward_time_s": 0.0004, "taped_time_s": 0.0026, "state_bytes": 65536,
         "tape_bytes": 450000}  # fmt: skip


@pytest.fixture(autouse=True)
def _here(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)  # the outputs name files as typed: the same either way
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    monkeypatch.setenv("COLUMNS", "120")


def invoke(args: list[str]) -> tuple[int, str, str]:
    res = CliRunner().invoke(cli, args, catch_exceptions=False)
    return res.exit_code, res.stdout, res.stderr


def add_bom(*paths: Path) -> None:
    for path in paths:
        assert not path.read_bytes().startswith(BOM)
        path.write_bytes(BOM + path.read_bytes())


def same_with_bom(args: list[str], *files: Path) -> tuple[int, str, str]:
    """``ckptbench ARGS`` before and after ``files`` gain a byte-order mark: the same exit
    status, stdout and stderr (returned)."""
    plain = invoke(args)
    add_bom(*files)
    marked = invoke(args)
    assert marked == plain
    return plain


@pytest.mark.parametrize(
    "args",
    [
        ["compare", "r.json"],
        ["compare", "r.json", "--format", "json"],
        ["compare", "new.json", "--against", "r.json"],
        ["check", "r.json"],
        ["check", "new.json", "--against", "r.json"],
    ],
)
def test_a_result_file_with_a_bom_reads_as_without(args: list[str]) -> None:
    save_result(make_result(CI_CASE, seed=1), "r.json")
    save_result(make_result(CI_CASE, seed=2), "new.json")
    code, out, err = same_with_bom(args, Path("r.json"))
    assert code == 0, err
    assert out and "BOM" not in out + err


def _tiny_sweep(folder: str) -> tuple[Path, list[Path]]:
    """A swept folder of three cells (synthetic results) and its config; the folder's
    JSON files, its manifest among them."""
    Path("tiny.toml").write_text(TINY_SWEEP_TEXT)
    seeds = iter(range(10, 20))
    outcome = run_sweep(
        parse_config(TINY_SWEEP_TEXT, default_name="tiny"),
        folder,
        run_cell=lambda case, **_: make_result(case, seed=next(seeds)),
    )
    assert outcome.exit_code == 0
    files = sorted(Path(folder).glob("*.json"))
    assert len(files) == 4  # three cells and sweep.json
    return Path("tiny.toml"), files


@pytest.mark.parametrize(
    "args",
    [
        ["compare", "sw"],
        ["check", "sw"],
        ["sweep", "tiny.toml", "--out", "sw", "--resume", "--dry-run"],
    ],
)
def test_a_sweep_folder_whose_files_carry_a_bom_reads_as_without(args: list[str]) -> None:
    """Its manifest and cells all marked: read, listed and gated as before, none named as
    "not a ckptbench result" (the folder's scan knows a result by its head)."""
    _, files = _tiny_sweep("sw")
    code, _, err = same_with_bom(args, *files)
    assert code == 0, err
    assert "not a ckptbench result" not in err and "not JSON" not in err


def test_read_results_reads_a_file_with_a_bom() -> None:
    from ckptbench.frame import read_results

    save_result(make_result(CI_CASE, seed=1), "r.json")
    plain = read_results("r.json")
    add_bom(Path("r.json"))
    assert read_results("r.json").equals(plain)


def test_plan_reads_a_costs_file_with_a_bom() -> None:
    for fmt in ("text", "json"):
        Path("costs.json").write_text(json.dumps(COSTS))
        args = ["plan", "--steps", "300", "--budget", "4MiB", "--costs", "costs.json"]
        code, _, err = same_with_bom([*args, "--format", fmt], Path("costs.json"))
        assert code == 0, err


def test_run_reads_a_costs_file_with_a_bom(monkeypatch) -> None:
    """The fake worker measures; the file's costs are read as without the mark (its states,
    not the case's, are warned of alike)."""
    from _fake import use_fake_worker

    use_fake_worker(monkeypatch)
    tiny = ["--model", "rnn", "--steps", "20", "--hidden", "8", "--batch", "2", "--input", "4",
            "--rounds", "1", "--warmup", "0", "--repeats", "1", "--strategy", "optimal",
            "--budget", "1MiB", "--costs", "costs.json"]  # fmt: skip
    Path("costs.json").write_text(json.dumps(COSTS))
    code, _, plain = invoke(["run", *tiny, "--out", "plain.json"])
    assert code == 0, plain
    add_bom(Path("costs.json"))
    code, _, marked = invoke(["run", *tiny, "--out", "marked.json"])
    assert code == 0, marked
    said = "warning --costs costs.json: step 0's state is 65536 B there, but 128 B"
    assert marked.splitlines()[0] == plain.splitlines()[0] and said in plain, plain


def test_a_result_with_a_bom_is_never_replaced_by_a_side_output() -> None:
    """A writer knows a marked result as one: `compare -o` refuses to replace it, --force or
    not (it took it for any file and replaced it with the report under --force)."""
    save_result(make_result(CI_CASE, seed=1), "r.json")
    save_result(make_result(CI_CASE, seed=2), "kept.json")
    add_bom(Path("kept.json"))
    before = Path("kept.json").read_bytes()
    for force in ([], ["--force"]):
        code, _, err = invoke(["compare", "r.json", "-o", "kept.json", *force])
        assert code == 2 and "is a ckptbench result or sweep manifest" in err, err
    assert Path("kept.json").read_bytes() == before


@pytest.mark.parametrize(
    "where",
    [
        pytest.param(lambda text: BOM + BOM + text, id="two marks"),
        pytest.param(lambda text: b" " + BOM + text, id="after a space"),
        pytest.param(lambda text: text + BOM, id="last"),
    ],
)
def test_a_bom_anywhere_but_first_is_still_refused_in_one_line(where) -> None:
    save_result(make_result(CI_CASE, seed=1), "r.json")
    Path("r.json").write_bytes(where(Path("r.json").read_bytes()))
    for command in ("compare", "check"):
        code, out, err = invoke([command, "r.json"])
        assert code == 2 and out == "", err
        assert "r.json: not JSON (" in err and err.count("\n") == 1


def test_costs_from_json_reads_a_leading_bom_as_nothing_and_refuses_one_elsewhere() -> None:
    """``schedules.optimal.costs_from_json`` (the costs file's one parser, for plug-ins and
    tests that read a file themselves) refused text a Windows editor saved: 'costs file is
    not JSON: Unexpected UTF-8 BOM (decode using utf-8-sig) at line 1'. The schedules are
    pure and may not import ``results.inputs.without_bom``: the mark is read as nothing in
    place, from the text and from the file's bytes alike."""
    from ckptbench.schedules.optimal import Costs, PlanError, costs_from_json

    text = json.dumps(COSTS)
    plain = costs_from_json(text)
    assert plain == Costs.from_dict(COSTS)
    assert costs_from_json("\ufeff" + text) == plain  # the file read as text (utf-8)
    assert costs_from_json((BOM + text.encode()).decode("utf-8")) == plain
    assert costs_from_json(BOM + text.encode()) == plain  # its bytes
    with pytest.raises(PlanError, match="not JSON"):  # one mark only, and only first
        costs_from_json("\ufeff\ufeff" + text)
    with pytest.raises(PlanError, match="not JSON"):
        costs_from_json(text[:1] + "\ufeff" + text[1:])
