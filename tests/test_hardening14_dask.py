"""A Dask sweep whose scheduler restarts, and what a worker's copies of the checked files say.

* A scheduler killed mid-cell and started again on its port read as a lost cell: the client
  reconnects (nothing says the scheduler went away), Dask cancels its futures on reconnect
  ("lost (Dask cancelled the cell ...); measuring it again"), the workers closed with the
  old scheduler, and the sweep ended "has no workers left" with the cell in flight marked
  ``error``. Now the restart is said (its id changed), and that cell is pending, not a
  failed measurement, so ``--resume`` measures it; a worker that joins the new scheduler
  measures it at once.
* A Dask worker without a file the plug-in check loaded said so once per cell; it says so
  once per worker (each result keeps its own note).
* A worker's copy of a checked file that differs from the check's failed the cell's first
  mode with run's "changed before it started", for a copy nobody edited; and the plug-in's
  own file was compared with the digest the submitter read when the cells were sent, not
  the check's. Both now name the worker and the two digests, nothing measured.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from _synthetic import make_result
from test_hardening13_sweepwatch import USES_HELPER, _folder
from test_sweep_dask import CELLS, SAFETY_TIMEOUT_S, _manifest, _wait_for, cluster, dask_sweep

import ckptbench.sweep.cluster as cluster_module
from ckptbench.measure.sources import CheckedSources
from ckptbench.results.schema import result_to_dict
from ckptbench.results.store import MANIFEST_NAME
from ckptbench.sweep.config import parse_config
from ckptbench.sweep.run import CellState, run_sweep

WORKER = "tcp://10.0.0.9:1"
RESTARTED = "restarted (its id changed)"


# --------------------------------------------------------------------------- fakes


class Cancelled(Exception):
    """What distributed raises from a cancelled future (a CancelledError with its reason)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class FakeFuture:
    def __init__(self, case, payload=None) -> None:
        self.case, self.payload, self.status = case, payload, "pending"
        self.reason = ""

    def done(self) -> bool:
        return self.status != "pending"

    def result(self, timeout=None):
        if self.status == "cancelled":
            raise Cancelled(self.reason)
        return self.payload

    def cancel(self) -> None:
        pass


class FakeClient:
    def __init__(self, world: FakeCluster) -> None:
        self.world, self.status = world, "running"

    def submit(self, fn, run_cell, case_data, *args, workers=(), **kwargs):
        case = next(c for c in self.world.cases if c.to_dict() == case_data)
        future = FakeFuture(case)
        self.world.submitted.append((future, workers[0], args))
        self.world.on_submit(future, workers[0])
        return future


class FakeCluster:
    """A cluster whose scheduler restarts while the first cell runs on ``WORKER``: the
    client loses its connection (its futures cancelled, reason given), reconnects, and the
    new scheduler (another id) has ``after`` as its workers."""

    def __init__(self, cases, after=frozenset(), missing=(), restart: bool = True) -> None:
        self.cases, self.after, self.missing, self.restart = (
            cases,
            set(after),
            list(missing),
            restart,
        )
        self.address = "tcp://10.0.0.1:8786"
        self.workers = {WORKER: None}
        self.refused: dict[str, str] = {}
        self.timeout_s = 0.3  # the rejoin wait
        self.client = FakeClient(self)
        self.submitted: list = []
        self.ids = ["Scheduler-old"]
        self.scheduler_id = "Scheduler-old"

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def on_submit(self, future, worker) -> None:
        if self.restart and len(self.submitted) == 1:  # the first cell: the scheduler restarts
            future.status, future.reason = "cancelled", "scheduler-connection-lost"
            self.ids.append("Scheduler-new")
            return
        payload = {"result": result_to_dict(make_result(future.case, seed=1)), "worker": worker,
                   "not_found": self.missing}  # fmt: skip
        future.payload, future.status = payload, "finished"

    def alive(self) -> set[str]:
        return set(self.after) if len(self.ids) > 1 else {WORKER}

    def restarted(self) -> bool:
        now = self.ids[-1]
        changed, self.scheduler_id = now != self.scheduler_id, now
        return changed

    def admit(self, worker: str) -> bool:
        self.workers[worker] = None
        return True

    def host(self, worker: str) -> str:
        return "node"


def _sweep_on(fake: FakeCluster, config, out: Path, monkeypatch):
    monkeypatch.setattr(cluster_module, "connect", lambda *a, **k: fake)
    events: list = []
    outcome = run_sweep(config, out, dask_address=fake.address, progress=events.append)
    return outcome, [e.line() for e in events]


CONFIG = 'name = "dk"\n[case]\nmodel = "rnn"\nsteps = 40\nhidden = 8\n[grid]\nsnaps = [2, 4]\n'


