"""Fourth hardening round (a session's own audit, 2026-11-28): ``--out`` never replaces an
input or anything but a result, a config's flags are booleans, and a sweep asks each
accelerator it names before measuring, as ``run`` does. Every problem is one line, exit 2,
before anything is measured. The fake worker answers; nothing here is timed."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from _cli import one_line_error
from _fake import use_fake_worker
from click.testing import CliRunner

from ckptbench.cli import cli
from ckptbench.sweep.config import ConfigError, parse_config

EXAMPLES = Path(__file__).resolve().parent.parent / "docs" / "examples"
TINY = ["--steps", "6", "--snaps", "3", "--hidden", "8", "--batch", "2", "--input", "4",
        "--rounds", "1", "--warmup", "0", "--repeats", "1", "-q"]  # fmt: skip
COSTS = {"forward_time_s": 0.001, "taped_time_s": 0.003, "state_bytes": 4096, "tape_bytes": 65536}
CONFIG = (
    'name = "p"\n[case]\nsteps = 6\nhidden = 8\nbatch = 2\ninput = 4\nwarmup = 0\n'
    'repeats = 1\nrounds = 1\n{extra}\n[[grid]]\nmodel = ["rnn"]\n'
)


@pytest.fixture
def fake(monkeypatch, tmp_path):
    use_fake_worker(monkeypatch)
    monkeypatch.chdir(tmp_path)
    return monkeypatch


def invoke(args):
    return CliRunner().invoke(cli, args, catch_exceptions=False)


def test_out_never_replaces_an_input_nor_with_force_anything_but_a_result(fake, capsys):
    shutil.copy(EXAMPLES / "autograd_rnn.py", "plug.py")
    source = Path("plug.py").read_text()
    for force in ([], ["--force"]):
        err = one_line_error(capsys, ["run", "--model", "plug.py:make", *TINY,
                                      "--out", "plug.py", *force])  # fmt: skip
        assert "--out plug.py: " in err
    assert Path("plug.py").read_text() == source
    Path("costs.json").write_text(json.dumps(COSTS))
    err = one_line_error(capsys, ["run", "--model", "rnn", *TINY, "--strategy", "optimal",
                                  "--budget", "1MiB", "--costs", "costs.json",
                                  "--out", "costs.json", "--force"])  # fmt: skip
    assert "--out costs.json: is an input of this command" in err
    assert json.loads(Path("costs.json").read_text()) == COSTS
    Path("notes.toml").write_text("kept = true\n")
    err = one_line_error(capsys, ["run", "--model", "rnn", *TINY, "--out", "notes.toml",
                                  "--force"])  # fmt: skip
    assert "exists and is not a ckptbench result; --force replaces only a result" in err
    assert Path("notes.toml").read_text() == "kept = true\n"
    # a result is still replaced with --force, and so is an empty file (mktemp's)
    Path("empty.json").write_text("")
    res = invoke(["run", "--model", "rnn", *TINY, "--out", "empty.json", "--force"])
    assert res.exit_code == 0, res.output
    assert invoke(["run", "--model", "rnn", *TINY, "--out", "r.json"]).exit_code == 0
    res = invoke(["run", "--model", "rnn", *TINY, "--out", "r.json", "--force"])
    assert res.exit_code == 0, res.output


@pytest.mark.parametrize("value", ['"yes"', '"no"', "1", "0"])
def test_a_configs_trace_is_a_boolean(value):
    """Any string is truthy: "no" measured a traced iteration, and compare refused the
    result it saved."""
    with pytest.raises(ConfigError, match="trace must be true or false"):
        parse_config(CONFIG.format(extra=f"trace = {value}"), "c.toml")
    assert parse_config(CONFIG.format(extra="trace = true"), "c.toml").cases[0].trace is True


def test_a_sweep_asks_each_accelerator_before_measuring(fake, capsys):
    # torch counts as installed (the fake worker answers the device probe)
    fake.setattr("ckptbench.backends.registry.BackendSpec.available", lambda self: None)
    Path("p.toml").write_text(
        CONFIG.format(extra="") + 'device = ["cuda"]\nbackend = ["torch"]\nsnaps = [2, 3]\n'
    )
    err = one_line_error(capsys, ["sweep", "p.toml", "--out", "o"])
    assert err == (
        "ckptbench: error: p.toml: cells on torch/cuda: torch 0.fake (a CPU-only build) sees "
        "no CUDA device here\n"
    )
    assert not Path("o").exists()
    fake.setenv("FAKE_CUDA", "1")  # a device that answers: the cells are measured
    res = invoke(["sweep", "p.toml", "--out", "o", "-q"])
    assert "sees no CUDA device" not in res.output


def _with_plan(result, **plan):
    """``result`` with its checkpointed mode having run a plan of these figures."""
    from dataclasses import replace

    from ckptbench.results.schema import Mode

    modes = tuple(
        replace(m, plan={"steps": result.case.steps, **plan}) if m.mode is Mode.CHECKPOINTED else m
        for m in result.modes
    )
    return replace(result, modes=modes)


def test_invocations_that_ran_different_plans_say_so(tmp_path, capsys):
    """Two runs of one optimal cell with different --costs files ran different schedules
    under one key; pooled or paired, the report says so."""
    from _cli import run_cli
    from _synthetic import CI_CASE, make_result, with_case

    from ckptbench.results.schema import save_result

    def optimal(seed, **plan):
        result = with_case(make_result(CI_CASE, seed=seed), strategy="optimal",
                           snaps=CI_CASE.steps, budget_bytes=2**20)  # fmt: skip
        return _with_plan(result, **plan)

    a, b, c = (tmp_path / f"{n}.json" for n in "abc")
    save_result(optimal(1, advances=600, peak_bytes=900_000), a)
    save_result(optimal(2, advances=400, peak_bytes=1_000_000), b)
    save_result(optimal(3, advances=600, peak_bytes=900_000), c)
    code, out, _ = run_cli(capsys, ["compare", str(a), str(b)])
    assert code == 0 and "its runs ran 2 different plans" in out
    code, out, _ = run_cli(capsys, ["compare", str(a), str(c)])
    assert code == 0 and "different plans" not in out
    code, out, err = run_cli(capsys, ["check", str(b), "--against", str(a)])
    assert "its files ran 2 different plans" in out + err


def test_profile_refuses_a_stack_too_short_as_run_does(capsys):
    """It was exit 1, 'profiling failed', from the worker."""
    for command in ("profile", "run"):
        err = one_line_error(capsys, [command, "--model", "transformer-stack", "--steps", "1"])
        assert err == (
            "ckptbench: error: --model transformer-stack needs at least 2 layers (--steps), got 1\n"
        )


def test_the_plan_line_names_the_setting_a_strategy_is_set_by():
    """An optimal run was announced as '200 snaps (optimal)' (snaps it does not use), and one
    round as '1 rounds'."""
    from ckptbench.render.console import plan_line
    from ckptbench.results.schema import Case, Mode

    modes = (Mode.BASELINE, Mode.NORMAL, Mode.CHECKPOINTED)
    optimal = Case(model="rnn", steps=200, snaps=200, strategy="optimal", budget_bytes=2**23,
                   rounds=1)  # fmt: skip
    line = plan_line(optimal, modes, None, 10.0)
    assert line.startswith("measuring rnn 200 steps, optimal within 8.00 MiB: ")
    assert "1 round of ~10 s" in line
    revolve = Case(model="lstm", steps=1000, snaps=31, rounds=3)
    line = plan_line(revolve, modes, None, 10.0)
    assert line.startswith("measuring lstm 1000 steps, 31 snaps (revolve): ")
    assert "3 rounds of ~10 s" in line


def test_model_typos_name_the_fix(capsys):
    err = one_line_error(capsys, ["run", "--model", "LSTM", "--steps", "5"])
    assert "unknown workload 'LSTM' (did you mean lstm?)" in err
    err = one_line_error(capsys, ["run", "--model", "net.py", "--steps", "5"])
    assert "a plug-in file names its factory after a colon: net.py:NAME (e.g. net.py:make" in err
    # in the worker that checks the plug-in: the factory's name, case aside
    example = str(EXAMPLES / "autograd_rnn.py")
    err = one_line_error(capsys, ["run", "--model", f"{example}:Make", "--steps", "5"])
    assert "has no attribute 'Make' (did you mean make?)" in err


def test_an_overhead_at_or_below_the_baseline_is_not_called_noise():
    """-4 KiB with no spread printed '< noise (±0.00)': there was no noise to be below."""
    from ckptbench.render.format import fmt_overhead

    assert fmt_overhead({"value": -4096, "low": -4096, "high": -4096, "noise": 0,
                         "below_noise": True}) == "≤ baseline"  # fmt: skip
    noisy = {"value": 1000, "low": -2 * 2**20, "high": 2 * 2**20, "noise": 2 * 2**20,
             "below_noise": True}  # fmt: skip
    assert fmt_overhead(noisy) == "< noise (±2.0 MiB)"


def test_a_plans_stored_bytes_print_at_the_precision_of_their_size():
    """54 718 B within a 60 KiB budget printed as '0.1 MiB stored'."""
    from dataclasses import replace

    from _synthetic import CI_CASE, make_result, with_case

    from ckptbench.render.run import explain_lines
    from ckptbench.results.schema import Mode

    result = make_result(CI_CASE)
    plan = {"predicted_time_s": 0.5, "peak_bytes": 54_718}
    modes = tuple(replace(m, plan=plan) if m.mode is Mode.CHECKPOINTED else m for m in result.modes)
    result = with_case(replace(result, modes=modes), strategy="optimal", snaps=CI_CASE.steps,
                       budget_bytes=60 * 1024)  # fmt: skip
    (line,) = [x for x in explain_lines(result) if x.startswith("plan: predicted")]
    assert "predicted 0.5 s and 53.4 KiB stored" in line


def test_sizes_too_large_for_the_machine_name_every_size_that_counts(capsys):
    """It blamed '--steps 6' for an --output of 1e13."""
    err = one_line_error(capsys, ["run", "--model", "rnn", "--steps", "6", "--output",
                                  "9999999999999"])  # fmt: skip
    assert "--steps 6 x --batch 16 x (--input 32 + --output 9999999999999): the inputs" in err
    assert "more than this machine's" in err


def test_a_key_named_twice_in_a_costs_file_or_a_result_is_refused(tmp_path, capsys):
    """JSON keeps the last of two equal keys silently: a costs file saying two things, or a
    result edited by hand, was read as whichever came last."""
    from _synthetic import make_result

    from ckptbench.results.schema import save_result

    costs = tmp_path / "costs.json"
    costs.write_text(
        '{"forward_time_s": 0.001, "taped_time_s": 0.003, "state_bytes": 4096,'
        ' "tape_bytes": 65536, "tape_bytes": 1}'
    )
    err = one_line_error(capsys, ["plan", "--steps", "20", "--budget", "1MiB",
                                  "--costs", str(costs)])  # fmt: skip
    assert "a JSON object names 'tape_bytes' twice" in err
    result = tmp_path / "r.json"
    save_result(make_result(), result)
    text = result.read_text()
    result.write_text(text.replace('"host":', '"host": "elsewhere", "host":', 1))
    err = one_line_error(capsys, ["compare", str(result)])
    assert "a JSON object names 'host' twice" in err


def test_the_rounds_line_names_its_spread_apart_from_the_tables():
    """Two different figures were both called the peaks' spread; and a run cut to one round
    said 'across 1 rounds'."""
    from dataclasses import replace

    from _synthetic import CI_CASE, make_result

    from ckptbench.render.run import explain_lines

    three = make_result(CI_CASE.with_(rounds=3), rounds=3)
    (line,) = [x for x in explain_lines(three) if x.startswith("across ")]
    assert line.startswith("across 3 rounds: the rounds' median exact peaks differ by ")
    cut = replace(make_result(CI_CASE), case=CI_CASE.with_(rounds=4))  # one round of four
    assert not [x for x in explain_lines(cut) if x.startswith("across ")]


def test_a_config_takes_a_devices_other_name_as_device_does():
    """`--device gpu` is JAX's word for cuda on the command line; a config refused it."""
    config = parse_config(
        CONFIG.format(extra="") + 'backend = ["jax"]\ndevice = ["gpu"]\n', "c.toml"
    )
    assert [c.device for c in config.cases] == ["cuda"]
    with pytest.raises(ConfigError, match=r"no backend has it \(devices: cpu, cuda\)"):
        parse_config(CONFIG.format(extra="") + 'device = ["tpu"]\n', "c.toml")


