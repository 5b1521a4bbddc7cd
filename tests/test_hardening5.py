"""Fifth hardening round (a session's own audits, 2026-11-28, second session): empty
file names and sizes without units (one line, exit 2, before anything is measured), the
gradient checked in every round. Nothing here is timed."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import pytest
from _cli import one_line_error, run_cli
from click.testing import CliRunner

from ckptbench.cli import cli
from ckptbench.results.schema import Mode, Status
from ckptbench.results.store import load_result

TINY = ["--steps", "6", "--snaps", "3", "--hidden", "8", "--rounds", "1", "-q"]


@pytest.mark.parametrize(
    "argv",
    [
        ["run", "--model", "rnn", *TINY, "--out", ""],
        ["run", "--model", "rnn", *TINY, "--mprof", ""],
        ["sweep", ""],
        ["sweep", "configs/ci.toml", "--out", " "],
        ["compare", ""],
        ["check", ""],
        ["plan", "--steps", "6", "--budget", "1MiB", "--costs", ""],
    ],
)
def test_an_empty_file_name_is_refused_not_read_as_the_current_folder(
    capsys, tmp_path, monkeypatch, argv
):
    monkeypatch.chdir(tmp_path)
    err = one_line_error(capsys, argv)
    assert "an empty name is not a file or folder" in err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("option", [["plan", "--steps", "6"], ["run", *TINY, "--strategy",
                                     "optimal"], ["run", *TINY, "--memory-limit"]])  # fmt: skip
def test_a_small_size_without_a_unit_is_refused_before_anything_is_measured(
    capsys, tmp_path, monkeypatch, option
):
    """'--budget 8' read as 8 bytes was refused only after the step costs were measured (35 s
    on cnn-stack); it is a slip for 8MiB. '8B' says bytes and passes the parser."""
    monkeypatch.chdir(tmp_path)
    flag = [] if option[-1] == "--memory-limit" else ["--budget"]
    err = one_line_error(capsys, [*option, *flag, "8"])
    assert "8 would be 8 bytes (a size without a unit is bytes): write 8MiB, or 8B" in err
    assert list(tmp_path.iterdir()) == []


def _fake(monkeypatch):
    fake = [sys.executable, str(Path(__file__).parent / "fake_worker.py")]
    monkeypatch.setattr("ckptbench.measure.launch.default_worker_command", lambda: list(fake))
    for var in ("FAKE_CRASH", "FAKE_FAIL", "FAKE_SLEEP", "FAKE_ALLOC", "FAKE_GRAD_NOISE"):
        monkeypatch.delenv(var, raising=False)


@pytest.mark.parametrize("modes", [[], ["--modes", "normal,checkpointed"]])
def test_every_round_checks_the_gradient_whichever_mode_ran_first(monkeypatch, tmp_path, modes):
    """Rounds rotate the modes' order; in a round where checkpointed ran before normal its
    gradient was never compared, yet the headline said 'gradient equal to plain'."""
    _fake(monkeypatch)
    out = tmp_path / "r.json"
    args = ["run", "--model", "rnn", *TINY[:-3], "--rounds", "3", "--out", str(out), *modes]
    assert CliRunner().invoke(cli, args, catch_exceptions=False).exit_code == 0
    ckpt = load_result(out).mode_rounds(Mode.CHECKPOINTED)
    assert [r.grad_max_rel_err for r in ckpt] == [0.0, 0.0, 0.0]
    monkeypatch.setenv("FAKE_GRAD_NOISE", "1e-6")  # and a wrong one fails in every round
    out.unlink()
    assert CliRunner().invoke(cli, args, catch_exceptions=False).exit_code == 1
    ckpt = load_result(out).mode_rounds(Mode.CHECKPOINTED)
    assert [r.status for r in ckpt] == [Status.FAILED] * 3


def test_a_gradient_checked_in_some_rounds_only_says_so():
    from _synthetic import CI_CASE, make_result

    from ckptbench.render.run import gradient_text

    result = make_result(CI_CASE.with_(rounds=2), rounds=2)
    assert gradient_text(result) == "gradient within 1e-15 of plain"
    rounds = list(result.modes)
    first = next(i for i, m in enumerate(rounds) if m.mode is Mode.CHECKPOINTED)
    rounds[first] = replace(rounds[first], grad_max_rel_err=None)
    text = gradient_text(replace(result, modes=tuple(rounds)))
    assert text.endswith("of plain (checked in 1 of 2 rounds)"), text


def test_a_copy_of_the_reference_among_the_results_cannot_dilute_a_regression(tmp_path, capsys):
    """check NEW OLD --against OLD-copy pooled OLD into the current side: a +300 KiB change
    passed at about half its size."""
    from _synthetic import CI_CASE, make_result

    from ckptbench.results.schema import save_result

    old = make_result(CI_CASE, seed=1)
    new = make_result(CI_CASE, seed=2, memory_scale={"checkpointed": 1.5})
    for name, r in (("old.json", old), ("copy.json", old), ("new.json", new)):
        save_result(r, tmp_path / name)
    argv = ["check", str(tmp_path / "new.json"), "--against", str(tmp_path / "copy.json")]
    code, _, _ = run_cli(capsys, argv)
    assert code == 1  # the regression alone fails
    err = one_line_error(capsys, [*argv[:2], str(tmp_path / "old.json"), *argv[2:]])
    assert f"the reference's own measurement of {CI_CASE.key} beside a new one" in err


def test_the_gate_counts_a_cell_once_when_a_line_pairs_it_across_hosts():
    """--any-host pairs cells whatever their host, so memory lines carry none; the headline
    said '2 cells' of one."""
    from ckptbench.analysis.cellchecks import GateLine
    from ckptbench.analysis.gate import GateReport

    lines = (
        GateLine("k1", "other", "status", True, ""),
        GateLine("k1", "", "memory:normal", False, "grew"),
        GateLine("k2", "", "present", False, "missing"),
    )
    report = GateReport(lines, (), {})
    assert report.cells == (("k1", "other"), ("k2", ""))
    assert report.headline == "ckptbench check: FAILED (2 of 3 checks, 2 of 2 cells)"


def test_tolerances_are_printed_as_given_and_a_bare_5_is_not_500_percent(tmp_path, capsys):
    from _synthetic import CI_CASE, make_result

    from ckptbench.results.schema import save_result

    save_result(make_result(CI_CASE, seed=1), tmp_path / "old.json")
    save_result(make_result(CI_CASE, seed=2), tmp_path / "new.json")
    argv = ["check", str(tmp_path / "new.json"), "--against", str(tmp_path / "old.json")]
    _, out, _ = run_cli(capsys, [*argv, "--time-tolerance", "2.5%",
                                    "--memory-tolerance", "12.5%"])  # fmt: skip
    assert "memory may grow by 12.5% of the reference" in out
    assert "time may not grow beyond +2.5% (the interval of new/old: with one worker" in out
    assert "vs limit 1.025 " in out
    for flag in ("--time-tolerance", "--memory-tolerance"):
        err = one_line_error(capsys, [*argv, flag, "5"])
        assert "5 would be 500%: write 5% (or 0.05), or 500% if you mean it" in err


def test_a_memory_change_just_over_its_limit_does_not_read_equal_to_it():
    """A delta 1 byte over a 256 KiB limit printed 'FAIL ... +256 KiB; limit +256 KiB'."""
    from _synthetic import CI_CASE, make_result

    from ckptbench.analysis.gate import check
    from ckptbench.analysis.stats import MEMORY_FLOOR_BYTES

    old = make_result(CI_CASE, seed=1)
    bump = MEMORY_FLOOR_BYTES + 1
    modes = tuple(
        replace(
            m,
            iterations=tuple(
                replace(it, peak_rss_bytes=it.peak_rss_bytes + bump) for it in m.iterations
            ),
        )
        if m.mode is Mode.CHECKPOINTED
        else m
        for m in old.modes
    )
    new = replace(old, modes=modes, created="2026-11-28T00:00:00+00:00")
    report = check([new], [old], memory_tolerance=0.0)
    line = next(x for x in report.lines if x.check == "memory:checkpointed")
    assert not line.passed and f"+256 KiB ({bump:+,} B)" in line.detail, line.detail
    assert f"limit +256 KiB ({MEMORY_FLOOR_BYTES:+,} B)" in line.detail


def test_an_expectation_without_a_figure_says_why_not_n_a_x():
    from _synthetic import CI_CASE, make_result

    from ckptbench.analysis.gate import check
    from ckptbench.sweep.config import Expect

    result = make_result(CI_CASE, status={"normal": Status.FAILED})
    report = check([result], expect=Expect(memory_savings_min=2.0, slowdown_max=2.0))
    details = {x.check: x.detail for x in report.lines}
    assert details["memory_savings_min"] == (
        "no figure (an overhead not measured ok, or at or below the baseline), need >= 2x"
    )
    assert details["slowdown_max"] == "no figure (a time not measured ok), need <= 2x"
    assert "n/a" not in " ".join(details.values())


@pytest.mark.parametrize(
    "edit, words",
    [
        (lambda m: m["counters"].update(steps_advanced=-3), "counters.steps_advanced must be"),
        (lambda m: m.update(round=-1), "round must be a finite number >= 0"),
        (lambda m: m.update(grad_max_rel_err=float("nan")), "grad_max_rel_err must be"),
        (lambda m: m["iterations"][0].update(peak_rss_bytes=0), "must be above 0"),
    ],
)
def test_a_result_with_an_impossible_count_or_peak_is_refused(tmp_path, capsys, edit, words):
    """Each of these was read as a result: a negative evaluation count printed '97 (416)'
    with status ok, a round of -1 changed the savings."""
    import json

    from _synthetic import CI_CASE, make_result

    from ckptbench.results.schema import save_result

    save_result(make_result(CI_CASE), tmp_path / "r.json")
    doc = json.loads((tmp_path / "r.json").read_text())
    edit(next(m for m in doc["modes"] if m["mode"] == "checkpointed"))
    (tmp_path / "bad.json").write_text(json.dumps(doc))
    assert words in one_line_error(capsys, ["compare", str(tmp_path / "bad.json")])


def test_a_time_change_shows_the_times_its_ratio_divides():
    """'0.0547 -> 0.0586, change +15.1%': the times were the pooled medians while the
    ratio divided the processes' geometric mean medians."""
    from ckptbench.analysis.stats import time_change

    before = [[1.0, 1.0, 1.0], [1.0, 1.0, 1.0], [1.4, 1.4, 1.4]]
    after = [[1.1, 1.1, 1.1], [1.1, 1.1, 1.1], [1.2, 1.2, 1.2]]
    tc = time_change(before, after)
    assert tc.after_median_s / tc.before_median_s == pytest.approx(tc.ratio, rel=1e-12)
    assert tc.before_median_s == pytest.approx(1.4 ** (1 / 3))


