"""A newcomer's first half hour after the third session (2026-11-30), following README.md
and docs/usage.md literally: what they printed that was wrong or unclear.

* ckptbench writes long durations as '4 min' and '49 d 14 h' (``duration_text``), but read
  only ms, s, m and h: ``--max-time 2d`` or ``timeout_s = "10 min"`` was "not a duration
  like 5ms, 2s or 10m", an error that did not even name the hours it took.
* The recomputation floor line of an RNN or LSTM run said "(mean layer: ..." of a model
  that has steps, all alike, and no layers; it says "(every step alike: ..." (the result
  file's `floor_basis` stays "mean layer").
* `profile --format markdown` (and html) cut long source lines at 56 characters, as the text
  table does to fit a terminal; they show them whole, and the text table says when it cut.
* `compare --against`'s rule line said its time intervals were "widened by the spread
  between invocations", the note below it that one process a side "sees the iterations
  alone": both now name the fixed allowance (0.5% a side) that widens them, and so does
  ``check``'s note ("the interval comes from iterations alone").
"""

from __future__ import annotations

import pytest
from _cli import one_line_error, run_cli

from ckptbench.results.units import duration_text, parse_duration


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("10 min", 600.0), ("10min", 600.0), ("2d", 172800.0), ("1.5 d", 129600.0),
     ("10m", 600.0), ("1h", 3600.0), ("5ms", 0.005)],
)  # fmt: skip
def test_a_duration_is_read_in_the_units_ckptbench_writes(text, seconds):
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("seconds", [240.0, 3600.0, 3 * 86400.0])
def test_a_duration_said_in_one_unit_reads_back(seconds):
    assert parse_duration(duration_text(seconds).replace(" ", "")) == seconds
    assert parse_duration(duration_text(seconds)) == seconds


def test_a_duration_it_cannot_read_names_every_unit(capsys):
    err = one_line_error(capsys, ["run", "--max-time", "2w"])
    assert "5ms, 2s, 10m, 1h or 2d" in err


def test_a_config_timeout_in_minutes_is_read(tmp_path, capsys):
    config = tmp_path / "c.toml"
    config.write_text('[case]\nmodel = "rnn"\nsteps = 8\nsnaps = 2\ntimeout_s = "10 min"\n')
    code, out, err = run_cli(capsys, ["sweep", str(config), "--out", str(tmp_path / "o"),
                                      "--dry-run"])  # fmt: skip
    assert code == 0, err
    assert "1 cell" in out + err


def _floor_line(result):
    from ckptbench.render.run import explain_lines

    (line,) = [x for x in explain_lines(result) if x.startswith("recomputation floor")]
    return line


@pytest.mark.parametrize("model", ["lstm", "rnn"])
def test_a_recurrence_floor_line_names_no_layer(model):
    """A recurrence has steps, all alike, and no layers: its floor line said 'mean layer'."""
    from _synthetic import make_result

    from ckptbench.results.schema import Case

    case = Case(model=model, steps=6, snaps=2, hidden=8, strategy="revolve", repeats=3)
    result = make_result(case, rounds=2)
    line = _floor_line(result)
    assert "(every step alike: plain" in line and "the forward-only step)" in line, line
    assert "layer" not in line, line
    assert result.summary.as_dict()["floor_basis"] == "mean layer"  # the file's word stays


def test_a_layer_stack_floor_line_still_says_mean_layer():
    from _synthetic import make_result

    from ckptbench.results.schema import Case

    case = Case(model="mlp-stack", steps=6, snaps=2, hidden=8, strategy="revolve", repeats=3)
    assert "(mean layer: plain" in _floor_line(make_result(case, rounds=2))


LONG = 'z = anp.dot(anp.concatenate((x, h), axis=1), params["W"]) + params["b"]'


def _profile_doc():
    row = {"file": "m.py", "line": 3, "function": "step", "occurrences": 30, "source": LONG}
    return {"rows": [{**row, "increment_mib": 4.95}], "model": "lstm", "mode": "normal"}


@pytest.mark.parametrize("fmt", ["markdown", "html"])
def test_profile_markdown_and_html_show_a_source_line_whole(fmt):
    """`profile --format markdown` cut a long source line at 56 characters with '…', as
    the text table does to fit a terminal: a report has no width to fit."""
    from ckptbench.render.formats import render
    from ckptbench.render.profile import profile_report

    shown = render(profile_report(_profile_doc(), 4), fmt)
    assert "…" not in shown
    assert 'params["b"]' in shown.replace("&quot;", '"'), shown


def test_profile_text_cuts_a_long_source_line_only_where_the_width_is_short():
    from ckptbench.render.profile import profile_table
    from ckptbench.render.table import to_text

    wide = to_text(profile_table(_profile_doc(), 4), 200)
    assert LONG in wide and "…" not in wide
    narrow = to_text(profile_table(_profile_doc(), 4), 100)
    assert "…" in narrow and "shown without the end of long lines at this width: source" in narrow


def test_compare_rule_line_says_what_widens_a_one_process_interval(tmp_path, capsys):
    """The rule line said each interval was 'widened by the spread between invocations',
    and the note under it that with one process a side 'the interval sees the iterations
    alone': it is widened by a fixed allowance (``INVOCATION_SD_TIME`` a side), which
    neither said."""
    from _synthetic import CI_CASE, make_result

    from ckptbench.results.schema import save_result

    for name, seed in (("before", 3), ("after", 4)):
        save_result(make_result(CI_CASE, seed=seed), tmp_path / f"{name}.json")
    code, out, err = run_cli(
        capsys,
        ["compare", str(tmp_path / "after.json"), "--against", str(tmp_path / "before.json")],
    )
    assert code == 0, err
    text = " ".join(out.split())
    assert "widened by an allowance for the spread between invocations that no run measures" in text
    assert "(0.5% a side)" in text
    assert "sees the iterations alone, and that allowance" in text


def test_check_one_process_note_names_the_allowance(tmp_path, capsys):
    """``check``'s note said one process a side gives an interval 'from iterations alone',
    beside compare's rule line that names the fixed allowance widening it."""
    from _synthetic import CI_CASE, make_result

    from ckptbench.results.schema import save_result

    for name, seed in (("before", 3), ("after", 4)):
        save_result(make_result(CI_CASE, seed=seed), tmp_path / f"{name}.json")
    argv = ["check", str(tmp_path / "after.json"), "--against", str(tmp_path / "before.json"),
            "--time-tolerance", "25%"]  # fmt: skip
    _, out, err = run_cli(capsys, argv)
    text = " ".join((out + err).split())
    assert "iterations alone and a fixed allowance for the spread between invocations" in text
    assert "(0.5% a side;" in text
