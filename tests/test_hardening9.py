"""Session of 2026-11-29 (no GPU): a sixth audit's findings (the CI gate and its inputs),
each with a test that fails on the code before it."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from _synthetic import make_result
from click.testing import CliRunner

from ckptbench.cli import cli
from ckptbench.results.schema import save_result


def _invoke(*args: str):
    return CliRunner().invoke(cli, list(args))


def _edited(tmp_path: Path, name: str, edit) -> Path:
    """A result file whose document ``edit`` changed in place."""
    path = tmp_path / f"{name}.json"
    save_result(make_result(seed=3), path)
    doc = json.loads(path.read_text())
    edit(doc)
    path.write_text(json.dumps(doc))
    return path


def _every_wall_time(value):
    def edit(doc):
        for m in doc["modes"]:
            for it in m["iterations"]:
                it["wall_time_s"] = value

    return edit


def _env(key, value):
    def edit(doc):
        doc["environment"][key] = value

    return edit


def _host(value):
    def edit(doc):
        doc["host"] = value

    return edit


@pytest.mark.parametrize(
    ("edit", "words"),
    [
        (_every_wall_time(1e308), "wall_time_s must be below 1e+12 s"),
        (_every_wall_time(1e300), "wall_time_s must be below 1e+12 s"),
        (_env("expect_oom", 5), "environment.expect_oom must be a list of mode names"),
        (_env("expect_oom", [1]), "environment.expect_oom must be a list of mode names"),
        (_env("expect_oom", "normal"), "environment.expect_oom must be a list of mode names"),
        (_env("interrupted", 5), "environment.interrupted must be an object"),
        (_env("interrupted", {"round": 1.5}), "environment.interrupted must be an object"),
        (_env("interrupted", {"round": -3}), "environment.interrupted must be an object"),
        (_host("x\ud800y"), "lone UTF-16 surrogate"),
        (_env("k\ud800", 1), "environment.k\\ud800 holds a lone UTF-16 surrogate"),
        (_host("a\u0001b"), "host must be printable text on one line"),
        (_host("p|q\n### injected"), "host must be printable text on one line"),
    ],
)  # fmt: skip
def test_hostile_result_fields_are_one_line_and_exit_2(tmp_path, edit, words):
    """Each crashed `check` or `compare` with a traceback (exit 1, read as a regression by
    CI), or was read letter by letter, or broke the JUnit XML and the markdown table."""
    bad = _edited(tmp_path, "bad", edit)
    for command in (["check", str(bad)], ["compare", str(bad)]):
        res = _invoke(*command)
        assert res.exit_code == 2, (command, res.output, res.exception)
        assert words in res.output
        assert "Traceback" not in res.output


def test_junit_and_markdown_hold_whatever_a_check_line_says(tmp_path):
    """A failure's numbers can carry a worker's stderr (control characters, pipes, lines):
    the JUnit file must stay XML and the markdown row one row."""
    from ckptbench.analysis.cellchecks import GateLine
    from ckptbench.analysis.gate import GateReport
    from ckptbench.render import check_markdown
    from ckptbench.render.verdicts import check_junit

    line = GateLine("cell", "host", "status", False, "crashed: \x1b[31mboom\x01 | a\nb")
    report = GateReport(lines=(line,), notes=("note \x02",))
    root = ET.fromstring(check_junit(report))
    assert root.find(".//failure").get("message") == "crashed: \\x1b[31mboom\\x01 | a\nb"
    rows = [r for r in check_markdown(report).splitlines() if r.startswith("| **FAIL**")]
    assert len(rows) == 2 and all(r.count(" | ") == 3 for r in rows)  # failures + all checks
    assert "boom\x01 \\| a b" in rows[0]


def test_an_expectation_that_fails_never_reads_as_met(tmp_path):
    """slowdown 1.4646 against slowdown_max 1.46 read 'FAIL ... 1.46x, need <= 1.46x'."""
    from ckptbench.analysis.gate import check
    from ckptbench.sweep.config import Expect

    for scale in (1.0 + k / 997 for k in range(50)):  # a slowdown that rounds down
        result = make_result(seed=3, time_scale={"checkpointed": scale})
        slowdown = result.summary.slowdown.value
        limit = float(f"{slowdown:.2f}")
        if limit < slowdown:
            break
    report = check([result], expect=Expect(slowdown_max=limit))
    (line,) = [x for x in report.lines if x.check == "slowdown_max"]
    assert not line.passed
    shown, need = line.detail.split(", need <= ")
    # the figure, then its interval ('0.861x [0.72, 1.04]')
    assert float(shown.split()[0].rstrip("x")) > float(need.rstrip("x")), line.detail


def test_the_config_on_disk_is_the_sweeps_own_not_a_namesake_where_check_runs(
    tmp_path, monkeypatch
):
    """`cd other && ckptbench check ../cur`, with an unrelated other/small.toml: 'warning:
    small.toml on disk differs from that copy' (the manifest's relative path, read from
    the wrong folder)."""
    from ckptbench.analysis.limits import limit_sources
    from ckptbench.sweep.config import load_config
    from ckptbench.sweep.run import run_sweep

    home = tmp_path / "home"
    home.mkdir()
    (home / "small.toml").write_text(
        'name = "small"\n[case]\nmodel = "rnn"\nsteps = 20\nhidden = 8\n[grid]\nsnaps = [2]\n'
        "[expect]\nmemory_savings_min = 1.5\n"
    )
    monkeypatch.chdir(home)
    run_sweep(load_config("small.toml"), "out", run_cell=lambda case, **_: make_result(case))
    other = tmp_path / "other"
    other.mkdir()
    (other / "small.toml").write_text((home / "small.toml").read_text().replace("1.5", "50"))
    monkeypatch.chdir(other)
    lines = limit_sources([home / "out"], None, True, {})
    assert not any("differs" in x for x in lines), lines
    (home / "small.toml").write_text((home / "small.toml").read_text().replace("1.5", "3"))
    lines = limit_sources([home / "out"], None, True, {})
    assert any("differs" in x and "small.toml" in x for x in lines), lines


def test_sizes_up_to_the_limit_have_their_units():
    """'1PiB' and '4EiB' read as 'not a size like 2GiB' though the limit is 2**62 bytes."""
    from ckptbench.results.units import parse_size

    assert parse_size("1PiB") == 2**50 and parse_size("2PB") == 2 * 10**15
    assert parse_size("3EiB") == 3 * 2**60
    with pytest.raises(ValueError, match="too large"):
        parse_size("4EiB")
    with pytest.raises(ValueError, match="not a size"):
        parse_size("1e3MiB")


def test_interval_ends_round_outward_so_the_printed_interval_holds_the_computed_one():
    """A savings interval from 0.954 printed [1.0, 28.2] (a bound below 1, checkpointing
    costing memory, hidden), a slowdown's 0.99698 printed 1.00, an overhead noise of 0.3435
    MiB printed ±0.3: each end rounded to the nearest digit."""
    from ckptbench.render.format import fmt_overhead, fmt_ratio_ci
    from ckptbench.results.units import interval_text

    assert interval_text(0.954, 28.21, 1) == ("0.9", "28.3")
    assert interval_text(0.99698, 1.1, 2) == ("0.99", "1.10")  # 1.1 is not pushed to 1.11
    assert interval_text(0.000123, 0.00456, 2) == ("0.00012", "0.0046")
    assert fmt_ratio_ci(3.2, [0.954, 28.21], 1) == "3.2x [0.9, 28.3]"
    mib = 2**20
    over = {"value": 5.0 * mib, "low": 0.041 * mib, "high": 9.96 * mib, "below_noise": False}
    assert fmt_overhead(over) == "+5.0 MiB [+0.0, +10.0]"
    noisy = {"value": 0.1 * mib, "low": -0.2435 * mib, "high": 0.4435 * mib,
             "below_noise": True, "noise": 0.3435 * mib}  # fmt: skip
    assert fmt_overhead(noisy) == "< noise (±0.4 MiB)"


def test_too_few_iterations_for_a_rank_interval_get_students_t_not_the_range_called_95():
    """3 against 3 iterations: [min, max] of the pairwise ratios covers 1 - 2/C(6,3) = 90%,
    9 against 1 covers 80%; both were printed as 95% intervals, and `check` failed a cell
    as slower on the 9 against 1 range."""
    import math

    from scipy.stats import t

    from ckptbench.analysis.intervals import ratio_estimate

    x, y = [1.30, 1.36, 1.41], [1.00, 1.04, 1.09]
    est = ratio_estimate([(x, y)], invocation_sd=0.0)
    lx, ly = [math.log(v) for v in x], [math.log(v) for v in y]
    mx, my = sum(lx) / 3, sum(ly) / 3
    var = (sum((v - mx) ** 2 for v in lx) + sum((v - my) ** 2 for v in ly)) / 4
    half = t.ppf(0.975, 4) * math.sqrt(var * (2 / 3))
    assert "Student" in est.method and est.interval_from_data
    assert est.low == pytest.approx(min(est.value, math.exp(mx - my - half)), rel=1e-12)
    assert est.high == pytest.approx(max(est.value, math.exp(mx - my + half)), rel=1e-12)
    pairwise = [a / b for a in x for b in y]
    assert est.low < min(pairwise) and est.high > max(pairwise)  # wider than the 90% range


def test_one_iteration_a_side_has_no_interval_and_no_gate_verdict():
    """One round of one iteration: the 'interval' was the between-invocation sd alone,
    printed as 95% ([1.02, 1.04] around 1.03x); pooled beside a 3-round run it took 80% of
    the weight; against it the time gate could call a cell slower."""
    from _synthetic import CI_CASE, make_result

    from ckptbench.analysis.intervals import ratio_estimate
    from ckptbench.analysis.stats import time_change

    est = ratio_estimate([([1.03], [1.0])])
    assert not est.interval_from_data and "no interval" in est.method
    tc = time_change([[1.0]], [[1.9]], tolerance=0.1)
    assert tc.verdict == "cannot tell" and tc.high == float("inf")
    result = make_result(CI_CASE.with_(repeats=1), seed=2)
    s = result.summary
    assert s.slowdown.value is not None and s.slowdown.interval is None
    assert s.as_dict()["slowdown_ci"] is None
