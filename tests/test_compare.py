"""Comparing results (analysis, render): the significance rule, memory deltas, pairing, output."""

from __future__ import annotations

import base64
import csv
import io
import json
import re
import statistics
from pathlib import Path

import numpy as np
import pytest
from _synthetic import CI_CASE, MIB, make_result

from ckptbench.analysis import compare, memory_delta, time_change
from ckptbench.analysis.intervals import slowdown_estimate
from ckptbench.frame import cells_frame
from ckptbench.render import figure_png, plot_tradeoff, render
from ckptbench.render.compare import format_names
from ckptbench.results.schema import Mode, Status, save_result
from ckptbench.results.store import load_results
from ckptbench.sweep.config import parse_config
from ckptbench.sweep.run import run_sweep

UNIFORM = CI_CASE.with_(strategy="uniform")


def _samples(rng: np.random.Generator, n: int, cv: float, scale: float = 1.0) -> list[float]:
    return list(scale * np.maximum(0.2, 1 + cv * rng.standard_normal(n)))


# --------------------------------------------------------------------------- the rule


def _processes(
    rng: np.random.Generator, n: int, iters: int, process_sd: float, scale: float = 1.0
) -> list[list[float]]:
    """``n`` worker processes: a per-process offset and 3% iteration noise."""
    out = []
    for _ in range(n):
        offset = rng.normal(0.0, process_sd)
        out.append(list(scale * np.exp(offset + rng.normal(0.0, 0.03, iters))))
    return out


def test_one_process_a_side_uses_the_runs_one_round_interval() -> None:
    before, after = [[1.00, 1.02, 1.01]], [[1.50, 1.53, 1.49]]
    tc = time_change(before, after, tolerance=0.25)
    # 3 vs 3 iterations: the range of the pairwise ratios, widened by two invocations
    assert tc.low < 1.49 / 1.02 and tc.high > 1.53 / 1.00
    assert tc.low > 1.25 and tc.verdict == "slower" and tc.significant
    assert tc.change == pytest.approx(0.5, abs=0.02) and "one round" in tc.method
    assert (tc.processes_before, tc.processes_after, tc.n_before, tc.n_after) == (1, 1, 3, 3)
    # completely separated, but by less than the tolerance: not a change
    assert time_change([[1.00, 1.01, 1.02]], [[1.05, 1.06, 1.07]]).verdict == "no change"
    # the medians moved 50% but the samples overlap: the interval reaches below 1.1
    assert time_change([[1.0, 1.0, 1.6]], [[1.5, 1.5, 0.9]]).verdict == "no change"
    assert time_change([[1.0, 1.01, 1.0]], [[0.6, 0.61, 0.6]]).verdict == "faster"
    assert time_change([], [[1.0]]) is None


def test_several_processes_a_side_are_the_replicates() -> None:
    # four processes a side, one of them slow: the slow process is set aside, and a
    # process-to-process spread the iterations cannot see is in the interval
    before = [[1.00, 1.01], [1.02, 1.03], [0.99, 1.00], [1.01, 1.00]]
    after = [[1.50, 1.51], [1.53, 1.52], [1.49, 1.48], [2.40, 2.41]]
    tc = time_change(before, after, tolerance=0.25)
    assert "Welch" in tc.method and "4 vs 3 kept" in tc.method
    assert tc.ratio == pytest.approx(1.5, abs=0.02) and tc.verdict == "slower"
    assert (tc.processes_before, tc.processes_after) == (4, 4)


@pytest.mark.parametrize(("n", "iters"), [(1, 3), (1, 10), (3, 1), (6, 2)])
def test_aa_false_positive_rate_is_low(n: int, iters: int) -> None:
    rng = np.random.default_rng(1000 + n + iters)
    trials = 300
    hits = sum(
        time_change(_processes(rng, n, iters, 0.03), _processes(rng, n, iters, 0.03)).significant
        for _ in range(trials)
    )
    assert hits / trials <= 0.05


@pytest.mark.parametrize(("n", "iters", "power"), [(1, 5, 0.95), (3, 1, 0.8), (6, 2, 0.99)])
def test_a_one_and_a_half_times_slowdown_is_found(n: int, iters: int, power: float) -> None:
    rng = np.random.default_rng(2000 + n + iters)
    trials = 300
    hits = sum(
        time_change(
            _processes(rng, n, iters, 0.03), _processes(rng, n, iters, 0.03, scale=1.5)
        ).verdict
        == "slower"
        for _ in range(trials)
    )
    assert hits / trials >= power


# --------------------------------------------------------------------------- whole results


