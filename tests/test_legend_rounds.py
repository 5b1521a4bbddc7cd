"""`compare`'s legend says how its slowdown and savings are taken for the cells it shows:
per round and pooled (several rounds), from one round (its iteration pairs; its overheads),
or both in a mixed set, in every format that shows a legend. It said "per round, then the
rounds' geometric mean / median" for cells of one round too, where the slowdown is that
round's median pair ratio and the savings are the shown overheads divided; `run`'s note
said "each ratio is taken within a round and pooled" for one round alike.

The result files are real measurements (autograd, a 30-step RNN), one and two rounds."""

from __future__ import annotations

import html
import json
import re
import statistics
from pathlib import Path

import pytest
from click.testing import CliRunner

from ckptbench.cli import cli
from ckptbench.results.schema import Mode, result_from_dict

pytestmark = pytest.mark.slow

SLOWDOWN = {
    "one": "slowdown: ckpt time / normal time (from one round: the median of every ckpt/normal "
    "iteration pair's ratio, which can differ from the ckpt s / normal s columns divided)",
    "multi": "slowdown: ckpt time / normal time (per round, then the rounds' geometric mean: "
    "not the ckpt s / normal s columns divided)",
    "mixed": "slowdown: ckpt time / normal time (per round, then the rounds' geometric mean: "
    "not the ckpt s / normal s columns divided; where a cell ran one round, the median of every "
    "ckpt/normal iteration pair's ratio, which can differ from them)",
}
SAVINGS = {
    "one": "savings: normal +MiB / ckpt +MiB (from one round: the shown columns divided, "
    "before rounding)",
    "multi": "savings: normal +MiB / ckpt +MiB (per round, then the rounds' median: not the "
    "shown columns divided)",
    "mixed": "savings: normal +MiB / ckpt +MiB (per round, then the rounds' median: not the "
    "shown columns divided; where a cell ran one round, the shown columns divided, before "
    "rounding)",
}
#: one round's: 95% for iteration noise only, the savings' a worst case (2026-11-30: it
#: read '95% intervals from one round's iterations' above a warning that one round gives none)
ONE_ROUND = (
    "the slowdown's and vs floor's are 95% for the iterations' noise alone, not the spread "
    "between fresh processes; the savings' is the range the iterations allow, a worst case, "
    "not a 95% interval"
)
INTERVALS = {
    "one": f"[95%]: intervals from one round's iterations: {ONE_ROUND} (",
    "multi": "[95%]: 95% intervals over the rounds (",
    "mixed": "[95%]: 95% intervals over the rounds; where a cell ran one round (the cells the "
    f"warning 'intervals from one round' names), from its iterations: {ONE_ROUND} (",
}
#: the files of each set (measured by the fixture: rounds, snaps)
SETS = {"one": ("r1s4", "r1s5"), "multi": ("r2s4", "r2s5"), "mixed": ("r1s4", "r2s5")}


def _words(text: str) -> str:
    """Text as read: HTML tags dropped and entities read, markdown's escapes read, every run
    of blanks and line breaks one space (plain text wraps its notes)."""
    text = html.unescape(re.sub(r"<[^>]+>", " ", text)).replace("\\<", "<")
    return " ".join(text.split())


@pytest.fixture(scope="module")
def measured(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    """Four real results, one and two rounds of 3 iterations each at 4 and 5 snaps, and the
    text each `run` printed."""
    folder = tmp_path_factory.mktemp("legend")
    printed = {}
    for rounds in (1, 2):
        for snaps in (4, 5):
            name = f"r{rounds}s{snaps}"
            res = CliRunner().invoke(
                cli,
                ["run", "--backend", "autograd", "--model", "rnn", "--steps", "30",
                 "--snaps", str(snaps), "--rounds", str(rounds), "--repeats", "3",
                 "--precision", "off", "--out", str(folder / f"{name}.json")],
                env={"COLUMNS": "400"},
            )  # fmt: skip
            assert res.exit_code == 0, res.output
            printed[name] = res.output
    return folder, printed


def _compare(folder: Path, case: str, fmt: str) -> str:
    files = [str(folder / f"{name}.json") for name in SETS[case]]
    res = CliRunner().invoke(cli, ["compare", "--format", fmt, *files], env={"COLUMNS": "400"})
    assert res.exit_code == 0, res.output
    return res.output


@pytest.mark.parametrize("fmt", ["markdown", "text", "html"])
@pytest.mark.parametrize("case", ["one", "multi", "mixed"])
def test_compare_legend_says_how_the_ratios_are_taken(measured, case, fmt):
    """One-round cells read 'per round, then the rounds' geometric mean' before; every
    format with a legend says the same words for the same cells."""
    text = _words(_compare(measured[0], case, fmt))
    for said in (SLOWDOWN, SAVINGS, INTERVALS):
        assert said[case] in text, (said[case], text)
        for other in set(said) - {case}:
            assert said[other] not in text, (said[other], text)
    if case != "multi":  # the cells the mixed legend points at are named
        assert "intervals from one round see its iterations" in text, text


@pytest.mark.parametrize("fmt", ["csv", "json"])
def test_compare_machine_formats_carry_no_legend(measured, fmt):
    """CSV and JSON are raw numbers: no legend, so none of its words can be untrue there."""
    out = _compare(measured[0], "mixed", fmt)
    assert "ckpt time / normal time" not in out and "geometric mean" not in out, out


def test_the_words_are_what_was_computed(measured):
    """What the one-round legend says: the slowdown is the median of the round's pairwise
    iteration ratios, the savings the overheads divided."""
    folder, _ = measured
    for name in SETS["one"]:
        result = result_from_dict(json.loads((folder / f"{name}.json").read_text()))
        s = result.summary
        times = {m.mode: [it.wall_time_s for it in m.iterations] for m in result.modes}
        pairs = [c / n for c in times[Mode.CHECKPOINTED] for n in times[Mode.NORMAL]]
        assert s.slowdown.rounds == 1
        assert s.slowdown.value == pytest.approx(statistics.median(pairs), rel=1e-12)
        over = {f.mode: f.overhead_bytes for f in s.modes}
        assert s.memory_savings.value == pytest.approx(
            over[Mode.NORMAL] / over[Mode.CHECKPOINTED], rel=1e-12
        )


@pytest.mark.parametrize(
    ("name", "said"),
    [
        ("r1s4", "from one round, the slowdown is the median of every checkpointed/normal "
                 "iteration pair's ratio, which can differ from the table's times divided, and "
                 "the savings are the table's overheads divided, before rounding"),
        ("r2s4", "each ratio is taken within a round and pooled (slowdown: geometric mean, "
                 "savings: median), so it is not the table's columns divided"),
    ],
)  # fmt: skip
def test_run_note_says_how_the_ratios_are_taken(measured, name, said):
    """`run`'s note said 'each ratio is taken within a round and pooled' for one round."""
    text = _words(measured[1][name])
    assert said in text, text


def test_narrow_text_names_the_time_columns_it_left_out(measured):
    """At 80 columns the times are left out: the slowdown's entry said 'not the shown columns
    divided', which there could only be the +MiB columns; it names ckpt s / normal s."""
    files = [str(measured[0] / f"{name}.json") for name in SETS["multi"]]
    res = CliRunner().invoke(cli, ["compare", *files], env={"COLUMNS": "80"})
    assert res.exit_code == 0, res.output
    text = _words(res.output)
    left_out = text.split("not shown at this width: ")[1].split(" shown without")[0]
    assert "normal s" in left_out and "ckpt s" in left_out, text
    assert SLOWDOWN["multi"] in text, text