SWEEP_TEXT = (
    'name = "tiny"\n[case]\nmodel = "rnn"\nsteps = 20\nhidden = 8\nrepeats = 3\nrounds = 3\n'
    "[grid]\nsnaps = [2, 3]\n"
)


def test_a_cell_a_stop_signal_cut_in_a_later_round_is_measured_again_on_resume(tmp_path):
    """It holds every mode (rounds 1-2 complete, round 3 cut), so --resume kept it and
    counted it failed on every later resume; only --retry-failed re-measured it."""
    from dataclasses import replace

    from _synthetic import make_result

    from ckptbench.results.schema import Mode, Status, save_result
    from ckptbench.results.store import load_result
    from ckptbench.sweep.run import CellState, cell_path, run_sweep

    config = parse_config(SWEEP_TEXT, source="tiny.toml")
    first, second = config.cases
    cut = make_result(first, seed=1, rounds=3)
    modes = tuple(
        replace(m, status=Status.INTERRUPTED, iterations=(), warmup=())
        if m.round == 2 and m.mode is Mode.NORMAL
        else m
        for m in cut.modes
    )
    save_result(replace(cut, modes=modes), cell_path(tmp_path, first))
    assert load_result(cell_path(tmp_path, first)).interruption == "interrupted in round 3"

    measured = []

    def run_cell(case, *, out_path=None, progress=None):
        measured.append(case)
        return make_result(case, seed=2, rounds=3)

    outcome = run_sweep(config, tmp_path, resume=True, run_cell=run_cell)
    assert measured == [first, second]
    assert all(c.state is CellState.MEASURED and c.ok for c in outcome.cells)
    (aside,) = tmp_path.glob(f"{first.key}.json.*.replaced")  # the cut rounds are kept
    assert load_result(aside).interruption == "interrupted in round 3"
    assert run_sweep(config, tmp_path, resume=True, run_cell=run_cell).exit_code == 0
    assert len(measured) == 2  # nothing left to measure


