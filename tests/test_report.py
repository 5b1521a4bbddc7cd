"""What the reports show (issue 8): tables that fit 100/120 columns, the gate's verdict as
text, markdown, a CI step summary and JUnit XML, the memory-limit outcome as a result, an
HTML report that opens with a summary, and readable plots."""

from __future__ import annotations

import re
import struct
import xml.etree.ElementTree as ET
from dataclasses import replace
from pathlib import Path

import pytest
from _synthetic import CI_CASE, MIB, make_result
from rich.console import Console

from ckptbench.analysis import compare
from ckptbench.analysis.gate import check
from ckptbench.cli import main
from ckptbench.render import (
    check_junit,
    figure_png,
    headline,
    plot_timeline,
    plot_tradeoff,
    render,
    run_table,
)
from ckptbench.render.html import render_html
from ckptbench.results.schema import Mode, Status, save_result
from ckptbench.sweep.config import parse_config
from ckptbench.sweep.run import run_sweep

NUMBER = re.compile(r"[+-]?\d[\d,]*\.\d+ (MiB|s)|\d+\.\d+x")


def _printed(renderable, width: int) -> list[str]:
    console = Console(width=width, record=True, force_terminal=False, color_system=None)
    console.print(renderable)
    return console.export_text().splitlines()


@pytest.mark.parametrize("width", [100, 120])
def test_run_table_fits_without_cutting_names_or_wrapping_numbers(width: int) -> None:
    result = make_result(CI_CASE.with_(memory_limit_bytes=100 * MIB))
    lines = _printed(run_table(result), width)
    assert max(map(len, lines)) <= width and not any("…" in line for line in lines)
    modes = (["baseline", "ok"], ["normal", "ok"], ["checkpointed", "ok"])  # a note's wrap: no row
    rows = {line.split()[0]: line for line in lines if line.split()[:2] in modes}
    assert sorted(rows) == ["baseline", "checkpointed", "normal"]
    wide = _printed(run_table(result), 300)
    for line in wide:  # every number of a shown column is whole on its mode's row
        if line.split()[:1] and line.split()[0] in rows:
            shown = [n.group(0) for n in NUMBER.finditer(line)]
            narrow = rows[line.split()[0]]
            assert sum(n in narrow for n in shown) >= 3
            assert all(n.group(0) in shown for n in NUMBER.finditer(narrow))


def test_run_table_keeps_every_column_when_wide_and_drops_the_least_first() -> None:
    result = make_result(CI_CASE)
    wide = "\n".join(_printed(run_table(result), 200))
    assert "sampled" in wide and "grad err" in wide and "not shown" not in wide
    narrow = "\n".join(_printed(run_table(result), 100))
    assert "not shown at this width: sampled" in narrow
    assert "exact peak" in narrow and "overhead" in narrow and "slowdown" in narrow


def test_piped_compare_output_is_plain_and_fits_120_columns(tmp_path: Path, capsys) -> None:
    folder = tmp_path / "grid"
    folder.mkdir()
    for k, hidden in enumerate((32, 64, 128)):
        case = CI_CASE.with_(hidden=hidden, model="plugins/some_long_model_file_name.py:make")
        save_result(make_result(case, seed=k), folder / f"{k}.json")
        save_result(make_result(case, seed=k + 10), tmp_path / f"before{k}.json")
    before = [str(tmp_path / f"before{k}.json") for k in range(3)]
    with pytest.raises(SystemExit) as exc:
        main(["compare", str(folder), *[x for b in before for x in ("--against", b)]])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert "\x1b[" not in out
    assert max(len(line) for line in out.splitlines() if not line.startswith("Memory: ")) <= 120


def test_normal_stopped_at_the_limit_is_a_result() -> None:
    case = CI_CASE.with_(memory_limit_bytes=100 * MIB)
    result = make_result(case, status={"normal": Status.OUT_OF_MEMORY})
    text = headline(result)
    assert "plain autograd needed more than 100 MiB" in text
    assert re.search(r"checkpointed ran in \+2\.\d MiB \[\+2\.\d, \+2\.\d\] over baseline", text)
    table = "\n".join(_printed(run_table(result), 120))
    assert "> 100.0 MiB" in table and "out-of-memory" in table
    assert re.search(r"> \+5\d\.\d MiB", table)  # overhead: the limit minus the baseline peak
    assert "FAILED" not in text


