"""A newcomer's first ten minutes (2026-11-30): what the README's and the docs' commands
printed that a first user could not read, or that contradicted itself."""

from __future__ import annotations

import json

from click.testing import CliRunner

from ckptbench.cli import cli


def test_plan_save_costs_names_the_file_it_wrote(tmp_path, monkeypatch):
    """`plan --save-costs costs.json` wrote the file without a word, where `compare -o`,
    `--plots`, `--mprof` and `check --junit` each say `wrote FILE`."""
    monkeypatch.chdir(tmp_path)
    costs = {"forward_time_s": 1e-4, "taped_time_s": 3e-4, "state_bytes": 32768,
             "tape_bytes": 40000, "fixed_time_s": 0.0}  # fmt: skip
    (tmp_path / "c.json").write_text(json.dumps(costs))
    argv = ["plan", "--model", "rnn", "--steps", "20", "--budget", "1MiB", "--costs", "c.json"]
    res = CliRunner().invoke(cli, [*argv, "--save-costs", "saved.json"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    assert (tmp_path / "saved.json").is_file()
    assert "wrote saved.json (the step costs: --costs saved.json reuses them)" in res.stderr
    quiet = CliRunner().invoke(cli, [*argv, "--save-costs", "q.json", "-q"])
    assert quiet.exit_code == 0 and "wrote" not in quiet.stderr, quiet.output
