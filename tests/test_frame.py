"""ckptbench.read_results: the tidy DataFrame of results (one row per result file and mode),
the analysis layer under ``compare``; pandas stays off the measuring side."""

from __future__ import annotations

import pandas as pd
import pytest
from _imports import loaded_after_import
from _synthetic import CI_CASE, make_result, with_case
from click.testing import CliRunner

import ckptbench
from ckptbench.cli import cli
from ckptbench.frame import CASE_COLUMNS, cells_frame, read_results, results_frame
from ckptbench.results.schema import Case, Status, save_result
from ckptbench.results.store import StoreError, load_results

MIB = 2**20


def _folder(tmp_path):
    results = [
        make_result(CI_CASE.with_(snaps=s, strategy=st), seed=i)
        for i, (s, st) in enumerate(
            [(8, "revolve"), (12, "revolve"), (8, "uniform"), (12, "uniform")]
        )
    ]
    for k, r in enumerate(results):
        save_result(r, tmp_path / f"cell{k}.json")
    return results


def test_one_row_per_result_file_and_mode_with_the_cells_figures(tmp_path):
    results = _folder(tmp_path)
    df = ckptbench.read_results(tmp_path)  # the lazy export is the same function
    assert ckptbench.read_results is read_results
    assert len(df) == 4 * 3
    assert list(df.columns[: len(CASE_COLUMNS)]) == list(CASE_COLUMNS)
    for col in ("key", "host", "mode", "status", "peak_rss_bytes", "sampled_peak_rss_bytes",
                "overhead_bytes", "time_median_s", "time_q1_s", "time_max_s", "iterations",
                "evaluations", "slowdown", "slowdown_low", "slowdown_high", "memory_savings",
                "memory_savings_low", "memory_savings_high", "stored_peak_bytes",
                "program_rss_bytes", "compile_time_s"):  # fmt: skip
        assert col in df.columns, col
    assert str(df["peak_rss_bytes"].dtype) == "Int64" and str(df["run"].dtype) == "Int64"
    # the figures are the recomputed summary's, the same on every row of one file
    for run, r in enumerate(results):
        rows = df[df["run"] == run]
        assert set(rows["mode"]) == {"baseline", "normal", "checkpointed"}
        assert rows["slowdown"].nunique() == 1
        s = r.summary.as_dict()
        assert rows["memory_savings"].iloc[0] == pytest.approx(s["memory_savings"])
        ck = rows[rows["mode"] == "checkpointed"].iloc[0]
        assert ck["overhead_bytes"] == s["overhead_bytes"]["checkpointed"]
        assert ck["slowdown_low"] <= ck["slowdown"] <= ck["slowdown_high"]
        assert ck["memory_savings_low"] <= ck["memory_savings"] <= ck["memory_savings_high"]
        assert ck["evaluations"] == r.mode_rounds(r.modes[2].mode)[0].counters["step_calls"]
        stored = r.mode_rounds(r.modes[2].mode)[0].counters["peak_stored_bytes"]
        assert ck["stored_peak_bytes"] == stored > 0
    # the README's pivot: savings by strategy x snaps
    ck = df[df["mode"] == "checkpointed"]
    pivot = ck.pivot_table(index="strategy", columns="snaps", values="memory_savings")
    assert pivot.shape == (2, 2) and pivot.notna().all().all()
    # a file, or a list of them, works too
    assert len(read_results(tmp_path / "cell0.json")) == 3
    assert len(read_results([tmp_path / "cell0.json", str(tmp_path / "cell1.json")])) == 6


def test_failed_modes_and_bad_input(tmp_path):
    crashed = make_result(CI_CASE, seed=1, status={"checkpointed": Status.CRASHED})
    save_result(crashed, tmp_path / "c.json")
    df = read_results(tmp_path / "c.json")
    ck = df[df["mode"] == "checkpointed"].iloc[0]
    assert ck["status"] == "crashed" and pd.isna(ck["peak_rss_bytes"])
    assert cells_frame([crashed]).iloc[0]["status"] == "checkpointed: crashed"
    with pytest.raises(StoreError, match="no such file"):
        read_results(tmp_path / "missing")


def test_compare_csv_comes_from_the_frame(tmp_path):
    results = _folder(tmp_path)
    res = CliRunner().invoke(cli, ["compare", str(tmp_path), "--format", "csv"])
    assert res.exit_code == 0, res.output
    read = load_results([tmp_path])  # the same results, each with the file it came from
    assert [r.case for r in read] == [r.case for r in results]
    assert res.output.strip() == cells_frame(read).to_csv(index=False).strip()
    assert cells_frame(read)["source"].tolist() == [
        str(tmp_path / f"cell{k}.json") for k in range(4)
    ]
    assert res.output.splitlines()[0].startswith("key,host,backend,device,model,steps,snaps")


def test_importing_ckptbench_loads_no_pandas():
    assert loaded_after_import("ckptbench", ("pandas",)) == []
    assert loaded_after_import("ckptbench.measure.worker", ("pandas",)) == []


def test_a_counter_that_was_not_measured_reads_back_as_missing(tmp_path):
    # JAX's peers recompute inside JAX's own transpose: their step evaluations are null
    import dataclasses

    r = make_result(CI_CASE, seed=3)
    modes = tuple(
        dataclasses.replace(m, counters={**m.counters, "step_calls": None}) for m in r.modes
    )
    save_result(dataclasses.replace(r, modes=modes), tmp_path / "r.json")
    df = read_results(tmp_path / "r.json")
    assert df["evaluations"].isna().all()


