"""`ckptbench plan` and `run --strategy optimal`: costs files, measured costs, prediction."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from ckptbench.cli import cli
from ckptbench.results.schema import Mode
from ckptbench.results.store import load_result

TESTS = Path(__file__).parent
COSTS = {
    "forward_time_s": 0.0004,
    "taped_time_s": 0.0026,
    "state_bytes": 65536,
    "tape_bytes": 450000,
}


def invoke(args):
    return CliRunner().invoke(cli, args, catch_exceptions=False)


def test_plan_from_a_costs_file_beats_revolve_and_segments(tmp_path):
    costs = tmp_path / "costs.json"
    costs.write_text(json.dumps(COSTS))
    res = invoke(["plan", "--steps", "300", "--budget", "4MiB", "--costs", str(costs), "--json"])
    assert res.exit_code == 0, res.output
    rows = {r["strategy"]: r for r in json.loads(res.output)["rows"]}
    assert set(rows) == {"optimal", "revolve", "uniform"}
    assert rows["optimal"]["predicted_time_s"] <= rows["revolve"]["predicted_time_s"]
    assert rows["revolve"]["predicted_time_s"] <= rows["uniform"]["predicted_time_s"]
    for r in rows.values():
        assert r["peak_bytes"] <= 4 * 2**20
    res = invoke(["plan", "--steps", "300", "--budget", "4MiB", "--costs", str(costs)])
    assert res.exit_code == 0 and "optimal" in res.output and "revolve" in res.output


def test_plan_csv_holds_the_json_rows_raw_numbers_not_display_text(tmp_path):
    costs = tmp_path / "costs.json"
    costs.write_text(json.dumps(COSTS))
    argv = ["plan", "--steps", "300", "--budget", "4MiB", "--costs", str(costs)]
    rows = json.loads(invoke([*argv, "--json"]).output)["rows"]
    res = invoke([*argv, "--format", "csv"])
    assert res.exit_code == 0, res.output
    lines = res.output.strip().splitlines()
    header = lines[0].split(",")
    assert {"predicted_time_s", "peak_bytes", "tapes_kept", "peak_tapes"} <= set(header)
    for line, row in zip(lines[1:], rows, strict=True):
        got = dict(zip(header, line.split(","), strict=True))
        assert got["strategy"] == row["strategy"]
        assert float(got["predicted_time_s"]) == row["predicted_time_s"]
        assert int(got["peak_bytes"]) == row["peak_bytes"]
        assert int(got["tapes_kept"]) == row["tapes_kept"]


def test_plan_prints_small_sizes_at_their_precision(tmp_path):
    """A 128-byte state is not '0 KiB', and a 300 KiB budget not '0.3 MiB' beside peaks
    that cannot then be told from it."""
    costs = tmp_path / "costs.json"
    costs.write_text(json.dumps({**COSTS, "state_bytes": 128, "tape_bytes": 2176}))
    res = invoke(["plan", "--steps", "300", "--budget", "20KiB", "--costs", str(costs)])
    assert res.exit_code == 0, res.output
    assert "within 20.0 KiB" in res.output and "state 128 B, tape 2.12 KiB" in res.output
    res = invoke(["plan", "--steps", "300", "--budget", "300KiB", "--costs", str(costs)])
    assert "within 300 KiB" in res.output and " MiB" not in res.output


def test_plan_tells_small_predicted_times_apart(tmp_path):
    """Microsecond steps: the rows' predictions are not all '0.000 s'."""
    costs = tmp_path / "costs.json"
    costs.write_text(json.dumps({**COSTS, "forward_time_s": 2e-7, "taped_time_s": 1.5e-6}))
    res = invoke(["plan", "--steps", "300", "--budget", "4MiB", "--costs", str(costs), "--json"])
    rows = {r["strategy"]: r["predicted_time_s"] for r in json.loads(res.output)["rows"]}
    text = invoke(["plan", "--steps", "300", "--budget", "4MiB", "--costs", str(costs)]).output
    assert "0.000 s" not in text
    for seconds in rows.values():
        assert f"{seconds:.3g} s" in text


@pytest.mark.parametrize(
    "content, words",
    [
        ("{not json", "costs.json"),
        (json.dumps({**COSTS, "tape_bytes": -1}), "costs.json"),
        (json.dumps({**COSTS, "forward_time_s": [0.1, 0.2]}), "2 steps"),
    ],
)
def test_bad_costs_file_is_one_line(tmp_path, content, words):
    costs = tmp_path / "costs.json"
    costs.write_text(content)
    res = invoke(["plan", "--steps", "300", "--budget", "4MiB", "--costs", str(costs)])
    assert res.exit_code == 2 and words in res.output
    assert len(res.output.strip().splitlines()) == 1


