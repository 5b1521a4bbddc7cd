"""``ckptbench sweep --dask`` when a worker, the scheduler or the user stops it.

The slow tests run a real ``distributed`` LocalCluster (worker processes with nannies, one
thread each, 127.0.0.1 only) in a process of its own (``_dask_cluster.py``), and ckptbench
as a subprocess, as a user would; the cells are tiny real rnn cells. Nothing here asserts
on wall-clock time: the timeouts only keep a broken run from hanging the suite.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from _cli import MAIN_AS_IN_A_TERMINAL
from test_sweep import FakeCells

from ckptbench.measure.launch import default_worker_command
from ckptbench.results.schema import Status
from ckptbench.results.store import load_result
from ckptbench.sweep.cells import Attempt, CellOutcome
from ckptbench.sweep.cluster import DaskError, WorkerInfo, parse_address
from ckptbench.sweep.config import parse_config
from ckptbench.sweep.progress import ProgressTracker, estimated_seconds
from ckptbench.sweep.run import MANIFEST_NAME, CellState, SweepError, SweepProgress, run_sweep

TESTS = Path(__file__).resolve().parent
SAFETY_TIMEOUT_S = 300  # only to avoid hanging the suite; never asserted on
WORKER_MODULE = default_worker_command()[-1]  # the measurement process: python -P -m THIS

#: Tiny real cells: each mode runs long enough (a few hundred ms) to be caught mid-cell.
CELLS = """
name = "dk"
[case]
model = "rnn"
steps = 40
hidden = 8
input = 4
batch = 2
warmup = 0
repeats = 30
rounds = 1
[grid]
snaps = [3, 4]
"""


# --------------------------------------------------------------------------- fast checks


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("127.0.0.1:8786", "tcp://127.0.0.1:8786"),
        ("tcp://scheduler:8786", "tcp://scheduler:8786"),
        ("tls://[::1]:8786", "tls://[::1]:8786"),
    ],
)
def test_addresses_are_parsed_without_distributed(text: str, expected: str) -> None:
    assert parse_address(text) == expected


@pytest.mark.parametrize("text", ["http://127.0.0.1:8786", "tcp://127.0.0.1", "nonsense", "h:0"])
def test_a_malformed_address_is_one_line(text: str) -> None:
    with pytest.raises(DaskError) as err:
        parse_address(text)
    assert "\n" not in str(err.value) and text in str(err.value)


def test_a_malformed_address_exits_2_before_the_folder_exists(tmp_path: Path) -> None:
    config = tmp_path / "dk.toml"
    config.write_text(CELLS)
    for address in ("http://127.0.0.1:8786", "tcp://127.0.0.1", "nonsense"):
        out = tmp_path / "out"
        proc = subprocess.run(
            [sys.executable, "-m", "ckptbench", "sweep", str(config), "--out", str(out),
             "--dask", address],
            capture_output=True, text=True, timeout=SAFETY_TIMEOUT_S,
        )  # fmt: skip
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.strip().count("\n") == 0, proc.stderr  # one line, no traceback
        assert proc.stderr.startswith("ckptbench: error: --dask") and address in proc.stderr
        assert not out.exists()


def test_workers_that_cannot_run_the_cells_are_named() -> None:
    import ckptbench

    here = ckptbench.__version__
    py = "{}.{}.0".format(*sys.version_info[:2])
    ok = WorkerInfo("tcp://a:1", "h", py, here, {"autograd": "1.7", "torch": None})
    assert ok.problem({"autograd"}) is None
    assert "cannot import torch" in (ok.problem({"autograd", "torch"}) or "")
    assert "not installed" in (WorkerInfo("tcp://b:1", "h", py, None).problem(()) or "")
    assert "ckptbench 0.0.1" in (WorkerInfo("tcp://c:1", "h", py, "0.0.1").problem(()) or "")
    assert "Python 2.7.18" in (WorkerInfo("tcp://d:1", "h", "2.7.18", here).problem(()) or "")
    lost = WorkerInfo.from_probe("tcp://e:1", OSError("gone"))
    assert lost.problem(()) is not None


def test_a_peers_own_package_is_required_of_the_workers() -> None:
    """equinox's loop needs equinox on the worker, not only jax: a worker without it was
    admitted, and every equinox cell then failed there."""
    from ckptbench.results.schema import Case
    from ckptbench.sweep.cluster import requirements

    eqx = Case(model="lstm", steps=4, snaps=2, backend="jax", strategy="equinox")
    assert "equinox" in requirements([eqx]) and "jax" in requirements([eqx])
    assert "equinox" not in requirements([Case(model="lstm", steps=4, snaps=2, backend="jax")])


def test_progress_counts_cells_in_flight_and_shares_the_eta_among_workers() -> None:
    config = parse_config(CELLS, source="dk.toml")
    a, b = config.cases
    events: list[SweepProgress] = []
    tracker = ProgressTracker(events.append, [a, b, a, b], time.monotonic(), workers=2)
    tracker.cell_start(a)
    tracker.cell_start(b)
    assert events[-1].line().startswith(f"[0/4 done, 2 running] {b.key} started")
    tracker.cell_retry(b, "Dask worker tcp://x:1 left before the cell finished")
    assert "lost (Dask worker tcp://x:1 left" in events[-1].line()
    tracker.cell_start(b, attempt=2)
    assert events[-1].line().endswith("started (attempt 2)")
    tracker.cell_done(CellOutcome(a, Path("a.json"), CellState.MEASURED, duration_s=10.0))
    # 10 s for one cell's work; three cells' work left, shared by two workers
    done = events[-1]
    assert done.line().startswith("[1/4 done, 1 running]")
    cost = estimated_seconds(a)  # the weight the sweep's up-front total uses
    left = tracker.cost_total - cost
    assert done.eta_s == pytest.approx(10.0 / cost * left / 2)


def test_resume_keeps_who_measured_each_kept_cell_and_when_the_sweep_started(
    tmp_path: Path,
) -> None:
    config = parse_config(CELLS, source="dk.toml")
    run_sweep(config, tmp_path, run_cell=FakeCells())
    manifest = tmp_path / MANIFEST_NAME
    doc = json.loads(manifest.read_text())
    record = Attempt("tcp://10.0.0.7:4242", "node7", 12.5, None).to_dict()
    for cell in doc["cells"]:  # as a Dask sweep records them
        cell.update(worker=record["worker"], duration_s=12.5, attempts=[record])
    doc["started"] = "2026-01-01T00:00:00+00:00"
    manifest.write_text(json.dumps(doc))
    (tmp_path / f"{config.cases[1].key}.json").unlink()
    outcome = run_sweep(config, tmp_path, resume=True, run_cell=FakeCells())
    after = json.loads(manifest.read_text())
    kept, measured = after["cells"]
    assert kept["state"] == "kept" and measured["state"] == "measured"
    assert kept["worker"] == "tcp://10.0.0.7:4242" and kept["duration_s"] == 12.5
    assert kept["attempts"] == [record] and kept["host"]
    assert after["started"] == "2026-01-01T00:00:00+00:00" and len(after["resumed"]) == 1
    assert outcome.exit_code == 0


def test_compare_names_cells_the_manifest_lists_but_the_folder_lacks(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from ckptbench.cli import cli

    config = parse_config(CELLS, source="dk.toml")
    run_sweep(config, tmp_path, run_cell=FakeCells())
    lost = config.cases[0].key
    (tmp_path / f"{lost}.json").unlink()
    for fmt in ("table", "markdown", "html"):
        res = CliRunner().invoke(cli, ["compare", str(tmp_path), "--format", fmt])
        assert res.exit_code == 0, res.output
        assert lost in res.output and "sweep manifest" in res.output


# --------------------------------------------------------------------------- a real cluster


class Cluster:
    """``_dask_cluster.py`` running: its scheduler address, its pid, the worker pids."""

    def __init__(self, n: int = 2, cwd: Path | None = None) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(TESTS / "_dask_cluster.py"), str(n)],
            cwd=cwd,  # the workers' folder, where a relative plug-in path resolves
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            start_new_session=True,
        )
        line = self.proc.stdout.readline()  # type: ignore[union-attr]
        if not line:
            raise RuntimeError("the LocalCluster did not start")
        info = json.loads(line)
        self.address: str = info["address"]
        self.worker_pids: list[int] = sorted(info["workers"].values())
        self.worker_addresses: dict[int, str] = {pid: a for a, pid in info["workers"].items()}
        self.seen: set[int] = set(self.worker_pids)

    def measurements(self) -> list[psutil.Process]:
        """Measurement processes under any Dask worker process seen so far."""
        found = []
        for pid in self.current_workers():
            with contextlib.suppress(psutil.Error):
                for child in psutil.Process(pid).children(recursive=True):
                    with contextlib.suppress(psutil.Error):
                        if child.status() != psutil.STATUS_ZOMBIE and WORKER_MODULE in (
                            child.cmdline()
                        ):
                            found.append(child)
        return found

    def current_workers(self) -> list[int]:
        """Worker processes now (a nanny restarts a killed one under a new pid)."""
        with contextlib.suppress(psutil.Error):
            for child in psutil.Process(self.proc.pid).children():
                self.seen.add(child.pid)
        return [p for p in sorted(self.seen) if psutil.pid_exists(p)]

    def kill(self) -> None:
        """The scheduler disappears: SIGKILL the process that holds it."""
        self.proc.kill()
        self.proc.wait()

    def close(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(BrokenPipeError):
                self.proc.stdin.close()  # type: ignore[union-attr]
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for pid in self.seen:  # whatever outlived its parent
            with contextlib.suppress(psutil.Error):
                for p in [*psutil.Process(pid).children(recursive=True), psutil.Process(pid)]:
                    p.kill()


@contextlib.contextmanager
def cluster(n: int = 2, cwd: Path | None = None) -> Iterator[Cluster]:
    pytest.importorskip("distributed")
    c = Cluster(n, cwd)
    try:
        yield c
    finally:
        c.close()


def _sweep(
    config: Path, out: Path, address: str, *extra: str, ctrl_c: bool = False
) -> subprocess.Popen:
    # ctrl_c: the signals as in a terminal (a CI run as a background job of a shell without
    # job control starts everything with SIGINT ignored, and the test's Ctrl-C reached nothing)
    main = ["-c", MAIN_AS_IN_A_TERMINAL] if ctrl_c else ["-m", "ckptbench"]
    return subprocess.Popen(
        [sys.executable, *main, "sweep", str(config), "--out", str(out),
         "--dask", address, *extra],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def dask_sweep(c: Cluster, config: str, cwd: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    """``ckptbench sweep CONFIG --out out --dask ADDRESS EXTRA...`` run to its end in ``cwd``
    on the cluster ``c``, its output captured."""
    return subprocess.run(
        [sys.executable, "-m", "ckptbench", "sweep", config, "--out", "out",
         "--dask", c.address, *extra],
        cwd=cwd, capture_output=True, text=True, timeout=SAFETY_TIMEOUT_S,
    )  # fmt: skip


def _wait_for(predicate, what: str):
    """Poll until ``predicate()`` is truthy (its value); the limit only stops a hang."""
    deadline = time.monotonic() + SAFETY_TIMEOUT_S
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f"never saw {what}")


def _manifest(out: Path) -> dict:
    return json.loads((out / MANIFEST_NAME).read_text())


@pytest.fixture
def cells(tmp_path: Path) -> Path:
    path = tmp_path / "dk.toml"
    path.write_text(CELLS)
    return path


@pytest.mark.slow
def test_a_cell_whose_worker_dies_is_measured_again_on_another(tmp_path: Path, cells: Path) -> None:
    out = tmp_path / "out"
    with cluster() as c:
        sweep = _sweep(cells, out, c.address)
        victim = _wait_for(c.measurements, "a measurement on a Dask worker")[0]
        worker = next(p for p in victim.parents() if p.pid in c.seen)
        os.kill(worker.pid, signal.SIGKILL)  # the Dask worker process, mid-cell
        stdout, stderr = sweep.communicate(timeout=SAFETY_TIMEOUT_S)
    assert sweep.returncode == 0, stdout + stderr
    assert "Traceback" not in stderr
    doc = _manifest(out)
    assert [cell["state"] for cell in doc["cells"]] == ["measured", "measured"]
    (again,) = [cell for cell in doc["cells"] if len(cell["attempts"]) == 2]
    first, second = again["attempts"]
    assert "left before the cell finished" in first["error"] and second["error"] is None
    assert again["worker"] == second["worker"] != first["worker"]
    result = load_result(out / again["file"])
    assert result.ok and len(result.modes) == 3
    assert result.environment["dask"]["attempts"] == again["attempts"]
    assert "measuring it again" in stderr and "(attempt 2)" in stderr


@pytest.mark.slow
def test_sigint_stops_the_cells_on_the_workers_and_saves_them_as_interrupted(
    tmp_path: Path, cells: Path
) -> None:
    out = tmp_path / "out"
    with cluster() as c:
        sweep = _sweep(cells, out, c.address, ctrl_c=True)
        _wait_for(lambda: len(c.measurements()) == 2, "both workers measuring")
        sweep.send_signal(signal.SIGINT)
        stdout, stderr = sweep.communicate(timeout=SAFETY_TIMEOUT_S)
        left = c.measurements()  # ckptbench has exited: nothing may measure any more
        assert sweep.returncode == 130, stdout + stderr
        assert left == []
        assert "Traceback" not in stderr
        assert "stopped on their Dask workers" in stderr and "--resume" in stderr
        doc = _manifest(out)
        assert all(cell["state"] != "running" for cell in doc["cells"])
        saved = [cell for cell in doc["cells"] if (out / cell["file"]).exists()]
        assert saved, doc["cells"]
        for cell in saved:
            result = load_result(out / cell["file"])
            assert result.modes[-1].status is Status.INTERRUPTED
            assert "interrupted" in cell["error"]
        # a --resume right after finds an idle cluster and measures the rest
        resume = _sweep(cells, out, c.address, "--resume")
        stdout, stderr = resume.communicate(timeout=SAFETY_TIMEOUT_S)
    assert resume.returncode == 0, stdout + stderr
    assert [cell["state"] for cell in _manifest(out)["cells"]] == ["measured", "measured"]
    kept = [p for p in out.iterdir() if p.name.endswith(".replaced")]
    assert len(kept) == len(saved)  # the interrupted parts are kept beside the new files


@pytest.mark.slow
def test_a_scheduler_that_goes_away_ends_the_sweep_in_one_line_and_resume_completes(
    tmp_path: Path, cells: Path
) -> None:
    out = tmp_path / "out"
    with cluster() as c:
        sweep = _sweep(cells, out, c.address)
        _wait_for(c.measurements, "a measurement on a Dask worker")
        c.kill()
        stdout, stderr = sweep.communicate(timeout=SAFETY_TIMEOUT_S)
    assert sweep.returncode == 1, stdout + stderr
    assert "Traceback" not in stderr and "distributed" not in stderr
    ended = [line for line in stdout.splitlines() if "ended early" in line]
    assert len(ended) == 1 and "Dask scheduler" in ended[0] and "went away" in ended[0]
    assert "continue with: ckptbench sweep" in stdout and "--resume" in stdout
    states = [cell["state"] for cell in _manifest(out)["cells"]]
    assert "running" not in states and "error" in states
    with cluster() as c:
        resume = _sweep(cells, out, c.address, "--resume")
        stdout, stderr = resume.communicate(timeout=SAFETY_TIMEOUT_S)
    assert resume.returncode == 0, stdout + stderr
    assert {cell["state"] for cell in _manifest(out)["cells"]} <= {"measured", "kept"}


def test_a_worker_that_cannot_run_the_cells_is_refused_before_the_folder_exists(
    tmp_path: Path, monkeypatch
) -> None:
    distributed = pytest.importorskip("distributed")
    monkeypatch.setattr("ckptbench.sweep.cluster.requirements", lambda cases: {"no_such_package"})
    out = tmp_path / "out"
    with (
        distributed.LocalCluster(
            n_workers=1, processes=False, host="127.0.0.1", protocol="tcp://",
            dashboard_address=None,
        ) as lc,
        pytest.raises(SweepError, match=r"Dask worker tcp://127\.0\.0\.1:\d+ cannot run"),
    ):  # fmt: skip
        run_sweep(parse_config(CELLS, source="dk.toml"), out, dask_address=lc.scheduler_address)
    assert not out.exists()


def test_a_plugin_the_workers_read_differently_is_not_measured(tmp_path: Path) -> None:
    """A relative plug-in path resolves from each worker's folder: a sweep measured the
    workers' plug.py (another SHA-256 than the one checked and recorded here), exit 0."""
    example = (TESTS.parent / "docs" / "examples" / "autograd_rnn.py").read_text()
    here, there = tmp_path / "here", tmp_path / "there"
    here.mkdir()
    there.mkdir()
    (here / "plug.py").write_text(example)
    (there / "plug.py").write_text(example.replace("np.tanh", "np.sin"))
    (here / "p.toml").write_text(
        'name = "p"\n[case]\nmodel = "plug.py:make"\nsteps = 10\nhidden = 4\nwarmup = 0\n'
        "repeats = 1\nrounds = 1\n[grid]\nsnaps = [3]\n"
    )
    with cluster(1, cwd=there) as c:
        proc = dask_sweep(c, "p.toml", here)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "SHA-256" in proc.stdout + proc.stderr and "not measured" in proc.stdout + proc.stderr
    assert sorted(p.name for p in (here / "out").glob("*.json")) == [MANIFEST_NAME]