def test_the_stored_per_round_slowdowns_are_the_ratios_the_slowdown_averages():
    """slowdown_per_round held ratios of medians (1.052) where the slowdown averaged the
    rounds' Hodges-Lehmann ratios (0.975): its geometric mean was not the printed figure."""
    import math

    from _synthetic import CI_CASE, make_result

    result = make_result(CI_CASE.with_(rounds=4), rounds=4, seed=5)
    s = result.summary
    per_round = s.as_dict()["slowdown_per_round"]
    assert len(per_round) == 4 and not s.slowdown.set_aside
    mean = math.exp(sum(math.log(v) for v in per_round) / len(per_round))
    assert mean == pytest.approx(s.slowdown.value, rel=1e-12)


def test_a_cell_pooled_from_two_runs_says_why_its_interval_is_wide():
    from _synthetic import CI_CASE, make_result

    from ckptbench.render.cells import invocations_table

    two = [make_result(CI_CASE, seed=1), make_result(CI_CASE, seed=2)]
    notes = " ".join(invocations_table(two).notes)
    assert "pooled from two runs" in notes and "a third run narrows it" in notes
    three = [*two, make_result(CI_CASE, seed=3)]
    assert "pooled from two runs" not in " ".join(invocations_table(three).notes)


def test_run_csv_holds_raw_numbers_one_row_per_mode(monkeypatch, tmp_path):
    """run --format csv printed the table's display text ('39.6 MiB', '+1.8 MiB [+0.4,
    +3.3]'); it now writes read_results' tidy columns, as compare's CSV holds raw values."""
    import csv
    import io

    _fake(monkeypatch)
    monkeypatch.chdir(tmp_path)
    args = ["run", "--model", "rnn", *TINY, "--format", "csv", "--out", "r.json"]
    res = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert res.exit_code == 0, res.output
    rows = list(csv.DictReader(io.StringIO(res.stdout)))
    result = load_result(tmp_path / "r.json")
    assert [r["mode"] for r in rows] == ["baseline", "normal", "checkpointed"]
    for row in rows:
        figures = result.summary.mode(Mode(row["mode"]))
        assert int(row["peak_rss_bytes"]) == figures.peak_rss_bytes
        assert float(row["time_median_s"]) == figures.time.median
    assert "MiB" not in res.stdout


