"""A newcomer's review of the reports (round 21): what compare's before -> after memory
figures are, said in the row; every format keeping a table's notes; a legend explaining
only the columns shown; a dry run's estimates adding up; a sweep saying each cell's own
notes; a config error's line for a quoted key with escapes."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from _cli import run_cli
from _synthetic import CI_CASE, make_result

from ckptbench.analysis import compare as comparison_of
from ckptbench.render.compare import render
from ckptbench.sweep.keylines import KeyLines


def _comparison():
    return comparison_of([make_result(CI_CASE, seed=4, rounds=3)],
                         [make_result(CI_CASE, seed=3, rounds=3)])  # fmt: skip


def _flat(text: str) -> str:
    return " ".join(text.split())  # notes wrap at the width, anywhere


# ------------------------------------------- 1. what the before -> after memory figures are


@pytest.mark.parametrize("width", [250, 80])
def test_before_after_text_rows_say_peak_or_overhead(width):
    """'memory before MiB' held the baseline's peak but the other modes' overhead over it;
    only the rule paragraph under the table said so. Each row says it now."""
    text = render(_comparison(), "text", width=width)
    after = text.split("Before -> after", 1)[1]
    rows = {m: line for line in after.splitlines() for m in ("baseline", "normal", "checkpointed")
            if re.search(rf"\s{m}\s", f" {line} ")}  # fmt: skip
    assert set(rows) == {"baseline", "normal", "checkpointed"}, after
    assert re.search(r"\bbaseline\s+peak\b", rows["baseline"]), rows
    assert re.search(r"\bnormal\s+overhead\b", rows["normal"]), rows
    assert re.search(r"\bcheckpointed\s+overhead\b", rows["checkpointed"]), rows


def test_before_after_markdown_and_html_rows_say_peak_or_overhead():
    md = render(_comparison(), "markdown")
    assert re.search(r"\| baseline \| peak \|", md), md
    assert re.search(r"\| normal \| overhead \|", md), md
    page = render(_comparison(), "html")
    assert '<td class="l">baseline</td><td class="l">peak</td>' in page
    assert '<td class="l">checkpointed</td><td class="l">overhead</td>' in page


def test_before_after_csv_keeps_its_columns_and_adds_what_memory_is():
    """The CSV's columns keep their places (readers by position); what a row's memory
    figures are comes after them, and a later column (how its time was compared) after
    that."""
    lines = render(_comparison(), "csv").splitlines()
    header = lines[0].split(",")
    assert header[:4] == ["key", "host", "mode", "memory_before_bytes"], header
    assert header[-2:] == ["memory_measure", "time_method"], header
    rows = [line.split(",") for line in lines[1:3]]
    assert rows[0][-2] == "peak" and rows[1][-2] == "overhead", lines[:3]


# ------------------------------------------------ 2. markdown and HTML keep the tables' notes


@pytest.mark.parametrize("fmt", ["markdown", "html"])
def test_markdown_and_html_explain_the_before_after_columns(fmt):
    """Markdown (a CI job summary) and the HTML page dropped the before -> after table's
    notes that text prints under it ('n: measured iterations, before v after')."""
    out = render(_comparison(), fmt)
    assert "n: measured iterations, before v after" in out, out[-3000:]
    assert "processes: worker processes, before v after" in out
    assert "memory: what the row" in out


def test_html_page_explains_the_cells_columns_as_text_does():
    """The HTML page's cells table had no legend: what +MiB, slowdown, savings, vs floor
    and evals (opt) are was said in text and markdown only."""
    page = render(_comparison(), "html")
    for said in ("+MiB: a mode&#x27;s exact peak", "vs floor: ckpt time", "evals (opt): step"):
        assert said in page, said


# ------------------------------------------------ 3. a legend explains only shown columns


def test_a_narrow_cells_table_explains_only_its_shown_columns():
    """At 80 columns compare's legend explained 'vs floor', 'evals (opt)' and 'savings',
    all left out at that width ('not shown at this width' named them)."""
    narrow = _flat(render(_comparison(), "text", width=80))
    cells = narrow.split("Warnings:", 1)[0]
    assert "not shown at this width:" in cells and "vs floor [95%]" in cells, cells
    for hidden in ("vs floor: ", "evals (opt): "):
        assert hidden not in cells, (hidden, cells)
    # shown, explained (the one cell's label now gives way to '#1' before the savings go)
    assert "slowdown: ckpt time / normal time" in cells and "savings: normal" in cells
    wide = _flat(render(_comparison(), "text", width=250)).split("Warnings:", 1)[0]
    for shown in ("vs floor: ", "evals (opt): ", "savings: normal"):
        assert shown in wide, (shown, wide)


def test_a_narrow_before_after_table_explains_only_its_shown_columns():
    narrow = _flat(render(_comparison(), "text", width=80)).split("Before -> after", 1)[1]
    assert "not shown at this width:" in narrow and "processes" in narrow, narrow
    assert "processes: " not in narrow and "n: measured" not in narrow, narrow
    assert "memory: what the row" in narrow


# ------------------------------------------------------ 4. a dry run's estimates add up


def _seconds(text: str) -> float:
    """'1.5 s', '12 s', '4 min 30 s', '1 h 5 min' in seconds."""
    units = {"s": 1, "min": 60, "h": 3600}
    return sum(float(n) * units[u] for n, u in re.findall(r"([\d.]+) (s|min|h)\b", text))


def test_a_dry_runs_cell_estimates_add_up_to_its_total(tmp_path: Path, capsys, monkeypatch):
    """Two cells of about 1.5 s each were shown as '2 s' and '2 s' over a total of
    'roughly 3 s'."""
    config = tmp_path / "r1.toml"
    config.write_text('name = "r1"\n[case]\nmodel = "rnn"\nsteps = 20\nhidden = 4\nrounds = 1\n'
                      'warmup = 0\nrepeats = 2\n[grid]\nsnaps = [3, 5]\n')  # fmt: skip
    monkeypatch.setenv("COLUMNS", "200")
    code, out, err = run_cli(capsys, ["sweep", str(config), "--out", str(tmp_path / "o"),
                                      "--dry-run"])  # fmt: skip
    assert code == 0, err
    shown = [_seconds(re.split(r"\s{2,}", line.strip())[1])
             for line in out.splitlines() if line.startswith("rnn l=20")]  # fmt: skip
    total = re.search(r"roughly (.+?) ->", out)
    assert len(shown) == 2 and total is not None, out
    assert sum(shown) == pytest.approx(_seconds(total.group(1))), out


# --------------------------------------------------- 5. each cell's own notes, once, first

SEQUENTIAL = """name = "seq"
[case]
model = "mlp-stack"
backend = "torch"
steps = 4
hidden = 4
rounds = 3
warmup = 0
repeats = 2
[grid]
strategy = ["checkpoint-sequential"]
snaps = [1, 2]
"""
SAID = "checkpoint-sequential with 1 segment checkpoints nothing"


def test_a_dry_run_says_a_cells_own_notes(tmp_path: Path, capsys):
    """`run --strategy checkpoint-sequential --snaps 1` says that it checkpoints nothing;
    a sweep cell set so was never told."""
    config = tmp_path / "seq.toml"
    config.write_text(SEQUENTIAL)
    code, out, err = run_cli(capsys, ["sweep", str(config), "--out", str(tmp_path / "o"),
                                      "--dry-run"])  # fmt: skip
    assert code == 0, err
    assert out.count(SAID) == 1, out
    line = next(line for line in out.splitlines() if SAID in line)
    assert line.startswith("mlp-stack l=4 s=1 checkpoint-sequential: "), line
    assert "(with snaps k," in line  # worded with the config's keys, not --snaps


def test_a_sweep_says_a_cells_own_notes_once_before_measuring(tmp_path: Path, monkeypatch):
    """Said once per cell (three rounds: still once), before the first cell starts."""
    from click.testing import CliRunner

    from ckptbench.cli import cli
    from ckptbench.sweep.cells import CellOutcome, CellState, SweepOutcome

    config = tmp_path / "seq.toml"
    config.write_text(SEQUENTIAL)
    said_before: list[bool] = []

    def fake_run_sweep(cfg, out_dir, *, progress=None, **_kw):
        said_before.append(True)
        cells = tuple(CellOutcome(c, out_dir / f"{c.key}.json", CellState.MEASURED, ok=True)
                      for c in cfg.cases)  # fmt: skip
        return SweepOutcome(cfg.name, out_dir, out_dir / "sweep.json", cells, 1.0)

    monkeypatch.setattr("ckptbench.sweep.run.run_sweep", fake_run_sweep)
    monkeypatch.setattr("ckptbench.cli.sweep._check_devices", lambda *_a: None)  # no torch
    res = CliRunner().invoke(cli, ["sweep", str(config), "--out", str(tmp_path / "o")])
    assert res.exit_code == 0, res.output
    assert said_before and _flat(res.output).count(SAID) == 1, res.output
    flat = _flat(res.output)
    assert flat.index(SAID) < flat.index("sweep seq: 2 cells"), res.output


# ------------------------------------------------ 6. a quoted key with escapes, its line


@pytest.mark.parametrize(
    ("line", "said"),
    [
        ('"a\\nb" = 1', "unknown case key"),
        ('"st\\u0065ps" = "x"', "steps must be an integer"),
        ('"st\\u0065ps" = 0', "steps must be >= 1"),
    ],
)
def test_a_config_error_names_the_line_of_a_quoted_key_with_escapes(
    tmp_path: Path, capsys, line, said
):
    """The line of a key written with escapes was the [case] header's (2), not its own."""
    config = tmp_path / "k.toml"
    config.write_text(f'name = "k"\n[case]\nmodel = "rnn"\n{line}\n')
    code, _, err = run_cli(capsys, ["sweep", str(config), "--dry-run"])
    assert code == 2 and said in err, err
    assert err.startswith(f"ckptbench: error: {config}:4: "), err


def test_key_lines_read_keys_as_toml_writes_them():
    text = "\n".join(
        [
            'name = "x"',  # 1
            "[case]",  # 2
            '"a\\tb" = 1',  # 3
            "'lit\\x' = 2",  # 4
            "grid = [",  # 5
            "  [3],",  # 6: an array of arrays, no header
            "]",  # 7
            "steps = 4",  # 8
            '[ "expect" . uniform ]  # c',  # 9
            "grad_max_rel_err_max = 1",  # 10
            "[[grid]]",  # 11
            'expect."uni\\u0066orm".x = 1',  # 12: dotted, not at the top level
        ]
    )
    keys = KeyLines(text)
    assert keys.find("case", "a\tb") == 3
    assert keys.find("case", "lit\\x") == 4
    assert keys.find("case", "steps") == 8  # '[3],' opened no table
    assert keys.find("expect.uniform", "grad_max_rel_err_max") == 10
    assert keys.find("expect.uniform") == 9
    assert keys.find("grid", None, 0) == 11
    assert keys.first("steps") == 8
