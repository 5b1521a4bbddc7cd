"""One typed summary: every figure is computed by one function from the raw samples
(``ckptbench.results.summary.compute``), cached on the result, written into the file from
the same object, and never read back; every reader takes it."""

from __future__ import annotations

import json
import statistics
from dataclasses import replace
from pathlib import Path

from _synthetic import CI_CASE, make_result

from ckptbench.analysis import compare
from ckptbench.analysis.gate import check
from ckptbench.frame import read_results
from ckptbench.render import headline, render, run_table, to_text
from ckptbench.render.html import render_html
from ckptbench.render.run import explain_lines
from ckptbench.results import summary as summary_module
from ckptbench.results.schema import Mode, result_to_dict, save_result
from ckptbench.results.store import load_result, load_results
from ckptbench.results.summary import CellSummary, Ratio
from ckptbench.sweep.config import Expect


def _files(tmp_path: Path) -> list[Path]:
    paths = []
    for k, snaps in enumerate((4, 8)):
        paths.append(tmp_path / f"r{k}.json")
        save_result(make_result(CI_CASE.with_(snaps=snaps), seed=k), paths[-1])
    return paths


def test_one_formula_changed_in_the_one_function_shows_in_every_reader(
    tmp_path: Path, monkeypatch
) -> None:
    paths = _files(tmp_path)

    def savings(estimate, normal, ckpt, *noise):  # a different savings formula
        return Ratio(123.456, 120.0, 130.0, 1)

    monkeypatch.setattr(summary_module, "savings_figure", savings)
    results = load_results(paths)
    run = results[0]
    # run's output: the headline, the table and --json
    assert "memory savings 123.5x [120.0, 130.0]" in headline(run)
    assert "123.5x" in to_text(run_table(run), width=200)
    assert result_to_dict(run)["summary"]["memory_savings"] == 123.456
    # compare, in every format, and the HTML report
    comparison = compare(results)
    for fmt in ("table", "markdown"):
        assert "123.5x" in render(comparison, fmt), fmt
    assert "123.456" in render(comparison, "csv")
    assert "best memory savings 123.5x" in render_html(comparison)
    # the gate
    report = check(results, expect=Expect(memory_savings_min=100.0))
    lines = [line for line in report.lines if line.check == "memory_savings_min"]
    assert lines and all(line.passed and "123.46x" in line.detail for line in lines)
    # read_results
    frame = read_results(paths)
    assert (frame["memory_savings"] == 123.456).all()
    assert (frame["memory_savings_low"] == 120.0).all()


def test_the_stored_summary_is_written_from_the_typed_one_and_never_read_back(
    tmp_path: Path,
) -> None:
    path = tmp_path / "r.json"
    result = make_result(CI_CASE.with_(rounds=1), seed=3)
    save_result(result, path)
    doc = json.loads(path.read_text())
    assert list(doc)[:5] == ["schema_version", "case", "modes", "environment", "summary"]
    assert doc["summary"] == result.summary.as_dict()
    # an old file whose stored figures disagree with its samples still loads; its figures
    # come from the samples
    doc["summary"] = {**doc["summary"], "memory_savings": 1e9, "slowdown": -1.0}
    path.write_text(json.dumps(doc))
    loaded = load_result(path)
    assert loaded.summary.memory_savings.value == result.summary.memory_savings.value
    assert loaded.summary.slowdown.value == result.summary.slowdown.value
    del doc["summary"]  # or none at all
    path.write_text(json.dumps(doc))
    assert load_result(path).summary == result.summary


def test_the_summary_is_typed_cached_and_takes_busy_cores_from_the_modes() -> None:
    result = make_result(CI_CASE, seed=5)
    s = result.summary
    assert isinstance(s, CellSummary) and result.summary is s  # computed once
    ckpt = s.mode(Mode.CHECKPOINTED)
    assert ckpt.overhead_bytes == ckpt.peak_rss_bytes - s.mode(Mode.BASELINE).peak_rss_bytes
    assert s.slowdown.low <= s.slowdown.value <= s.slowdown.high
    assert ckpt.counters.step_calls == s.step_evaluations
    assert s.mode(Mode.NORMAL).time.median > 0 and not s.on_device and s.ok
    busy = replace(
        result,
        modes=tuple(
            replace(m, other_busy_cores=1.5 if m.mode is Mode.NORMAL else None)
            for m in result.modes
        ),
    )
    kinds = {(v.kind.value, v.mode) for v in busy.summary.noise}
    assert ("other-processes", "normal") in kinds  # the same figures stored or recomputed
    assert ("other-processes", "normal") not in {(v.kind.value, v.mode) for v in s.noise}


def test_the_recomputation_floor_prices_extra_evaluations_at_the_forward_only_step(
    tmp_path: Path,
) -> None:
    result = make_result(CI_CASE, seed=3)
    s = result.summary
    times = {m.mode: statistics.median(it.wall_time_s for it in m.iterations) for m in result.modes}
    ckpt = result.mode(Mode.CHECKPOINTED)
    evaluations = ckpt.counters["steps_advanced"] + ckpt.counters["steps_taped"]
    assert evaluations > CI_CASE.steps  # Revolve recomputes
    per_step = times[Mode.BASELINE] / CI_CASE.steps
    floor = times[Mode.NORMAL] + (evaluations - CI_CASE.steps) * per_step
    assert abs(s.floor_time_s - floor) < 1e-12
    # vs_floor is estimated as the slowdown is (one round: the Hodges-Lehmann ratio of the
    # checkpointed iterations over the plain ones plus the extra evaluations), not the ratio
    # of the pooled medians, which it printed beside a slowdown of the other estimator
    extra = (evaluations - CI_CASE.steps) * per_step
    plain = [it.wall_time_s + extra for it in result.mode(Mode.NORMAL).iterations]
    pairwise = [c.wall_time_s / p for c in ckpt.iterations for p in plain]
    assert abs(s.vs_floor - statistics.median(pairwise)) < 1e-12
    assert s.as_dict()["vs_floor"] == s.vs_floor
    save_result(result, tmp_path / "r.json")
    table = render(compare(load_results([tmp_path])), "csv")
    header, row = table.splitlines()[:2]
    got = dict(zip(header.split(","), row.split(","), strict=True))
    assert abs(float(got["vs_floor"]) - s.vs_floor) < 1e-9
    (line,) = [x for x in explain_lines(result) if x.startswith("recomputation floor")]
    assert f"{evaluations - CI_CASE.steps} extra evaluations" in line
    assert f"{s.vs_floor:.2f}x the floor" in line
    assert "below it" in line and s.vs_floor < 1
    slow = make_result(CI_CASE, seed=3, times={"checkpointed": 3.0})
    (line,) = [x for x in explain_lines(slow) if x.startswith("recomputation floor")]
    assert slow.summary.vs_floor > 1 and "below it" not in line
    # a framework's own checkpointing has no counted evaluations: no floor, never a guess
    peer = tuple(
        replace(m, counters={}) if m.mode is Mode.CHECKPOINTED else m for m in result.modes
    )
    assert summary_module.compute(result.case, peer).floor_time_s is None
