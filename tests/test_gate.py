"""Tests for ckptbench.analysis.gate: the memory gate, expectations, opt-in time gate, reports."""

from __future__ import annotations

import html
import re
from dataclasses import replace
from pathlib import Path

import pytest
from _synthetic import CI_CASE, make_result

from ckptbench.analysis.gate import check, run_check
from ckptbench.render import check_markdown, check_text
from ckptbench.results.manifests import expectations_from_manifests
from ckptbench.results.schema import Mode, Status, save_result
from ckptbench.schedules import optimal_forward_steps
from ckptbench.sweep.config import Expect, load_config
from ckptbench.sweep.run import run_sweep

CI_CONFIG = load_config(Path(__file__).resolve().parents[1] / "configs" / "ci.toml")
CELLS = CI_CONFIG.cases  # lstm revolve, rnn revolve

# overheads over baseline and checkpointed iteration times of the CI cells (dev machine)
PROFILE = {
    "lstm": ({"normal": 61 << 20, "checkpointed": int(2.9 * 2**20)}, 1.3),
    "rnn": ({"normal": int(20.8 * 2**20), "checkpointed": int(2.0 * 2**20)}, 0.45),
}


def _sweep(seed: int, host: str = "ci-runner", *, cell: int = 0, repeats: int = 3, **kw) -> list:
    """One synthetic run of the CI sweep; memory_scale/time_scale apply to cell ``cell``."""
    out = []
    for i, case in enumerate(CELLS):
        overhead, ckpt_time = PROFILE[case.model]
        out.append(
            make_result(
                case.with_(repeats=repeats),
                seed=seed * 10 + i,
                host=host,
                overhead=overhead,
                times={"checkpointed": ckpt_time},
                time_cv=kw.get("time_cv", 0.20),
                memory_scale=kw.get("memory_scale") if i == cell else None,
                time_scale=kw.get("time_scale") if i == cell else None,
            )
        )
    return out


def test_shipped_ci_expectations_pass_on_a_healthy_sweep() -> None:
    report = check(_sweep(1), expect=CI_CONFIG)
    assert report.exit_code == 0, check_text(report)
    names = {line.check for line in report.lines}
    assert {"status", "memory_savings_min", "slowdown_max", "forward_steps_exact"} <= names


def test_twenty_rechecks_of_identical_reruns_all_pass() -> None:
    reference = _sweep(0)
    for k in range(1, 21):
        report = check(_sweep(k), reference, expect=CI_CONFIG)
        assert report.exit_code == 0, check_text(report)
        assert sum(line.check.startswith("memory:") for line in report.lines) == 6


def test_a_twenty_percent_memory_regression_fails() -> None:
    reference = _sweep(0)
    for cell in (0, 1):
        regressed = _sweep(1, memory_scale={"checkpointed": 1.2}, cell=cell)
        report = check(regressed, reference, expect=CI_CONFIG)
        assert report.exit_code == 1
        [failure] = report.failures
        assert failure.key == CELLS[cell].key and failure.check == "memory:checkpointed"
        growth = float(re.search(r"(?:B|MiB) \(\+([0-9.]+)%\)", failure.detail).group(1))
        assert 15 < growth < 25
    md = check_markdown(report)
    assert "FAILED" in md and "#### Failures" in md and CELLS[1].key in md.split("<details>")[0]


def test_smaller_regressions_within_tolerance_pass() -> None:
    reference = _sweep(0)
    report = check(_sweep(1, memory_scale={"normal": 1.03}), reference)
    assert report.exit_code == 0, check_text(report)
    improved = check(_sweep(1, memory_scale={"checkpointed": 0.7}), reference)
    assert improved.exit_code == 0 and "improved" in check_text(improved)