def test_schedule_shows_a_strategys_own_figures_not_revolves():
    """store-all at --snaps 1 said r = 99 and a binomial optimum of 4950 for its 99
    advances; uniform said Revolve's r = 3 beside its own 15 advances of one step."""
    from ckptbench.render.schedule import schedule_table
    from ckptbench.schedules import make_schedule, replay

    def rows(strategy, steps, snaps):
        stats = replay(make_schedule(strategy, steps, snaps), steps, None)
        table = schedule_table(stats, snaps, strategy, None)
        return table.title, {r["quantity"]: r["value"] for r in table.records}

    title, store = rows("store-all", 100, 1)
    assert title == "store-all schedule: 100 steps, every state stored (--snaps not used)"
    assert store["repetition number r(l, s)"] == "1"
    assert (
        store["binomial optimum t(l, s) (Revolve's)"]
        == store["advances t (untaped steps, first sweep included)"]
    )
    _, uniform = rows("uniform", 100, 7)
    assert "repetition number r(l, s)" not in uniform  # no closed form: its max is the replay's
    assert uniform["max advances of one step"] == "15"
    _, revolve = rows("revolve", 100, 7)
    assert revolve["repetition number r(l, s)"] == revolve["max advances of one step"] == "3"


def test_an_edited_plug_in_is_not_kept_nor_pooled_as_the_same_model(tmp_path, monkeypatch, capsys):
    """Its cell's key names the plug-in, not its code: after an edit, --resume kept the old
    results and compare/check paired them with the new ones without a word."""
    from dataclasses import replace

    from _cli import run_cli
    from _synthetic import make_result

    from ckptbench.results.schema import save_result
    from ckptbench.sweep.run import CellState, run_sweep
    from ckptbench.workloads import plugin_provenance

    monkeypatch.chdir(tmp_path)
    Path("plug.py").write_text((EXAMPLES / "autograd_rnn.py").read_text())
    config = parse_config(SWEEP_TEXT.replace('"rnn"', '"plug.py:make"'), source="p.toml")

    def run_cell(case, *, out_path=None, progress=None):
        result = make_result(case, seed=len(Path("plug.py").read_text()))
        return replace(result, environment={"plugin": plugin_provenance(case.model)})

    first = run_sweep(config, tmp_path / "out", run_cell=run_cell)
    assert first.exit_code == 0
    kept = run_sweep(config, tmp_path / "out", resume=True, run_cell=run_cell)
    assert all(c.state is CellState.KEPT for c in kept.cells)
    Path("plug.py").write_text(Path("plug.py").read_text() + "\n# edited\n")
    again = run_sweep(config, tmp_path / "out", resume=True, run_cell=run_cell)
    assert all(c.state is CellState.CONFLICT for c in again.cells)
    assert "plug-in source" in again.cells[0].error
    # a result of the edited plug-in beside one of the old: said where they pool and pair
    new = tmp_path / "new.json"
    save_result(run_cell(config.cases[0]), new)
    old = tmp_path / "out" / f"{config.cases[0].key}.json"
    code, out, _ = run_cli(capsys, ["compare", str(old), str(new)])
    assert code == 0 and "2 different versions of the plug-in's source" in out
    code, out, err = run_cli(capsys, ["check", str(new), "--against", str(old)])
    assert "2 different versions of the plug-in's source" in out + err