def test_optimal_needs_a_budget_and_budget_needs_optimal(tmp_path):
    res = invoke(["run", "--strategy", "optimal", "--out", str(tmp_path / "a.json")])
    assert res.exit_code == 2 and "budget" in res.output
    res = invoke(["run", "--budget", "8MiB", "--out", str(tmp_path / "b.json")])
    assert res.exit_code == 2 and "optimal" in res.output


@pytest.mark.slow
def test_run_optimal_measures_costs_and_stores_the_prediction(tmp_path):
    out = tmp_path / "r.json"
    res = invoke(["run", "--model", "rnn", "--hidden", "64", "--steps", "60",
                  "--strategy", "optimal", "--budget", "96KiB", "--repeats", "1",
                  "--rounds", "1", "--out", str(out)])  # fmt: skip
    assert res.exit_code == 0, res.output
    result = load_result(out)
    ckpt = result.mode(Mode.CHECKPOINTED)
    assert ckpt.grad_max_rel_err == 0.0
    plan = ckpt.plan
    assert plan["budget_bytes"] == 96 * 1024
    assert set(plan["costs"]) >= {"forward_time_s", "taped_time_s", "state_bytes", "tape_bytes"}
    assert plan["predicted_time_s"] > 0 and plan["peak_bytes"] <= 96 * 1024
    assert ckpt.counters["peak_stored_bytes"] == plan["peak_bytes"]
    assert ckpt.counters["step_calls"] == plan["advances"] + 60


def test_run_worker_gets_the_costs_file(tmp_path, monkeypatch):
    fake = [sys.executable, str(TESTS / "fake_worker.py")]
    monkeypatch.setattr("ckptbench.measure.launch.default_worker_command", lambda: list(fake))
    costs = tmp_path / "costs.json"
    costs.write_text(json.dumps(COSTS))
    out = tmp_path / "r.json"
    res = invoke(["run", "--model", "rnn", "--steps", "30", "--strategy", "optimal",
                  "--budget", "1MiB", "--costs", str(costs), "--rounds", "1",
                  "--out", str(out)])  # fmt: skip
    assert res.exit_code == 0, res.output  # no cost-measuring worker was needed
    assert load_result(out).case.budget_bytes == 2**20


def _fake_measurement(monkeypatch) -> list:
    """The cases ``plan`` would measure, answered with COSTS and how they were measured."""
    from ckptbench.measure import tasks

    seen = []

    def measured(case):
        seen.append(case)
        return {"costs": COSTS, "executor": case.executor_used, "taped_method": "whole-gradient"}

    monkeypatch.setattr(tasks, "measure_costs", measured)
    return seen


PLAN = ["plan", "--steps", "300", "--budget", "4MiB", "--json", "-q"]


@pytest.mark.torch
def test_plan_measures_in_the_dtype_and_through_the_executor_asked_for(monkeypatch):
    """--dtype and --executor reach the worker that measures the costs (a GPU plan in
    float32 through torch's one-call executor is priced as it will run)."""
    pytest.importorskip("torch")
    seen = _fake_measurement(monkeypatch)
    torch_f32 = ["--backend", "torch", "--dtype", "float32", "--executor", "one-call"]
    res = invoke([*PLAN, *torch_f32])
    assert res.exit_code == 0, res.output
    assert (seen[-1].dtype, seen[-1].executor_used) == ("float32", "one-call")
    how = json.loads(res.output)["measured"]  # the document says how the costs were measured
    assert how == {"dtype": "float32", "executor": "one-call", "taped_method": "whole-gradient"}
    res = invoke([a for a in PLAN if a != "--json"] + torch_f32)
    assert "step costs (float32, through the one-call executor): untaped" in res.output
    assert len(seen) == 2


@pytest.mark.jax
def test_plan_gives_a_chain_the_executor_that_holds_one(monkeypatch):
    pytest.importorskip("jax")
    seen = _fake_measurement(monkeypatch)
    res = invoke([*PLAN, "--backend", "jax", "--model", "mlp-stack", "--steps", "6"])
    assert res.exit_code == 0, res.output  # JAX's CPU default, compiled, holds no chain
    assert [c.executor_used for c in seen] == ["engine"]


def test_plan_refuses_a_dtype_its_backend_does_not_compute_in(monkeypatch):
    seen = _fake_measurement(monkeypatch)
    res = CliRunner().invoke(cli, [*PLAN, "--backend", "autograd", "--dtype", "float32"])
    assert res.exit_code == 2 and "--dtype float32 needs --backend" in res.output
    assert len(res.output.strip().splitlines()) == 1 and seen == []


