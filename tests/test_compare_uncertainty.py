"""``compare`` carries the uncertainty it knows (issue 25, item 4): slowdown and savings with
their 95% intervals in every format, the unstable mark where the warnings say so, backend
and device in the CSV, no constant column kept over a varying one, and the trade-off plot's
line explained under it."""

from __future__ import annotations

import csv
import io
from dataclasses import replace

from _synthetic import CI_CASE, make_result

from ckptbench.analysis import compare
from ckptbench.render.compare import render
from ckptbench.render.format import fmt_ratio_ci
from ckptbench.render.plots import TRADEOFF_CAPTION


def _results():
    steady = make_result(CI_CASE, seed=1, time_cv=0.01)
    noisy = make_result(replace(CI_CASE, snaps=6), seed=2, time_cv=0.4)
    return [steady, noisy]


def test_every_format_shows_the_intervals_and_the_unstable_mark():
    results = _results()
    assert [r.summary.time_unstable for r in results] == [False, True]
    comparison = compare(results)
    for fmt in ("table", "markdown", "html"):
        text = render(comparison, fmt, width=200)
        for r in results:
            s = r.summary
            slow = fmt_ratio_ci(s.slowdown.value, s.slowdown.interval, 2)
            assert slow + ("*" if s.time_unstable else "") in text, (fmt, slow)
            savings = fmt_ratio_ci(s.memory_savings.value, s.memory_savings.interval, 1)
            assert savings in text, fmt
        assert "time figures marked * are unstable" in text
        steady = results[0].summary.slowdown
        assert fmt_ratio_ci(steady.value, steady.interval) + "*" not in text  # only where said
    rows = list(csv.DictReader(io.StringIO(render(comparison, "csv"))))
    for row, r in zip(rows, results, strict=True):
        s = r.summary
        assert float(row["slowdown_low"]) == s.slowdown.low
        assert float(row["slowdown_high"]) == s.slowdown.high
        assert float(row["memory_savings_low"]) == s.memory_savings.low
        assert float(row["memory_savings_high"]) == s.memory_savings.high
        assert row["time_unstable"] == str(s.time_unstable)
        assert (row["backend"], row["device"]) == ("autograd", "cpu")


def test_a_constant_host_goes_before_a_varying_column_and_is_named():
    text = render(compare(_results()), "table", width=100)
    head = text.splitlines()[1]
    assert "host" not in head
    assert "on host host-a" in text  # the note that every cell shares it


def test_the_tradeoff_line_is_explained_under_the_plot():
    html = render(compare(_results()), "html")
    assert "Revolve&#x27;s model fitted to the revolve points" in html or (
        "Revolve's model fitted to the revolve points" in html
    )
    assert "nearly vertical" in TRADEOFF_CAPTION