def test_a_result_its_folders_manifest_does_not_list_is_named_not_dropped(tmp_path, capsys):
    """A sweep resumed with a smaller grid keeps the dropped cell's file; compare and check
    read the folder as its manifest's cells and said nothing of it."""
    from _cli import run_cli
    from _synthetic import make_result

    from ckptbench.sweep.run import run_sweep

    def run_cell(case, *, out_path=None, progress=None):
        return make_result(case, seed=case.snaps)

    out = tmp_path / "out"
    run_sweep(parse_config(SWEEP_TEXT.replace("[2, 3]", "[2, 3, 4]"), "t.toml"), out,
              run_cell=run_cell)  # fmt: skip
    smaller = parse_config(SWEEP_TEXT, "t.toml")
    assert run_sweep(smaller, out, resume=True, run_cell=run_cell).exit_code == 0
    (dropped,) = [p for p in out.glob("*.json") if "-s4-" in p.name]
    code, _, err = run_cli(capsys, ["compare", str(out)])
    assert code == 0 and f"compare: {dropped} is not a cell of its folder's sweep manifest" in err
    code, out_text, err = run_cli(capsys, ["check", str(out)])
    assert f"not cells of their folder's sweep manifest, so not gated: {dropped}" in out_text + err


def test_a_steps_time_keeps_three_digits_and_a_spread_its_unit():
    """'190 untaped steps x 0.01 ms' for 3 ms of recomputation; peak spreads of one column in
    '0.01 MiB' beside '4.00 KiB'."""
    from ckptbench.render.format import fmt_per_step, fmt_size

    assert [fmt_per_step(x) for x in (0.005, 0.00087, 1.58e-5)] == ["5.00 ms", "870 µs", "15.8 µs"]
    assert (fmt_size(8192), fmt_size(4096)) == ("8.00 KiB", "4.00 KiB")