def test_save_costs_never_replaces_a_file_unless_forced(tmp_path):
    costs = tmp_path / "costs.json"
    costs.write_text(json.dumps(COSTS))
    saved = tmp_path / "saved.json"
    earlier = {**COSTS, "forward_time_s": 9.0}  # a costs file saved before
    saved.write_text(json.dumps(earlier))
    base = ["plan", "--steps", "300", "--budget", "4MiB", "--costs", str(costs), "-q"]
    res = CliRunner().invoke(cli, [*base, "--save-costs", str(saved)])
    assert res.exit_code == 2 and "--save-costs" in res.output and "--force" in res.output
    assert len(res.output.strip().splitlines()) == 1 and json.loads(saved.read_text()) == earlier
    res = CliRunner().invoke(cli, [*base, "--save-costs", str(saved), "--force"])
    assert res.exit_code == 0, res.output
    assert json.loads(saved.read_text()) == {**COSTS, "fixed_time_s": 0.0}
    saved.write_text("mine\n")  # not a costs file: kept, --force or not
    res = CliRunner().invoke(cli, [*base, "--save-costs", str(saved), "--force"])
    assert res.exit_code == 2 and "is not a costs file" in res.output
    assert len(res.output.strip().splitlines()) == 1 and saved.read_text() == "mine\n"
    link = tmp_path / "link.json"
    link.symlink_to(costs)
    for target in (link, costs):  # never through a link; never over the command's input
        res = CliRunner().invoke(cli, [*base, "--save-costs", str(target), "--force"])
        assert res.exit_code == 2 and len(res.output.strip().splitlines()) == 1
    assert json.loads(costs.read_text()) == COSTS


#: 20 000 steps: a table of 1.0e+11 updates, refused; every tape (9 GB of COSTS') fits 1 TiB.
LONG = ["--steps", "20000", "--budget", "1TiB"]


def test_plan_keeps_every_tape_of_a_long_chain_where_the_budget_holds_them(tmp_path):
    """'plan --steps 100000 --costs c.json --budget 1TiB' was refused ('about 2.6e+12 table
    updates ... use fewer steps'); the budget holds every tape, so the plan keeps them all
    (one forward, no recomputation) and needs no table."""
    costs = tmp_path / "costs.json"
    costs.write_text(json.dumps(COSTS))
    res = invoke(["plan", *LONG, "--costs", str(costs), "--json", "-q"])
    assert res.exit_code == 0, res.output
    optimal = next(r for r in json.loads(res.output)["rows"] if r["strategy"] == "optimal")
    assert optimal["advances"] == 0 and optimal["tapes_kept"] == 19999
    assert optimal["peak_bytes"] == 20000 * COSTS["tape_bytes"]
    res = invoke(["plan", "--steps", "20000", "--budget", "8GiB", "--costs", str(costs)])
    assert res.exit_code == 2  # short of every tape: the table, too large, refused as before
    assert "table updates" in res.output and "a budget of 8.38 GiB (9000000000 B)" in res.output


def test_plan_says_a_budget_below_the_least_before_the_tables_size(tmp_path):
    costs = tmp_path / "costs.json"
    costs.write_text(json.dumps(COSTS))
    res = invoke(["plan", "--steps", "20000", "--budget", "100B", "--costs", str(costs), "-q"])
    assert res.exit_code == 2
    assert res.output.splitlines()[-1].endswith(
        "rror: no schedule of 20000 steps fits in a budget of 100 B; the smallest budget that "
        "works is 503 KiB (515536 B)"
    ), res.output


def test_run_optimal_keeps_every_tape_of_a_long_chain_where_the_budget_holds_them(
    tmp_path, monkeypatch
):
    fake = [sys.executable, str(TESTS / "fake_worker.py")]
    monkeypatch.setattr("ckptbench.measure.launch.default_worker_command", lambda: list(fake))
    costs = tmp_path / "costs.json"
    costs.write_text(json.dumps(COSTS))
    out = tmp_path / "r.json"
    res = invoke(["run", "--model", "rnn", *LONG, "--strategy", "optimal", "--hidden", "8",
                  "--batch", "1", "--input", "1", "--costs", str(costs), "--rounds", "1",
                  "--modes", "checkpointed", "--out", str(out), "-q"])  # fmt: skip
    assert res.exit_code == 0, res.output
    assert load_result(out).case.budget_bytes == 2**40
