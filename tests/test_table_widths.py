"""Tables never cut a value (issue 25, item 3): every table ckptbench prints, rendered at 60,
80, 100 and 120 columns, shows each column whole or leaves it out and names it, and every
number it shows is the unrounded value of its row, rounded at the digits shown."""

from __future__ import annotations

import math
import re
from dataclasses import replace
from typing import Any

import pytest
from _synthetic import CI_CASE, make_result

from ckptbench.analysis import compare
from ckptbench.analysis.summary import mode_peak_bytes
from ckptbench.render.cells import cells_table, delta_table, invocations_table
from ckptbench.render.run import run_table
from ckptbench.render.schedule import closed_form_table, schedule_table
from ckptbench.render.table import Table, _fit, _grid, to_text
from ckptbench.results.schema import Mode, Status
from ckptbench.schedules import replay, schedule

WIDTHS = (60, 80, 100, 120)
MIB = 2**20
NUMBER = re.compile(r"[-+]?\d[\d,]*(?:\.\d+)?(?:e[-+]?\d+)?%?")


def _numbers(values: Any) -> list[float]:
    out: list[float] = []
    for v in values:
        if isinstance(v, bool) or v is None:
            continue
        if isinstance(v, int | float) and math.isfinite(v):
            out += [float(v), v / MIB, v * 100]
        elif isinstance(v, dict):
            out += _numbers(v.values())
        elif isinstance(v, list | tuple):
            out += _numbers(v)
    return out


def _rounds_to(shown: str, candidates: list[float]) -> bool:
    """Is the number shown some candidate rounded at the shown digits? (Within one unit of
    the last digit: interval ends round outward, down or up, not to the nearest.)"""
    text = shown.rstrip("%").replace(",", "")
    value = float(text)
    if "e" in text:
        mantissa = text.split("e")[0]
        digits = len(mantissa.split(".")[1]) if "." in mantissa else 0
        exp = int(text.split("e")[1])
        tol = 10 ** (exp - digits) * 1.0001
    else:
        digits = len(text.split(".")[1]) if "." in text else 0
        tol = 10 ** (-digits) * 1.0001 + 1e-12
    return any(abs(abs(value) - abs(c)) <= tol for c in candidates)


def _check(table: Table, candidates_of) -> None:
    for width in WIDTHS:
        text = to_text(table, width)
        shown, dropped, numbered, _ = _fit(table, width)
        by_number = {n.column.key for n in numbered}
        lines = text.splitlines()
        start = len(_wrapped(table.title, width)) if table.title else 0
        grid = lines[start : start + len(table.records) + 2 * table.show_header]
        notes = " ".join(lines[start + len(grid) :])
        named = notes.split("not shown at this width:", 1)[-1] if dropped else ""
        for col in dropped:
            assert col.header in named, (width, col.header)
        assert {c.key for c in shown} | {c.key for c in dropped} == {c.key for c in table.shown}
        for line in grid:
            assert len(line) <= width, (width, line)
        if table.show_header:
            for col in shown:
                assert col.header in grid[0], (width, col.header)
        for record in table.records:
            cands = candidates_of(record)
            for col in shown:
                cell = col.text(record)
                full = {c.key: c for c in table.shown}[col.key]
                whole = {full.text(record)}
                if full.narrow is not None:
                    whole.add(full.narrow(record.get(col.key), record))
                if col.key in by_number:  # its text's number, and the whole text in the legend
                    texts = list(dict.fromkeys(full.text(r) for r in table.records))
                    number = texts.index(full.text(record)) + 1  # rows of one text share it
                    assert cell == f"#{number}", (width, col.key, cell)
                    legend = [x for x in lines if x.startswith(f"{full.header} #{number}: ")]
                    assert len(legend) == 1 and legend[0].split(": ", 1)[1] in whole, legend
                    continue
                assert cell in whole, (width, col.key, cell)  # whole, never cut
                assert any(cell in line for line in grid[2 * table.show_header :]), cell
                if col.key in ("label", "short", "mode", "status", "verdict", "note", "host"):
                    continue
                for number in NUMBER.findall(cell):
                    assert _rounds_to(number, cands), (width, col.key, cell, number)


def _wrapped(title: str, width: int) -> list[str]:
    import textwrap

    if len(title) <= width:
        return [title]
    return textwrap.wrap(title, width, break_long_words=False, break_on_hyphens=False)


def _spread(peak_range: dict[str, Any] | None) -> list[float]:
    """A peak spread (bytes), and in KiB: a spread of a page or two is shown in KiB."""
    if peak_range is None:
        return []
    spread = peak_range["high"] - peak_range["low"]
    return [spread, spread / 1024]