def test_precision_and_retry_oom_say_their_range_and_need_in_one_line(capsys):
    """'-5%' said '0% to below 1000%' where '200%' said 'below 100%'; --retry-oom without a
    memory limit was accepted and did nothing, where --expect-oom was refused."""
    for value in ("-5%", "200%", "abc"):
        err = one_line_error(capsys, ["run", "--precision", value, "--steps", "5"])
        assert "a fraction from 0% (off) to below 100% (e.g. 5%)" in err
    err = one_line_error(capsys, ["run", "--retry-oom", "--steps", "5"])
    assert err == "ckptbench: error: --retry-oom needs --memory-limit\n"


def test_the_gate_names_a_failed_mode_once_with_its_rounds():
    """'normal: failed' was repeated once a round, and a missing side read 'no result
    overhead'."""
    from dataclasses import replace

    from _synthetic import CI_CASE, make_result

    from ckptbench.analysis.gate import check
    from ckptbench.results.schema import Mode, Status

    case = CI_CASE.with_(rounds=3)
    good = make_result(case, seed=1, rounds=3)
    modes = tuple(
        replace(m, status=Status.FAILED, iterations=(), warmup=(), error="boom")
        if m.mode is Mode.NORMAL and m.round in (0, 1)
        else m
        for m in make_result(case, seed=2, rounds=3).modes
    )
    bad = replace(good, modes=modes, created="2025-01-02T00:00:00+00:00")
    report = check([bad], [good])
    (status,) = [line for line in report.lines if line.check == "status"]
    assert status.detail == "normal: failed (rounds 1-2) (boom)"
    gone = replace(good, modes=tuple(m for m in good.modes if m.mode is not Mode.NORMAL),
                   created="2025-01-03T00:00:00+00:00")  # fmt: skip
    report = check([gone], [good])
    (memory,) = [line for line in report.lines if line.check == "memory:normal"]
    assert memory.detail == "this result has no normal overhead (not measured ok)"


