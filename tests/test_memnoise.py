"""Memory figures with their noise (issue 28): overhead intervals that hold both modes'
iteration spreads, "< noise (±X MiB)" instead of a negative or tiny overhead, and no savings
ratio from an overhead below its noise."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

from ckptbench.analysis.memnoise import (
    DRIFT_HALFWIDTH_BYTES,
    Overhead,
    overhead,
    peak_range,
    rerun_halfwidth,
    savings_interval,
)
from ckptbench.render.format import fmt_overhead

MIB = 2**20


def _peaks(*mib: float) -> list[int]:
    return [int(m * MIB) for m in mib]


def test_peak_range_is_the_spread_of_every_iteration():
    r = peak_range(_peaks(313.0, 313.4, 312.6, 313.8))
    assert r is not None and r.n == 4
    assert r.low == int(312.6 * MIB) and r.high == int(313.8 * MIB)
    assert r.spread == r.high - r.low
    assert peak_range([]) is None


def test_overhead_interval_includes_both_spreads():
    base = peak_range(_peaks(679.1, 762.7))  # the revolve-8 baseline
    ckpt = peak_range(_peaks(687.0, 688.0))
    over = overhead(ckpt, base)
    # the union of the spread interval and the rerun interval
    assert over.low == min(ckpt.low - base.high, over.value - over.rerun)
    assert over.high == max(ckpt.high - base.low, over.value + over.rerun)
    assert over.low <= ckpt.low - base.high and over.high >= ckpt.high - base.low
    assert over.low < over.value < over.high
    assert over.below_noise  # the interval reaches below zero


def test_overlapping_spreads_render_below_noise_never_negative():
    # the median overhead is negative (-30 MiB) yet the spreads overlap
    base = peak_range(_peaks(679.1, 762.7, 762.7))
    ckpt = peak_range(_peaks(690.0, 700.0, 732.4))
    over = overhead(ckpt, base)
    assert over.value < 0
    text = fmt_overhead(over)
    assert text.startswith("< noise (±") and text.endswith(" MiB)")
    assert "-" not in text.replace("< noise", "")  # no negative number anywhere
    assert fmt_overhead(over.as_dict()) == text  # the summary's dict renders the same
    noise = (over.high - over.low) / 2 / MIB
    assert f"±{noise:.1f} MiB" in text


def test_small_positive_overhead_within_its_noise_is_below_noise():
    over = Overhead(value=1.0 * MIB, low=0.5 * MIB, high=15.0 * MIB)  # +1 MiB [+0.5, +15]
    assert over.low > 0 and over.value <= over.noise
    assert over.below_noise and fmt_overhead(over).startswith("< noise")
    base = peak_range(_peaks(300.0, 314.0, 314.0))
    assert overhead(peak_range(_peaks(314.5, 315.0, 315.0)), base).below_noise


def test_rerun_halfwidth_is_a_welch_t_interval_of_two_medians():
    from scipy.stats import t

    base = peak_range(_peaks(313.0, 313.2, 313.1, 313.4))
    ckpt = peak_range(_peaks(325.2, 326.7, 325.7, 328.4))
    a, b = ckpt.sd**2 / 4, base.sd**2 / 4
    df = (a + b) ** 2 / (a**2 / 3 + b**2 / 3)
    want = t.ppf(0.975, df) * math.sqrt(2 * math.pi / 2 * (a + b))
    assert rerun_halfwidth(ckpt, base) == pytest.approx(want)
    over = overhead(ckpt, base)  # and the offset between invocations, in quadrature
    assert over.rerun == pytest.approx(math.hypot(want, DRIFT_HALFWIDTH_BYTES))
    assert over.as_dict()["rerun"] == over.rerun
    # one peak a mode: its spread is unknown and adds nothing; none at all: spread only
    one = peak_range(_peaks(325.0))
    assert one.sd == 0 and rerun_halfwidth(one, base) == pytest.approx(
        t.ppf(0.975, 3) * math.sqrt(math.pi * b)
    )
    flat = overhead(one, peak_range(_peaks(313.0)))
    assert flat.rerun == DRIFT_HALFWIDTH_BYTES
    assert flat.high - flat.value == pytest.approx(DRIFT_HALFWIDTH_BYTES)
    assert flat.value - flat.low == pytest.approx(DRIFT_HALFWIDTH_BYTES)


def test_the_interval_holds_the_next_invocations_overhead():
    """Issue 28's done-when, simulated: peaks that move by about 1 MiB from one iteration
    to the next (revolve-8 on torch), two workers of two iterations per mode. The spread
    interval alone holds the next invocation's overhead 85 times in a hundred (with one
    overhead per cell and three sweeps, some cell fails); with the rerun interval 96."""
    rng = np.random.default_rng(28)

    def invocation():
        base = peak_range(_peaks(*rng.normal(313.0, 0.3, 4)))
        ckpt = peak_range(_peaks(*rng.normal(326.5, 1.1, 4)))
        return overhead(ckpt, base), (ckpt.low - base.high, ckpt.high - base.low)

    held = spread_held = 0
    trials = 2000
    for _ in range(trials):
        (a, (lo, hi)), (b, _) = invocation(), invocation()
        held += a.low <= b.value <= a.high
        spread_held += lo <= b.value <= hi
    assert held / trials >= 0.93
    assert spread_held / trials <= 0.88


def test_two_level_peaks_need_more_iterations_than_two_workers_of_two():
    """Peaks on two levels 2 MiB apart (torch's checkpointed peaks: where glibc puts a 2.25
    MiB gradient temporary, docs/results/torch-memory.md). Four iterations a mode all land
    on one level one time in eight, and their interval then misses the next invocation:
    about 93 times in a hundred it holds it; eight iterations a mode hold it 99 times."""
    rng = np.random.default_rng(28)

    def invocation(n):
        base = peak_range(_peaks(*rng.normal(314.6, 0.35, n)))
        levels = 325.5 + 2.1 * (rng.random(n) < 0.5) + rng.normal(0, 0.2, n)
        return overhead(peak_range(_peaks(*levels)), base)

    def held(n, trials=2000):
        hits = 0
        for _ in range(trials):
            a, b = invocation(n), invocation(n)
            hits += a.low <= b.value <= a.high
        return hits / trials

    four, eight = held(4), held(8)
    assert four < 0.95 <= eight
    assert eight >= 0.98


def test_clear_overhead_prints_value_and_interval():
    base = peak_range(_peaks(313.0, 313.5))
    ckpt = peak_range(_peaks(330.0, 330.25))
    over = overhead(ckpt, base)
    assert not over.below_noise
    assert fmt_overhead(over) == "+16.9 MiB [+13.7, +20.0]"  # two peaks a mode: wide (outward)
    assert fmt_overhead(None) == "-"


def test_savings_interval_holds_both_spreads_and_refuses_below_noise():
    base = peak_range(_peaks(313.0, 313.5, 313.2, 313.3))
    normal = overhead(peak_range(_peaks(900.0, 1010.0, 950.0, 980.0)), base)
    ckpt = overhead(peak_range(_peaks(330.0, 330.25, 330.1, 330.2)), base)
    lo, hi = savings_interval(normal, ckpt)
    assert lo == pytest.approx(normal.low / ckpt.high) and hi == pytest.approx(
        normal.high / ckpt.low
    )
    assert lo < normal.value / ckpt.value < hi
    tiny = overhead(peak_range(_peaks(313.2, 313.6)), base)
    assert tiny.below_noise and savings_interval(normal, tiny) is None
    assert savings_interval(None, ckpt) is None


# ------------------------------------------------------------ run, compare, plots, frame


def _noisy_result(base_mib=(679.1, 762.7, 762.7), ckpt_mib=(690.0, 700.0, 732.4)):
    """The issue's revolve-8 cell: a baseline that jumps, a checkpointed peak inside it."""
    from dataclasses import replace

    from _synthetic import CI_CASE, make_result

    r = make_result(CI_CASE, seed=5)
    peaks = {"baseline": base_mib, "normal": (1282.0, 1350.0, 1412.0), "checkpointed": ckpt_mib}
    modes = tuple(
        replace(
            m,
            iterations=tuple(
                replace(it, peak_rss_bytes=int(p * MIB))
                for it, p in zip(m.iterations, peaks[m.mode.value], strict=True)
            ),
        )
        for m in r.modes
    )
    return replace(r, modes=modes)