def _run_candidates(result):
    s = result.summary.as_dict()

    def of(record: dict[str, Any]) -> list[float]:
        mode = Mode(record["mode"])
        m = result.mode(mode)
        per_mode = [
            mode_peak_bytes(m),
            m.sampled_peak_rss_bytes,
            m.counters,
            m.grad_max_rel_err,
            s["time_s"].get(mode.value),
            s["overhead_bytes"].get(mode.value),
            s.get("peak_device_bytes", {}).get(mode.value),
            s.get("device_overhead_bytes", {}).get(mode.value),
            s.get("overhead_interval_bytes", {}).get(mode.value),  # value, low, high, noise
            s.get("peak_range_bytes", {}).get(mode.value),
            _spread(s.get("peak_range_bytes", {}).get(mode.value)),
        ]
        cell = [s["slowdown"], s["slowdown_ci"], s["memory_savings"], s["memory_savings_ci"],
                s["step_evaluations_optimal"], s.get("device_memory_savings"), 1.0]  # fmt: skip
        return _numbers(per_mode + cell)

    return of


def _raw_candidates(record: dict[str, Any]) -> list[float]:
    return _numbers(record.values())


RESULT = make_result(CI_CASE, seed=3)
BIG = {"normal": 123_456 * MIB, "checkpointed": int(12.84 * MIB)}
WIDE = make_result(replace(CI_CASE, steps=12345, snaps=77, hidden=1024), seed=4, overhead=BIG)


@pytest.mark.parametrize("result", [RESULT, WIDE], ids=["small", "wide-numbers"])
def test_run_table_at_every_width(result):
    _check(run_table(result), _run_candidates(result))


def test_run_table_of_a_failed_mode_at_every_width():
    result = make_result(CI_CASE, seed=5, status={"checkpointed": Status.FAILED})
    _check(run_table(result), _run_candidates(result))


def test_compare_tables_at_every_width():
    results = [make_result(CI_CASE, seed=k) for k in range(3)]
    results.append(make_result(replace(CI_CASE, snaps=4, strategy="uniform"), seed=9))
    _check(cells_table(results), _raw_candidates)
    pooled = invocations_table(results)
    assert pooled is not None
    _check(pooled, _raw_candidates)
    old = [make_result(CI_CASE, seed=11, memory_scale={"normal": 1.2})]
    _check(delta_table(compare(results[:1], old)), _raw_candidates)


def test_schedule_tables_at_every_width():
    stats = replay(schedule(1000, 31), 1000, 31)
    _check(schedule_table(stats, 31, "revolve", [0.0123]), lambda _r: _numbers(
        [stats.advances, stats.evaluations, stats.taped, stats.peak_snapshots, stats.actions,
         stats.max_step_advances, 3, 2439, stats.advances / 1000, 12.3, 1]))  # fmt: skip
    _check(closed_form_table(10**6, 100, "revolve"), lambda r: _numbers([_value(r)]))


def _value(record: dict[str, Any]) -> float:
    return float(record["value"])


def test_a_key_value_table_stacks_its_values_rather_than_drop_them():
    """At 60-digit step counts the closed forms are wider than 80 columns: each value goes
    under its key, whole, and none is left out (it was 'not shown at this width: value')."""
    table = closed_form_table(10**59 + 12345, 3, "revolve")
    for width in WIDTHS:
        lines = to_text(table, width).splitlines()
        assert not any("not shown" in line for line in lines)
        for record in table.records:
            i = lines.index(record["quantity"])
            assert lines[i + 1] == "  " + record["value"], (width, record)
        assert all(len(x) <= width for x in lines if not x.strip().isdigit())
    assert "  " + str(10**59 + 12345) in to_text(table, 80).splitlines()
    narrow = closed_form_table(1000, 31, "revolve")  # fits: one line a quantity
    assert any(line.startswith("total step evaluations") and "3439" in line
               for line in to_text(narrow, 80).splitlines())  # fmt: skip


def test_a_value_is_never_cut_even_when_nothing_else_can_go():
    table = run_table(RESULT)
    for width in (20, 30, 40):
        grid, notes = _grid(table, width)
        shown, dropped, _, _ = _fit(table, width)
        assert dropped and any(n.startswith("not shown at this width:") for n in notes)
        assert [c.key for c in shown] == ["mode"] or all(len(x) <= width for x in grid)