def test_the_run_table_says_what_its_brackets_are():
    from _synthetic import CI_CASE, make_result

    from ckptbench.render.run import run_table

    table = run_table(make_result(CI_CASE.with_(rounds=3), rounds=3))
    ratios = (  # 2026-11-29: what the two quoted ratios divide, wherever they are shown
        "slowdown: checkpointed time / normal time; savings: normal's overhead / "
        "checkpointed's overhead (each over the baseline); each ratio is taken within a round "
        "and pooled (slowdown: geometric mean, savings: median), so it is not the table's "
        "columns divided"
    )
    assert table.notes == (
        "[low, high]: 95% intervals over 3 rounds (overhead: the iterations' peaks and a "
        "rerun's spread); baseline is the forward pass alone",
        ratios,
    )
    one = (  # one round: its brackets too are said (2026-11-30: they were not)
        "[low, high]: intervals from one round's iterations: the slowdown's 95% for their "
        "noise alone, the savings' the range they allow, a worst case (overhead: the "
        "iterations' peaks and a rerun's spread); baseline is the forward pass alone"
    )
    one_ratios = (  # 2026-11-30: one round's ratios are not pooled over rounds
        "slowdown: checkpointed time / normal time; savings: normal's overhead / "
        "checkpointed's overhead (each over the baseline); from one round, the slowdown is the "
        "median of every checkpointed/normal iteration pair's ratio, which can differ from the "
        "table's times divided, and the savings are the table's overheads divided, before "
        "rounding"
    )
    assert run_table(make_result(CI_CASE)).notes == (one, one_ratios)


def test_a_resumed_sweep_estimates_only_what_it_will_measure(fake):
    """With every cell kept it still said the whole sweep's 'roughly 1 min 12 s'."""
    Path("e.toml").write_text(CONFIG.format(extra="") + "snaps = [2, 3]\n")
    assert invoke(["sweep", "e.toml", "--out", "o", "-q"]).exit_code == 0
    res = invoke(["sweep", "e.toml", "--out", "o", "--resume"])
    assert res.exit_code == 0, res.output
    assert "sweep p: 2 cells (0 to measure), roughly 0 s -> o" in res.output


def test_a_plug_ins_default_result_name_is_its_file_and_factory(fake):
    """It was the last 30 characters of the path: 'run-ocs_examples_torch_gru_py_make-...'."""
    shutil.copy(EXAMPLES / "autograd_rnn.py", "net.py")
    res = invoke(["run", "--model", "net.py:make", *TINY])
    assert res.exit_code == 0, res.output
    (saved,) = Path("results").glob("run-*.json")
    assert saved.name.startswith("run-net_make-")