def test_the_rounds_line_gives_each_peak_spread_at_its_precision():
    """'normal 4.00 KiB, checkpointed 0.01 MiB': a 12 KiB spread read as 0.01 MiB."""
    from _synthetic import CI_CASE, make_result

    from ckptbench.render.run import explain_lines
    from ckptbench.results.units import size_text

    three = make_result(CI_CASE.with_(rounds=3), rounds=3)
    (line,) = [x for x in explain_lines(three) if x.startswith("across ")]
    for m in three.summary.modes:
        if m.time_cv is not None:
            assert f"{m.mode.value} {size_text(m.peak_spread_bytes)}" in line


@pytest.mark.parametrize(
    "name, text, argv",
    [
        ("deep.json", "[" * 100_000 + "]" * 100_000,
         ["plan", "--steps", "6", "--budget", "1MiB", "--costs", "deep.json"]),
        ("deep.toml", "a = " + "[" * 100_000 + "]" * 100_000, ["sweep", "deep.toml"]),
    ],
)  # fmt: skip
def test_a_deeply_nested_costs_file_or_config_is_one_line_not_a_recursion_error(
    capsys, tmp_path, monkeypatch, name, text, argv
):
    monkeypatch.chdir(tmp_path)
    Path(name).write_text(text)
    err = one_line_error(capsys, argv)
    assert "nested too deep" in err or "nested 100000 levels deep" in err, err