# --------------------------------------------------------------------------- fast


def test_a_restarted_scheduler_is_said_and_its_cell_is_pending_not_an_error(
    tmp_path: Path, monkeypatch
) -> None:
    config = parse_config(CONFIG, source="dk.toml")
    fake = FakeCluster(config.cases)
    outcome, lines = _sweep_on(fake, config, tmp_path / "out", monkeypatch)
    assert outcome.ended_early == (
        f"the Dask scheduler at {fake.address} {RESTARTED} and its workers closed with it: "
        "start workers again and run the sweep with --resume"
    )
    assert not outcome.errors and outcome.exit_code == 1 and outcome.resumable
    first, second = outcome.cells
    assert first.state is CellState.PENDING and second.state is CellState.PENDING
    assert f"{RESTARTED} while the cell ran: not measured" in first.error
    assert "Dask cancelled" not in "\n".join(lines)
    assert any(f"{RESTARTED} while the cell ran" in line and "if a worker joins" in line
               for line in lines)  # fmt: skip
    doc = json.loads((tmp_path / "out" / MANIFEST_NAME).read_text())
    assert [c["state"] for c in doc["cells"]] == ["pending", "pending"]
    assert RESTARTED in doc["cells"][0]["attempts"][0]["error"]


def test_a_worker_that_joins_the_restarted_scheduler_measures_the_cell(
    tmp_path: Path, monkeypatch
) -> None:
    config = parse_config(CONFIG, source="dk.toml")
    fake = FakeCluster(config.cases, after={"tcp://10.0.0.9:2"})
    outcome, _ = _sweep_on(fake, config, tmp_path / "out", monkeypatch)
    assert outcome.ended_early is None and outcome.exit_code == 0
    assert [c.state for c in outcome.cells] == [CellState.MEASURED, CellState.MEASURED]
    first = outcome.cells[0]
    assert RESTARTED in first.attempts[0].error and first.attempts[1].error is None
    assert first.worker == "tcp://10.0.0.9:2"


class LosingCluster(FakeCluster):
    """A cluster whose worker ``WORKER`` leaves mid-cell (its first cell never finishes) and
    ``OTHER`` joins; the manifest is read as each later cell is sent (``seen``). ``fail``:
    the retried try fails too, with a runner error."""

    def __init__(self, cases, out: Path, fail: bool = False) -> None:
        super().__init__(cases, restart=False)
        self.out, self.fail, self.lost = out, fail, False
        self.seen: list[dict] = []

    def on_submit(self, future, worker) -> None:
        if not self.lost:  # the first cell: its worker leaves, the future never finishes
            self.lost = True
            return
        self.seen.append(json.loads((self.out / MANIFEST_NAME).read_text()))
        if self.fail and len(self.submitted) == 2:
            future.status, future.reason = "error", ""
            future.result = lambda timeout=None: (_ for _ in ()).throw(OSError("disk gone"))
            return
        super().on_submit(future, worker)

    def alive(self) -> set[str]:
        return {OTHER} if self.lost else {WORKER}


OTHER = "tcp://10.0.0.9:2"
LEFT = f"Dask worker {WORKER} left before the cell finished"


@pytest.mark.parametrize("fail", [False, True], ids=["retry-measures", "retry-fails"])
def test_a_cell_whose_worker_left_is_retrying_not_an_error_until_its_final_outcome(
    tmp_path: Path, monkeypatch, fail: bool
) -> None:
    """A cell whose worker left was queued again with the lost worker's reason as its
    ``error``: the manifest said of a cell pending (then running again, and perhaps about to
    succeed) that it failed. It is retrying: its error stays empty until its final outcome,
    and the lost try is kept in its attempts from the moment it is lost."""
    config = parse_config(CONFIG, source="dk.toml")
    out = tmp_path / "out"
    fake = LosingCluster(config.cases, out, fail=fail)
    outcome, lines = _sweep_on(fake, config, out, monkeypatch)
    retried = fake.seen[0]["cells"][0]  # as the manifest said while its retry ran
    assert retried["state"] == "running" and retried["error"] is None, retried
    assert retried["remeasure_reason"] == f"retrying: attempt 1 lost ({LEFT}); measuring it again"
    assert [(a["worker"], a["error"]) for a in retried["attempts"]] == [(WORKER, LEFT)]
    assert any(f"lost ({LEFT}); measuring it again" in line for line in lines)
    first = json.loads((out / MANIFEST_NAME).read_text())["cells"][0]
    assert [(a["worker"], a["error"]) for a in first["attempts"]] == [
        (WORKER, LEFT), (OTHER, "OSError: disk gone" if fail else None)
    ]  # fmt: skip
    assert first["remeasure_reason"] is None
    if fail:  # its own outcome is its error, never the lost worker's
        assert (first["state"], first["error"]) == ("error", "OSError: disk gone")
        assert outcome.exit_code == 1
    else:
        assert (first["state"], first["error"]) == ("measured", None)
        assert outcome.exit_code == 0