def test_time_is_not_gated_by_default_but_can_be() -> None:
    # one process a side, 5 vs 5 repeats: the run's one-round interval (Bauer) of new/old
    # lies above 1.25 for a 1.5x slowdown
    reference = _sweep(0, repeats=5, time_cv=0.10)
    slow = _sweep(1, repeats=5, time_cv=0.10, time_scale={"checkpointed": 1.5})
    assert check(slow, reference).exit_code == 0
    report = check(slow, reference, time_tolerance=0.25)
    assert report.exit_code == 1
    assert [f.check for f in report.failures] == ["time:checkpointed"]
    same = check(_sweep(2, repeats=5, time_cv=0.10), reference, time_tolerance=0.25)
    assert same.exit_code == 0, check_text(same)
    # 3 vs 3: the interval is the range of the pairwise ratios; a 2x slowdown clears 1.25,
    # and the note says that one process a side cannot see process-to-process variation
    reference = _sweep(0, time_cv=0.10)
    report = check(
        _sweep(1, time_cv=0.10, time_scale={"normal": 2.0}), reference, time_tolerance=0.25
    )
    assert [f.check for f in report.failures] == ["time:normal"]
    assert any("one worker process" in n for n in report.notes)
    assert check(_sweep(2, time_cv=0.10), reference, time_tolerance=0.25).exit_code == 0


def test_failed_and_partial_cells_fail() -> None:
    crashed = make_result(CELLS[0], status={"checkpointed": Status.TIMEOUT})
    partial = make_result(CELLS[1], modes=(Mode.BASELINE,))
    report = check([crashed, partial])
    assert report.exit_code == 1
    details = {f.key: f.detail for f in report.failures}
    assert "checkpointed: timeout (simulated failure)" in details[CELLS[0].key]
    assert "incomplete" in details[CELLS[1].key]


def test_each_expectation_can_fail() -> None:
    result = _sweep(1)[0]
    ckpt = result.mode(Mode.CHECKPOINTED)
    bad_counts = replace(ckpt, counters={**ckpt.counters, "steps_advanced": 700})
    wrong = replace(result, modes=(*result.modes[:2], replace(bad_counts, grad_max_rel_err=1e-3)))
    expect = Expect(
        memory_savings_min=100.0,
        slowdown_max=0.1,
        grad_max_rel_err_max=1e-8,
        forward_steps_exact=True,
    )
    report = check([wrong], expect=expect)
    assert sorted(f.check for f in report.failures) == [
        "forward_steps_exact",
        "grad_max_rel_err_max",
        "memory_savings_min",
        "slowdown_max",
    ]
    assert f"schedule plans {optimal_forward_steps(256, 16)}" in check_text(report)


def test_missing_and_unmatched_cells() -> None:
    reference = _sweep(0)
    report = check(_sweep(1)[:1], reference)
    assert [(f.key, f.check) for f in report.failures] == [(CELLS[1].key, "present")]
    with pytest.raises(ValueError, match="no cell of the results matches") as info:
        check(_sweep(1, host="laptop"), reference)
    assert "\n" not in str(info.value)
    assert check(_sweep(1, host="laptop"), reference, match_host=False).exit_code == 0
    other_threads = [replace(r, case=r.case.with_(repeats=5)) for r in _sweep(1)]
    report = check(other_threads, reference)
    assert report.exit_code == 0 and len(report.notes) == 2
    assert all("different repeats [3, 5]" in n for n in report.notes)
    with pytest.raises(ValueError, match="no results"):
        check([])


def test_run_check_reads_expectations_from_the_sweep_manifest(tmp_path: Path) -> None:
    runs = iter(_sweep(1))
    outcome = run_sweep(CI_CONFIG, tmp_path / "new", run_cell=lambda case, **_: next(runs))
    assert outcome.exit_code == 0
    table = expectations_from_manifests([tmp_path / "new"])
    assert table["*"] == CI_CONFIG.expect
    ref_dir = tmp_path / "ref"
    for r in _sweep(0):
        save_result(r, ref_dir / f"{r.case.key}.json")
    report = run_check([tmp_path / "new"], against=[ref_dir])
    assert report.exit_code == 0, check_text(report)
    assert any(line.check == "memory_savings_min" for line in report.lines)
    # a stricter config on the command line wins over the manifest
    strict = tmp_path / "strict.toml"
    strict.write_text("[grid]\nsnaps = [4]\n[expect]\nmemory_savings_min = 50\n")
    assert run_check([tmp_path / "new"], config=strict).exit_code == 1
    # bad input is a ValueError (exit 2 in the CLI), not a failed gate
    foreign = tmp_path / "foreign.json"
    foreign.write_text('{"schema_version": 1}')
    with pytest.raises(ValueError, match="schema_version 1 is from an older ckptbench"):
        run_check([foreign])


