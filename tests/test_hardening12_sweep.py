"""Fixes of 2026-11-29 (evening): a sweep's config errors, interruptions and unpaired cells."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from _synthetic import CI_CASE, TINY_SWEEP_TEXT, make_result
from click.testing import CliRunner

from ckptbench.cli import cli
from ckptbench.results.schema import save_result


def _compare(*args: str) -> str:
    result = CliRunner().invoke(cli, ["compare", *args])
    assert result.exit_code == 0, result.output
    return result.stdout


def test_compare_csv_and_json_carry_a_row_for_each_cell_measured_on_one_side_only(
    tmp_path: Path,
):
    # after: cells A and C; before: A and B. The text table lists B as "only before" and C
    # as "only after"; csv and json gave the paired rows alone
    a, b, c = (CI_CASE.with_(snaps=s) for s in (8, 12, 16))
    for name, case, seed in (("a1", a, 1), ("c1", c, 2), ("a0", a, 3), ("b0", b, 4)):
        save_result(make_result(case, seed=seed), tmp_path / f"{name}.json")
    after = [str(tmp_path / "a1.json"), str(tmp_path / "c1.json")]
    against = ["--against", str(tmp_path / "a0.json"), "--against", str(tmp_path / "b0.json")]
    rows = list(csv.DictReader(io.StringIO(_compare(*after, *against, "--format", "csv"))))
    unpaired = {r["key"]: r for r in rows if r["verdict"].startswith("only")}
    assert unpaired[b.key]["verdict"] == "only before" and unpaired[b.key]["mode"] == ""
    assert unpaired[c.key]["verdict"] == "only after" and unpaired[c.key]["host"] == "host-a"
    assert unpaired[c.key]["time_ratio"] == "" and len(rows) == 3 + 2
    records = json.loads(_compare(*after, *against, "--format", "json"))
    assert isinstance(records, list) and {tuple(r) for r in records} == {tuple(records[0])}
    only = {r["key"]: r for r in records if r["mode"] is None}
    assert only[b.key]["verdict"] == "only before" and only[c.key]["verdict"] == "only after"
    assert only[b.key]["memory_delta_bytes"] is None and only[b.key]["time_ratio"] is None


def _manifest_cells(out: Path) -> list[dict]:
    return json.loads((out / "sweep.json").read_text())["cells"]


def test_a_cell_stopped_mid_mode_is_pending_in_the_manifest_not_measured(tmp_path: Path):
    # the third cell is cut by Ctrl-C in its checkpointed mode after saving baseline and
    # normal (normal out of memory): the manifest said "measured", duration 0.0, and the
    # error of normal, while the file recorded the interruption
    import signal

    import pytest

    from ckptbench.measure.launch import Interrupted
    from ckptbench.results.schema import Mode, Status
    from ckptbench.sweep.config import parse_config
    from ckptbench.sweep.run import run_sweep

    config = parse_config(TINY_SWEEP_TEXT, source="tiny.toml")
    last = config.cases[2].key

    def run_cell(case, *, out_path=None, progress=None):
        if case.key != last:
            return make_result(case, seed=1)
        status = {"normal": Status.OUT_OF_MEMORY, "checkpointed": Status.INTERRUPTED}
        partial = make_result(case, seed=2, status=status)
        save_result(partial, out_path)
        err = Interrupted(signal.SIGINT)
        err.result = partial
        raise err

    with pytest.raises(Interrupted):
        run_sweep(config, tmp_path, run_cell=run_cell)
    cell = _manifest_cells(tmp_path)[2]
    assert cell["state"] == "pending" and cell["error"].startswith("interrupted in round 1")
    assert "SIGINT" in cell["error"] and "--resume" in cell["error"]
    assert Mode.NORMAL.value not in cell["error"] and cell["duration_s"] is not None
    calls = []

    def again(case, *, out_path=None, progress=None):
        calls.append(case.key)
        return make_result(case, seed=3)

    outcome = run_sweep(config, tmp_path, resume=True, run_cell=again)
    assert calls == [last] and outcome.exit_code == 0


def test_check_says_a_result_measured_without_a_mode_was_not_interrupted(tmp_path: Path):
    # `run --modes normal,checkpointed` records no baseline on purpose: check called it
    # "incomplete: no baseline (interrupted sweep?)"; a stopped run keeps a stop's hint
    from ckptbench.results.schema import Mode, Status

    two = make_result(CI_CASE, seed=5, modes=(Mode.NORMAL, Mode.CHECKPOINTED))
    assert two.interruption is None
    save_result(two, tmp_path / "two.json")
    result = CliRunner().invoke(cli, ["check", str(tmp_path / "two.json")])
    assert result.exit_code == 1
    assert "no baseline: measured without it (`run --modes`)" in result.output
    assert "interrupted" not in result.output
    cut = make_result(
        CI_CASE, seed=6, modes=(Mode.BASELINE, Mode.NORMAL), status={"normal": Status.INTERRUPTED}
    )
    save_result(cut, tmp_path / "cut.json")
    result = CliRunner().invoke(cli, ["check", str(tmp_path / "cut.json")])
    assert "no checkpointed: interrupted in round 1" in result.output
    assert "`sweep --resume` measures a sweep's cell again" in result.output


def test_config_errors_name_the_config_key_and_its_line(tmp_path: Path):
    # a model typo in a grid said '--model lstmm: unknown workload' with no file:line; an
    # optimal cell without a budget asked for '--budget', a flag no config has
    import pytest

    from ckptbench.sweep.config import ConfigError, parse_config

    head = 'name = "x"\n[case]\nsteps = 20\nhidden = 8\n[grid]\n'
    with pytest.raises(ConfigError) as err:
        parse_config(head + 'model = ["lstmm"]\n', source="x.toml")
    assert str(err.value).startswith("x.toml:6: grid.model: unknown workload 'lstmm'")
    with pytest.raises(ConfigError) as err:
        parse_config(head + 'strategy = ["optimal"]\n', source="x.toml")
    assert "needs a byte budget (budget_bytes)" in str(err.value)
    assert "--budget" not in str(err.value) and str(err.value).startswith("x.toml:5: grid: ")
    huge = tmp_path / "huge.toml"
    huge.write_text('name = "x"\n[case]\nmodel = "rnn"\nsteps = 2000000000\nbatch = 4096\n'
                    "[grid]\nsnaps = [2]\n")  # fmt: skip
    result = CliRunner().invoke(cli, ["sweep", str(huge), "--dry-run"])
    assert result.exit_code == 2 and f"{huge}:4: steps 2000000000 x batch 4096" in result.output
    assert "--steps" not in result.output


def test_a_cell_no_plan_fits_is_a_config_error_that_resume_does_not_retry(tmp_path: Path):
    # an optimal cell under a budget below the least: "error ...: PlanError: ...", then
    # "continue with: ... --resume", which failed the same way; compare and check said
    # only "(state error)"
    from ckptbench.results.store import missing_cells
    from ckptbench.schedules.optimal import PlanError
    from ckptbench.sweep.config import parse_config
    from ckptbench.sweep.run import run_sweep

    text = (
        'name = "b"\n[case]\nmodel = "rnn"\nsteps = 20\nhidden = 8\n[[grid]]\n'
        'strategy = ["optimal"]\nbudget_bytes = ["1KiB"]\n[[grid]]\nsnaps = [4]\n'
    )
    config = parse_config(text, source="b.toml")
    small = config.cases[0]
    calls = []

    def run_cell(case, *, out_path=None, progress=None):
        calls.append(case.key)
        if case.strategy == "optimal":
            raise PlanError("no schedule of 20 steps fits in a budget of 1.00 KiB (1024 B)")
        return make_result(case, seed=1)

    outcome = run_sweep(config, tmp_path, run_cell=run_cell)
    assert not outcome.resumable and outcome.exit_code == 2
    (cell,) = outcome.invalid
    assert cell.key == small.key and cell.error.startswith("config error: no schedule")
    assert "PlanError" not in "\n".join(outcome.summary_lines())
    assert _manifest_cells(tmp_path)[0]["state"] == "invalid"
    again = run_sweep(config, tmp_path, resume=True, run_cell=run_cell)
    assert calls == [small.key, config.cases[1].key] and again.invalid
    ((key, what),) = missing_cells([tmp_path])
    assert key == small.key and "(state invalid: config error: no schedule" in what


def test_a_sweep_refuses_an_optimal_cell_too_large_to_plan_before_measuring(tmp_path: Path):
    # `run` refuses a plan it cannot compute (exit 2); a sweep measured the other cells
    # first and only then failed that one, as an error for --resume to retry
    cfg = tmp_path / "big.toml"
    cfg.write_text(
        'name = "big"\n[case]\nmodel = "rnn"\nhidden = 8\nstrategy = "optimal"\n'
        'budget_bytes = "1MiB"\n[grid]\nsteps = [20, 2000000]\n'
    )
    result = CliRunner().invoke(cli, ["sweep", str(cfg), "--out", str(tmp_path / "o"), "--yes"])
    assert result.exit_code == 2 and f"{cfg}:8: planning 2000000 steps" in result.output
    assert not (tmp_path / "o").exists()
