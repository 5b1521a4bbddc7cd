"""Fixes of 2026-11-29 (session 8): what the last session noticed and left."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _synthetic import make_result

from ckptbench.results.schema import result_to_dict


def test_a_dask_cell_no_plan_fits_is_a_config_error_that_resume_does_not_retry(
    tmp_path: Path, monkeypatch
):
    # a local sweep classified PlanError as `invalid`; on Dask the same cell was an
    # ordinary error ("PlanError: ...") that every --resume sent to a worker again
    import ckptbench.sweep.cluster as cluster_module
    import ckptbench.sweep.dask as dask_module
    from ckptbench.results.store import MANIFEST_NAME
    from ckptbench.schedules.optimal import PlanError
    from ckptbench.sweep.config import parse_config
    from ckptbench.sweep.run import run_sweep

    config = parse_config(
        'name = "b"\n[case]\nmodel = "rnn"\nsteps = 20\nhidden = 8\n[[grid]]\n'
        'strategy = ["optimal"]\nbudget_bytes = ["1KiB"]\n[[grid]]\nsnaps = [4]\n',
        source="b.toml",
    )
    submitted = []

    class FakeCluster:
        def __init__(self):
            self.workers = {"tcp://10.0.0.9:1": None}

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def host(self, worker):
            return "node9"

    class Future:
        def __init__(self, case):
            self.case = case

        def result(self):  # what Dask re-raises from the remote cell, or its document
            if self.case.strategy == "optimal":
                raise PlanError("no schedule of 20 steps fits in a budget of 1.00 KiB (1024 B)")
            return {"result": result_to_dict(make_result(self.case, seed=3)),
                    "worker": "tcp://10.0.0.9:1"}  # fmt: skip

    def fake_dask(cluster, run_cell, jobs, starting, done, retrying=None, poll_s=0.2):
        tries: dict = {}
        for index, case in jobs:
            submitted.append(case.key)
            starting(index, 1)
            dask_module._collect(Future(case), index, case, "tcp://10.0.0.9:1", 1.0, cluster,
                                 tries, done)  # fmt: skip
        return None

    monkeypatch.setattr(cluster_module, "connect", lambda *a, **k: FakeCluster())
    monkeypatch.setattr(dask_module, "run_dask", fake_dask)
    outcome = run_sweep(config, tmp_path, dask_address="tcp://10.0.0.9:8786")
    assert outcome.exit_code == 2 and not outcome.resumable
    (cell,) = outcome.invalid
    assert cell.error.startswith("config error: no schedule of 20 steps")
    assert "PlanError" not in "\n".join(outcome.summary_lines())
    first, second = json.loads((tmp_path / MANIFEST_NAME).read_text())["cells"]
    assert first["state"] == "invalid" and second["state"] == "measured"
    assert first["attempts"][-1]["error"].startswith("config error:")
    again = run_sweep(config, tmp_path, resume=True, dask_address="tcp://10.0.0.9:8786")
    assert submitted == [c.key for c in config.cases] and again.invalid


def test_python_dash_m_never_imports_a_module_of_the_current_folder(tmp_path: Path):
    # `python -m ckptbench` (unlike the console script, or `-P`) put the current folder
    # first on sys.path: an autograd.py there that raises stopped `compare` with exit 1
    import subprocess
    import sys

    from ckptbench.results.schema import save_result

    marker = tmp_path / "shadowed"
    for name in ("autograd", "numpy", "pandas", "click"):
        (tmp_path / f"{name}.py").write_text(
            f"open({str(marker)!r}, 'w').close()\nraise SystemExit(9)\n"
        )
    from _synthetic import CI_CASE

    save_result(make_result(CI_CASE, seed=4), tmp_path / "r.json")
    proc = subprocess.run(
        [sys.executable, "-m", "ckptbench", "compare", "r.json"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert not marker.exists() and proc.stdout.startswith("Cells")


@pytest.mark.parametrize("target", ["result", "manifest"])
def test_no_side_output_replaces_a_key_sorted_result_or_manifest_cut_short(
    tmp_path: Path, target: str
):
    # a result re-sorted by `jq -S` and then truncated no longer parsed and no longer
    # opened with {"schema_version": ...}: `compare -o FILE --force` replaced it
    from _synthetic import CI_CASE
    from click.testing import CliRunner

    from ckptbench.cli import cli
    from ckptbench.results.schema import save_result

    src = tmp_path / "a.json"
    save_result(make_result(CI_CASE, seed=0), src)
    if target == "result":
        doc = json.loads(src.read_text())
    else:  # a manifest as a sweep writes it, with one cell
        cell = {"key": CI_CASE.key, "state": "measured", "case": CI_CASE.to_dict()}
        doc = {"kind": "ckptbench-sweep", "manifest_version": 1, "cells": [cell]}
    whole = json.dumps(doc, sort_keys=True, indent=2).encode()
    path = tmp_path / "cut.json"
    path.write_bytes(whole[: len(whole) // 2])
    before = path.read_bytes()
    runner = CliRunner()
    for args in (
        ["compare", str(src), "-o", str(path), "--force"],
        ["check", str(src), "--junit", str(path), "--force"],
        ["check", str(src), "--summary", str(path)],
    ):
        res = runner.invoke(cli, args)
        assert res.exit_code == 2, (args, res.output)
        assert "a side output never replaces or appends to one" in res.output
        assert path.read_bytes() == before, args


@pytest.mark.parametrize(
    ("text", "twin"),
    [("8MB", "8MiB"), ("1.5 gb", "1.5GiB"), ("20kB", "20KiB"), ("8MiB", None), ("8m", None),
     ("1048576", None), ("8B", None), ("nonsense", None)],
)  # fmt: skip
def test_a_size_in_a_decimal_unit_has_a_binary_twin(text: str, twin: str | None):
    from ckptbench.results.units import binary_twin, parse_size

    assert binary_twin(text) == twin
    if twin is not None:
        assert parse_size(twin) > parse_size(text)


def test_a_budget_typed_in_si_units_is_said_to_be_so(tmp_path: Path):
    # `--budget 8MB` is 8 000 000 B; --help said so, but nothing did when a user typed it
    # meaning 8 MiB (a budget 4.6% smaller than meant, and the plan's "7.63 MiB" unexplained)
    from click.testing import CliRunner

    from ckptbench.cli import cli

    costs = tmp_path / "costs.json"
    costs.write_text(
        json.dumps({"forward_time_s": 4e-4, "taped_time_s": 2.6e-3, "state_bytes": 65536,
                    "tape_bytes": 450000})
    )  # fmt: skip
    base = ["plan", "--steps", "300", "--costs", str(costs)]
    res = CliRunner().invoke(cli, [*base, "--budget", "8MB"])
    assert res.exit_code == 0, res.output
    assert "note: --budget 8MB is 8000000 B: its unit counts powers of 1000 (SI); 8MiB " \
        "would be 8388608 B" in res.output  # fmt: skip
    for quiet in (["--budget", "8MiB"], ["--budget", "8MB", "-q"]):
        res = CliRunner().invoke(cli, [*base, *quiet])
        assert res.exit_code == 0 and "powers of 1000" not in res.output, res.output


def test_run_notes_a_memory_limit_typed_in_si_units(tmp_path: Path):
    from click.testing import CliRunner

    from ckptbench.cli import cli

    out = tmp_path / "r.json"
    res = CliRunner().invoke(cli, [
        "run", "--model", "rnn", "--steps", "10", "--hidden", "8", "--snaps", "3",
        "--rounds", "1", "--warmup", "0", "--repeats", "1", "--memory-limit", "4GB",
        "--out", str(out),
    ])  # fmt: skip
    assert res.exit_code == 0, res.output
    assert "--memory-limit 4GB is 4000000000 B: its unit counts powers of 1000" in res.output


def test_compare_never_says_resume_measures_a_cell_no_plan_exists_for(tmp_path: Path):
    # compare listed an `invalid` cell under "`sweep --resume` measures them", which
    # `sweep --resume` then skipped ("no plan as configured")
    from click.testing import CliRunner

    from ckptbench.cli import cli
    from ckptbench.render.compare import missing_lead
    from ckptbench.schedules.optimal import PlanError
    from ckptbench.sweep.config import parse_config
    from ckptbench.sweep.run import run_sweep

    config = parse_config(
        'name = "b"\n[case]\nmodel = "rnn"\nsteps = 20\nhidden = 8\n[[grid]]\n'
        'strategy = ["optimal"]\nbudget_bytes = ["1KiB"]\n[[grid]]\nsnaps = [4]\n',
        source="b.toml",
    )

    def run_cell(case, *, out_path=None, progress=None):
        if case.strategy == "optimal":
            raise PlanError("no schedule of 20 steps fits in a budget of 1.00 KiB (1024 B)")
        result = make_result(case, seed=1)
        from ckptbench.results.schema import save_result

        save_result(result, out_path)
        return result

    run_sweep(config, tmp_path, run_cell=run_cell)
    res = CliRunner().invoke(cli, ["compare", str(tmp_path)])
    assert res.exit_code == 0, res.output
    assert "`sweep --resume` does not measure them: no plan exists as configured" in res.output
    assert "`sweep --resume` measures them" not in res.output
    mixed = [("a", "a.json (state invalid: config error: ...)"), ("b", "b.json (state error)")]
    assert "`sweep --resume` measures those not `invalid`" in missing_lead(mixed)
    assert "`sweep --resume` measures them)" in missing_lead(mixed[1:])


def test_a_run_stopped_before_its_normal_mode_is_not_blamed_on_modes():
    # stopped in round 1 after the baseline: "both need the normal mode (--modes)", though
    # --modes was never given
    from dataclasses import replace

    from _synthetic import CI_CASE

    from ckptbench.render.run import headline
    from ckptbench.results.schema import Mode

    full = make_result(CI_CASE, seed=2)
    base = [m for m in full.modes if m.mode is Mode.BASELINE and m.round == 0]
    stopped = replace(full, modes=tuple(base), environment={
        **full.environment, "interrupted": {"by": "SIGINT", "round": 1}})  # fmt: skip
    text = headline(stopped)
    assert "both need the normal mode (the run was interrupted in round 1 before" in text
    assert "--modes" not in text
    chosen = replace(full, modes=tuple(base))  # no stop recorded: --modes left it out
    assert "both need the normal mode (--modes)" in headline(chosen)


def test_a_plugin_path_that_is_no_regular_file_is_not_called_missing():
    from click.testing import CliRunner

    from ckptbench.cli import cli

    res = CliRunner().invoke(cli, ["run", "--model", "/dev/null:make", "--steps", "5"])
    assert res.exit_code == 2
    assert "workload file '/dev/null' is not a regular file" in res.output


def test_a_wide_character_in_a_name_keeps_the_columns_aligned_on_screen():
    # widths were counted in characters: a layer named 'é層0→ß' shifted its row by one cell
    from rich.cells import cell_len

    from ckptbench.render.table import Column, Table, to_text

    table = Table(
        "layers",
        records=[{"layer": "é層0→ß", "ms": 1.5}, {"layer": "layer1", "ms": 22.25}],
        columns=(Column("layer", "layer", align="left"), Column("ms", "ms")),
    )
    lines = to_text(table).splitlines()[1:]
    assert len({cell_len(line) for line in lines}) == 1, lines


@pytest.mark.parametrize(("dtype", "hint"), [("float64", False), ("float32", True)])
def test_a_non_finite_loss_suggests_a_wider_dtype_only_where_there_is_one(dtype, hint, tmp_path):
    from ckptbench.measure.gradcheck import checked
    from ckptbench.results.schema import Case, Mode, ModeResult, Status

    case = Case(
        steps=4, snaps=2, dtype=dtype, backend="torch" if dtype != "float64" else "autograd"
    )
    baseline = ModeResult(mode=Mode.BASELINE, status=Status.OK, loss=float("inf"))
    got = checked(case, 0, Mode.BASELINE, baseline, tuple(Mode), {})
    assert not got.ok and got.error.endswith("smaller inputs")
    assert ("a wider --dtype" in got.error) is hint