def test_compare_calls_a_one_and_a_half_times_slowdown_significant() -> None:
    before = [make_result(CI_CASE, seed=1, time_cv=0.10)]
    after = [make_result(CI_CASE, seed=2, time_cv=0.10, time_scale={"checkpointed": 1.5})]
    cell = compare(after, before).cells[0]
    ckpt = cell.mode(Mode.CHECKPOINTED)
    assert ckpt.time.significant and ckpt.time.verdict == "slower"
    assert ckpt.time.change == pytest.approx(0.5, abs=0.2)
    assert not cell.mode(Mode.NORMAL).time.significant
    assert not ckpt.memory.changed


def test_compare_calls_an_aa_rerun_not_significant() -> None:
    for seed in range(20):
        before = [make_result(CI_CASE, seed=100 + seed, time_cv=0.15)]
        after = [make_result(CI_CASE, seed=200 + seed, time_cv=0.15)]
        comparison = compare(after, before)
        for mc in comparison.cells[0].modes:
            assert not mc.memory.changed, (seed, mc)
    # time: one seeded rerun, every mode
    comparison = compare([make_result(CI_CASE, seed=5)], [make_result(CI_CASE, seed=6)])
    assert [mc.time.verdict for mc in comparison.cells[0].modes] == ["no change"] * 3


def test_memory_delta_tolerance_and_floor() -> None:
    overhead = int(2.5 * MIB)
    assert memory_delta(overhead, int(overhead * 1.2)).regressed  # +20%: 0.5 MiB > 0.25
    assert not memory_delta(overhead, overhead + int(0.2 * MIB)).changed  # under the floor
    big = 400 * MIB
    assert not memory_delta(big, int(big * 1.04)).changed  # 4% < 5%
    assert memory_delta(big, int(big * 1.06)).regressed
    d = memory_delta(big, int(big * 0.9))
    assert d.changed and not d.regressed and d.delta_rel == pytest.approx(-0.1)


def test_injected_memory_regression_shows_in_the_deltas() -> None:
    before = [make_result(CI_CASE, seed=1)]
    after = [make_result(CI_CASE, seed=2, memory_scale={"checkpointed": 1.2})]
    cell = compare(after, before).cells[0]
    mem = cell.mode(Mode.CHECKPOINTED).memory
    assert mem.regressed and mem.delta_rel == pytest.approx(0.2, abs=0.03)
    assert not cell.mode(Mode.NORMAL).memory.changed
    assert not cell.mode(Mode.BASELINE).memory.changed


def test_cells_pair_by_key_and_host_and_reruns_pool() -> None:
    before = [make_result(CI_CASE, seed=1, host="laptop")]
    after = [make_result(CI_CASE, seed=2, host="ci")]
    with pytest.raises(ValueError, match=r"no cell .* matches by key and host") as info:
        compare(after, before)
    assert "\n" not in str(info.value) and "laptop" in str(info.value)
    assert len(compare(after, before, match_host=False).cells) == 1

    before = [make_result(CI_CASE, seed=s) for s in (1, 2)] + [make_result(UNIFORM, seed=3)]
    after = [make_result(CI_CASE, seed=s) for s in (4, 5, 6)]
    comparison = compare(after, before)
    assert len(comparison.cells) == 1
    tt = comparison.cells[0].mode(Mode.NORMAL).time
    assert (tt.n_before, tt.n_after) == (6, 9)
    assert (tt.processes_before, tt.processes_after) == (2, 3)
    assert "a single worker process on one side or both" not in render(comparison, "table")
    single = compare([make_result(CI_CASE, seed=7)], [make_result(CI_CASE, seed=8)])
    assert "a single worker process on one side or both" in render(single, "table")
    assert single.notes == ()
    threads = compare([make_result(CI_CASE.with_(repeats=5))], [make_result(CI_CASE)])
    assert threads.notes == (
        f"{CI_CASE.key}: paired files were measured with different repeats [3, 5]",
    )
    assert threads.notes[0] in render(threads, "markdown")
    assert comparison.only_before == ((UNIFORM.key, "host-a"),)


def test_cells_frame_recomputes_from_raw_samples() -> None:
    result = make_result(CI_CASE, seed=3)
    row = cells_frame([result]).iloc[0]
    ckpt, normal = result.mode(Mode.CHECKPOINTED), result.mode(Mode.NORMAL)
    times = {
        "checkpointed": [i.wall_time_s for i in ckpt.iterations],
        "normal": [i.wall_time_s for i in normal.iterations],
    }
    # the stratified Hodges-Lehmann estimate of the raw times (analysis.intervals)
    assert row["slowdown"] == pytest.approx(slowdown_estimate([times]).value)
    t_ckpt, t_norm = statistics.median(times["checkpointed"]), statistics.median(times["normal"])
    assert row["slowdown"] == pytest.approx(t_ckpt / t_norm, rel=0.05)
    assert row["evaluations"] == row["evaluations_optimal"] == 256 + 663
    assert row["forward_steps"] == row["forward_steps_optimal"]
    assert row["status"] == "ok" and row["strategy"] == "revolve"
    assert row["memory_savings"] == pytest.approx(44 / 2.5, rel=0.05)