def test_a_gate_without_thresholds_says_where_they_would_come_from(tmp_path: Path) -> None:
    """A sweep folder whose config has no [expect] table is not told to 'check a sweep
    folder'; a loose result file is."""
    bare = replace(CI_CONFIG, expect=Expect(), expect_by_strategy={})
    runs = iter(_sweep(1))
    run_sweep(bare, tmp_path / "new", run_cell=lambda case, **_: next(runs))
    (note,) = [n for n in run_check([tmp_path / "new"]).notes if "[expect]" in n]
    assert note == (
        "no [expect] thresholds: its sweep config has none (add an [expect] table, or pass "
        "--config); or pass --against reference results to gate memory (and time, with "
        "--time-tolerance)"
    )
    loose = tmp_path / "one.json"
    save_result(_sweep(1)[0], loose)
    (note,) = [n for n in run_check([loose]).notes if "[expect]" in n]
    assert note == (
        "no [expect] thresholds: pass --config or check a sweep folder; or pass --against "
        "reference results to gate memory (and time, with --time-tolerance)"
    )


def test_markdown_summary_of_a_passing_gate() -> None:
    md = check_markdown(check(_sweep(1), _sweep(0), expect=CI_CONFIG))
    assert md.startswith("### ckptbench check: PASSED")
    assert "Failures" not in md and "<details>" in md and "time not gated" in md
    assert md.count("| pass |") == len(check(_sweep(1), _sweep(0), expect=CI_CONFIG).lines)


def test_check_accepts_the_ci_case_fixture() -> None:
    # the fixture the other tests build on is itself a valid, passing cell
    assert check([make_result(CI_CASE)], expect=CI_CONFIG).exit_code == 0


def test_time_gate_with_several_processes_uses_the_runs_estimator() -> None:
    # three files a side pool into three worker processes a side: the gate's interval is the
    # Welch t interval over processes (the rounds of run), and its detail shows it
    reference = [r for s in (0, 3, 6) for r in _sweep(s, repeats=5, time_cv=0.10)]
    slow = [
        r
        for s in (1, 4, 7)
        for r in _sweep(s, repeats=5, time_cv=0.10, time_scale={"checkpointed": 1.5})
    ]
    report = check(slow, reference, time_tolerance=0.25)
    assert {f.check for f in report.failures} == {"time:checkpointed"}
    detail = report.failures[0].detail
    assert "3v3 processes" in detail and "new/old" in detail and "vs limit 1.25" in detail
    assert not any("one worker process" in n for n in report.notes)
    same = [r for s in (2, 5, 8) for r in _sweep(s, repeats=5, time_cv=0.10)]
    assert check(same, reference, time_tolerance=0.25).exit_code == 0


def test_forward_steps_exact_reads_the_strategy_registry() -> None:
    """Every strategy with a step count is checked (optimal: against its recorded plan); a
    framework's own checkpointing has none and the check says it does not apply."""
    expect = Expect(forward_steps_exact=True)
    base = make_result()
    ckpt = base.mode(Mode.CHECKPOINTED)
    advances = ckpt.counters["steps_advanced"]

    def with_plan(plan):
        modes = tuple(replace(m, plan=plan) if m is ckpt else m for m in base.modes)
        case = replace(base.case, strategy="optimal", budget_bytes=2**20)
        return replace(base, case=case, modes=modes)

    def line(result):
        report = check([result], expect=expect)
        return next(x for x in report.lines if x.check == "forward_steps_exact")

    assert line(with_plan({"advances": advances})).passed
    wrong = line(with_plan({"advances": advances + 1}))
    assert not wrong.passed and f"schedule plans {advances + 1}" in wrong.detail
    peer = replace(base, case=replace(base.case, strategy="torch-checkpoint", backend="torch"))
    shown = line(peer)
    assert shown.passed and "not applicable to torch-checkpoint" in shown.detail
    unrecorded = line(with_plan({}))
    assert not unrecorded.passed and "no plan recorded" in unrecorded.detail


