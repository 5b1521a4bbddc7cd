"""Tests for ckptbench.sweep.run with fake cell runners (no workers are started)."""

from __future__ import annotations

import functools
import itertools
import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest
from _synthetic import TINY_SWEEP_TEXT, make_result

from ckptbench.results.schema import MODES, Case, Status, result_to_dict, save_result
from ckptbench.results.store import load_result
from ckptbench.sweep.config import parse_config
from ckptbench.sweep.progress import estimated_seconds
from ckptbench.sweep.run import (
    MANIFEST_NAME,
    CellState,
    SweepError,
    SweepProgress,
    cell_cost,
    cell_path,
    run_sweep,
)

TESTS = Path(__file__).resolve().parent
SAFETY_TIMEOUT_S = 60  # only to avoid hanging the suite; never asserted on

CONFIG_TEXT = TINY_SWEEP_TEXT.replace("snaps = [2, 3, 4]", "snaps = [2, 3, 4, 5, 6]")


def _config(text: str = CONFIG_TEXT):
    return parse_config(text, source="tiny.toml")


class FakeCells:
    """A cell runner that records its calls and returns synthetic results."""

    def __init__(self, fail: set[str] = frozenset(), raise_on: set[str] = frozenset()) -> None:
        self.calls: list[str] = []
        self.fail = fail
        self.raise_on = raise_on

    def __call__(self, case: Case, *, out_path=None, progress=None):
        self.calls.append(case.key)
        if case.key in self.raise_on:
            raise RuntimeError("harness bug\nsecond line")
        status = {"checkpointed": Status.TIMEOUT} if case.key in self.fail else None
        return make_result(case, seed=len(self.calls), status=status)


def _manifest(out: Path) -> dict:
    return json.loads((out / MANIFEST_NAME).read_text())


def test_every_cell_is_saved_under_its_key_with_a_manifest(tmp_path: Path) -> None:
    config = _config()
    events: list[SweepProgress] = []
    fake = FakeCells()
    outcome = run_sweep(config, tmp_path, run_cell=fake, progress=events.append)
    assert fake.calls == [c.key for c in config.cases]
    assert outcome.exit_code == 0
    assert [c.state for c in outcome.cells] == [CellState.MEASURED] * 5
    for case in config.cases:
        result = load_result(cell_path(tmp_path, case))
        assert result.case == case and result.ok
    manifest = _manifest(tmp_path)
    assert manifest["kind"] == "ckptbench-sweep" and manifest["config"]["name"] == "tiny"
    assert [c["state"] for c in manifest["cells"]] == ["measured"] * 5
    assert [c["file"] for c in manifest["cells"]] == [f"{c.key}.json" for c in config.cases]
    done = [e for e in events if e.event == "cell-done"]
    assert [e.done for e in done] == [1, 2, 3, 4, 5] and all(e.total == 5 for e in done)
    first_start = next(e for e in events if e.event == "cell-start")
    assert first_start.line() == f"[1/5] {config.cases[0].key} started"
    assert done[0].line().startswith(f"[1/5] {config.cases[0].key} measured in 0 s, ETA ")
    assert outcome.summary_lines()[0].startswith("sweep tiny: 5 cells, 5 measured, 0 kept")
    assert done[-1].eta_s == 0 and all(e.eta_s is not None for e in done)
    assert next(e.eta_s for e in events if e.event == "cell-start") is None


def test_failures_are_recorded_and_the_sweep_continues(tmp_path: Path) -> None:
    config = _config()
    keys = [c.key for c in config.cases]
    fake = FakeCells(fail={keys[1]}, raise_on={keys[3]})
    outcome = run_sweep(config, tmp_path, run_cell=fake)
    assert fake.calls == keys
    states = [c.state for c in outcome.cells]
    assert states[3] is CellState.ERROR and states.count(CellState.MEASURED) == 4
    assert outcome.cells[3].error == "RuntimeError: harness bug"
    assert not cell_path(tmp_path, config.cases[3]).exists()
    assert [c.key for c in outcome.failed] == [keys[1]]
    assert "checkpointed: timeout" in outcome.cells[1].error
    assert load_result(cell_path(tmp_path, config.cases[1])).ok is False
    assert outcome.exit_code == 1
    assert _manifest(tmp_path)["cells"][3]["error"] == "RuntimeError: harness bug"
    lines = outcome.summary_lines()
    assert "5 cells, 4 measured, 0 kept, 1 failed, 1 errors, 0 conflicts" in lines[0]
    assert lines[1:] == [
        f"measured {keys[1]}: {outcome.cells[1].error}",
        f"error {keys[3]}: RuntimeError: harness bug",
    ]


