"""``check``'s limits and rule say how its time interval was taken, as compare's legend does
(``render.legends.TIME_METHODS``): "(95% interval)" was printed where the cells had one worker
process a side, whose interval comes from the iterations and is 95% for their noise alone,
blind to the spread between processes. Every format says it: the text's and markdown's
'limits:' line, markdown's and JUnit's rule, JSON's ``limits`` and ``rule``."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from _cli import run_cli
from _synthetic import CI_CASE, make_result

from ckptbench.results.schema import save_result

PROCESSES = "95% over the worker processes (Welch's t, or Student's pooled-variance t"
ITERATIONS = "with one worker process a side, from its iterations (Bauer's rank interval"
NOISE = "95% for the iterations' noise alone, not the spread between processes"
BOTH = "95% over the worker processes where either side has two or more (Welch's t"


def _save(folder: Path, rounds: dict[int, int], seed: int) -> list[str]:
    """One result file per cell (its steps: its rounds) in ``folder``."""
    folder.mkdir()
    out = []
    for steps, n in rounds.items():
        r = make_result(replace(CI_CASE, steps=steps, rounds=n), seed=seed + steps, rounds=n)
        save_result(r, folder / f"{steps}.json")
        out.append(str(folder / f"{steps}.json"))
    return out


def _texts(capsys, tmp_path: Path, rounds: dict[int, int]) -> list[str]:
    """The limits line and the rule of every format (text, markdown, JSON, JUnit)."""
    new, old = _save(tmp_path / "new", rounds, 1), _save(tmp_path / "old", rounds, 50)
    against = [a for path in old for a in ("--against", path)]
    argv = ["check", *new, *against, "--time-tolerance", "25%"]
    junit = tmp_path / "j.xml"
    _, text, _ = run_cli(capsys, [*argv, "--junit", str(junit)])
    _, markdown, _ = run_cli(capsys, [*argv, "--format", "markdown"])
    _, js, _ = run_cli(capsys, [*argv, "--format", "json"])
    doc = json.loads(js)
    doc = doc.get("verdicts", doc)
    limits = [line for line in text.splitlines() if line.startswith("limits: memory")]
    md = [line for line in markdown.splitlines() if "time may not" in line or "gated at" in line]
    assert len(limits) == 1 and len(md) == 2, (text, markdown)
    xml = junit.read_text()
    assert "(95% interval)" not in text + markdown + js + xml, text
    assert "time gated at +25%: a mode fails when the interval" in xml, xml
    return [*limits, *md, *doc["limits"], doc["rule"], xml]


@pytest.mark.parametrize(
    ("rounds", "said", "unsaid"),
    [
        ({256: 1}, [ITERATIONS, NOISE], [PROCESSES, BOTH]),
        ({256: 3}, [PROCESSES], [ITERATIONS, NOISE, BOTH]),
        ({256: 1, 300: 3}, [BOTH, "; with one a side, from its iterations (Bauer's", NOISE], []),
    ],
    ids=["one-process-a-side", "processes", "both"],
)
def test_check_says_how_its_time_interval_was_taken_in_every_format(
    capsys, tmp_path: Path, rounds: dict[int, int], said: list[str], unsaid: list[str]
) -> None:
    texts = _texts(capsys, tmp_path, rounds)
    for text in texts:
        if "time" not in text:
            continue
        for words in said:
            assert words in text, (words, text)
        for words in unsaid:
            assert words not in text, (words, text)
