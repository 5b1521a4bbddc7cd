"""`compare --against` and `check --against`: what the time ratio divides, said as computed.

A review found the rule line saying "the times shown are what it divides ... or with one
process a side the median iteration", while with one process a side new/old is the median
of the iteration pairs' ratios; and with two processes on one side and one on the other
the iterations of both sides were pooled, where 2 against 2 takes the processes' median
iterations. Since 2026-11-30 every comparison with two processes or more on either side
takes the geometric means of the processes' median iterations (Student's pooled t where a
side has one process), and the texts say which method each row used. The expected figures
here are computed by hand from the result files' iteration times, read as JSON.
"""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path

import pytest
from _synthetic import CI_CASE, make_result
from click.testing import CliRunner
from scipy.stats import norm, t

from ckptbench.cli import cli
from ckptbench.results.schema import save_result

INVOCATION_SD = 0.005  # analysis.intervals.INVOCATION_SD_TIME, two invocations a comparison


def _file(tmp_path: Path, name: str, **kw) -> Path:
    path = tmp_path / f"{name}.json"
    save_result(make_result(CI_CASE, **kw), path)
    return path


def _process_times(path: Path, mode: str) -> list[list[float]]:
    """Each round's iteration wall times of ``mode``, straight from the file."""
    doc = json.loads(path.read_text())
    rounds: dict[int, list[float]] = {}
    for m in doc["modes"]:
        if m["mode"] == mode:
            rounds.setdefault(m["round"], []).extend(it["wall_time_s"] for it in m["iterations"])
    return [rounds[k] for k in sorted(rounds)]


def _widened(centre: float, lo: float, hi: float) -> tuple[float, float]:
    z = norm.ppf(0.975) * math.sqrt(2) * INVOCATION_SD
    lo_half = math.hypot(math.log(centre) - math.log(lo), z)
    hi_half = math.hypot(math.log(hi) - math.log(centre), z)
    return centre * math.exp(-lo_half), centre * math.exp(hi_half)


def _by_hand(before: list[list[float]], after: list[list[float]]) -> dict[str, float]:
    """The documented formula where a side has two processes or more and the other one:
    the geometric means of the processes' median iterations divided, Student's two-sample
    t on the log medians (pooled variance, n + m - 2 degrees of freedom), widened by the
    two invocations' spread in quadrature."""
    lb = [math.log(statistics.median(p)) for p in before]
    la = [math.log(statistics.median(p)) for p in after]
    mb, ma = statistics.fmean(lb), statistics.fmean(la)
    df = len(lb) + len(la) - 2
    var = (sum((v - mb) ** 2 for v in lb) + sum((v - ma) ** 2 for v in la)) / df
    half = t.ppf(0.975, df) * math.sqrt(var * (1 / len(lb) + 1 / len(la)))
    ratio = math.exp(ma - mb)
    lo, hi = _widened(ratio, math.exp(ma - mb - half), math.exp(ma - mb + half))
    return {"before": math.exp(mb), "after": math.exp(ma), "ratio": ratio, "lo": lo, "hi": hi}


def _rows(after: Path, before: Path) -> dict[str, dict]:
    res = CliRunner().invoke(
        cli, ["compare", str(after), "--against", str(before), "--format", "json"]
    )
    assert res.exit_code == 0, res.output
    return {r["mode"]: r for r in json.loads(res.output)}


@pytest.mark.parametrize(("rounds_before", "rounds_after"), [(2, 1), (1, 2), (3, 1)])
def test_one_process_against_several_is_the_process_medians_divided(
    tmp_path, rounds_before, rounds_after
):
    """2 against 1 pooled every iteration of both sides (Hodges-Lehmann over all pairs), so
    a second invocation on one side did not move to the method 2 against 2 uses."""
    before = _file(tmp_path, "before", seed=1, rounds=rounds_before)
    after = _file(tmp_path, "after", seed=2, rounds=rounds_after, time_scale={"normal": 1.3})
    rows = _rows(after, before)
    for mode in ("normal", "checkpointed"):
        want = _by_hand(_process_times(before, mode), _process_times(after, mode))
        row = rows[mode]
        assert (row["processes_before"], row["processes_after"]) == (rounds_before, rounds_after)
        assert row["time_before_s"] == pytest.approx(want["before"], rel=1e-12)
        assert row["time_after_s"] == pytest.approx(want["after"], rel=1e-12)
        assert row["time_ratio"] == pytest.approx(want["ratio"], rel=1e-12)
        assert row["time_ratio"] == pytest.approx(row["time_after_s"] / row["time_before_s"])
        assert row["time_ratio_low"] == pytest.approx(want["lo"], rel=1e-9)
        assert row["time_ratio_high"] == pytest.approx(want["hi"], rel=1e-9)
        assert row["time_method"] == "process medians"


