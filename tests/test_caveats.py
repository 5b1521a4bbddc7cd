"""Warnings grouped by what they say: one line per kind, naming the cells and modes it
applies to, the same lines in the terminal table, markdown and the HTML report."""

from __future__ import annotations

from dataclasses import replace

from _synthetic import CI_CASE, make_result

from ckptbench.analysis import compare
from ckptbench.render import grouped_warning_lines, render, warning_lines
from ckptbench.render.format import cell_labels


def _busy(result, cores: dict[str, float], cv: dict[str, float] | None = None):
    """``result`` measured beside other processes keeping ``cores`` busy per mode, with
    iteration times of CV 1% (or ``cv``'s): the raw samples the caveats come from."""

    first = {}
    for m in result.modes:  # every round of a mode around its first round's middle time
        first.setdefault(m.mode, m.iterations[1].wall_time_s)

    def times(m):
        a = (cv or {}).get(m.mode.value, 0.01)  # [t(1-a), t, t(1+a)]: CV exactly a
        t = first[m.mode]
        walls = [t * (1 - a), t, t * (1 + a)]
        return tuple(
            replace(it, wall_time_s=w, cpu_time_s=0.98 * w)
            for it, w in zip(m.iterations, walls, strict=True)
        )

    modes = tuple(
        replace(m, other_busy_cores=cores.get(m.mode.value), iterations=times(m))
        for m in result.modes
    )
    return replace(result, modes=modes)


def _cells():
    cases = [CI_CASE.with_(snaps=s, rounds=3) for s in (8, 12, 16, 20)]
    return [
        _busy(make_result(c, seed=i, rounds=3), {"normal": 0.4 + 0.2 * i, "checkpointed": 1.0})
        for i, c in enumerate(cases)
    ]


def test_one_line_per_kind_of_warning_for_many_cells():
    results = _cells()
    labels = cell_labels([r.case for r in results])
    lines = grouped_warning_lines(results, labels)
    # 8 (cell, mode) warnings of one kind are one line, with the worst value, plus the
    # unstable-times footnote once
    assert len(lines) == 2, lines
    assert lines[0] == (
        "other processes used more than 0.25 cores while it ran (up to 1.00): "
        "all 4 cells (checkpointed, normal)"
    )
    assert lines[1].startswith("* time figures marked *")
    # a kind that only some cells have names them
    results[2] = _busy(results[2], {"normal": 0.5}, cv={"checkpointed": 0.17})
    lines = grouped_warning_lines(results, labels)
    cv = next(line for line in lines if line.startswith("iteration times vary"))
    # three rounds of [t(1-a), t, t(1+a)] pooled: a CV of a * sqrt(6/8), 14.7%
    assert (
        cv
        == f"iteration times vary by more than 10% (CV) (up to 14.7%): {labels[2]} (checkpointed)"
    )
    other = next(line for line in lines if line.startswith("other processes"))
    assert f"{labels[2]} (normal);" in other and f"{labels[0]} (checkpointed, normal)" in other


def test_one_run_names_its_modes_on_one_line():
    r = _busy(
        make_result(CI_CASE.with_(rounds=3), seed=1, rounds=3),
        {"baseline": 0.3, "normal": 0.9, "checkpointed": 0.6},
    )
    lines = warning_lines(r)
    assert lines[0] == (
        "other processes used more than 0.25 cores while it ran (up to 0.90): "
        "baseline, checkpointed, normal"  # the verdicts' order (by mode name)
    )
    assert len(lines) == 2


def test_terminal_markdown_and_html_show_the_same_grouped_lines():
    results = _cells()
    comparison = compare(results)
    line = "other processes used more than 0.25 cores while it ran (up to 1.00)"
    text = render(comparison, "table", width=None)
    md = render(comparison, "markdown")
    assert text.count("other processes used") == 1 and line in text
    assert md.count("other processes used") == 1 and f"- {line}" in md
    from ckptbench.render.html import render_html

    page = render_html(comparison)
    assert page.count("other processes used") == 1 and line in page


def test_one_rounds_intervals_say_what_they_cannot_see():
    """One round's slowdown interval is blind to the spread between fresh processes and its
    savings interval is a worst case: a run of one round says so, one of three does not."""
    from ckptbench.render.caveats import ONE_ROUND

    one = make_result(CI_CASE.with_(rounds=1), seed=3)
    assert one.summary.slowdown.interval is not None and one.summary.slowdown.rounds == 1
    assert ONE_ROUND in warning_lines(one)
    three = make_result(CI_CASE.with_(rounds=3), seed=3, rounds=3)
    assert three.summary.slowdown.rounds == 3
    assert ONE_ROUND not in warning_lines(three)
    # a sweep's cells group it on one line, naming the cells of one round
    labels = ["a", "b"]
    lines = grouped_warning_lines([one, three], labels)
    assert f"{ONE_ROUND}: a" in lines


def test_a_run_whose_checkpointing_saved_nothing_says_so():
    from ckptbench.render.caveats import NO_SAVINGS

    worse = make_result(CI_CASE.with_(rounds=3), seed=4, rounds=3,
                        overhead={"checkpointed": 60 * 2**20})  # fmt: skip
    assert worse.summary.memory_savings.high < 1
    (line,) = [line for line in warning_lines(worse) if line.startswith(NO_SAVINGS)]
    assert line == f"{NO_SAVINGS} (down to {worse.summary.memory_savings.value:.2f})"
    saved = make_result(CI_CASE.with_(rounds=3), seed=4, rounds=3)
    assert not any(line.startswith(NO_SAVINGS) for line in warning_lines(saved))


def test_a_mode_that_did_not_measure_ok_is_a_warning_at_every_width():
    """compare at 120 columns left the status column out and said nothing of a failed cell."""
    from ckptbench.render.caveats import NOT_MEASURED
    from ckptbench.results.schema import Status

    failed = make_result(CI_CASE, seed=5, status={"normal": Status.CRASHED})
    assert f"{NOT_MEASURED}: normal crashed" in warning_lines(failed)
    ok = make_result(CI_CASE, seed=5)
    assert not any(line.startswith(NOT_MEASURED) for line in warning_lines(ok))
    lines = grouped_warning_lines([ok, failed], ["a", "b"])
    assert f"{NOT_MEASURED}: b (normal crashed)" in lines
