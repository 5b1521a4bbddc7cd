"""A mode that did not measure ok in one round of several: its time is shown nowhere, and
no figure that divides its time (slowdown, vs floor) is estimated from its other rounds,
in any format or gate (2026-11-30; the savings had the same fix the day before,
tests/test_hardening12_rounds.py)."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from _synthetic import CI_CASE, make_result

from ckptbench.results.schema import Mode, RunResult, Status

FAILURES = [
    (Mode.CHECKPOINTED, Status.TIMEOUT),  # the iterations it completed are kept
    (Mode.CHECKPOINTED, Status.OUT_OF_MEMORY),  # no iteration that round
    (Mode.NORMAL, Status.FAILED),
]


def _failed_in_round_2(mode: Mode, status: Status, seed: int = 7) -> RunResult:
    """Three ok rounds, then ``mode`` of round 2 given ``status``."""
    r = make_result(CI_CASE.with_(rounds=3), seed=seed, rounds=3)
    changes = {"status": status, "error": "t"}
    if status is Status.OUT_OF_MEMORY:
        changes["iterations"] = ()
    modes = tuple(replace(m, **changes) if (m.round, m.mode) == (1, mode) else m for m in r.modes)
    return replace(r, modes=modes)


@pytest.mark.parametrize(("mode", "status"), FAILURES)
def test_no_slowdown_beside_a_time_not_shown(mode: Mode, status: Status):
    # the run table read 'time/iter -' for checkpointed beside 'slowdown 0.70x [0.33, 1.50]*'
    # (rounds 1 and 3), compare showed 'ckpt s 0.745' (every iteration, the timed-out
    # round's too) beside the same slowdown and 'vs floor 0.57x'
    from ckptbench.frame import cells_frame, results_frame
    from ckptbench.render.run import explain_lines, headline, run_table

    r = _failed_in_round_2(mode, status)
    s = r.summary
    assert s.mode(mode).time is None
    assert s.slowdown.value is None and s.slowdown.interval is None
    assert s.slowdown.per_round is None
    assert s.vs_floor is None and s.floor_ratio is None
    doc = s.as_dict()
    assert doc["slowdown"] is None and doc["slowdown_ci"] is None
    rows = {row["mode"]: row for row in run_table(r).records}
    assert rows[mode.value]["time"] == "-"
    assert rows[Mode.CHECKPOINTED.value]["slowdown"] == "-"
    assert "slowdown -," in headline(r)
    # the floor line read checkpointed's time beside vs_floor: run's text output crashed
    assert not [line for line in explain_lines(r) if "floor" in line]
    cell = cells_frame([r]).iloc[0]
    import pandas as pd

    assert pd.isna(cell[f"{mode.value}_time_s"]) and pd.isna(cell["slowdown"])
    tidy = results_frame([r]).set_index("mode")
    assert pd.isna(tidy.loc[mode.value, "time_median_s"])
    assert pd.isna(tidy.loc[mode.value, "slowdown"])
    # the other mode's time is still shown: only the ratio over the hidden one goes
    other = Mode.NORMAL if mode is Mode.CHECKPOINTED else Mode.CHECKPOINTED
    assert not pd.isna(cell[f"{other.value}_time_s"])


def test_every_format_agrees_with_the_table(tmp_path):
    from click.testing import CliRunner

    from ckptbench.analysis import compare
    from ckptbench.cli import cli
    from ckptbench.render import render
    from ckptbench.results.schema import save_result

    r = _failed_in_round_2(Mode.CHECKPOINTED, Status.TIMEOUT)
    hidden = r.summary  # what the old code estimated from rounds 1 and 3
    clean = [m for m in r.modes if m.round != 1]
    old = replace(r, modes=tuple(clean)).summary.slowdown.value
    assert old is not None and hidden.slowdown.value is None
    shown = f"{old:.2f}x"
    for fmt in ("table", "markdown", "html"):
        assert shown not in render(compare([r]), fmt, width=200), fmt
    (row,) = json.loads(render(compare([r]), "json"))
    assert row["slowdown"] is None and row["checkpointed_time_s"] is None
    assert row["vs_floor"] is None and row["normal_time_s"] is not None
    csv = render(compare([r]), "csv").splitlines()
    head, values = csv[0].split(","), csv[1].split(",")
    got = dict(zip(head, values, strict=True))
    assert got["slowdown"] == "" and got["checkpointed_time_s"] == ""
    # check: the gate names the missing figure instead of passing on rounds the table hides
    from ckptbench.analysis.gate import check
    from ckptbench.sweep.config import Expect

    report = check([r], expect=Expect(slowdown_max=10.0))
    (line,) = [x for x in report.lines if x.check == "slowdown_max"]
    assert not line.passed and "no figure" in line.detail
    reference = make_result(CI_CASE.with_(rounds=3), seed=8, rounds=3)
    gated = check([r], [reference], time_tolerance=0.25)
    (time_line,) = [x for x in gated.lines if x.check == "time:checkpointed"]
    assert "no checkpointed time" in time_line.detail and "every round" in time_line.detail
    assert not time_line.passed
    (normal_line,) = [x for x in gated.lines if x.check == "time:normal"]
    assert normal_line.passed and "new/old" in normal_line.detail
    # the run's own formats, from the saved file
    save_result(r, tmp_path / "r.json")
    out = CliRunner().invoke(cli, ["compare", str(tmp_path / "r.json"), "--format", "markdown"])
    assert out.exit_code == 0, out.output
    assert shown not in out.output


def test_a_failed_round_stops_precision_adding_rounds():
    # --precision added rounds to narrow a slowdown that the result would hide anyway
    from ckptbench.analysis.summary import round_estimates

    r = _failed_in_round_2(Mode.CHECKPOINTED, Status.TIMEOUT)
    est = round_estimates(r.modes)
    assert "slowdown" not in est and "per_round" not in est
    clean = make_result(CI_CASE.with_(rounds=3), seed=7, rounds=3)
    assert "slowdown" in round_estimates(clean.modes)
    assert clean.summary.slowdown.value is not None and clean.summary.vs_floor is not None