def test_columns_is_honoured_when_piped(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from ckptbench.cli import cli
    from ckptbench.results.schema import save_result

    paths = []
    for k in range(2):
        paths.append(tmp_path / f"r{k}.json")
        save_result(make_result(replace(CI_CASE, snaps=4 + k), seed=k), paths[-1])
    for width in (60, 80):
        monkeypatch.setenv("COLUMNS", str(width))
        res = CliRunner().invoke(cli, ["compare", *map(str, paths)], catch_exceptions=False)
        assert res.exit_code == 0, res.output
        grid = [x for x in res.output.splitlines() if "  " in x and not x.startswith("warning")]
        assert grid and max(len(x) for x in grid) <= width, res.output


def test_long_labels_give_way_to_row_numbers_before_the_slowdown_goes():
    """A GPU sweep's cells differ in strategy, backend, budget, sizes, dtype and executor:
    their labels ran to 87 characters, and at 120 columns compare showed the two overhead
    columns and no slowdown. Row numbers with a legend keep the figures."""
    cases = [
        replace(CI_CASE, strategy="revolve", snaps=31, hidden=256, batch=16, input=8,
                backend="torch", dtype="float32", seed=3),
        replace(CI_CASE, strategy="revolve", snaps=31, hidden=1024, batch=64, input=32),
        replace(CI_CASE, strategy="uniform", snaps=12, hidden=1024, batch=64, input=16,
                backend="torch", seed=5),
    ]  # fmt: skip
    table = cells_table([make_result(c, seed=k) for k, c in enumerate(cases)])
    lines = to_text(table, 120).splitlines()
    top = lines.index(next(x for x in lines if x.startswith("cell ")))
    assert "slowdown [95%]" in lines[top] and "savings [95%]" in lines[top], lines
    rows = lines[top + 2 : top + 5]
    assert [r.split()[0] for r in rows] == ["#1", "#2", "#3"], lines
    legend = [x for x in lines if x.startswith("cell #")]
    assert len(legend) == 3 and "h=256" in legend[0] and "h=1024" in legend[1], lines
    assert max(len(x) for x in lines[top : top + 5]) <= 120
    wide = to_text(table, 400).splitlines()  # where the labels fit, they are the first column
    assert not any(x.startswith("cell #") for x in wide)
    assert wide[top + 2].startswith("lstm l=256 s=31 revolve"), wide


def _on_gpu(result, device_bytes: dict[str, int]):
    """``result`` as if measured on a GPU: every iteration with a device peak."""
    modes = tuple(
        replace(m, iterations=tuple(
            replace(it, peak_device_bytes=device_bytes[m.mode.value]) for it in m.iterations
        ))
        for m in result.modes
    )  # fmt: skip
    return replace(result, modes=modes)


def test_on_a_gpu_the_host_savings_go_before_the_time_columns():
    """On a GPU report the device's savings are the figure: where the width is short, the
    host RSS savings are left out before the checkpointed time and the floor."""
    peaks = {"baseline": 10 * MIB, "normal": 400 * MIB, "checkpointed": 30 * MIB}
    cases = [replace(CI_CASE, snaps=s) for s in (3, 4, 5)]
    gpu = cells_table([_on_gpu(make_result(c, seed=k), peaks) for k, c in enumerate(cases)])
    cpu = cells_table([make_result(c, seed=k) for k, c in enumerate(cases)])
    for width in (100, 120):
        shown = {c.key for c in _fit(gpu, width)[0]}
        assert "checkpointed_device_overhead_bytes" in shown
        if "memory_savings" in shown:  # only where every time column fits too
            assert {"checkpointed_time_s", "vs_floor"} <= shown, (width, shown)
        assert "memory_savings" in {c.key for c in _fit(cpu, width)[0]}
    assert "memory_savings" not in {c.key for c in _fit(gpu, 100)[0]}


def test_run_and_compare_print_evaluations_one_way():
    """The header is 'evals (opt)' in both: '3439 (3439)', not '3439 / 3439' in run."""
    result = make_result(CI_CASE.with_(steps=1000, snaps=31))
    (ckpt,) = [r for r in run_table(result).records if r["mode"] == "checkpointed"]
    (cell,) = cells_table([result]).records
    evals = next(c for c in cells_table([result]).columns if c.key == "evaluations")
    assert ckpt["evals"] == evals.text(cell) == "3439 (3439)"


def test_row_numbers_name_a_cell_once_and_narrow_overheads_keep_their_sign():
    """compare's before -> after table has a row per (cell, mode): numbered by row, one
    cell's three modes read #1, #2, #3 with three legend lines naming the same cell. They
    now share the cell's number, as in the cells table. And an overhead narrowed to its
    value keeps the sign the wide table prints ('+0.49', not '0.49')."""
    cases = [
        replace(CI_CASE, strategy="revolve", snaps=31, hidden=256, batch=16, input=8,
                backend="torch", dtype="float32", seed=3),
        replace(CI_CASE, strategy="uniform", snaps=12, hidden=1024, batch=64, input=16,
                backend="torch", seed=5),
    ]  # fmt: skip
    new = [make_result(c, seed=k) for k, c in enumerate(cases)]
    old = [make_result(c, seed=10 + k, memory_scale={"normal": 1.2}) for k, c in enumerate(cases)]
    lines = to_text(delta_table(compare(new, old)), 100).splitlines()
    rows = [x.split()[0] for x in lines if x.startswith("#")]
    assert rows == ["#1"] * 3 + ["#2"] * 3, lines
    legend = [x for x in lines if x.startswith("cell #")]
    assert [x.split(":")[0] for x in legend] == ["cell #1", "cell #2"], lines
    assert "h=256" in legend[0] and "h=1024" in legend[1]

    table = cells_table(new)
    wide = [x for x in to_text(table, 400).splitlines() if x.startswith("lstm")]
    narrow = to_text(table, 110).splitlines()
    assert "normal +MiB" in narrow[1], narrow
    col = narrow[1].index("normal +MiB")
    shown = [x for x in narrow if x.startswith("#")]
    assert shown and all(x[col:].split()[0].startswith("+") for x in shown), narrow
    assert all("[+" in x for x in wide), wide  # the wide table: signed, with its interval
