"""--help is a reference a newcomer can read (issue 25, item 7): every option of every
command has a description, and ``run`` groups its options by what they set."""

from __future__ import annotations

import click
from click.testing import CliRunner

from ckptbench.cli import cli
from ckptbench.cli.run import RUN_SECTIONS


def test_every_option_of_every_command_has_a_description():
    missing = [
        f"{name} {'/'.join(p.opts)}"
        for name, cmd in cli.commands.items()
        for p in cmd.params
        if isinstance(p, click.Option) and not (p.help or "").strip()
    ]
    assert missing == []


def test_run_help_groups_its_options_and_places_every_one():
    run = cli.commands["run"]
    names = {p.name for p in run.params if isinstance(p, click.Option)}
    placed = [n for names_ in RUN_SECTIONS.values() for n in names_]
    assert sorted(placed) == sorted(names) and len(placed) == len(set(placed))
    text = CliRunner().invoke(cli, ["run", "--help"], terminal_width=100).output
    heads = [line for line in text.splitlines() if line and not line.startswith(" ")]
    assert [h.split(" (")[0].rstrip(":") for h in heads if h.endswith(":")][:4] == [
        "Workload", "Strategy", "Measurement", "Output",
    ]  # fmt: skip
    at = [text.index(f"\n  --{name} ") for name in ("model", "strategy", "rounds", "out")]
    assert at == sorted(at)