def test_a_fresh_sweep_refuses_to_overwrite_results(tmp_path: Path) -> None:
    config = _config()
    run_sweep(config, tmp_path, run_cell=FakeCells())
    before = cell_path(tmp_path, config.cases[0]).read_bytes()
    fake = FakeCells()
    with pytest.raises(SweepError, match="--resume"):
        run_sweep(config, tmp_path, run_cell=fake)
    assert fake.calls == []
    assert cell_path(tmp_path, config.cases[0]).read_bytes() == before


def test_another_sweeps_folder_is_refused(tmp_path: Path) -> None:
    run_sweep(_config(), tmp_path, run_cell=FakeCells())
    other = _config(CONFIG_TEXT.replace('"tiny"', '"other"'))
    with pytest.raises(SweepError, match="holds sweep 'tiny'"):
        run_sweep(other, tmp_path, resume=True, run_cell=FakeCells())


def test_resume_keeps_complete_reruns_partial_and_reports_conflicts(tmp_path: Path) -> None:
    config = _config()
    cases = config.cases
    save_result(make_result(cases[0]), cell_path(tmp_path, cases[0]))  # complete: kept
    save_result(make_result(cases[1], modes=MODES[:2]), cell_path(tmp_path, cases[1]))  # partial
    corrupt = cell_path(tmp_path, cases[2])
    corrupt.write_text('{"schema_version": 99, "case": {}}')  # foreign schema
    other = make_result(cases[3].with_(repeats=5))  # same key, other settings
    save_result(other, cell_path(tmp_path, cases[3]))
    failed = make_result(cases[4], status={"normal": Status.CRASHED})
    save_result(failed, cell_path(tmp_path, cases[4]))
    (tmp_path / f".{cases[0].key}.json.abc123.tmp").write_text("half a fi")  # a kill mid-write

    fake = FakeCells()
    outcome = run_sweep(config, tmp_path, resume=True, run_cell=fake)
    assert fake.calls == [cases[1].key]
    states = [c.state for c in outcome.cells]
    assert states == [
        CellState.KEPT,
        CellState.MEASURED,
        CellState.CONFLICT,
        CellState.CONFLICT,
        CellState.KEPT,
    ]
    assert "schema_version 99" in outcome.cells[2].error
    assert "repeats 5 vs 3" in outcome.cells[3].error
    assert corrupt.read_text() == '{"schema_version": 99, "case": {}}'  # left alone
    assert load_result(cell_path(tmp_path, cases[3])).case.repeats == 5
    assert len(load_result(cell_path(tmp_path, cases[1])).modes) == 3
    assert outcome.exit_code == 2  # conflicts are an input problem
    assert [c.key for c in outcome.failed] == [cases[4].key]
    assert not list(tmp_path.glob(".*.tmp"))

    fake = FakeCells()
    corrupt.unlink()
    outcome = run_sweep(config, tmp_path, resume=True, run_cell=fake, retry_failed=True)
    assert fake.calls == [cases[2].key, cases[4].key]
    assert outcome.failed == () and len(outcome.conflicts) == 1


CHILD = """
import sys, time
sys.path.insert(0, {tests!r})
from pathlib import Path
from _synthetic import make_result
from ckptbench.sweep.config import load_config
from ckptbench.results.schema import MODES, save_result
from ckptbench.sweep.run import run_sweep

config = load_config(sys.argv[1])
out, block_at = Path(sys.argv[2]), sys.argv[3]

def run_cell(case, *, out_path=None, progress=None):
    # like the runner: the file is saved after the first mode, then the cell goes on
    save_result(make_result(case, seed=1, modes=MODES[:1]), out_path)
    if case.key == block_at:
        time.sleep(3600)  # the test sends SIGKILL while we are here
    return make_result(case, seed=2)

run_sweep(config, out, run_cell=run_cell)
"""


