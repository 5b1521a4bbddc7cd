"""``check`` says where its limits come from (issue 25, item 6): the [expect] table's source
and the memory rule before the verdicts, a warning when the config on disk no longer matches
the manifest's copy, side outputs refused before any verdict, limits at the precision of
their size. The fake worker measures; nothing here is timed."""

from __future__ import annotations

from pathlib import Path

import pytest
from _fake import use_fake_worker
from _synthetic import CI_CASE, GATED_SWEEP_TEXT, make_result
from click.testing import CliRunner

from ckptbench.analysis.gate import check
from ckptbench.cli import cli
from ckptbench.results.units import size_text


@pytest.fixture
def swept(monkeypatch, tmp_path):
    use_fake_worker(monkeypatch, "GITHUB_STEP_SUMMARY")
    monkeypatch.chdir(tmp_path)
    Path("ci.toml").write_text(GATED_SWEEP_TEXT)
    for out in ("out", "ref"):  # the results to check and a reference measured apart
        res = CliRunner().invoke(cli, ["sweep", "ci.toml", "--out", out], catch_exceptions=False)
        assert res.exit_code == 0, res.output
        # the fake worker's samples repeat exactly, and one second holds both sweeps: the
        # reference must not read as the same measurement (real samples never repeat)
        monkeypatch.setenv("FAKE_SCALE", "1.0001")
    monkeypatch.delenv("FAKE_SCALE")
    return tmp_path


def invoke(args):
    return CliRunner().invoke(cli, args, catch_exceptions=False)


def test_check_says_where_the_limits_come_from_and_warns_of_an_edited_config(swept):
    res = invoke(["check", "out"])
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    assert lines[1].startswith("limits: [expect] from out/sweep.json, the copy of ci.toml made")
    assert "warning" not in res.output
    Path("ci.toml").write_text(GATED_SWEEP_TEXT.replace("1.5", "3.0"))
    res = invoke(["check", "out"])
    assert (
        "warning: ci.toml on disk differs from that copy (memory_savings_min 3.0 in the file, "
        "1.5 in the copy); the gate uses the copy: pass --config ci.toml" in res.output
    )
    res = invoke(["check", "out", "--config", "ci.toml"])
    assert "limits: [expect] from --config ci.toml" in res.output and "warning" not in res.output
    res = invoke(["check", "out", "--against", "ref", "--memory-floor", "5KiB"])
    assert "limits: memory may grow by 5% of the reference or 5.00 KiB" in res.output


@pytest.mark.parametrize(
    "option",
    [["--time-tolerance", "25%"], ["--memory-tolerance", "10%"], ["--memory-floor", "1MiB"]],
)
def test_a_reference_gate_without_a_reference_is_refused(swept, option):
    """Ignored, --time-tolerance would leave a CI job believing its time is gated."""
    res = CliRunner().invoke(cli, ["check", "out", *option])
    assert res.exit_code == 2 and "ckptbench check:" not in res.output
    assert f"{option[0]} gates changes against reference results: give --against" in res.output
    assert invoke(["check", "out", "--against", "ref", *option]).exit_code == 0


def test_a_side_output_is_refused_before_any_verdict(swept):
    assert CliRunner().invoke(cli, ["check", "out", "--junit", "junit.xml", "-q"]).exit_code == 0
    old = Path("junit.xml").read_text()
    res = CliRunner().invoke(cli, ["check", "out", "--junit", "junit.xml"])
    assert res.exit_code == 2
    assert "ckptbench check:" not in res.output and "exists" in res.output
    assert Path("junit.xml").read_text() == old
    res = CliRunner().invoke(cli, ["check", "out", "--junit", "junit.xml", "--force"])
    assert res.exit_code == 0 and "PASSED" in res.output and "wrote junit.xml" in res.output
    Path("junit.xml").write_text("old")  # not JUnit XML ckptbench wrote: kept, --force or not
    res = CliRunner().invoke(cli, ["check", "out", "--junit", "junit.xml", "--force"])
    assert res.exit_code == 2 and "ckptbench check:" not in res.output
    assert "not JUnit XML ckptbench wrote" in res.output and "remove it" in res.output
    assert Path("junit.xml").read_text() == "old"