# --------------------------------------------------------------------------- IO + renderers


def _sweep_dir(tmp_path: Path) -> Path:
    config = parse_config("[case]\nsteps = 64\nhidden = 8\n[grid]\nsnaps = [4, 8]\n", "x.toml")
    out = tmp_path / "sweep"
    seeds = iter(range(100))
    run_sweep(config, out, run_cell=lambda case, **_: make_result(case, seed=next(seeds)))
    return out


def test_load_results_from_folders_manifests_and_files(tmp_path: Path) -> None:
    out = _sweep_dir(tmp_path)
    assert len(load_results([out])) == 2
    assert len(load_results([out / "sweep.json"])) == 2
    files = sorted(out.glob("*.json"))  # a shell glob includes the manifest: it expands
    assert len(load_results(files)) == 2
    plain = tmp_path / "plain"
    plain.mkdir()
    save_result(make_result(CI_CASE), plain / "one.json")
    assert len(load_results([plain])) == 1


def test_load_results_errors_are_one_line(tmp_path: Path) -> None:
    foreign = tmp_path / "old.json"
    foreign.write_text(json.dumps({"schema_version": 0, "case": {}}))
    with pytest.raises(ValueError, match="schema_version 0 is not supported") as info:
        load_results([foreign])
    assert "\n" not in str(info.value)
    with pytest.raises(ValueError, match="no such file"):
        load_results([tmp_path / "missing.json"])
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="no result files"):
        load_results([tmp_path / "empty"])


def test_renderers_table_markdown_csv() -> None:
    before = [make_result(CI_CASE, seed=1), make_result(UNIFORM, seed=2)]
    after = [
        make_result(CI_CASE, seed=3, memory_scale={"checkpointed": 1.2}),
        make_result(UNIFORM, seed=4),
    ]
    single = compare(after)
    text = render(single, "table")
    assert "lstm l=256 s=12 revolve" in text and "Before" not in text
    assert "919 (919)" in text  # evaluations measured (optimal)
    both = compare(after, before)
    text = render(both, "table")
    assert "CHANGED" in text and "new/old" in text
    md = render(both, "markdown")
    assert md.count("\n|---") == 2 and "## Before → after" in md
    csv_lines = render(both, "csv").splitlines()
    assert csv_lines[0].startswith("key,host,mode,memory_before_bytes")
    assert len(csv_lines) == 1 + 2 * 3
    assert len(render(single, "csv").splitlines()) == 3
    with pytest.raises(ValueError, match="unknown format"):
        render(single, "pdf")
    assert {"table", "text", "markdown", "csv", "html", "json"} <= set(format_names())


def test_html_is_self_contained_with_embedded_png_plots() -> None:
    before = [make_result(CI_CASE, seed=1), make_result(UNIFORM, seed=2)]
    after = [make_result(CI_CASE, seed=3), make_result(UNIFORM, seed=4)]
    page = render(compare(after, before), "html")
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    images = re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', page)
    # trade-off (one group) + evaluations + one timeline per result
    assert len(images) == 1 + 1 + 2
    assert all(base64.b64decode(img)[:8] == b"\x89PNG\r\n\x1a\n" for img in images)
    assert not re.search(r'(src|href)="(https?:|//|file:)', page)
    assert "Before → after" in page


def test_renderers_survive_failed_cells() -> None:
    crashed = make_result(UNIFORM, seed=2, status={"checkpointed": Status.CRASHED})
    results = [make_result(CI_CASE, seed=1), crashed]
    comparison = compare(results, [make_result(CI_CASE, seed=3), make_result(UNIFORM, seed=4)])
    text = render(comparison, "table")
    # the width is short: the status in the table's short mode names (its full text wider)
    assert "ckpt crashed" in text and "- (919)" in text
    assert "did not measure OK after" in text
    table_csv = render(compare(results), "csv").splitlines()
    header = table_csv[0].split(",")
    at = header.index("checkpointed_overhead_bytes")
    assert table_csv[2].split(",")[at] == ""  # no checkpointed overhead, not "nan"
    assert table_csv[2].split(",")[header.index("checkpointed_overhead_below_noise")] == ""
    rows = list(csv.DictReader(io.StringIO(render(comparison, "csv"))))
    for row in rows:  # byte counts stay integers even next to a missing value
        assert re.fullmatch(r"-?\d*", row["memory_delta_bytes"]) and re.fullmatch(
            r"\d*", row["n_after"]
        )
    assert render(comparison, "html").count("data:image/png;base64,") == 4