def test_compare_shows_the_lower_bound_run_shows_for_a_mode_stopped_at_the_limit(
    tmp_path: Path, capsys
) -> None:
    case = CI_CASE.with_(memory_limit_bytes=100 * MIB)
    result = make_result(case, status={"normal": Status.OUT_OF_MEMORY})
    save_result(result, tmp_path / "oom.json")
    figures = result.summary.mode(Mode.NORMAL)
    base = result.summary.mode(Mode.BASELINE).peak_rss_bytes
    assert figures.overhead_above_bytes == 100 * MIB - base and figures.peak_above_bytes
    shown = f"> +{(100 * MIB - base) / MIB:.2f}"
    for fmt in ("text", "markdown"):  # markdown: a '>' in a cell is text as it is
        with pytest.raises(SystemExit):
            main(["compare", str(tmp_path / "oom.json"), "--format", fmt])
        assert shown in capsys.readouterr().out, fmt
    with pytest.raises(SystemExit):
        main(["compare", str(tmp_path / "oom.json"), "--format", "csv"])
    rows = capsys.readouterr().out.splitlines()
    row = dict(zip(rows[0].split(","), rows[1].split(","), strict=True))
    assert int(row["normal_overhead_above_bytes"]) == 100 * MIB - base
    assert row["normal_overhead_bytes"] == "" and row["checkpointed_overhead_above_bytes"] == ""
    assert result.summary.as_dict()["overhead_above_bytes"] == {"normal": 100 * MIB - base}


# --------------------------------------------------------------------------- check


def _gate_folder(tmp_path: Path, savings_min: float) -> Path:
    config = parse_config(
        f"[case]\nsteps = 64\nhidden = 8\n[grid]\nsnaps = [4, 8]\n"
        f"[expect]\nmemory_savings_min = {savings_min}\n",
        "gate.toml",
    )
    out = tmp_path / f"gate{savings_min:g}"
    seeds = iter(range(100))
    run_sweep(config, out, run_cell=lambda case, **_: make_result(case, seed=next(seeds)))
    return out


def test_check_prints_text_markdown_and_appends_the_step_summary(
    tmp_path: Path, capsys, monkeypatch
) -> None:
    folder = _gate_folder(tmp_path, 25)
    summary = tmp_path / "step-summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    with pytest.raises(SystemExit) as exc:
        main(["check", str(folder)])
    out = capsys.readouterr().out
    assert exc.value.code == 1
    assert out.startswith("ckptbench check: FAILED") and "###" not in out and "|" not in out
    assert re.search(r"FAIL \S+ memory_savings_min: \d+\.\d\dx, need >= 25x", out)
    md = summary.read_text()
    assert md.startswith("### ckptbench check: FAILED") and "need >= 25x" in md
    with pytest.raises(SystemExit):
        main(["check", str(folder), "--format", "markdown"])
    assert capsys.readouterr().out.startswith("### ckptbench check: FAILED")
    assert summary.read_text().count("### ckptbench check") == 2


def test_junit_has_one_testcase_per_check_and_failures_with_numbers(tmp_path: Path, capsys) -> None:
    folder = _gate_folder(tmp_path, 25)
    junit = tmp_path / "junit.xml"
    with pytest.raises(SystemExit) as exc:
        main(["check", str(folder), "--junit", str(junit)])
    assert exc.value.code == 1
    capsys.readouterr()
    root = ET.fromstring(junit.read_text())
    cases = root.findall(".//testcase")
    failures = root.findall(".//testcase/failure")
    assert root.tag == "testsuites" and int(root.get("tests")) == len(cases) == 4
    assert int(root.get("failures")) == len(failures) == 2
    assert all(re.fullmatch(r"\d+\.\d\dx, need >= 25x", f.get("message")) for f in failures)
    passing = check_junit(check(make_result_list(), expect=None))
    assert "<failure" not in passing


def make_result_list():
    return [make_result(CI_CASE)]


# --------------------------------------------------------------------------- HTML