def test_device_memory_of_a_gpu_result_is_in_the_frame_and_missing_on_a_cpu(tmp_path):
    import dataclasses

    r = make_result(CI_CASE, seed=4)
    device_mib = {"baseline": 10, "normal": 410, "checkpointed": 30}
    modes = tuple(
        dataclasses.replace(
            m,
            iterations=tuple(
                dataclasses.replace(
                    it, peak_device_bytes=device_mib[m.mode.value] * MIB, device_peak_exact=True
                )
                for it in m.iterations
            ),
        )
        for m in r.modes
    )
    gpu = dataclasses.replace(r, case=r.case.with_(backend="jax", device="cuda"), modes=modes)
    save_result(gpu, tmp_path / "gpu.json")
    save_result(r, tmp_path / "cpu.json")
    df = read_results([tmp_path / "gpu.json", tmp_path / "cpu.json"])
    on_gpu = df[df["device"] == "cuda"].set_index("mode")
    assert on_gpu.loc["normal", "device_overhead_bytes"] == 400 * MIB
    assert on_gpu.loc["checkpointed", "peak_device_bytes"] == 30 * MIB
    assert on_gpu["device_memory_savings"].iloc[0] == pytest.approx(20.0)
    on_cpu = df[df["device"] == "cpu"]
    assert on_cpu["peak_device_bytes"].isna().all()
    assert on_cpu["device_memory_savings"].isna().all()
    # compare shows device memory where a cell ran on a GPU, and only then
    both = CliRunner().invoke(
        cli, ["compare", str(tmp_path / "gpu.json"), str(tmp_path / "cpu.json")]
    )
    assert both.exit_code == 0, both.output
    assert "dev savings" in both.output and "20.0x" in both.output
    alone = CliRunner().invoke(cli, ["compare", str(tmp_path / "cpu.json")])
    assert alone.exit_code == 0 and "dev savings" not in alone.output


def test_cell_labels_name_budgets_exactly_and_leave_out_unset_fields():
    from ckptbench.render.format import cell_labels

    cases = [CI_CASE.with_(strategy="optimal", budget_bytes=b) for b in (2**24, 2**24 + 2**19)]
    cases.append(CI_CASE)  # revolve: no budget
    labels = cell_labels(cases)
    assert labels[0].endswith("optimal budget=16MiB")
    assert labels[1].endswith("optimal budget=16896KiB")  # never rounded into 16MiB
    assert "None" not in labels[2] and "budget" not in labels[2]


def test_a_budget_label_reads_back_as_that_budget_in_its_shortest_exact_unit():
    """A decimal budget (configs/gpu-check.toml's 18 000 000 B) reads '18MB', not
    '18000000B' beside '19520KiB'; each label's text parses back (as --budget) to the very
    budget, so two budgets never share a label."""
    from ckptbench.render.format import cell_labels
    from ckptbench.results.units import parse_size

    budgets = (18_000_000, 19_988_480, 2**30, 10**9, 1001, 2**24 + 1)
    cases = [CI_CASE.with_(strategy="optimal", budget_bytes=b) for b in budgets]
    texts = [label.rsplit("budget=", 1)[1] for label in cell_labels(cases)]
    assert texts == ["18MB", "19520KiB", "1GiB", "1GB", "1001B", "16777217B"]
    assert [parse_size(t) for t in texts] == list(budgets)


def test_common_fields_name_the_framework_and_device_only_off_the_defaults():
    from ckptbench.render.format import common_fields

    gpu = [CI_CASE.with_(backend="jax", device="cuda", snaps=s) for s in (4, 8)]
    assert common_fields(gpu).endswith("backend=jax device=cuda")
    assert "backend" not in common_fields([CI_CASE, CI_CASE.with_(snaps=4)])
    mixed = common_fields([CI_CASE, CI_CASE.with_(backend="torch")])  # differs: in the labels
    assert "backend" not in mixed
    # a dtype or an executor every cell shares is named only off the defaults
    engine = [
        CI_CASE.with_(backend="jax", executor="engine", dtype="float32", snaps=s) for s in (4, 8)
    ]
    assert common_fields(engine).endswith("backend=jax dtype=float32 executor=engine")
    compiled = [CI_CASE.with_(backend="jax", executor="compiled", snaps=s) for s in (4, 8)]
    assert "executor" not in common_fields(compiled) and "dtype" not in common_fields(compiled)


def test_cells_say_which_executor_ran_in_which_dtype_within_which_budget():
    """A CSV crossing executors tells its rows apart by columns, not only by key: the
    executor that ran (the default where none was named; none for a peer), dtype, budget."""
    from ckptbench.results.schema import default_executor

    ours = make_result(Case(backend="torch", strategy="revolve", dtype="float32"))
    named = with_case(ours, executor="one-call")
    peer = with_case(make_result(Case(backend="torch")), strategy="torch-checkpoint")
    plan = with_case(make_result(Case(backend="torch")), strategy="optimal", budget_bytes=2**20)
    frame = cells_frame([ours, named, peer, plan])
    assert list(frame["executor"].astype(object).where(frame["executor"].notna(), None)) == [
        default_executor("torch", "cpu"),
        "one-call",
        None,
        default_executor("torch", "cpu"),
    ]
    assert list(frame["dtype"]) == ["float32", "float32", "float64", "float64"]
    assert frame["budget_bytes"].isna().tolist() == [True, True, True, False]
    assert frame["budget_bytes"].iloc[3] == 2**20
    tidy = results_frame([peer, ours])
    assert set(tidy["executor_used"].dropna()) == {default_executor("torch", "cpu")}