def test_the_costs_api_refuses_a_deep_document_in_one_line():
    from ckptbench.schedules.optimal import PlanError, costs_from_json

    with pytest.raises(PlanError, match="nested too deep"):
        costs_from_json("[" * 100_000 + "]" * 100_000)


def test_a_stack_too_large_to_plan_is_refused_before_and_after_measuring(
    capsys, tmp_path, monkeypatch
):
    """A stack's costs are per layer: the homogeneous estimate let 1500 layers be measured,
    then planned for minutes towards 13 GiB of tables; costs measured per step (a plug-in
    chain) are checked again once measured."""
    monkeypatch.chdir(tmp_path)

    def measured(case, quiet):
        n = case.steps
        return {"costs": {"forward_time_s": [1e-4] * n, "taped_time_s": [3e-4] * n,
                          "state_bytes": [512] * n, "tape_bytes": [1024] * n}}  # fmt: skip

    monkeypatch.setattr("ckptbench.cli.plan._measure", measured)
    err = one_line_error(capsys, ["plan", "--model", "mlp-stack", "--steps", "3000",
                                  "--budget", "20KiB"])  # fmt: skip
    assert "per-step (heterogeneous) costs" in err
    argv = ["plan", "--model", "rnn", "--steps", "800", "--budget", "20KiB",
            "--save-costs", "c.json"]  # fmt: skip
    err = one_line_error(capsys, argv)
    assert "planning 800 steps with per-step (heterogeneous) costs" in err
    assert Path("c.json").exists()  # the measured costs are kept


