"""A newcomer's audit of the reports (2026-11-30): each point with a test that fails on the
code before it."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from ckptbench.cli import cli


def _invoke(*args: str):
    return CliRunner().invoke(cli, list(args))


@pytest.mark.parametrize("text", ["-0%", "-0", "-0.0%", "-0e3"])
def test_minus_zero_is_a_zero_fraction(text):
    """'-0%' was 'not a fraction like 5% or 0.05' where '0%' is accepted; negative figures
    other than zero stay refused (tests/test_hardening8.py)."""
    from ckptbench.cli.precision import precision_value
    from ckptbench.results.units import parse_fraction_text

    assert parse_fraction_text(text) == 0.0
    assert precision_value(text) is None  # --precision -0% is off, as 0% is
    res = _invoke("check", "nothing-here", "--memory-tolerance", text)
    assert "not a fraction" not in res.output and "Traceback" not in res.output
    assert res.exit_code == 2 and "give --against" in res.output  # read, then judged as 0%


def test_precision_zero_is_off_in_help():
    """`run --precision 0` is quietly `off`: its help says so."""
    res = _invoke("run", "--help")
    assert res.exit_code == 0
    assert "'off' (or 0, 0%) adds none" in " ".join(res.output.split())


def _compare_legend(tmp_path, rounds: list[int]) -> str:
    from _synthetic import CI_CASE, make_result

    from ckptbench.results.schema import save_result

    paths = []
    for i, n in enumerate(rounds):
        paths.append(tmp_path / f"r{i}.json")
        save_result(make_result(CI_CASE.with_(snaps=4 + i), seed=i, rounds=n), paths[-1])
    res = CliRunner().invoke(cli, ["compare", "--format", "markdown", *map(str, paths)])
    assert res.exit_code == 0, res.output
    return " ".join(res.output.split())


@pytest.mark.parametrize(
    ("rounds", "over"),
    [
        ([1, 1], "intervals from one round's iterations: the slowdown's and vs floor's are "
                 "95% for the iterations' noise alone"),
        ([3, 3], "95% intervals over the rounds ("),
        ([3, 1], "95% intervals over the rounds; where a cell ran one round (the cells the "
                 "warning 'intervals from one round' names), from its iterations: the "
                 "slowdown's and vs floor's are 95% for the iterations' noise alone"),
    ],
)  # fmt: skip
def test_compare_legend_says_where_its_intervals_come_from(tmp_path, rounds, over):
    """`compare`'s legend said '95% intervals over the rounds' for one-round cells, while a
    warning below said those intervals come from one round's iterations."""
    text = _compare_legend(tmp_path, rounds)
    assert over in text, text
    if 1 in rounds:  # the warning the mixed legend points at is there
        assert "intervals from one round see its iterations" in text, text


def test_run_prints_both_sides_of_an_asymmetric_interval():
    """`run`'s live line printed '1.18x [0.85, 1.63] +/-37.7%' for an interval 28% below and
    38% above the estimate: one '+/-' figure read as symmetric."""
    from ckptbench.analysis.intervals import Estimate
    from ckptbench.measure.runner import Precision
    from ckptbench.render.console import JobClock
    from ckptbench.results.schema import Case, Mode

    value, low, high = 1.18, 0.85, 1.63
    clock = JobClock(Case(rounds=3), (Mode.NORMAL,), Precision(0.05, 30, 240.0), 1.0)
    clock.done_rounds = {0, 1}
    clock.estimate = {"slowdown": Estimate(value, low, high, "test", 2, 20)}
    text = clock.summary()
    sides = f"-{1 - low / value:.1%}/+{high / value - 1:.1%}"
    assert f"slowdown 1.18x [0.85, 1.63] {sides} (goal 5%)" in text, text
    assert "+/-" not in text, text