def test_one_process_a_side_is_the_median_pair_ratio_and_says_so(tmp_path):
    """With one process a side new/old is the median of every after/before iteration
    pair's ratio, not the median iterations divided, and the row says which."""
    before = _file(tmp_path, "before", seed=3)  # seeds whose two differ (1.496 vs 1.478)
    after = _file(tmp_path, "after", seed=4, time_scale={"normal": 1.3})
    row = _rows(after, before)["normal"]
    (b,), (a,) = _process_times(before, "normal"), _process_times(after, "normal")
    assert row["time_ratio"] == pytest.approx(statistics.median(x / y for x in a for y in b))
    assert row["time_before_s"] == pytest.approx(statistics.median(b))
    assert row["time_ratio"] != pytest.approx(row["time_after_s"] / row["time_before_s"])
    assert row["time_method"] == "iteration pairs"


def _text(args: list[str]) -> str:
    res = CliRunner().invoke(cli, args)
    assert res.exit_code in (0, 1), res.output
    return " ".join(res.output.replace("\\<", "<").split())


@pytest.mark.parametrize("fmt", ["text", "markdown"])
def test_rule_line_says_what_new_old_divides(tmp_path, fmt):
    """The rule said 'the times shown are what it divides: ... or with one process a side
    the median iteration' for rows whose new/old is the median of the iteration pairs'
    ratios."""
    one = [_file(tmp_path, n, seed=s) for n, s in (("b1", 1), ("a1", 2))]
    two = _file(tmp_path, "a2", seed=3, rounds=2)
    single = _text(["compare", str(one[1]), "--against", str(one[0]), "--format", fmt])
    assert "the times shown are what it divides" not in single
    assert (
        "with one worker process a side, the times shown are each side's median iteration "
        "and new/old is the median of every new/old iteration pair's ratio, which can differ "
        "from those two divided"
    ) in single, single
    assert "with two worker processes or more on either side" not in single
    mixed = _text(["compare", str(two), "--against", str(one[0]), "--format", fmt])
    assert (
        "with two worker processes or more on either side, the times shown are each side's "
        "geometric mean of its processes' median iterations"
    ) in mixed, mixed
    assert "Student's pooled-variance t where one side has a single process" in mixed
    assert "with one worker process a side" not in mixed


def test_gate_line_says_how_new_old_was_taken(tmp_path):
    """`check`'s time line called a 2v1 comparison's times 'median' (the pooled iterations')
    and a 1v1 line's new/old read as its two medians divided."""
    b1, a1 = _file(tmp_path, "b1", seed=1), _file(tmp_path, "a1", seed=2)
    a2 = _file(tmp_path, "a2", seed=3, rounds=2)
    gate = ["check", "--time-tolerance", "0.25", "--format", "junit"]
    single = _text([*gate, str(a1), "--against", str(b1)])
    assert "median iteration" in single and "(median of the iteration pairs' ratios) [" in single
    mixed = _text([*gate, str(a2), "--against", str(b1)])
    assert "process medians (geometric mean)" in mixed, mixed
    assert "(1v2 processes" in mixed, mixed
    assert "iteration pairs' ratios" not in mixed


def test_one_round_legend_and_warning_agree_on_what_its_intervals_are(tmp_path):
    """The one-round legend said '95% intervals from one round's iterations' while the
    warning under it said '--rounds 3 or more gives 95% intervals', and the savings'
    one-round interval is the range its iterations allow (a worst case)."""
    path = _file(tmp_path, "one", seed=1)
    out = _text(["compare", str(path), "--format", "markdown"])
    assert "[95%]: 95% intervals from one round's iterations" not in out
    assert (
        "[95%]: intervals from one round's iterations: the slowdown's and vs floor's are 95% "
        "for the iterations' noise alone, not the spread between fresh processes; the "
        "savings' is the range the iterations allow, a worst case, not a 95% interval"
    ) in out, out
    assert (
        "intervals from one round see its iterations, not the spread between fresh processes "
        "(its savings interval is the range they allow, a worst case); --rounds 3 or more "
        "gives 95% intervals over the rounds, which see that spread"
    ) in out, out
    run_legend = _text(["compare", str(path)])  # the text format says it too
    assert "95% intervals from one round's iterations" not in run_legend