def test_trace_on_jax_is_refused_before_anything_is_measured():
    """It ran every mode, then said 'no trace': JAX runs no schedule action by action on the
    host clock (the engine-driven executor dispatches asynchronously)."""
    from ckptbench.results.schema import Case, CaseError

    for model, extra in (("rnn", {}), ("mlp-stack", {"strategy": "optimal",
                                                     "budget_bytes": 8192})):  # fmt: skip
        with pytest.raises(CaseError, match="--trace is not available on --backend jax"):
            Case(model=model, steps=6, backend="jax", trace=True, **extra)
    assert Case(model="rnn", steps=6, backend="torch", trace=True).trace


def test_compare_shows_a_peers_counted_step_calls_as_run_does():
    """run showed torch checkpoint_sequential's 11 layer calls; compare showed '- (-)'."""
    from _synthetic import CI_CASE, make_result

    from ckptbench.frame import cells_frame

    result = make_result(CI_CASE)
    modes = tuple(
        replace(m, counters={"step_calls": 11}) if m.mode is Mode.CHECKPOINTED else m
        for m in result.modes
    )
    peer = CI_CASE.with_(backend="torch", strategy="torch-checkpoint", snaps=4)
    frame = cells_frame([replace(result, case=peer, modes=modes)])
    assert int(frame["evaluations"].iloc[0]) == 11


@pytest.mark.jax
def test_a_jax_chain_reports_its_plain_modes_layer_calls_and_no_made_up_zero_for_a_peer():
    pytest.importorskip("jax")
    from ckptbench.backends.registry import build
    from ckptbench.results.schema import Case

    def calls(mode, strategy="revolve"):
        ours = strategy == "revolve"
        case = Case(model="mlp-stack", steps=4, hidden=8, batch=2, input=4, backend="jax",
                    strategy=strategy, executor="engine" if ours else None)  # fmt: skip
        built = build(case, mode)
        built.calls[0] = 0  # as the worker does before every iteration
        built.gradient(built.params)
        return built.calls[0]

    assert calls(Mode.BASELINE) == calls(Mode.NORMAL) == 4
    assert calls(Mode.CHECKPOINTED, "jax-every-layer") is None
    assert calls(Mode.CHECKPOINTED) >= 4


@pytest.mark.parametrize(
    "model, sizes",
    [("cnn-stack", {"input": 100_000}), ("mlp-stack", {"hidden": 10**8}),
     ("transformer-stack", {"hidden": 100_000}), ("lstm", {"hidden": 100_000}),
     ("rnn", {"hidden": 10**6})],
)  # fmt: skip
def test_a_built_in_too_large_for_memory_is_refused_before_any_worker(model, sizes):
    """A cnn-stack of --input 100000 started three workers that each failed with a
    MemoryError of 3.49 TiB; sizes are checked against the machine first."""
    from ckptbench.results.schema import Case, CaseError
    from ckptbench.workloads import Sizes, registry

    case = Case(model=model, steps=4, **sizes)
    with pytest.raises(CaseError, match="parameters, inputs and one state alone need about"):
        case.check_fits_memory(total_bytes=64 * 2**30)
    small = Case(model=model, steps=4)
    small.check_fits_memory(total_bytes=64 * 2**30)
    least = registry.builtin(model).least_elements(Sizes(**small.sizes()), 4)
    assert 0 < least * 8 < 64 * 2**20  # the default sizes: a few MiB, counted not guessed