def test_sigkill_mid_sweep_then_resume_runs_only_the_missing_cells(tmp_path: Path) -> None:
    config_path = tmp_path / "tiny.toml"
    config_path.write_text(CONFIG_TEXT)
    config = _config()
    out = tmp_path / "out"
    keys = [c.key for c in config.cases]
    block = keys[2]
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD.format(tests=str(TESTS)), str(config_path), str(out), block],
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + SAFETY_TIMEOUT_S
    partial = out / f"{block}.json"
    while not partial.exists():
        if child.poll() is not None or time.monotonic() > deadline:
            child.kill()
            pytest.fail(f"child never reached the blocking cell: {child.communicate()[1]}")
        time.sleep(0.02)
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    assert child.returncode == -signal.SIGKILL

    # what the kill left: two complete cells, one partial, two missing, a consistent manifest
    assert [len(load_result(out / f"{k}.json").modes) for k in keys[:3]] == [3, 3, 1]
    assert not (out / f"{keys[3]}.json").exists() and not (out / f"{keys[4]}.json").exists()
    states = [c["state"] for c in _manifest(out)["cells"]]
    assert states == ["measured", "measured", "running", "pending", "pending"]

    fake = FakeCells()
    outcome = run_sweep(config, out, resume=True, run_cell=fake)
    assert fake.calls == keys[2:]
    assert [c.state for c in outcome.cells[:2]] == [CellState.KEPT] * 2
    assert outcome.exit_code == 0
    for case in config.cases:
        result = load_result(cell_path(out, case))
        assert result.case == case and len(result.modes) == 3
    # the killed cell's partial result (one mode) is kept beside its re-measurement
    (kept,) = [p for p in out.iterdir() if p.name.endswith(".replaced")]
    assert kept.name.startswith(f"{keys[2]}.json.")
    assert len(load_result(kept).modes) == 1
    assert sorted(p.name for p in out.iterdir() if p != kept) == sorted(
        [*(f"{k}.json" for k in keys), "sweep.json"]
    )


def test_dask_localcluster_one_cell_per_worker_same_schema(tmp_path: Path) -> None:
    distributed = pytest.importorskip("distributed")
    config = _config(
        """
        name = "dask"
        [case]
        model = "rnn"
        steps = 20
        [grid]
        strategy = ["revolve", "uniform"]
        snaps = [3, 4]
        """
    )

    def run_cell(case, *, out_path=None, progress=None):
        start = time.time()
        time.sleep(0.15)
        result = make_result(case, host="")  # the sweep fills in the host it ran on
        env = {"worker": distributed.get_worker().address, "start": start, "end": time.time()}
        return replace(result, environment=env)

    import dask

    # the client refreshes its cached scheduler identity every 10 ms instead of 2 s, so a
    # sweep that trusted that (possibly truncated) cache would see workers "leave"
    refresh = dask.config.set({"distributed.client.scheduler-info-interval": "10ms"})
    with (
        refresh,
        distributed.LocalCluster(
            n_workers=2,
            threads_per_worker=2,  # pinning, not the thread count, keeps one cell per worker
            processes=False,
            host="127.0.0.1",  # loopback over TCP, as a remote cluster is reached
            protocol="tcp://",
            dashboard_address=None,
        ) as cluster,
    ):
        outcome = run_sweep(
            config, tmp_path, run_cell=run_cell, dask_address=cluster.scheduler_address
        )
    assert outcome.exit_code == 0 and len(outcome.measured) == 4
    results = [load_result(p) for p in outcome.result_paths]
    assert {r.host for r in results} == {socket.gethostname()}
    by_worker: dict[str, list[tuple[float, float]]] = {}
    for r in results:
        by_worker.setdefault(r.environment["worker"], []).append(
            (r.environment["start"], r.environment["end"])
        )
    assert len(by_worker) == 2  # both workers were used
    for spans in by_worker.values():
        spans.sort()
        assert all(a_end <= b_start for (_, a_end), (b_start, _) in itertools.pairwise(spans))
    assert {c["worker"] for c in _manifest(tmp_path)["cells"]} == set(by_worker)

    local = run_sweep(config, tmp_path / "local", run_cell=FakeCells())
    local_doc = result_to_dict(load_result(local.result_paths[0]))
    dask_doc = result_to_dict(results[0])
    assert list(dask_doc) == list(local_doc)
    assert list(dask_doc["modes"][0]) == list(local_doc["modes"][0])
    assert dask_doc["summary"].keys() == local_doc["summary"].keys()


def test_default_cell_runner_is_the_real_runner(tmp_path: Path, monkeypatch) -> None:
    """One cell through ckptbench.measure.runner.run_case with the fake worker (no timing)."""
    fake = [sys.executable, str(TESTS / "fake_worker.py")]
    monkeypatch.setattr("ckptbench.measure.launch.default_worker_command", lambda: list(fake))
    config = _config(
        "[case]\nmodel = 'rnn'\nsteps = 20\nrepeats = 2\nwarmup = 0\nrounds = 1\n"
        "[grid]\nsnaps = [4]\n"
    )
    modes_seen: list[str] = []

    def progress(event: SweepProgress) -> None:
        if event.event == "mode-done":
            modes_seen.append(event.mode.value)

    outcome = run_sweep(config, tmp_path, progress=progress)
    assert outcome.exit_code == 0, outcome.cells[0].error
    result = load_result(outcome.result_paths[0])
    assert [m.mode for m in result.modes] == list(MODES) and result.ok
    assert modes_seen == [m.value for m in MODES]
    assert result.host == socket.gethostname()