def test_the_cluster_says_when_its_scheduler_was_restarted() -> None:
    class Client:
        def __init__(self) -> None:
            self.ids = ["Scheduler-a", "Scheduler-a", "Scheduler-b", "Scheduler-b"]

        def scheduler_info(self, n_workers=-1):
            return {"id": self.ids.pop(0), "workers": {}}

    c = cluster_module.Cluster("tcp://h:1", Client(), {}, set(), 1.0, contextlib.ExitStack())
    c.scheduler_id = c.ask_id()
    assert [c.restarted(), c.restarted(), c.restarted()] == [False, True, False]


def test_a_note_of_a_dask_worker_is_said_once_per_worker(tmp_path: Path, monkeypatch) -> None:
    config = parse_config(
        'name = "dk"\n[case]\nmodel = "rnn"\nsteps = 40\nhidden = 8\n[grid]\nsnaps = [2, 3, 4]\n',
        source="dk.toml",
    )
    fake = FakeCluster(config.cases, missing=("h/helper.py",), restart=False)
    outcome, _ = _sweep_on(fake, config, tmp_path / "out", monkeypatch)
    said = [n for n in outcome.notes if "has no h/helper.py" in n]
    assert len(said) == 1, outcome.notes
    assert said[0].startswith(f"{config.cases[0].key} and 2 more cell(s) measured there: ")
    assert f"Dask worker {WORKER} has no h/helper.py" in said[0]
    for cell in outcome.cells:  # every result keeps its own
        doc = json.loads(cell.path.read_text())
        assert doc["environment"]["dask"]["notes"] == [said[0].split(": ", 1)[1]]


def test_the_plugin_digest_sent_to_workers_is_the_checks(tmp_path: Path, monkeypatch) -> None:
    """_same_plugin compared the worker's plug-in with the digest read when the cells were
    sent: an edit here between the check and then went by as the 'same' plug-in."""
    from ckptbench.results.schema import Case
    from ckptbench.sweep.onworker import plugin_digest, same_plugin

    monkeypatch.chdir(tmp_path)
    (tmp_path / "uses.py").write_text(USES_HELPER.replace("EDIT", "-1"))
    case = Case(model="uses.py:make", steps=10, snaps=3, hidden=8)
    at_check = "a" * 64
    checked = CheckedSources(((str(tmp_path / "uses.py"), at_check),), total=1)
    assert plugin_digest(case, checked) == (at_check, True)
    now = hashlib.sha256((tmp_path / "uses.py").read_bytes()).hexdigest()
    assert plugin_digest(case, None) == (now, False)
    with pytest.raises(RuntimeError) as err:
        same_plugin(case.model, at_check, "tcp://w:1", at_check=True)
    assert str(err.value).startswith(
        "the plug-in's file uses.py differs on Dask worker tcp://w:1 from the file the plug-in "
        f"check read here (SHA-256 {at_check[:12]} at the check, {now[:12]} there): not measured"
    )