def test_a_time_check_too_wide_to_tell_passes_but_says_so() -> None:
    """Two processes a side have about two degrees of freedom: a x1.3 copy read [0.475,
    3.556] and passed as "no change", a gate that could not have failed. It still passes
    (an inconclusive interval is no regression), but the line and a note say it could not
    tell, while a narrow interval's pass says nothing of the kind."""
    reference = [r for s in (0, 3) for r in _sweep(s, repeats=3, time_cv=0.30)]
    slow = [r for s in (1, 4) for r in _sweep(s, repeats=3, time_cv=0.30,
                                            time_scale={"checkpointed": 1.3})]  # fmt: skip
    report = check(slow, reference, time_tolerance=0.25)
    wide = [x for x in report.lines if x.check.startswith("time:") and "reaches past" in x.detail]
    assert wide and all(x.passed for x in wide)
    assert any("a slowdown that large would have passed too" in n for n in report.notes)
    reference = [r for s in (0, 3, 6) for r in _sweep(s, repeats=5, time_cv=0.01)]
    same = [r for s in (2, 5, 8) for r in _sweep(s, repeats=5, time_cv=0.01)]
    narrow = check(same, reference, time_tolerance=0.25)
    assert narrow.exit_code == 0
    assert not any("reaches past" in x.detail for x in narrow.lines)
    assert not any("would have passed too" in n for n in narrow.notes)


def test_check_html_carries_the_limits_rule_and_notes_the_other_formats_carry() -> None:
    """`check --format html` left out the limits' sources, the tolerances and every note
    (one worker process a side, repeats that differ) that text, markdown and JUnit print."""
    from ckptbench.render.formats import render
    from ckptbench.render.reports import check_report

    reference = [r for s in (0, 3) for r in _sweep(s, repeats=3, time_cv=0.30)]
    current = [r for s in (1, 4) for r in _sweep(s, repeats=3, time_cv=0.30)]
    report = check(current, reference, time_tolerance=0.25)
    assert report.notes
    page = render(check_report(report), "html")
    for note in report.notes:
        assert html.escape(note, quote=False) in page or html.escape(note) in page
    assert "Memory tolerance" in page and "time gated at" in page
    assert "rank test" not in check_markdown(report)  # the rule names the interval it uses


def test_slowdown_max_shows_the_interval_and_says_when_it_reaches_past_the_limit() -> None:
    """`ok slowdown_max: 0.73x (need <= 1x)` while the interval was [0.20, 2.74]: the line
    judged the estimate and showed nothing of its uncertainty."""
    result = make_result(CI_CASE, rounds=2, time_cv=0.4, seed=11)
    ci = result.summary.slowdown.interval
    assert ci is not None
    limit = (result.summary.slowdown.value + ci[1]) / 2  # passes, the interval reaching past
    (line,) = [x for x in check([result], expect=Expect(slowdown_max=limit)).lines
               if x.check == "slowdown_max"]  # fmt: skip
    assert line.passed and "[" in line.detail and "reaches past the limit" in line.detail


def test_a_gate_line_never_prints_its_figure_on_the_wrong_side_of_the_limit(monkeypatch) -> None:
    """A failing figure must visibly miss its limit: a gradient error of 1.001e-8 read
    '1.00e-08, need <= 1.0e-08' (a limit of 1.04e-8 even read '1.0e-08' while passing), and
    a time interval's low end of 1.1003 read '1.100' against 'vs limit 1.1' on a slower line."""
    from ckptbench.analysis import cellchecks
    from ckptbench.analysis.stats import TimeChange

    def figure(line, pattern: str) -> float:
        return float(re.search(pattern, line.detail).group(1))

    result = make_result(CI_CASE, grad_err=1.001e-8)
    (line,) = cellchecks.expect_lines(result, Expect(grad_max_rel_err_max=1e-8))
    assert not line.passed and figure(line, r"^(\S+), need <= 1e-08$") > 1e-8, line.detail
    (line,) = cellchecks.expect_lines(result, Expect(grad_max_rel_err_max=1.04e-8))
    assert line.passed and line.detail.endswith("(need <= 1.04e-08)"), line.detail

    def change(before, after, *, tolerance):
        return TimeChange(1.0, 1.2, 1.2, 1.1003, 1.3, tolerance, "t", 9, 9, 3, 3)

    monkeypatch.setattr(cellchecks, "time_change", change)
    report = check(_sweep(1), _sweep(0), time_tolerance=0.1)
    slow = [f for f in report.failures if f.check.startswith("time:")]
    assert slow and all(figure(f, r"\[(\S+), ") > 1.1 for f in slow), slow[0].detail
    assert all("vs limit 1.1 " in f.detail for f in slow)