def test_eta_weights_cells_by_their_planned_work(tmp_path: Path) -> None:
    config = _config(
        "[case]\nmodel = 'lstm'\nsteps = 1000\nsnaps = 4\n"
        "[grid]\nstrategy = ['revolve', 'uniform']\n"
    )
    cheap, dear = (cell_cost(c) for c in config.cases)
    assert dear > 5 * cheap  # uniform with 4 slots recomputes ~125 000 steps, revolve ~8 000
    events: list[SweepProgress] = []
    run_sweep(config, tmp_path, run_cell=FakeCells(), progress=events.append)
    first = next(e for e in events if e.event == "cell-done")
    cheap_s, dear_s = (estimated_seconds(c) for c in config.cases)  # the estimate, rounds
    assert dear_s > 4 * cheap_s  # and workers' start-ups: the ETA's weights
    assert first.eta_s == pytest.approx(first.elapsed_s * dear_s / cheap_s)


def test_a_gpu_cell_is_estimated_from_its_steps_not_its_flops() -> None:
    """On an H200 one round of torch Revolve-31 at hidden 1024 x batch 64 took 35 s; scaled
    by FLOPs from the CPU's reference step the estimate was 37 minutes (run 7). A GPU step
    at this size is launch-bound: the estimate follows the step count, and a bigger hidden
    size costs the same there while it costs more on the CPU."""
    from ckptbench.sweep.progress import estimated_seconds

    gpu = Case(
        backend="torch",
        device="cuda",
        dtype="float32",
        hidden=1024,
        batch=64,
        warmup=1,
        repeats=3,
        rounds=1,
    )
    assert 10 < estimated_seconds(gpu) < 120
    assert estimated_seconds(replace(gpu, hidden=256)) == estimated_seconds(gpu)
    cpu = replace(gpu, device="cpu")
    assert estimated_seconds(cpu) > 10 * estimated_seconds(gpu)
    assert estimated_seconds(replace(cpu, hidden=256)) < estimated_seconds(cpu)


def test_dask_worker_processes_run_the_real_runner(tmp_path: Path, monkeypatch) -> None:
    """Two cells on a two-process LocalCluster through ckptbench.measure.runner (fake worker)."""
    distributed = pytest.importorskip("distributed")
    from ckptbench.measure.runner import run_case

    fake_cell = functools.partial(run_case, worker=[sys.executable, str(TESTS / "fake_worker.py")])
    config = _config(
        "[case]\nmodel = 'rnn'\nsteps = 20\nrepeats = 2\nrounds = 1\n[grid]\nsnaps = [3, 4]\n"
    )
    with distributed.LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=True,
        host="127.0.0.1",
        dashboard_address=None,
    ) as cluster:
        outcome = run_sweep(
            config, tmp_path, run_cell=fake_cell, dask_address=cluster.scheduler_address
        )
    assert outcome.exit_code == 0, outcome.summary_lines()
    results = [load_result(p) for p in outcome.result_paths]
    assert [r.case for r in results] == list(config.cases)
    assert all(r.ok and len(r.modes) == 3 and r.host == socket.gethostname() for r in results)
    assert all(c.worker.startswith("tcp://127.0.0.1:") for c in outcome.cells)


def test_dask_cluster_without_workers_is_a_sweep_error(tmp_path: Path) -> None:
    distributed = pytest.importorskip("distributed")
    with (
        distributed.LocalCluster(
            n_workers=0,
            processes=False,
            host="127.0.0.1",
            protocol="tcp://",
            dashboard_address=None,
        ) as cluster,
        pytest.raises(SweepError, match="has no workers"),
    ):
        run_sweep(
            _config(),
            tmp_path / "out",
            run_cell=FakeCells(),
            dask_address=cluster.scheduler_address,
            dask_timeout_s=0.5,  # how long to wait for a first worker
        )
    assert not (tmp_path / "out").exists()  # checked before the folder was created


GPU_DEFAULT_TEXT = """
name = "gpu-default"
[case]
backend = "torch"
device = "cuda"
model = "rnn"
steps = 20
hidden = 8
repeats = 3
[grid]
strategy = ["revolve", "torch-checkpoint"]
"""