def test_a_frozen_worker_is_named_not_taken_for_no_workers(tmp_path: Path, cells: Path) -> None:
    """One worker that does not answer (SIGSTOP) made the probe of all of them time out,
    and the sweep said the scheduler 'has no workers' beside a healthy one."""
    with cluster(2) as c:
        frozen = c.worker_pids[0]
        os.kill(frozen, signal.SIGSTOP)
        try:
            proc = _sweep(cells, tmp_path / "out", c.address)
            stdout, stderr = proc.communicate(timeout=SAFETY_TIMEOUT_S)
        finally:
            os.kill(frozen, signal.SIGCONT)
    assert proc.returncode == 2, stdout + stderr
    assert "has no workers" not in stderr
    assert c.worker_addresses[frozen] in stderr and "did not answer" in stderr, stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_a_lone_worker_restarted_by_its_nanny_measures_the_cell_again(
    tmp_path: Path, cells: Path
) -> None:
    """One worker, killed mid-cell: its nanny had it back in about a second, but the sweep
    had already ended ("has no workers left", exit 1); docs/cluster.md says a worker
    restarted by its nanny counts as another."""
    out = tmp_path / "out"
    with cluster(n=1) as c:
        sweep = _sweep(cells, out, c.address)
        victim = _wait_for(c.measurements, "a measurement on a Dask worker")[0]
        worker = next(p for p in victim.parents() if p.pid in c.seen)
        os.kill(worker.pid, signal.SIGKILL)
        stdout, stderr = sweep.communicate(timeout=SAFETY_TIMEOUT_S)
    assert sweep.returncode == 0, stdout + stderr
    doc = _manifest(out)
    assert [cell["state"] for cell in doc["cells"]] == ["measured", "measured"]
    (again,) = [cell for cell in doc["cells"] if len(cell["attempts"]) == 2]
    first, second = again["attempts"]
    assert "left before the cell finished" in first["error"] and second["error"] is None
    assert "no workers left" not in stderr