def test_html_report_opens_with_summary_provenance_verdicts_warnings(tmp_path: Path) -> None:
    after = [make_result(CI_CASE.with_(snaps=s), seed=s, time_cv=0.02) for s in (4, 8, 12)]
    busy = make_result(CI_CASE.with_(snaps=16), seed=16)

    def half_a_core(m):  # the worker got half a core: a busy machine, from the raw samples
        its = tuple(replace(it, cpu_time_s=it.wall_time_s / 2) for it in m.iterations)
        return replace(m, iterations=its) if m.mode is Mode.NORMAL else m

    half = tuple(half_a_core(m) for m in busy.modes)
    busy = replace(busy, modes=half)
    before = [make_result(CI_CASE.with_(snaps=s), seed=s + 50) for s in (4, 8, 12)]
    comparison = compare([*after, busy], before)
    from ckptbench.sweep.config import Expect

    verdicts = check([*after, busy], expect=Expect(memory_savings_min=1000.0))
    page = render_html(comparison, verdicts)
    order = [
        "<h2>Summary</h2>",
        "<h2>Provenance</h2>",
        "<h2>[expect] verdicts</h2>",
        "<h2>Warnings</h2>",
        "<h2>Cells</h2>",
        "<h2>Before → after</h2>",
        "<img",
    ]
    positions = [page.index(marker) for marker in order]
    assert positions == sorted(positions)
    assert "best memory savings" in page and "memory regression(s)" in page
    assert "need &gt;= 1000x" in page and "machine was busy" in page
    assert render(comparison, "html").count("<img") == page.count("<img")


# --------------------------------------------------------------------------- plots


def _png_width(png: bytes) -> int:
    return struct.unpack(">I", png[16:20])[0]


def test_tradeoff_uses_a_log_axis_only_over_a_decade_and_renders_for_1400_px() -> None:
    narrow = [make_result(CI_CASE.with_(snaps=s), seed=s) for s in (8, 12, 16)]
    fig = plot_tradeoff(narrow)
    assert fig.axes[0].get_xscale() == "linear"
    wide = [
        make_result(CI_CASE.with_(snaps=s), seed=s, overhead={"checkpointed": int(o * MIB)})
        for s, o in ((4, 0.5), (16, 2.0), (64, 9.0))
    ]
    fig = plot_tradeoff(wide, before=narrow)
    ax = fig.axes[0]
    assert ax.get_xscale() == "log"
    assert all(t.get_text() == "" for t in ax.xaxis.get_minorticklabels())
    labels = ax.get_legend_handles_labels()[1]
    assert "revolve" in labels and "revolve before" in labels
    assert _png_width(figure_png(fig)) >= 1395


def test_timeline_legend_names_every_line_and_draws_the_limit() -> None:
    result = make_result(CI_CASE.with_(memory_limit_bytes=200 * MIB))
    fig = plot_timeline(result)
    labels = fig.axes[0].get_legend_handles_labels()[1]
    for mode in ("baseline", "normal", "checkpointed"):
        assert f"{mode}: sampled RSS" in labels and f"{mode}: exact peak" in labels
    assert "memory limit 200.0 MiB" in labels


def test_timeline_of_many_rounds_has_one_legend_entry_per_mode_and_lays_out() -> None:
    import dataclasses
    import warnings

    one = make_result(CI_CASE)
    result = dataclasses.replace(one, modes=tuple(one.modes) * 6)  # six rounds, six workers
    fig = plot_timeline(result)
    labels = fig.axes[0].get_legend_handles_labels()[1]
    assert sorted(labels) == sorted(
        f"{mode}: {what}" for mode in ("baseline", "normal", "checkpointed")
        for what in ("sampled RSS (6 workers)", "exact peak")
    )  # fmt: skip
    assert len(fig.axes[0].get_lines()) == 3 * 6 + 3  # every worker's line, one peak each
    with warnings.catch_warnings():  # 36 legend entries collapsed the axes (a warning)
        warnings.simplefilter("error")
        assert figure_png(fig)[:4] == b"\x89PNG"


def test_empty_plots_say_no_data() -> None:
    failed = make_result(
        CI_CASE, status={m: Status.CRASHED for m in ("baseline", "normal", "checkpointed")},
        timeline=False,
    )  # fmt: skip
    fig = plot_timeline(failed)
    assert any("no data" in t.get_text() for t in fig.axes[0].texts)
    fig = plot_tradeoff([failed])
    assert any("no data" in t.get_text() for t in fig.axes[0].texts)


def test_warnings_are_not_hard_wrapped_in_logs(capsys) -> None:
    from ckptbench.render.console import stderr_console, stdout_console

    line = "warning " + "the machine was busy " * 12
    stderr_console().print(line)
    stdout_console().print(line)
    out = capsys.readouterr()
    assert out.err.rstrip() == line.rstrip() and out.out.rstrip() == line.rstrip()