def test_summary_gives_no_savings_ratio_for_an_overhead_within_noise():
    s = _noisy_result().summary.as_dict()  # the result file's summary document
    assert s["overhead_bytes"]["checkpointed"] < 0  # the raw median difference
    iv = s["overhead_interval_bytes"]["checkpointed"]
    assert iv["below_noise"] and iv["low"] < 0 < iv["high"]
    assert s["memory_savings"] is None and s["memory_savings_ci"] is None
    assert s["peak_range_bytes"]["baseline"]["high"] - s["peak_range_bytes"]["baseline"][
        "low"
    ] == int(762.7 * MIB) - int(679.1 * MIB)
    # normal is far above its noise: the lower bound the intervals allow is kept for gates
    assert s["memory_savings_bound"] == pytest.approx(
        s["overhead_interval_bytes"]["normal"]["low"] / iv["high"]
    )


def test_run_table_and_headline_print_below_noise_never_a_negative_overhead():
    from ckptbench.render.run import headline, run_table
    from ckptbench.render.table import to_text

    result = _noisy_result()
    text = to_text(run_table(result), width=250) + "\n" + headline(result)
    assert "< noise (±" in text
    ckpt = next(line for line in text.splitlines() if line.startswith("checkpointed"))
    assert "< noise (±" in ckpt
    assert not re.search(r"(?<![e\w])-\d", ckpt)  # no negative figure (1.0e-15 aside)
    assert "memory savings - (checkpointed overhead < noise (±" in text
    assert "peak spread" in text and "83.6 MiB" in text  # the baseline's spread beside it


