"""``compare`` over several invocations of one cell: each row says where it was read from
(a sweep folder, a file) wherever labels would read the same, in every format, and a cell
several sweep manifests list without a file is one line naming each file."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from _synthetic import CI_CASE, make_result
from click.testing import CliRunner

from ckptbench.cli import cli
from ckptbench.render.format import cell_labels
from ckptbench.results.schema import save_result
from ckptbench.results.store import load_result, missing_cells
from ckptbench.schedules.optimal import PlanError
from ckptbench.sweep.config import parse_config
from ckptbench.sweep.run import run_sweep

CONFIG = (
    'name = "src"\n[case]\nmodel = "rnn"\nsteps = 20\nhidden = 8\n[[grid]]\nsnaps = [4, 8]\n'
    '[[grid]]\nstrategy = ["optimal"]\nbudget_bytes = ["1KiB"]\n'
)


def _sweeps(tmp_path: Path, monkeypatch) -> tuple[list[str], str]:
    """Two sweep folders of one config (the optimal cell has no plan: listed, no file) and
    a loose file of its first cell, in the current folder: the paths to compare (as a user
    types them) and the missing cell's key."""
    monkeypatch.chdir(tmp_path)
    config = parse_config(CONFIG, "src.toml")
    seeds = iter(range(100))

    def run_cell(case, **_):
        if case.strategy == "optimal":
            raise PlanError("no schedule of 20 steps fits in a budget of 1.00 KiB (1024 B)")
        return make_result(case, seed=next(seeds))

    for folder in ("a", "b"):
        run_sweep(config, Path(folder), run_cell=run_cell)
    save_result(make_result(config.cases[0], seed=99), Path("r1.json"))
    return ["r1.json", "a", "b"], config.cases[2].key


def _compare(*args: str):
    return CliRunner().invoke(cli, ["compare", *args])


def test_invocations_of_one_cell_are_told_apart_in_every_format(
    tmp_path: Path, monkeypatch
) -> None:
    """`compare r1.json sw1 sw1b` printed 's=3 revolve' three times with different figures
    and nothing to tell the rows apart; `compare swu u1.json` two rows both 's=2'."""
    paths, _ = _sweeps(tmp_path, monkeypatch)
    res = _compare(*paths, "--format", "markdown")
    assert res.exit_code == 0, res.output
    cells = res.stdout.split("## Cells")[1].split("\n\n")[0]
    rows = [line.split(" | ")[0] for line in cells.splitlines() if line.startswith("| rnn")]
    assert sorted(rows) == [
        "| rnn l=20 s=4 revolve [a]",
        "| rnn l=20 s=4 revolve [b]",
        "| rnn l=20 s=4 revolve [r1.json]",
        "| rnn l=20 s=8 revolve [a]",
        "| rnn l=20 s=8 revolve [b]",
    ]
    text = _compare(*paths).stdout.split("Invocations of one cell")[0]
    # full labels or short ones ('s=4 [a]'), by the width: each row names its source
    rows = [line.split("  ")[0] for line in text.splitlines() if "revolve" in line or "s=" in line]
    rows = [row for row in rows if not row.startswith("every cell")]
    assert len(rows) == len(set(rows)) == 5, text
    assert [row.split(" [")[-1] for row in rows].count("a]") == 2, text
    table = list(csv.DictReader(io.StringIO(_compare(*paths, "--format", "csv").stdout)))
    assert len(table) == 5 and len({(r["key"], r["host"], r["source"]) for r in table}) == 5
    assert {r["source"] for r in table if r["snaps"] == "4"} == {
        "r1.json",
        str(Path("a", f"{table[0]['key']}.json")),
        str(Path("b", f"{table[0]['key']}.json")),
    }
    records = json.loads(_compare(*paths, "--format", "json").stdout)
    assert len({(r["key"], r["source"]) for r in records}) == 5


def test_a_cell_two_manifests_list_without_a_file_is_named_once(
    tmp_path: Path, monkeypatch
) -> None:
    """The "Missing cells" block repeated one invalid cell once per folder, word for word."""
    paths, key = _sweeps(tmp_path, monkeypatch)
    ((listed, what),) = missing_cells(paths[1:])
    assert listed == key and what.startswith(f"a/{key}.json, b/{key}.json (state invalid")
    assert "(state invalid: config error: no schedule" in what
    res = _compare(*paths)
    assert res.exit_code == 0, res.output
    assert res.stderr.count(f"compare: {key}:") == 1, res.stderr
    assert "compare: 1 cell(s) listed" in res.stderr
    report = res.stdout.split("Missing cells:")[1]
    assert report.count(f"{key}:") == 1 and "1 cell(s) listed" in report


def test_labels_are_told_apart_only_where_they_collide(tmp_path: Path) -> None:
    from ckptbench.render.format import told_apart

    one, two, other = (make_result(CI_CASE, seed=s) for s in (1, 2, 3))
    other = make_result(CI_CASE.with_(snaps=8), seed=4)
    results = [one, two, other]
    labels = cell_labels([r.case for r in results])
    # measured here, read from no file: by their order
    apart = told_apart(labels, results)
    assert apart == [f"{labels[0]} [run 1]", f"{labels[1]} [run 2]", labels[2]]
    # two files of one folder (not named by their cell): their paths
    (tmp_path / "d").mkdir()
    for name, r in (("x.json", one), ("y.json", two)):
        save_result(r, tmp_path / "d" / name)
    read = [load_result(tmp_path / "d" / n) for n in ("x.json", "y.json")]
    assert told_apart(labels[:2], read) == [
        f"{labels[0]} [{tmp_path / 'd' / 'x.json'}]",
        f"{labels[1]} [{tmp_path / 'd' / 'y.json'}]",
    ]
    # where it was read from is no part of the result's document
    assert "source" not in json.loads((tmp_path / "d" / "x.json").read_text())
    save_result(read[0], tmp_path / "again.json")
    assert "source" not in json.loads((tmp_path / "again.json").read_text())