def test_limits_print_at_the_precision_of_their_size():
    assert size_text(5 * 1024, signed=True) == "+5.00 KiB"
    assert size_text(256 * 1024) == "256 KiB"
    assert size_text(int(1.25 * 2**20)) == "1.25 MiB"
    assert size_text(700) == "700 B"
    reference = [make_result(CI_CASE, seed=1)]
    current = [make_result(CI_CASE, seed=2, memory_scale={"checkpointed": 1.01})]
    report = check(current, reference, memory_tolerance=0.0, memory_floor_bytes=5 * 1024)
    details = [line.detail for line in report.lines if line.check.startswith("memory:")]
    assert details and all("limit +5.00 KiB" in d for d in details)


@pytest.mark.parametrize(
    ("typed", "says"),
    [
        ("0%", "'0%' must be above 0"),
        ("0.0", "'0.0' must be above 0"),
        ("2000%", "'2000%' is out of range (0% to below 1000%)"),
        ("fast", "'fast' is not a fraction like 5% or 0.05"),
    ],
)
def test_a_time_tolerance_is_refused_as_typed(typed, says):
    """The refusal quotes what was typed ('0%'), not the float it parsed to ('got 0.0'), and
    comes from the option itself, before any result is read."""
    res = CliRunner().invoke(cli, ["check", "nowhere", "--against", "nowhere",
                                   "--time-tolerance", typed])  # fmt: skip
    assert res.exit_code == 2
    assert f"Invalid value for '--time-tolerance': {says}" in res.output
    assert "got 0.0" not in res.output


def test_a_gate_against_its_own_measurements_is_refused(swept):
    """The same folder, or a copy of it, as its own reference: every change is zero by
    construction, so the gate could never fail."""
    import shutil

    shutil.copytree("out", "copy")
    for reference in ("out", "copy"):
        res = invoke(["check", "out", "--against", reference])
        assert res.exit_code == 2, res.output
        assert f"--against {reference}: holds the very measurements being checked" in res.output
    assert invoke(["check", "out", "--against", "ref"]).exit_code == 0


def test_side_outputs_never_collide_nor_touch_the_sweeps_config(swept):
    res = invoke(["check", "out", "--junit", "x.xml", "--summary", "x.xml", "--force"])
    assert res.exit_code == 2 and "would write the file twice" in res.output
    assert "PASSED" not in res.output and not Path("x.xml").exists()
    before = Path("ci.toml").read_text()
    res = invoke(["check", "out", "--summary", "ci.toml"])
    assert res.exit_code == 2 and "ci.toml: is an input of this command" in res.output
    assert Path("ci.toml").read_text() == before
    Path("ci.toml").write_text("not = [toml")  # a config that no longer loads is said
    res = invoke(["check", "out"])
    assert res.exit_code == 0 and "warning: ci.toml on disk no longer loads" in res.output


@pytest.mark.parametrize("typed", ["1e400", "5000", "999.99", "100", "25", "5", "1.1"])
def test_a_refused_fraction_suggests_only_what_is_accepted(typed):
    """'1e400' said "would be inf%: write 1e400% (or inf)" and '5000' "write 5000% (or 50)":
    both suggestions refused in turn. Every suggestion reads back, as the value typed."""
    import re
    from decimal import Decimal

    from ckptbench.results.units import parse_fraction_text

    with pytest.raises(ValueError) as err:
        parse_fraction_text(typed)
    said = str(err.value)
    assert "inf" not in said and "e+" not in said, said
    suggested = re.findall(r"(?:write |\(or |, or )([^ ,)]+)", said)
    assert bool(suggested) == (Decimal(typed) < 1000), said
    for text in suggested:
        exact = Decimal(text[:-1]) / 100 if text.endswith("%") else Decimal(text)
        assert exact in (Decimal(typed) / 100, Decimal(typed)), said
        assert parse_fraction_text(text) == pytest.approx(float(exact)), said