def test_compare_and_read_results_print_below_noise(tmp_path):
    from ckptbench.analysis import compare
    from ckptbench.frame import cells_frame, read_results
    from ckptbench.render import render
    from ckptbench.results.schema import save_result

    result = _noisy_result()
    table = render(compare([result]), "table")
    assert "< noise (±" in table
    row = cells_frame([result]).iloc[0]
    assert bool(row["checkpointed_overhead_below_noise"])
    assert row["checkpointed_overhead_low_bytes"] < 0 < row["checkpointed_overhead_high_bytes"]
    assert row.isna()["checkpointed_overhead_bytes"] and row.isna()["memory_savings"]
    path = tmp_path / "r.json"
    save_result(result, path)
    tidy = read_results(path)
    ck = tidy[tidy["mode"] == "checkpointed"].iloc[0]
    assert bool(ck["overhead_below_noise"]) and tidy["overhead_bytes"].dropna().min() >= 0
    assert ck["peak_high_bytes"] - ck["peak_low_bytes"] == int(732.4 * MIB) - int(690 * MIB)


def test_clear_overheads_keep_their_figures_with_intervals():
    from ckptbench.frame import cells_frame

    r = _noisy_result(base_mib=(313.0, 313.2, 313.1), ckpt_mib=(324.0, 324.5, 324.1))
    s = r.summary.as_dict()
    iv = s["overhead_interval_bytes"]["checkpointed"]
    assert not iv["below_noise"] and 9 * MIB < iv["low"] < iv["value"] < iv["high"]
    lo, hi = s["memory_savings_ci"]
    assert lo <= s["memory_savings"] <= hi
    # the interval holds both spreads: normal's lowest over ckpt's highest, and the reverse
    assert lo <= s["overhead_interval_bytes"]["normal"]["low"] / iv["high"] + 1e-9
    assert hi >= s["overhead_interval_bytes"]["normal"]["high"] / iv["low"] - 1e-9
    assert cells_frame([r]).iloc[0]["checkpointed_overhead_bytes"] > 0


def test_tradeoff_plot_places_a_below_noise_point_at_its_upper_end():
    from ckptbench.render.plots import _points

    pts = _points([_noisy_result()], "revolve")
    assert len(pts) == 1
    _, x, _, _, lo, hi, below = pts[0]
    assert below and x == hi > 0 and lo == 0  # never a negative figure on the memory axis


def test_gate_judges_savings_within_noise_by_the_lower_bound():
    from ckptbench.analysis.cellchecks import expect_lines
    from ckptbench.sweep.config import Expect

    result = _noisy_result()
    bound = result.summary.memory_savings_bound
    (line,) = expect_lines(result, Expect(memory_savings_min=bound * 0.9))
    assert line.passed and "within its noise" in line.detail
    (line,) = expect_lines(result, Expect(memory_savings_min=bound * 1.1))
    assert not line.passed


def test_a_failing_savings_bound_never_reads_as_the_threshold():
    """The bound was printed to two decimals: 0.4969 against 0.5 read '>= 0.50x ..., need
    >= 0.5x' on a FAIL line. Printed as far as keeps it apart from the threshold."""
    from ckptbench.analysis.cellchecks import expect_lines
    from ckptbench.sweep.config import Expect

    result = _noisy_result(ckpt_mib=(690.0, 700.0, 734.0))
    bound = result.summary.memory_savings_bound
    shown = float(f"{bound:.2f}")
    assert result.summary.memory_savings.value is None and shown > bound  # rounds up
    least = (bound + shown) / 2
    (line,) = expect_lines(result, Expect(memory_savings_min=least))
    printed = float(re.search(r">= (\S+)x \(checkpointed", line.detail).group(1))
    assert not line.passed and printed < least, line.detail
    (line,) = expect_lines(result, Expect(memory_savings_min=bound - (shown - bound)))
    printed = float(re.search(r">= (\S+)x \(checkpointed", line.detail).group(1))
    assert line.passed and printed >= bound - (shown - bound), line.detail


def test_run_table_shows_no_peak_spread_for_a_single_iteration():
    """One measured iteration per mode has no spread: '-', not a '0 B' that reads as a
    perfectly stable peak; two iterations show theirs."""
    from dataclasses import replace

    from _synthetic import CI_CASE, make_result

    from ckptbench.render.run import run_table
    from ckptbench.render.table import to_text

    def spreads(repeats: int) -> list[str]:
        result = make_result(replace(CI_CASE, repeats=repeats, warmup=0), seed=3)
        lines = to_text(run_table(result), width=250).splitlines()
        head = next(line for line in lines if "peak spread" in line)
        at = head.index("peak spread")
        rows = [line for line in lines if line.split()[:1] in (["baseline"], ["normal"])]
        return [row[at - 2 : at + len("peak spread")].strip() for row in rows]

    assert spreads(1) == ["-", "-"]
    assert "-" not in spreads(3)  # a figure, '0 B' too where the peaks were equal