def test_plots_are_available_as_png_for_the_readme() -> None:
    results = [make_result(CI_CASE.with_(snaps=s), seed=s) for s in (4, 8, 16)]
    png = figure_png(plot_tradeoff(results))
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5000


def test_a_trade_off_family_is_named_by_its_sizes_never_by_one_cells_budget() -> None:
    from ckptbench.render import family_titles

    # the first cell of each family is an optimal plan with its own budget: the budget
    # once named the whole family ("... budget_bytes=27262976 ...") and its file
    first = [
        CI_CASE.with_(strategy="optimal", budget_bytes=b, hidden=h)
        for b, h in ((2**20, 8), (2**21, 16))
    ]
    titles = family_titles(first)
    assert all("budget" not in t for t in titles)
    assert len(set(titles)) == 2 and all("hidden=" in t for t in titles)
    assert family_titles(first[:1]) == [f"{CI_CASE.model} l={CI_CASE.steps}"]


def test_compare_pools_several_invocations_of_one_cell(tmp_path):
    # three invocations of one cell whose checkpointed times drifted by -10%/0/+10% (what
    # the main job did on the AMD EPYC VM): each run's interval misses the others'
    # estimates; the pooled interval (random effects) covers them all
    from click.testing import CliRunner

    from ckptbench.cli import cli
    from ckptbench.frame import invocations_frame

    paths = []
    for k, scale in enumerate((0.9, 1.0, 1.1)):
        r = make_result(CI_CASE, seed=30 + k, time_cv=0.02, time_scale={"checkpointed": scale})
        paths.append(tmp_path / f"run{k}.json")
        save_result(r, paths[-1])
    paths.append(tmp_path / "once.json")  # a cell measured once is not pooled
    save_result(make_result(CI_CASE.with_(snaps=8), seed=40), paths[-1])
    results = load_results(paths)
    frame = invocations_frame(results)
    assert len(frame) == 1 and frame["invocations"].iloc[0] == 3
    row = frame.iloc[0]
    own = [r.summary.as_dict() for r in results[:3]]
    assert any(not (o["slowdown_ci"][0] <= p["slowdown"] <= o["slowdown_ci"][1])
               for o in own for p in own)  # fmt: skip
    assert row["slowdown_low"] <= min(o["slowdown"] for o in own)
    assert max(o["slowdown"] for o in own) <= row["slowdown_high"]
    assert row["slowdown_tau"] > 0.03 and row["memory_savings_tau"] < 0.03
    out = CliRunner().invoke(cli, ["compare", *map(str, paths)]).output
    assert "Invocations of one cell" in out and "tau" in out
    md = CliRunner().invoke(cli, ["compare", "--format", "markdown", *map(str, paths)]).output
    assert "## Invocations of one cell" in md
    html = render(compare(results), "html")
    assert "<h2>Invocations of one cell</h2>" in html
    assert invocations_frame(results[2:]).empty  # no cell twice: no section


@pytest.mark.parametrize(
    ("change", "shown"),
    [
        ({"executor": "engine"}, ("executor=compiled", "executor=engine")),  # JAX CPU: compiled
        ({"dtype": "float32"}, ("dtype=float64", "dtype=float32")),
    ],
)
def test_cells_differing_only_in_executor_or_dtype_have_their_own_labels(change, shown) -> None:
    from ckptbench.render.format import cell_labels

    jax = CI_CASE.with_(backend="jax")
    for cases in ([jax, jax.with_(**change)], [jax.with_(**change), jax]):  # either first
        results = [make_result(c, seed=i) for i, c in enumerate(cases)]
        labels = cell_labels([r.case for r in results])
        assert len(set(labels)) == 2, labels
        assert {label.split()[-1] for label in labels} == set(shown)
        cells = render(compare(results), "table").split("\n\n")[0]  # the Cells table
        assert all(s in cells for s in shown), cells


def test_a_peer_label_names_no_executor_unless_two_cells_would_read_the_same() -> None:
    # run 6's GPU table read "jax-checkpoint ... executor=engine": jax.checkpoint runs
    # inside JAX, not on our executor
    from ckptbench.render.format import cell_labels, short_labels

    jax = CI_CASE.with_(backend="jax")
    peer = jax.with_(strategy="jax-checkpoint")
    cases = [jax, jax.with_(executor="engine"), peer]
    for labels in (cell_labels(cases), short_labels(cases)):
        assert "executor=compiled" in labels[0] and "executor=engine" in labels[1]
        assert "executor" not in labels[2] and len(set(labels)) == 3
    # two peer cells apart only by the executor asked for keep it, so they stay apart
    twins = [peer, peer.with_(executor="engine")]
    labels = cell_labels(twins)
    assert len(set(labels)) == 2 and all("executor=" in label for label in labels)