# --------------------------------------------------------------------------- measured


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Processes:
    """The scheduler and worker processes a test starts, by the pids it saved."""

    def __init__(self, port: int) -> None:
        self.port, self.address = port, f"tcp://127.0.0.1:{port}"
        self.started: list[subprocess.Popen] = []

    def _start(self, *args: str) -> subprocess.Popen:
        proc = subprocess.Popen([sys.executable, "-m", *args], stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
        self.started.append(proc)
        return proc

    def scheduler(self) -> subprocess.Popen:
        proc = self._start("distributed.cli.dask_scheduler", "--host", "127.0.0.1", "--port",
                           str(self.port), "--no-dashboard")  # fmt: skip

        def accepts() -> bool:
            with socket.socket() as s:
                return s.connect_ex(("127.0.0.1", self.port)) == 0

        _wait_for(accepts, "the scheduler listening")
        return proc

    def worker(self) -> subprocess.Popen:
        return self._start("distributed.cli.dask_worker", self.address, "--nworkers", "1",
                           "--nthreads", "1", "--no-dashboard")  # fmt: skip

    def measurements(self) -> list[psutil.Process]:
        found = []
        for proc in self.started:
            with contextlib.suppress(psutil.Error):
                for child in psutil.Process(proc.pid).children(recursive=True):
                    with contextlib.suppress(psutil.Error):
                        if "ckptbench.measure.worker" in child.cmdline():
                            found.append(child)
        return found

    def close(self) -> None:
        for proc in reversed(self.started):
            with contextlib.suppress(psutil.Error):
                children = psutil.Process(proc.pid).children(recursive=True)
                for p in [*children, psutil.Process(proc.pid)]:
                    p.kill()
            with contextlib.suppress(OSError):
                proc.wait(30)


@contextlib.contextmanager
def processes() -> Iterator[Processes]:
    pytest.importorskip("distributed")
    procs = Processes(_free_port())
    try:
        yield procs
    finally:
        procs.close()


@pytest.mark.slow
def test_a_scheduler_restarted_on_its_port_mid_cell_leaves_the_cell_pending_for_resume(
    tmp_path: Path,
) -> None:
    config = tmp_path / "dk.toml"
    config.write_text(CELLS.replace("snaps = [3, 4]", "snaps = [2, 3, 4]"))
    out = tmp_path / "out"
    with processes() as p:
        first = p.scheduler()
        p.worker()
        sweep = subprocess.Popen(
            [sys.executable, "-m", "ckptbench", "sweep", str(config), "--out", str(out),
             "--dask", p.address],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        saved = _wait_for(lambda: [f for f in out.glob("rnn-*.json")], "a first cell saved")
        before = {f.name: f.read_bytes() for f in saved}
        _wait_for(p.measurements, "the next cell measuring")
        os.kill(first.pid, signal.SIGKILL)  # the scheduler, mid-cell
        first.wait()
        time.sleep(1.0)
        p.scheduler()  # again, on the same port
        stdout, stderr = sweep.communicate(timeout=SAFETY_TIMEOUT_S)
        assert sweep.returncode == 1, stdout + stderr
        assert "Traceback" not in stderr and "Dask cancelled" not in stdout + stderr
        (ended,) = [line for line in stdout.splitlines() if "ended early" in line]
        assert f"the Dask scheduler at {p.address} {RESTARTED} and its workers closed" in ended
        assert "start workers again and run the sweep with --resume" in ended
        cells = _manifest(out)["cells"]
        assert "error" not in [c["state"] for c in cells], (cells, stdout, stderr)
        restarted = [c for c in cells if c["state"] == "pending" and c["error"]]
        assert len(restarted) == 1 and RESTARTED in restarted[0]["error"]
        assert all((out / name).read_bytes() == data for name, data in before.items())
        p.worker()  # workers again, then --resume measures the rest
        resume = subprocess.run(
            [sys.executable, "-m", "ckptbench", "sweep", str(config), "--out", str(out),
             "--dask", p.address, "--resume"],
            capture_output=True, text=True, timeout=SAFETY_TIMEOUT_S,
        )  # fmt: skip
    assert resume.returncode == 0, resume.stdout + resume.stderr
    cells = _manifest(out)["cells"]
    assert {c["state"] for c in cells} <= {"measured", "kept"}
    assert all((out / name).read_bytes() == data for name, data in before.items())


@pytest.mark.slow
def test_a_workers_copy_of_a_checked_helper_that_differs_is_named_not_changed(
    tmp_path: Path,
) -> None:
    """The worker's folder has its own h/helper.py with other content: nobody edited it, yet
    the cell failed with "changed before it started"."""
    here, there = tmp_path / "here", tmp_path / "there"
    _folder(here, edit=-1, snaps="[3]")
    (there / "h").mkdir(parents=True)
    (here / "h").mkdir()
    (here / "helper.py").rename(here / "h" / "helper.py")
    (there / "h" / "helper.py").write_text("SCALE = 0.5\n")
    for folder in (here, there):
        (folder / "helpers_dir.txt").write_text("h")
    (there / "uses.py").write_text((here / "uses.py").read_text())
    with cluster(1, cwd=there) as c:
        proc = dask_sweep(c, "w.toml", here, "-q")
        worker = c.worker_addresses[c.worker_pids[0]]
    assert proc.returncode == 1, proc.stdout + proc.stderr
    text = proc.stdout + proc.stderr
    assert "changed before it started" not in text
    old = hashlib.sha256(b"SCALE = 1.0\n").hexdigest()[:12]
    new = hashlib.sha256(b"SCALE = 0.5\n").hexdigest()[:12]
    assert (
        f"h/helper.py differs on Dask worker {worker} from the file the plug-in check read "
        f"here (SHA-256 {old} at the check, {new} there): not measured"
    ) in text
    assert sorted(p.name for p in (here / "out").glob("*.json")) == [MANIFEST_NAME]