def test_a_result_from_before_a_default_executor_changed_is_not_read_as_the_new_ones(
    tmp_path: Path, monkeypatch
) -> None:
    """A case saved without --executor ran the default of its day (its environment says
    which). If the default changes, that result must not become the new default's cell."""
    from ckptbench.results import schema

    ours, peer = _config(GPU_DEFAULT_TEXT).cases
    for case in (ours, peer):  # (synthetic figures: the peer's are Revolve's)
        ran = replace(make_result(ours), case=case, environment={"executor": "engine"})
        save_result(ran, cell_path(tmp_path, case))
    assert load_result(cell_path(tmp_path, ours)).case == ours  # today's default: as saved
    run_sweep(_config(GPU_DEFAULT_TEXT), tmp_path, resume=True, run_cell=FakeCells())

    real = schema.default_executor
    monkeypatch.setattr(
        schema, "default_executor", lambda b, d: "one-call" if b == "torch" else real(b, d)
    )
    saved = load_result(cell_path(tmp_path, ours)).case
    assert saved.executor_used == "engine" and "-engine-" in saved.key
    assert load_result(cell_path(tmp_path, peer)).case == peer  # a peer runs no executor of ours
    fake = FakeCells()
    outcome = run_sweep(_config(GPU_DEFAULT_TEXT), tmp_path, resume=True, run_cell=fake)
    assert [c.state for c in outcome.cells] == [CellState.CONFLICT, CellState.KEPT]
    assert fake.calls == [] and "-engine-" in outcome.cells[0].error


EXECUTORS_BY_PEERS_TEXT = """
name = "executors-by-peers"
[case]
model = "lstm"
backend = "torch"
steps = 20
snaps = 4
hidden = 8
[grid]
strategy = ["revolve", "torch-checkpoint"]
executor = ["engine", "one-call"]
"""


def test_a_peer_crossed_with_executors_is_one_cell_recorded_without_one() -> None:
    """An executor is how our schedules run; torch's own checkpointing runs none of ours, so
    crossing it with two executors is one peer cell (not two measurements of one thing)."""
    config = _config(EXECUTORS_BY_PEERS_TEXT)
    cells = sorted((c.strategy, c.executor) for c in config.cases)
    assert cells == [("revolve", "engine"), ("revolve", "one-call"), ("torch-checkpoint", None)]
    assert any("2 grid cell(s) recorded without it" in n for n in config.notes)
    assert any("1 duplicate grid cell(s) measured once" in n for n in config.notes)
    assert not any("snaps clamped" in n for n in config.notes)


def test_run_force_never_replaces_a_cell_file_the_sweep_lists(tmp_path: Path) -> None:
    """`run --force --out FOLDER/<cell>.json` destroyed a sweep's measured cell with another
    case's result (the manifest itself was already refused); `check` then exited 2."""
    from ckptbench.cli.options import InputError
    from ckptbench.cli.outputs import check_out

    config = _config()
    run_sweep(config, tmp_path, run_cell=FakeCells())
    cell = cell_path(tmp_path, config.cases[0])
    with pytest.raises(InputError, match=f"is cell {config.cases[0].key} of the sweep"):
        check_out(cell, True)
    loose = tmp_path / "mine.json"  # a result of the user's own in that folder: --force works
    save_result(load_result(cell), loose)
    check_out(loose, True)


def test_no_output_takes_the_path_of_a_listed_cell_without_its_file(tmp_path: Path) -> None:
    """A cell the manifest lists with no file yet (an error, a stopped sweep's pending cell)
    is `sweep --resume`'s to measure: `run --out` there made `compare` and `check` refuse the
    whole folder (the file held another cell's result), and so would a side output."""
    from click.testing import CliRunner

    from ckptbench.cli import cli
    from ckptbench.cli.options import InputError
    from ckptbench.cli.outputs import check_out

    config = _config()
    lost = config.cases[1]
    run_sweep(config, tmp_path, run_cell=FakeCells(raise_on={lost.key}))
    cell = cell_path(tmp_path, lost)
    assert not cell.exists() and lost.key in {c["key"] for c in _manifest(tmp_path)["cells"]}
    for force in (False, True):
        with pytest.raises(InputError, match=f"is cell {lost.key} of the sweep"):
            check_out(cell, force)
    src = cell_path(tmp_path, config.cases[0])
    res = CliRunner().invoke(cli, ["compare", str(src), "-o", str(cell)])
    assert res.exit_code == 2 and f"is cell {lost.key} of the sweep" in res.output
    assert not cell.exists()
    check_out(tmp_path / "mine.json", False)  # a name the manifest does not list is free
    fake = FakeCells()
    outcome = run_sweep(config, tmp_path, resume=True, run_cell=fake)
    assert fake.calls == [lost.key] and outcome.exit_code == 0
    assert load_result(cell).case == lost
