"""The two size writers of ``results.units``: every size ckptbench writes in words reads
the same everywhere, and an exact text reads back through the parser as the same bytes."""

from __future__ import annotations

from fractions import Fraction

from hypothesis import example, given
from hypothesis import strategies as st

from ckptbench.results.units import MAX_BYTES, exact_size_text, parse_size, size_text
from ckptbench.schedules import get_strategy


@given(st.integers(min_value=1, max_value=MAX_BYTES - 1))
def test_an_exact_size_reads_back_as_its_bytes(n: int) -> None:
    assert parse_size(exact_size_text(n)) == n


@example(23296)  # 22.75 KiB: exactly half a unit from 22.8 (once read as more in floats)
@given(st.integers(min_value=1024, max_value=2**50))
def test_a_size_text_is_within_its_last_digit(n: int) -> None:
    """Three significant digits in the unit that keeps them: within half a unit of the last
    digit shown, never '0.00 MiB' for a size that is not zero."""
    text = size_text(n)
    number, unit = text.split()
    scale = {"KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40}[unit]
    digits = len(number.split(".")[1]) if "." in number else 0
    # exact arithmetic: a size halfway between two texts (23 296 B is 22.75 KiB) is shown
    # half a unit off, which floats read as a hair more
    assert abs(Fraction(number) * scale - n) <= Fraction(1, 2) * Fraction(10) ** -digits * scale
    assert 1 <= float(number) < 1024.5


def test_signs_and_compact_forms() -> None:
    assert size_text(-3 * 2**20) == "-3.00 MiB"
    assert size_text(3 * 2**20, signed=True) == "+3.00 MiB"
    assert size_text(0, signed=True) == "0 B"
    assert size_text(1536, compact=True) == "1.5 KiB"
    assert size_text(1000, compact=True) == "1000 B"  # not '1e+03 B'


def test_the_planner_and_a_plot_label_write_sizes_the_same_way() -> None:
    """A budget in a planner's error and on a plot's axis: the one writer's digits."""
    label = get_strategy("optimal").setting.point_label(1000)
    assert "1e+03" not in label and "1000 B" in label