def test_the_least_elements_of_a_stack_are_its_drawn_weights_and_states_at_most():
    import math

    import numpy as np

    from ckptbench.workloads import Sizes, registry
    from ckptbench.workloads.stacks import STACKS

    for name, cls in STACKS.items():
        sizes = Sizes(hidden=16, batch=2, input=8, output=4)
        stack = cls(hidden=16, batch=2, input=8, output=4)
        params, x0 = stack.init(4, np.random.default_rng(0))
        drawn = sum(a.size for p in params for a in p.values()) + x0.size
        states = sum(math.prod(s.out_shape) for s in stack.specs(4))
        least = registry.builtin(name).least_elements(sizes, 4)
        assert least <= drawn + states, name  # a lower bound of what a run holds


def test_a_costs_file_of_another_model_is_named_before_it_is_planned_with(
    capsys, tmp_path, monkeypatch
):
    """A cnn-stack's costs on an mlp-stack were accepted without a word, and the run then
    reported snapshot bytes the run never held."""
    import json

    from _cli import run_cli as run

    from ckptbench.workloads import Sizes, registry

    monkeypatch.chdir(tmp_path)
    sizes = {"hidden": 32, "batch": 4, "input": 8, "output": 1}
    states = registry.builtin("mlp-stack").state_elements(Sizes(**sizes), 6)
    costs = {"forward_time_s": 1e-5, "taped_time_s": 1e-4, "tape_bytes": 4096}
    argv = ["plan", "--model", "mlp-stack", "--steps", "6", "--budget", "64KiB",
            *(x for k, v in sizes.items() for x in (f"--{k}", str(v)))]  # fmt: skip
    Path("mine.json").write_text(json.dumps({**costs, "state_bytes": [8 * e for e in states]}))
    code, _, err = run(capsys, [*argv, "--costs", "mine.json"])
    assert code == 0 and "note" not in err
    Path("other.json").write_text(json.dumps({**costs, "state_bytes": 3072}))
    code, _, err = run(capsys, [*argv, "--costs", "other.json"])
    assert code == 0
    assert f"step 0's state is 3072 B there, but {8 * states[0]} B in --model mlp-stack" in err


def test_a_budget_lost_to_the_planners_rounding_is_not_called_one_no_schedule_fits():
    """'no schedule fits ... smallest 7028 B' while Revolve with one slot peaked at 7011 B:
    the planner's memory quanta had rounded the least peak over the budget."""
    import numpy as np

    from ckptbench.schedules.compare import compare_at_budget
    from ckptbench.schedules.optimal import Costs, PlanError, check_budget, min_budget_bytes
    from ckptbench.schedules.optimal.dp import least_storage

    costs = Costs(forward_time_s=1e-5, taped_time_s=1e-4,
                  state_bytes=[256, 768, 1024, 1280, 512, 768, 1024, 1280],
                  tape_bytes=[5475, 6243, 6755, 6051, 5539, 6051, 6563, 4786])  # fmt: skip
    _, _, sb, tb = costs.per_step(8)
    exact = least_storage(np.asarray(sb), np.asarray(tb))
    rounded = min_budget_bytes(costs, 8)
    assert exact < rounded  # this case: the rounding costs bytes
    revolve = next(r for r in compare_at_budget(costs, 8, exact) if r["strategy"] == "revolve")
    assert revolve["snaps"] is not None and revolve["peak_bytes"] <= exact  # it does fit
    # where Revolve fits in exact bytes it is the plan (it was refused: "give that budget, or
    # run Revolve"); below it nothing fits, and the budget named is the least one that plans
    check_budget(costs, 8, exact)
    with pytest.raises(PlanError, match=rf"smallest budget that works is .*\({exact} B\)$"):
        check_budget(costs, 8, exact - 1)
    check_budget(costs, 8, rounded)


