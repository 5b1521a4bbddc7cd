"""A newcomer's first ten minutes (2026-11-30): what the README's and the docs' commands
printed that a first user could not read, or that contradicted itself."""

from __future__ import annotations

import json
from dataclasses import replace

from _synthetic import CI_CASE, make_result
from click.testing import CliRunner

from ckptbench.cli import cli
from ckptbench.results.schema import save_result


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


def test_one_cell_with_a_long_label_keeps_its_slowdown_at_80_columns(tmp_path, monkeypatch):
    """`compare` of one plug-in's result at 80 columns showed the cell's whole label and left
    out the slowdown and the savings, the two figures the tool exists for: only two or more
    rows could be numbered with a legend. One row is numbered too."""
    case = replace(CI_CASE, model="plugins/my_recurrent_model.py:make", snaps=10)
    save_result(make_result(case), tmp_path / "r.json")
    monkeypatch.setenv("COLUMNS", "80")
    res = CliRunner().invoke(cli, ["compare", str(tmp_path / "r.json")], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    header = next(x for x in lines if x.startswith("cell "))
    assert "slowdown [95%]" in header and "savings [95%]" in header, res.stdout
    assert any(x.startswith("cell #1: plugins/my_recurrent_model.py:make") for x in lines)
    assert max(len(x) for x in lines if "  " in x) <= 80, res.stdout


def test_run_explains_every_column_it_shows_and_one_rounds_brackets(fake, tmp_path, monkeypatch):
    """`run`'s table printed 'peak spread', 'sampled max', '[min, max] s', 'evals (opt)' and
    'grad err' with no word on what they are (compare's table has a legend), and after one
    round its overheads and savings carried brackets that nothing explained: the
    '[low, high]' line was printed only from two rounds on."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLUMNS", "250")  # every column shown
    argv = ["run", "--model", "rnn", "--steps", "20", "--snaps", "4", "--rounds", "1"]
    res = CliRunner().invoke(cli, [*argv, "--out", "r.json"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    out = " ".join(res.stdout.split())  # notes wrap like prose
    for header in ("peak spread", "sampled max", "[min, max] s", "evals (opt)", "grad err"):
        assert f"{header}: " in out, (header, res.stdout)
    assert "[low, high]: intervals from one round's iterations: the slowdown's 95%" in out, (
        res.stdout
    )
    monkeypatch.setenv("COLUMNS", "80")  # a column left out is named, not explained
    res = CliRunner().invoke(cli, [*argv, "--out", "n.json"], catch_exceptions=False)
    out = " ".join(res.stdout.split())
    assert "not shown at this width:" in out and "sampled max: " not in out, res.stdout


def test_store_all_is_not_said_to_hold_one_snapshot_per_step(fake, tmp_path, monkeypatch):
    """`schedule --strategy store-all --steps 10` opened with '10 steps, 10 snaps' above
    'peak snapshots 9', and `run --strategy store-all` said '20 snaps (store-all)': store-all
    takes no --snaps and keeps l - 1 states, the last in hand."""
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(cli, ["schedule", "--strategy", "store-all", "--steps", "10"])
    assert res.exit_code == 0, res.output
    title = res.stdout.splitlines()[0]
    assert title == "store-all schedule: 10 steps, every state stored (--snaps not used)", title
    assert "peak snapshots" in res.stdout and "10 snaps" not in res.stdout
    argv = ["run", "--model", "rnn", "--steps", "20", "--strategy", "store-all", "--rounds", "1"]
    res = CliRunner().invoke(cli, [*argv, "--out", "r.json"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    assert "rnn 20 steps, every state stored (store-all):" in res.stdout, res.stdout
    assert "20 snaps" not in res.output, res.output


def test_plan_help_does_not_promise_memory_it_never_measures():
    """`plan --help` said of --device 'device memory is then quoted beside host RSS', the
    words of run, which measures memory; plan measures step costs and predicts."""
    res = CliRunner().invoke(cli, ["plan", "--help"], terminal_width=400)
    assert res.exit_code == 0
    device = next(x for x in res.output.splitlines() if x.lstrip().startswith("--device"))
    assert "run then quotes device memory beside host RSS" in device, device


def test_a_busy_worker_is_not_said_to_get_less_than_90_percent_down_to_90():
    """A worker at 89.6% of a core was warned about as 'less than 90% of a core (CPU/wall
    time) (down to 90%)': the share was rounded to a whole percent."""
    from ckptbench.render.caveats import grouped_warning_lines

    result = make_result(CI_CASE)
    modes = tuple(
        replace(m, iterations=tuple(replace(it, cpu_time_s=0.896 * it.wall_time_s)
                                    for it in m.iterations))
        if m.mode.value == "normal" else m
        for m in result.modes
    )  # fmt: skip
    (line,) = [x for x in grouped_warning_lines([replace(result, modes=modes)]) if "busy" in x]
    assert "less than 90% of a core (CPU/wall time) (down to 89.6%): normal" in line, line


def test_check_markdown_names_memory_limits_only_when_it_gated_memory(tmp_path):
    """`check r.json --format markdown` (no --against) ended 'Memory tolerance 5% with a 256
    KiB floor; time not gated.', and so did --junit's system-out and the JSON's `rule`:
    nothing gated memory without a reference (the text format rightly said nothing)."""
    save_result(make_result(CI_CASE, seed=1), tmp_path / "new.json")
    save_result(make_result(CI_CASE, seed=2), tmp_path / "old.json")
    new, old = str(tmp_path / "new.json"), str(tmp_path / "old.json")
    alone = CliRunner().invoke(cli, ["check", new, "--format", "markdown"])
    assert alone.exit_code == 0, alone.output
    assert "Memory tolerance" not in alone.stdout, alone.stdout
    doc = json.loads(CliRunner().invoke(cli, ["check", new, "--format", "json"]).stdout)
    assert doc["verdicts"]["rule"] is None, doc
    against = CliRunner().invoke(cli, ["check", new, "--against", old, "--format", "markdown"])
    assert "Memory tolerance 5% with a 256 KiB floor" in against.stdout, against.output
