"""Memory figures with their noise (issue 28): overhead intervals that hold both modes'
iteration spreads, "< noise (±X MiB)" instead of a negative or tiny overhead, and no savings
ratio from an overhead below its noise."""

from __future__ import annotations

import pytest

from ckptbench.analysis.memnoise import overhead, peak_range, savings_interval
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
    assert over.low == ckpt.low - base.high and over.high == ckpt.high - base.low
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
    base = peak_range(_peaks(300.0, 314.0, 314.0))
    ckpt = peak_range(_peaks(314.5, 315.0, 315.0))  # +1 MiB median, interval [+0.5, +15]
    over = overhead(ckpt, base)
    assert over.low > 0 and over.value <= over.noise
    assert over.below_noise and fmt_overhead(over).startswith("< noise")


def test_clear_overhead_prints_value_and_interval():
    base = peak_range(_peaks(313.0, 313.5))
    ckpt = peak_range(_peaks(330.0, 330.25))
    over = overhead(ckpt, base)
    assert not over.below_noise
    assert fmt_overhead(over) == "+16.9 MiB [+16.5, +17.2]"
    assert fmt_overhead(None) == "-"


def test_savings_interval_holds_both_spreads_and_refuses_below_noise():
    base = peak_range(_peaks(313.0, 313.5))
    normal = overhead(peak_range(_peaks(900.0, 1010.0)), base)
    ckpt = overhead(peak_range(_peaks(330.0, 330.25)), base)
    lo, hi = savings_interval(normal, ckpt)
    assert lo == pytest.approx(normal.low / ckpt.high) and hi == pytest.approx(
        normal.high / ckpt.low
    )
    assert lo < normal.value / ckpt.value < hi
    tiny = overhead(peak_range(_peaks(313.2, 313.6)), base)
    assert tiny.below_noise and savings_interval(normal, tiny) is None
    assert savings_interval(None, ckpt) is None