def test_predicted_seconds_keep_three_significant_digits_in_one_notation():
    """plan printed '1 s' and '1.3 s' beside '0.903 s'."""
    from ckptbench.render.format import fmt_seconds

    assert [fmt_seconds(x) for x in (0.903, 1.0, 1.3, 12.345, 0.0496, 0.000012)] == [
        "0.903 s", "1.00 s", "1.30 s", "12.3 s", "0.0496 s", "0.0000120 s"
    ]  # fmt: skip


def test_the_gates_lines_for_two_files_of_one_cell_say_which_run_they_are():
    """check a1.json a2.json --config: 'FAIL 5.06x' and 'ok 5.74x' under one key."""
    from _synthetic import CI_CASE, make_result

    from ckptbench.analysis.gate import check
    from ckptbench.sweep.config import Expect

    one, two = make_result(CI_CASE, seed=1), make_result(CI_CASE, seed=2)
    two = replace(two, created="2026-11-28T17:00:00+00:00")
    report = check([one, two], expect=Expect(slowdown_max=10.0))
    details = [x.detail for x in report.lines if x.check == "slowdown_max"]
    assert len(details) == 2
    for detail, r in zip(details, (one, two), strict=True):
        assert detail.endswith(f"[the run of {r.created}]")
    alone = check([one], expect=Expect(slowdown_max=10.0))
    assert "[the run of" not in " ".join(x.detail for x in alone.lines)


def test_the_estimate_charges_each_backends_own_worker_start():
    """A 4.4 s run of nine autograd workers was announced as 'about 27 s' (3 s a worker)."""
    from ckptbench.backends.registry import spec
    from ckptbench.results.schema import Case
    from ckptbench.sweep.progress import cell_cost, estimated_seconds

    tiny = Case(model="rnn", steps=100, snaps=5, hidden=8, rounds=3)
    starts = 3 * tiny.rounds * spec("autograd").worker_start_s
    assert estimated_seconds(tiny) == pytest.approx(starts + cell_cost(tiny) * 0.001 * 0.05)
    assert estimated_seconds(tiny) < 10
    torch = replace(tiny, backend="torch")
    assert estimated_seconds(torch) - estimated_seconds(tiny) == pytest.approx(
        3 * tiny.rounds * (spec("torch").worker_start_s - spec("autograd").worker_start_s)
    )


def test_a_costs_file_of_another_model_is_a_warning_that_quiet_keeps(capsys, tmp_path, monkeypatch):
    """`-q` keeps results, warnings and failures: it hid the one line saying a --costs file
    is another model's, and the stored bytes then printed follow that file."""
    import json

    from _cli import run_cli as run

    from ckptbench.cli import run as run_command

    monkeypatch.chdir(tmp_path)
    costs = {"forward_time_s": 1e-5, "taped_time_s": 1e-4, "tape_bytes": 4096}
    Path("other.json").write_text(json.dumps({**costs, "state_bytes": 512}))
    said = "warning: --costs other.json: step 0's state is 512 B there, but"
    argv = ["--model", "cnn-stack", "--steps", "6", "--budget", "64KiB", "--costs", "other.json"]
    for quiet in ([], ["-q"]):
        code, _, err = run(capsys, ["plan", *argv, *quiet])
        assert code == 0 and err.count(said) == 1, err

    def measured(*args, **kwargs):  # what run prints before it measures is what is tested
        raise SystemExit(0)

    monkeypatch.setattr(run_command, "measure", measured)
    for quiet in ([], ["-q"]):
        code, _, err = run(capsys, ["run", *argv, "--strategy", "optimal", *quiet])
        assert code == 0 and err.count(said.replace(":", "", 1)) == 1, err
